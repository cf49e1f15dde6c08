"""Shared helpers of the figures: the one way a figure starts (``new_figure``), saving by suffix, and the
phrase every title uses for the origin of its ceilings.

Figures are pure functions of stored data and predictions: they never measure and never evaluate a
model themselves. matplotlib is used through ``matplotlib.figure.Figure`` (no pyplot state, no
backend switch), so building a figure works headless.
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from ..errors import UserError
from ..files import check_output_file

FORMATS = (".png", ".svg")


def check_path(path: str | Path, option: str = "plot output") -> Path:
    """A figure file name (.png / .svg) that can be written (an existing figure is replaced)."""
    p = Path(path)
    if p.suffix.lower() not in FORMATS:
        raise UserError(f"{option} {str(p)!r}: the file name must end in .png or .svg")
    return check_output_file(p, option)


def save(fig: Figure, path: str | Path) -> Path:
    p = check_path(path)
    fig.savefig(p, dpi=150, bbox_inches="tight")
    return p


def origin_phrase(origins: set[str]) -> str:
    """'measured ceilings', 'datasheet ceilings' or 'measured and datasheet ceilings'."""
    known = sorted(o for o in origins if o != "unknown")
    return (" and ".join(known) or "no known") + " ceilings"


def new_figure(width: float = 8.0, height: float = 5.5, ncols: int = 1) -> tuple[Figure, object]:
    """The one way a figure starts: (figure, axes), one row of ``ncols`` axes (a single axes for 1)."""
    fig = Figure(figsize=(width, height))
    return fig, fig.subplots(1, ncols)
