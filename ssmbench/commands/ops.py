"""CLI commands of the analytic model: ``ssmbench ops list`` and ``ssmbench cost OP``.

``cost`` evaluates the symbolic rule exactly (sympy substitution, no float rounding) for one case —
op, implementation, dims, dtype, mode — and prints FLOPs by engine, compulsory and as-executed bytes
by tensor class, launches, working set and arithmetic intensity. Every number is an analytic count
from the op's rule, labelled as such, with its unit.
"""

from __future__ import annotations

import argparse
from typing import Any

import sympy as sp

from ..analytic.conventions import MODES
from ..analytic.registry import AnalyticError, Op, all_ops, get_op, symbolic_cost, validate_dims
from ..analytic.symbols import DESCRIPTIONS, SYMBOLS
from ..output import print_json, print_table, si

LABEL = "analytic count"
DIMS_FORMAT = "NAME=INTEGER pairs separated by commas, e.g. B=1,L=4096,D=2048"


def register(subparsers) -> None:
    ops = subparsers.add_parser("ops", help="the analytic op registry", description="The analytic op registry.")
    ops_sub = ops.add_subparsers(dest="ops_command", metavar="SUBCOMMAND")
    ops_sub.required = True
    lst = ops_sub.add_parser("list", help="list ops: family, dims, implementations, modes, dtypes")
    lst.add_argument("--json", action="store_true", help="print JSON")
    lst.set_defaults(func=ops_list)

    cost = subparsers.add_parser(
        "cost", help="analytic cost of one op case",
        description="Analytic cost of one case: FLOPs by engine, bytes by tensor class (compulsory and "
                    "as executed), launches, working set, arithmetic intensity.")
    cost.add_argument("op", help="op name (see `ssmbench ops list`)")
    cost.add_argument("--impl", help="implementation name (default: the op's default)")
    cost.add_argument("--dims", required=True, help=f"dimension sizes: {DIMS_FORMAT}")
    cost.add_argument("--dtype", default="bf16", help="storage dtype (default bf16)")
    cost.add_argument("--mode", default="fwd", choices=MODES, help="fwd, bwd, fwdbwd or decode (default fwd)")
    cost.add_argument("--json", action="store_true", help="print JSON")
    cost.set_defaults(func=cost_command)


# ops list --------------------------------------------------------------------------------------------

def _op_record(op: Op) -> dict[str, Any]:
    return {
        "name": op.name,
        "family": op.family,
        "summary": op.summary,
        "dims": {d: DESCRIPTIONS[d] for d in op.dims},
        "implementations": [
            {"name": i.name, "summary": i.summary, "default": i.name == op.default_impl,
             "modes": [m for m in MODES if i.supports(m)], "constraints": [c.message for c in i.constraints]}
            for i in op.impls
        ],
        "modes": list(op.modes),
        "dtypes": list(op.dtypes),
        "constraints": [c.message for c in op.constraints],
        "reference": op.reference,
    }


def ops_list(args: argparse.Namespace) -> int:
    records = [_op_record(op) for _, op in sorted(all_ops().items())]
    if args.json:
        print_json(records)
        return 0
    rows = []
    for r in records:
        for n, i in enumerate(r["implementations"]):
            first = n == 0
            rows.append([r["name"] if first else "", r["family"] if first else "", ",".join(r["dims"]) if first else "",
                         i["name"] + (" *" if i["default"] else ""), ", ".join(i["modes"]),
                         ", ".join(r["dtypes"]) if first else ""])
    print_table("analytic ops", ["op", "family", "dims", "implementation", "modes", "dtypes"], rows,
                caption="* default implementation; fwdbwd is fwd + bwd where an implementation has both")
    return 0


# cost ------------------------------------------------------------------------------------------------

def parse_dims(text: str) -> dict[str, int]:
    """``B=1,L=4096`` -> {"B": 1, "L": 4096}; malformed text raises AnalyticError."""
    out: dict[str, int] = {}
    items = [s.strip() for s in text.split(",")]
    if not text.strip():
        raise AnalyticError(f"--dims is empty; expected {DIMS_FORMAT}")
    for item in items:
        name, sep, value = (s.strip() for s in item.partition("="))
        if not sep or not name or not value:
            raise AnalyticError(f"--dims: malformed item {item!r}; expected {DIMS_FORMAT}")
        if name in out:
            raise AnalyticError(f"--dims: dimension {name} given twice")
        try:
            size = int(value)
        except ValueError:
            raise AnalyticError(f"--dims: {name}={value!r} is not an integer; expected {DIMS_FORMAT}") from None
        if size <= 0:
            raise AnalyticError(f"--dims: {name}={size}: dimension sizes must be positive integers")
        out[name] = size
    return out


def _number(v: Any) -> int | float:
    v = sp.sympify(v)
    if not v.is_number:
        raise AssertionError(f"cost term did not evaluate to a number: {v}")
    return int(v) if v.is_integer else float(v)


