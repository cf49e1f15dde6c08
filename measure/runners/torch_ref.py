"""Plain-PyTorch backends: the reference functions of ``analytic/ops/*.py`` run eagerly on CPU or CUDA.

Backend names: ``torch_ref`` runs the op's registered reference (``Op.reference``);
``torch_ref.<impl>`` runs another plain-PyTorch function of the same op module that executes a
different analytic implementation (e.g. ``torch_ref.loop`` for the Mamba-1 per-step loop). The
recipes (``_torch_ref_recipes.py``) say, per op, which analytic implementation each function is
(the eager algorithm it executes), how to build its inputs from the case dims, and what decode is.
An op is registered only if the analytic registry has it with that implementation and the function
imports; ``SKIPPED`` says, per op, why not (no reference is made up here).

Modes:
- ``fwd``: the function under ``torch.no_grad``.
- ``bwd``: the forward (with autograd) runs once in ``prepare``; the timed region is
  ``torch.autograd.grad`` of the first output with a fixed random upstream gradient (graph retained).
- ``fwdbwd``: forward with autograd and that backward, per call; outputs are (outputs..., grads...).
- ``decode``: either the forward with L = 1 (ops whose decode is "the L = 1 case"; a case giving
  another L is an error), or a step function with a recurrent state updated in place. The timed
  calls keep updating the live state (the values drift, the work does not); the references start from
  a copy of the initial state, and the updated state is compared as an output.

Inputs are drawn in fp32 (or complex64) from a seeded generator and rounded to the case dtype where
the kernels take them at that dtype (parameters such as A, D, dt bias stay fp32, as mamba-ssm keeps
them). ``reference_hi`` runs the same function on those same rounded values upcast to fp64 /
complex128, so the gate measures arithmetic error, not input rounding; functions that upcast to fp32
internally (the norms) are fp32-accurate there. ``reference_lo`` is the function at the case dtype:
for these backends it is the timed computation itself, so they pass the gate by construction; they
are the baseline the kernel backends are held to.
"""

from __future__ import annotations

import importlib
from functools import partial
from typing import Any, Callable

from ._torch_ref_recipes import RECIPES, SKIP_NOTES, Call, Rand, Recipe
from .base import Backend, Prepared, register_backend

TORCH_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
SKIPPED: dict[str, str] = {}  # op -> why no torch_ref backend is registered for it


def _resolve(reference: str) -> Callable:
    mod, _, fn = reference.partition(":")
    return getattr(importlib.import_module(mod), fn)


def _flatten(out: Any) -> list:
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _flatten(o)]
    raise TypeError(f"reference returned {type(out).__name__}, expected tensors")


def _dims(recipe: Recipe, case) -> dict[str, int]:
    d = dict(case.dims)
    if case.mode == "decode" and recipe.step is None:
        if d.get("L", 1) != 1:
            raise ValueError(f"{case.op} decode is the L = 1 forward; the case gives L = {d['L']} "
                             "(leave L out of a decode grid)")
        d["L"] = 1
    return d


def _hi(t):
    import torch

    if t.is_complex():
        return t.to(torch.complex128)
    return t.to(torch.float64) if t.is_floating_point() else t


