"""Suites: YAML lists of entries, each expanding (cartesian product of its grid) into cases.

```yaml
schema_version: 1
name: cpu_smoke
description: optional text
entries:
  - op: linear                 # analytic op ("block:..." / "model:..." for composite cases)
    backend: torch_ref         # a registered backend for that op
    impl: cublas               # optional; must equal the backend's impl (default: the backend's)
    dtype: [fp32, bf16]        # one dtype or a list
    modes: [fwd, bwd]
    grid: {B: [1, 2], L: 16, I: 32, O: [32, 64]}   # a value or a list per dimension
    timing: {cuda_graph: false, flush_l2: true}     # optional per-entry timing switches
    skip_invalid: false        # optional: drop grid points that break the op's constraints
    notes: optional text
```

Loading is strict: an unknown key, op, backend, implementation, dtype or mode, a dimension the op
does not have, a missing dimension the cost needs, a non-positive or non-integer value, a grid point
that breaks the op's constraints (unless ``skip_invalid``) and a case listed twice are each a
``UserError`` naming the file, the entry and what was expected. Every case of an analytic op is
costed at load time, so a suite that loads can be costed in full.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from ..analytic.cases import CASE_DTYPES, Case, is_composite
from ..analytic.conventions import MODES
from ..errors import UserError
from ..files import UniqueKeyLoader, read_user_text

SCHEMA_VERSION = 1
TOP_KEYS = {"schema_version", "name", "description", "entries"}
ENTRY_KEYS = {"op", "backend", "impl", "dtype", "modes", "grid", "timing", "skip_invalid", "notes"}
REQUIRED_ENTRY_KEYS = ("op", "backend", "dtype", "modes", "grid")
TIMING_KEYS = {"cuda_graph": bool, "flush_l2": bool}


class SuiteError(UserError):
    """A suite file that cannot be used; ``str()`` names the file, the entry and the problem."""


@dataclass(frozen=True)
class SuiteCase:
    case: Case
    entry: int  # index of the entry it came from
    timing: dict[str, Any] = field(default_factory=dict)  # per-entry timing switches


@dataclass(frozen=True)
class Suite:
    name: str
    path: str
    description: str
    cases: tuple[SuiteCase, ...]
    skipped_invalid: int = 0  # grid points dropped by skip_invalid


def builtin_suites_dir() -> Path:
    return Path(str(resources.files("ssmbench.measure") / "suites"))


def resolve(name_or_path: str) -> Path:
    """A suite file by path, or a built-in suite by name (``cpu_smoke``)."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return p
    builtin = builtin_suites_dir() / f"{name_or_path}.yaml"
    if builtin.exists():
        return builtin
    known = sorted(f.stem for f in builtin_suites_dir().glob("*.yaml"))
    raise SuiteError(f"suite {name_or_path!r}: no such file, and no built-in suite of that name; "
                     f"built-in suites: {', '.join(known) or 'none'}")


def _as_list(v: Any) -> list:
    return list(v) if isinstance(v, list) else [v]


