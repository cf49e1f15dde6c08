"""Block plans hold every op a block runs (layout copies, residual adds, RoPE, the KV-cache append,
Mamba's A = -exp(A_log), Mamba-3's pre-processing, the backward copies and recomputation of the fused
paths), and each new rule is exactly what its eager PyTorch form dispatches (aten kernels and their
bytes traced on the CPU) or a hand formula."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from ssmbench.analytic.ops.attention import ref as attn_ref  # noqa: E402
from ssmbench.analytic.ops.elementwise import ref as ew  # noqa: E402
from ssmbench.analytic.ops.mamba3.ref import mamba3_prep_ref  # noqa: E402
from ssmbench.analytic.registry import cost  # noqa: E402
from ssmbench.analytic.workloads.blocks import block_calls, block_cost, composed_bound  # noqa: E402
from ssmbench.analytic.workloads.models import get_model  # noqa: E402
from ssmbench.analytic.workloads.phases import plan  # noqa: E402
from ssmbench.hwspecs import get_spec  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from test_ops_basic_torch import KernelTrace, _assert_trace_matches  # noqa: E402

DT = {"bf16": torch.bfloat16, "fp32": torch.float32}
B_, L_, D_ = 2, 3, 8


class AllOps(TorchDispatchMode):
    """Every aten op dispatched (in-place ones included, which KernelTrace takes for views)."""

    def __init__(self):
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(str(func))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("dtype", DT)
@pytest.mark.parametrize("op, impl, fn, n_in", [
    ("copy", "torch_eager", ew.copy_ref, 1),
    ("cast", "to_fp32", ew.cast_ref, 1),
    ("add", "torch_eager", ew.add_ref, 2),
])
def test_plumbing_forward_is_what_the_eager_form_dispatches(dtype, op, impl, fn, n_in):
    xs = [torch.randn(B_, L_, D_, dtype=DT[dtype]) for _ in range(n_in)]
    with torch.no_grad(), KernelTrace() as trace:
        fn(*xs)
    _assert_trace_matches(trace, cost(op, {"B": B_, "L": L_, "D": D_}, impl=impl, mode="fwd", dtype=dtype))


def test_cast_backward_and_the_residual_gradient_accumulation():
    x = torch.randn(B_, L_, D_, dtype=torch.bfloat16, requires_grad=True)
    y = ew.cast_ref(x)
    dy = torch.randn_like(y)
    with KernelTrace() as trace:
        torch.autograd.grad(y, x, dy)
    _assert_trace_matches(trace, cost("cast", {"B": B_, "L": L_, "D": D_}, impl="to_fp32", mode="bwd", dtype="bf16"))
    # x + f(x): the gradient reaching x from both paths is summed by one add (f = x * 2 adds its mul)
    x = torch.randn(B_, L_, D_, requires_grad=True)
    y = ew.add_ref(x, x * 2)
    dy = torch.randn_like(y)
    with KernelTrace() as trace:
        torch.autograd.grad(y, x, dy)
    adds = [k for k in trace.kernels if k[0].startswith("aten.add")]
    c = cost("add", {"B": B_, "L": L_, "D": D_}, mode="bwd", dtype="fp32")
    assert [(len(adds), adds[0][1], adds[0][2])] == [(int(c.launches), int(c.executed_read), int(c.executed_written))]


@pytest.mark.parametrize("dtype", DT)
@pytest.mark.parametrize("impl, param_dtype", [("fp32_param", "fp32"), ("cast_param", None)])
def test_a_from_log_forward_and_backward(dtype, impl, param_dtype):
    dt = DT[param_dtype or dtype]
    E_, N_ = 6, 4
    a_log = torch.randn(E_, N_, dtype=dt, requires_grad=True)
    with torch.no_grad(), KernelTrace() as trace:
        ew.a_from_log_ref(a_log)
    _assert_trace_matches(trace, cost("a_from_log", {"E": E_, "N": N_}, impl=impl, mode="fwd", dtype=dtype))
    a = ew.a_from_log_ref(a_log)
    da = torch.randn_like(a)
    with KernelTrace() as trace:
        torch.autograd.grad(a, a_log, da)
    _assert_trace_matches(trace, cost("a_from_log", {"E": E_, "N": N_}, impl=impl, mode="bwd", dtype=dtype))


def test_mamba3_prep_is_the_modules_eager_preprocessing():
    B, L, H, N = 2, 3, 4, 16
    S = N // 4
    ins = (torch.randn(B, L, H, dtype=torch.bfloat16, requires_grad=True),
           torch.randn(B, L, H, dtype=torch.bfloat16, requires_grad=True),
           torch.randn(H, requires_grad=True), torch.randn(B, L, S, dtype=torch.bfloat16, requires_grad=True))
    dims = {"B": B, "L": L, "H": H, "N": N}
    with torch.no_grad(), KernelTrace() as trace:
        mamba3_prep_ref(*ins)
    c = cost("mamba3_prep", dims, mode="fwd", dtype="bf16")
    # the angle cast reads its [B, L, S] input through a broadcast over H: the trace counts the expanded
    # view's H copies, device memory sees one (the rest comes from cache)
    broadcast_rereads = B * L * S * (H - 1) * 2
    assert (len(trace.kernels), trace.read - broadcast_rereads, trace.written) == \
        (int(c.launches), int(c.executed_read), int(c.executed_written)), trace.kernels
    outs = mamba3_prep_ref(*ins)
    grads = [torch.randn_like(o) for o in outs]
    with KernelTrace() as trace:
        torch.autograd.grad(outs, ins, grads)
    _assert_trace_matches(trace, cost("mamba3_prep", dims, mode="bwd", dtype="bf16"))


def test_kv_append_index_copy_is_two_copies_and_rope_counts_three_flops_per_element():
    B, G, S, P, L = 2, 2, 7, 8, 1
    kc, vc = torch.zeros(B, G, S, P), torch.zeros(B, G, S, P)
    k, v = torch.randn(B, G, L, P), torch.randn(B, G, L, P)
    with AllOps() as ops:
        attn_ref.kv_append_ref(kc, vc, k, v, 3)
    assert sum(n.startswith("aten.copy_") for n in ops.names) == 2
    c = cost("kv_append", {"B": B, "G": G, "P": P}, impl="index_copy", mode="decode", dtype="bf16", kv_dtype="fp8")
    assert (c.launches, c.write["kv_cache"], c.read["activations"]) == (2, 2 * B * G * P * 1, 2 * B * G * P * 2)
    assert cost("kv_append", {"B": B, "G": G, "P": P}, impl="fused", mode="decode", dtype="bf16").launches == 1
    H = 4
    r = cost("rope", {"B": B, "L": 5, "H": H, "G": G, "P": P}, mode="fwd", dtype="bf16")
    assert (r.launches, r.vector) == (1, 3 * B * 5 * (H + G) * P)  # per pair 4 mul + 2 add
    q, kk = torch.randn(B, 5, H, P, dtype=torch.float64), torch.randn(B, 5, G, P, dtype=torch.float64)
    ang = torch.randn(B, 5, P // 2, dtype=torch.float64)
    q2, k2 = attn_ref.rope_ref(q, kk, ang.cos(), ang.sin(), True)
    q3, _ = attn_ref.rope_ref(q2, k2, ang.cos(), -ang.sin(), True)
    torch.testing.assert_close(q3, q)  # a rotation, undone by its inverse
    torch.testing.assert_close(q2.norm(dim=-1), q.norm(dim=-1))


def test_the_mamba1_fast_paths_layout_copies_are_real_copies():
    """mamba_inner_fn: W @ x^T reads x in place; the conv output's (b l) d rows copy only when b > 1;
    B and C made [b, 1, n, l] contiguous copy; F.linear of the transposed scan output does not copy."""
    d, e, n, l = 4, 8, 3, 5
    w_in, w_x, w_out = torch.randn(2 * e, d), torch.randn(n, e), torch.randn(d, e)
    for b in (1, 3):
        x = torch.randn(b, l, d)
        with torch.no_grad(), KernelTrace() as t:
            w_in @ x.permute(2, 0, 1).reshape(d, b * l)
        assert [k[0] for k in t.kernels] == ["aten.mm.default"]
        conv_out = torch.randn(b, e, l)
        with torch.no_grad(), KernelTrace() as t:
            F.linear(conv_out.transpose(1, 2).reshape(b * l, e), w_x)
        assert [k[0] for k in t.kernels] == (["aten.clone.default"] if b > 1 else []) + ["aten.mm.default"]
        x_dbl = torch.randn(b * l, 2 + 2 * n)
        with torch.no_grad(), KernelTrace() as t:
            x_dbl[:, 2:2 + n].reshape(b, l, 1, n).permute(0, 2, 3, 1).contiguous()
        assert [(k[0], k[2]) for k in t.kernels] == [("aten.clone.default", b * l * n * 4)]
        with torch.no_grad(), KernelTrace() as t:
            F.linear(conv_out.transpose(1, 2), w_out)
        assert "aten.clone.default" not in [k[0] for k in t.kernels]


def _labels(op, dims, mode, impl=None):
    return [c.label.removeprefix("b.") for c, _ in block_calls(op, dims, impl=impl, mode=mode)]


def test_block_plans_list_every_op_the_measured_modules_run():
    m1 = {"B": 2, "L": 64, "D": 64, "N": 16}
    assert _labels("block:mamba1", m1, "fwd") == ["in_proj", "A", "dt_bias_fp32", "conv1d", "conv_out_rows", "x_proj",
                                                  "bc_contiguous", "dt_proj", "scan", "out_proj"]
    assert "conv_out_rows" not in _labels("block:mamba1", {**m1, "B": 1}, "fwd")  # a view for one sequence
    assert _labels("block:mamba1", m1, "fwdbwd")[-4:] == ["conv1d_recompute", "dt_proj_recompute", "bwd_dbc_copies",
                                                          "bwd_ddelta_copy"]
    assert _labels("block:mamba1", m1, "decode") == ["in_proj", "A", "conv1d", "x_proj", "dt_proj", "scan", "out_proj"]
    m2 = {"B": 1, "L": 256, "D": 128, "N": 16, "P": 32, "G": 1}
    assert _labels("block:mamba2", m2, "fwd") == ["in_proj", "A", "conv1d", "ssd", "gated_norm", "out_proj"]
    assert _labels("block:mamba2", m2, "fwdbwd")[-1] == "conv1d_recompute"
    m3 = {"B": 1, "L": 128, "D": 128, "N": 16, "P": 32}
    assert _labels("block:mamba3", m3, "fwd") == ["in_proj", "prep", "bc_norm", "mamba3", "out_proj"]
    assert _labels("block:mamba3", m3, "fwdbwd")[-1] == "in_proj_split_bwd"
    at = {"B": 1, "L": 16, "D": 64, "H": 4, "G": 2, "P": 16, "S": 32}
    assert _labels("block:attention", at, "fwd", "sdpa") == ["qkv_proj", "attention", "o_proj"]  # no cache, no RoPE
    assert _labels("block:attention", at, "decode", "sdpa") == ["qkv_proj", "kv_append", "attention", "o_proj"]
    assert _labels("block:attention", at, "fwdbwd", "sdpa")[-1] == "qkv_split_bwd"
    calls = block_calls("block:attention", at, impl="sdpa", mode="decode")
    assert [c.impl for c, _ in calls if c.op == "kv_append"] == ["index_copy"]  # the block indexes its cache
    spec = get_spec("h200-sxm")
    for op, dims, impl in (("block:mamba1", m1, None), ("block:mamba2", m2, None), ("block:attention", at, "sdpa")):
        r = composed_bound(op, dims, spec, impl=impl, mode="fwd")
        assert r["composed_s"] >= r["summed_cost_bound_s"] > 0
        assert float(block_cost(op, dims, impl=impl).launches) == sum(
            float(c.launches) for _, c in block_calls(op, dims, impl=impl))


def test_model_plans_add_the_residual_rope_and_cache_writes():
    llama = get_model("llama-3.2-1b")
    pre = [c.label for c in plan(llama, "prefill")]
    for label in ("attn.rope", "attn.kv_append", "attn.residual", "mlp.residual"):
        assert label in pre
    assert "attn.kv_append" not in [c.label for c in plan(llama, "train")]
    assert "attn.rope" not in [c.label for c in plan(get_model("nemotron-h-8b"), "prefill")]  # no RoPE there
    dec = {c.label: c for c in plan(get_model("mamba2-130m"), "decode")}
    assert dec["mamba.A"].impl == "cast_param" and "mamba.residual" in dec
    assert "mamba.prep" not in [c.label for c in plan(get_model("mamba3-siso-1.5b"), "decode")]


def test_block_gap_script_composes_every_stored_block_case():
    import json
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    cmd = [sys.executable, str(repo / "scripts" / "block_gap.py"), str(repo / "results/h200/2026-12-02/default")]
    r = subprocess.run(cmd + ["--json"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    cases = out["cases"]
    assert len(cases) == 23 and {c["op"] for c in cases} == {"block:mamba1", "block:mamba2", "block:mamba3",
                                                              "block:attention", "block:gated_mlp"}
    for c in cases:
        assert c["composed_bound_s"] >= c["summed_bound_s"] * (1 - 1e-9) > 0
        assert c["composed_bound_s"] == pytest.approx(sum(x["bound_s"] for x in c["calls"]))
    assert out["summary"]["cases"] == 23 and out["summary"]["median_ratio"] > 1
    # the check for an achievable model: fails while the composed figure is a bound far below the measurements
    r = subprocess.run(cmd + ["--max-median-error", "10"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "exceeds 10.0 %" in r.stderr and "median measured / composed bound, all 23" in r.stdout
    # the measurement-composed oracle: every case, each call's source named, its summary printed
    r = subprocess.run(cmd + ["--ops", "measured", "--json"], capture_output=True, text=True, timeout=180, check=False)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["summary"]["oracle_median_abs_error_pct"] is not None
    for c in out["cases"]:
        assert c["oracle"]["label"].startswith("measurement-composed")
        assert {x["oracle_source"] for x in c["calls"]} <= {"measured", "scaled", "model",
                                                            "model (nearest record host-bound)"}
