"""Block-level cases: a whole mixer or MLP block as a model runs it (op names ``block:...``).

Backends (op / impl / modes; dims):
- ``mamba_ssm.Mamba``: block:mamba1 / fast_path / fwd, fwdbwd, decode; B, L, D, N (expand 2, d_conv 4,
  dt_rank ceil(D/16)). fwd/fwdbwd run ``mamba_inner_fn`` (use_fast_path=True, needs causal-conv1d).
- ``mamba_ssm.Mamba2``: block:mamba2 / mem_eff_path / fwd, fwdbwd, decode; B, L, D, N, P, G (+ C,
  default 256): ``mamba_split_conv1d_scan_combined`` (use_mem_eff_path=True, needs causal-conv1d).
- ``mamba_ssm.Mamba3``: block:mamba3 / siso / fwd, fwdbwd, decode; B, L, D, N, P (is_mimo=False,
  chunk 64); bf16 only. Its decode step needs the CuTe-DSL kernel: Unavailable without it.
- ``torch.attention_block``: block:attention / sdpa / fwd, fwdbwd, decode; B, L, D, H, G, P (+ S for
  decode): fused QKV projection, SDPA (PyTorch's default backend choice), output projection; no
  RoPE, no norm (as Nemotron-H's attention layers).
- ``torch.gated_mlp``: block:gated_mlp / eager / fwd, fwdbwd, decode; B, L, D, F:
  down(silu(gate(x)) * up(x)).

Modes: ``fwd`` = prefill forward of L tokens; ``fwdbwd`` = a training step's forward and backward
(gradients of the input and of every parameter, no optimizer); ``decode`` = one token per sequence
through the module's inference path (``step`` with its conv/SSM state; the attention block writes
its K, V into a KV cache of S tokens and attends over S + 1), captured once in a CUDA graph: ``run()``
replays the graph (suite entries set ``timing: {cuda_graph: false}``: the graph is already here).

Correctness (what is compared): output (fwd, decode; decode also the new states), output and the
gradients of input and parameters (fwdbwd). Weights are shared by three copies of the block:
- run: the block at the case dtype, fast path;
- reference_hi: the block in fp32 with its scan core replaced by the plain-PyTorch reference
  (the registry's gate references (``analytic/ops/<family>/ref.py``); selective_scan_fn / mamba_chunk_scan_combined / mamba3_siso_combined for prefill,
  the modules' own PyTorch step fallbacks for decode; ``sdpa_ref`` for attention), on the inputs
  upcast to fp32;
- reference_lo: the same plain path at the case dtype (Mamba: use_fast_path=False; Mamba2:
  use_mem_eff_path=False).
Projections, the conv (causal-conv1d where installed) and Triton RMSNorms run as in the module in
both references: the gate checks the fused path against an independent scan, not every kernel.
The MLP block is plain PyTorch: its lo reference is the run itself (the gate only guards against
non-finite output there).
"""

from __future__ import annotations

import contextlib
import copy

from ...analytic.registry import reference as registry_reference
from ..extensions import bind_causal_conv1d, import_mamba_ssm
from .base import Backend, Prepared, Unavailable, register_backend
from .common import Rand, as_list, dims_of, require_cuda, torch_dtype


@contextlib.contextmanager
def patched(module, **attrs):
    """Temporarily replace module-level names (the kernels a block looks up at call time)."""
    saved = {k: getattr(module, k) for k in attrs}
    try:
        for k, v in attrs.items():
            setattr(module, k, v)
        yield
    finally:
        for k, v in saved.items():
            setattr(module, k, v)


def _copies(make, dtype, seed):
    """(fp32 module, case-dtype module with the same weights): seeded init in fp32, then load_state_dict
    into a module built at the case dtype (parameters a module keeps in fp32 stay fp32).
    ``make(dtype)`` builds the module on the device."""
    import torch

    torch.manual_seed(seed)
    hi = make(torch.float32)
    lo = make(dtype)
    lo.load_state_dict(hi.state_dict())
    return hi, lo


