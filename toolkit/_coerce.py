"""Accept the containers a user naturally holds rows in, refuse the rest by name."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

__all__ = ["as_row_list"]

_EXPECTED = (
    "a list of row dicts, a SimulationData (or anything with .rows), "
    "a pandas DataFrame, or a path to a JSONL file"
)


def as_row_list(rows: Any, name: str = "rows") -> list[dict[str, Any]]:
    """Return ``rows`` as a list of dicts; raise TypeError naming what was expected."""
    if rows is None:
        raise TypeError(f"{name} is None; expected {_EXPECTED}")
    if isinstance(rows, (str, os.PathLike)):
        from toolkit.rows import read_rows

        return read_rows(rows)
    if hasattr(rows, "rows") and not isinstance(rows, Mapping):
        inner = rows.rows
        inner = inner() if callable(inner) and not isinstance(inner, list) else inner
        return as_row_list(inner, name)
    try:
        import pandas as pd

        if isinstance(rows, pd.DataFrame):
            return rows.to_dict(orient="records")
    except ImportError:  # pandas is a dependency; this only guards odd environments
        pass
    if isinstance(rows, Mapping):
        raise TypeError(f"{name} is a single dict; expected {_EXPECTED} (wrap one row in a list)")
    if isinstance(rows, (list, tuple)) or (hasattr(rows, "__iter__") and not isinstance(rows, (bytes, str))):
        out = list(rows)
        for position, row in enumerate(out):
            if not isinstance(row, Mapping):
                raise TypeError(
                    f"{name}[{position}] is a {type(row).__name__}; expected a dict per row ({_EXPECTED})"
                )
        return [row if isinstance(row, dict) else dict(row) for row in out]
    raise TypeError(f"{name} is a {type(rows).__name__}; expected {_EXPECTED}")