def _entry_cases(e: dict[str, Any], index: int, where: str) -> tuple[list[SuiteCase], int]:
    """Validate one entry and expand it; returns (cases, grid points skipped by skip_invalid)."""
    from ..analytic import registry
    from .backends.base import get_backend

    def fail(msg: str):
        raise SuiteError(f"{where}: {msg}")

    unknown = sorted(set(e) - ENTRY_KEYS)
    if unknown:
        fail(f"unknown key(s) {', '.join(unknown)}; an entry has {', '.join(sorted(ENTRY_KEYS))}")
    missing = [k for k in REQUIRED_ENTRY_KEYS if k not in e]
    if missing:
        fail(f"missing key(s) {', '.join(missing)}")
    op_name, backend_name = e["op"], e["backend"]
    if not isinstance(op_name, str) or not isinstance(backend_name, str):
        fail("'op' and 'backend' must be strings")
    composite = is_composite(op_name)
    op = None
    try:
        if not composite:
            op = registry.get_op(op_name)
        backend = get_backend(backend_name, op_name)
    except UserError as exc:
        fail(str(exc))
    impl = e.get("impl", backend.impl)
    if impl != backend.impl:
        fail(f"impl {impl!r} does not match backend {backend_name!r}, which executes impl {backend.impl!r}")
    if op is not None:
        try:
            op_impl = op.impl(impl)
        except UserError as exc:
            fail(str(exc))
    dtypes = _as_list(e["dtype"])
    for dt in dtypes:
        if dt not in CASE_DTYPES:
            fail(f"dtype {dt!r} is not one of {', '.join(CASE_DTYPES)}")
        if op is not None and dt not in op.dtypes:
            fail(f"op {op_name!r} has no dtype {dt!r}; valid: {', '.join(op.dtypes)}")
        if dt not in backend.dtypes:
            fail(f"backend {backend_name!r} does not take dtype {dt!r}; it takes {', '.join(backend.dtypes)}")
    modes = _as_list(e["modes"])
    for m in modes:
        if m not in MODES:
            fail(f"mode {m!r} is not one of {', '.join(MODES)}")
        if m not in backend.modes:
            fail(f"backend {backend_name!r} does not run mode {m!r}; it runs {', '.join(backend.modes)}")
        if op is not None and not op_impl.supports(m):
            fail(f"op {op_name!r}, impl {impl!r} has no cost rule for mode {m!r}")
    grid = e["grid"]
    if not isinstance(grid, dict) or not grid:
        fail("'grid' must be a non-empty mapping of dimension -> value or list of values")
    axes = {}
    for k, v in grid.items():
        vals = _as_list(v)
        if not vals:
            fail(f"grid.{k} is an empty list")
        for x in vals:
            if isinstance(x, bool) or not isinstance(x, int) or x <= 0:
                fail(f"grid.{k}: {x!r} is not a positive integer")
        axes[str(k)] = vals
    if op is not None:
        bad = [k for k in axes if k not in op.dims]
        if bad:
            fail(f"op {op_name!r} has no dimension(s) {', '.join(bad)}; its dimensions: {', '.join(op.dims)}")
        for dt in dtypes:
            for m in modes:
                need = registry.compiled_cost(op_name, impl, m, dt).dims
                lack = [d for d in need if d not in axes]
                if lack:
                    fail(f"grid lacks dimension(s) {', '.join(lack)} that the cost of {op_name}/{impl} "
                         f"({m}, {dt}) needs")
    timing = e.get("timing") or {}
    if not isinstance(timing, dict):
        fail("'timing' must be a mapping")
    for k, v in timing.items():
        if k not in TIMING_KEYS:
            fail(f"timing.{k}: unknown key; valid: {', '.join(TIMING_KEYS)}")
        if not isinstance(v, TIMING_KEYS[k]):
            fail(f"timing.{k} must be true or false, got {v!r}")
    if timing.get("cuda_graph") and "bwd" in modes:
        # a bwd call replays the autograd graph of a forward run before timing, on another stream than the
        # capture's: its backward kernels go to the forward's stream and the capture fails (every such case of
        # measure/suites/norm_rope_h200.yaml on the H200, 2026-12-05), which ends the run
        fail("timing.cuda_graph cannot time mode 'bwd' (its backward runs on the stream of a forward made "
             "before capture, not the capture stream); time 'fwdbwd' as graph replays, or 'bwd' eagerly")
    skip_invalid = e.get("skip_invalid", False)
    if not isinstance(skip_invalid, bool):
        fail("'skip_invalid' must be true or false")

    names = list(axes)
    out: list[SuiteCase] = []
    skipped = 0
    for combo in itertools.product(*(axes[k] for k in names)):
        dims = dict(zip(names, combo))
        point_ok = True
        for dt in dtypes:
            for m in modes:
                if op is not None:
                    try:
                        registry.cost(op_name, dims, impl=impl, mode=m, dtype=dt)
                    except UserError as exc:
                        if skip_invalid:
                            point_ok = False
                            break
                        fail(f"grid point {dims}, {dt}, {m}: {exc} (set skip_invalid: true to drop such points)")
            if not point_ok:
                break
        if not point_ok:
            skipped += 1
            continue
        for dt in dtypes:
            for m in modes:
                out.append(SuiteCase(Case(op_name, impl, backend_name, dims, dt, m), index, dict(timing)))
    return out, skipped


def parse_suite(data: Any, file: str | Path) -> Suite:
    file = str(file)
    if not isinstance(data, dict):
        raise SuiteError(f"{file}: expected a mapping with schema_version, name and entries at the top level")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise SuiteError(f"{file}: schema_version: expected {SCHEMA_VERSION}, got {data.get('schema_version')!r}")
    unknown = sorted(set(data) - TOP_KEYS)
    if unknown:
        raise SuiteError(f"{file}: unknown top-level key(s) {', '.join(unknown)}; valid: {', '.join(sorted(TOP_KEYS))}")
    for k in ("name", "entries"):
        if k not in data:
            raise SuiteError(f"{file}: missing top-level key {k!r}")
    entries = data["entries"]
    if not isinstance(entries, list) or not entries:
        raise SuiteError(f"{file}: 'entries' must be a non-empty list")
    cases: list[SuiteCase] = []
    seen: dict[str, int] = {}
    skipped = 0
    for i, e in enumerate(entries):
        label = f"{file}: entries[{i}]"
        if not isinstance(e, dict):
            raise SuiteError(f"{label}: expected a mapping, got {type(e).__name__}")
        where = f"{label} (op={e.get('op')}, backend={e.get('backend')})"
        got, n_skip = _entry_cases(e, i, where)
        skipped += n_skip
        for sc in got:
            k = sc.case.key()
            if k in seen:
                raise SuiteError(f"{where}: case {k} is already listed by entries[{seen[k]}]")
            seen[k] = i
            cases.append(sc)
    return Suite(str(data["name"]), file, str(data.get("description") or ""), tuple(cases), skipped)


def load_suite(name_or_path: str | Path) -> Suite:
    path = resolve(str(name_or_path))
    text = read_user_text(path, SuiteError)
    try:
        data = yaml.load(text, Loader=UniqueKeyLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        raise SuiteError(f"{path}: {where}not valid YAML ({getattr(exc, 'problem', None) or exc})") from None
    return parse_suite(data, path)