def _capture(fn):
    """Warm up ``fn`` on a side stream, capture it in a CUDA graph; returns (graph, static outputs)."""
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.no_grad():
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), torch.no_grad():
        outs = fn()
    return graph, outs


def _train_step(module, x, grad_out):
    import torch

    params = [p for p in module.parameters() if p.requires_grad]
    xl = x.detach().requires_grad_(True)
    out = module(xl)
    grads = torch.autograd.grad(out, [xl, *params], grad_out.to(out.dtype), allow_unused=True,
                                materialize_grads=True)
    return [out.detach(), *grads]


def _prefill(case, device, seed, make_hi_lo, run_mod, ref_ctx, d_model, tokens, notes):
    """Prepared for fwd / fwdbwd of a block. ``ref_ctx(hi)`` is the context that swaps in the plain path."""
    import torch

    hi_mod, lo_mod = make_hi_lo
    b, l = tokens
    r = Rand(device, seed)
    x = r.normal((b, l, d_model), torch_dtype(case.dtype))  # [B, L, D]
    if case.mode == "fwd":
        def run():
            with torch.no_grad():
                return run_mod(x)

        def ref(hi):
            mod, xi = (hi_mod, x.float()) if hi else (lo_mod, x)
            with torch.no_grad(), ref_ctx(hi):
                return mod(xi)
    else:
        grad_out = r.normal((b, l, d_model), torch_dtype(case.dtype))

        def run():
            return _train_step(run_mod, x, grad_out)

        def ref(hi):
            mod, xi = (hi_mod, x.float()) if hi else (lo_mod, x)
            with ref_ctx(hi):
                return _train_step(mod, xi, grad_out)
    return Prepared(run=run, reference_hi=lambda: ref(True), reference_lo=lambda: ref(False), output_of=as_list,
                    tokens=b * l, notes=notes + (" Compared: output, grads of input and all parameters."
                                                 if case.mode == "fwdbwd" else " Compared: output."))


def _decode(case, device, seed, run_mod, hi_mod, lo_mod, states_of, step, ref_ctx, d_model, b, notes):
    """Prepared for a decode step captured in a CUDA graph. ``states_of(mod, dtype)`` allocates the
    module's inference states; ``step(mod, x, states) -> [out, *states]`` (states updated in place)."""
    import torch

    r = Rand(device, seed)
    dt = torch_dtype(case.dtype)
    x = r.normal((b, 1, d_model), dt)  # [B, 1, D]
    states = states_of(run_mod, dt)
    for s in states:
        s.copy_(r.normal(s.shape, s.dtype, std=0.5))
    snapshot = [s.clone() for s in states]
    graph, outs = _capture(lambda: step(run_mod, x, states))
    for s, s0 in zip(states, snapshot):
        s.copy_(s0)

    def run():
        graph.replay()
        return outs

    def ref(hi):
        mod, xi = (hi_mod, x.float()) if hi else (lo_mod, x)
        st = [s.float().clone() if hi else s.clone() for s in snapshot]
        with torch.no_grad(), ref_ctx(hi):
            return step(mod, xi, st)

    return Prepared(run=run, reference_hi=lambda: ref(True), reference_lo=lambda: ref(False), output_of=as_list,
                    tokens=b, notes=notes + " Decode: one token, CUDA graph replay; compared: output and new states.")


# Mamba-1 ---------------------------------------------------------------------------------------------
def _cache_states(b):
    """(module, dtype) -> the [conv_state, ssm_state] a mamba-ssm module's step needs, batch ``b``."""
    return lambda mod, t: list(mod.allocate_inference_cache(b, 1, dtype=t))


def _module_step(mod, x, st):
    """One decode step of a mamba-ssm Mamba / Mamba2 module: [output, conv_state, ssm_state]."""
    out, conv, ssm = mod.step(x, st[0], st[1])
    return [out, conv, ssm]


