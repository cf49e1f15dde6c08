"""The basic op families against PyTorch: reference functions are numerically right, matmul FLOPs
agree with ``torch.utils.flop_counter``, and the ``torch_eager`` implementations' launches and bytes
are exactly what their reference functions dispatch (one aten kernel per non-view op)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from ssmbench.analytic.ops.elementwise import ref as elementwise  # noqa: E402
from ssmbench.analytic.ops.embedding import ref as embedding  # noqa: E402
from ssmbench.analytic.ops.mlp import ref as mlp  # noqa: E402
from ssmbench.analytic.ops.mlp import ref as moe  # noqa: E402
from ssmbench.analytic.ops.norm import ref as norms  # noqa: E402
from ssmbench.analytic.ops.softmax import ref as softmax  # noqa: E402
from ssmbench.analytic.registry import cost  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._pytree import tree_flatten  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


class KernelTrace(TorchDispatchMode):
    """Records every aten op that runs a kernel (views and aliases excluded) with the bytes of its
    tensor inputs and outputs."""

    def __init__(self):
        super().__init__()
        self.kernels: list[tuple[str, int, int]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        ins = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
        outs = [a for a in tree_flatten(out)[0] if isinstance(a, torch.Tensor)]
        storages = {a.untyped_storage().data_ptr() for a in ins}
        if outs and all(o.untyped_storage().data_ptr() in storages for o in outs):
            return out  # a view or alias: no kernel
        nbytes = lambda ts: sum(t.numel() * t.element_size() for t in ts)  # noqa: E731
        self.kernels.append((str(func), nbytes(ins), nbytes(outs)))
        return out

    @property
    def read(self) -> int:
        return sum(k[1] for k in self.kernels)

    @property
    def written(self) -> int:
        return sum(k[2] for k in self.kernels)


def _rand(*shape, dtype=torch.float32, grad=False):
    return torch.randn(*shape, dtype=dtype, requires_grad=grad)


def _assert_trace_matches(trace: KernelTrace, c):
    assert (len(trace.kernels), trace.read, trace.written) == \
        (int(c.launches), int(c.executed_read), int(c.executed_written)), trace.kernels


# eager implementations = what the reference dispatches -------------------------------------------------

B_, L_, D_ = 2, 3, 8
NORM_DIMS = {"B": B_, "L": L_, "D": D_}


def _forward_cases(dt):
    """(op, impl, dims, reference, inputs): inputs built outside the trace."""
    x, z = _rand(B_, L_, D_, dtype=dt), _rand(B_, L_, D_, dtype=dt)
    w, b = _rand(D_, dtype=dt), _rand(D_, dtype=dt)
    f = 16
    w_up, w_gate, w_down = _rand(f, D_, dtype=dt), _rand(f, D_, dtype=dt), _rand(D_, f, dtype=dt)
    return [
        ("rmsnorm", "torch_eager", NORM_DIMS, norms.rmsnorm_ref, (x, w)),
        ("layernorm", "torch_eager", NORM_DIMS, norms.layernorm_ref, (x, w, b)),
        ("gated_rmsnorm", "torch_eager", NORM_DIMS, norms.gated_rmsnorm_ref, (x, z, w)),
        ("silu", "torch_eager", NORM_DIMS, elementwise.silu_ref, (x,)),
        ("softplus", "torch_eager", NORM_DIMS, elementwise.softplus_ref, (x,)),
        ("silu_gate", "torch_eager", NORM_DIMS, elementwise.silu_gate_ref, (x, z)),
        ("silu_gate", "chunked_eager", NORM_DIMS, elementwise.silu_gate_chunked_ref, (torch.cat([x, z], -1),)),
        ("softmax", "torch_eager", {"B": 2, "H": 3, "L": 4, "S": 5}, softmax.softmax_ref,
         (_rand(2, 3, 4, 5, dtype=dt),)),
        ("lm_head", "cublas", {"B": B_, "L": L_, "D": D_, "V": 10}, embedding.lm_head_ref,
         (x, _rand(10, D_, dtype=dt))),
        ("mlp", "torch_eager", {"B": B_, "L": L_, "D": D_, "F": f}, mlp.mlp_ref, (x, w_up, w_down)),
        ("gated_mlp", "torch_eager", {"B": B_, "L": L_, "D": D_, "F": f}, mlp.gated_mlp_ref, (x, w_gate, w_up, w_down)),
        ("gated_mlp", "merged_eager", {"B": B_, "L": L_, "D": D_, "F": f}, mlp.gated_mlp_merged_ref,
         (x, torch.cat([w_up, w_gate]), w_down)),
    ]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index", range(12))
def test_eager_forward_launches_and_bytes_match_dispatched_kernels(dtype, index):
    torch.manual_seed(0)
    op, impl, dims, ref, inputs = _forward_cases(DTYPES[dtype])[index]
    with torch.no_grad(), KernelTrace() as trace:
        ref(*inputs)
    _assert_trace_matches(trace, cost(op, dims, impl=impl, mode="fwd", dtype=dtype))


# Backward traces only for the elementwise ops: the GEMM composites' backward inherits the linear rule,
# which counts dY once although its two backward GEMMs (dX = dY W, dW = dY^T X) each read it.
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op, impl, ref, n_inputs", [
    ("silu", "torch_eager", elementwise.silu_ref, 1),
    ("softplus", "torch_eager", elementwise.softplus_ref, 1),
    ("silu_gate", "torch_eager", elementwise.silu_gate_ref, 2),
])
def test_eager_backward_launches_and_bytes_match_dispatched_kernels(dtype, op, impl, ref, n_inputs):
    inputs = [_rand(B_, L_, D_, dtype=DTYPES[dtype], grad=True) for _ in range(n_inputs)]
    y = ref(*inputs)
    dy = torch.randn_like(y)
    with KernelTrace() as trace:
        torch.autograd.grad(y, inputs, dy)
    _assert_trace_matches(trace, cost(op, NORM_DIMS, impl=impl, mode="bwd", dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_chunked_gate_backward_matches_dispatched_kernels(dtype):
    h = _rand(B_, L_, 2 * D_, dtype=DTYPES[dtype], grad=True)
    y = elementwise.silu_gate_chunked_ref(h)
    dy = torch.randn_like(y)
    with KernelTrace() as trace:
        torch.autograd.grad(y, [h], dy)
    _assert_trace_matches(trace, cost("silu_gate", NORM_DIMS, impl="chunked_eager", mode="bwd", dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_merged_gated_mlp_backward_matches_dispatched_kernels(dtype):
    """mamba-ssm's GatedMLP backward: the rule's launches and host calls are autograd's kernels, and its
    elementwise kernels (the gate's products, silu_backward, the chunk's cat) move the traced bytes."""
    f, dt = 16, DTYPES[dtype]
    inputs = [_rand(B_, L_, D_, dtype=dt, grad=True), _rand(2 * f, D_, dtype=dt, grad=True),
              _rand(D_, f, dtype=dt, grad=True)]
    y = mlp.gated_mlp_merged_ref(*inputs)
    dy = torch.randn_like(y)
    with KernelTrace() as trace:
        torch.autograd.grad(y, inputs, dy)
    dims = {"B": B_, "L": L_, "D": D_, "F": f}
    c = cost("gated_mlp", dims, impl="merged_eager", mode="bwd", dtype=dtype)
    assert int(c.launches) == len(trace.kernels) and {k: int(v) for k, v in c.host.items()} == _host_calls(trace)
    gate = cost("silu_gate", {"B": B_, "L": L_, "D": f}, impl="chunked_eager", mode="bwd", dtype=dtype)
    eager = [k for k in trace.kernels if k[0] not in CUBLAS_OPS]
    assert [k[0] for k in eager] == ["aten.mul.Tensor", "aten.mul.Tensor", "aten.silu_backward.default",
                                     "aten.cat.default"]
    assert (sum(k[1] for k in eager), sum(k[2] for k in eager)) == (int(gate.executed_read),
                                                                    int(gate.executed_written))


# host calls by backend class = the dispatched ops by software path ---------------------------------------

# aten ops that PyTorch issues through cuBLAS on CUDA; every other kernel-running op is one eager call
CUBLAS_OPS = ("aten.mm.default", "aten.bmm.default", "aten.addmm.default")


def _host_calls(trace: KernelTrace) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, _, _ in trace.kernels:
        cls = "cublas" if name in CUBLAS_OPS else "torch_eager"
        out[cls] = out.get(cls, 0) + 1
    return out


def _conv1d_case(dt):
    from ssmbench.analytic.ops.conv1d import ref as conv1d
    b, e, k, n = 2, 4, 3, 5
    return ("conv1d", "torch_conv", {"B": b, "E": e, "K": k, "L": n}, conv1d.conv1d_ref,
            (_rand(b, e, n, dtype=dt), _rand(e, k, dtype=dt), _rand(e, dtype=dt)))


def _embedding_case(dt):
    return ("embedding", "gather_scatter", {"B": B_, "L": L_, "D": D_, "V": 10}, embedding.embedding_ref,
            (torch.randint(0, 10, (B_, L_)), _rand(10, D_, dtype=dt)))


def _linear_case(dt, grad=False):
    from ssmbench.analytic.ops.gemm import ref as gemm
    return ("linear", "cublas", {"B": B_, "L": L_, "I": D_, "O": 6}, gemm.linear_ref,
            (_rand(B_, L_, D_, dtype=dt, grad=grad), _rand(6, D_, dtype=dt, grad=grad)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index", range(15))
def test_eager_forward_host_calls_match_dispatched_ops(dtype, index):
    """Each dispatched kernel is one host call of its software path (cuBLAS for the matmuls, the eager
    dispatcher for the rest): the rules' ``host`` terms count exactly those, by class."""
    torch.manual_seed(0)
    dt = DTYPES[dtype]
    cases = _forward_cases(dt) + [_conv1d_case(dt), _embedding_case(dt), _linear_case(dt)]
    op, impl, dims, ref, inputs = cases[index]
    with torch.no_grad(), KernelTrace() as trace:
        ref(*inputs)
    c = cost(op, dims, impl=impl, mode="fwd", dtype=dtype)
    assert {k: int(v) for k, v in c.host.items()} == _host_calls(trace), trace.kernels


