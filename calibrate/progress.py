"""Progress of a calibration fit on stderr, one report per group, so that stdout stays the result.

Fitting every candidate model form by leave-shape-out cross-validation takes from milliseconds to
seconds per group, and a full H200 profile has tens of groups: without a sign of life a user cannot
tell a long fit from a hung one. On a terminal the report is a rich progress bar; elsewhere (a log, a
pipe, a test) one plain line per group, which greps and diffs well.
"""

from __future__ import annotations

import sys
from typing import Callable, TextIO

# (index from 1, number of groups, group label, fitted group record, seconds the fit took)
Progress = Callable[[int, int, str, dict, float], None]


def _outcome(group: dict) -> str:
    if group["status"] == "calibrated":
        return f"calibrated ({group['model']['name']})"
    if group["status"] == "pooled":
        return f"pooled from {group['pooled_from']['level']} ({group['model']['name']})"
    return "not calibrated"


def line_progress(stream: TextIO) -> Progress:
    def report(i: int, n: int, label: str, group: dict, seconds: float) -> None:
        print(f"calibrate: group {i}/{n} {label}: {_outcome(group)}, fit time {seconds:.3g} s", file=stream,
              flush=True)
    return report


def bar_progress(stream: TextIO) -> Progress:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.progress import Progress as Bar

    bar = Bar(TextColumn("calibrate: fitting groups"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
              TextColumn("{task.description}"), console=Console(file=stream), transient=True)
    task = None

    def report(i: int, n: int, label: str, group: dict, seconds: float) -> None:
        nonlocal task
        if task is None:
            bar.start()
            task = bar.add_task("", total=n)
        bar.update(task, completed=i, description=f"{label}: {_outcome(group)}")
        if i == n:
            bar.stop()
    return report


def group_progress(stream: TextIO | None = None) -> Progress:
    """The report for ``stream`` (default stderr): a bar on a terminal, plain lines otherwise."""
    stream = sys.stderr if stream is None else stream
    return bar_progress(stream) if stream.isatty() else line_progress(stream)
