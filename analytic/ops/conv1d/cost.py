"""Causal depthwise conv1d with SiLU, as Mamba calls it: x [B, E, L], weight [E, K], bias [E],
out[b, e, t] = silu(bias[e] + sum_k weight[e, k] * x[b, e, t - (K - 1) + k]) (x = 0 before t = 0).

The op always includes the SiLU (``activation="silu"`` in every Mamba block; the op identity has no
flag for it). Storage dtype e bytes for x, out, weight, bias; arithmetic in fp32 (conventions.py).

FLOPs per output element (conventions.py: FMA = 2, ``SILU`` = 3 vector + 1 exp):
- forward: K FMAs onto the bias (2K) + silu  ->  2K + 3 vector, 1 transcendental.
- backward (``causal_conv1d``): recompute the output (2K), silu' given the upstream gradient
  (``SILU_BWD`` = 7 + 1 exp), dx (K FMAs, 2K), dweight (K FMAs, 2K), dbias (1)  ->  6K + 8, 1 transc.

Compulsory bytes: forward reads x, weight, bias and writes out; backward reads dout, x, weight and
writes dx, dweight, dbias (weights class for the parameters); the bias (or a saved pre-activation)
is what an implementation reads to get silu', counted as extra where read. Decode (one token per sequence,
conv state [B, E, K] as mamba-ssm's cache holds it): reads x_t [B, E], the K - 1 state elements the
output needs, weight, bias; writes out [B, E] and the one new state element per channel. The conv
state is stored at the activation dtype (mamba-ssm allocates it at the conv weight's dtype, and the
update kernel reads it as ``input_t``), class ``state``; the ``causal_conv1d`` decode rule takes
``state_dtype`` (registry ``Impl.storage``) for a cache kept in another dtype.

Implementations:
- ``causal_conv1d``: Dao-AILab/causal-conv1d. Forward: one kernel, grid (B, E), each block streams
  one channel's L in chunks of 128 threads x kNElts (8 for 2-byte, 4 for 4-byte types); the K - 1
  halo comes from the previous chunk through shared memory, so x is read exactly once. Backward:
  ``torch.zeros`` for the fp32 dweight and dbias (2 launches), one kernel (recomputes the forward
  output for silu', accumulates dweight/dbias with one atomicAdd per block: B*E*(K+1) L2 atomics,
  not device bytes), and ``.to(weight.dtype)`` of dweight, dbias (2 launches unless fp32). Decode:
  ``causal_conv1d_update`` (one launch, grid (B, E/64)): with state length K it reads K - 1 state
  elements and rewrites all K (shift + new token): the shift is extra state bytes.
  Kernel limit, enforced as an implementation constraint: K in {2, 3, 4} (causal-conv1d's
  csrc/causal_conv1d.cpp checks ``width >= 2 && width <= 4`` in its fwd, bwd and update entry
  points); ``torch_conv`` takes any K.
- ``torch_conv``: ``F.silu(F.conv1d(x, w[:, None], bias, padding=K - 1, groups=E)[..., :L])``: the
  conv (one depthwise kernel: the H200 byte audit, results/h200/2026-12-02/byte_audit, names
  PyTorch's ``conv_depthwise2d_forward_kernel_generic``, instruction-bound far below the vector rate:
  its FLOPs run through ``compute.path.conv_depthwise``, ``Cost.path``) writes the full [B, E, L + K - 1] output, of which the slice
  keeps L; silu reads the slice and writes out (2 launches). The conv computes all L + K - 1 outputs:
  (2K + 1) FLOPs each (bias added, not used as the initial value). Backward through autograd:
  silu_backward (1), slice_backward = zeros [B, E, L + K - 1] + copy into the slice (2), the
  depthwise backward-input and backward-weight kernels and the bias reduction (3): 6 launches.
  PyTorch runs a depthwise convolution on cuDNN only for fp16 operands (``use_cudnn_depthwise``,
  aten/src/ATen/native/Convolution.cpp); bf16 and fp32 take the ``CudaDepthwise2d`` backend, whose
  backward kernels (``conv_depthwise2d_backward_kernel``, ``conv_depthwise2d_grad_weight_kernel``,
  aten/src/ATen/native/cuda/DepthwiseConv2d.cu) are the same generic per-element loops as its forward:
  their FLOPs run through ``compute.path.conv_depthwise`` too (the probe measured the forward kernel;
  the backward kernels are taken at its rate). fp16's cuDNN path is not modelled (forward nor backward). Decode is mamba-ssm's
  PyTorch fallback of ``Mamba.step``: roll the state (read K, write K), copy it back (read K, write
  K), write the new token, multiply by the weight, sum over K, add bias, silu: 7 launches. ATen runs
  the token write into the strided [:, :, -1] view, the weight product and the bias add (operands of
  different shapes) and the sum along the last dimension on its non-vectorized kernels: their bytes
  move on ``memory.dram.path.strided_copy``, ``broadcast`` and ``reduction`` (``Cost.path``).
  Not counted: any input padding copy or layout transform cuDNN may make internally.

Working set (on-chip, per block): ``causal_conv1d`` forward and backward hold 128 threads x kNElts
elements twice (current and previous chunk) in registers as fp32, the fp32 outputs, and one exchange
vector per thread in shared memory; cuDNN's and the small kernels' working set is not modelled (0).
Not counted: address arithmetic, masks, the fill/cast kernels' arithmetic.
"""

