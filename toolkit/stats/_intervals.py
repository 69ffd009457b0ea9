"""One rule for the interval on a mean over tasks, and the task -> cluster map of ``cluster=``.

:func:`mean_interval` picks the interval by what the per-task values are (the choice and the
measured coverage of each branch are in the docstring; ``benchmarks/bench_calibration.py``
measures them again):

1. ``clusters`` given with at least 2 clusters that are not all singletons: the
   cluster-robust t interval of :func:`toolkit.stats.clustered_mean` (Miller 2024, CR1,
   ``t(G - 1)``), with the cluster bootstrap's interval beside it.
2. every value exactly 0 or 1 and ``proportion=True`` (pass^k and pass@k when every task
   has ``n = k`` rollouts; pass@1 with one rollout a task): the Wilson interval of
   ``successes`` tasks out of ``n``. Each task's value is then a Bernoulli draw with the
   population's mean as its probability, so a binomial interval over tasks is the right
   model; a bootstrap of 0/1 values with no 1 among them is the zero-width [0, 0].
3. fewer than 30 tasks: Student's t, ``mean +/- t_{n-1} sd / sqrt(n)``. The percentile
   bootstrap resamples n values and is narrow by ``sqrt((n-1)/n)`` and by ``z`` against
   ``t``; at 10 paired tasks it covered 0.899 (issue 14's audit).
4. otherwise the percentile bootstrap over tasks (:func:`toolkit.bootstrap_ci`).

Fewer than 3 units (tasks, or clusters) give no interval, as everywhere in the toolkit.

Measured (``benchmarks/bench_calibration.py``, 1,000 suites per cell, Monte Carlo se about
0.007, 4 rollouts a task): pass^4 with E[p^4] = 0.029 (rare) covers 0.967 / 0.982 / 0.943 /
0.960 at 10 / 20 / 50 / 200 tasks with Wilson over tasks, where the bootstrap covered 0.260 /
0.440 / 0.754 / 0.925 and printed a zero-width interval in 74% of the 10-task suites (Wilson
over-covers at 20 tasks: near 0 its coverage steps with n, and it errs wide there); pass@1
covers 0.953 at 20 tasks (Student t), 0.951 / 0.960 at 50 / 200 (bootstrap); clustered
numbers in :func:`toolkit.stats.clustered_mean`, paired deltas in :mod:`toolkit.stats.compare`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import t as student_t

from toolkit._util.keys import task_key
from toolkit.errors import ConfigError
from toolkit.stats.agreement import wilson
from toolkit.stats.resampling import MIN_UNITS_FOR_INTERVAL, bootstrap_ci, cluster_codes, clustered_mean

__all__: list[str] = []

# Below 30 units the bootstrap's narrowness (sqrt((n-1)/n), z instead of t) costs measurable
# coverage (0.899 at 10 paired tasks, 0.916 at 20); at 30 t_{0.975}(29) = 2.045 is within 4%
# of 1.96 and the two agree.
SMALL_N = 30

# Where ``cluster="auto"`` looks, first present wins: an explicit label, then the tool a
# situation is built around (its base task on our grids; coarser than the situation, so the
# interval errs wide rather than narrow when the true clusters are smaller).
AUTO_CLUSTER_FIELDS: tuple[tuple[str, ...], ...] = (
    ("cluster",),
    ("cluster_id",),
    ("task_family",),
    ("scenario_dimensions", "tool"),
)


@dataclass(frozen=True)
class MeanInterval:
    """An interval on a mean over tasks, with how it was made.

    ``method`` is ``"clustered t"``, ``"wilson over tasks"``, ``"student t"``,
    ``"percentile bootstrap"`` or ``"none"``; ``covers`` names the target.
    """

    low: float | None
    high: float | None
    method: str
    standard_error: float | None
    n: int
    n_clusters: int | None
    note: str | None
    bootstrap: tuple[float, float] | None = None
    naive_standard_error: float | None = None
    design_effect: float | None = None
    covers: str = "the mean over tasks drawn like these"

    @property
    def pair(self) -> tuple[float, float] | None:
        return None if self.low is None else (self.low, self.high)


def _t_interval(data: np.ndarray, level: float) -> tuple[float, float, float]:
    mean = math.fsum(data) / data.size
    se = float(np.std(data, ddof=1)) / math.sqrt(data.size)
    half = float(student_t.ppf(1.0 - (1.0 - level) / 2.0, data.size - 1)) * se
    return mean - half, mean + half, se


def mean_interval(
    values: Sequence[float],
    *,
    clusters: Sequence[Any] | None = None,
    level: float,
    n_resamples: int,
    seed: Any,
    proportion: bool = True,
) -> MeanInterval:
    """The interval on ``mean(values)`` by the rule of the module docstring.

    Parameters
    ----------
    values : sequence of float
        One value per unit (task, trace).
    clusters : sequence, optional
        One label per value; with at least 2 clusters that are not all singletons the
        interval is the cluster-robust t (CR1, ``t(G - 1)``). Default None.
    level : float
        Confidence level, e.g. 0.95.
    n_resamples : int
        Resamples of the bootstrap branches.
    seed : int or numpy.random.Generator
        Seed of the bootstrap branches.
    proportion : bool, optional
        When every value is exactly 0 or 1, use the Wilson interval over units (default True).

    Returns
    -------
    MeanInterval
        The bounds, the method that made them, the standard error and notes.
    """
    data = np.asarray(values, dtype=float)
    n = int(data.size)
    if clusters is not None:
        codes, n_clusters = cluster_codes(clusters, n)
        if n_clusters < n:  # singletons everywhere is the unclustered case
            if n_clusters < MIN_UNITS_FOR_INTERVAL:
                return MeanInterval(
                    None, None, "none", None, n, n_clusters,
                    f"no interval: {n} tasks in {n_clusters} cluster(s), and a clustered interval needs "
                    f"{MIN_UNITS_FOR_INTERVAL}; add clusters (independent base tasks), not tasks",
                )
            analytic = clustered_mean(data, codes, level)
            boot = bootstrap_ci(data, level=level, n_resamples=n_resamples, seed=seed, clusters=codes)
            return MeanInterval(
                analytic.low, analytic.high, "clustered t", analytic.standard_error, n, n_clusters, analytic.note,
                bootstrap=None if boot.low is None else (boot.low, boot.high),
                naive_standard_error=analytic.naive_standard_error, design_effect=analytic.design_effect,
                covers="the mean over tasks of clusters drawn like these",
            )
    if n < MIN_UNITS_FOR_INTERVAL:
        return MeanInterval(
            None, None, "none", None, n, None,
            f"no interval: {n} task(s), and an interval needs {MIN_UNITS_FOR_INTERVAL}",
        )
    if proportion and np.all((data == 0.0) | (data == 1.0)):
        successes = int(np.count_nonzero(data == 1.0))
        interval = wilson(successes, n, level)
        se = math.sqrt(max(successes * (n - successes), 0) / n**3)
        note = None
        if successes in (0, n):
            note = (
                f"{'no' if successes == 0 else 'every'} task scored 1 ({successes} of {n}): the interval is "
                "Wilson's over tasks, one-sided in effect"
            )
        return MeanInterval(interval.low, interval.high, "wilson over tasks", se, n, None, note)
    if np.all(data == data[0]):
        point = float(data[0])
        return MeanInterval(
            point, point, "student t" if n < SMALL_N else "percentile bootstrap", 0.0, n, None,
            f"all {n} values equal {point:.6g}: no spread, so the interval is the point; it says "
            "nothing about other tasks",
        )
    if n < SMALL_N:
        low, high, se = _t_interval(data, level)
        return MeanInterval(low, high, "student t", se, n, None, None)
    boot = bootstrap_ci(data, level=level, n_resamples=n_resamples, seed=seed)
    return MeanInterval(boot.low, boot.high, "percentile bootstrap", boot.standard_error, n, None, boot.note)


# --------------------------------------------------------------------------- cluster=


def _lookup(row: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = row
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return value


def _describe(cluster: Any) -> str:
    if callable(cluster):
        return getattr(cluster, "__name__", "a callable")
    return str(cluster)


def task_clusters(rows: Sequence[Mapping[str, Any]], cluster: Any) -> tuple[dict[str, Any] | None, str | None]:
    """``({task: cluster label}, what was used)`` for ``cluster=``, or ``(None, why not)``.

    ``cluster`` is None (no clustering), ``"auto"`` (the first of
    :data:`AUTO_CLUSTER_FIELDS` every row carries), a row field (dotted for nested), or
    ``callable(row) -> label``. Every row of a task must give the same label; a task split
    across clusters, or a row without the named field, is a :class:`ConfigError` naming it.
    """
    if cluster is None or cluster is False:
        return None, None
    if isinstance(cluster, str) and cluster == "auto":
        for path in AUTO_CLUSTER_FIELDS:
            if rows and all(_lookup(row, path) is not None for row in rows):
                return _labels(rows, lambda row, p=path: _lookup(row, p), ".".join(path)), ".".join(path)
        return None, (
            "cluster='auto' found no cluster key on every row (looked for "
            + ", ".join(".".join(p) for p in AUTO_CLUSTER_FIELDS)
            + "); tasks were treated as independent"
        )
    if isinstance(cluster, str):
        if not cluster:
            raise ConfigError("cluster must be a row field, a callable, 'auto' or None; got ''")
        path = tuple(cluster.split("."))
        for position, row in enumerate(rows):
            if _lookup(row, path) is None:
                raise ConfigError(
                    f"cluster={cluster!r}: row {position} (task {task_key(row)!r}) has no {cluster!r}; "
                    "every row needs a cluster label (or pass cluster='auto')"
                )
        return _labels(rows, lambda row: _lookup(row, path), cluster), cluster
    if callable(cluster):
        return _labels(rows, cluster, _describe(cluster)), _describe(cluster)
    raise ConfigError(f"cluster must be a row field, a callable, 'auto' or None; got {cluster!r}")


def _labels(rows: Sequence[Mapping[str, Any]], get: Callable[[Mapping[str, Any]], Any], name: str) -> dict[str, Any]:
    labels: dict[str, Any] = {}
    for position, row in enumerate(rows):
        label = get(row)
        if label is None:
            raise ConfigError(f"cluster {name!r} gave None for row {position} (task {task_key(row)!r})")
        if isinstance(label, (dict, list, set)):
            label = repr(label)
        task = task_key(row)
        seen = labels.setdefault(task, label)
        if seen != label:
            raise ConfigError(
                f"task {task!r} is in two clusters under {name!r} ({seen!r} and {label!r}); a task's "
                "rows must share one cluster"
            )
    return labels


def cluster_note(labels: Mapping[str, Any] | None, used: str | None, tasks: Sequence[str]) -> str | None:
    """The printed part: 'clustered by <key>: G clusters' (None without clustering)."""
    if labels is None:
        return None
    n_clusters = len({labels[t] for t in tasks if t in labels})
    return f"clustered by {used}: {len(tasks)} tasks in {n_clusters} clusters"
