"""Did a change help? Paired before/after comparison, the delta report, re-run variance.

:func:`compare_runs` compares two runs on one metric. Each run is reduced to one number per
task (the task key of :func:`toolkit._util.keys.task_key`; pass@1 = the task's mean exact 0/1
reward, ``marker:<name>`` = the task's mean marker value). Tasks present in both runs are
paired, and with ``n`` paired tasks and ``d_i = b_i - a_i``:

* ``delta = mean(d)`` (``math.fsum``);
* ``ci``: the interval rule of :mod:`toolkit.stats._intervals` on the differences: Student's
  t, ``mean(d) +/- t_{n-1} sd(d) / sqrt(n)``, below 30 paired tasks; the percentile bootstrap
  over tasks (Efron & Tibshirani 1993, ch. 13; :func:`toolkit.bootstrap_ci`) from 30 up;
  the clustered t with ``cluster=`` (below). ``interval_method`` says which;
* ``pvalue``: the paired sign-flip test of ``mean(d) = 0`` via
  :func:`toolkit.sign_flip_test`: exact enumeration of all ``2^n`` sign patterns for
  ``n <= 20``, Monte Carlo with ``p = (1 + hits)/(1 + B)`` above (Phipson & Smyth 2010,
  "Permutation p-values should never be zero", SAGMB 9:39);
* verdict ``b_better`` / ``a_better`` when the interval excludes 0 on that side **and**
  ``p <= 1 - level``; ``no_difference_detected`` otherwise; ``insufficient_data`` when no
  interval can be formed (fewer than 3 paired tasks). ``rule`` prints what decided it.

Why both the interval and p. The exact sign-flip p cannot fall below ``2 / 2^m`` two-sided,
``m`` the number of paired tasks whose difference is not 0 (a zero flips to itself): 0.125
at 4, 0.0625 at 5, 0.03125 at 6. Five tasks that all moved from 0 to 1 have the point
interval (1, 1), and a verdict on the interval alone would call them significant where no
exact test can; requiring both removes that false precision (rlhfbook.com ch. 16). The
note names the smallest reachable p whenever it is above alpha, so "add tasks" is said
with the number that proves it.

Measured (``benchmarks/bench_calibration.py``, 1,000 simulated suites per cell, Monte
Carlo se ~0.007; per-task rates over 4 rollouts, a logit shift of +0.2): the paired 95%
interval covers the true mean delta 0.931 / 0.966 at 10 / 20 tasks (Student t; the
percentile bootstrap there covers 0.860 / 0.929) and 0.943 / 0.940 at 50 / 200 tasks
(bootstrap); with ``cluster=`` 0.953 at 20 clusters x 10 tasks and 0.950 at 50 x 4 (the
task bootstrap: 0.856 and 0.916). The verdict's false-positive rate at alpha 0.05 is
0.026 / 0.033 / 0.043 at 20 / 50 / 200 independent tasks (both the interval and p must
clear, so it errs low).

Shared tasks are paired at any n. The first version fell back to an unpaired comparison
below 5 shared tasks, which made the verdict non-monotone in n (issue 14: 4 tasks all
0 -> 1 read ``b_better`` from an unpaired interval [1, 1], 5 read no difference, 6
``b_better``). Now 3 and more shared tasks are always read paired, and 2 or fewer give
``insufficient_data``: measured on all-up suites the verdict is no difference up to 5
tasks and ``b_better`` from 6 on. Tasks present on one side only are left out and counted
in the note.

No shared task: the two runs measured different task sets. ``delta = mean(b tasks) -
mean(a tasks)`` with a two-sample percentile bootstrap interval (each run's tasks
resampled independently, as ``scipy.stats.bootstrap`` does with two samples) when both
have 3+ tasks, no p, and the verdict ``not_paired``: the difference is as much the task
sets' as the agents', so no direction is claimed, and ``str()`` starts with
"NOT PAIRED" (issue 14: 0 of 40 shared tasks read ``b_better`` [+0.30, +0.70]).

Clusters (``cluster=``). Tasks built from one base task or one grid family share most of
what makes them hard, so they are not independent units; an interval that treats them as
such is too narrow (issue 14: 20 clusters x 10 tasks, 95% intervals covered 0.673 and the
paired test had a 0.107 false-positive rate at alpha 0.05). With clusters the interval is
the clustered t of :func:`toolkit.stats.clustered_mean` (Miller 2024, "Adding Error Bars
to Evals", arXiv:2411.00640, with the CR1 factor G/(G-1) and t(G-1)) and the sign flips act
on whole clusters' summed differences (the null "no effect" makes each cluster's sum
symmetric, while tasks inside a cluster may be dependent). Measured coverage and
false-positive rates are in ``benchmarks/bench_calibration.py`` and quoted in
:func:`toolkit.stats.clustered_mean`.

:func:`delta_report` runs :func:`compare_runs` on pass@1 and every marker both sides carry
(docs/design/engine.md §6.3), reads lower-is-better markers in their direction (``gain_verdict``),
applies ``must_not_regress`` and ``proxy`` guards, checks that the two sides are comparable,
separates real moves from re-run noise with a per-metric noise band from
``lineage.eval_run``, slices by a key, and gives one headline word.

Noise band. Rows of one side that carry several ``lineage.eval_run`` values are re-runs of
the same tasks. For each metric, each run's mean over tasks gives one number per run; their
sample variances are pooled over the runs of both sides by degrees of freedom,
``s^2 = sum((r_j - 1) s_j^2) / sum(r_j - 1)``, ``df = sum(r_j - 1)`` (any side with at least
2 runs contributes). A delta is compared with

    band = q x s x sqrt(1/R_before + 1/R_after)

(``R`` = eval runs on each side; the sd of a difference of two means of R runs each),
``q = t_{1-alpha/2}(df)`` when ``s`` is estimated (Student: ``s`` from few runs is itself
noisy; at 3 runs ``t = 4.30`` where 1.96 would be 2.2x too narrow and call 19% of pure
re-run noise a move), ``q = z_{1-alpha/2}`` for a bare given ``run_std``. A move (interval
and p both clear) no larger than the band is ``within_eval_noise``. The task bootstrap sees
rollout noise task by task; the band adds what moves a whole re-run at once (a judge or
endpoint drifting between runs), which the task bootstrap cannot see.

Many comparisons (``correction=``). Every metric, guard and slice of :func:`delta_report`
is a test at alpha; with no real change, some metric "moves" in up to ``1 - (1 - alpha)^m``
of reports (issue 14 measured 11% on the stock report). The target is the one hypothesis
the caller declared before looking (``target=``), so it keeps alpha, as a primary endpoint
does; the other ``m - 1`` comparisons (metrics, guards, proxy, slices) form the secondary
family. The default ``"holm"`` adjusts their p by Holm's step-down rule (Holm 1979) and
re-reads each with the adjusted p and a simultaneous interval at ``1 - alpha/(m - 1)``
(Bonferroni). A secondary metric or slice may claim a move only when the target moved
(serial gatekeeping: Maurer, Hothorn & Lehmacher 1995; Dmitrienko & Tamhane 2007), which
keeps the family-wise rate of false moves at alpha; ``must_not_regress`` guards and the
proxy are safety checks outside the gate: a regression there is reported (and fails the
report) whatever the target did, since missing a loss is the costlier error, so with guards
the rate of false alarms is that of the guards' own Holm family on top. ``"bh"`` controls the
false discovery rate of the secondary family instead (Benjamini & Hochberg 1995), with the
false-coverage-rate intervals of Benjamini & Yekutieli (2005) at ``1 - R alpha/(m - 1)`` (R
the number of BH rejections). The adjusted p are statsmodels' ``multipletests``; each result
keeps its unadjusted p in ``raw_pvalue``; a gatekept label says so in its rule; the report
prints how many comparisons it ran. ``correction=None`` reads each at alpha and warns from 4
comparisons up. Measured with no real change (8 null markers, 25 tasks;
``benchmarks/bench_calibration.py``, 1,000 reports, se 0.007-0.015): some metric moved in
0.313 of reports uncorrected and 0.047 with ``"holm"`` (and ``"bh"``), the target's own
false-positive rate, which the gate makes the family's.

Where we differ from the reference engine (docs/design/engine.md §6.2-6.4, docs/design/engine.md §9 items 8-9):

* p is exact for n <= 20 (the engine drew 2000 Monte Carlo sign flips from Python's
  ``random``): 6 tasks all 0 -> 1 give p = 2/64 = 0.03125 exactly (engine: 0.0295).
* Verdicts need the interval and p both (above); the engine used the interval alone.
* The unpaired interval is one two-sample bootstrap of the difference of means, not two
  independent one-sample intervals.
* A regression with one eval run a side still counts as a regression (it is flagged
  "unreplicated" in the warnings) while a gain reads ``moved_unreplicated``: claiming a win
  needs a re-run, blocking on a possible loss does not.
* Guards use the per-metric noise band too: a ``must_not_regress`` metric fails only when it
  regressed beyond its own re-run noise (#300, "one floor for all metrics").
* A bare ``run_std`` number applies to the target metric only; give a dict per metric, or
  an :func:`eval_variance` result (which also carries its degrees of freedom), for others.
* The noise band is estimated as soon as either side has 2+ eval runs (the engine asked
  for 2+ on each side); a side with one run adds no degrees of freedom but still counts in
  ``sqrt(1/R_before + 1/R_after)``.
* :func:`eval_variance`'s band is ``t(runs - 1) x sqrt(2) x run_std``, the engine's
  "Unreleased" fix of its ``1.96 x sqrt(2) x run_std``: with 3 runs the 1.96 band is 2.2x
  too narrow. Its stability classes read ``run_std`` in percentage points (x 100) of a 0-1
  metric: < 0.35 very_stable, < 0.7 stable, else high_variance.
* A ``must_not_regress`` metric that cannot be measured (too few tasks) or never changes
  value is reported in ``warnings``; it neither passes nor fails the report silently.
* Training seeds: a regression seen on one training seed still counts as a regression
  (with a warning), while a gain or a null there reads ``unresolved``, by the same
  asymmetry as for eval runs. (We kept the reference's ``df = sum(n - 1)``: the
  Welch-Satterthwaite df, tried first, under-covered; numbers below.)

Training seeds (docs/design/engine.md §6.3, #356: a single training seed flipped the sign of a delta).
When an arm was produced by training, a second training run with another seed gives another
model, and the delta of one seed is the recipe's effect plus that seed's luck, which no
amount of tasks or eval re-runs measures. Rows of a trained arm carry the seed in
``lineage.train_run``; each task's value on that arm is the mean over its seeds (every seed
weighs the same), so ``delta`` is the across-seed delta. With ``m_j`` the seed means over
the paired tasks (``n`` seeds, sample sd ``s``), the arm adds ``s^2 / n`` to the variance
of the delta, in quadrature with the task term ``sd(d)^2 / n_tasks``:

    ci = delta +/- t_{1-alpha/2}(df) x sqrt(sd(d)^2 / n_tasks + sum_arms s_arm^2 / n_arm)

with ``df = sum over trained arms of (n_arm - 1)``: the seed variance from a handful of
seeds is the least certain term, so its df governs. Measured on 4000 simulated studies (20
tasks, 2 rollouts, seed sd 0.03-0.2) this covers the recipe's effect 0.95-1.0 of the time;
the Welch-Satterthwaite df (Satterthwaite 1946) covered only 0.88-0.91 at 2 seeds and
0.93-0.94 at 3, so it is not used. With no seed spread the interval errs wide (up to
t(df)/z). p is the matching two-sided t p. The task term re-counts part of the rollout noise that is
also inside the seed spread, so the interval errs wide, never narrow. A move needs this
interval and the task-level reading (bootstrap interval and exact sign-flip p) to agree.
Fewer than 2 seeds on a trained arm: the move is ``unresolved`` and the headline says
UNRESOLVED. Eval re-runs are grouped within each seed for the noise band (the spread
between seeds is not eval noise), and a move that clears 2+ seeds is replicated.
"""

from __future__ import annotations

import dataclasses
import html
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.stats
from scipy.stats import norm
from scipy.stats import t as student_t

