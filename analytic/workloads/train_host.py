"""The host time of an eager training step beyond its forward: the backward's per-kernel host cost.

A train step (``measure/models/steps.py``: forward, loss, ``loss.backward()``) issues its backward
kernels from the autograd engine's thread: for every backward node the engine unpacks the saved
tensors, calls the node's function (for a library's fused block, the custom ``autograd.Function``'s
Python ``backward``: argument re-packing, allocations, one Triton or extension launcher per kernel;
for ATen ops the derivative formula's C++ and its dispatches) and accumulates the gradients it
returns. None of that is the forward modules' Python (``launch.host.ssm_module`` /
``launch.host.hf_module``: paid per forward op call, derived from prefill and decode records), and
the per-class launch costs (``launch.host.triton``, ``torch_eager``, ...) hold only the launch itself,
measured in a tight loop of one call. The whole-model records of 2026-12-03 show the gap: in the
host-bound train steps (GPU idle for most of the step, so the step time is the host's) the step
took 50-90 ms more than the plan's host time with the forward's module terms (mamba2-130m, its
attention hybrid, the graph model, the Hugging Face Mamba-2), while the same models' prefill steps
are predicted within 15-30%.

Rule: the eager step pays, per kernel launch of its backward,

    T_host += N_bwd x ``launch.host.backward_launch``,

N_bwd = sum over the plan's ``fwdbwd`` calls of (launches of the call in ``fwdbwd`` - launches of the
same call in ``fwd``) x its count: the kernels the engine issues. ``launch.host.backward_launch`` is
read off the host-bound train records (``calibrate/runtime_host.py``: (step time - the plan's host
time with the forward module terms) / N_bwd, median over records; held out per model when a model is
predicted). The step still takes max(sum of host, sum of device) (``report.achievable_rows``): the
device-bound train record (llama-3.2-1b, GPU busy 95% of the step) runs at its kernel time, not at
host + device, so the backward's host work overlaps the device through the launch queue as the
forward's does. A graph runtime pays none of it (one replay); a compiled runtime's launches replace
every class (``runtime.Runtime.launch_class``: AOTAutograd compiles the backward too), so it pays
none either. An op-level forward-backward call (``measure/backends/common.py``: one ``torch.autograd.grad``
of a graph the call records and frees) pays the same term per backward kernel (``execution.as_measured``).

One term serves library and native backwards: the ATen derivatives of Hugging Face's Qwen2.5-0.5B and Llama-3.2-1B,
host-paced on one H100, cost ~39 us per added backward kernel beside the runtime probe's tiny Llama at 34.8 us,
and their training steps ran at 0.70-0.71 of this rule's host estimate where their forward steps ran at 0.55-0.58
(results/h100/2026-12-06/host-split; on the H200's out-of-sample run 0.80 against 0.77): the backward is not
over-charged against the forward; what moves is the host's speed, run to run.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from .precision import Precision

KEY = "backward_launch"  # the host class (hwspecs.schema.HOST_CLASSES) paid per backward kernel launch


def pays_backward(phase: str, launch: str, runtime=None) -> bool:
    """Whether a step of ``phase`` in launch regime ``launch`` under ``runtime`` (None: plain eager)
    pays the backward's per-launch host cost (see the module docstring)."""
    return phase == "train" and launch == "eager" and not (runtime is not None and runtime.launch_class)


@functools.lru_cache(maxsize=256)
def backward_launches(calls: tuple, dtype: str | Precision, phase: str, batch: float, length: float) -> float:
    """N_bwd of a plan's op calls at one (batch, length) point: the launches of its ``fwdbwd`` calls
    beyond their forward's (x count; 0 outside training)."""
    from .evaluate import compile_plan, evaluate_plan, phase_grid
    from ..roofline import COL

    train = tuple(c for c in calls if c.mode == "fwdbwd")
    if phase != "train" or not train:
        return 0.0
    fwd = tuple(dataclasses.replace(c, mode="fwd") for c in train)
    grid = phase_grid(phase, np.array([[float(batch)]]), np.array([[float(length)]]))
    total = 0.0
    for plan_calls, sign in ((train, 1.0), (fwd, -1.0)):
        w, _ = evaluate_plan(compile_plan(plan_calls, dtype), grid, (1, 1))
        total += sign * float(w[:, COL["launches"]].sum())
    return max(0.0, total)
