"""The README's answer: the headline figure and the one-paragraph answer of ``ssmbench report``, from
the stored H200 measurements, written between the README's markers (and the figure under docs/).

Usage: python scripts/readme_answer.py [--check]

Writes docs/figures/report-headline.png and the section of README.md between ``BEGIN`` and ``END``.
``--check`` writes nothing and exits 1 when the README's section differs from what the stored data give
now (tests/test_readme_answer.py runs it): regenerate with the script, never by hand.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROFILE = REPO / "results" / "h200" / "2026-12-02" / "calibration" / "profile.json"
FOLDERS = REPO / "scripts" / "report_h200_folders.txt"  # the folders of the report, and why the others are not
FIGURE = Path("docs") / "figures" / "report-headline.png"
README = REPO / "README.md"
BEGIN = "<!-- BEGIN answer: written by scripts/readme_answer.py from results/h200; do not edit by hand -->"
END = "<!-- END answer -->"


def folders() -> list[str]:
    """The result folders of the H200 report, relative to the repository root (scripts/report_h200_folders.txt)."""
    lines = (ln.strip() for ln in FOLDERS.read_text(encoding="utf-8").splitlines())
    return [ln for ln in lines if ln and not ln.startswith("#")]


def section() -> tuple[str, bytes]:
    """The README section's text and the headline figure's PNG bytes."""
    from ssmbench.calibrate.profile import read_profile
    from ssmbench.figures.report import plots
    from ssmbench.figures.report.build import answer, build
    from ssmbench.hwspecs import get_spec

    rep = build([REPO / f for f in folders()], get_spec("h200-sxm"), read_profile(PROFILE))
    verdicts = "\n".join(f"| {r.regime.title} | {r.verdict} | {r.verdict_text} |" for r in rep.regimes)
    text = "\n".join([
        BEGIN, "", answer(rep), "",
        f"![Measured speedup and energy saving against the arithmetic saving of every matched point]({FIGURE.as_posix()})",
        "", "| Regime | Verdict | Points |", "|---|---|---|", verdicts, "",
        ("The full report, with intervals, crossovers, binding resources, whole models, figures and caveats: "
         "[results/h200/2026-12-03/report/report.md](results/h200/2026-12-03/report/report.md) (and "
         "`report.html` beside it), written by `bash scripts/report_h200.sh`, which runs `ssmbench report "
         f"--results {' '.join(folders())} --hw h200-sxm --calibration "
         "results/h200/2026-12-02/calibration/profile.json`."), "", END])
    return text, plots.png(plots.headline(rep))


def replaced(readme: str, text: str) -> str:
    if BEGIN not in readme or END not in readme:
        raise SystemExit(f"{README}: the markers {BEGIN!r} and {END!r} are missing")
    head, rest = readme.split(BEGIN, 1)
    return head + text + rest.split(END, 1)[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if README.md's section is out of date; write nothing")
    a = ap.parse_args(argv)
    text, fig = section()
    readme = README.read_text(encoding="utf-8")
    new = replaced(readme, text)
    if a.check:
        if new != readme:
            print("README.md's answer section is out of date: run python scripts/readme_answer.py", file=sys.stderr)
            return 1
        if not (REPO / FIGURE).is_file():
            print(f"{FIGURE} is missing: run python scripts/readme_answer.py", file=sys.stderr)
            return 1
        print("README.md's answer section is up to date", file=sys.stderr)
        return 0
    (REPO / FIGURE).parent.mkdir(parents=True, exist_ok=True)
    (REPO / FIGURE).write_bytes(fig)
    README.write_text(new, encoding="utf-8")
    print(f"wrote {FIGURE} and README.md's answer section", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
