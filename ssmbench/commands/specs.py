"""``ssmbench specs``: list, show, validate and compare hardware specs; make one from a probe file.

Every value printed carries its unit and says what it is:

- ``datasheet``  a value printed by a vendor or a paper (source tag P, S or R);
- ``derived``    computed from printed values, with the method in the source title (tag D);
- ``assumption`` a design assumption of a hypothetical device (tag A);
- ``measured``   an attained ceiling from the spec's ``measured`` section (date and method given);
- ``unknown``    the spec states that the value is not known, and why;
- ``absent``     the spec does not list the key at all (e.g. a dtype the device does not support).

Which of a measured and a datasheet value a projection uses is chosen by ``--prefer`` through
``ssmbench.hwspecs.ceilings.ceiling``, exactly as the analytic model chooses it; ``list``, ``show`` and
``diff`` share one default (``PREFER_DEFAULT``, the analytic model's) and say which ceilings they show.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

from ..errors import UserError
from ..files import check_output_file, dump_yaml
from ..hwspecs import units
from ..hwspecs.ceilings import ORIGIN_OF_TAG, ceiling
from ..hwspecs.fragment import load_fragment, with_measured
from ..hwspecs.loader import SpecError, get_spec, load_all, load_spec, parse_spec
from ..hwspecs.schema import DTYPES, ID_PATTERN, MEMORY_LEVELS, Spec
from ..output import print_json, print_table

# The columns of ``specs list``: (header, dotted key).
LIST_COLUMNS = (
    ("bf16 tensor", "compute.tensor.bf16"),
    ("fp32 vector", "compute.vector.fp32"),
    ("SFU", "compute.special_function"),
    ("DRAM bw", "memory.dram.bandwidth"),
    ("DRAM size", "memory.dram.capacity"),
    ("TDP", "power.tdp"),
)

# The analytic model's default (``SpecCeilings.of``, ``predict --prefer``): the ceilings a projection
# uses, so that what ``specs`` prints is what a prediction divides by.
PREFER_DEFAULT = "measured"
CEILINGS_SHOWN = {
    "measured": "measured ceilings [m] where the spec has them, else the spec's own values (datasheet, derived [d] "
                "or design assumption [a], as marked) (--prefer measured)",
    "datasheet": "the spec's own values (datasheet, derived [d] or design assumption [a], as marked); measured "
                 "ceilings are ignored (--prefer datasheet)",
}

_MARK = {"datasheet": "", "derived": " [d]", "design assumption": " [a]", "measured": " [m]"}
# the origin words of hwspecs.ceilings (a design assumption prints as one, never as a datasheet value)
_ORIGIN_OF_TAG = {"P": "datasheet", "S": "datasheet", "R": "datasheet", **ORIGIN_OF_TAG}
LEGEND = (
    "Unmarked: datasheet value. [m] measured on the device (attained ceiling); [d] derived from datasheet "
    "values (method in the source); [a] design assumption of a hypothetical device; unknown: the spec says "
    "why (ssmbench specs show ID); n/a: not listed in the spec (e.g. a dtype the device lacks)."
)


def _unit(key: str, kind: str) -> str:
    """The unit symbol of a value; integer tensor and vector rates are operations, not FLOPs, per second."""
    symbol = units.SYMBOL[kind]
    if kind == "flop_rate" and key.rsplit(".", 1)[-1].startswith("int"):
        return "OP/s"
    return symbol


def _fmt(value: float, key: str, kind: str) -> str:
    text = units.format_quantity(value, kind)
    return text[: -len("FLOP/s")] + "OP/s" if _unit(key, kind) == "OP/s" else text


def cell(spec: Spec, key: str, prefer: str = "measured") -> dict:
    """One value of ``spec`` as the projection would use it, with unit, origin and provenance."""
    data = dict(spec.data())
    if key not in data:
        return {"key": key, "value": None, "unit": None, "display": "n/a", "origin": "absent",
                "provenance": "not listed in the spec"}
    kind = data[key].kind
    c = ceiling(spec, key, prefer)
    if c.origin == "unknown":
        origin = "unknown"
    elif c.origin == "measured":
        origin = "measured"
    else:
        origin = _ORIGIN_OF_TAG[spec.sources[data[key].source].tag]
    display = "unknown" if c.value is None else _fmt(c.value, key, kind) + _MARK[origin]
    return {"key": key, "value": c.value, "unit": _unit(key, kind), "display": display, "origin": origin,
            "provenance": c.provenance}


def _datum_row(spec: Spec, key: str, datum, prefer: str) -> dict:
    """The spec's own value at ``key`` (never the measured one) beside the ceiling a projection uses."""
    row = {"key": key, "kind": datum.kind, "unit": _unit(key, datum.kind)}
    if datum.si is None:
        row.update(value=None, display="unknown", origin="unknown", source=None, source_title=None, tag=None,
                   note=datum.unknown)
    else:
        src = spec.sources[datum.source]
        origin = _ORIGIN_OF_TAG[src.tag]
        row.update(value=datum.si, display=_fmt(datum.si, key, datum.kind) + _MARK[origin], origin=origin,
                   source=datum.source, source_title=src.title.strip(), tag=src.tag, note=datum.note)
    row["used"] = cell(spec, key, prefer)
    return row


