"""Counting conventions, in one place. Every cost rule follows these and its docstring says so.

- An FMA (a*b + c) is 2 FLOPs. A matmul of [m, k] x [k, n] is 2*m*n*k FLOPs, on tensor cores.
- Causal attention counts half of the score matrix: the FLOPs of QK^T and PV are multiplied by
  ``CAUSAL_FRACTION`` = 1/2 (the diagonal's extra L/2 is ignored). PyTorch's
  ``torch.utils.flop_counter`` counts causal SDPA in full, so cross-checks halve its count.
- Transcendentals (exp, log, sigmoid's exp, rsqrt, sin/cos) run on the special-function units and are
  counted once per evaluation, separately from vector FLOPs. The arithmetic around them
  (adds, multiplies, divides) counts as vector FLOPs, a divide as 1 FLOP.
- Vector FLOPs are counted at fp32: every kernel modelled here accumulates elementwise and scan
  arithmetic in fp32, whatever its storage dtype.
- Bytes per element follow the storage dtype (``BYTES_PER_ELEMENT``). Recurrent SSM state is
  accumulated in fp32 (``STATE_DTYPE``) inside the kernels; the op rules' decode state is fp32 as the
  measured decode cases keep it, and rules that declare ``state_dtype`` (``registry.Impl.storage``)
  take the cache's dtype instead: the workload model stores it in the model dtype by default, as
  mamba-ssm's ``allocate_inference_cache`` does (``workloads/precision.py``).
- Backward: a matmul's backward is 2x its forward FLOPs (grad wrt input and grad wrt weight);
  elementwise ops and scans state their own backward counts. Recomputation that a kernel does in
  backward (fused scan, FlashAttention) is counted in the backward cost, not hidden.
- Compulsory bytes move each input once from device memory and write each output once.
  As-executed bytes of a named implementation add what that implementation really moves on top
  (re-reads, materialized intermediates, spills), as ``extra_read`` / ``extra_write``.
- Complex arithmetic (S4's complex64 modes), in real vector FLOPs: a complex multiply is 6 (4 mul,
  2 add), a complex multiply-add 8, complex x real 2, complex add 2, complex divide 11 (6 mul, 3 add,
  2 div); a complex exp is 3 transcendentals (exp, cos, sin) and 2 multiplies (``COMPLEX_*``).
  complex64 has no tensor-core path here: complex products run on the vector units.
- FFT: a real transform (rfft or irfft) of length n counts 5 n log2(n) / 2 real FLOPs on the vector
  units (``real_fft_flops``: half the 5 n log2 n of a complex FFT of length n, the usual radix-2
  estimate). A transform length that is not a power of two costs more in cuFFT; that is left to
  calibration. ``torch.utils.flop_counter`` counts no FLOPs for FFTs: the tests cross-check these by
  formula.
- SSD's exact triangle (``ops/ssd/stages.py``): the masked intra-chunk C x C product counts the
  C (C + 1) / 2 entries of the lower triangle with its diagonal, exactly, unlike attention's
  ``CAUSAL_FRACTION`` = 1/2 of the score matrix (which drops the diagonal's extra L/2). The diagonal
  is what makes SSD with chunk 1 reproduce the recurrence's current-token term, so it is kept; the
  kernels' whole-block skipping (executing more than the triangle) is left to calibration.
"""

from __future__ import annotations

import sympy as sp

FLOPS_PER_FMA = 2
CAUSAL_FRACTION = sp.Rational(1, 2)
MATMUL_BACKWARD_MULTIPLIER = 2

# Elementwise functions: (vector FLOPs, transcendentals) per element, forward.
# silu(x) = x * sigmoid(x) = x / (1 + exp(-x)): exp (1 transc.), add, divide, multiply.
SILU = (3, 1)
# sigmoid(x) = 1 / (1 + exp(-x)): exp, add, divide.
SIGMOID = (2, 1)
# softplus(x) = log(1 + exp(x)): exp, log (2 transc.), add.
SOFTPLUS = (1, 2)
# exp(x) alone.
EXP = (0, 1)
# gelu (tanh form) ~ 0.5x(1 + tanh(0.7978(x + 0.044715x^3))): 7 arithmetic ops, 1 tanh.
GELU = (7, 1)
# relu^2 (Nemotron-H): max then square.
RELU2 = (2, 0)

# Backward of an elementwise function: (vector FLOPs, transcendentals) per element.
# silu'(x) = s(x) * (1 + x(1 - s(x))), times the upstream gradient; s recomputed (1 exp).
SILU_BWD = (7, 1)
SIGMOID_BWD = (4, 1)
SOFTPLUS_BWD = (3, 1)  # softplus'(x) = sigmoid(x), times the upstream gradient
GELU_BWD = (14, 1)
RELU2_BWD = (3, 0)

DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8")
BYTES_PER_ELEMENT = {"fp64": 8, "fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}
# The dtype in which the tensor cores multiply, given the storage dtype.
# fp32 without TF32 (PyTorch's default for matmul) has no tensor-core path: the roofline runs it at the
# vector fp32 rate and says so.
TENSOR_DTYPE = {"fp64": "fp64", "fp32": "fp32", "tf32": "tf32", "bf16": "bf16", "fp16": "fp16",
                "fp8": "fp8", "int8": "int8"}
STATE_DTYPE = "fp32"
TENSOR_CLASSES = ("weights", "activations", "state", "kv_cache", "intermediates")
MODES = ("fwd", "bwd", "fwdbwd", "decode")

# Complex arithmetic in real vector FLOPs (see the docstring).
COMPLEX_MUL = 6  # (a + bi)(c + di): 4 multiplies, 2 adds
COMPLEX_MAC = 8  # a complex multiply and its complex add
COMPLEX_TIMES_REAL = 2
COMPLEX_ADD = 2
COMPLEX_DIV = 11  # 6 multiplies, 3 adds, 2 divides
COMPLEX_EXP = (2, 3)  # (vector, transcendental): exp of the real part, cos and sin, 2 multiplies


def real_fft_flops(n):
    """Real FLOPs of one real-input (or real-output) FFT of length n: 5 n log2(n) / 2."""
    return sp.Rational(5, 2) * n * sp.log(n, 2)


def nbytes(dtype: str) -> int:
    try:
        return BYTES_PER_ELEMENT[dtype]
    except KeyError:
        raise KeyError(f"unknown dtype {dtype!r}; known: {', '.join(BYTES_PER_ELEMENT)}") from None