@pytest.mark.parametrize("op", ["linear", "mlp", "gated_mlp"])
def test_gemm_backward_host_calls_match_dispatched_ops(op):
    """autograd.grad of the GEMM compositions: dX and dW GEMMs per projection, the activation's
    backward ops and the accumulation of two dx branches, each one host call of its class (the
    autograd engine's own call is added per measured backward, ``execution.as_measured``)."""
    torch.manual_seed(0)
    if op == "linear":
        _, impl, dims, ref, inputs = _linear_case(torch.float32, grad=True)
    else:
        f = 16
        g = lambda *s: _rand(*s, grad=True)  # noqa: E731
        impl, dims = "torch_eager", {"B": B_, "L": L_, "D": D_, "F": f}
        ref, inputs = ((mlp.mlp_ref, (g(B_, L_, D_), g(f, D_), g(D_, f))) if op == "mlp" else
                       (mlp.gated_mlp_ref, (g(B_, L_, D_), g(f, D_), g(f, D_), g(D_, f))))
    y = ref(*inputs)
    dy = torch.randn_like(y)
    with KernelTrace() as trace:
        torch.autograd.grad(y, inputs, dy)
    c = cost(op, dims, impl=impl, mode="bwd", dtype="fp32")
    assert {k: int(v) for k, v in c.host.items()} == _host_calls(trace), trace.kernels