def _link_names(spec: Spec) -> dict[str, str]:
    return {f"interconnect.{i}.bandwidth": link.name for i, link in enumerate(spec.interconnect)}


def _table(title: str, columns: list[str], rows: list[list], caption: str | None = None,
           wrap: tuple[str, ...] = ()) -> None:
    """The first column (an id or key) is never cut, columns named in ``wrap`` (free text) fold, and
    other cells break only between words."""
    print_table(title, columns, rows, caption, key_column=True, fold=wrap, whole_words=True)


def _describe(spec: Spec) -> str:
    kind = "hypothetical design" if spec.hypothetical else "real device"
    parts = [spec.vendor, spec.architecture] + ([spec.form_factor] if spec.form_factor else [])
    return f"{spec.id}: {spec.name} ({', '.join(parts)}; {kind})"


# ---------------------------------------------------------------------------------------------- list

def cmd_list(args) -> int:
    specs = load_all()
    rows = []
    for spec in specs.values():
        rows.append({
            "id": spec.id, "name": spec.name, "vendor": spec.vendor, "hypothetical": spec.hypothetical,
            "values": {key: cell(spec, key, args.prefer) for _, key in LIST_COLUMNS},
        })
    if args.json:
        print_json({"prefer": args.prefer, "ceilings": CEILINGS_SHOWN[args.prefer], "columns": dict(LIST_COLUMNS),
                    "specs": rows})
        return 0
    columns = ["id", "name", "vendor", "hypo."] + [h for h, _ in LIST_COLUMNS]
    table = [[r["id"], r["name"], r["vendor"], "yes" if r["hypothetical"] else "no"]
             + [r["values"][k]["display"] for _, k in LIST_COLUMNS] for r in rows]
    _table(f"Hardware specs ({len(rows)}; ceilings with --prefer {args.prefer})", columns, table,
           caption=f"Ceilings shown: {CEILINGS_SHOWN[args.prefer]}. {LEGEND}", wrap=("name", "vendor"))
    return 0


# ---------------------------------------------------------------------------------------------- show