from __future__ import annotations

from ...conventions import SILU, SILU_BWD, nbytes
from ...cost import Cost
from ...registry import Impl, Op, in_range, register
from ...symbols import B, E, K, L
from ..common.kernels import Kernel, Tensor, kernel_chain

THREADS = 128
FP32 = 4


def _kn_elts(e: int) -> int:
    return 8 if e == 2 else 4


def _ws(e: int) -> int:
    n = _kn_elts(e)
    registers = THREADS * (2 * n + n) * FP32  # x (two chunks) and out, fp32
    return registers + THREADS * n * e  # shared-memory exchange


def _tensors(e: int):
    x = Tensor("x", "activations", B * E * L, e)  # [B, E, L]
    w = Tensor("weight", "weights", E * K, e)  # [E, K]
    b = Tensor("bias", "weights", E, e)  # [E]
    out = Tensor("out", "activations", B * E * L, e)  # [B, E, L]
    return x, w, b, out


def _grads(e: int):
    dout = Tensor("dout", "activations", B * E * L, e)
    dx = Tensor("dx", "activations", B * E * L, e)
    dw = Tensor("dweight", "weights", E * K, e)
    db = Tensor("dbias", "weights", E, e)
    return dout, dx, dw, db


def _fwd_flops(n):
    return (2 * K + SILU[0]) * n, SILU[1] * n


def _decode_tensors(e: int, s: int):
    """One token's tensors; ``s``: bytes per conv-state element (the storage dtype unless given)."""
    xt = Tensor("x_t", "activations", B * E, e)  # [B, E]
    w = Tensor("weight", "weights", E * K, e)
    b = Tensor("bias", "weights", E, e)
    out = Tensor("out", "activations", B * E, e)  # [B, E]
    needed = Tensor("conv_state_needed", "state", B * E * (K - 1), s)  # the K - 1 newest of [B, E, K]
    new = Tensor("conv_state_new", "state", B * E, s)  # the token appended
    return xt, w, b, out, needed, new


def _causal_conv1d(mode: str, dtype: str, state_dtype: str | None = None) -> Cost:
    e = nbytes(dtype)
    if mode == "fwd":
        x, w, b, out = _tensors(e)
        v, t = _fwd_flops(B * E * L)
        return kernel_chain([Kernel("causal_conv1d_fwd", (x, w, b), (out,), v, t, working_set=_ws(e))],
                            [x, w, b], [out], stream_working_sets=False)
    if mode == "bwd":
        x, w, b, _ = _tensors(e)
        dout, dx, dw, db = _grads(e)
        dw32, db32 = Tensor("dweight_fp32", "weights", E * K, FP32), Tensor("dbias_fp32", "weights", E, FP32)
        n = B * E * L
        launches = [
            Kernel("zeros(dweight)", (), (dw32,)),
            Kernel("zeros(dbias)", (), (db32,)),
            Kernel("causal_conv1d_bwd", (x, w, b, dout), (dx, dw32, db32),
                   (6 * K + SILU_BWD[0] + 1) * n, SILU_BWD[1] * n, working_set=_ws(e)),
        ]
        if e != FP32:
            launches += [Kernel("dweight.to", (dw32,), (dw,), E * K), Kernel("dbias.to", (db32,), (db,), E)]
            outputs = [dx, dw, db]
        else:
            outputs = [dx, dw32, db32]
        return kernel_chain(launches, [dout, x, w], outputs, stream_working_sets=False)
    if mode == "decode":
        s = nbytes(state_dtype or dtype)
        xt, w, b, out, needed, new = _decode_tensors(e, s)
        shifted = Tensor("conv_state_shifted", "state", B * E * (K - 1), s)
        v, t = _fwd_flops(B * E)
        return kernel_chain([Kernel("causal_conv1d_update", (xt, needed, w, b), (out, shifted, new), v, t)],
                            [xt, needed, w, b], [out, new], stream_working_sets=False)
    raise ValueError(mode)