# matmul FLOPs = torch.utils.flop_counter ----------------------------------------------------------------

def _flops(fn, backward: bool) -> int:
    with FlopCounterMode(display=False) as counter:
        y = fn()
        if backward:
            y.backward(torch.randn_like(y))
    return counter.get_total_flops()


def _gemm_cases():
    """(op, dims, reference, inputs) with inputs that require grad."""
    b, n, d, f, v, x, k = 2, 5, 16, 24, 40, 6, 2  # n tokens per sequence (L)
    g = lambda *s: _rand(*s, grad=True)  # noqa: E731
    return [
        ("lm_head", {"B": b, "L": n, "D": d, "V": v}, embedding.lm_head_ref, (g(b, n, d), g(v, d))),
        ("mlp", {"B": b, "L": n, "D": d, "F": f}, mlp.mlp_ref, (g(b, n, d), g(f, d), g(d, f))),
        ("gated_mlp", {"B": b, "L": n, "D": d, "F": f}, mlp.gated_mlp_ref, (g(b, n, d), g(f, d), g(f, d), g(d, f))),
        ("moe", {"B": b, "L": n, "D": d, "F": f, "X": x, "Xk": k}, moe.moe_ref,
         (g(b, n, d), g(x, d), g(x, f, d), g(x, f, d), g(x, d, f), k)),
    ]