def cmd_show(args) -> int:
    spec = get_spec(args.spec)
    data = dict(spec.data())
    rows = [_datum_row(spec, key, datum, args.prefer) for key, datum in data.items()]
    measured = []
    for m in spec.measured:
        datum = data[m.key]
        ratio = m.si / datum.si if datum.si else None
        measured.append({
            "key": m.key, "unit": _unit(m.key, datum.kind), "value": m.si,
            "display": _fmt(m.si, m.key, datum.kind), "datasheet": datum.si,
            "datasheet_display": "unknown" if datum.si is None else _fmt(datum.si, m.key, datum.kind),
            "ratio_to_datasheet": ratio, "date": m.date.isoformat(), "method": m.method, "source": m.source,
        })
    links = _link_names(spec)
    if args.json:
        print_json({
            "id": spec.id, "name": spec.name, "vendor": spec.vendor, "hypothetical": spec.hypothetical,
            "architecture": spec.architecture, "form_factor": spec.form_factor, "notes": spec.notes,
            "prefer": args.prefer, "ceilings": CEILINGS_SHOWN[args.prefer], "values": rows, "measured": measured,
            "interconnect": [{"name": link.name, "key": f"interconnect.{i}.bandwidth"}
                             for i, link in enumerate(spec.interconnect)],
            "sources": {sid: s.model_dump() for sid, s in spec.sources.items()},
        })
        return 0
    print(_describe(spec))
    if spec.notes:
        print(spec.notes.strip())
    table = []
    for r in rows:
        src = f"{r['source']} [{r['tag']}]" if r["source"] else ""
        about = "; ".join(p for p in (links.get(r["key"]), src, r["note"]) if p)
        table.append([r["key"], r["display"], r["used"]["display"], about])
    used = f"used (--prefer {args.prefer})"
    _table(f"Values of {spec.id}", ["key", "spec value", used, "source [tag]; note, or why unknown"], table,
           caption=f"spec value: the spec's own value. used: {CEILINGS_SHOWN[args.prefer]}. {LEGEND} "
                   "Source tags are explained under the sources table.",
           wrap=("source [tag]; note, or why unknown",))
    if measured:
        _table(f"Measured ceilings of {spec.id}",
               ["key", "measured", "datasheet", "measured/datasheet", "date", "method"],
               [[m["key"], m["display"], m["datasheet_display"],
                 "" if m["ratio_to_datasheet"] is None else f"{m['ratio_to_datasheet']:.3f}", m["date"], m["method"]]
                for m in measured],
               wrap=("method",))
    else:
        kinds = "a design assumption of this hypothetical device" if spec.hypothetical else "a datasheet or derived value"
        print(f"No measured ceilings in {spec.id}: every ceiling is {kinds}.")
    _table(f"Sources of {spec.id}", ["id", "tag", "title", "url"],
           [[sid, s.tag, s.title.strip(), s.url or ""] for sid, s in spec.sources.items()],
           caption="Tags: P primary text read; S secondary copy; R official URL, not re-read; D derived "
                   "(method in the title); A design assumption.",
           wrap=("title", "url"))
    return 0


# ------------------------------------------------------------------------------------------ validate

def cmd_validate(args) -> int:
    results = []
    seen: dict[str, str] = {}
    for f in args.files:
        try:
            spec = load_spec(f)
        except SpecError as exc:
            results.append({"file": f, "ok": False, "id": None, "problems": [str(exc)]})
            continue
        if spec.id in seen:
            problem = f"{f}: id: {spec.id!r} is already used by {seen[spec.id]}; ids must be unique"
            results.append({"file": f, "ok": False, "id": spec.id, "problems": [problem]})
            continue
        seen[spec.id] = f
        results.append({"file": f, "ok": True, "id": spec.id, "problems": []})
    bad = [r for r in results if not r["ok"]]
    if args.json:
        print_json({"valid": not bad, "files": results})
        return 2 if bad else 0
    for r in results:
        if r["ok"]:
            print(f"OK    {r['file']}  ({r['id']})")
    if bad:
        raise SpecError.combine([p for r in bad for p in r["problems"]])
    return 0


# ---------------------------------------------------------------------------------------------- diff

def _written(spec: Spec, key: str, origin: str):
    """The value as the spec file writes it (the measured entry's when that is the one used)."""
    if origin == "measured":
        return next(m.value for m in spec.measured if m.key == key)
    return dict(spec.data())[key].value


