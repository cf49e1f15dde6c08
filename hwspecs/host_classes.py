"""The host classes of a spec's ``launch.host.<class>`` keys: the software paths whose host-side cost per
call differs, and which of them are library kernels, runtime terms or measured on one library's calls.
A vocabulary with the reasons for each class, kept apart from ``schema.py`` (which re-exports the names and
checks a spec's ``launch.host`` keys against them) so that module stays about the spec's structure."""

from __future__ import annotations

# Backend classes whose host-side cost per call differs (the CPU time to issue one kernel through
# that software path; the device runs ahead while the host issues): an eager PyTorch op (dispatcher,
# allocator, launch), a Triton kernel (its Python launcher: argument binding, specialisation), an
# autotuned Triton kernel (the same behind triton.autotune's Python-side config lookup), a
# CUDA-extension op (a pybind11 call into a library's own launcher), a cuBLAS matmul issued by
# PyTorch, a torch SDPA call (backend selection and checks, then the FlashAttention kernel), an SDPA call
# on the cuDNN backend (cuDNN's graph cache), one CUDA-graph replay (``cuda_graph``: the host cost of
# launching a captured graph, paid once per replay whatever its nodes); ``autograd``: the autograd engine's own host time for one
# ``torch.autograd.grad`` call of a one-node graph (hand-off to its device thread and back), beyond the kernels it issues;
# and ``autograd_node``: the engine's host time per further node of the backward graph (a view's or a
# reshape's backward issues no kernel but still costs its node), beyond the kernels the node issues.
# Two runtime classes (``analytic/runtime.py``, measured by ``measure/models/runtime_probe.py``):
# ``hf_module``, the Python time of one Hugging Face module call beyond the kernels it issues (argument
# handling, cache bookkeeping, hooks), paid per op call of a model's plan; ``compiled``, the host time per
# kernel launch from a torch.compile (Inductor) graph, which replaces every other class's per-launch cost.
# ``ssm_module``, the same for mamba-ssm's eager modules (Mamba.step / Mamba2.step: rearranges, splits,
# state bookkeeping in Python around the library calls); ``hf_ssm_module``, ``hf_module`` for the op calls of a
# Hugging Face state-space mixer (transformers' Mamba2Mixer.cuda_kernels_forward: the chunked-scan call's
# argument handling and its eager gated norm's Python), whose module code differs from the Llama-style modules'.
# ``ssm_forward``, ``ssm_forward_mamba2``, ``ssm_forward_mamba3``: ``ssm_module`` for the op calls of a prefill
# (``analytic/runtime.FORWARD_PHASES``: an inference forward; a train step's forward, which also records the autograd
# graph, keeps ``ssm_module``), whose module code is the modules' ``forward`` rather than ``step()``: Mamba's
# fast path (``mamba_inner_fn``, one custom autograd function around the kernels), Mamba2's
# ``mamba_split_conv1d_scan_combined`` (its Python splits, rearranges and the chunked scan's argument handling) and
# Mamba3's forward differ by 4x per op call. Read off the modules' forward cases measured alone (host-bound
# ``block:mamba1/2/3`` cases, ``calibrate/runtime_host.block_rows``); ``ssm_forward`` (Mamba's) stands in for
# the kinds measured in no such case (mamba-ssm's MHA and GatedMLP: one module call around one or two library
# calls each, as Mamba's fast path), and ``ssm_module`` where a spec knows no forward class.
# ``backward_launch``: the host time per kernel launch of an eager training step's backward beyond its
# class's launch cost (the autograd engine's node walk, saved-tensor unpacking, custom Functions' Python
# ``backward``, gradient accumulation), read off host-bound whole-model train records
# (``analytic/workloads/train_host.py``, ``calibrate/runtime_host.py``).
# ``triton_autotune_ssd``: ``triton_autotune`` for the launchers of mamba-ssm's chunked SSD
# (ssd_combined.py's ``_mamba_chunk_scan_combined_fwd`` and its backward: ~30 arguments per kernel, each
# launcher's output allocations and ``torch.cuda.device`` guard), measured on that library call itself
# (scripts/percall_split.py: 163-173 us per kernel on the H200 host, against 82-107 us for the other
# autotuned libraries' launchers in the same session); where a spec does not know it, ``triton_autotune``
# stands in (``analytic/achievable.py``). The absolute value carries its session's host speed: the op-level
# suite records of other sessions time the whole call at 390-505 us (the calibration's per-session host
# factors span 0.85-1.53), so host-bound op-level SSD calls are over-estimated where whole-model Mamba-2
# prefill steps, whose residual host time it explains, are not.
HOST_CLASSES = ("torch_eager", "triton", "triton_autotune", "triton_autotune_ssd", "cuda_extension", "cublas",
                "sdpa", "cudnn", "cuda_graph", "autograd", "autograd_node", "hf_module", "hf_ssm_module",
                "ssm_module", "ssm_forward", "ssm_forward_mamba2", "ssm_forward_mamba3", "compiled", "backward_launch")
# host class -> the more general class whose value stands in where a spec does not know it
HOST_CLASS_FALLBACK = {"triton_autotune_ssd": "triton_autotune"}
# The classes whose kernels are library kernels (``launch.library_fixed``): Triton kernels and CUDA-extension
# kernels, as opposed to ATen's elementwise kernels (the trivial graph node's class) and cuBLAS's (``gemm_fixed``).
LIBRARY_KERNEL_CLASSES = ("triton", "triton_autotune", "triton_autotune_ssd", "cuda_extension")
# The classes measured by the runtime probe (or from whole-model records) rather than by ``ssmbench
# probe``'s per-call loop.
RUNTIME_HOST_CLASSES = ("hf_module", "hf_ssm_module", "ssm_module", "ssm_forward", "ssm_forward_mamba2",
                        "ssm_forward_mamba3", "compiled", "backward_launch")
# The classes measured on one library's own calls (scripts/percall_split.py), which the probe's generic
# per-call loop does not represent.
LIBRARY_CALL_HOST_CLASSES = ("triton_autotune_ssd",)