def _torch_conv(mode: str, dtype: str) -> Cost:
    e = nbytes(dtype)
    n, n_full = B * E * L, B * E * (L + K - 1)
    if mode == "fwd":
        x, w, b, out = _tensors(e)
        full = Tensor("conv_full", "intermediates", n_full, e)  # [B, E, L + K - 1]
        sliced = Tensor("conv_slice", "intermediates", n, e)  # [B, E, L] view of full
        return kernel_chain([
            Kernel("depthwise conv1d", (x, w, b), (full,), (2 * K + 1) * n_full, path="compute.conv_depthwise"),
            Kernel("aten.silu", (sliced,), (out,), SILU[0] * n, SILU[1] * n),
        ], [x, w, b], [out], stream_working_sets=False)
    if mode == "bwd":
        x, w, b, _ = _tensors(e)
        dout, dx, dw, db = _grads(e)
        pre = Tensor("conv_slice", "intermediates", n, e)  # saved silu input
        g = Tensor("grad_slice", "intermediates", n, e)
        g_full = Tensor("grad_full", "intermediates", n_full, e)
        g_slice_write = Tensor("grad_full_slice", "intermediates", n, e)
        return kernel_chain([
            Kernel("aten.silu_backward", (dout, pre), (g,), SILU_BWD[0] * n, SILU_BWD[1] * n),
            Kernel("slice_backward zeros", (), (g_full,)),
            Kernel("slice_backward copy", (g,), (g_slice_write,)),
            Kernel("conv_depthwise2d_backward (input)", (g_full, w), (dx,), 2 * K * n, path="compute.conv_depthwise"),
            Kernel("conv_depthwise2d_grad_weight", (g_full, x), (dw,), 2 * K * n_full, path="compute.conv_depthwise"),
            Kernel("bias grad reduction", (g_full,), (db,), n_full),
        ], [dout, x, w], [dx, dw, db], stream_working_sets=False)
    if mode == "decode":
        xt, w, b, out, needed, new = _decode_tensors(e, e)
        full = Tensor("conv_state", "state", B * E * K, e)  # [B, E, K]
        oldest = Tensor("conv_state_oldest", "state", B * E, e)  # the element the roll drops
        rolled = Tensor("rolled", "intermediates", B * E * K, e)
        prod = Tensor("state_times_weight", "intermediates", B * E * K, e)
        s = Tensor("conv_sum", "intermediates", B * E, e)
        sb = Tensor("conv_sum_bias", "intermediates", B * E, e)
        return kernel_chain([
            Kernel("torch.roll", (needed, oldest), (rolled,)),
            Kernel("conv_state.copy_", (rolled,), (full,)),
            Kernel("conv_state[:, :, -1] = x", (xt,), (new,), path="dram.strided_copy"),
            Kernel("aten.mul", (full, w), (prod,), B * E * K, path="dram.broadcast"),
            Kernel("aten.sum", (prod,), (s,), B * E * K, path="dram.reduction"),
            Kernel("aten.add bias", (s, b), (sb,), B * E, path="dram.broadcast"),
            Kernel("aten.silu", (sb,), (out,), SILU[0] * B * E, SILU[1] * B * E),
        ], [xt, needed, w, b], [out, new], stream_working_sets=False)
    raise ValueError(mode)


MODES = ("fwd", "bwd", "decode")

CONV1D = register(Op(
    name="conv1d",
    family="conv1d",
    summary="causal depthwise conv1d + bias + SiLU (Mamba's short conv); decode = conv state update",
    dims=("B", "L", "E", "K"),
    impls=(
        Impl("causal_conv1d", "Dao-AILab causal-conv1d CUDA kernels: each input read once; "
             "decode = causal_conv1d_update", _causal_conv1d, MODES, storage=("state_dtype",),
             constraints=(in_range("K", 2, 4, "the causal-conv1d kernels support widths 2, 3 and 4"),)),
        Impl("torch_conv", "F.conv1d(padding=K-1) then slice and F.silu: a [B, E, L+K-1] output "
             "materialized; decode = Mamba.step's roll/copy/sum fallback", _torch_conv, MODES),
    ),
    default_impl="causal_conv1d",
    reference="ssmbench.analytic.ops.conv1d.ref:conv1d_ref",
    notes="causal_conv1d needs K in {2, 3, 4} (the CUDA kernels' widths); torch_conv takes any K.",
))