def _approx(v: float) -> str:
    """'1.23 G' (the unit has its own column); below 1000 the plain number, without a prefix."""
    return si(v, digits=3, smallest=1e3).rstrip()


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def evaluate_case(op_name: str, impl: str | None, dims: dict[str, int], dtype: str, mode: str) -> dict[str, Any]:
    """The cost of one case as plain numbers, exact (integers where the count is integral)."""
    op = get_op(op_name)
    implementation = op.impl(impl)
    symbolic = symbolic_cost(op.name, implementation.name, mode, dtype)
    used = tuple(d for d in op.dims if SYMBOLS[d] in symbolic.free_symbols())
    values = validate_dims(op, dims, used, implementation)
    c = symbolic.subs({SYMBOLS[k]: v for k, v in values.items()})

    def by_class(m) -> dict[str, int | float]:
        return {k: _number(v) for k, v in sorted(m.items())}

    read, write = by_class(c.read), by_class(c.write)
    extra_read, extra_write = by_class(c.extra_read), by_class(c.extra_write)
    ex_read = {k: read.get(k, 0) + extra_read.get(k, 0) for k in sorted(set(read) | set(extra_read))}
    ex_write = {k: write.get(k, 0) + extra_write.get(k, 0) for k in sorted(set(write) | set(extra_write))}
    tensor = by_class(c.tensor)
    vector, transcendental = _number(c.vector), _number(c.transcendental)
    flops = sum(tensor.values()) + vector
    compulsory, executed = sum(read.values()) + sum(write.values()), sum(ex_read.values()) + sum(ex_write.values())
    return {
        "label": LABEL,
        "source": f"rule {implementation.rule.__module__} ({op.name}/{implementation.name}); "
                  "conventions in ssmbench.analytic.conventions",
        "op": op.name, "impl": implementation.name, "mode": mode, "dtype": dtype,
        "dims": dict(dims),
        "unused_dims": [d for d in dims if d not in used],
        "flops": {"tensor": tensor, "vector": vector, "transcendental": transcendental,
                  "unit": "FLOP (transcendental: special-function evaluations)"},
        "bytes": {"unit": "B", "read": sum(read.values()), "write": sum(write.values()),
                  "read_by_class": read, "write_by_class": write,
                  "executed": {"read": sum(ex_read.values()), "write": sum(ex_write.values()),
                               "read_by_class": ex_read, "write_by_class": ex_write}},
        "launches": _number(c.launches),
        "working_set": {"value": _number(c.working_set), "unit": "B (on chip, per SM)"},
        "arithmetic_intensity": {"compulsory": _ratio(flops, compulsory), "executed": _ratio(flops, executed),
                                 "unit": "FLOP/B (tensor + vector FLOPs per device-memory byte)"},
    }


def _rows(r: dict[str, Any]) -> list[list[Any]]:
    rows: list[list[Any]] = []

    def add(quantity: str, value, unit: str) -> None:
        if value is None:
            rows.append([quantity, "n/a (no bytes)", "", unit, LABEL])
        elif isinstance(value, int):
            rows.append([quantity, f"{value:,}", _approx(value), unit, LABEL])
        else:
            rows.append([quantity, f"{value:,.4g}", _approx(value), unit, LABEL])

    f, b = r["flops"], r["bytes"]
    if not f["tensor"]:
        add("tensor-core FLOPs", 0, "FLOP")
    for dt, v in f["tensor"].items():
        add(f"tensor-core FLOPs ({dt})", v, "FLOP")
    add("vector FLOPs (fp32, CUDA cores)", f["vector"], "FLOP")
    add("transcendentals (special-function units)", f["transcendental"], "evaluations")
    for kind, total, classes in (("compulsory read", b["read"], b["read_by_class"]),
                                 ("compulsory written", b["write"], b["write_by_class"]),
                                 ("as-executed read", b["executed"]["read"], b["executed"]["read_by_class"]),
                                 ("as-executed written", b["executed"]["write"], b["executed"]["write_by_class"])):
        add(f"{kind}, total", total, "B")
        for cls, v in classes.items():
            add(f"  {kind}: {cls}", v, "B")
    add("kernel launches", r["launches"], "launches")
    add("working set", r["working_set"]["value"], "B on chip per SM")
    ai = r["arithmetic_intensity"]
    add("arithmetic intensity, compulsory bytes", ai["compulsory"], "FLOP/B")
    add("arithmetic intensity, as-executed bytes", ai["executed"], "FLOP/B")
    return rows


def cost_command(args: argparse.Namespace) -> int:
    dims = parse_dims(args.dims)
    r = evaluate_case(args.op, args.impl, dims, args.dtype, args.mode)
    if args.json:
        print_json(r)
        return 0
    case = ", ".join(f"{k}={v}" for k, v in r["dims"].items())
    caption = f"{LABEL}; source: {r['source']}"
    if r["unused_dims"]:
        caption += f"\nnot used in mode {r['mode']}: {', '.join(r['unused_dims'])}"
    print_table(f"{r['op']}/{r['impl']} {r['mode']} {r['dtype']} ({case})",
                ["quantity", "value", "approx.", "unit", "label"], _rows(r), caption=caption)
    return 0
