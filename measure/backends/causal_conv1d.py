"""Causal depthwise conv1d with SiLU (op ``conv1d``): Dao-AILab causal-conv1d and PyTorch's conv.

Backends (op conv1d / impl / modes), x [B, E, L], weight [E, K], bias [E], activation SiLU:
- ``causal_conv1d.causal_conv1d_fn``: causal_conv1d / fwd, bwd, fwdbwd -- channel-first x
  ([B, E, L] contiguous), as ``Mamba.forward`` passes it.
- ``causal_conv1d.causal_conv1d_fn_cl``: causal_conv1d / fwd, bwd, fwdbwd -- channel-last x (a
  [B, E, L] view of a contiguous [B, L, E] tensor), as ``Mamba2.forward`` passes it; the kernel has a
  separate channel-last code path (E divisible by 8).
- ``causal_conv1d.causal_conv1d_update``: causal_conv1d / decode -- one token, conv state [B, E, K]
  at the activation dtype (as mamba-ssm's cache holds it), updated in place.
- ``torch.conv1d``: torch_conv / fwd, bwd, fwdbwd, decode on CUDA -- ``F.silu(F.conv1d(x, w[:, None],
  bias, padding=K-1, groups=E)[..., :L])`` (Mamba's fallback without causal-conv1d); decode is
  ``Mamba.step``'s fallback: roll the state, write the token, multiply-sum, bias, SiLU.
Gradients compared: x, weight, bias. References: ``analytic/ops/conv1d/ref.py`` ``causal_conv1d_ref`` /
``causal_conv1d_update_ref`` (K shifted multiply-adds, fp32 accumulation in the lo path). The
``torch.conv1d`` backend is plain PyTorch: its reference_lo is its own computation (as ``torch_ref``);
the decode fallback multiplies and adds at the case dtype and is measurably less accurate in bf16
than causal-conv1d's fp32-accumulating update (about 4x the error on random data).
"""

from __future__ import annotations

from ...analytic.registry import reference as registry_reference
from ..extensions import ensure_extension, import_or_unavailable
from .base import Backend, register_backend
from .common import KernelSpec, Rand, batch_slices, dims_of, prepare_diff, prepare_step, require_cuda, torch_dtype

CC_HINT = "install causal-conv1d 1.x from its sdist (docs/gpu_setup.md)"


def _inputs(case, device, seed, channel_last: bool):
    b, l, e, k = dims_of(case, ("B", "L", "E", "K"))
    dt = torch_dtype(case.dtype)
    r = Rand(device, seed)
    x = r.normal((b, l, e), dt).transpose(1, 2) if channel_last else r.normal((b, e, l), dt)  # [B, E, L]
    inputs = {"x": x, "weight": r.normal((e, k), dt, std=k ** -0.5), "bias": r.normal((e,), dt, std=0.1)}
    return r, inputs, (b, l, e, k)


def _spec(kernel, inputs, shape, dt, notes, channel_last: bool = False, lo_is_kernel: bool = False):
    b, l, e, _ = shape

    def reference(x, hi):
        if lo_is_kernel and not hi:  # a plain-PyTorch backend is its own case-dtype baseline
            return kernel(x)
        return registry_reference("conv1d", "causal_conv1d", "fwd", "gate")(x["x"], x["weight"], x["bias"], hi)

    def grad_out(r, out_shape, out_dtype):  # the upstream gradient in the layout the block produces
        return r.normal((b, l, e), out_dtype).transpose(1, 2) if channel_last else r.normal(out_shape, out_dtype)

    return KernelSpec(kernel, reference, inputs, ("x", "weight", "bias"), batch_slices(b, b, ("x",), inputs),
                      tokens=b * l, out_shape=(b, e, l), out_dtype=dt, notes=notes, grad_out=grad_out)


def _causal(channel_last: bool):
    def prepare(case, device, seed):
        require_cuda(device)
        ensure_extension("causal_conv1d_cuda")
        cc = import_or_unavailable("causal_conv1d", CC_HINT)
        r, inputs, shape = _inputs(case, device, seed, channel_last)
        if channel_last and shape[2] % 8:
            raise ValueError(f"case {case.key()}: the channel-last kernel needs E divisible by 8")

        def kernel(x):
            return cc.causal_conv1d_fn(x["x"], x["weight"], x["bias"], activation="silu")

        layout = "channel-last view (Mamba2)" if channel_last else "channel-first contiguous (Mamba)"
        spec = _spec(kernel, inputs, shape, torch_dtype(case.dtype),
                     f"causal_conv1d_fn(activation='silu'), x and the upstream gradient {layout}.", channel_last)
        return prepare_diff(spec, case.mode, r)

    return prepare