def _mamba1(case, device, seed):
    require_cuda(device)
    ms = import_mamba_ssm("mamba_ssm.modules.mamba_simple")
    bind_causal_conv1d()  # the fast path (mamba_inner_fn) and the decode step use causal-conv1d
    b, d, n = dims_of(case, ("B", "D", "N"))
    dt = torch_dtype(case.dtype)
    hi_mod, lo_mod = _copies(lambda t: ms.Mamba(d_model=d, d_state=n, layer_idx=0, device=device, dtype=t), dt, seed)
    run_mod = copy.deepcopy(lo_mod)
    hi_mod.use_fast_path = lo_mod.use_fast_path = False

    def scan_ref(hi):
        def fn(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False, return_last_state=False):
            assert delta_softplus and not return_last_state
            return registry_reference("mamba1_scan", "fused", "fwd")(u, delta, A, B, C, D, z, delta_bias, hi)
        return fn

    notes = f"mamba_ssm Mamba(d_model={d}, d_state={n}, expand 2, d_conv 4)."
    if case.mode == "decode":
        return _decode(case, device, seed, run_mod, hi_mod, lo_mod, _cache_states(b), _module_step,
                       lambda hi: patched(ms, selective_state_update=None, causal_conv1d_update=None), d, b,
                       notes + " References: Mamba.step's PyTorch fallback.")
    (l,) = dims_of(case, ("L",))
    return _prefill(case, device, seed, (hi_mod, lo_mod), run_mod,
                    lambda hi: patched(ms, selective_scan_fn=scan_ref(hi)), d, (b, l),
                    notes + " Run: mamba_inner_fn; references: slow path with a plain-PyTorch scan.")


# Mamba-2 ---------------------------------------------------------------------------------------------
def _mamba2(case, device, seed):
    require_cuda(device)
    m2 = import_mamba_ssm("mamba_ssm.modules.mamba2")
    bind_causal_conv1d()  # mamba_split_conv1d_scan_combined and the decode step use causal-conv1d
    b, d, n, p, g = dims_of(case, ("B", "D", "N", "P", "G"))
    (c,) = dims_of(case, ("C",), {"C": 256})
    dt = torch_dtype(case.dtype)
    hi_mod, lo_mod = _copies(lambda t: m2.Mamba2(d_model=d, d_state=n, headdim=p, ngroups=g, chunk_size=c,
                                                 layer_idx=0, device=device, dtype=t), dt, seed)
    run_mod = copy.deepcopy(lo_mod)
    hi_mod.use_mem_eff_path = lo_mod.use_mem_eff_path = False

    def scan_ref(hi):
        def fn(x, dt_, A, B, C, chunk_size, D=None, z=None, dt_bias=None, dt_softplus=False, seq_idx=None,
               cu_seqlens=None, return_final_states=False, return_varlen_states=False, **kw):
            assert z is None and dt_softplus and seq_idx is None and not return_final_states and not kw
            return registry_reference("ssd", "chunked", "fwd")(x, dt_, A, B, C, D, dt_bias, hi)
        return fn

    def step_ref(state, x, dt_, A, B, C, D=None, z=None, dt_bias=None, dt_softplus=False, **kw):
        # Mamba2.step passes per-head scalars broadcast over P (and N); take them back per head
        assert z is None and dt_softplus
        y, new = registry_reference("ssd", "chunked", "decode")(state, x, dt_[..., 0], A[:, 0, 0], B, C, D[:, 0], dt_bias[:, 0])
        state.copy_(new)
        return y

    notes = f"mamba_ssm Mamba2(d_model={d}, d_state={n}, headdim={p}, ngroups={g}, chunk_size={c})."
    if case.mode == "decode":
        return _decode(case, device, seed, run_mod, hi_mod, lo_mod, _cache_states(b), _module_step,
                       lambda hi: patched(m2, selective_state_update=step_ref, causal_conv1d_update=None), d, b,
                       notes + " References: PyTorch conv fallback and a plain SSD step.")
    (l,) = dims_of(case, ("L",))
    return _prefill(case, device, seed, (hi_mod, lo_mod), run_mod,
                    lambda hi: patched(m2, mamba_chunk_scan_combined=scan_ref(hi)), d, (b, l),
                    notes + " Run: mamba_split_conv1d_scan_combined; references: use_mem_eff_path=False "
                            "with a plain-PyTorch SSD.")