def _prepare(recipe: Recipe, reference: str, case, device, seed: int) -> Prepared:
    import torch

    dt = getattr(torch, TORCH_DTYPES[case.dtype])
    d = _dims(recipe, case)
    mode = case.mode
    call: Call = recipe.step if (mode == "decode" and recipe.step is not None) else recipe.prefill
    fn = _resolve(call.fn or reference)
    kw = call.kwargs(d)
    rand = Rand(device, seed)
    built: dict[str, Any] = {}
    for inp in call.inputs:
        built[inp.name] = inp.make(d, rand, built)
    args = [built[i.name].to(dt) if i.cast and built[i.name].is_floating_point() else built[i.name]
            for i in call.inputs]
    state_idx = [j for j, i in enumerate(call.inputs) if i.state]
    snapshot = {j: args[j].clone() for j in state_idx}
    grad_idx = [j for j, i in enumerate(call.inputs) if i.grad and args[j].is_floating_point()]
    tokens = d["B"] if mode == "decode" else recipe.tokens(d)

    def fresh(hi: bool) -> list:
        """Arguments for a reference: a copy of the initial state, upcast when ``hi``."""
        xs = [snapshot[j].clone() if j in snapshot else a for j, a in enumerate(args)]
        return [_hi(x) for x in xs] if hi else xs

    def forward(xs):
        with torch.no_grad():
            out = fn(*xs, **kw)
        return (out, *(xs[j] for j in state_idx)) if state_idx else out

    if mode in ("fwd", "decode"):
        return Prepared(run=lambda: forward(args), reference_hi=lambda: forward(fresh(True)),
                        reference_lo=lambda: forward(fresh(False)), output_of=_flatten, tokens=tokens,
                        notes=recipe.notes)

    def with_grads(xs):
        xs = [x.detach().requires_grad_(j in grad_idx) if x.is_floating_point() else x for j, x in enumerate(xs)]
        return xs, _flatten(fn(*xs, **kw))[0]  # the first output is differentiated

    with torch.no_grad():
        y_shape = _flatten(fn(*args, **kw))[0].shape
    dy = Rand(device, seed + 1).normal(tuple(y_shape)).to(dt)  # fixed upstream gradient

    def fwdbwd(xs, upstream):
        xs, y = with_grads(xs)
        grads = torch.autograd.grad(y, [xs[j] for j in grad_idx], upstream)
        return (y.detach(), *grads) if mode == "fwdbwd" else grads

    if mode == "bwd":
        xs_run, y_run = with_grads(args)
        wrt = [xs_run[j] for j in grad_idx]

        def run():
            return torch.autograd.grad(y_run, wrt, dy, retain_graph=True)
        note = "bwd: the timed region is autograd.grad of a retained forward graph"
    else:
        def run():
            return fwdbwd(args, dy)
        note = ""
    return Prepared(run=run, reference_hi=lambda: fwdbwd(fresh(True), dy.double()),
                    reference_lo=lambda: fwdbwd(fresh(False), dy), output_of=_flatten, tokens=tokens,
                    notes="; ".join(n for n in (recipe.notes, note) if n))


def _register(r: Recipe, ops: dict) -> str | None:
    """Register one recipe; returns why it was not registered, or None."""
    op = ops.get(r.op)
    if op is None:
        return "op not in the analytic registry (yet)"
    if r.impl not in op.impl_map:
        return f"the op has no implementation {r.impl!r}"
    reference = op.reference
    fns = [c.fn or reference for c in (r.prefill, r.step) if c is not None]
    if any(f is None for f in fns):
        return "the op has no reference function"
    for f in fns:
        try:
            _resolve(f)
        except (ImportError, AttributeError) as exc:
            return f"function {f} not importable: {exc}"
    impl = op.impl_map[r.impl]
    wanted = (("fwd", "bwd", "fwdbwd") if r.prefill is not None else ()) + (("decode",) if r.decode else ())
    modes = tuple(m for m in wanted if impl.supports(m) and m not in r.exclude_modes)
    if not modes:
        return f"impl {r.impl!r} has no cost rule for any mode this recipe runs"
    register_backend(Backend(
        name=r.backend, op=r.op, impl=r.impl, modes=modes, devices=("cpu", "cuda"),
        prepare=partial(_prepare, r, reference), dtypes=r.dtypes,
        description=f"plain PyTorch ({', '.join(fns)}), eager; analytic impl {r.impl}",
    ))
    return None


def _register_all() -> None:
    from ...analytic import registry

    ops = registry.all_ops()
    for r in RECIPES:
        why = _register(r, ops)
        if why is not None:
            SKIPPED[f"{r.op} ({r.backend})"] = why
    have = {r.op for r in RECIPES}
    for name in ops:
        if name in SKIP_NOTES:
            SKIPPED[f"{name} (torch_ref)" if name in have else name] = SKIP_NOTES[name]
        elif name not in have:
            SKIPPED[name] = "no input recipe in measure/runners/_torch_ref_recipes.py yet"


_register_all()
