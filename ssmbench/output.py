"""Shared output helpers of the CLI: JSON to stdout, the one table printer, and ``si``, the one number
formatter ('18.04 ms', '2.7 G', '-' where missing: ``hwspecs.units.format_si``, which lives beside the
unit parser because spec checks print quantities too).
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any, Iterable

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .hwspecs.units import format_si as si

__all__ = ["console", "json_data", "print_json", "print_table", "si"]


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


def json_data(data: Any) -> Any:
    """``data`` exactly as ``print_json`` writes it, read back (the Python API returns what --json prints)."""
    return json.loads(json.dumps(_clean(data), default=_default))


def console(width: int | None = None) -> Console:
    """A console that does not squeeze piped output (ids and units must survive a pipe): the terminal's
    width, or 200 columns when piped; with ``width``, at least that many columns, piped or not."""
    probe = Console()
    if width is None:
        return Console(soft_wrap=False, width=probe.width if probe.is_terminal else 200)
    return Console(soft_wrap=False, width=max(width, probe.width))


def print_table(title: str | None, columns: Iterable[str], rows: Iterable[Iterable[Any]], caption: str | None = None,
                *, key_column: bool = False, fold: Iterable[str] | bool = (), no_wrap: Iterable[str] = (),
                whole_words: bool = False, width: int | None = None) -> None:
    """The one table printer. Every text is plain, never markup: titles, captions and cells are escaped
    (rich would swallow "[m]", a source tag "[R]" or a backend "[torch.sdpa.flash]"); None prints empty.

    ``key_column``: the first column (names, ids, keys) never wraps. ``fold``: names of free-text
    columns that break anywhere when a word does not fit (True: every column). ``no_wrap``: names of
    columns kept on one line. ``whole_words``: every other column breaks only between words.
    ``width``: see ``console``.
    """
    columns = [str(c) for c in columns]
    cells = [["" if v is None else escape(str(v)) for v in r] for r in rows]
    fold = set(columns) if fold is True else set(fold or ())
    no_wrap = set(no_wrap)
    table = Table(title=escape(title) if title else None, caption=escape(caption) if caption else None,
                  caption_justify="left")
    for i, c in enumerate(columns):
        opts: dict[str, Any] = {}
        if c in no_wrap or (key_column and i == 0):
            opts["no_wrap"] = True
        if c in fold:
            opts["overflow"] = "fold"
        elif whole_words and not opts:
            words = [w for r in cells for w in r[i].split()] + escape(c).split()
            opts["min_width"] = max(map(len, words), default=1)
        table.add_column(escape(c), **opts)
    for r in cells:
        table.add_row(*r)
    console(width).print(table)