# Mamba-3 ---------------------------------------------------------------------------------------------
def _mamba3(case, device, seed):
    require_cuda(device)
    m3 = import_mamba_ssm("mamba_ssm.modules.mamba3")
    if case.dtype != "bf16":
        raise ValueError(f"case {case.key()}: Mamba-3's Triton kernels compute in bf16 only")
    if case.mode == "decode" and m3.mamba3_step_fn is None:
        raise Unavailable("Mamba3.step needs the CuTe-DSL step kernel (nvidia-cutlass-dsl, quack-kernels), "
                          "not importable here")
    b, d, n, p = dims_of(case, ("B", "D", "N", "P"))
    dt = torch_dtype(case.dtype)
    hi_mod, lo_mod = _copies(lambda t: m3.Mamba3(d_model=d, d_state=n, headdim=p, is_mimo=False, layer_idx=0,
                                                 device=device, dtype=t), dt, seed)
    run_mod = copy.deepcopy(lo_mod)

    def scan_ref(hi):
        def fn(Q, K, V, ADT, DT, Trap, Q_bias, K_bias, Angles, D=None, Z=None, Input_States=None, chunk_size=64,
               return_final_states=False, cu_seqlens=None):
            assert Input_States is None and not return_final_states and cu_seqlens is None
            return registry_reference("mamba3", "siso", "fwd")(Q, K, V, ADT, DT, Trap, Q_bias, K_bias, Angles, D, Z, hi)
        return fn

    (l,) = dims_of(case, ("L",))
    return _prefill(case, device, seed, (hi_mod, lo_mod), run_mod,
                    lambda hi: patched(m3, mamba3_siso_combined=scan_ref(hi)), d, (b, l),
                    f"mamba_ssm Mamba3(d_model={d}, d_state={n}, headdim={p}, SISO). References: the module with "
                    "a plain-PyTorch Mamba-3 scan.")


# Attention and MLP (plain PyTorch modules) -------------------------------------------------------------
def _attention_module(d, h, g, p, dtype, device):
    import torch.nn.functional as F
    from torch import nn

    class AttentionBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(d, (h + 2 * g) * p, bias=False, device=device, dtype=dtype)
            self.out = nn.Linear(h * p, d, bias=False, device=device, dtype=dtype)
            self.ref = None  # None: SDPA; True / False: registry_reference("attention_causal", "fa2", "fwd")(hi=...)

        def _qkv(self, x):
            bsz, l, _ = x.shape
            q, k, v = self.qkv(x).split([h * p, g * p, g * p], dim=-1)
            return (q.view(bsz, l, h, p).transpose(1, 2), k.view(bsz, l, g, p).transpose(1, 2),
                    v.view(bsz, l, g, p).transpose(1, 2))  # [B, H, L, P], [B, G, L, P]

        def _attend(self, q, k, v, causal):
            if self.ref is None:
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=h != g)
            return registry_reference("attention_causal", "fa2", "fwd")(q, k, v, causal, p ** -0.5, self.ref)

        def forward(self, x):  # prefill / training: causal self-attention
            q, k, v = self._qkv(x)
            o = self._attend(q, k, v, True)
            return self.out(o.transpose(1, 2).reshape(x.shape[0], x.shape[1], h * p))

        def step(self, x, k_cache, v_cache, pos: int):  # x [B, 1, D]; caches [B, G, pos + 1, P]
            q, k, v = self._qkv(x)
            k_cache[:, :, pos] = k[:, :, 0]
            v_cache[:, :, pos] = v[:, :, 0]
            o = self._attend(q, k_cache, v_cache, False)
            return self.out(o.transpose(1, 2).reshape(x.shape[0], 1, h * p))

    return AttentionBlock()