@pytest.mark.parametrize("index", range(4))
@pytest.mark.parametrize("mode", ["fwd", "fwdbwd"])
def test_tensor_flops_match_torch_flop_counter(index, mode):
    torch.manual_seed(0)
    op, dims, ref, inputs = _gemm_cases()[index]
    counted = _flops(lambda: ref(*inputs), backward=mode == "fwdbwd")
    assert float(cost(op, dims, mode=mode, dtype="fp32").tensor_flops) == counted


# references are numerically right ----------------------------------------------------------------------

def _close(a, b, tol=1e-5):
    torch.testing.assert_close(a.double(), b.double(), rtol=tol, atol=tol)


def test_norm_references():
    torch.manual_seed(0)
    x, z, w, b = _rand(2, 5, 16), _rand(2, 5, 16), _rand(16), _rand(16)
    xd = x.double()
    rms = xd / torch.sqrt((xd * xd).mean(-1, keepdim=True) + 1e-6) * w.double()
    _close(norms.rmsnorm_ref(x, w), rms)
    _close(norms.rmsnorm_ref(x, w), F.rms_norm(x, (16,), w, eps=1e-6))
    _close(norms.layernorm_ref(x, w, b), F.layer_norm(x, (16,), w, b, eps=1e-5))
    u = xd * z.double() * torch.sigmoid(z.double())
    _close(norms.gated_rmsnorm_ref(x, z, w), u / torch.sqrt((u * u).mean(-1, keepdim=True) + 1e-6) * w.double())
    low = norms.rmsnorm_ref(x.bfloat16(), w.bfloat16())
    assert low.dtype == torch.bfloat16
    _close(low, rms, tol=3e-2)


def test_elementwise_and_softmax_references():
    torch.manual_seed(0)
    x, z = _rand(3, 4, 8), _rand(3, 4, 8)
    xd, zd = x.double(), z.double()
    _close(elementwise.silu_ref(x), xd / (1 + torch.exp(-xd)))
    _close(elementwise.softplus_ref(x), torch.log1p(torch.exp(xd)))
    _close(elementwise.silu_gate_ref(x, z), xd * zd / (1 + torch.exp(-zd)))
    s = _rand(2, 3, 4, 7) * 30 + 1000  # large logits: the max subtraction keeps exp finite
    e = torch.exp(s.double() - s.double().amax(-1, keepdim=True))
    _close(softmax.softmax_ref(s), e / e.sum(-1, keepdim=True))
    assert torch.isfinite(softmax.softmax_ref(s)).all()


def test_embedding_and_lm_head_references():
    torch.manual_seed(0)
    table, idx, h = _rand(11, 6), torch.randint(0, 11, (2, 5)), _rand(2, 5, 6)
    _close(embedding.embedding_ref(idx, table), F.one_hot(idx, 11).double() @ table.double())
    _close(embedding.lm_head_ref(h, table), torch.einsum("bld,vd->blv", h.double(), table.double()))


def _gelu_tanh(a):
    return 0.5 * a * (1 + torch.tanh(0.7978845608028654 * (a + 0.044715 * a ** 3)))


