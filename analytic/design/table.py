"""Writing an exploration: Parquet (pyarrow; categories dictionary-encoded, unknown booleans null, the
label and meta as JSON in the schema metadata) or CSV (one header line, empty fields for NaN / null),
and the rows of a front as plain records."""

from __future__ import annotations

import json
import math

import numpy as np

from ...errors import UserError
from .explore import Categorical, Exploration

FORMATS = ("parquet", "csv")


def output_format(path: str) -> str:
    ext = path.rsplit(".", 1)[-1].lower() if "." in path.rsplit("/", 1)[-1] else ""
    if ext not in FORMATS:
        raise UserError(f"--out {path}: expected a .parquet or .csv file name")
    if ext == "parquet":
        _pyarrow()
    return ext


def _pyarrow():
    try:
        import pyarrow
    except ImportError:
        raise UserError("writing parquet needs pyarrow, which is not installed: pip install pyarrow "
                        "(or write .csv)") from None
    return pyarrow


BOOL_COLUMNS = ("state_on_chip", "tiles_fit_on_chip", "fits_in_memory")


def _arrow_table(exp: Exploration):
    pa = _pyarrow()
    arrays = {}
    for name, col in exp.columns.items():
        if isinstance(col, Categorical):
            arrays[name] = pa.DictionaryArray.from_arrays(pa.array(col.codes, pa.int32()), pa.array(list(col.categories)))
        elif name in BOOL_COLUMNS:
            v = np.asarray(col, dtype=float)
            arrays[name] = pa.array(v == 1, mask=np.isnan(v))
        elif col.dtype.kind == "f":
            arrays[name] = pa.array(col, mask=np.isnan(col))
        else:
            arrays[name] = pa.array(col)
    table = pa.table(arrays)
    return table.replace_schema_metadata({"label": exp.meta["label"], "meta": json.dumps(exp.meta)})


def write_parquet(exp: Exploration, path: str) -> None:
    import pyarrow.parquet as pq
    pq.write_table(_arrow_table(exp), path)


def write_csv(exp: Exploration, path: str) -> None:
    try:
        import pyarrow.csv as pcsv
    except ImportError:
        pcsv = None
    if pcsv is not None:
        table = _arrow_table(exp)
        table = table.cast(__import__("pyarrow").schema(
            [f.with_type(f.type.value_type) if str(f.type).startswith("dictionary") else f for f in table.schema]))
        pcsv.write_csv(table, path, pcsv.WriteOptions(quoting_style="needed"))
        return
    import csv
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(list(exp.columns))
        w.writerows(record.values() for record in records(exp, range(exp.n_rows), empty=""))


def _plain(name: str, col, i: int, empty=None):
    if isinstance(col, Categorical):
        return col.categories[col.codes[i]]
    v = col[i]
    if name in BOOL_COLUMNS:
        return empty if math.isnan(v) else bool(v == 1)
    if isinstance(v, (np.floating, float)):
        return empty if math.isnan(v) else float(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.bool_):
        return bool(v)
    return v


def records(exp: Exploration, rows, empty=None) -> list[dict]:
    return [{name: _plain(name, col, int(i), empty) for name, col in exp.columns.items()} for i in rows]