def _attention(case, device, seed):
    require_cuda(device)
    b, d, h, g, p = dims_of(case, ("B", "D", "H", "G", "P"))
    dt = torch_dtype(case.dtype)
    hi_mod, lo_mod = _copies(lambda t: _attention_module(d, h, g, p, t, device), dt, seed)
    run_mod = copy.deepcopy(lo_mod)

    @contextlib.contextmanager
    def ref_ctx(hi):
        mod = hi_mod if hi else lo_mod
        mod.ref = hi
        try:
            yield
        finally:
            mod.ref = None

    notes = f"QKV projection, SDPA (default backend), output projection; D={d}, H={h}, G={g}, P={p}."
    if case.mode == "decode":
        (s,) = dims_of(case, ("S",))

        def states_of(mod, t):
            import torch
            return [torch.empty(b, g, s + 1, p, device=device, dtype=t) for _ in range(2)]  # K, V caches

        def step(mod, x, st):
            return [mod.step(x, st[0], st[1], s)]

        return _decode(case, device, seed, run_mod, hi_mod, lo_mod, states_of, step, ref_ctx, d, b,
                       notes + f" KV cache of S={s} tokens, the new token written at position S.")
    (l,) = dims_of(case, ("L",))
    return _prefill(case, device, seed, (hi_mod, lo_mod), run_mod, ref_ctx, d, (b, l),
                    notes + " References: sdpa_ref (plain PyTorch).")


def _mlp_module(d, f, dtype, device):
    import torch.nn.functional as F
    from torch import nn

    class GatedMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = nn.Linear(d, f, bias=False, device=device, dtype=dtype)
            self.up = nn.Linear(d, f, bias=False, device=device, dtype=dtype)
            self.down = nn.Linear(f, d, bias=False, device=device, dtype=dtype)

        def forward(self, x):
            return self.down(F.silu(self.gate(x)) * self.up(x))

    return GatedMLP()


def _mlp(case, device, seed):
    require_cuda(device)
    b, d, f = dims_of(case, ("B", "D", "F"))
    dt = torch_dtype(case.dtype)
    hi_mod, lo_mod = _copies(lambda t: _mlp_module(d, f, t, device), dt, seed)
    notes = f"gated MLP down(silu(gate(x)) * up(x)), D={d}, F={f}; plain PyTorch (lo reference = the run)."
    if case.mode == "decode":
        return _decode(case, device, seed, lo_mod, hi_mod, lo_mod, lambda mod, t: [],
                       lambda mod, x, st: [mod(x)], lambda hi: contextlib.nullcontext(), d, b, notes)
    (l,) = dims_of(case, ("L",))
    return _prefill(case, device, seed, (hi_mod, lo_mod), lo_mod, lambda hi: contextlib.nullcontext(), d, (b, l),
                    notes)


for _name, _op, _impl, _fn, _dtypes in (
        ("mamba_ssm.Mamba", "block:mamba1", "fast_path", _mamba1, ("bf16", "fp16", "fp32")),
        ("mamba_ssm.Mamba2", "block:mamba2", "mem_eff_path", _mamba2, ("bf16", "fp16", "fp32")),
        ("mamba_ssm.Mamba3", "block:mamba3", "siso", _mamba3, ("bf16",)),
        ("torch.attention_block", "block:attention", "sdpa", _attention, ("bf16", "fp16", "fp32")),
        ("torch.gated_mlp", "block:gated_mlp", "eager", _mlp, ("bf16", "fp16", "fp32"))):
    register_backend(Backend(name=_name, op=_op, impl=_impl, modes=("fwd", "fwdbwd", "decode"), devices=("cuda",),
                             prepare=_fn, dtypes=_dtypes, description=(__doc__ or "").split("\n")[0],
                             graph_modes=("decode",)))