def _differs(spec_a: Spec, a: dict, spec_b: Spec, b: dict) -> bool:
    """Known values differ when they disagree by more than the rounding of the digits each file writes
    ('67 TFLOP/s' and '66.9 TFLOP/s' are one rate printed twice); otherwise by state: known on one side
    only. Unknown on one side and absent on the other is no difference (neither spec knows the value:
    one says so, the other does not list the key). Provenance (source, note, datasheet or derived) is
    not a difference."""
    if a["value"] is None and b["value"] is None:
        return False
    if a["value"] is None or b["value"] is None:
        return a["origin"] != b["origin"]
    if math.isclose(a["value"], b["value"], rel_tol=1e-9):
        return False
    kind = dict(spec_a.data())[a["key"]].kind
    rounding = (units.resolution(_written(spec_a, a["key"], a["origin"]), kind)
                + units.resolution(_written(spec_b, b["key"], b["origin"]), kind))
    return abs(a["value"] - b["value"]) >= rounding


_SECTIONS = ("compute", "memory", "launch", "power", "energy", "interconnect")
_COMPUTE = ("sm_count", "clock_boost", "tensor", "vector", "special_function")


def _key_rank(key: str, position: int) -> tuple:
    """Schema order for keys from two specs: compute engines by dtype, memory levels from on-chip out."""
    parts = key.split(".")
    section = _SECTIONS.index(parts[0]) if parts[0] in _SECTIONS else len(_SECTIONS)
    if parts[0] == "compute" and parts[1] in _COMPUTE:
        sub = _COMPUTE.index(parts[1])
        dtype = DTYPES.index(parts[2]) if len(parts) > 2 and parts[2] in DTYPES else 0
        return section, sub, dtype, position
    if parts[0] == "memory" and parts[1] in MEMORY_LEVELS:
        return section, MEMORY_LEVELS.index(parts[1]), parts[2] != "capacity", position
    return section, 0, 0, position


def _ratio(r: float | None) -> str:
    if r is None:
        return ""
    return f"{r:.3f}x" if 0.01 <= r < 1000 else f"{r:.3g}x"


def cmd_diff(args) -> int:
    spec_a, spec_b = get_spec(args.a), get_spec(args.b)
    keys = list(dict(spec_a.data()))
    keys += [k for k in dict(spec_b.data()) if k not in keys]
    keys = [k for _, k in sorted((_key_rank(k, i), k) for i, k in enumerate(keys))]
    diffs, rounded = [], []
    for key in keys:
        ca, cb = cell(spec_a, key, args.prefer), cell(spec_b, key, args.prefer)
        if not _differs(spec_a, ca, spec_b, cb):
            if ca["value"] is not None and not math.isclose(ca["value"], cb["value"], rel_tol=1e-9):
                rounded.append({"key": key, "a": _written(spec_a, key, ca["origin"]),
                                "b": _written(spec_b, key, cb["origin"])})
            continue
        ratio = cb["value"] / ca["value"] if ca["value"] and cb["value"] is not None else None
        diffs.append({"key": key, "unit": ca["unit"] or cb["unit"], "a": ca, "b": cb, "ratio_b_over_a": ratio})
    shown = CEILINGS_SHOWN[args.prefer]
    if args.json:
        print_json({"a": spec_a.id, "b": spec_b.id, "prefer": args.prefer, "ceilings": shown, "differences": diffs,
                    "equal_within_rounding": rounded})
        return 0
    print(f"A = {_describe(spec_a)}")
    print(f"B = {_describe(spec_b)}")
    print(f"Ceilings compared: {shown}.")
    if rounded:
        print(textwrap.fill("Equal within the rounding of the digits each spec writes (not listed): "
                            + "; ".join(f"{r['key']} ({r['a']} vs {r['b']})" for r in rounded) + ".", width=100))
    if not diffs:
        print(f"No value differs between {spec_a.id} and {spec_b.id}.")
        return 0
    _table(f"Values that differ ({len(diffs)}; --prefer {args.prefer})",
           ["key", f"A: {spec_a.id}", f"B: {spec_b.id}", "B/A"],
           [[d["key"], d["a"]["display"], d["b"]["display"],
             _ratio(d["ratio_b_over_a"])] for d in diffs],
           caption=LEGEND)
    return 0


# ----------------------------------------------------------------------------------------------- new

def _new_file(out: Path) -> Path:
    """Checked before any file is read: a new .yaml file, never an existing one."""
    if out.suffix not in (".yaml", ".yml"):
        raise UserError(f"--out {out}: expected a .yaml or .yml file name for the new spec")
    return check_output_file(out, "--out", replace=False,
                             refuse="specs new never overwrites a file (choose a new name)")