def _torch_conv(case, device, seed):
    require_cuda(device)
    import torch.nn.functional as F

    if case.mode == "decode":
        return _torch_decode(case, device, seed)
    r, inputs, shape = _inputs(case, device, seed, channel_last=False)
    l, e, k = shape[1], shape[2], shape[3]

    def kernel(x):
        return F.silu(F.conv1d(x["x"], x["weight"][:, None], x["bias"], padding=k - 1, groups=e)[..., :l])

    spec = _spec(kernel, inputs, shape, torch_dtype(case.dtype),
                 "F.conv1d(padding=K-1, groups=E)[..., :L] then F.silu (cuDNN depthwise); plain PyTorch, so "
                 "reference_lo is this computation itself.", lo_is_kernel=True)
    return prepare_diff(spec, case.mode, r)


def _decode_inputs(case, device, seed):
    b, e, k = dims_of(case, ("B", "E", "K"))
    if case.dims.get("L", 1) != 1:
        raise ValueError(f"decode case {case.key()}: L must be 1 (one token per sequence)")
    dt = torch_dtype(case.dtype)
    r = Rand(device, seed)
    return b, e, k, {"x": r.normal((b, e), dt), "conv_state": r.normal((b, e, k), dt),
                     "weight": r.normal((e, k), dt, std=k ** -0.5), "bias": r.normal((e,), dt, std=0.1)}


def _reference_step(x, hi):
    return registry_reference("conv1d", "causal_conv1d", "decode", "gate")(x["x"], x["conv_state"], x["weight"], x["bias"], hi)


def _torch_decode(case, device, seed):
    import torch
    import torch.nn.functional as F

    b, e, k, inputs = _decode_inputs(case, device, seed)

    def kernel(x):
        s = x["conv_state"]
        s.copy_(torch.roll(s, shifts=-1, dims=-1))  # Mamba.step's fallback, verbatim
        s[:, :, -1] = x["x"]
        out = F.silu(torch.sum(s * x["weight"], dim=-1) + x["bias"]).to(x["x"].dtype)
        return [out, s]

    def reference(x, hi):  # lo: the fallback itself (plain PyTorch at the case dtype is this code)
        return _reference_step(x, hi) if hi else kernel(x)

    return prepare_step(kernel, reference, inputs, tokens=b, state_names=("conv_state",),
                        notes="Mamba.step's PyTorch conv fallback (roll, write, multiply-sum, bias, SiLU) at the "
                              "case dtype, its own reference_lo; state [B, E, K] updated in place; compared: "
                              "output and new state.")


def _update(case, device, seed):
    require_cuda(device)
    ensure_extension("causal_conv1d_cuda")
    cc = import_or_unavailable("causal_conv1d", CC_HINT)
    b, e, k, inputs = _decode_inputs(case, device, seed)

    def kernel(x):
        out = cc.causal_conv1d_update(x["x"], x["conv_state"], x["weight"], x["bias"], activation="silu")
        return [out, x["conv_state"]]

    return prepare_step(kernel, _reference_step, inputs, tokens=b, state_names=("conv_state",),
                        notes="causal_conv1d_update(activation='silu'), state [B, E, K] updated in place; "
                              "compared: output and new state.")


register_backend(Backend(
    name="causal_conv1d.causal_conv1d_fn", op="conv1d", impl="causal_conv1d", modes=("fwd", "bwd", "fwdbwd"),
    devices=("cuda",), prepare=_causal(False),
    description="causal-conv1d causal_conv1d_fn, channel-first x (Mamba-1 layout)"))
register_backend(Backend(
    name="causal_conv1d.causal_conv1d_fn_cl", op="conv1d", impl="causal_conv1d", modes=("fwd", "bwd", "fwdbwd"),
    devices=("cuda",), prepare=_causal(True),
    description="causal-conv1d causal_conv1d_fn, channel-last x (Mamba-2 layout)"))
register_backend(Backend(
    name="causal_conv1d.causal_conv1d_update", op="conv1d", impl="causal_conv1d", modes=("decode",),
    devices=("cuda",), prepare=_update,
    description="causal-conv1d causal_conv1d_update (decode step)"))
register_backend(Backend(
    name="torch.conv1d", op="conv1d", impl="torch_conv", modes=("fwd", "bwd", "fwdbwd", "decode"),
    devices=("cuda",), prepare=_torch_conv,
    description="PyTorch F.conv1d + F.silu (cuDNN), decode = Mamba.step's fallback"))
