"""Plain-PyTorch backends: the reference functions of ``analytic/ops/*.py`` run eagerly on CPU or CUDA.

Backend names: ``torch_ref`` or ``torch_ref.<impl>`` (e.g. ``torch_ref.loop`` for the Mamba-1 per-step
loop). Each family's ``ref.py`` declares its input recipes (``RECIPES``: per (op, implementation),
how to build the inputs from the case dims, and what decode is) beside its references; the function
timed for a case is the registry's eager reference of its (op, implementation, mode)
(``analytic.registry.reference``). A recipe is registered only if the analytic registry has that op
and implementation and an eager reference for every mode it runs; ``SKIPPED`` says, per op, why
not (no reference is made up here).

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

from functools import partial
from typing import Any

from ...analytic import registry
from ...analytic.ops.common.inputs import Recipe
from ...errors import UserError
from .base import Backend, Prepared, register_backend
from .common import Rand, torch_dtype

SKIPPED: dict[str, str] = {}  # op -> why no torch_ref backend is registered for it


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


def _prepare(recipe: Recipe, case, device, seed: int) -> Prepared:
    import torch

    dt = torch_dtype(case.dtype)
    d = _dims(recipe, case)
    mode = case.mode
    inputs = recipe.step if (mode == "decode" and recipe.step is not None) else recipe.prefill
    fn = registry.reference(recipe.op, recipe.impl, mode, "eager")
    rand = Rand(device, seed)
    built: dict[str, Any] = {}
    for inp in inputs:
        built[inp.name] = inp.make(d, rand, built)
    args = [built[i.name].to(dt) if i.cast and built[i.name].is_floating_point() else built[i.name]
            for i in inputs]
    state_idx = [j for j, i in enumerate(inputs) if i.state]
    snapshot = {j: args[j].clone() for j in state_idx}
    grad_idx = [j for j, i in enumerate(inputs) if i.grad and args[j].is_floating_point()]
    tokens = d["B"] if mode == "decode" else recipe.tokens(d)

    def fresh(hi: bool) -> list:
        """Arguments for a reference: a copy of the initial state, upcast when ``hi``."""
        xs = [snapshot[j].clone() if j in snapshot else a for j, a in enumerate(args)]
        return [_hi(x) for x in xs] if hi else xs

    def forward(xs):
        with torch.no_grad():
            out = fn(*xs)
        return (out, *(xs[j] for j in state_idx)) if state_idx else out

    if mode in ("fwd", "decode"):
        return Prepared(run=lambda: forward(args), reference_hi=lambda: forward(fresh(True)),
                        reference_lo=lambda: forward(fresh(False)), output_of=_flatten, tokens=tokens,
                        notes=recipe.notes)

    def with_grads(xs):
        xs = [x.detach().requires_grad_(j in grad_idx) if x.is_floating_point() else x for j, x in enumerate(xs)]
        return xs, _flatten(fn(*xs))[0]  # the first output is differentiated

    with torch.no_grad():
        y_shape = _flatten(fn(*args))[0].shape
    dy = Rand(device, seed + 1).normal(tuple(y_shape), dt)  # fixed upstream gradient

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
        return "op not in the analytic registry"
    if r.impl not in op.impl_map:
        return f"the op has no implementation {r.impl!r}"
    impl = op.impl_map[r.impl]
    wanted = (("fwd", "bwd", "fwdbwd") if r.prefill is not None else ()) + (("decode",) if r.decode else ())
    modes = tuple(m for m in wanted if impl.supports(m) and m not in r.exclude_modes)
    if not modes:
        return f"impl {r.impl!r} has no cost rule for any mode this recipe runs"
    try:
        fns = [registry.reference(r.op, r.impl, m, "eager") for m in modes]
    except UserError as exc:
        return str(exc)
    names = list(dict.fromkeys(f"{f.__module__}:{f.__name__}" for f in fns))
    register_backend(Backend(
        name=r.backend, op=r.op, impl=r.impl, modes=modes, devices=("cpu", "cuda"),
        prepare=partial(_prepare, r), dtypes=r.dtypes,
        description=f"plain PyTorch ({', '.join(names)}), eager; analytic impl {r.impl}",
    ))
    return None


def _register_all() -> None:
    ops = registry.all_ops()
    recipes: list[Recipe] = []
    for family in sorted({o.family for o in ops.values()}):
        recipes.extend(getattr(registry.family_ref_module(family), "RECIPES", ()))
    for r in recipes:
        why = _register(r, ops)
        if why is not None:
            SKIPPED[f"{r.op} ({r.backend})"] = why
    have = {r.op for r in recipes}
    for name in ops:
        if name not in have:
            SKIPPED[name] = "no input recipe beside an eager reference in its family's ref.py (the comments there say why)"


_register_all()