from toolkit._util.keys import task_key
from toolkit._util.results import Result
from toolkit._util.validate import check_level
from toolkit.errors import ConfigError, unknown_name_message
from toolkit.rows._read import as_row_list
from toolkit.stats._intervals import mean_interval, task_clusters
from toolkit.stats._metrics import _marker_names, _per_task_values, _resolve_metric, _row_value
from toolkit.stats.passk import run_config
from toolkit.stats.power import holdout_size
from toolkit.stats.resampling import MIN_UNITS_FOR_INTERVAL, check_resamples, sign_flip_test

__all__ = [
    "compare_runs",
    "Comparison",
    "delta_report",
    "DeltaReport",
    "MetricDelta",
    "SliceDelta",
    "eval_variance",
    "EvalVariance",
    "noise_band",
    "LOWER_IS_BETTER",
    "MIN_PAIRED_TASKS",
]

# The fewest paired tasks from which the training-seed interval is formed (module docstring,
# "Training seeds"): at 5 the exact p is already informative (min 0.0625). Comparisons
# themselves pair at any n (module docstring).
MIN_PAIRED_TASKS = 5

# Markers where a rise is bad news (docs/design/engine.md §6.3); delta_report reads them downward.
# collateral and minefield: the state grader's counts of changes nobody asked for and of
# forbidden calls (toolkit/grading/state.py): more is worse.
LOWER_IS_BETTER = frozenset({"boilerplate", "self_reference", "hedging", "refusal", "sycophancy", "truncated", "collateral", "minefield"})

# Fewer than half the tasks paired: the two runs measured mostly different situations, so
# their difference is mostly a difference of task sets (docs/design/engine.md §6.3, "situations").
MIN_PAIRED_SHARE = 0.5
# Answered-share gap test (#297: a reasoning base that ran out of tokens mid-thought vs an
# adapter that answered): significant at 0.01 and larger than the re-run band, else 0.10.
ANSWERED_GAP_ALPHA = 0.01
ANSWERED_GAP_DEFAULT = 0.10
# Warning thresholds (docs/design/engine.md §6.3): a 5-point gap in length cuts changes what is graded;
# under 95% graded rows, the ungraded ones can carry the difference.
TRUNCATED_GAP = 0.05
MIN_GRADED_SHARE = 0.95
# m >= 4 metrics at alpha 0.05: P(at least one false move) = 1 - 0.95^4 = 0.185.
FAMILY_WARNING_METRICS = 4
# A before rate at or above 0.9 leaves under 0.1 of room to show a gain.
CEILING_RATE = 0.9
# Below 20 tasks with room to improve, and those under half the paired tasks, the target
# measures mostly tasks that cannot move (docs/design/engine.md §6.3).
CEILING_MIN_ROOM_TASKS = 20
# Training seeds per trained arm below which a move is unresolved (docs/design/engine.md §6.3): one seed
# cannot separate the recipe from the seed, and 2 is the least that gives a variance.
MIN_TRAIN_RUNS = 2
# Eval re-runs below which eval_variance warns: 2 runs give one degree of freedom and
# t_{0.975}(1) = 12.7, so the band is mostly the uncertainty of the sd itself.
MIN_EVAL_RUNS = 3
# Stability classes of eval_variance, in percentage points of a 0-1 metric (run_std x 100).
VERY_STABLE_POINTS = 0.35
STABLE_POINTS = 0.7

# Config fields that should be the same on both sides of a comparison. policy_version and
# model_version are left out: they differ because the agent is what changed.
_HELD_FIXED = ("temperature", "max_tokens", "judge_version", "prompt_hash", "user_model", "writer_model")
_AUTO_SLICE_FIELDS = ("category", "slice")
_CORRECTIONS = ("holm", "bh")


# =========================================================================== compare_runs


@dataclass(frozen=True)
class Comparison(Result):
    """One metric compared between run ``a`` and run ``b`` (``delta`` is b - a).

    ``mean_a``/``mean_b`` are over the tasks the comparison used (the shared tasks when
    paired, every task of each run when not paired), so ``delta = mean_b - mean_a``.
    ``min_pvalue`` is the smallest p the exact sign-flip test can reach here (``2 / 2^m``
    two-sided over the ``m`` paired tasks, or clusters, whose difference is not 0); ``None``
    when not paired. ``rule`` says what decided the verdict; ``interval_method`` how the
    interval was made (module docstring); ``n_clusters``/``cluster_by`` the clustering;
    ``covers`` the target the interval is for: the mean delta over tasks drawn like these
    (the population of tasks, or of clusters with ``cluster=``), not over this fixed suite
    alone, whose own rollout noise is a smaller part of the interval.
    """

    metric: str
    delta: float | None
    ci: tuple[float, float] | None
    pvalue: float | None
    verdict: str
    n_paired: int
    n_only_a: int
    n_only_b: int
    paired_share: float | None
    mean_a: float | None
    mean_b: float | None
    method: str
    level: float
    pvalue_method: str | None
    min_pvalue: float | None
    n_resamples: int
    n_skipped_a: int
    n_skipped_b: int
    note: str | None = None
    rule: str | None = None
    interval_method: str | None = None
    n_clusters: int | None = None
    cluster_by: str | None = None
    covers: str | None = None

    def __str__(self) -> str:
        if self.delta is None:
            return f"{self.metric}: no delta ({self.note})"
        ci = f"[{self.ci[0]:+.3f}..{self.ci[1]:+.3f}]" if self.ci else "[no interval]"
        p = f"p = {self.pvalue:.4g}" if self.pvalue is not None else "p n/a"
        if self.method == "paired":
            where = f"{self.n_paired} paired tasks"
            if self.n_only_a or self.n_only_b:
                where += f"; {self.n_only_a} only in a, {self.n_only_b} only in b left out"
        else:
            where = f"not paired: {self.n_paired} shared of {self.n_paired + self.n_only_a + self.n_only_b}"
        if self.n_clusters is not None:
            where += f", {self.n_clusters} clusters by {self.cluster_by}"
        head = "NOT PAIRED, compares two task sets: " if self.method == "unpaired" else ""
        rule = f"; {self.rule}" if self.rule else ""
        return f"{head}{self.metric}: delta {self.delta:+.3f} {ci}, {p}, {self.verdict} ({where}{rule})"


