"""Shared output helpers: JSON to stdout, rich tables for people."""

from __future__ import annotations

import json
import math
import sys
from typing import Any, Iterable

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table


def _default(o: Any):
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if hasattr(o, "isoformat"):
        return o.isoformat()
    raise TypeError(f"cannot encode {type(o).__name__} as JSON")


def _clean(o: Any) -> Any:
    """JSON has no NaN or infinity: write them as null."""
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if isinstance(o, dict):
        return {k: _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    return o


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(_clean(data), indent=2, default=_default) + "\n")


def console() -> Console:
    """A console that does not squeeze piped output (ids and units must survive a pipe)."""
    probe = Console()
    return Console(soft_wrap=False, width=probe.width if probe.is_terminal else 200)


def print_table(title: str | None, columns: Iterable[str], rows: Iterable[Iterable[Any]], caption: str | None = None) -> None:
    # Cells are escaped: rich would swallow "[m]" or "[R]" as markup.
    table = Table(title=escape(title) if title else None, caption=escape(caption) if caption else None,
                  caption_justify="left")
    for c in columns:
        table.add_column(escape(str(c)))
    for r in rows:
        table.add_row(*("" if v is None else escape(str(v)) for v in r))
    console().print(table)
