"""Shared machinery for the GPU kernel backends: seeded inputs, the fwd / bwd / fwdbwd regions,
and references evaluated slice by slice so that an fp64 reference of a large case fits in memory.

How a differentiable kernel case is built (``prepare_diff``):

- ``fwd``: ``run()`` calls the kernel once and returns its output.
- ``fwdbwd``: ``run()`` calls the kernel on leaf tensors that require grad, then
  ``torch.autograd.grad(out, leaves, grad_out)``; it returns ``[out, *grads]`` in the order of
  ``KernelSpec.diff``. ``autograd.grad`` (not ``.backward()``) so that no ``.grad`` accumulates
  between calls: the region is exactly one forward and one backward.
- ``bwd``: the forward runs once in ``prepare`` with its graph kept; ``run()`` is the backward only
  (``retain_graph=True`` so that it can be replayed) and returns the grads.

References (``reference_hi``/``reference_lo``) take the SAME input tensors:
- hi: every floating input cast to fp64, the reference evaluated with ``hi=True`` (fp64 throughout);
- lo: the kernel's own input tensors as they are (case dtype for activations, fp32 where the kernel
  takes fp32 parameters), the reference evaluated with ``hi=False``: matmul operands and results at
  the case dtype (fp32 accumulation inside, as cuBLAS does), decays, cumulative sums, softmax and
  recurrent state in fp32 -- what a plain PyTorch implementation at the case dtype does.
For fwdbwd the references differentiate the same function with autograd and the same ``grad_out``.
A reference is evaluated over ``Slice``s (by default one batch block at a time): outputs are
written back into their places and gradients are summed into theirs (a shared input -- a parameter,
or a KV head read by several query-head blocks -- collects the sum over the slices that read it). fp64 needs no more than one slice in memory at once.

Decode cases (``prepare_step``) have no autograd. Kernels that update a state in place
(``selective_state_update``, ``causal_conv1d_update``) advance the live state on every ``run()``;
the references start from a snapshot taken in ``prepare``. The correctness gate calls ``run()``
first after ``prepare`` (``measure/gate.py``), so the compared step starts from that snapshot.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from .base import Prepared, Unavailable

TORCH_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def torch_dtype(name: str):
    import torch

    return getattr(torch, TORCH_DTYPES[name])


def require_cuda(device) -> None:
    import torch

    if getattr(device, "type", str(device)) != "cuda" or not torch.cuda.is_available():
        raise Unavailable(f"needs a CUDA device (got {device}; torch.cuda.is_available()="
                          f"{torch.cuda.is_available()})")


def gate_reference(case):
    """The kernel-semantics reference of the case's (op, implementation, mode), resolved through the
    analytic registry (declared in the family's ``ref.py``): ``fn(..., hi)``."""
    from ...analytic.registry import reference

    return reference(case.op, case.impl, case.mode, "gate")


def dims_of(case, names: Sequence[str], defaults: Mapping[str, int] | None = None) -> list[int]:
    """The case's values for ``names``; a missing one falls back to ``defaults`` or raises."""
    out = []
    for n in names:
        if n in case.dims:
            out.append(int(case.dims[n]))
        elif defaults and n in defaults:
            out.append(int(defaults[n]))
        else:
            raise ValueError(f"case {case.key()} lacks dimension {n}; backend needs {', '.join(names)}")
    return out


class Rand:
    """Seeded random tensors generated on the device (fast; reproducible for a given seed), drawn in
    fp32 and cast to ``dtype`` when one is given. The kernel backends and the plain-PyTorch input
    recipes (``analytic/ops/common/inputs.py``) draw from this one class."""

    def __init__(self, device, seed: int):
        import torch

        self.torch, self.device = torch, device
        self.gen = torch.Generator(device=device)
        self.gen.manual_seed(int(seed))

    def normal(self, shape, dtype=None, std: float = 1.0, mean: float = 0.0):
        x = self.torch.randn(tuple(shape), generator=self.gen, device=self.device, dtype=self.torch.float32)
        x = x * std + mean if mean else x * std
        return x if dtype is None else x.to(dtype)

    def uniform(self, shape, dtype=None, lo: float = 0.0, hi: float = 1.0):
        x = self.torch.rand(tuple(shape), generator=self.gen, device=self.device, dtype=self.torch.float32)
        x = x * (hi - lo) + lo
        return x if dtype is None else x.to(dtype)

    def randint(self, high: int, shape):
        return self.torch.randint(0, high, tuple(shape), generator=self.gen, device=self.device)

    def dt_bias(self, shape, dt_min: float = 1e-3, dt_max: float = 1e-1):
        """Mamba's dt initialisation: dt log-uniform in [dt_min, dt_max], bias = softplus^-1(dt), fp32."""
        torch = self.torch
        dt = torch.exp(self.uniform(shape, torch.float32, math.log(dt_min), math.log(dt_max)))
        return dt + torch.log(-torch.expm1(-dt))


def as_list(out) -> list:
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    return list(out)


@dataclass
class Slice:
    """Index tuples of one reference slice: per input (None = shared, used whole) and for the output."""

    inputs: dict[str, tuple | None]
    output: tuple


def batch_slices(batch: int, step: int, batched: Sequence[str], names: Sequence[str]) -> list[Slice]:
    """Slices of ``step`` batch elements; inputs in ``batched`` are cut on dim 0, the rest shared."""
    step = max(1, min(int(step), batch))
    out = []
    for b0 in range(0, batch, step):
        idx = (slice(b0, min(batch, b0 + step)),)
        out.append(Slice({n: (idx if n in batched else None) for n in names}, idx))
    return out


@dataclass
class KernelSpec:
    """A differentiable kernel case. ``kernel(inputs) -> Tensor``; ``reference(inputs, hi) -> Tensor``."""

    kernel: Callable[[dict], Any]
    reference: Callable[[dict, bool], Any]
    inputs: dict[str, Any]
    diff: tuple[str, ...]  # inputs differentiated in bwd/fwdbwd, in output order
    slices: list[Slice]
    tokens: int
    notes: str = ""
    out_shape: tuple | None = None  # output shape (for grad_out); probed with one call if None
    out_dtype: Any = None  # output dtype (for grad_out); probed with one call if None
    grad_out: Callable[[Rand, tuple, Any], Any] | None = None  # builds grad_out (default: contiguous normal)
    extra: dict = field(default_factory=dict)


def _cast_hi(t):
    import torch

    if isinstance(t, torch.Tensor) and t.is_floating_point():
        return t.detach().to(torch.float64)
    return t.detach() if isinstance(t, torch.Tensor) else t


def _take(t, idx):
    return t if idx is None else t[idx]


def eval_reference(spec: KernelSpec, mode: str, hi: bool, grad_out=None) -> list:
    """The reference over all slices; returns [out] (fwd), [out, *grads] (fwdbwd) or grads (bwd)."""
    import torch

    prep = _cast_hi if hi else (lambda t: t.detach() if isinstance(t, torch.Tensor) else t)
    need_grad = mode in ("bwd", "fwdbwd")
    out_full = None
    grads_full: dict[str, Any] = {}
    for sl in spec.slices:
        sub = {n: prep(_take(t, sl.inputs.get(n))) for n, t in spec.inputs.items()}
        if need_grad:
            for n in spec.diff:
                sub[n] = sub[n].clone().requires_grad_(True)
            out = spec.reference(sub, hi)
            go = grad_out[sl.output].to(device=out.device, dtype=out.dtype)
            grads = torch.autograd.grad(out, [sub[n] for n in spec.diff], go)
            out = out.detach()
        else:
            with torch.no_grad():
                out = spec.reference(sub, hi)
            grads = ()
        if out_full is None:
            full_shape = tuple(spec.out_shape) if spec.out_shape is not None else None
            if full_shape is None:
                raise ValueError("KernelSpec.out_shape must be known before evaluating a reference")
            out_full = torch.empty(full_shape, dtype=out.dtype, device=out.device)
        out_full[sl.output] = out
        for n, g in zip(spec.diff, grads):
            idx = sl.inputs.get(n)
            if n not in grads_full:
                grads_full[n] = torch.zeros(spec.inputs[n].shape, dtype=g.dtype, device=g.device)
            if idx is None:
                grads_full[n] += g
            else:  # += : slices of a shared input (KV heads of a query-head block) overlap
                grads_full[n][idx] += g
    if mode == "fwd":
        return [out_full]
    grads = [grads_full[n] for n in spec.diff]
    if mode == "bwd":
        return grads
    return [out_full, *grads]


def prepare_diff(spec: KernelSpec, mode: str, rand: Rand) -> Prepared:
    """Prepared for a differentiable kernel in mode fwd, bwd or fwdbwd (see the module docstring)."""
    import torch

    if mode not in ("fwd", "bwd", "fwdbwd"):
        raise ValueError(f"prepare_diff: mode {mode!r} is not fwd, bwd or fwdbwd")
    inputs = spec.inputs
    if spec.out_shape is None or spec.out_dtype is None:
        with torch.no_grad():
            probe = spec.kernel(inputs)
        spec.out_shape, spec.out_dtype = tuple(probe.shape), probe.dtype
        del probe
    if mode == "fwd":
        def run():
            return spec.kernel(inputs)

        return Prepared(run=run, reference_hi=lambda: eval_reference(spec, "fwd", True),
                        reference_lo=lambda: eval_reference(spec, "fwd", False), output_of=as_list,
                        tokens=spec.tokens, notes=spec.notes)

    leaves = dict(inputs)
    for n in spec.diff:
        leaves[n] = inputs[n].detach().requires_grad_(True)
    leaf_list = [leaves[n] for n in spec.diff]
    grad_out = (spec.grad_out or (lambda r, shape, dt: r.normal(shape, dt)))(rand, spec.out_shape, spec.out_dtype)
    if mode == "fwdbwd":
        def run():
            out = spec.kernel(leaves)
            return [out, *torch.autograd.grad(out, leaf_list, grad_out)]
    else:
        held = spec.kernel(leaves)  # the forward whose graph the timed backward replays

        def run():
            return list(torch.autograd.grad(held, leaf_list, grad_out, retain_graph=True))

    notes = spec.notes + (" " if spec.notes else "") + (
        f"Outputs compared: {'out, ' if mode == 'fwdbwd' else ''}gradients of {', '.join(spec.diff)}.")
    return Prepared(run=run, reference_hi=lambda: eval_reference(spec, mode, True, grad_out),
                    reference_lo=lambda: eval_reference(spec, mode, False, grad_out), output_of=as_list,
                    tokens=spec.tokens, notes=notes)


def prepare_step(kernel: Callable[[dict], list], reference: Callable[[dict, bool], list], inputs: dict,
                 tokens: int, notes: str = "", state_names: Sequence[str] = (), warmup: bool = True) -> Prepared:
    """Prepared for a decode step (no autograd). ``kernel(inputs)`` and ``reference(inputs, hi)`` both
    return lists of tensors in the same order. Inputs in ``state_names`` are updated in place by the
    kernel; the references start from a snapshot taken here. ``warmup`` calls the kernel once here
    (Triton compiles, availability errors surface in prepare) and restores the states afterwards."""
    import torch

    snapshot = {n: inputs[n].detach().clone() for n in state_names}
    if warmup:
        with torch.no_grad():
            kernel(inputs)
        restore(inputs, snapshot)

    def ref(hi: bool):
        x = {}
        for n, t in inputs.items():
            t = snapshot[n].clone() if n in snapshot else t
            x[n] = _cast_hi(t) if hi else t
        with torch.no_grad():
            return reference(x, hi)

    def run():
        return kernel(inputs)

    return Prepared(run=run, reference_hi=lambda: ref(True), reference_lo=lambda: ref(False),
                    output_of=as_list, tokens=tokens, notes=notes)


def restore(inputs: dict, snapshot: Mapping[str, Any]) -> None:
    for n, t in snapshot.items():
        inputs[n].copy_(t)


def slice_step_for(bytes_per_batch_element: float, batch: int, budget_bytes: float = 12e9) -> int:
    """Batch elements per reference slice so that one slice's fp64 working memory stays in budget."""
    return max(1, min(batch, int(budget_bytes // max(1.0, bytes_per_batch_element))))
