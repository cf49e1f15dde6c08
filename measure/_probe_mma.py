"""The attained rate of the warp-synchronous tensor-core instruction ``mma.sync`` (CUDA only), for the
achievable model's tensor-instruction classes (``compute.tensor_mma_sync.<dtype>``).

Why: kernels written for sm80 (FlashAttention-2, the CUTLASS kernels of PyTorch's memory-efficient
attention) issue ``mma.sync.aligned.m16n8k16`` from each warp; on Hopper the full tensor-core rate is
reached only by the asynchronous warpgroup instruction ``wgmma`` (Shah et al., FlashAttention-3,
arXiv 2407.08608, Sec. 2), which cuBLAS uses and the ``compute.tensor.<dtype>`` probe measures.

How: a CUDA kernel (torch.utils.cpp_extension.load_inline) in which every warp runs ``iters`` rounds of
``CHAINS`` independent ``mma.sync.aligned.m16n8k16.row.col.f32.<dt>.<dt>.f32`` on register operands
(no memory traffic in the loop; independent accumulators so the issue rate, not one instruction's
latency, binds), 8 warps per block, ``BLOCKS_PER_SM`` blocks per SM. FLOPs = warps x iters x CHAINS x
2 x 16 x 8 x 16; rate = FLOPs / median time. The accumulators are summed and stored so that nothing
is removed by the compiler.
"""

from __future__ import annotations

CHAINS = 4            # independent accumulators per warp
WARPS_PER_BLOCK = 8
BLOCKS_PER_SM = 4
FLOPS_PER_MMA = 2 * 16 * 8 * 16  # m16n8k16, an FMA = 2 FLOPs

MMA_CPP = r"""
#include <torch/extension.h>
void mma_loop_launch(torch::Tensor out, int64_t blocks, int64_t iters, bool bf16);
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("mma_loop", &mma_loop_launch); }
"""

MMA_CU_TEMPLATE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cstdint>
template <bool BF16>
__global__ void mma_loop_kernel(float* out, int iters) {
  uint32_t a[4], b[2];
  #pragma unroll
  for (int i = 0; i < 4; ++i) a[i] = 0x3c003c00u ^ (threadIdx.x * (i + 1));
  b[0] = 0x3c003c00u ^ threadIdx.x; b[1] = 0x3c003c00u ^ (threadIdx.x << 1);
  float c[{chains}][4];
  #pragma unroll
  for (int j = 0; j < {chains}; ++j) { c[j][0] = c[j][1] = c[j][2] = c[j][3] = 0.f; }
  for (int it = 0; it < iters; ++it) {
    #pragma unroll
    for (int j = 0; j < {chains}; ++j) {
      if (BF16) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
          : "+f"(c[j][0]), "+f"(c[j][1]), "+f"(c[j][2]), "+f"(c[j][3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
      } else {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
          : "+f"(c[j][0]), "+f"(c[j][1]), "+f"(c[j][2]), "+f"(c[j][3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
      }
    }
  }
  float s = 0.f;
  #pragma unroll
  for (int j = 0; j < {chains}; ++j) s += c[j][0] + c[j][1] + c[j][2] + c[j][3];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
void mma_loop_launch(torch::Tensor out, int64_t blocks, int64_t iters, bool bf16) {
  TORCH_CHECK(out.is_cuda() && out.scalar_type() == torch::kFloat32 && out.numel() >= blocks * {threads},
              "mma_loop: a CUDA fp32 tensor of blocks x threads elements");
  auto stream = at::cuda::getCurrentCUDAStream().stream();
  if (bf16) mma_loop_kernel<true><<<blocks, {threads}, 0, stream>>>(out.data_ptr<float>(), (int)iters);
  else mma_loop_kernel<false><<<blocks, {threads}, 0, stream>>>(out.data_ptr<float>(), (int)iters);
}
"""
# the template's only substitutions are {chains} and {threads}; its C++ braces are left alone
MMA_CU = MMA_CU_TEMPLATE.replace("{chains}", str(CHAINS)).replace("{threads}", str(32 * WARPS_PER_BLOCK))


def build():
    """The probe extension (nvcc through load_inline), in a folder named by a hash of its sources."""
    import hashlib
    import os
    import tempfile

    import torch
    from torch.utils.cpp_extension import load_inline

    tag = hashlib.sha1((MMA_CPP + MMA_CU + torch.__version__).encode()).hexdigest()[:12]
    folder = os.path.join(tempfile.gettempdir(), f"ssmbench_probe_mma_{tag}")
    os.makedirs(folder, exist_ok=True)
    major, minor = torch.cuda.get_device_capability()
    return load_inline(name="ssmbench_probe_mma", cpp_sources=MMA_CPP, cuda_sources=MMA_CU, build_directory=folder,
                       extra_cuda_cflags=[f"-gencode=arch=compute_{major}{minor},code=sm_{major}{minor}", "-O3"],
                       verbose=False)


def mma_flops(blocks: int, iters: int) -> int:
    """FLOPs of one launch: every warp runs iters x CHAINS mma.sync m16n8k16."""
    return blocks * WARPS_PER_BLOCK * iters * CHAINS * FLOPS_PER_MMA


def measure(ctx, iters: int = 8192) -> None:
    """Measure ``compute.tensor_mma_sync.<dt>`` for bf16 and fp16 through ``ctx`` (the probe's Ctx)."""
    import torch

    ext = build()
    sms = torch.cuda.get_device_properties(ctx.device).multi_processor_count
    blocks = sms * BLOCKS_PER_SM
    out = torch.empty(blocks * 32 * WARPS_PER_BLOCK, device=ctx.device)
    for dt in ("bf16", "fp16"):
        key = f"compute.tensor_mma_sync.{dt}"
        med, reps = ctx.timed(key, lambda dt=dt: ext.mma_loop(out, blocks, iters, dt == "bf16"),
                              target_s=ctx.target_s)
        ctx.measure(key, mma_flops(blocks, iters) / med,
                    f"CUDA kernel, {blocks} blocks x {WARPS_PER_BLOCK} warps, each warp {iters} rounds of {CHAINS} "
                    f"independent mma.sync.aligned.m16n8k16 {dt} (fp32 accumulate) on register operands, "
                    f"{FLOPS_PER_MMA} FLOPs each, median of {reps}; {ctx.ver}")
