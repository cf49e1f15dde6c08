"""Triton kernels of the probe's achievable-time measurements (CUDA only; imported only when Triton
is present). Module-level so that Triton's JIT finds ``tl`` among the kernels' globals.

- ``chase``: one program walks a pointer chain (each load's address is the previous load's value),
  so every step waits for the full load-to-use latency; ``.cg`` loads bypass L1, so a step is served
  by L2 or, on an L2 miss, by DRAM.
- ``read_sum``: a grid-stride read of a buffer, repeated ``reps`` times over the buffer in one
  launch (so that a buffer of a few MiB still gives a launch of ~100 us), ``.cg`` loads; one partial
  sum per program is stored so that the loads cannot be removed.
- ``copy``: a plain block copy (one program per block).
- ``add_one``: the smallest useful kernel, for the per-call cost of a Triton launch.
- ``add_one_autotuned``: the same behind ``triton.autotune`` (two configs, keyed on ``n``, as
  mamba-ssm and fla wrap their kernels), for the per-call cost of an autotuned launch once its
  config is cached.
"""

import triton
import triton.language as tl


@triton.jit
def chase(buf_ptr, state_ptr, steps):
    """Walk ``steps`` links from the index in ``state[0]``; store where the walk ended (the next call
    continues from there, so repeats do not revisit the lines a previous walk brought into L2)."""
    p = tl.load(state_ptr)
    for _ in range(steps):
        p = tl.load(buf_ptr + p, cache_modifier=".cg")
    tl.store(state_ptr, p)


@triton.jit
def read_sum(x_ptr, out_ptr, n_blocks, total, BLOCK: tl.constexpr):
    """Programs stride over ``total`` = reps x n_blocks block reads of the n_blocks-block buffer."""
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for t in range(pid, total, nprog):
        offs = (t % n_blocks).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, cache_modifier=".cg")
    tl.store(out_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


@triton.jit
def add_one(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr) + 1.0)


@triton.autotune(configs=[triton.Config({}, num_warps=1), triton.Config({}, num_warps=2)], key=["n"])
@triton.jit
def add_one_autotuned(x_ptr, n):
    tl.store(x_ptr, tl.load(x_ptr) + 1.0)
