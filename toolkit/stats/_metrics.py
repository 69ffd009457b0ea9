"""One metric resolver for compare and power: a metric name to per-task values (pass@1, reward, markers).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from itertools import repeat
from typing import Any

import numpy as np

from toolkit._util.keys import _BINARY_TOLERANCE, binary_reward, numeric_reward
from toolkit.errors import ConfigError, unknown_name_message
from toolkit.rows._read import as_row_list
from toolkit.stats.passk import _read_rewards, _task_keys
from toolkit.stats.summaries import per_task_values

__all__ = []

def _marker_value(row: Mapping[str, Any], name: str) -> float | None:
    markers = row.get("markers")
    if not isinstance(markers, Mapping):
        return None
    value = markers.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _row_value(row: Mapping[str, Any], metric: str) -> float | None:
    if metric == "pass_at_1":
        value = binary_reward(row)
        return None if value is None else float(value)
    if metric == "reward":
        return numeric_reward(row)
    return _marker_value(row, metric[len("marker:"):])


def _per_task_values(rows: Sequence[Mapping[str, Any]], metric: str) -> tuple[dict[str, float], int]:
    """``{task: mean of the metric over the task's rows}`` and the count of unusable values.

    Grouping and value rules are stats-core's :func:`toolkit.stats.summaries.per_task_values`
    (exact 0/1 rewards for pass@1, finite numbers for markers); a marker one side never
    carries is simply absent there, not an error, since the other side may carry it.
    """
    # Callers pass as_row_list's output, whose rows are dicts (it converts other Mappings).
    if metric in ("pass_at_1", "reward") and type(rows) is list:
        return _columnar_task_means(rows, metric)
    try:
        grouped, skipped, _ = per_task_values(rows, metric)
    except ConfigError:
        return {}, 0
    return {task: math.fsum(values) / len(values) for task, values in grouped.items()}, skipped


def _columnar_task_means(rows: list[dict[str, Any]], metric: str) -> tuple[dict[str, float], int]:
    """The same numbers, read a column at a time (pass_at's reader): a call per row cost
    ~5 us, 10 s of compare_runs on two runs of 10^6 rows; tested equal to the row path."""
    rewards = _read_rewards(rows, False)
    values = rewards.values
    finite = np.isfinite(values)
    if metric == "pass_at_1":
        one = finite & (np.abs(values - 1.0) <= _BINARY_TOLERANCE)
        usable = one | (finite & (np.abs(values) <= _BINARY_TOLERANCE))
        values = one.astype(float)
    else:
        usable = finite
    skipped = int(np.count_nonzero(~usable & ~rewards.absent))
    keys = _task_keys(rows)
    # pandas' hash factorisation in C: 0.2 s for 10^6 keys where a dict.setdefault per key took
    # 1.1 s. Imported here: `import toolkit` does not load pandas (benchmarks/bench_import.py).
    import pandas as pd

    codes, uniques = pd.factorize(np.asarray(keys, dtype=object), sort=False)
    sums = np.bincount(codes[usable], weights=values[usable], minlength=len(uniques))
    sizes = np.bincount(codes[usable], minlength=len(uniques))
    present = np.flatnonzero(sizes)
    return dict(zip(uniques[present].tolist(), (sums[present] / sizes[present]).tolist())), skipped


def _per_task_rates(rows: Any, name: str = "rows") -> dict[str, float]:
    """Per-task pass@1 of any row container (used by :mod:`toolkit.stats.power`)."""
    return _per_task_values(as_row_list(rows, name), "pass_at_1")[0]


def _marker_names(rows: Iterable[Mapping[str, Any]]) -> set[str]:
    names: set[str] = set()
    # One comprehension to find the rows that carry markers at all: runs without markers
    # (most pass@1-only runs) then cost ~0.05 s per 10^6 rows instead of a call per row.
    carrying = [row for row in rows if row.get("markers") is not None] if type(rows) is not list else [
        row for row, markers in zip(rows, map(dict.get, rows, repeat("markers"))) if markers is not None
    ]
    for row in carrying:
        markers = row["markers"]
        if isinstance(markers, Mapping):
            names.update(str(name) for name in markers if _marker_value(row, str(name)) is not None)
    return names


def _resolve_metric(name: Any, known_markers: Iterable[str], *, extra: Iterable[str] = ()) -> str:
    """Canonical metric name ("pass_at_1", "reward", "marker:<name>") or a ConfigError."""
    if not isinstance(name, str) or not name:
        raise ConfigError(f"metric must be a name such as 'pass_at_1' or 'marker:hedging'; got {name!r}")
    markers = set(known_markers) | set(extra)
    if name in ("pass_at_1", "reward"):
        return name
    bare = name[len("marker:"):] if name.startswith("marker:") else name
    if bare in markers:
        return "marker:" + bare
    candidates = ["pass_at_1", "reward", *(f"marker:{m}" for m in sorted(markers)), *sorted(markers)]
    raise ConfigError(unknown_name_message("metric", name, candidates))