def _new_id(args, out: Path) -> str:
    spec_id = args.id if args.id is not None else out.stem
    if not ID_PATTERN.match(spec_id):
        where = "--id" if args.id is not None else f"the id taken from the file name {out.name!r}"
        raise UserError(f"{where}: {spec_id!r} is not a spec id; expected lower case letters, digits, '.', '_' "
                        "or '-' (give --id)")
    return spec_id


def _new_from_requirements(args, out: Path) -> int:
    from ..analytic.design.sheet import read_sheet, spec_data
    if args.base is not None or args.probe is not None:
        raise UserError("--from-requirements makes a spec from a requirements sheet alone (its base spec is named in "
                        "it); leave out --from and --probe")
    spec_id = _new_id(args, out)
    sheet = read_sheet(args.from_requirements)
    data = spec_data(sheet, args.from_requirements, spec_id, args.name)
    parse_spec(data, out)  # never write a spec that does not load
    text = "".join(f"# {line}\n" for line in textwrap.wrap(data["notes"], 98)) + dump_yaml(data)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "x", encoding="utf-8") as fh:
        fh.write(text)
    values = sheet["design"]["values"]
    print(f"wrote {out}: id {spec_id!r}, hypothetical, from {sheet['base_id']} with "
          + (", ".join(f"{k} = {v['value']}" for k, v in values.items()) or "no value changed")
          + f" (source: {args.from_requirements}, a design assumption)")
    print(f"check it with: ssmbench specs validate {out}")
    return 0


def cmd_new(args) -> int:
    out = _new_file(Path(args.out))
    if args.from_requirements is not None:
        return _new_from_requirements(args, out)
    if args.base is None or args.probe is None:
        raise UserError("specs new needs --from BASE --probe FILE (a base spec with a probe's ceilings) or "
                        "--from-requirements SHEET (a hypothetical spec from 'ssmbench require')")
    spec_id = _new_id(args, out)
    base = get_spec(args.base)
    if base.hypothetical:
        raise UserError(f"--from {base.id}: a hypothetical design has no measurements; start from the spec of a "
                        "real device (ssmbench specs list)")
    fragment = load_fragment(args.probe)
    data = with_measured(base, fragment.entries)
    dates = sorted(str(e["date"]) for e in fragment.entries)
    device = fragment.device_name
    provenance = (f"Made by 'ssmbench specs new' from spec {base.id} with the measured ceilings of probe file "
                  f"{fragment.path} ({device or 'device not recorded'}, {dates[-1]}); {base.id}'s other measured "
                  "entries are kept.")
    data.update(id=spec_id, name=args.name or f"{base.name} (ssmbench probe {dates[-1]})",
                notes="\n".join(p for p in (base.notes and base.notes.strip(), provenance) if p))
    if device is not None:
        data["device_names"] = [device]  # the device the measured ceilings belong to (the one device rule)
    parse_spec(data, out)  # never write a spec that does not load
    text = "".join(f"# {line}\n" for line in textwrap.wrap(provenance, 98))
    text += dump_yaml(data)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "x", encoding="utf-8") as fh:
        fh.write(text)
    probe_keys = [e["key"] for e in fragment.entries]
    kept = [m.key for m in base.measured if m.key not in probe_keys]
    print(f"wrote {out}: id {spec_id!r}" + ("" if args.id else " (from the file name; --id to choose)")
          + f", name {data['name']!r}" + ("" if args.name else " (--name to choose)"))
    print(f"measured (from {fragment.path}): {', '.join(probe_keys)}")
    if kept:
        print(f"measured (kept from {base.id}): {', '.join(kept)}")
    print(f"device_names: {data.get('device_names') or 'none'}"
          + ("" if device else f" (kept from {base.id}: the probe file records no device name)"))
    if device is not None and device not in base.device_names:
        print(f"note: the probe measured {device!r}, which is not a device of {base.id} (its device_names: "
              f"{base.device_names or 'none'}); its datasheet values are {base.id}'s: edit those that differ")
    print(f"check it with: ssmbench specs validate {out}")
    return 0


