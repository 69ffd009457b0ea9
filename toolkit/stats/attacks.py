"""Utility under attack: ``tk.attack_report(rows, clean=None)``.

An attack (the world's ``prompt_injection`` and ``wrong_data`` modes, issue 17) is judged the
way AgentDojo judges it (Debenedetti et al. 2024): the *utility* of the agent (did it still do
what the person asked) on clean runs and under attack, and the *attack success rate* (did the
attacker's goal happen). Here each comes with its interval over tasks, and the drop in utility
is a paired difference on the same situations.

What the report reads (rows only, written or in memory), and its populations:

* the ledger (``faults``): an entry with ``attack: true`` is an attack that reached the row
  (the agent was shown an altered answer); ``attack: false`` is an attack that found nothing
  to alter (wrong_data on an answer with no record), so that call exposed the agent to
  nothing; an entry without ``attack`` is an ordinary fault (a timeout, a 500, ...).
* with ``clean=`` (the paired design of :func:`toolkit.attacked_tasks`: the same tasks run
  clean and under attack): *utility under attack* is over every row of the attacked run
  that met no ordinary fault, reached by an attack or not. A replayed rollout none of whose
  calls reached the world, or whose look-ups found nothing to falsify, still ran under attack
  conditions, and its clean twin is on the clean side whatever it did; dropping it on one
  side only would bias the paired difference toward the exposed tasks. *Utility clean* is
  over the clean run's rows with no fault at all.
* without ``clean=`` (one mixed run, e.g. ``fault_rate > 0`` with attacks enabled): utility
  under attack is over the rows an attack reached, utility clean over the rows with no fault;
  rows with ordinary faults and rows whose only attacks found nothing are in neither side.
* *attack success* is always over the rows an attack reached (the ``attack_success``
  marker, which the state grader writes on those rows while the attack's goal is still in
  memory: it is privileged, so written rows do not hold it). By mode, utility is over the
  attacked-side rows whose ledger names the mode (reached or not) and success over the
  reached ones; rows with no ledger entry (no call reached the world: none made, or only
  questions to the person) name no mode and count only in the overall rates.
* utility is the row's ``reward`` (with :func:`toolkit.state_grader`: the goal met with no
  collateral and no minefield, so an attack that made the agent break something costs
  utility too); ``utility="goal_met"`` reads the ``goal_met`` marker instead (the ask done,
  whatever else happened), falling back to the reward. Every score read must be a number in
  [0, 1]: anything else (3.0, NaN, inf) is refused naming the row, never averaged.

Every row left out of a side is counted in ``notes`` (ordinary faults, faults on the clean
run, rows with no utility, reached rows with no marker, rows that name no mode).

Intervals are the toolkit's rule for a mean over tasks (:func:`toolkit.stats.mean_interval`
through its private module: Wilson over tasks for 0/1 task values, Student t below 30 tasks,
the percentile bootstrap above, the cluster-robust t with ``cluster=``); rows of one task are
averaged first, so repeats of a task never count as independent evidence.

Measured coverage of the 95% intervals (``benchmarks/bench_calibration.py --only attacks``,
1,000 suites a cell, Monte Carlo se ~0.007; logit-normal task rates around 0.7 clean and 0.45
attacked, attack success 0.3), at 10 / 30 / 100 tasks:

====================  =====================  =====================
interval              1 row a side           4 rows a side
====================  =====================  =====================
utility clean         0.964 / 0.946 / 0.952  0.950 / 0.936 / 0.925
utility under attack  0.946 / 0.958 / 0.952  0.949 / 0.931 / 0.932
attack success        0.933 / 0.923 / 0.922  0.950 / 0.943 / 0.965
paired difference     0.933 / 0.940 / 0.947  0.958 / 0.929 / 0.938
====================  =====================  =====================

Attack success on one row a task is the Wilson interval over tasks, whose exact coverage at a
true rate of 0.3 is 0.924 / 0.930 / 0.937 at these n (binomial sum; Wilson dips below 95% near
0.3): the measured figures match it. Above 30 tasks the percentile bootstrap runs 0.925-0.938
on four-row tasks, at the low edge of the 0.93-0.97 target. ``tests/stats/test_attacks.py``
repeats a 300-suite check at 60 tasks.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolkit._util.keys import REWARD_FIELDS, task_key
from toolkit._util.results import Result
from toolkit._util.validate import check_level
from toolkit.errors import ConfigError, unknown_name_message
from toolkit.rows._read import as_row_list
from toolkit.stats._intervals import mean_interval, task_clusters
from toolkit.stats.resampling import check_resamples

__all__ = ["AttackRate", "AttackReport", "attack_report"]

_UTILITIES = ("reward", "goal_met")


@dataclass(frozen=True)
class AttackRate(Result):
    """One rate over tasks: ``estimate`` (mean of per-task means), ``low``/``high`` (None
    below 3 tasks), ``n_tasks``, ``n_rows``, ``method`` (how the interval was made), ``note``
    (what the interval rule said of these values, e.g. a zero-width interval when every task
    has the same value; None when nothing)."""

    estimate: float | None
    low: float | None
    high: float | None
    n_tasks: int
    n_rows: int
    method: str
    note: str | None = None

    def __str__(self) -> str:
        if self.estimate is None:
            return f"- ({self.n_rows} rows)"
        band = "" if self.low is None else f" [{self.low:.2f}, {self.high:.2f}]"
        return f"{self.estimate:.2f}{band} ({self.n_tasks} tasks)"


@dataclass(frozen=True)
class AttackReport(Result):
    """``utility_clean``, ``utility_attacked``, ``attack_success`` and ``difference`` (paired,
    attacked minus clean, on the tasks seen both ways) as :class:`AttackRate`; ``by_mode``
    {mode: {"utility": AttackRate, "attack_success": AttackRate}}; ``level``; ``notes``."""

    utility_clean: AttackRate
    utility_attacked: AttackRate
    attack_success: AttackRate
    difference: AttackRate
    by_mode: Mapping[str, Mapping[str, AttackRate]] = field(default_factory=dict)
    level: float = 0.95
    notes: tuple[str, ...] = ()

    def __str__(self) -> str:
        lines = [
            f"utility clean          {self.utility_clean}",
            f"utility under attack   {self.utility_attacked}",
            f"attack success rate    {self.attack_success}",
            f"paired difference      {self.difference}",
        ]
        for mode, rates in self.by_mode.items():
            lines.append(f"  {mode}: utility {rates['utility']}, attack success {rates['attack_success']}")
        lines += [f"note: {note}" for note in self.notes]
        named = [("utility clean", self.utility_clean), ("utility under attack", self.utility_attacked),
                 ("attack success rate", self.attack_success), ("paired difference", self.difference)]
        named += [(f"{mode} {what.replace('_', ' ')}", rate) for mode, rates in self.by_mode.items() for what, rate in rates.items()]
        lines += [f"note: {name}: {rate.note}" for name, rate in named if rate.note]
        return "\n".join(lines)

    __repr__ = __str__


def _attack_modes(row: Mapping[str, Any]) -> list[str]:
    """Modes of the attacks that reached the row (ledger entries with ``attack: true``)."""
    return [str(f.get("mode")) for f in row.get("faults") or () if isinstance(f, Mapping) and f.get("attack")]


def _named_modes(row: Mapping[str, Any]) -> list[str]:
    """Modes of every attack entry, reached or not (``attack`` true or false)."""
    return [str(f.get("mode")) for f in row.get("faults") or () if isinstance(f, Mapping) and "attack" in f]


def _faulted(row: Mapping[str, Any]) -> bool:
    return any(isinstance(f, Mapping) for f in row.get("faults") or ())


def _ordinary(row: Mapping[str, Any]) -> bool:
    """Whether the row met a fault that is not an attack (a timeout, a 500, ...): an entry
    without an ``attack`` key. ``attack: false`` (wrong_data on an answer with no record) is
    an attack that found nothing to falsify, not an ordinary fault."""
    return any(isinstance(f, Mapping) and "attack" not in f for f in row.get("faults") or ())


def _score(value: Any, what: str, where: str) -> float | None:
    """A score in [0, 1] as a float; None when absent or not a number; anything else refused."""
    if value is None or isinstance(value, bool) or type(value).__name__ == "bool_" or not isinstance(value, numbers.Real):
        return None
    number = float(value)
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise ConfigError(
            f"attack_report: {where} has {what} {value!r}, outside [0, 1]; utility and attack success are means of "
            "scores in [0, 1] (rescale the grader's scores, or fix the row)"
        )
    return number


def _marker(row: Mapping[str, Any], name: str, where: str) -> float | None:
    markers = row.get("markers")
    return _score(markers.get(name) if isinstance(markers, Mapping) else None, f"markers[{name!r}]", where)


def _utility(row: Mapping[str, Any], utility: str, where: str) -> float | None:
    if utility == "goal_met":
        value = _marker(row, "goal_met", where)
        if value is not None:
            return value
    for name in REWARD_FIELDS:
        if row.get(name) is not None:
            return _score(row[name], name, where)
    return None


def _rate(
    per_row: Sequence[tuple[str, float]],
    labels: Mapping[str, Any] | None,
    level: float,
    n_resamples: int,
    seed: Any,
    proportion: bool = True,
) -> AttackRate:
    tasks: dict[str, list[float]] = {}
    for task, value in per_row:
        tasks.setdefault(task, []).append(value)
    if not tasks:
        return AttackRate(None, None, None, 0, 0, "none")
    names = sorted(tasks)
    values = [math.fsum(tasks[t]) / len(tasks[t]) for t in names]
    clusters = [labels[t] for t in names] if labels is not None else None
    interval = mean_interval(values, clusters=clusters, level=level, n_resamples=n_resamples, seed=seed, proportion=proportion)
    low, high = interval.low, interval.high
    if low is not None:
        # a rate lies in [0, 1] and a difference of rates in [-1, 1]: a t interval on a few
        # tasks can reach past them, and the part outside holds no possible value
        floor = 0.0 if proportion else -1.0
        low, high = max(floor, low), min(1.0, high)
    return AttackRate(
        estimate=math.fsum(values) / len(values), low=low, high=high, n_tasks=len(names),
        n_rows=len(per_row), method=interval.method, note=interval.note,
    )  # fmt: skip


def attack_report(
    rows: Any,
    clean: Any = None,
    *,
    utility: str = "reward",
    level: float = 0.95,
    cluster: Any = None,
    n_resamples: int = 2000,
    seed: Any = 0,
) -> AttackReport:
    """Utility clean, utility under attack, attack success rate and the paired drop, each with
    its interval over tasks.

    Parameters
    ----------
    rows : rows, SimulationData or path
        The rows to read (anything :func:`toolkit.rows.as_row_list` accepts). With ``clean``
        given: the attacked run, every row of it without an ordinary fault on the attacked
        side. Without: rows an attack reached (``attack: true``) are the attacked side and rows
        with no fault the clean side (module docstring).
    clean : rows, SimulationData or path, optional
        A separate clean run of the same tasks (its rows with no fault are the clean side), as
        from ``simulate(..., fault_rate=0)`` replayed under attack by
        :func:`toolkit.attacked_tasks`. Default None: one mixed run.
    utility : {"reward", "goal_met"}
        What utility reads: the row's reward (default) or the ``goal_met`` marker (falling
        back to the reward on rows without it).
    level : float
        Confidence level of every interval, in (0, 1). Default 0.95.
    cluster : None, "auto", str or callable
        Clusters of tasks for the cluster-robust interval (as in :func:`toolkit.pass_at`).
        Default None: tasks are independent.
    n_resamples : int
        Resamples of the bootstrap branch. Default 2000.
    seed : int
        Seed of the bootstrap branch. Default 0.

    Returns
    -------
    AttackReport
        Rates with intervals; ``difference`` pairs tasks by their key (``scenario_id``, else
        ``task_id``, else the prompt) seen both clean and attacked.

    Raises
    ------
    ConfigError
        When ``utility`` is unknown, no row is attacked, no attacked row carries an
        ``attack_success`` marker (grade with :func:`toolkit.state_grader` inside
        ``simulate``, where the attack's goal is still in memory), or a reward or marker read
        is outside [0, 1] or not finite (naming the row: ``rows[i]`` or ``clean[i]``).
    """
    if utility not in _UTILITIES:
        raise ConfigError("attack_report: " + unknown_name_message("utility", str(utility), _UTILITIES))
    level = check_level("level", level)
    n_resamples = check_resamples(n_resamples)
    given = [(f"rows[{i}]", r) for i, r in enumerate(as_row_list(rows, "rows")) if isinstance(r, Mapping)]
    paired_run = clean is not None
    clean_given = given if not paired_run else [(f"clean[{i}]", r) for i, r in enumerate(as_row_list(clean, "clean")) if isinstance(r, Mapping)]
    reached = [(w, r) for w, r in given if _attack_modes(r)]
    if not reached:
        raise ConfigError(
            "attack_report: no row was attacked (no faults entry with attack: true); run with "
            "advanced={'world': {'attacks': ['prompt_injection', 'wrong_data']}} and fault_rate > 0"
        )
    notes: list[str] = []
    if paired_run:
        # The attacked run of a paired design: every row that ran under attack conditions,
        # reached by an attack or not, as its clean twin is on the clean side whatever it did.
        attacked = [(w, r) for w, r in given if not _ordinary(r)]
        ordinary = len(given) - len(attacked)
        if ordinary:
            notes.append(f"{ordinary} rows of the attacked run met an ordinary fault (a timeout, ...) and are left out of utility under attack")
        unexposed = len(attacked) - len(reached)
        if unexposed:
            notes.append(
                f"{unexposed} rows of the attacked run were never reached by an attack (no call reached the world, or wrong_data "
                "on an answer with no record); they count in utility under attack, not in attack success"
            )
    else:
        # One mixed run: attacked rows against rows that met no fault at all.
        attacked = reached
        ordinary = sum(1 for _, r in given if _ordinary(r))
        empty = sum(1 for _, r in given if _faulted(r) and not _ordinary(r) and not _attack_modes(r))
        if ordinary:
            notes.append(f"{ordinary} rows met an ordinary fault (a timeout, ...) and are in neither side")
        if empty:
            notes.append(f"{empty} rows met only attacks that found nothing to alter (wrong_data on an answer with no record) "
                         "and are in neither side")
    clean_rows = [(w, r) for w, r in clean_given if not _faulted(r)]
    if paired_run and len(clean_rows) < len(clean_given):
        notes.append(f"{len(clean_given) - len(clean_rows)} rows of the clean run met a fault and are left out of utility clean")
    labels, used = task_clusters([r for _, r in attacked + clean_rows], cluster)
    if used and labels is None:
        notes.append(used)

    def utilities(side: Sequence[tuple[str, Mapping[str, Any]]], what: str) -> list[tuple[str, float]]:
        out, missing = [], 0
        for where, row in side:
            value = _utility(row, utility, where)
            if value is None:
                missing += 1
            else:
                out.append((task_key(row), value))
        if missing:
            notes.append(f"{missing} {what} rows have no utility (no goal_met marker and no reward) and are left out")
        return out

    clean_values = utilities(clean_rows, "clean")
    attacked_values = utilities(attacked, "attacked")
    successes = [(task_key(r), v) for w, r in reached if (v := _marker(r, "attack_success", w)) is not None]
    if not successes:
        raise ConfigError(
            "attack_report: no attacked row has an attack_success marker; grade the run with "
            "grader=tk.state_grader() (it reads the attack's privileged goal while the row is in memory)"
        )
    if len(successes) < len(reached):
        notes.append(f"{len(reached) - len(successes)} attacked rows have no attack_success marker and are left out of that rate")

    by_task_clean: dict[str, list[float]] = {}
    for task, value in clean_values:
        by_task_clean.setdefault(task, []).append(value)
    by_task_attacked: dict[str, list[float]] = {}
    for task, value in attacked_values:
        by_task_attacked.setdefault(task, []).append(value)
    paired = [
        (task, math.fsum(by_task_attacked[task]) / len(by_task_attacked[task]) - math.fsum(by_task_clean[task]) / len(by_task_clean[task]))
        for task in sorted(set(by_task_clean) & set(by_task_attacked))
    ]
    if not paired:
        notes.append(
            "no task was seen both clean and attacked, so there is no paired difference; pass clean= (the same tasks at fault_rate=0)"
        )

    by_mode: dict[str, dict[str, AttackRate]] = {}
    modeless = sum(1 for _, r in attacked if not _named_modes(r))
    if modeless:
        notes.append(f"{modeless} attacked-side rows name no attack mode (no call reached the world) and count only in the overall rates")
    for mode in sorted({m for _, r in attacked for m in _named_modes(r)}):
        side = [(w, r) for w, r in attacked if mode in _named_modes(r)]
        mode_utility = [(task_key(r), v) for w, r in side if (v := _utility(r, utility, w)) is not None]
        mode_success = [(task_key(r), v) for w, r in side if mode in _attack_modes(r) and (v := _marker(r, "attack_success", w)) is not None]
        by_mode[mode] = {
            "utility": _rate(mode_utility, labels, level, n_resamples, seed),
            "attack_success": _rate(mode_success, labels, level, n_resamples, seed),
        }
    return AttackReport(
        utility_clean=_rate(clean_values, labels, level, n_resamples, seed),
        utility_attacked=_rate(attacked_values, labels, level, n_resamples, seed),
        attack_success=_rate(successes, labels, level, n_resamples, seed),
        difference=_rate(paired, labels, level, n_resamples, seed, proportion=False),
        by_mode=by_mode,
        level=level,
        notes=tuple(notes),
    )
