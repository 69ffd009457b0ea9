"""One metric over tasks, every marker at once, and how much learning signal groups carry.

* :func:`metric_summary`: the mean over tasks of each task's mean (so a task with 8
  rollouts weighs what a task with 2 does), with an interval over tasks by the rule of
  :func:`toolkit.stats._intervals.mean_interval` (clustered t with ``cluster=``; else
  Wilson over tasks for 0/1 pass_at_1 values, Student t below 30 tasks, the percentile
  bootstrap above). A metric on which every applicable row has the same value is ``degenerate``: its
  interval is withheld and a warning says so, because a marker that cannot fire passed as
  a guard in the reference engine (#270) and an all-zero checker looked like a clean
  failure (#594).
* :func:`marker_summary`: :func:`metric_summary` for every marker present in the rows.
* :func:`group_signal` (docs/design/engine.md §6.7): how many asks (tasks) are mixed, i.e. carry
  within-group reward variance, the only part a grouped RL update (GRPO) learns from.
  Counts use every numeric reward: 1 counts as a pass, 0 as a fail, anything in between
  (0.5) as neither (docs/design/engine.md §10 item 35), while the pass@k numbers beside them use exact 0/1 only.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from toolkit._util.keys import binary_reward, numeric_reward, task_key
from toolkit._util.results import Result
from toolkit._util.validate import check_level
from toolkit.errors import ConfigError, unknown_name_message
from toolkit.rows._read import as_row_list
from toolkit.stats._intervals import cluster_note, mean_interval, task_clusters
from toolkit.stats.passk import pass_at
from toolkit.stats.resampling import MIN_UNITS_FOR_INTERVAL, check_resamples

__all__ = [
    "metric_summary",
    "MetricSummary",
    "marker_summary",
    "MarkerSummary",
    "group_signal",
    "GroupSignal",
]

_BUILTIN_METRICS = ("pass_at_1", "reward")
_MARKER_PREFIX = "marker:"


def _marker_names(rows: list[dict[str, Any]]) -> list[str]:
    names: set[str] = set()
    for row in rows:
        markers = row.get("markers")
        if isinstance(markers, Mapping):
            names.update(str(name) for name in markers)
    return sorted(names)


def _marker_value(row: Mapping[str, Any], name: str) -> tuple[bool, float | None]:
    """(present, finite number or None) of marker ``name`` on ``row``."""
    markers = row.get("markers")
    if not isinstance(markers, Mapping) or markers.get(name) is None:
        return False, None
    value = markers[name]
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return True, None
    number = float(value)
    return True, number if math.isfinite(number) else None


def _resolve_metric(rows: list[dict[str, Any]], metric: str) -> tuple[str, str | None]:
    """("pass_at_1" | "reward" | "marker", marker name or None)."""
    if not isinstance(metric, str):
        raise TypeError(f"metric must be a string ('pass_at_1', 'reward' or 'marker:<name>'); got {metric!r}")
    if metric in _BUILTIN_METRICS:
        return metric, None
    markers = _marker_names(rows)
    name = metric[len(_MARKER_PREFIX):] if metric.startswith(_MARKER_PREFIX) else metric
    if name in markers or not rows:
        return "marker", name
    candidates = [*_BUILTIN_METRICS, *markers, *(f"{_MARKER_PREFIX}{m}" for m in markers)]
    raise ConfigError(unknown_name_message("metric", metric, candidates))


def per_task_values(rows: Any, metric: str) -> tuple[dict[str, list[float]], int, str]:
    """Values of ``metric`` grouped by task: (task -> values, n_skipped, resolved name).

    ``pass_at_1`` keeps exact 0/1 rewards; ``reward`` any finite numeric reward; a marker
    its finite numeric values. Present-but-unusable values (bool, text, NaN, partial
    reward for pass_at_1) are counted in ``n_skipped``; rows without the value are not.
    Other statistics (``compare_runs``) pair tasks through this.
    """
    grouped, skipped, resolved, _ = _per_task_rows(as_row_list(rows), metric)
    return grouped, skipped, resolved


def _per_task_rows(
    rows: list[dict[str, Any]], metric: str
) -> tuple[dict[str, list[float]], int, str, list[dict[str, Any]]]:
    """:func:`per_task_values` and the rows whose value was used (for ``cluster=``)."""
    kind, marker = _resolve_metric(rows, metric)
    grouped: dict[str, list[float]] = {}
    used: list[dict[str, Any]] = []
    skipped = 0
    for row in rows:
        if kind == "marker":
            present, value = _marker_value(row, marker)  # type: ignore[arg-type]
        else:
            present = row.get("reward") is not None or row.get("qwen_reward") is not None
            value = binary_reward(row) if kind == "pass_at_1" else numeric_reward(row)
        if value is None:
            skipped += int(present)
            continue
        grouped.setdefault(task_key(row), []).append(float(value))
        used.append(row)
    resolved = f"{_MARKER_PREFIX}{marker}" if kind == "marker" else kind
    return grouped, skipped, resolved, used


# The printed names of mean_interval's methods.
_METHOD_LABELS = {
    "clustered t": "clustered t",
    "wilson over tasks": "Wilson over tasks",
    "student t": "Student t",
    "percentile bootstrap": "percentile bootstrap",
}


@dataclass(frozen=True)
class MetricSummary(Result):
    """Mean over tasks of a metric's per-task means, with an interval over tasks.

    ``degenerate`` is True when every applicable row has one value; then ``ci95`` is None
    and ``warnings`` says why. ``n_rows_at_1`` / ``n_rows_at_0`` count rows whose value is
    exactly 1 / 0. ``interval_method`` is ``"clustered t"``, ``"wilson over tasks"``,
    ``"student t"``, ``"percentile bootstrap"`` or ``"none"`` (``mean_interval``'s rule);
    ``bootstrap_ci95`` is the cluster bootstrap beside a clustered t interval,
    ``design_effect`` the clustered over the naive variance, ``n_clusters`` /
    ``cluster_by`` / ``cluster_note`` the clustering (or why ``cluster="auto"`` found
    none), ``covers`` what the interval covers and ``interval_note`` why it is one-sided,
    zero-width or missing.
    """

    metric: str
    mean: float | None
    ci95: tuple[float, float] | None
    level: float
    n_tasks: int
    n_rows: int
    n_skipped: int
    degenerate: bool
    n_rows_at_1: int
    n_rows_at_0: int
    per_task: dict[str, float] = field(repr=False)
    warnings: tuple[str, ...] = ()
    note: str | None = None
    interval_method: str = "none"
    bootstrap_ci95: tuple[float, float] | None = None
    design_effect: float | None = None
    n_clusters: int | None = None
    cluster_by: str | None = None
    cluster_note: str | None = None
    covers: str | None = None
    interval_note: str | None = None

    def __str__(self) -> str:
        if self.mean is None:
            return f"{self.metric}: n/a ({self.note})"
        interval = f" [{self.ci95[0]:.3g}..{self.ci95[1]:.3g}]" if self.ci95 else " [no interval]"
        details = []
        if self.ci95 and self.interval_method != "percentile bootstrap":
            details.append(f"{_METHOD_LABELS.get(self.interval_method, self.interval_method)} interval")
        if self.cluster_note:
            details.append(self.cluster_note)
        note = self.interval_note
        if note is None and self.ci95 and self.ci95[0] == self.ci95[1]:
            note = "zero-width interval: every resample gave the same mean"  # never printed bare
        if note and self.ci95:
            details.append(note)
        extra = "".join(f"; {d}" for d in details)
        # the printed line carries the warning itself ("check the judge"), not only .warnings
        flag = (" DEGENERATE: " + "; ".join(self.warnings) if self.warnings else " DEGENERATE") if self.degenerate else ""
        return f"{self.metric} {self.mean:.3g}{interval} ({self.n_tasks} tasks, {self.n_rows} rows{extra}){flag}"


def metric_summary(
    rows: Any,
    metric: str,
    level: float = 0.95,
    n_resamples: int = 10_000,
    seed: int | np.random.Generator | None = 0,
    *,
    cluster: Any = None,
) -> MetricSummary:
    """Mean over task means of ``metric`` with an interval over tasks.

    ``mean = (1/T) sum_t mean(values of task t)`` over the T tasks with a usable value. The
    interval is :func:`toolkit.stats._intervals.mean_interval` on the T task means: with
    ``cluster=`` the cluster-robust t interval ``mean +/- t_{G-1} se_C`` with
    ``se_C = sqrt(G/(G-1) sum_c (sum_{t in c} (x_t - mean))^2) / T`` (Miller 2024,
    arXiv:2411.00640, CR1), the cluster bootstrap beside it; without, Wilson's interval
    over tasks when the metric is ``pass_at_1`` and every task mean is 0 or 1 (Wilson
    1927; Brown, Cai & DasGupta 2001), Student's t below 30 tasks, else the percentile
    bootstrap. (Wilson is kept to pass_at_1: a marker that happens to be 0/1 per task is
    not a proportion of passing tasks.) The interval is withheld (``ci95`` None, with a
    note) when there are 2 or more values and all are equal (``degenerate``, with a
    warning) or fewer than 3 tasks (or clusters) carry the metric. Empty input returns a
    result with a note.

    Parameters
    ----------
    rows : list of dict, SimulationData, DataFrame or path
        The rows: a list of row dicts, anything with ``.rows``, a pandas DataFrame or a path
        to a JSONL file. Tasks are grouped by ``scenario_id``, else ``task_id``, else the
        prompt.
    metric : str
        ``"pass_at_1"`` (exact 0/1 rewards, within 1e-6), ``"reward"`` (any finite numeric
        reward), ``"marker:<name>"`` or a bare marker name (finite numeric values of
        ``markers[name]``). Rewards are read from ``reward``, else ``qwen_reward``. Present
        but unusable values (a bool, text, NaN, partial credit for pass_at_1) are counted in
        ``n_skipped``. An unknown name raises with the nearest valid ones (on empty input
        any marker name is accepted).
    level : float, optional
        Confidence level of the interval, strictly between 0 and 1; default 0.95. Checked
        even when no interval is formed.
    n_resamples : int, optional
        Bootstrap resamples, an integer ``>= 100`` (a warning below 1,000); default 10,000.
    seed : int, numpy.random.Generator or None, optional
        Seed of the bootstrap (:func:`toolkit.stats.bootstrap_ci`); default 0. None draws
        fresh entropy, so the interval is not reproducible.
    cluster : None, "auto", str or callable, optional
        Tasks sharing a cluster are not independent: None (default) treats tasks as
        independent; ``"auto"`` takes the first of ``cluster``, ``cluster_id``,
        ``task_family``, ``scenario_dimensions.tool`` every used row carries; a row field
        (dotted for nested) or ``callable(row) -> label``. See :func:`toolkit.pass_at`.

    Returns
    -------
    MetricSummary
        ``metric`` (the resolved name), ``mean``, ``ci95``, ``level``, ``n_tasks``,
        ``n_rows`` (values used), ``n_skipped``, ``degenerate``, ``n_rows_at_1``,
        ``n_rows_at_0``, ``per_task``, ``warnings``, ``note`` and the interval fields
        (``interval_method``, ``bootstrap_ci95``, ``design_effect``, ``n_clusters``,
        ``cluster_by``, ``cluster_note``, ``covers``, ``interval_note``).

    Raises
    ------
    ConfigError
        For an unknown metric name, ``level`` / ``n_resamples`` out of range, or a
        ``cluster`` field a used row lacks.
    TypeError
        When ``metric`` is not a string or ``rows`` is not a row container.
    """
    rows = as_row_list(rows)
    # Checked up front, not only when 3+ tasks reach the bootstrap.
    level = check_level("level", level)
    n_resamples = check_resamples(n_resamples)
    grouped, skipped, resolved, used_rows = _per_task_rows(rows, metric)
    tasks = sorted(grouped)
    values = [value for task in tasks for value in grouped[task]]
    at_1 = sum(1 for value in values if value == 1.0)
    at_0 = sum(1 for value in values if value == 0.0)
    per_task = {task: math.fsum(grouped[task]) / len(grouped[task]) for task in tasks}
    warnings: list[str] = []
    notes: list[str] = []
    labels, used = task_clusters(used_rows, cluster) if tasks else (None, None)
    clustering = dict(
        n_clusters=len({labels[t] for t in tasks}) if labels is not None else None,
        cluster_by=used if labels is not None else None,
        cluster_note=cluster_note(labels, used, tasks) if labels is not None else used,
    )

    def build(mean: float | None, ci: tuple[float, float] | None, degenerate: bool, **interval: Any) -> MetricSummary:
        return MetricSummary(
            resolved, mean, ci, float(level), len(tasks), len(values), skipped, degenerate,
            at_1, at_0, per_task, tuple(warnings), "; ".join(notes) if notes else None, **clustering, **interval,
        )

    if not values:
        if not rows:
            notes.append("no rows: nothing to summarise")
        else:
            detail = f" ({skipped} present but not usable)" if skipped else ""
            notes.append(f"no row carries a usable value of {resolved}{detail}")
        return build(None, None, False)
    mean = math.fsum(per_task.values()) / len(tasks)
    if len(values) >= 2 and len(set(values)) == 1:
        only = values[0]
        shown = f"{only:g}"
        if resolved.startswith(_MARKER_PREFIX):
            warnings.append(
                f"{resolved} is {shown} on every row ({len(values)} of {len(values)}): it cannot move here, "
                "so it cannot guard a change (do not use it in must_not_regress)"
            )
        else:
            warnings.append(
                f"every row scored {shown} ({len(values)} of {len(values)}); check the judge before reading this number"
            )
        notes.append("degenerate: no interval on a metric that never varies")
        return build(mean, None, True)
    if len(tasks) < MIN_UNITS_FOR_INTERVAL:
        notes.append(
            f"no interval: {len(tasks)} task(s), and an interval needs {MIN_UNITS_FOR_INTERVAL}; run more tasks"
        )
        return build(mean, None, False)
    result = mean_interval(
        [per_task[t] for t in tasks], clusters=None if labels is None else [labels[t] for t in tasks],
        level=level, n_resamples=n_resamples, seed=seed, proportion=resolved == "pass_at_1",
    )
    if resolved == "pass_at_1" and result.pair is not None:
        # a pass rate and its truth are in [0, 1]: a t interval past an end is clipped there
        result = dataclasses.replace(result, low=max(0.0, result.low), high=min(1.0, result.high))
    if result.pair is None:
        notes.append(result.note or "no interval")
    return build(
        mean, result.pair, False, interval_method=result.method,
        bootstrap_ci95=result.bootstrap if result.method == "clustered t" else None,
        design_effect=result.design_effect, covers=result.covers, interval_note=result.note,
    )


@dataclass(frozen=True)
class MarkerSummary(Result, Mapping):
    """:class:`MetricSummary` per marker (a read-only mapping name -> summary)."""

    markers: dict[str, MetricSummary]
    n_rows: int
    note: str | None = None

    def __getitem__(self, name: str) -> MetricSummary:
        if name not in self.markers:
            raise KeyError(unknown_name_message("marker", name, self.markers))
        return self.markers[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.markers)

    def __len__(self) -> int:
        return len(self.markers)

    def __str__(self) -> str:
        if not self.markers:
            return f"no markers ({self.note})"
        return " | ".join(str(summary) for summary in self.markers.values())

    __hash__ = None  # type: ignore[assignment]  # holds dicts


def marker_summary(
    rows: Any,
    level: float = 0.95,
    n_resamples: int = 10_000,
    seed: int | np.random.Generator | None = 0,
    *,
    cluster: Any = None,
) -> MarkerSummary:
    """:func:`metric_summary` for every marker present in ``rows`` (sorted by name).

    Parameters
    ----------
    rows : list of dict, SimulationData, DataFrame or path
        The rows: a list of row dicts, anything with ``.rows``, a pandas DataFrame or a path
        to a JSONL file. Tasks are grouped by ``scenario_id``, else ``task_id``, else the
        prompt.
        Every name that appears in some row's ``markers`` dict is summarised.
    level : float, optional
        Confidence level of the interval, strictly between 0 and 1; default 0.95. Checked
        even when no interval is formed.
    n_resamples : int, optional
        Bootstrap resamples, an integer ``>= 100`` (a warning below 1,000); default 10,000.
    seed : int, numpy.random.Generator or None, optional
        Seed of each marker's bootstrap; default 0. An int gives every marker the
        same seed; a Generator is shared, drawn from marker after marker. None draws
        fresh entropy, so the interval is not reproducible.
    cluster : None, "auto", str or callable, optional
        Passed to each :func:`metric_summary`.

    Returns
    -------
    MarkerSummary
        A read-only mapping marker name -> :class:`MetricSummary`, with ``n_rows`` and a
        ``note`` (no rows, no markers, or markers with too few tasks for an interval).

    Raises
    ------
    ConfigError
        When ``level`` or ``n_resamples`` is out of range (checked per marker, so not when
        no row carries a marker).
    TypeError
        When ``rows`` is not a row container.
    """
    rows = as_row_list(rows)
    names = _marker_names(rows)
    summaries = {
        name: metric_summary(
            rows, f"{_MARKER_PREFIX}{name}", level=level, n_resamples=n_resamples, seed=seed, cluster=cluster
        )
        for name in names
    }
    notes = []
    if not rows:
        notes.append("no rows")
    elif not names:
        notes.append("no row carries markers")
    short = [name for name, s in summaries.items() if s.ci95 is None and not s.degenerate and s.n_tasks < MIN_UNITS_FOR_INTERVAL]
    if short:
        notes.append(f"no interval for {', '.join(short)}: fewer than {MIN_UNITS_FOR_INTERVAL} tasks carry them")
    return MarkerSummary(summaries, len(rows), "; ".join(notes) if notes else None)


# --------------------------------------------------------------------------- signal


@dataclass(frozen=True)
class GroupSignal(Result):
    """How many asks carry learning signal for a grouped update (docs/design/engine.md §6.7).

    Groups are tasks. ``n_single``: size 1; ``n_mixed``: size >= 2 with differing rewards;
    ``n_all_zero`` / ``n_all_one``: unanimous; ``n_in_band``: mixed with
    lo <= mean reward <= hi; ``mixed_rate`` = n_mixed / groups of size >= 2. ``groups``
    maps each task to {n, n1, n0, reward_mean} (n1/n0 count exact 1s and 0s; 0.5 counts as
    neither). The pass@k fields come from :func:`toolkit.stats.pass_at` on the same rows.
    """

    n_groups: int
    n_single: int
    n_mixed: int
    n_all_zero: int
    n_all_one: int
    n_in_band: int
    mixed_rate: float | None
    lo: float
    hi: float
    n_rows: int
    n_skipped: int
    k: int | None
    pass_at_1: float | None
    pass_pow_k: float | None
    pass_at_k: float | None
    headroom: float | None
    groups: dict[str, dict[str, Any]] = field(repr=False)
    note: str | None = None

    def __str__(self) -> str:
        if not self.n_groups:
            return f"group signal: no groups ({self.note})"
        rate = "n/a" if self.mixed_rate is None else f"{self.mixed_rate:.0%}"
        return (
            f"{self.n_mixed} mixed of {self.n_groups} groups (mixed rate {rate}, {self.n_in_band} in "
            f"[{self.lo:g}, {self.hi:g}]) | all-0 {self.n_all_zero} | all-1 {self.n_all_one} | single {self.n_single}"
        )


def group_signal(rows: Any, lo: float = 0.2, hi: float = 0.8) -> GroupSignal:
    """Count mixed, unanimous and in-band groups of rollouts per task (docs/design/engine.md §6.7).

    A group is a task's rollouts with a finite numeric reward (``reward``, else
    ``qwen_reward``). A group of one reward is single; a group of 2 or more is mixed when
    its rewards are not all equal, and then in band when ``lo <= mean reward <= hi``; a
    unanimous group is all-zero (every reward 0) or all-one (every reward 1), any other
    unanimous value counting in neither. The pass@k fields are the point values of
    :func:`toolkit.stats.pass_at` on the same rows.

    Parameters
    ----------
    rows : list of dict, SimulationData, DataFrame or path
        The rows: a list of row dicts, anything with ``.rows``, a pandas DataFrame or a path
        to a JSONL file. Tasks are grouped by ``scenario_id``, else ``task_id``, else the
        prompt.
    lo, hi : float, optional
        The band of mean rewards that counts as in band, each in [0, 1] with
        ``lo <= hi``; defaults 0.2 and 0.8. They affect only ``n_in_band``.

    Returns
    -------
    GroupSignal
        ``n_groups``, ``n_single``, ``n_mixed``, ``n_all_zero``, ``n_all_one``,
        ``n_in_band``, ``mixed_rate`` (``n_mixed`` / groups of size >= 2, None without
        any), ``lo``, ``hi``, ``n_rows`` (rewards used), ``n_skipped``, ``k``, ``pass_at_1``,
        ``pass_pow_k``, ``pass_at_k``, ``headroom``, ``groups`` and ``note``.

    Raises
    ------
    ConfigError
        When ``lo`` or ``hi`` is not a number in [0, 1] (a bool is refused) or
        ``lo > hi``.
    TypeError
        When ``rows`` is not a row container.
    """
    rows = as_row_list(rows)
    for name, value in (("lo", lo), ("hi", hi)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise ConfigError(f"{name} must be a number in [0, 1]; got {value!r}")
    if lo > hi:
        raise ConfigError(f"lo must not exceed hi; got lo={lo}, hi={hi}")
    grouped: dict[str, list[float]] = {}
    skipped = 0
    for row in rows:
        value = numeric_reward(row)
        if value is None:
            skipped += int(row.get("reward") is not None or row.get("qwen_reward") is not None)
            continue
        grouped.setdefault(task_key(row), []).append(value)
    groups: dict[str, dict[str, Any]] = {}
    single = mixed = all_zero = all_one = in_band = repeated = 0
    for task in sorted(grouped):
        values = grouped[task]
        mean = math.fsum(values) / len(values)
        is_mixed = len(values) >= 2 and len(set(values)) > 1
        groups[task] = {
            "n": len(values),
            "n1": sum(1 for v in values if binary_reward({"reward": v}) == 1),
            "n0": sum(1 for v in values if binary_reward({"reward": v}) == 0),
            "reward_mean": mean,
            "mixed": is_mixed,
        }
        if len(values) == 1:
            single += 1
            continue
        repeated += 1
        if is_mixed:
            mixed += 1
            in_band += int(lo <= mean <= hi)
        elif values[0] == 0:
            all_zero += 1
        elif values[0] == 1:
            all_one += 1
    # only point values are used here; a bad reward is counted in n_skipped above, as
    # group_signal always has, rather than raised
    summary = pass_at(rows, n_resamples=1_000, on_bad_reward="skip")
    note = None
    if not rows:
        note = "no rows"
    elif not grouped:
        # pass_at counts why (grader errors with the first one, ungraded rows)
        note = summary.note if summary.pass_at_1 is None and summary.note else "no numeric rewards; grade first"
    elif not repeated:
        note = "every task has one rollout: no group can be mixed; run repeats >= 2"
    return GroupSignal(
        n_groups=len(groups), n_single=single, n_mixed=mixed, n_all_zero=all_zero, n_all_one=all_one,
        n_in_band=in_band, mixed_rate=(mixed / repeated) if repeated else None, lo=float(lo), hi=float(hi),
        n_rows=sum(len(v) for v in grouped.values()), n_skipped=skipped, k=summary.k,
        pass_at_1=summary.pass_at_1, pass_pow_k=summary.pass_pow_k, pass_at_k=summary.pass_at_k,
        headroom=summary.headroom, groups=groups, note=note,
    )
