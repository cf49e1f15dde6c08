"""Whole-model measurements (issue #15): random-initialised models built from the workload files of
``analytic/workloads/models/``, timed per phase (prefill, decode step eager and CUDA graph, training
step) with the one timing primitive and NVML energy, and broken down by kernel with torch.profiler.

- ``kernel_map``: the one table that maps a kernel name to a characterization part and op (CPU);
- ``configs``: a workload Model as mamba-ssm ``MambaConfig`` / Hugging Face config keys (CPU);
- ``records``: the model record and the model-run file (``docs/schemas/model.schema.json``) (CPU);
- ``suite``: the model suite YAML (CPU);
- ``build``, ``domains``, ``steps``, ``profiling``, ``runner``: what runs on the GPU.
"""
