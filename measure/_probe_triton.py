"""Triton kernels of ``ssmbench probe`` (CUDA only; imported only when Triton is present).

Module-level so that Triton's JIT finds ``tl`` among the kernels' globals.
"""

import triton
import triton.language as tl


@triton.jit
def fma_loop(x_ptr, n, a, b, ITERS: tl.constexpr, BLOCK: tl.constexpr):
    """ITERS dependent FMAs per element, coefficients passed at run time (no constant folding)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(x_ptr + offs, mask=mask, other=0.0)
    for _ in range(ITERS):
        y = tl.fma(y, a, b)  # one fused multiply-add: 2 FLOPs
    tl.store(x_ptr + offs, y, mask=mask)


@triton.jit
def exp_loop(x_ptr, n, ITERS: tl.constexpr, BLOCK: tl.constexpr):
    """ITERS dependent exp per element; y = exp(-y) converges to 0.567..., so it stays finite."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(x_ptr + offs, mask=mask, other=0.0)
    for _ in range(ITERS):
        y = tl.exp(-y)
    tl.store(x_ptr + offs, y, mask=mask)