# ------------------------------------------------------------------------------------------ register

def register(subparsers) -> None:
    specs = subparsers.add_parser(
        "specs", help="list, show, validate and compare hardware specs; make one from a probe file",
        description="Hardware specs: one YAML file per device (real GPUs and hypothetical accelerators), "
                    "every value with its unit and source.",
    )
    sub = specs.add_subparsers(dest="specs_command", metavar="SUBCOMMAND")
    sub.required = True
    prefer_help = ("which ceiling to report where the spec has both: the attained value from its 'measured' "
                   "section or the datasheet value (default: %(default)s)")

    p = sub.add_parser("list", help="one line per built-in spec with its headline ceilings",
                       description="One line per built-in spec: BF16 tensor rate, FP32 vector rate, special-"
                                   "function rate, DRAM bandwidth and size, TDP. " + LEGEND)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--prefer", choices=("measured", "datasheet"), default=PREFER_DEFAULT, help=prefer_help)
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("show", help="every value of one spec with unit, origin and source",
                       description="Every value of one spec (a built-in id or a YAML file) with its unit, "
                                   "origin and source, the measured section and the sources.")
    p.add_argument("spec", metavar="ID_OR_FILE", help="a built-in spec id (see 'specs list') or a spec file")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument("--prefer", choices=("measured", "datasheet"), default=PREFER_DEFAULT, help=prefer_help)
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("validate", help="check spec files; exit 2 if any is invalid",
                       description="Load and check each spec file against schema v1 (units, sources, memory "
                                   "hierarchy, unique ids). Prints OK per valid file; every problem names the "
                                   "file, the key and what was expected. Exit code 2 if any file is invalid.")
    p.add_argument("files", nargs="+", metavar="FILE", help="spec YAML files")
    p.add_argument("--json", action="store_true", help="print JSON (exit code still 2 if any file is invalid)")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("diff", help="values that differ between two specs, with the ratio B/A",
                       description="Values that differ between spec A and spec B (ids or files), with the "
                                   "ratio B/A. Values one spec lists and the other does not, or knows and the "
                                   "other does not, are shown too. Values that agree within the rounding of "
                                   "the digits each file writes ('67 TFLOP/s' and '66.9 TFLOP/s') are named "
                                   "apart, not listed; provenance alone (source, note) is no difference.")
    p.add_argument("a", metavar="A", help="spec id or file")
    p.add_argument("b", metavar="B", help="spec id or file")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--prefer", choices=("measured", "datasheet"), default=PREFER_DEFAULT, help=prefer_help)
    p.set_defaults(func=cmd_diff)

    p = sub.add_parser("new", help="write a new spec: a base spec with a probe file's ceilings, or from requirements",
                       description="Write a new spec file: the base spec's values and sources, with the 'measured:' "
                                   "entries of a file written by 'ssmbench probe' merged in (they replace the base's "
                                   "entries of the same key; the base's others are kept) and device_names set to "
                                   "the device the probe measured. The file is checked against the schema before "
                                   "it is written; an existing file is never overwritten. With --from-requirements: "
                                   "a hypothetical spec from a requirements sheet written by 'ssmbench require' (the "
                                   "sheet's base spec with its design values, labelled design assumptions).")
    p.add_argument("--from", dest="base", metavar="ID_OR_FILE",
                   help="base spec: a built-in id (see 'specs list') or a spec file of a real device")
    p.add_argument("--probe", metavar="FILE", help="a file written by 'ssmbench probe --out'")
    p.add_argument("--from-requirements", metavar="SHEET", help="a requirements sheet written by 'ssmbench require'")
    p.add_argument("--out", required=True, metavar="FILE", help="the new spec file (.yaml or .yml)")
    p.add_argument("--id", help="id of the new spec (default: the --out file name without its suffix)")
    p.add_argument("--name", help="name of the new spec (default: the base's name and the probe date)")
    p.set_defaults(func=cmd_new)