def _two_sample_interval(
    values_b: np.ndarray, values_a: np.ndarray, level: float, n_resamples: int, seed: Any
) -> tuple[float, float]:
    if np.all(values_a == values_a[0]) and np.all(values_b == values_b[0]):
        # Every resample gives the same difference; scipy would warn about a degenerate
        # distribution for the same answer.
        point = float(values_b[0] - values_a[0])
        return point, point

    def difference(b: np.ndarray, a: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.mean(b, axis=axis) - np.mean(a, axis=axis)

    result = scipy.stats.bootstrap(
        (values_b, values_a),
        difference,
        n_resamples=n_resamples,
        vectorized=True,
        paired=False,
        confidence_level=level,
        method="percentile",
        rng=np.random.default_rng(seed) if not isinstance(seed, np.random.Generator) else seed,
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def _decide(
    ci: tuple[float, float] | None, pvalue: float | None, alpha: float, min_p: float | None, units: str
) -> tuple[str, str]:
    """(verdict, the rule that decided it) of a paired comparison."""
    if ci is None:
        return "insufficient_data", f"no interval: fewer than {MIN_UNITS_FOR_INTERVAL} paired {units}"
    verdict = _verdict(ci, pvalue, alpha)
    p_text = f"p {pvalue:.3g}" if pvalue is not None else "p n/a"
    if verdict in ("a_better", "b_better"):
        return verdict, f"interval excludes 0 and {p_text} <= {alpha:g}"
    if ci[0] > 0 or ci[1] < 0:
        why = f"interval excludes 0 but {p_text} > {alpha:g}"
        if min_p is not None and min_p > alpha:
            why += f" (smallest reachable p {min_p:.3g} with these pairs)"
        return verdict, why
    if pvalue is not None and pvalue <= alpha:
        return verdict, f"{p_text} <= {alpha:g} but the interval covers 0: borderline, read as no difference"
    return verdict, f"interval covers 0, {p_text}"


def _compare_values(
    values_a: Mapping[str, float],
    values_b: Mapping[str, float],
    metric: str,
    *,
    level: float,
    seed: Any,
    n_resamples: int,
    skipped_a: int = 0,
    skipped_b: int = 0,
    clusters: Mapping[str, Any] | None = None,
    cluster_by: str | None = None,
    pvalue_override: float | None = None,
) -> Comparison:
    alpha = 1.0 - level
    shared = sorted(set(values_a) & set(values_b))
    only_a = len(set(values_a) - set(values_b))
    only_b = len(set(values_b) - set(values_a))
    union = len(shared) + only_a + only_b
    paired_share = len(shared) / union if union else None
    base = dict(
        metric=metric, n_paired=len(shared), n_only_a=only_a, n_only_b=only_b,
        paired_share=paired_share, level=level, n_resamples=n_resamples,
        n_skipped_a=skipped_a, n_skipped_b=skipped_b,
    )
    notes: list[str] = []

    if shared:
        diffs = np.array([values_b[t] - values_a[t] for t in shared])
        delta = math.fsum(diffs) / diffs.size
        mean_a = math.fsum(values_a[t] for t in shared) / len(shared)
        mean_b = math.fsum(values_b[t] for t in shared) / len(shared)
        labels = None
        if clusters is not None:
            missing = [t for t in shared if t not in clusters]
            if missing:
                raise ConfigError(f"task {missing[0]!r} has no cluster label on either side")
            labels = [clusters[t] for t in shared]
        interval = mean_interval(
            diffs, clusters=labels, level=level, n_resamples=n_resamples, seed=seed, proportion=False
        )
        test = sign_flip_test(diffs, n_resamples=n_resamples, seed=seed, clusters=labels)
        pvalue = test.pvalue if pvalue_override is None else pvalue_override
        ci = interval.pair
        n_clusters = interval.n_clusters if interval.method == "clustered t" else None
        units = "clusters" if n_clusters is not None or (labels is not None and interval.method == "none") else "tasks"
        verdict, rule = _decide(ci, pvalue, alpha, test.min_pvalue, units)
        if test.min_pvalue is not None and test.min_pvalue > alpha and ci is not None:
            flips = test.n_clusters if test.n_clusters is not None else test.n
            notes.append(
                f"with {flips} paired {'clusters' if test.n_clusters is not None else 'tasks'} "
                f"no exact two-sided p can be below {test.min_pvalue:.4g} (zero differences do not "
                f"count): add tasks (at least {math.ceil(math.log2(2 / alpha))} that move)"
            )
        if only_a or only_b:
            notes.append(
                f"{len(shared)} of {union} tasks paired ({only_a} only in a, {only_b} only in b, left out)"
            )
        if paired_share is not None and paired_share < MIN_PAIRED_SHARE:
            notes.append("most tasks unpaired: the delta covers a minority of the tasks")
        if interval.note:
            notes.append(interval.note)
        return Comparison(
            delta=delta, ci=ci, pvalue=pvalue, verdict=verdict, mean_a=mean_a, mean_b=mean_b,
            method="paired", pvalue_method=test.method + (" (cluster flips)" if test.n_clusters else ""),
            min_pvalue=test.min_pvalue, note="; ".join(notes) or None, rule=rule,
            interval_method=interval.method, n_clusters=n_clusters,
            cluster_by=cluster_by if n_clusters is not None else None,
            covers=interval.covers.replace("the mean", "the mean delta", 1), **base,
        )

    # No shared task: two different task sets.
    if not values_a or not values_b:
        empty = "a" if not values_a else "b"
        if not values_a and not values_b:
            empty = "either run"
        return Comparison(
            delta=None, ci=None, pvalue=None, verdict="insufficient_data",
            mean_a=_mean_or_none(values_a.values()), mean_b=_mean_or_none(values_b.values()),
            method="none", pvalue_method=None, min_pvalue=None,
            note=f"no task carries {metric} in {empty}; "
            + ("grade the rows first" if metric == "pass_at_1" else "measure it on both runs"),
            rule="nothing to compare", **base,
        )
    array_a = np.array(list(values_a.values()))
    array_b = np.array(list(values_b.values()))
    mean_a = math.fsum(array_a) / array_a.size
    mean_b = math.fsum(array_b) / array_b.size
    notes.append(
        f"no task is in both runs ({array_a.size} in a, {array_b.size} in b): the delta compares two "
        "task sets, not two agents, so no direction is claimed; run both sides on the same tasks"
    )
    ci = None
    if array_a.size >= MIN_UNITS_FOR_INTERVAL and array_b.size >= MIN_UNITS_FOR_INTERVAL:
        ci = _two_sample_interval(array_b, array_a, level, n_resamples, seed)
    else:
        notes.append(
            f"no interval: run a has {array_a.size} task(s) and run b {array_b.size}; each needs "
            f"at least {MIN_UNITS_FOR_INTERVAL}"
        )
    return Comparison(
        delta=mean_b - mean_a, ci=ci, pvalue=None, verdict="not_paired",
        mean_a=mean_a, mean_b=mean_b, method="unpaired", pvalue_method=None, min_pvalue=None,
        note="; ".join(notes), rule="no shared task: a two-sample interval of two task sets, no verdict",
        interval_method="two-sample percentile bootstrap" if ci else None,
        covers="the difference between the two task sets' means (not a paired effect)", **base,
    )


def _mean_or_none(values: Iterable[float]) -> float | None:
    values = list(values)
    return math.fsum(values) / len(values) if values else None


def _verdict(ci: tuple[float, float] | None, pvalue: float | None, alpha: float) -> str:
    if ci is None:
        return "insufficient_data"
    clears = pvalue is None or pvalue <= alpha
    if ci[0] > 0 and clears:
        return "b_better"
    if ci[1] < 0 and clears:
        return "a_better"
    return "no_difference_detected"


def compare_runs(
    a: Any,
    b: Any,
    metric: str = "pass_at_1",
    level: float = 0.95,
    seed: int | np.random.Generator = 0,
    n_resamples: int = 10_000,
    cluster: Any = None,
) -> Comparison:
    """Compare run ``b`` with run ``a`` on one metric, task by task (``delta`` = b - a).

    Parameters
    ----------
    a, b : rows (list of dicts, SimulationData, DataFrame or JSONL path).
    metric : ``"pass_at_1"`` (per-task mean of exact 0/1 rewards), ``"reward"`` (per-task
        mean of numeric rewards) or ``"marker:<name>"`` (per-task mean of that marker; a
        bare marker name works too). Unknown names raise with the nearest valid name.
    level : confidence level of the interval; the test's alpha is ``1 - level``.
    seed, n_resamples : for the bootstrap and (n > 20) the Monte Carlo sign flips;
        ``n_resamples`` at least 100 (below 1,000 it warns).
    cluster : None, ``"auto"``, a row field (dotted) or ``callable(row)``
        Tasks that share a cluster (a base task, a grid family) are not independent: the
        interval becomes the clustered t of Miller (2024) and the sign flips act on whole
        clusters (module docstring, "Clusters"). ``"auto"`` uses the first of ``cluster``,
        ``cluster_id``, ``task_family``, ``scenario_dimensions.tool`` every row carries.
        Labels are read from both runs and must agree on a task. Default None.

    Returns
    -------
    Comparison: ``delta``, ``ci``, ``pvalue``, ``verdict`` (b_better / a_better /
    no_difference_detected / insufficient_data / not_paired), ``n_paired``, ``n_only_a``,
    ``n_only_b``, ``paired_share``, ``mean_a``, ``mean_b``, ``method`` (paired / unpaired /
    none), ``rule``, ``interval_method``, ``n_clusters``, ``note``. Formulas and the verdict
    rule: module docstring.

    >>> a = [{"task_id": str(i), "reward": 0, "prompt": "", "steps": [], "final_text": ""} for i in range(6)]
    >>> b = [dict(row, reward=1) for row in a]
    >>> compare_runs(a, b).pvalue
    0.03125
    """
    rows_a = as_row_list(a, "a")
    rows_b = as_row_list(b, "b")
    level = check_level("level", level)
    n_resamples = check_resamples(n_resamples)
    metric = _resolve_metric(metric, _marker_names(rows_a) | _marker_names(rows_b))
    labels, cluster_by, cluster_missing = _clusters_of(rows_a, rows_b, cluster)
    values_a, skipped_a = _per_task_values(rows_a, metric)
    values_b, skipped_b = _per_task_values(rows_b, metric)
    comparison = _compare_values(
        values_a, values_b, metric, level=level, seed=seed, n_resamples=n_resamples,
        skipped_a=skipped_a, skipped_b=skipped_b, clusters=labels, cluster_by=cluster_by,
    )
    if cluster_missing:
        comparison = dataclasses.replace(comparison, note="; ".join(filter(None, [comparison.note, cluster_missing])))
    return comparison


def _clusters_of(
    rows_a: Sequence[Mapping[str, Any]], rows_b: Sequence[Mapping[str, Any]], cluster: Any
) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """(task -> cluster over both runs, what was used, why none was found) for ``cluster=``."""
    labels, used = task_clusters([*rows_a, *rows_b], cluster)
    if labels is None:
        return None, None, used
    return labels, used, None


# =========================================================================== noise band


def noise_band(
    run_std: float,
    n_runs_a: int = 1,
    n_runs_b: int = 1,
    *,
    df: int | None = None,
    alpha: float = 0.05,
) -> float:
    """Half-width of re-run noise on a delta: ``q x run_std x sqrt(1/n_runs_a + 1/n_runs_b)``.

    ``q = t_{1-alpha/2}(df)`` when ``run_std`` was estimated with ``df`` degrees of freedom
    (e.g. ``runs - 1``), else the normal ``z_{1-alpha/2}`` (1.96 at alpha 0.05).

    Parameters
    ----------
    run_std : float
        The run-to-run standard deviation of the metric (sd of per-run means), finite and
        ``>= 0``.
    n_runs_a, n_runs_b : int, optional
        Eval runs averaged on each side, integers ``>= 1``; default 1 each.
    df : int or None, optional
        Degrees of freedom of ``run_std`` (``>= 1``); default None, ``run_std`` taken as
        known and ``q`` the normal quantile.
    alpha : float, optional
        Two-sided level strictly between 0 and 1; default 0.05.

    Returns
    -------
    float
        The band's half-width, in the metric's units.

    Raises
    ------
    ConfigError
        When an argument is outside the ranges above (a bool is refused everywhere).

    Examples
    --------
    >>> round(noise_band(0.02, 1, 1), 4)
    0.0554
    >>> round(noise_band(0.02, 3, 3, df=4), 4)
    0.0453
    """
    if isinstance(run_std, bool) or not isinstance(run_std, (int, float, np.integer, np.floating)) \
            or not math.isfinite(float(run_std)) or run_std < 0:
        raise ConfigError(f"run_std must be a finite number >= 0; got {run_std!r}")
    for name, value in (("n_runs_a", n_runs_a), ("n_runs_b", n_runs_b)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ConfigError(f"{name} must be an integer >= 1; got {value!r}")
    if df is not None and (isinstance(df, bool) or not isinstance(df, (int, np.integer)) or df < 1):
        raise ConfigError(f"df must be an integer >= 1 (runs - 1); got {df!r}")
    alpha = check_level("alpha", alpha)
    quantile = float(student_t.ppf(1 - alpha / 2, df)) if df else float(norm.ppf(1 - alpha / 2))
    return quantile * float(run_std) * math.sqrt(1.0 / n_runs_a + 1.0 / n_runs_b)


# =========================================================================== eval_variance


@dataclass(frozen=True)
class EvalVariance(Result):
    """Spread of a metric across re-runs of the same tasks.

    ``run_std`` is the sample sd (ddof 1) of the per-run means of pass@1; ``*_by_metric``
    the same for pass@1 and every marker all runs carry. ``stability`` reads ``run_std``
    in percentage points (``run_std x 100`` for a 0-1 metric): < 0.35 very_stable, < 0.7
    stable, else high_variance (``None`` for a metric outside 0-1). ``noise_band`` =
    ``t_{1-alpha/2}(runs - 1) x sqrt(2) x run_std``: how far one run of a change may sit from
    one run of the baseline by re-run noise alone.
    """

    n_runs: int
    run_means: dict[str, list[float]]
    run_std: float | None
    run_std_by_metric: dict[str, float | None]
    stability: str | None
    stability_by_metric: dict[str, str | None]
    noise_band: float | None
    noise_band_by_metric: dict[str, float | None]
    df: int | None
    n_tasks: list[int]
    alpha: float
    note: str | None = None

    def __str__(self) -> str:
        if self.run_std is None:
            return f"eval variance over {self.n_runs} run(s): no run_std ({self.note})"
        return (
            f"pass@1 run_std {self.run_std:.4f} ({100 * self.run_std:.2f} pts, {self.stability}) "
            f"over {self.n_runs} runs; noise band +/-{self.noise_band:.4f} "
            f"(t({self.df}) x sqrt(2) x run_std)"
        )


def _split_runs(rows: Sequence[Mapping[str, Any]]) -> dict[Any, list[Mapping[str, Any]]]:
    """Rows grouped by ``lineage.eval_run`` (rows without one share the key ``None``)."""
    groups: dict[Any, list[Mapping[str, Any]]] = {}
    for row in rows:
        lineage = row.get("lineage")
        run = lineage.get("eval_run") if isinstance(lineage, Mapping) else None
        groups.setdefault(run, []).append(row)
    return groups


def _run_mean(rows: Sequence[Mapping[str, Any]], metric: str) -> float | None:
    values, _ = _per_task_values(rows, metric)
    return math.fsum(values.values()) / len(values) if values else None


def _stability(run_std: float | None, unit_range: bool) -> str | None:
    if run_std is None or not unit_range:
        return None
    points = 100.0 * run_std
    if points < VERY_STABLE_POINTS:
        return "very_stable"
    if points < STABLE_POINTS:
        return "stable"
    return "high_variance"


def eval_variance(*runs: Any, alpha: float = 0.05) -> EvalVariance:
    """Re-run variance of pass@1 (and shared markers) across eval runs of the same tasks.

    Pass each run's rows as one argument, or one set of rows whose ``lineage.eval_run``
    values tell the runs apart. Per run and metric: the mean over tasks of the per-task
    mean. ``run_std`` = sample sd (ddof 1) over runs; ``noise_band`` =
    ``t_{1-alpha/2}(df = runs - 1) x sqrt(2) x run_std`` (the band on a difference of one
    run each side; t rather than 1.96 because ``run_std`` is estimated from few runs: at 3
    runs 1.96 would be 2.2x too narrow). Fewer than 3 runs: a note; fewer than 2: no sd.
    Pass the result as ``delta_report(..., run_std=ev)`` to use it as the noise floor.

    Parameters
    ----------
    *runs : rows
        Each run's rows as one argument (any container :func:`compare_runs` takes), or a
        single set of rows that is split by ``lineage.eval_run`` (rows without one form
        their own run) when it holds more than one value. The markers measured are those
        every run carries.
    alpha : float, optional
        Two-sided level of the band, strictly between 0 and 1; default 0.05. It sets only
        the t quantile of ``noise_band``; ``run_std`` and ``stability`` do not depend on it.

    Returns
    -------
    EvalVariance
        ``n_runs``, ``run_means``, ``run_std``, ``stability``, ``noise_band`` (pass@1) and
        their ``*_by_metric`` dicts, ``df`` (``runs - 1``, None under 2 runs), ``n_tasks``
        (pass@1 tasks per run), ``alpha`` and ``note``. A metric missing on some run has
        no sd.

    Raises
    ------
    ConfigError
        When ``alpha`` is outside (0, 1).
    TypeError
        When a run is not a row container.
    """
    alpha = check_level("alpha", alpha)
    row_lists = [as_row_list(run, f"runs[{i}]") for i, run in enumerate(runs)]
    if len(row_lists) == 1:
        groups = _split_runs(row_lists[0])
        if len(groups) > 1:
            row_lists = [groups[key] for key in sorted(groups, key=lambda k: (k is None, str(k)))]
    n_runs = len(row_lists)
    common = set.intersection(*(_marker_names(r) for r in row_lists)) if row_lists else set()
    metrics = ["pass_at_1", *(f"marker:{m}" for m in sorted(common))]
    run_means: dict[str, list[float]] = {}
    std_by: dict[str, float | None] = {}
    band_by: dict[str, float | None] = {}
    stability_by: dict[str, str | None] = {}
    df = n_runs - 1 if n_runs >= 2 else None
    quantile = float(student_t.ppf(1 - alpha / 2, df)) if df else None
    for metric in metrics:
        means = [_run_mean(rows, metric) for rows in row_lists]
        present = [m for m in means if m is not None]
        run_means[metric] = present
        std = float(np.std(present, ddof=1)) if len(present) == n_runs and n_runs >= 2 else None
        std_by[metric] = std
        band_by[metric] = None if std is None or quantile is None else quantile * math.sqrt(2.0) * std
        values = [v for rows in row_lists for v in _per_task_values(rows, metric)[0].values()]
        unit_range = bool(values) and min(values) >= 0.0 and max(values) <= 1.0
        stability_by[metric] = _stability(std, unit_range)
    notes = []
    if n_runs < 2:
        notes.append(
            f"{n_runs} run(s): a run-to-run sd needs at least 2 re-runs of the same tasks "
            "(simulate(runs=3) stamps lineage.eval_run)"
        )
    elif n_runs < MIN_EVAL_RUNS:
        notes.append(
            f"only {n_runs} runs: the sd has {n_runs - 1} degree(s) of freedom and the band "
            f"uses t = {quantile:.1f}; run at least {MIN_EVAL_RUNS}"
        )
    if n_runs >= 2 and std_by["pass_at_1"] is None:
        notes.append("pass@1 is missing on some run (no binary rewards); grade every run")
    return EvalVariance(
        n_runs=n_runs,
        run_means=run_means,
        run_std=std_by["pass_at_1"],
        run_std_by_metric=std_by,
        stability=stability_by["pass_at_1"],
        stability_by_metric=stability_by,
        noise_band=band_by["pass_at_1"],
        noise_band_by_metric=band_by,
        df=df,
        n_tasks=[len(_per_task_values(rows, "pass_at_1")[0]) for rows in row_lists],
        alpha=alpha,
        note="; ".join(notes) or None,
    )


# =========================================================================== delta_report


@dataclass(frozen=True)
class MetricDelta(Result):
    """One metric of a :class:`DeltaReport` (``delta`` = after - before, raw direction).

    ``direction`` says which way is good; ``gain_verdict`` reads the move in that direction:
    ``gain``, ``regression``, ``no_difference_detected``, ``within_eval_noise`` (moved, but
    no more than ``noise_band``), ``moved_unreplicated`` (a gain seen with one eval run a
    side and no noise floor), ``unresolved`` (a trained arm has fewer than 2 training seeds),
    ``insufficient_data``. ``roles`` lists target / guard / proxy.

    With training seeds (``delta_report(train_runs=...)``): ``n_train_runs_before/after`` (None
    for an arm not read as trained), the sd of the per-seed means ``train_std_before/after``,
    ``train_df`` (sum of seeds - 1 over trained arms), and ``ci`` / ``pvalue`` are the seed-aware t interval
    and p; the task-only bootstrap interval and sign-flip p stay in ``task_ci`` / ``task_pvalue``.
    """

    metric: str
    roles: tuple[str, ...]
    direction: str
    delta: float | None
    ci: tuple[float, float] | None
    pvalue: float | None
    verdict: str
    gain_verdict: str
    n_paired: int
    n_only_before: int
    n_only_after: int
    paired_share: float | None
    mean_before: float | None
    mean_after: float | None
    method: str
    pvalue_method: str | None
    min_pvalue: float | None
    run_std: float | None
    noise_band: float | None
    noise_df: int | None
    note: str | None = None
    n_train_runs_before: int | None = None
    n_train_runs_after: int | None = None
    train_std_before: float | None = None
    train_std_after: float | None = None
    train_df: float | None = None
    task_ci: tuple[float, float] | None = None
    task_pvalue: float | None = None
    rule: str | None = None
    interval_method: str | None = None
    n_clusters: int | None = None
    raw_pvalue: float | None = None

    def __str__(self) -> str:
        if self.delta is None:
            return f"{self.metric}: {self.gain_verdict} ({self.note})"
        ci = f"[{self.ci[0]:+.3f}..{self.ci[1]:+.3f}]" if self.ci else "[no interval]"
        p = f"p {self.pvalue:.3g}" if self.pvalue is not None else "p n/a"
        arrow = " (lower is better)" if self.direction == "lower_is_better" else ""
        band = f", band +/-{self.noise_band:.3f}" if self.noise_band is not None else ""
        seeds = [
            f"{arm} {n} seed(s)"
            for arm, n in (("before", self.n_train_runs_before), ("after", self.n_train_runs_after))
            if n is not None
        ]
        seeds_text = f", training seeds: {', '.join(seeds)}" if seeds else ""
        clusters = f", {self.n_clusters} clusters" if self.n_clusters is not None else ""
        if self.raw_pvalue is not None and self.pvalue is not None and self.raw_pvalue != self.pvalue:
            p += f" (raw {self.raw_pvalue:.3g})"
        rule = f"; {self.rule}" if self.rule else ""
        head = "NOT PAIRED " if self.method == "unpaired" else ""
        return (
            f"{head}{self.metric}{arrow}: {self.mean_before:.3f} -> {self.mean_after:.3f}, delta "
            f"{self.delta:+.3f} {ci}, {p}, {self.gain_verdict} (n={self.n_paired}{clusters}{band}{seeds_text}{rule})"
        )


@dataclass(frozen=True)
class SliceDelta(Result):
    """The target metric within one slice (``by`` = ``value``) of a :class:`DeltaReport`.

    ``low_n``: fewer paired tasks than ``ceil(log2(2/alpha))`` (6 at alpha 0.05), the least
    that lets an exact two-sided sign-flip p reach alpha. ``weak``: the after rate is below
    0.5, or the slice shows no supported gain while not at its ceiling.
    """

    by: str
    value: Any
    metric: str
    delta: float | None
    ci: tuple[float, float] | None
    pvalue: float | None
    verdict: str
    gain_verdict: str
    n_paired: int
    n_only_before: int
    n_only_after: int
    mean_before: float | None
    mean_after: float | None
    low_n: bool
    weak: bool
    note: str | None = None
    rule: str | None = None
    raw_pvalue: float | None = None

    def __str__(self) -> str:
        if self.delta is None:
            return f"{self.by}={self.value}: {self.gain_verdict}"
        ci = f"[{self.ci[0]:+.3f}..{self.ci[1]:+.3f}]" if self.ci else "[no interval]"
        flags = "".join((" low n" if self.low_n else "", " weak" if self.weak else ""))
        p = f", p {self.pvalue:.3g}" if self.pvalue is not None else ""
        rule = f"; {self.rule}" if self.rule else ""
        return (
            f"{self.by}={self.value}: delta {self.delta:+.3f} {ci}{p}, {self.gain_verdict} "
            f"(n={self.n_paired}{flags}{rule})"
        )


@dataclass(frozen=True)
class DeltaReport(Result):
    """Before/after report: headline, per-metric deltas, slices, warnings, ``ok``.

    ``headline`` starts with one of PASS, NO DIFFERENCE, NO DIFFERENCE (within eval noise),
    FAIL, UNRESOLVED, INCONCLUSIVE, NOT COMPARABLE, INSUFFICIENT DATA, TARGET NOT MEASURED.
    ``trained_arms`` names the arms read as trained (training-seed variance added), with
    their seed counts in ``n_train_runs_before`` / ``n_train_runs_after``. ``ok`` is
    True when the sides are comparable, no guard failed, and the target was measured (with
    an interval) and did not regress; it does not say the change helped. ``tasks_needed`` is how many paired tasks would detect
    the measured target delta with power 0.8 (:func:`toolkit.holdout_size` on the measured
    paired sd). ``report["hedging"]`` returns that metric's :class:`MetricDelta`.
    ``judge_corrected`` is the :class:`toolkit.stats.JudgeCorrected` paired delta of
    ``delta_report(gold=)`` (None without gold labels on both sides).
    """

    headline: str
    ok: bool
    target: str
    metrics: tuple[MetricDelta, ...]
    slices: tuple[SliceDelta, ...]
    warnings: tuple[str, ...]
    not_comparable: tuple[str, ...]
    failed_guards: tuple[str, ...]
    tasks_needed: int | None
    tasks_needed_note: str | None
    n_eval_runs_before: int
    n_eval_runs_after: int
    noise_source: str | None
    slice_by: str | None
    alpha: float
    n_rows_before: int
    n_rows_after: int
    note: str | None = None
    trained_arms: tuple[str, ...] = ()
    n_train_runs_before: int | None = None
    n_train_runs_after: int | None = None
    correction: str | None = None
    n_comparisons: int = 0
    interval_level: float | None = None
    cluster_by: str | None = None
    judge_corrected: Any = None

    def __getitem__(self, name: str) -> MetricDelta:
        for metric in self.metrics:
            if name in (metric.metric, metric.metric.removeprefix("marker:")):
                return metric
        raise KeyError(unknown_name_message("metric", name, [m.metric for m in self.metrics]))

    def to_pandas(self) -> Any:
        """One row per metric (``kind="metric"``) and per slice (``kind="slice"``)."""
        import pandas as pd

        records = []
        for metric in self.metrics:
            records.append({
                "kind": "metric", "metric": metric.metric, "slice_by": None, "slice": None,
                "direction": metric.direction, "roles": ",".join(metric.roles),
                "delta": metric.delta,
                "ci_low": metric.ci[0] if metric.ci else None,
                "ci_high": metric.ci[1] if metric.ci else None,
                "pvalue": metric.pvalue, "verdict": metric.verdict, "gain_verdict": metric.gain_verdict,
                "n_paired": metric.n_paired, "mean_before": metric.mean_before,
                "mean_after": metric.mean_after, "noise_band": metric.noise_band, "low_n": None,
            })
        direction = self[self.target].direction if self.metrics else "higher_is_better"
        for part in self.slices:
            records.append({
                "kind": "slice", "metric": part.metric, "slice_by": part.by, "slice": part.value,
                "direction": direction, "roles": "slice", "delta": part.delta,
                "ci_low": part.ci[0] if part.ci else None,
                "ci_high": part.ci[1] if part.ci else None,
                "pvalue": part.pvalue, "verdict": part.verdict, "gain_verdict": part.gain_verdict,
                "n_paired": part.n_paired, "mean_before": part.mean_before,
                "mean_after": part.mean_after, "noise_band": None, "low_n": part.low_n,
            })
        return pd.DataFrame.from_records(records, columns=[
            "kind", "metric", "slice_by", "slice", "direction", "roles", "delta", "ci_low",
            "ci_high", "pvalue", "verdict", "gain_verdict", "n_paired", "mean_before",
            "mean_after", "noise_band", "low_n",
        ])

    def __str__(self) -> str:
        lines = [self.headline]
        runs = f"{self.n_eval_runs_before} eval run(s) before, {self.n_eval_runs_after} after"
        if self.trained_arms:
            counts = {"before": self.n_train_runs_before, "after": self.n_train_runs_after}
            runs += "; training seeds: " + ", ".join(f"{arm} {counts[arm]}" for arm in self.trained_arms)
        lines.append(
            f"  ok={self.ok}; target {self.target}; {runs}; noise floor: {self.noise_source or 'none'}"
        )
        if self.correction is not None:
            others = sum(1 for m in self.metrics if m.metric != self.target and m.raw_pvalue is not None)
            others += sum(1 for part in self.slices if part.raw_pvalue is not None)
            lines.append(
                f"  {self.n_comparisons} comparisons: the target at alpha {self.alpha:g}, the other "
                f"{others} {self.correction}-adjusted, their intervals at "
                f"{self.interval_level:.2%} (simultaneous), a move there only after the target's"
            )
        else:
            lines.append(f"  {self.n_comparisons} comparison(s), no multiplicity correction")
        if self.cluster_by is not None:
            lines.append(f"  clustered by {self.cluster_by}")
        for metric in self.metrics:
            lines.append(f"  {metric}")
        if self.judge_corrected is not None:
            lines.append(f"  gold-checked: {self.judge_corrected}")
        if self.slices:
            lines.append(f"  slices by {self.slice_by}:")
            lines.extend(f"    {part}" for part in self.slices)
        for reason in self.failed_guards:
            lines.append(f"  guard failed: {reason}")
        if self.tasks_needed_note:
            lines.append(f"  sizing: {self.tasks_needed_note}")
        for warning in self.warnings:
            lines.append(f"  warning: {warning}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<DeltaReport {self.headline!r} ok={self.ok}, {len(self.metrics)} metrics, {len(self.slices)} slices>"

    def _repr_html_(self) -> str:
        frame = self.to_pandas()

        def cell(value: Any) -> str:
            if isinstance(value, float):
                return "" if math.isnan(value) else f"{value:+.3f}" if abs(value) < 10 else f"{value:.4g}"
            return html.escape("" if value is None else str(value))

        head = "".join(f"<th>{html.escape(c)}</th>" for c in frame.columns)
        body = "".join(
            "<tr>" + "".join(f"<td>{cell(v)}</td>" for v in record) + "</tr>"
            for record in frame.itertuples(index=False)
        )
        colour = "#1a7f37" if self.ok else "#cf222e"
        notes = "".join(f"<li>{html.escape(w)}</li>" for w in (*self.failed_guards, *self.warnings))
        sizing = f"<p>{html.escape(self.tasks_needed_note)}</p>" if self.tasks_needed_note else ""
        return (
            f"<div><p style='font-weight:bold;color:{colour}'>{html.escape(self.headline)}</p>"
            f"<table><tr>{head}</tr>{body}</table>{sizing}"
            + (f"<ul>{notes}</ul>" if notes else "")
            + "</div>"
        )


def _offset_seed(seed: Any, offset: int) -> Any:
    """seed + offset for int seeds (independent streams per metric); a Generator is shared."""
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ConfigError(f"seed must be an int or a numpy.random.Generator; got {seed!r}")
    return int(seed) + offset


def _gain_verdict(comparison: Comparison, lower_is_better: bool, band: float | None, unreplicated: bool) -> str:
    if comparison.verdict == "insufficient_data":
        return "insufficient_data"
    if comparison.verdict == "no_difference_detected":
        return "no_difference_detected"
    good = (comparison.verdict == "b_better") != lower_is_better
    if band is not None and comparison.delta is not None and abs(comparison.delta) <= band:
        return "within_eval_noise"
    if good and band is None and unreplicated:
        return "moved_unreplicated"
    return "gain" if good else "regression"


def _names(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, Iterable):
        out = list(value)
        for item in out:
            if not isinstance(item, str):
                raise ConfigError(f"{what} must hold metric names (str); got {item!r}")
        return out
    raise ConfigError(f"{what} must be a metric name or a list of names; got {value!r}")


def _pooled_run_std(
    runs_by_side: Sequence[Sequence[Sequence[Mapping[str, Any]]]], metric: str
) -> tuple[float, int] | None:
    """Pooled-by-df sd of per-run means over the sides with >= 2 runs; (s, df) or None."""
    weighted = []
    df_total = 0
    for runs in runs_by_side:
        if len(runs) < 2:
            continue
        means = [_run_mean(rows, metric) for rows in runs]
        if any(m is None for m in means):
            return None
        df = len(means) - 1
        weighted.append(df * float(np.var(means, ddof=1)))
        df_total += df
    if df_total == 0:
        return None
    return math.sqrt(math.fsum(weighted) / df_total), df_total


def _slice_getter(by: Any) -> tuple[str, Callable[[Mapping[str, Any]], Any]]:
    if callable(by):
        return getattr(by, "__name__", "callable"), by
    if isinstance(by, str) and by:
        path = by.split(".")

        def get(row: Mapping[str, Any]) -> Any:
            value: Any = row
            for key in path:
                if not isinstance(value, Mapping):
                    return None
                value = value.get(key)
            return value

        return by, get
    raise TypeError(f"by must be a row field name (str, dotted for nested) or a callable(row); got {type(by).__name__}")


def _auto_slice(rows_before: Sequence[Mapping[str, Any]], rows_after: Sequence[Mapping[str, Any]]) -> str | None:
    for field in _AUTO_SLICE_FIELDS:
        values_before = {str(r.get(field)) for r in rows_before if r.get(field) is not None}
        values_after = {str(r.get(field)) for r in rows_after if r.get(field) is not None}
        if len(values_before) >= 2 and len(values_after) >= 2:
            return field
    return None


def _two_proportion_pvalue(x1: int, n1: int, x2: int, n2: int) -> float | None:
    """Two-sided pooled two-proportion z-test p (statsmodels ``proportions_ztest`` form)."""
    if n1 == 0 or n2 == 0:
        return None
    pooled = (x1 + x2) / (n1 + n2)
    if pooled in (0.0, 1.0):
        return 1.0
    z = (x1 / n1 - x2 / n2) / math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    return float(2 * norm.sf(abs(z)))


# =========================================================================== training seeds


@dataclass(frozen=True)
class _SeedInterval:
    """Seed-aware reading of one metric (see :func:`delta_report`, "Training seeds")."""

    delta: float
    ci: tuple[float, float]
    pvalue: float
    df: float | None
    std_before: float | None
    std_after: float | None


def _split_train_runs(rows: Sequence[Mapping[str, Any]]) -> dict[Any, list[Mapping[str, Any]]]:
    """Rows grouped by ``lineage.train_run`` (rows without one share the key ``None``)."""
    groups: dict[Any, list[Mapping[str, Any]]] = {}
    for row in rows:
        lineage = row.get("lineage")
        run = lineage.get("train_run") if isinstance(lineage, Mapping) else None
        groups.setdefault(run, []).append(row)
    return groups


def _carries_train_run(rows: Sequence[Mapping[str, Any]]) -> bool:
    return any(key is not None for key in _split_train_runs(rows))


def _trained_arms(
    train_runs: Any, rows_before: Sequence[Mapping[str, Any]], rows_after: Sequence[Mapping[str, Any]]
) -> tuple[str, ...]:
    """The arms read as trained: given, or (None) those whose rows carry lineage.train_run."""
    arms = ("before", "after")
    if train_runs is False:
        return ()
    if train_runs is None:
        return tuple(arm for arm, rows in zip(arms, (rows_before, rows_after)) if _carries_train_run(rows))
    names = [train_runs] if isinstance(train_runs, str) else train_runs
    if not isinstance(names, Iterable):
        raise ConfigError(
            f"train_runs must be None, False, 'before', 'after', 'both' or a list of arms; got {train_runs!r}"
        )
    chosen: set[str] = set()
    for name in names:
        if name == "both":
            chosen.update(arms)
        elif isinstance(name, str) and name in arms:
            chosen.add(name)
        else:
            raise ConfigError(unknown_name_message("train_runs arm", str(name), (*arms, "both")))
    return tuple(arm for arm in arms if arm in chosen)


def _seed_task_values(
    rows: Sequence[Mapping[str, Any]], metric: str, trained: bool
) -> tuple[dict[str, float], list[dict[str, float]]]:
    """(per-task value averaged over seeds, per-seed per-task values; [] when untrained)."""
    if not trained:
        return _per_task_values(rows, metric)[0], []
    per_seed = [_per_task_values(part, metric)[0] for part in _split_train_runs(rows).values()]
    per_seed = [values for values in per_seed if values]
    pooled: dict[str, list[float]] = {}
    for values in per_seed:
        for task, value in values.items():
            pooled.setdefault(task, []).append(value)
    # Each seed weighs the same in a task's value, so the arm's number is the across-seed mean.
    return {task: math.fsum(v) / len(v) for task, v in pooled.items()}, per_seed


def _seed_interval(
    rows_before: Sequence[Mapping[str, Any]],
    rows_after: Sequence[Mapping[str, Any]],
    metric: str,
    trained: tuple[str, ...],
    alpha: float,
) -> _SeedInterval | None:
    """Seed-aware interval of the paired delta, or None (too few paired tasks or seeds).

    ``var = var_task + sum over trained arms of s_arm^2 / n_arm`` where ``var_task`` is the
    squared standard error of the mean paired difference (``sd(d)^2 / n_tasks``) and
    ``s_arm`` the sd of the arm's per-seed means over the paired tasks; interval ``delta
    +/- t_{1-alpha/2}(df) sqrt(var)`` with ``df = sum(n_arm - 1)``.
    """
    values_before, seeds_before = _seed_task_values(rows_before, metric, "before" in trained)
    values_after, seeds_after = _seed_task_values(rows_after, metric, "after" in trained)
    shared = sorted(set(values_before) & set(values_after))
    if len(shared) < MIN_PAIRED_TASKS:
        return None
    for seeds in (seeds_before, seeds_after):
        if seeds and len(seeds) < MIN_TRAIN_RUNS:
            return None
    diffs = np.array([values_after[t] - values_before[t] for t in shared])
    delta = math.fsum(diffs) / diffs.size
    components = [(float(np.var(diffs, ddof=1)) / diffs.size, diffs.size - 1)]
    stds: list[float | None] = []
    shared_set = set(shared)
    for seeds in (seeds_before, seeds_after):
        if not seeds:
            stds.append(None)
            continue
        means = []
        for values in seeds:
            tasks = [t for t in values if t in shared_set]
            if tasks:
                means.append(math.fsum(values[t] for t in tasks) / len(tasks))
        if len(means) < MIN_TRAIN_RUNS:
            return None
        std = float(np.std(means, ddof=1))
        stds.append(std)
        components.append((std**2 / len(means), len(means) - 1))
    total = math.fsum(v for v, _ in components)
    if total == 0.0:
        # No spread anywhere: a t p is undefined (x/0), and the 0 it used to print claimed a
        # certainty that a few seeds and tasks cannot carry (issue 14). The exact sign-flip p
        # of the paired differences is what this data can say, so it stands in.
        return _SeedInterval(delta, (delta, delta), float(sign_flip_test(diffs).pvalue), None, stds[0], stds[1])
    # df = sum over trained arms of (n_arm - 1), as the reference does. Measured (4000
    # simulated studies, 20 tasks, seed sd 0.03-0.2): Welch-Satterthwaite df covered only
    # 0.88-0.91 at 2 seeds and 0.93-0.94 at 3 (nominal 0.95); this df covered 0.95-1.0.
    df = float(sum(d for _, d in components[1:]))
    se = math.sqrt(total)
    quantile = float(student_t.ppf(1.0 - alpha / 2.0, df))
    pvalue = float(2.0 * student_t.sf(abs(delta) / se, df))
    return _SeedInterval(delta, (delta - quantile * se, delta + quantile * se), pvalue, df, stds[0], stds[1])


def _seed_counts(
    rows_before: Sequence[Mapping[str, Any]], rows_after: Sequence[Mapping[str, Any]], trained: tuple[str, ...]
) -> tuple[int | None, int | None]:
    return tuple(  # type: ignore[return-value]
        len(_split_train_runs(rows)) if arm in trained else None
        for arm, rows in (("before", rows_before), ("after", rows_after))
    )


def _read_moves(
    comparison: Comparison,
    seeded: _SeedInterval | None,
    seed_counts: tuple[int | None, int | None],
    is_down: bool,
    band: float | None,
    unreplicated: bool,
    alpha: float,
) -> tuple[tuple[float, float] | None, float | None, str, str]:
    """(ci, pvalue, verdict, gain_verdict) of one comparison, with training seeds if any."""
    if all(n is None for n in seed_counts):
        return comparison.ci, comparison.pvalue, comparison.verdict, _gain_verdict(
            comparison, is_down, band, unreplicated
        )
    task_gain = _gain_verdict(comparison, is_down, None, False)
    too_few = any(n is not None and n < MIN_TRAIN_RUNS for n in seed_counts)
    if too_few or seeded is None:
        # One seed of a trained arm cannot tell the recipe from the seed (#356: a single seed
        # flipped the sign). A loss still blocks, as with one eval run (module docstring).
        if comparison.verdict == "insufficient_data" or task_gain == "regression":
            return comparison.ci, comparison.pvalue, comparison.verdict, _gain_verdict(
                comparison, is_down, band, unreplicated
            )
        if too_few:
            return comparison.ci, comparison.pvalue, comparison.verdict, "unresolved"
        return comparison.ci, comparison.pvalue, comparison.verdict, _gain_verdict(
            comparison, is_down, band, unreplicated
        )
    verdict = _verdict(seeded.ci, seeded.pvalue, alpha)
    # The task-level reading (bootstrap interval and exact sign-flip p) must agree: the
    # seed term only widens, it never lets fewer tasks claim what no exact test could.
    if verdict != comparison.verdict:
        verdict = "no_difference_detected"
    moved = dataclasses.replace(comparison, verdict=verdict)
    # Training seeds replicate the whole train-and-evaluate pipeline, so a move that clears
    # them is not "unreplicated".
    return seeded.ci, seeded.pvalue, verdict, _gain_verdict(moved, is_down, band, False)


def delta_report(
    before: Any,
    after: Any,
    *,
    metrics: Sequence[str] | None = None,
    lower_is_better: Iterable[str] = (),
    must_not_regress: Iterable[str] = (),
    proxy: str | None = None,
    target: str = "pass_at_1",
    run_std: Any = None,
    train_runs: Any = None,
    by: Any = None,
    alpha: float = 0.05,
    seed: int | np.random.Generator = 0,
    n_resamples: int = 10_000,
    cluster: Any = None,
    correction: str | None = "holm",
    gold: str | None = None,
) -> DeltaReport:
    """Before/after report on held-out tasks: did the change help, and can we tell?

    Parameters
    ----------
    before, after : list of dict, SimulationData, DataFrame or path
        Rows of each arm (any container :func:`compare_runs` takes).
    metrics : sequence of str or None, optional
        Metric names; default None, pass@1 plus every marker both sides carry. The target,
        guards and proxy are always included.
    lower_is_better : iterable of str, optional
        Marker names read downward (added to the stock set ``LOWER_IS_BETTER``); only
        ``gain_verdict`` flips, delta and CI stay raw. Default none beyond the stock set.
    must_not_regress : iterable of str, optional
        Metrics whose regression (interval wholly on the bad side and beyond the metric's
        noise band) fails the report; default none.
    proxy : str or None, optional
        A metric that must not rise while the target does not (or sit wholly above the
        target): a rise there alone reads as over-optimisation and fails the report.
        Default None, no proxy check.
    target : str, optional
        The metric the headline is about (default ``"pass_at_1"``).
    run_std : float, dict, EvalVariance or None, optional
        Re-run noise floor: a number (target only; q = z), a dict ``{metric: sd}``, or an
        :func:`eval_variance` result (per metric, q = t(runs - 1)). Default: estimated from
        ``lineage.eval_run`` re-runs inside the rows (module docstring).
    train_runs : str, list of str, bool or None, optional
        Which arms were trained, so that their training-seed variance counts: ``"after"``,
        ``"before"``, ``"both"`` (or a list), ``False`` for none; default (``None``) the
        arms whose rows carry ``lineage.train_run``. Rows of a trained arm are split by
        ``lineage.train_run`` (one value per training seed); fewer than 2 seeds on a trained
        arm leaves a move ``unresolved`` (module docstring, "Training seeds").
    by : str, callable, bool or None, optional
        Slice key (row field, dotted for nested) or ``callable(row)``; default the first of
        ``category`` / ``slice`` with >= 2 values on both sides; ``False`` for none.
    alpha : float, optional
        Test level strictly between 0 and 1, default 0.05; intervals are at ``1 - alpha``.
    seed : int or numpy.random.Generator, optional
        Seed of the bootstrap intervals and of the Monte Carlo sign flips (used above 20
        paired tasks); default 0. With an int, metric i uses ``seed + i`` and slice j
        ``seed + 100 + j``; a Generator is shared by all of them, in that order.
    n_resamples : int, optional
        Bootstrap resamples, and Monte Carlo sign-flip patterns when the test is not exact;
        an integer ``>= 100`` (below 1,000 it warns), default 10,000.
    cluster : None, "auto", str or callable, optional
        Cluster key of the tasks (as in :func:`compare_runs`): every metric and slice then
        uses the clustered t interval and cluster sign flips. Default None.
    correction : "holm", "bh" or None, optional
        Multiple-comparison correction of every metric, guard and slice other than the
        target, which keeps ``alpha`` (module docstring, "Many comparisons"): ``"holm"``
        (default; family-wise error, Holm 1979, with Bonferroni simultaneous intervals),
        ``"bh"`` (false discovery rate, Benjamini & Hochberg 1995, with the
        false-coverage-rate intervals of Benjamini & Yekutieli 2005), or None (each at
        ``alpha``, with a warning from 4 comparisons up). With a correction, a secondary
        move counts only when the target moved; a guard's regression always counts.
    gold : str or None, optional
        A row field holding gold labels on a random subset of each run's rows (None
        elsewhere), when ``reward`` is a judge's. With labels on both sides and the target
        pass@1, the paired delta is also estimated judge-corrected
        (:func:`toolkit.judge_corrected`, prediction-powered) and the report prints it; a
        gain the corrected interval does not confirm (it reaches 0) fails the report, and a
        corrected interval wholly below 0 fails it as a regression. Default None.

    Returns
    -------
    DeltaReport
        The headline, ``ok``, one :class:`MetricDelta` per metric, the slices, warnings,
        comparability problems and failed guards. See :class:`DeltaReport`.

    Raises
    ------
    ConfigError
        For an unknown metric name (with the nearest valid name), a ``lower_is_better``
        name that is not a marker, an ``alpha`` outside (0, 1), an ``n_resamples`` below 1,
        a ``seed`` that is neither an int nor a Generator, or a ``run_std`` value that is not
        a finite number ``>= 0``.
    TypeError
        When ``before`` or ``after`` is not a row container.
    """
    rows_before = as_row_list(before, "before")
    rows_after = as_row_list(after, "after")
    alpha = check_level("alpha", alpha)
    if correction is not None and correction not in _CORRECTIONS:
        raise ConfigError(unknown_name_message("correction", str(correction), (*_CORRECTIONS, "None")))
    n_resamples = check_resamples(n_resamples)
    level = 1.0 - alpha
    markers_before, markers_after = _marker_names(rows_before), _marker_names(rows_after)
    markers_any = markers_before | markers_after

    downward = set(LOWER_IS_BETTER)
    for name in _names(lower_is_better, "lower_is_better"):
        resolved = _resolve_metric(name, markers_any, extra=LOWER_IS_BETTER)
        if not resolved.startswith("marker:"):
            raise ConfigError(f"lower_is_better takes marker names; {name!r} is higher-is-better by definition")
        downward.add(resolved[len("marker:"):])

    def resolve(name: Any) -> str:
        return _resolve_metric(name, markers_any, extra=LOWER_IS_BETTER)

    target = resolve(target)
    guards = [resolve(name) for name in _names(must_not_regress, "must_not_regress")]
    proxy_metric = resolve(proxy) if proxy is not None else None
    if metrics is None:
        chosen = ["pass_at_1", *(f"marker:{m}" for m in sorted(markers_before & markers_after))]
    else:
        chosen = [resolve(name) for name in _names(metrics, "metrics")]
    ordered: list[str] = []
    for name in [target, *chosen, *guards, *([proxy_metric] if proxy_metric else [])]:
        if name not in ordered:
            ordered.append(name)

    trained = _trained_arms(train_runs, rows_before, rows_after)
    seed_counts = _seed_counts(rows_before, rows_after, trained)

    # ---- noise floors. Eval re-runs are grouped within each training seed: the spread of
    # re-runs of one trained model is eval noise, the spread between seeds is not.
    def eval_run_groups(rows: Sequence[Mapping[str, Any]], arm: str) -> list[list[list[Mapping[str, Any]]]]:
        parts = _split_train_runs(rows).values() if arm in trained else [rows]
        return [list(_split_runs(part).values()) for part in parts]

    groups_before = eval_run_groups(rows_before, "before")
    groups_after = eval_run_groups(rows_after, "after")
    n_runs_before = sum(len(g) for g in groups_before)
    n_runs_after = sum(len(g) for g in groups_after)
    unreplicated = n_runs_before == 1 and n_runs_after == 1
    floors: dict[str, tuple[float, int | None]] = {}
    noise_source = None
    if run_std is not None:
        noise_source = "given"
        if isinstance(run_std, EvalVariance):
            for name, value in run_std.run_std_by_metric.items():
                if value is not None:
                    floors[name] = (value, run_std.df)
        elif isinstance(run_std, Mapping):
            for name, value in run_std.items():
                floors[resolve(name)] = (_check_std(value, f"run_std[{name!r}]"), None)
        else:
            floors[target] = (_check_std(run_std, "run_std"), None)
    else:
        for name in ordered:
            pooled = _pooled_run_std((*groups_before, *groups_after), name)
            if pooled is not None:
                floors[name] = pooled
                noise_source = "estimated from lineage.eval_run"

    # ---- clusters (read over both sides: a task's label must agree)
    cluster_labels, cluster_by, cluster_missing = _clusters_of(rows_before, rows_after, cluster)

    # ---- per-metric comparisons
    def measure_metric(index: int, name: str, level_m: float, p_adjusted: float | None) -> MetricDelta:
        _, skipped_before = _per_task_values(rows_before, name)
        _, skipped_after = _per_task_values(rows_after, name)
        values_before = _seed_task_values(rows_before, name, "before" in trained)[0]
        values_after = _seed_task_values(rows_after, name, "after" in trained)[0]
        comparison = _compare_values(
            values_before, values_after, name, level=level_m, seed=_offset_seed(seed, index),
            n_resamples=n_resamples, skipped_a=skipped_before, skipped_b=skipped_after,
            clusters=cluster_labels, cluster_by=cluster_by, pvalue_override=p_adjusted,
        )
        is_down = name.startswith("marker:") and name[len("marker:"):] in downward
        floor = floors.get(name)
        band = None
        if floor is not None:
            band = noise_band(floor[0], n_runs_before, n_runs_after, df=floor[1], alpha=alpha)
        roles = tuple(
            role for role, present in (
                ("target", name == target), ("guard", name in guards), ("proxy", name == proxy_metric),
            ) if present
        )
        seeded = _seed_interval(rows_before, rows_after, name, trained, 1.0 - level_m) if trained else None
        raw_seed_p = seeded.pvalue if seeded else None
        if seeded is not None and p_adjusted is not None:
            seeded = dataclasses.replace(seeded, pvalue=p_adjusted)
        ci, pvalue, verdict, gain = _read_moves(
            comparison, seeded, seed_counts, is_down, band, unreplicated, alpha
        )
        note = comparison.note
        if trained and seeded is None and gain != "unresolved" and comparison.delta is not None:
            note = "; ".join(filter(None, [
                note, f"training-seed variance not added (it needs {MIN_PAIRED_TASKS}+ paired tasks)",
            ]))
        rule = comparison.rule
        if seeded is not None and verdict != comparison.verdict:
            rule = f"the seed-aware t interval and the task-level reading disagree ({comparison.rule})"
        return MetricDelta(
            metric=name, roles=roles, direction="lower_is_better" if is_down else "higher_is_better",
            delta=comparison.delta, ci=ci, pvalue=pvalue, verdict=verdict, gain_verdict=gain,
            n_paired=comparison.n_paired, n_only_before=comparison.n_only_a,
            n_only_after=comparison.n_only_b, paired_share=comparison.paired_share,
            mean_before=comparison.mean_a, mean_after=comparison.mean_b, method=comparison.method,
            pvalue_method="t (training seeds)" if seeded else comparison.pvalue_method,
            min_pvalue=comparison.min_pvalue,
            run_std=floor[0] if floor else None, noise_band=band,
            noise_df=floor[1] if floor else None, note=note,
            n_train_runs_before=seed_counts[0], n_train_runs_after=seed_counts[1],
            train_std_before=seeded.std_before if seeded else None,
            train_std_after=seeded.std_after if seeded else None,
            train_df=seeded.df if seeded else None,
            task_ci=comparison.ci if seeded else None,
            task_pvalue=comparison.pvalue if seeded else None,
            rule=rule, interval_method=comparison.interval_method, n_clusters=comparison.n_clusters,
            raw_pvalue=_deciding_p(comparison.pvalue, raw_seed_p) if p_adjusted is None else None,
        )

    slice_args = dict(
        target_down=target in {f"marker:{d}" for d in downward}, alpha=alpha, seed=seed,
        n_resamples=n_resamples, unreplicated=unreplicated and target not in floors, trained=trained,
        clusters=cluster_labels, cluster_by=cluster_by,
    )
    results = [measure_metric(index, name, level, None) for index, name in enumerate(ordered)]
    slices, slice_by = _slices(rows_before, rows_after, by, target, level=level, **slice_args)

    # ---- many comparisons (module docstring, "Many comparisons"): the target is the one
    # pre-declared hypothesis and keeps alpha; every other metric, guard and slice is
    # adjusted within its family and re-read with simultaneous intervals and adjusted p; a
    # secondary gain counts only after the target moved (serial gatekeeping).
    family = [m.raw_pvalue for m in results] + [part.raw_pvalue for part in slices]
    target_index = ordered.index(target)
    tested = [i for i, value in enumerate(family) if value is not None and i != target_index]
    n_comparisons = len(tested) + (family[target_index] is not None)
    interval_level = level
    if correction is not None and len(tested) >= 2:
        adjusted_all, interval_alpha = _adjust(family, tested, alpha, correction)
        interval_level = 1.0 - interval_alpha
        raw_metrics = [m.raw_pvalue for m in results]
        raw_slices = [part.raw_pvalue for part in slices]
        results = [
            results[index] if index == target_index else dataclasses.replace(
                measure_metric(index, name, interval_level, adjusted_all[index]), raw_pvalue=raw)
            for index, (name, raw) in enumerate(zip(ordered, raw_metrics))
        ]
        slice_p = adjusted_all[len(ordered):]
        slices, slice_by = _slices(
            rows_before, rows_after, by, target, level=interval_level, p_adjusted=slice_p, **slice_args,
        )
        slices = [dataclasses.replace(part, raw_pvalue=raw) for part, raw in zip(slices, raw_slices)]
    if correction is not None and results[target_index].verdict not in ("a_better", "b_better"):
        results = [m if i == target_index else _gatekept(m) for i, m in enumerate(results)]
        slices = [_gatekept(part) for part in slices]
    by_name = {m.metric: m for m in results}
    target_delta = by_name[target]

    warnings: list[str] = []
    not_comparable: list[str] = []

    # ---- guards
    failed, guard_warnings = _check_guards(rows_before, rows_after, by_name, target, guards, proxy_metric)
    warnings.extend(guard_warnings)

    # ---- comparability
    keys_before = {task_key(r) for r in rows_before}
    keys_after = {task_key(r) for r in rows_after}
    union = keys_before | keys_after
    shared_tasks = keys_before & keys_after
    if union and len(shared_tasks) / len(union) < MIN_PAIRED_SHARE:
        not_comparable.append(
            f"situations: only {len(shared_tasks)} of {len(union)} tasks appear on both sides; "
            "replay the same tasks (simulate(tasks=...)) before comparing"
        )
    elif len(shared_tasks) < len(union):
        warnings.append(
            f"{len(shared_tasks)} of {len(union)} tasks are on both sides ({len(keys_before - keys_after)} only "
            f"before, {len(keys_after - keys_before)} only after): every delta is over the shared ones; "
            "a task that failed to run on one side is missing from the comparison, not counted as a loss"
        )
    config_before, config_after = run_config(rows_before), run_config(rows_after)
    answered_check = _answered_gap(config_before, config_after, target_delta.noise_band)
    if answered_check:
        not_comparable.append(answered_check)
    warnings.extend(_config_warnings(config_before, config_after, target))
    if cluster_missing:
        warnings.append(cluster_missing)
    if correction is None and n_comparisons >= FAMILY_WARNING_METRICS:
        chance = 1.0 - (1.0 - alpha) ** n_comparisons
        warnings.append(
            f"{n_comparisons} comparisons at alpha {alpha:g} with correction=None: the chance that at "
            f"least one moves by luck is up to 1 - {1 - alpha:g}^{n_comparisons} = {chance:.3f}; trust the "
            "target, read the rest as leads (or pass correction='holm')"
        )
    warnings.extend(_ceiling_warnings(rows_before, rows_after, target, target_delta, downward))
    eval_runs_missing = _partly_labelled(rows_before) or _partly_labelled(rows_after)
    if eval_runs_missing:
        warnings.append(
            "some rows carry lineage.eval_run and others do not; the unlabelled ones were "
            "treated as one more run"
        )
    for arm, rows in (("before", rows_before), ("after", rows_after)):
        if arm in trained and None in _split_train_runs(rows) and _carries_train_run(rows):
            warnings.append(
                f"some {arm} rows carry lineage.train_run and others do not; the unlabelled "
                "ones were treated as one more training seed"
            )
    short = [
        f"{arm} has {n} training seed(s)"
        for arm, n in zip(("before", "after"), seed_counts) if n is not None and n < MIN_TRAIN_RUNS
    ]
    if short:
        regressed = [m.metric for m in results if m.gain_verdict == "regression"]
        if regressed:
            warnings.append(
                f"{', '.join(regressed)} regressed, but {' and '.join(short)}; train "
                f"{MIN_TRAIN_RUNS}+ seeds to tell the recipe from the seed"
            )
    if unreplicated and noise_source is None:
        regressed = [m.metric for m in results if m.gain_verdict == "regression"]
        if regressed:
            warnings.append(
                f"{', '.join(regressed)} regressed on 1 eval run a side; rerun both to see "
                "whether it is re-run noise"
            )

    corrected = None
    if gold is not None:
        corrected = _judge_corrected_target(rows_before, rows_after, gold, target, target_delta, level, cluster,
                                            seed, n_resamples, failed, warnings)

    # ---- headline and ok
    headline = _headline(not_comparable, failed, target_delta, unreplicated, seed_counts)
    # Nothing measured is not "no regression": a gate reading ok must not pass empty data.
    ok = (
        not not_comparable and not failed
        and target_delta.gain_verdict not in ("regression", "insufficient_data")
    )

    tasks_needed, tasks_note = _tasks_needed(rows_before, rows_after, target, target_delta, alpha)
    seed_terms = [v for v in (target_delta.train_std_before, target_delta.train_std_after) if v]
    if tasks_note and seed_terms:
        # The seed term s^2/n_seeds does not shrink with tasks; sizing tasks alone overpromises.
        tasks_note += (
            f"; the training-seed spread (sd {max(seed_terms):.3f} between seed means) does not "
            "shrink with more tasks, only with more seeds"
        )
    return DeltaReport(
        headline=headline, ok=ok, target=target, metrics=tuple(results), slices=tuple(slices),
        warnings=tuple(warnings), not_comparable=tuple(not_comparable), failed_guards=tuple(failed),
        tasks_needed=tasks_needed, tasks_needed_note=tasks_note,
        n_eval_runs_before=n_runs_before, n_eval_runs_after=n_runs_after,
        noise_source=noise_source, slice_by=slice_by, alpha=alpha,
        n_rows_before=len(rows_before), n_rows_after=len(rows_after),
        trained_arms=trained, n_train_runs_before=seed_counts[0], n_train_runs_after=seed_counts[1],
        correction=correction if tested else None, n_comparisons=n_comparisons,
        interval_level=interval_level, cluster_by=cluster_by, judge_corrected=corrected,
    )


def _judge_corrected_target(rows_before, rows_after, gold, target, target_delta, level, cluster, seed,
                            n_resamples, failed: list[str], warnings: list[str]):
    """The judge-corrected paired delta of pass@1 (``delta_report(gold=)``), and what it
    changes: a judge's gain it does not confirm, or a regression it shows, is a failed check."""
    from toolkit.stats.ppi import judge_corrected

    if not isinstance(gold, str) or not gold:
        raise ConfigError(f"gold must be a row field name or None; got {gold!r}")
    if target != "pass_at_1":
        warnings.append(f"gold={gold!r} corrects pass@1 only; the target is {target}, so no correction was made")
        return None
    missing = [arm for arm, rows in (("before", rows_before), ("after", rows_after))
               if not any(row.get(gold) is not None for row in rows)]
    if missing:
        warnings.append(f"gold={gold!r}: no {' and no '.join(missing)} row carries a gold label, so the "
                        "target is the judge's alone (label a random subset of each run's rows)")
        return None
    corrected = judge_corrected(rows_after, baseline=rows_before, gold=gold, level=level, cluster=cluster,
                                n_resamples=n_resamples, seed=seed if isinstance(seed, int) else 0)
    if corrected.low is None:
        warnings.append(f"judge-corrected target could not be computed: {corrected.note}")
        return corrected
    gain = target_delta.gain_verdict == "gain"
    if corrected.high < 0:
        failed.append(f"judge-corrected pass@1 regressed {corrected.estimate:+.3f} "
                      f"[{corrected.low:+.3f}, {corrected.high:+.3f}] against {corrected.n_labelled} gold labels")
    elif gain and corrected.low <= 0:
        failed.append(f"the judge's gain is not confirmed against gold: judge-corrected pass@1 "
                      f"{corrected.estimate:+.3f} [{corrected.low:+.3f}, {corrected.high:+.3f}] reaches 0")
    elif not gain and corrected.low > 0:
        warnings.append(f"judge-corrected pass@1 shows a gain ({corrected.estimate:+.3f} "
                        f"[{corrected.low:+.3f}, {corrected.high:+.3f}]) the judge's delta alone does not")
    return corrected


def _check_guards(
    rows_before: Sequence[Mapping[str, Any]],
    rows_after: Sequence[Mapping[str, Any]],
    by_name: Mapping[str, MetricDelta],
    target: str,
    guards: Sequence[str],
    proxy_metric: str | None,
) -> tuple[list[str], list[str]]:
    """(failed guard reasons, warnings) for must_not_regress metrics and the proxy."""
    failed: list[str] = []
    warnings: list[str] = []
    for name in guards:
        metric = by_name[name]
        if metric.gain_verdict == "regression":
            failed.append(
                f"must_not_regress {name} moved the wrong way: {metric.mean_before:.3f} -> "
                f"{metric.mean_after:.3f}, delta {metric.delta:+.3f} "
                f"[{metric.ci[0]:+.3f}..{metric.ci[1]:+.3f}]"
            )
        elif metric.gain_verdict == "insufficient_data":
            warnings.append(f"guard {name} could not be checked: {metric.note}")
        if metric.delta is not None and _constant_both(rows_before, rows_after, name):
            warnings.append(
                f"guard {name} has one value on every row of both sides; it cannot show a "
                "regression here (check that the marker can fire)"
            )
    if proxy_metric is None or proxy_metric == target:
        return failed, warnings
    proxy_delta, target_delta = by_name[proxy_metric], by_name[target]
    above = False
    if proxy_delta.ci and target_delta.ci:
        # Both read with "up = good", so a lower-is-better proxy compares the right way.
        above = _good_interval(proxy_delta)[0] > _good_interval(target_delta)[1]
    if (proxy_delta.gain_verdict == "gain" and target_delta.gain_verdict != "gain") or above:
        failed.append(
            f"proxy {proxy_metric} improved ({proxy_delta.delta:+.3f}) while the target "
            f"{target} did not keep up ({target_delta.gain_verdict}, "
            f"{_format_delta(target_delta.delta)}): over-optimised on the proxy"
        )
    return failed, warnings


def _config_warnings(config_before: Mapping[str, Any], config_after: Mapping[str, Any], target: str) -> list[str]:
    """Fields that should be held fixed but differ, shares that differ, ungraded rows."""
    warnings: list[str] = []
    for field in _HELD_FIXED:
        label = "lineage.system_prompt_sha" if field == "prompt_hash" else field
        for side, config in (("before", config_before), ("after", config_after)):
            if field in config["mixed"]:
                shown = ", ".join(map(str, config["mixed_values"][field]))
                warnings.append(f"{side} mixes {label} values ({shown}); its rows were not run alike")
        value_before, value_after = config_before.get(field), config_after.get(field)
        if value_before is not None and value_after is not None and value_before != value_after:
            extra = (
                " (a base rate measured under one deploy prompt is not comparable with one "
                "under another, unless the prompt is the change under test)"
                if field == "prompt_hash" else ""
            )
            warnings.append(f"{label} differs: before {value_before!r}, after {value_after!r}{extra}")
    truncated_before = config_before.get("truncated_share") or 0.0
    truncated_after = config_after.get("truncated_share") or 0.0
    if abs(truncated_after - truncated_before) > TRUNCATED_GAP:
        warnings.append(
            f"truncated share differs: before {truncated_before:.1%}, after {truncated_after:.1%}; "
            "length cuts change what gets graded (raise max_tokens on both sides)"
        )
    if target == "pass_at_1":
        for side, config in (("before", config_before), ("after", config_after)):
            graded = config.get("graded_share")
            if graded is not None and graded < MIN_GRADED_SHARE:
                warnings.append(
                    f"only {graded:.1%} of {side} rows carry a 0/1 reward; the ungraded rows "
                    "can hold the difference (grade every row)"
                )
    return warnings


def _headline(
    not_comparable: Sequence[str],
    failed: Sequence[str],
    target_delta: MetricDelta,
    unreplicated: bool,
    seed_counts: tuple[int | None, int | None] = (None, None),
) -> str:
    """The one headline, most serious first: comparability, measurement, failure, move."""
    verdict = target_delta.gain_verdict
    if not_comparable:
        return "NOT COMPARABLE: " + "; ".join(not_comparable)
    if target_delta.method == "none":
        return f"TARGET NOT MEASURED: {target_delta.note}"
    if verdict == "insufficient_data":
        return f"INSUFFICIENT DATA: {target_delta.note}"
    if failed or verdict == "regression":
        reasons = list(failed)
        if verdict == "regression":
            reasons.insert(0, f"target {target_delta.metric} regressed {target_delta.delta:+.3f}")
        return "FAIL: " + "; ".join(reasons)
    if verdict == "unresolved":
        short = " and ".join(
            f"{arm} has {n} training seed(s)"
            for arm, n in zip(("before", "after"), seed_counts) if n is not None and n < MIN_TRAIN_RUNS
        )
        return (
            f"UNRESOLVED ({short}; train {MIN_TRAIN_RUNS}+ seeds per trained arm: one seed "
            "cannot tell the recipe from the seed)"
        )
    if verdict == "within_eval_noise":
        return "NO DIFFERENCE (within eval noise)"
    if verdict == "moved_unreplicated":
        if unreplicated:
            return "INCONCLUSIVE (1 eval run a side, rerun to confirm)"
        return "INCONCLUSIVE (no re-run noise floor for the target, rerun to confirm)"
    return "PASS" if verdict == "gain" else "NO DIFFERENCE"


def _check_std(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(float(value)) or value < 0:
        raise ConfigError(f"{name} must be a finite number >= 0 (a run-to-run sd); got {value!r}")
    return float(value)


def _format_delta(value: float | None) -> str:
    return "no delta" if value is None else f"{value:+.3f}"


def _good_interval(metric: MetricDelta) -> tuple[float, float]:
    """The interval with "up = good", so metrics of either direction compare."""
    assert metric.ci is not None
    low, high = metric.ci
    return (-high, -low) if metric.direction == "lower_is_better" else (low, high)


def _constant_both(rows_before: Sequence[Mapping[str, Any]], rows_after: Sequence[Mapping[str, Any]], metric: str) -> bool:
    values = {v for rows in (rows_before, rows_after) for v in (_row_value(r, metric) for r in rows) if v is not None}
    return len(values) == 1


def _partly_labelled(rows: Sequence[Mapping[str, Any]]) -> bool:
    groups = _split_runs(rows)
    return None in groups and len(groups) > 1


def _answered_gap(config_before: Mapping[str, Any], config_after: Mapping[str, Any], band: float | None) -> str | None:
    n_before, n_after = config_before.get("n_rows") or 0, config_after.get("n_rows") or 0
    share_before, share_after = config_before.get("answered_share"), config_after.get("answered_share")
    if not n_before or not n_after or share_before is None or share_after is None:
        return None
    answered_before = round(share_before * n_before)
    answered_after = round(share_after * n_after)
    pvalue = _two_proportion_pvalue(answered_before, n_before, answered_after, n_after)
    gap = abs(share_after - share_before)
    threshold = band if band is not None else ANSWERED_GAP_DEFAULT
    if pvalue is not None and pvalue < ANSWERED_GAP_ALPHA and gap > threshold:
        return (
            f"answered: {share_before:.1%} of before rows and {share_after:.1%} of after rows "
            f"end with an answer (gap {gap:.1%}, two-proportion z-test p = {pvalue:.2g}); a side "
            "that ran out of tokens mid-thought is not comparable (raise max_tokens or strip "
            "reasoning on both sides)"
        )
    return None


def _ceiling_warnings(
    rows_before: Sequence[Mapping[str, Any]],
    rows_after: Sequence[Mapping[str, Any]],
    target: str,
    target_delta: MetricDelta,
    downward: set[str],
) -> list[str]:
    if target_delta.mean_before is None or target_delta.direction == "lower_is_better":
        return []
    values_before, _ = _per_task_values(rows_before, target)
    values_after, _ = _per_task_values(rows_after, target)
    if not values_before or max(values_before.values()) > 1.0 or min(values_before.values()) < 0.0:
        return []  # the ceiling reading needs a 0-1 metric
    mean_before = math.fsum(values_before.values()) / len(values_before)
    if mean_before >= CEILING_RATE:
        return [
            f"ceiling: {target} was already {mean_before:.3f} before; a suite near 1 can barely "
            "show a gain (add harder tasks)"
        ]
    shared = set(values_before) & set(values_after)
    room = sum(1 for task in shared if values_before[task] < 1.0)
    if shared and room < CEILING_MIN_ROOM_TASKS and room < 0.5 * len(shared):
        return [
            f"ceiling: only {room} of {len(shared)} paired tasks had room to improve on {target}; "
            "the delta is measured on few tasks"
        ]
    return []


def _slices(
    rows_before: Sequence[Mapping[str, Any]],
    rows_after: Sequence[Mapping[str, Any]],
    by: Any,
    target: str,
    target_down: bool,
    *,
    level: float,
    alpha: float,
    seed: Any,
    n_resamples: int,
    unreplicated: bool,
    trained: tuple[str, ...] = (),
    clusters: Mapping[str, Any] | None = None,
    cluster_by: str | None = None,
    p_adjusted: Sequence[float | None] | None = None,
) -> tuple[list[SliceDelta], str | None]:
    if by is False:
        return [], None
    explicit = by is not None
    if by is None:
        by = _auto_slice(rows_before, rows_after)
        if by is None:
            return [], None
    label, get = _slice_getter(by)
    groups: dict[str, tuple[Any, list, list]] = {}
    for side, rows in ((1, rows_before), (2, rows_after)):
        for row in rows:
            value = get(row)
            if value is None:
                continue
            entry = groups.setdefault(str(value), (value, [], []))
            entry[side].append(row)
    if explicit and isinstance(by, str) and not groups:
        # A misspelt key would otherwise give a report with no slices and no word about it.
        fields = {
            f"{key}.{sub}" if sub is not None else key
            for row in (*rows_before, *rows_after)
            for key, value in row.items()
            for sub in ([None, *value] if isinstance(value, Mapping) else [None])
        }
        raise ConfigError(
            unknown_name_message("slice field (by=)", by, sorted(str(f) for f in fields))
            + "; no row of either side carries it"
        )
    # ceil(log2(2/alpha)): the fewest pairs whose exact two-sided sign-flip p can reach alpha.
    min_tasks = math.ceil(math.log2(2.0 / alpha))
    out = []
    for index, key in enumerate(sorted(groups)):
        value, part_before, part_after = groups[key]
        _, skipped_before = _per_task_values(part_before, target)
        _, skipped_after = _per_task_values(part_after, target)
        values_before = _seed_task_values(part_before, target, "before" in trained)[0]
        values_after = _seed_task_values(part_after, target, "after" in trained)[0]
        adjusted = p_adjusted[index] if p_adjusted is not None else None
        comparison = _compare_values(
            values_before, values_after, target, level=level, seed=_offset_seed(seed, 100 + index),
            n_resamples=n_resamples, skipped_a=skipped_before, skipped_b=skipped_after,
            clusters=clusters, cluster_by=cluster_by, pvalue_override=adjusted,
        )
        seeded = _seed_interval(part_before, part_after, target, trained, 1.0 - level) if trained else None
        raw_seed_p = seeded.pvalue if seeded else None
        if seeded is not None and adjusted is not None:
            seeded = dataclasses.replace(seeded, pvalue=adjusted)
        ci, pvalue, verdict, gain = _read_moves(
            comparison, seeded, _seed_counts(part_before, part_after, trained), target_down,
            None, unreplicated, alpha,
        )
        mean_after = comparison.mean_b
        at_ceiling = comparison.mean_a is not None and comparison.mean_a >= CEILING_RATE
        supported = gain in ("gain", "moved_unreplicated")
        weak = (not target_down and mean_after is not None and mean_after < 0.5) or (
            not supported and not at_ceiling
        )
        out.append(SliceDelta(
            by=label, value=value, metric=target, delta=comparison.delta, ci=ci,
            pvalue=pvalue, verdict=verdict, gain_verdict=gain,
            n_paired=comparison.n_paired, n_only_before=comparison.n_only_a,
            n_only_after=comparison.n_only_b, mean_before=comparison.mean_a,
            mean_after=mean_after, low_n=comparison.n_paired < min_tasks, weak=weak,
            note=comparison.note, rule=comparison.rule,
            raw_pvalue=_deciding_p(comparison.pvalue, raw_seed_p) if adjusted is None else None,
        ))
    return out, label


_GATE_RULE = (
    "gatekept: the target did not move, so no other metric or slice may claim a move "
    "(serial gatekeeping keeps the family-wise error at alpha)"
)


def _gatekept(item: Any) -> Any:
    """A secondary comparison's move withdrawn because the target did not move.

    Guards and the proxy are safety checks outside the gate: a regression there stays
    (only a gain is withdrawn), whatever the target did.
    """
    safety = isinstance(item, MetricDelta) and bool({"guard", "proxy"} & set(item.roles))
    moves = ("gain", "moved_unreplicated") if safety else ("gain", "moved_unreplicated", "regression")
    if item.gain_verdict not in moves:
        return item
    changes: dict[str, Any] = dict(verdict="no_difference_detected", gain_verdict="no_difference_detected",
                                   rule=f"{_GATE_RULE} (alone it read: {item.rule})")
    if isinstance(item, SliceDelta):
        at_ceiling = item.mean_before is not None and item.mean_before >= CEILING_RATE
        changes["weak"] = item.weak or not at_ceiling
    return dataclasses.replace(item, **changes)


def _deciding_p(task_p: float | None, seed_p: float | None) -> float | None:
    """The p a move must clear: with training seeds both readings must, so the larger."""
    present = [p for p in (task_p, seed_p) if p is not None]
    return max(present) if present else None


def _adjust(
    family: Sequence[float | None], tested: Sequence[int], alpha: float, correction: str
) -> tuple[list[float | None], float]:
    """(adjusted p per family member, None where untested; the alpha of the intervals).

    Holm (1979) step-down adjusted p controls the family-wise error; its simultaneous
    intervals are Bonferroni's at alpha/m. Benjamini-Hochberg (1995) adjusted p controls the
    false discovery rate; the matching intervals are Benjamini & Yekutieli's (2005)
    false-coverage-rate intervals at R alpha/m, R the number of BH rejections (alpha/m when
    none). ``statsmodels.stats.multitest.multipletests`` computes the adjusted p.
    """
    from statsmodels.stats.multitest import multipletests

    raw = np.array([family[i] for i in tested], dtype=float)
    m = raw.size
    method = "holm" if correction == "holm" else "fdr_bh"
    reject, adjusted, _, _ = multipletests(raw, alpha=alpha, method=method)
    out: list[float | None] = [None] * len(family)
    for position, index in enumerate(tested):
        out[index] = float(adjusted[position])
    if correction == "holm":
        return out, alpha / m
    return out, alpha * max(1, int(reject.sum())) / m


def _tasks_needed(
    rows_before: Sequence[Mapping[str, Any]],
    rows_after: Sequence[Mapping[str, Any]],
    target: str,
    target_delta: MetricDelta,
    alpha: float,
) -> tuple[int | None, str | None]:
    delta = target_delta.delta
    if delta is None or delta == 0.0:
        return None, None
    effect = abs(delta)
    if effect >= 1.0:
        return None, "the delta is the largest a 0-1 metric allows; there is nothing to size"
    try:
        if target == "pass_at_1":
            size = holdout_size(effect, before=rows_before, after=rows_after, alpha=alpha)
        else:
            values_before, _ = _per_task_values(rows_before, target)
            values_after, _ = _per_task_values(rows_after, target)
            shared = sorted(set(values_before) & set(values_after))
            if len(shared) < 2:
                return None, None
            sd = float(np.std([values_after[t] - values_before[t] for t in shared], ddof=1))
            # Equal diffs leave float dust (1e-17) rather than 0; sizing from it says "2 tasks".
            if sd <= 1e-12 * max(1.0, effect):
                return None, f"the paired sd of {target} is 0; no sizing from it"
            size = holdout_size(effect, task_std=sd, alpha=alpha)
    except ConfigError as error:
        return None, f"no sizing for a delta of {effect:.3f}: {error}"
    note = (
        f"{size.n} paired tasks detect a change of {effect:.3f} (the measured delta) with "
        f"power {size.power:g} at alpha {alpha:g} (paired sd {size.sd:.3f}, "
        f"{size.sd_source.replace('_', ' ')}); this comparison has {target_delta.n_paired}"
    )
    if size.note:
        note += f" ({size.note})"
    return size.n, note
