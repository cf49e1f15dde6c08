"""Command ``report`` (``register(subparsers)``, see ssmbench/cli.py): the go/no-go report of matched
SSM / attention measurements, as one self-contained HTML file or as Markdown with its figures beside
it (``ssmbench.figures.report``). Computed only from the result files, the spec and, optionally, a
calibration profile: anyone can regenerate it.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from ..errors import UserError
from ..files import check_output_file, check_output_folder

FORMATS = ("html", "md")


def _format(args) -> str:
    if args.format:
        return args.format
    suffix = Path(args.out).suffix.lower().lstrip(".")
    if suffix in ("html", "htm"):
        return "html"
    if suffix in ("md", "markdown"):
        return "md"
    raise UserError(f"--out {args.out}: cannot tell the format from the suffix; end the name in .html or .md, "
                    "or give --format html|md")


def _positive(name: str, value: float, upper: float | None = None) -> None:
    if not value > 0 or (upper is not None and not value < upper):
        expect = f"between 0 and {upper:g}" if upper is not None else "a positive number"
        raise UserError(f"{name} {value:g}: expected {expect}")


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``path`` through a temporary file in its folder and a rename: a failure leaves the old file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cmd_report(args) -> int:
    from ..calibrate.profile import read_profile
    from ..figures.report.build import build
    from ..figures.report.regimes import Rule
    from ..figures.report.render import to_html, to_markdown
    from ..hwspecs import get_spec, spec_for_device

    fmt = _format(args)
    out = check_output_file(args.out, "--out")
    fig_dir = out.with_name(f"{out.stem}_figures")
    if fmt == "md":
        check_output_folder(fig_dir, "--out (its figure folder)")
    _positive("--min-speedup", args.min_speedup)
    _positive("--min-energy-saving", args.min_energy_saving)
    _positive("--confidence", args.confidence, 1.0)
    if args.kv_heads < 1:
        raise UserError(f"--kv-heads {args.kv_heads}: expected a positive number of KV heads")
    profile = read_profile(args.calibration) if args.calibration else None
    spec = get_spec(args.hw) if args.hw else None
    if spec is None:
        from ..figures.report.pairs import device_of, read_folders
        spec = spec_for_device(device_of(read_folders(args.results)[0]))
    rule = Rule(args.min_speedup, args.min_energy_saving, args.confidence)
    from ..calibrate.energy_predict import predict_case_energy
    rep = build(args.results, spec, profile, rule, args.kv_heads, energy=predict_case_energy)
    if fmt == "html":
        write_atomic(out, to_html(rep).encode())
    else:
        text, files = to_markdown(rep, fig_dir, f"{fig_dir.name}/")
        fig_dir.mkdir(exist_ok=True)
        for path, data in files.items():
            write_atomic(path, data)
        write_atomic(out, text.encode())
    verdicts = ", ".join(f"{r.regime.id}: {r.verdict}" for r in rep.regimes)
    print(f"wrote {out} ({len(rep.points)} matched points, {len(rep.regimes)} regimes: {verdicts})", file=sys.stderr)
    return 0


def register(subparsers) -> None:
    from ..figures.report.pairs import DEFAULT_KV_HEADS
    from ..figures.report.regimes import CONFIDENCE, MIN_ENERGY_SAVING, MIN_SPEEDUP

    p = subparsers.add_parser(
        "report", help="the go/no-go report of matched SSM vs attention measurements (.html or .md)",
        description="Pair measured SSM and attention records (same level, dtype, batch, width, length, timing "
                    "method), compute per regime the FLOP, time and energy ratios with confidence intervals, the "
                    "realised fraction, the crossover lengths (measured, calibrated, achievable, bound) and the "
                    "binding resources, and state a go/no-go verdict per regime under the rule given by the "
                    "options. Writes one self-contained HTML file (figures embedded) or Markdown with a "
                    "<out>_figures/ folder.")
    p.add_argument("--results", nargs="+", required=True, metavar="DIR",
                   help="folders of result files (searched with their subfolders), all of one device")
    p.add_argument("--out", required=True, help="the report file, .html or .md")
    p.add_argument("--format", choices=FORMATS, help="html or md (default: from --out's suffix)")
    p.add_argument("--hw", help="spec id for bounds and roofline fractions (default: the spec of the results' device)")
    p.add_argument("--calibration", metavar="PROFILE",
                   help="a profile written by ssmbench calibrate: adds calibrated-estimate crossovers")
    p.add_argument("--min-speedup", type=float, default=MIN_SPEEDUP,
                   help="the rule's X: a GO needs the time ratio's lower confidence bound >= X")
    p.add_argument("--min-energy-saving", type=float, default=MIN_ENERGY_SAVING,
                   help="the rule's Y: a GO needs the energy ratio's lower confidence bound >= Y")
    p.add_argument("--confidence", type=float, default=CONFIDENCE, help="confidence level of the intervals")
    p.add_argument("--kv-heads", type=int, default=DEFAULT_KV_HEADS,
                   help="KV heads of the attention baseline (GQA; its H is matched through the width)")
    p.set_defaults(func=cmd_report)