def test_mlp_references():
    torch.manual_seed(0)
    x, wu, wd, wg = _rand(2, 5, 8), _rand(12, 8), _rand(8, 12), _rand(12, 8)
    xd = x.double()
    _close(mlp.mlp_ref(x, wu, wd), torch.einsum("blf,df->bld", _gelu_tanh(torch.einsum("bld,fd->blf", xd, wu.double())),
                                                 wd.double()))
    g, u = torch.einsum("bld,fd->blf", xd, wg.double()), torch.einsum("bld,fd->blf", xd, wu.double())
    _close(mlp.gated_mlp_ref(x, wg, wu, wd), torch.einsum("blf,df->bld", g * torch.sigmoid(g) * u, wd.double()))


def test_moe_reference_equals_dense_masked_computation():
    torch.manual_seed(0)
    b, n, d, f, x_, k = 2, 7, 8, 12, 5, 2
    x, wr = _rand(b, n, d), _rand(x_, d)
    wg, wu, wd = _rand(x_, f, d), _rand(x_, f, d), _rand(x_, d, f)
    xd = x.double().reshape(-1, d)  # [T, D]
    probs = torch.softmax(xd @ wr.double().T, -1)  # [T, X]
    top = probs.topk(k, -1)
    gates = torch.zeros_like(probs).scatter(-1, top.indices, top.values / top.values.sum(-1, keepdim=True))
    g = torch.einsum("td,xfd->txf", xd, wg.double())
    u = torch.einsum("td,xfd->txf", xd, wu.double())
    every = torch.einsum("txf,xdf->txd", g * torch.sigmoid(g) * u, wd.double())  # all experts, all tokens
    dense = (every * gates[..., None]).sum(1).reshape(b, n, d)
    _close(moe.moe_ref(x, wr, wg, wu, wd, k), dense)


@pytest.mark.parametrize("dtype", DTYPES)
def test_eager_rmsnorm_backward_matches_dispatched_kernels(dtype):
    """autograd's backward of the eager RMSNorm (the Hugging Face module's composition): the rule's
    kernels are the dispatched ones, with their bytes, except MeanBackward's read of the [B, L, 1]
    gradient through a stride-0 view of [B, L, D], which the trace counts at the view's size and the
    rule at the R fp32 elements memory holds."""
    x = _rand(B_, L_, D_, dtype=DTYPES[dtype], grad=True)
    w = _rand(D_, dtype=DTYPES[dtype], grad=True)
    y = norms.rmsnorm_ref(x, w)
    dy = torch.randn_like(y)
    with KernelTrace() as trace:
        torch.autograd.grad(y, (x, w), dy)
    c = cost("rmsnorm", NORM_DIMS, impl="torch_eager", mode="bwd", dtype=dtype)
    expanded = (B_ * L_ * D_ - B_ * L_) * 4  # the view's elements beyond the rows', fp32
    assert (len(trace.kernels), trace.read - expanded, trace.written) == \
        (int(c.launches), int(c.executed_read), int(c.executed_written)), trace.kernels
    assert {k: int(v) for k, v in c.host.items()} == _host_calls(trace)


@pytest.mark.parametrize("dtype", DTYPES)
def test_eager_rope_backward_matches_dispatched_kernels(dtype):
    """autograd's backward of Hugging Face's apply_rotary_pos_emb: five kernels per tensor (the forward's
    mul, neg of a half, cat, mul, add on the gradients), launches and bytes as dispatched."""
    from ssmbench.analytic.ops.attention import ref as attention
    b, n, h, g, p = 2, 3, 4, 2, 8
    dt = DTYPES[dtype]
    q, k = _rand(b, n, h, p, dtype=dt, grad=True), _rand(b, n, g, p, dtype=dt, grad=True)
    qo, ko = attention.rope_torch_eager_ref(q, k, _rand(b, n, p // 2, dtype=dt), _rand(b, n, p // 2, dtype=dt))
    grads = (torch.randn_like(qo), torch.randn_like(ko))
    with KernelTrace() as trace:
        torch.autograd.grad((qo, ko), (q, k), grads)
    _assert_trace_matches(trace, cost("rope", {"B": b, "L": n, "H": h, "G": g, "P": p}, impl="torch_eager",
                                      mode="bwd", dtype=dtype))
