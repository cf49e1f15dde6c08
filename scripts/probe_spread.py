"""Which probe-measured ceilings belong to the device, and which move with the machine that issues the work?

Usage: python scripts/probe_spread.py [DIR ...] [--json OUT]      (default DIR: results)

Reads every probe fragment under the folders (``probe-*.yaml`` or ``.json`` with a ``measured:`` list, as
``ssmbench probe`` and the runtime probe write them; hwspecs/fragment.load_fragment; other probe-* files are
listed as skipped), groups them by the device name their ``meta``
records, and prints per device and key, over the probe files that measured it: n, min, median, max and
max / min. A key whose value repeats within ``STABLE_RATIO`` over two or more files is labelled ``stable``,
else ``moves``. On the stored results the device's own terms (bandwidths, latencies, engine rates, the graph
node) repeat within a few per cent while every host class, ``launch.kernel`` and ``launch.timed_call`` move by
1.2-2x between machines of one kind (results/h100/2026-12-06/probe-recheck): a spec holds one probe's values,
and an estimate that leans on the moving terms is only as good as the machine state they were read in.
Label: measurement (the probes' attained values); the spread is an analysis of them. Never fails on the figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

STABLE_RATIO = 1.05  # max / min within which a key's probes agree (the probes' own repeat spread is 1-2 %)


def fragments(dirs: list[str]) -> tuple[list, list[str]]:
    """([(path, Fragment)] of every probe fragment under ``dirs`` (``ssmbench probe``'s and the runtime probe's),
    [the probe-* files that are not fragments, e.g. a failed run's record])."""
    from ssmbench.hwspecs.fragment import load_fragment
    from ssmbench.hwspecs.loader import SpecError

    found, skipped = [], []
    for d in dirs:
        for p in sorted(Path(d).rglob("probe-*")):
            if p.suffix not in (".yaml", ".yml", ".json"):
                continue
            try:
                found.append((p, load_fragment(p)))
            except SpecError:
                skipped.append(str(p))
    return found, skipped


def spread(dirs: list[str]) -> dict:
    from ssmbench.hwspecs import units
    from ssmbench.hwspecs.schema import value_kind

    found, skipped = fragments(dirs)
    values: dict[str, dict[str, list[tuple[float, str, str]]]] = defaultdict(lambda: defaultdict(list))
    for path, frag in found:
        for e in frag.entries:
            kind = value_kind(e["key"])
            values[frag.device_name or "unknown device"][e["key"]].append(
                (units.parse(e["value"], kind), kind, str(path)))
    out = {}
    for device, keys in sorted(values.items()):
        rows = []
        for key, vs in sorted(keys.items()):
            si = [v for v, _, _ in vs]
            lo, hi = min(si), max(si)
            rows.append({"key": key, "kind": vs[0][1], "n": len(si), "min": lo, "median": statistics.median(si),
                         "max": hi, "ratio": hi / lo,
                         "label": None if len(si) < 2 else ("stable" if hi / lo <= STABLE_RATIO else "moves"),
                         "files": sorted({f for _, _, f in vs})})
        out[device] = rows
    return {"label": "measurement (probe values); spread: analysis", "stable_ratio": STABLE_RATIO, "devices": out,
            "skipped": skipped}


def markdown(doc: dict) -> str:
    from ssmbench.hwspecs.units import format_quantity

    lines = [f"Labels: {doc['label']}; stable: max / min <= {doc['stable_ratio']:g} over two or more probe files.", ""]
    for device, rows in doc["devices"].items():
        files = sorted({f for r in rows for f in r["files"]})
        lines += [f"## {device} ({len(files)} probe files)", "",
                  "| key | n | min | median | max | max / min | |", "|---|---|---|---|---|---|---|"]
        for r in rows:
            q = [format_quantity(r[k], r["kind"]) for k in ("min", "median", "max")]
            lines.append(f"| {r['key']} | {r['n']} | {q[0]} | {q[1]} | {q[2]} | {r['ratio']:.2f} | "
                         f"{r['label'] or ''} |")
        lines.append("")
    if doc["skipped"]:
        lines += [f"Not probe fragments (no valid measured: list), skipped: {', '.join(doc['skipped'])}", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="*", default=["results"], metavar="DIR", help="folders to search (default results)")
    ap.add_argument("--json", metavar="OUT", help="also write the table as JSON")
    a = ap.parse_args(argv)
    from ssmbench.errors import UserError
    from ssmbench.files import check_output_file

    missing = [d for d in a.dirs if not Path(d).is_dir()]
    if missing:
        print(f"probe_spread: not a folder: {', '.join(missing)}; expected folders holding probe-*.yaml files",
              file=sys.stderr)
        return 2
    try:
        if a.json:
            check_output_file(a.json, "--json")
        doc = spread(a.dirs)
    except UserError as exc:
        print(f"probe_spread: {exc}", file=sys.stderr)
        return 2
    if not doc["devices"]:
        print(f"probe_spread: no probe file under {', '.join(a.dirs)} (ssmbench probe writes probe-<spec>.yaml)",
              file=sys.stderr)
        return 2
    print(markdown(doc), end="")
    if a.json:
        Path(a.json).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
