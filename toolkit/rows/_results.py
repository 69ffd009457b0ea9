"""``RowsResult``: a result that holds graded rows and scrubs them in ``to_dict``.
"""

from __future__ import annotations

from typing import Any

from toolkit._util.results import Result
from toolkit.rows._scrub import scrub

__all__ = ["RowsResult"]


class RowsResult(Result):
    """A result that keeps graded rows in memory (``rows``, with ``privileged`` for the
    judge): ``to_dict`` scrubs them, so a serialised report never carries the answer key."""

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["rows"] = [scrub(row) for row in out["rows"]]
        return out
