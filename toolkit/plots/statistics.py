"""Figures for the headline statistics: the pass@k / pass^k curve and the delta forest.

Both draw every estimate with its interval and put the number of tasks in the legend, so
a figure lifted into a paper still says how much evidence stands behind each line.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from toolkit.plots._style import PALETTE, interval_band, legend_below, new_figure, styled
from toolkit.stats.passk import pass_at

__all__ = ["pass_at_k_curve", "delta_forest", "bias_study_figure", "coverage_study_figure", "power_study_figure"]


def _as_pass_at(value: Any, seed: int):
    """A ``PassAt`` from rows, or the result itself when one is given."""
    if hasattr(value, "curve") and hasattr(value, "pass_at_1"):
        return value
    return pass_at(value, seed=seed)


@styled
def pass_at_k_curve(
    runs: Any,
    ks: Sequence[int] | None = None,
    *,
    title: str | None = None,
    seed: int = 0,
    width: float = 5.0,
    height: float = 3.8,
) -> Figure:
    """pass@k (solid) and pass^k (dashed) against k, each with its bootstrap band.

    The band is the 95% percentile bootstrap over tasks that :meth:`PassAt.curve` returns;
    the legend carries the number of tasks behind each run. At k = 1 both curves equal
    pass@1.

    Parameters
    ----------
    runs : rows, PassAt or mapping
        Rows, a :class:`~toolkit.stats.PassAt`, or a mapping ``label -> rows or PassAt`` to
        draw several runs (before/after) on one axis. Rows are scored with ``tk.pass_at``.
    ks : sequence of int, optional
        The k values drawn, passed to :meth:`PassAt.curve`. Default None: 1 .. the smallest
        size among tasks with at least 2 graded rows.
    title : str, optional
        Axes title. Default None: "pass@k and pass^k, 95% intervals over tasks" (each interval by
        tk.pass_at's rule: Wilson over tasks for 0/1 values, Student t below 30 tasks, else the
        bootstrap).
    seed : int
        Bootstrap seed used when rows are given (``tk.pass_at(rows, seed=seed)``); a given
        ``PassAt`` keeps its own. Default 0.
    width, height : float
        Figure size in inches. Default 5.0 x 3.8.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        If ``runs`` is an empty mapping.
    """
    if isinstance(runs, Mapping):
        items = list(runs.items())
    else:
        items = [(None, runs)]
    if not items:
        raise ValueError("runs is empty; give rows, a PassAt, or a mapping label -> rows")
    figure, ax = new_figure(width, height)
    colors = [PALETTE["blue"], PALETTE["vermillion"], PALETTE["green"], PALETTE["orange"], PALETTE["purple"]]
    all_ks: list[int] = []
    for index, (label, value) in enumerate(items):
        result = _as_pass_at(value, seed)
        curve = result.curve(ks)
        frame = curve.to_pandas()
        if frame.empty:
            continue
        color = colors[index % len(colors)]
        k_values = frame["k"].to_numpy()
        all_ks.extend(int(k) for k in k_values)
        name = f"{label}: " if label else ""
        tasks = f"n={result.n_groups} tasks"
        for column, style, word in (("pass_at_k", "-", "pass@k"), ("pass_pow_k", "--", "pass^k")):
            ax.plot(k_values, frame[column], style, marker="o", markersize=3.5, color=color,
                    label=f"{name}{word} ({tasks})")
            low = frame[f"{column}_low"].to_numpy(dtype=float)
            high = frame[f"{column}_high"].to_numpy(dtype=float)
            if np.isfinite(low).any():
                interval_band(ax, k_values, low, high, color, alpha=0.15)
    if not all_ks:
        ax.text(0.5, 0.5, "no graded groups to draw", ha="center", va="center", transform=ax.transAxes)
    else:
        ax.set_xticks(sorted(set(all_ks)))
    ax.set_xlabel("k (rollouts per task)")
    ax.set_ylabel("probability")
    ax.set_ylim(-0.02, 1.02)
    # Below the axes: inside, the legend hides the curves it names.
    legend_below(figure, ncols=2)
    ax.set_title(title or "pass@k and pass^k, 95% intervals over tasks")
    return figure


_FOREST_COLUMNS = ("metric", "delta", "ci_low", "ci_high")


def _forest_frame(report: Any):
    import pandas as pd

    if isinstance(report, pd.DataFrame):
        frame = report
    elif hasattr(report, "to_pandas"):
        frame = report.to_pandas()
    elif all(hasattr(report, name) for name in ("metric", "delta", "ci", "verdict", "n_paired")):
        # A compare_runs Comparison: one line.
        low, high = report.ci if report.ci is not None else (None, None)
        frame = pd.DataFrame([{
            "metric": report.metric, "delta": report.delta, "ci_low": low, "ci_high": high,
            "verdict": report.verdict, "n_paired": report.n_paired,
        }])
    else:
        raise TypeError(
            f"report is a {type(report).__name__}; expected a delta_report / compare_runs result "
            "or a DataFrame with columns metric, delta, ci_low, ci_high"
        )
    missing = [c for c in _FOREST_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"report table lacks column(s) {', '.join(missing)}; has {', '.join(map(str, frame.columns))}")
    return frame


# Verdicts of compare_runs / delta_report that mean "a difference was detected": the
# interval excludes zero AND the paired test rejects at alpha. The figure must say what the
# report says, so it reads the verdict rather than re-deciding from the interval alone.
_DETECTED = {"gain", "regression", "b_better", "a_better"}


def _detected(row: Any, excludes_zero: bool) -> bool:
    for column in ("gain_verdict", "verdict"):
        value = row.get(column)
        if isinstance(value, str) and value:
            return value in _DETECTED
    return excludes_zero


@styled
def delta_forest(report: Any, *, title: str | None = None, width: float = 5.5) -> Figure:
    """One line per metric (and slice): the paired before→after delta with its interval.

    A vertical line marks zero. A line is solid when the report detected a difference
    (its verdict: interval excluding zero and sign-flip p under alpha), hollow otherwise;
    a table without verdicts falls back to "interval excludes zero". Lower-is-better metrics
    are drawn as measured (a fall is good) and flagged "(lower is better)" in the label, so
    the axis never silently flips. Each label carries the number of paired tasks.

    Parameters
    ----------
    report : DeltaReport, Comparison or DataFrame
        A ``tk.delta_report`` result (anything with ``to_pandas()``), a ``tk.compare_runs``
        ``Comparison`` (one line), or a DataFrame with columns ``metric``, ``delta``,
        ``ci_low`` and ``ci_high`` (optional: ``verdict`` / ``gain_verdict``, ``slice``,
        ``n_paired``, ``lower_is_better`` / ``direction``). The x label states the interval
        level: the report's ``level``, else ``1 - alpha``, else 95% for a bare table.
    title : str, optional
        Axes title. Default None: "Paired change per metric".
    width : float
        Figure width in inches (default 5.5); the height grows with the number of lines.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    TypeError
        If ``report`` is none of the accepted kinds.
    ValueError
        If the table lacks one of ``metric``, ``delta``, ``ci_low``, ``ci_high``.
    """
    frame = _forest_frame(report).reset_index(drop=True)
    n = len(frame)
    figure, ax = new_figure(width, max(1.6, 0.45 * n + 1.0))
    if n == 0:
        ax.text(0.5, 0.5, "no metrics to draw", ha="center", va="center", transform=ax.transAxes)
        return figure
    labels = []
    for position, row in frame.iterrows():
        y = n - 1 - position
        delta = row["delta"]
        low, high = row.get("ci_low"), row.get("ci_high")
        has_ci = low is not None and high is not None and not (
            isinstance(low, float) and math.isnan(low)
        ) and not (isinstance(high, float) and math.isnan(high))
        excludes_zero = has_ci and (low > 0 or high < 0)
        detected = _detected(row, excludes_zero)
        color = PALETTE["blue"] if detected else PALETTE["grey"]
        if has_ci:
            ax.plot([low, high], [y, y], color=color, linewidth=2)
        if delta is not None and not (isinstance(delta, float) and math.isnan(delta)):
            ax.plot([delta], [y], "o", color=color, markerfacecolor=color if detected else "white",
                    markersize=6, zorder=3)
        label = str(row["metric"])
        slice_name = row.get("slice") if "slice" in frame.columns else None
        if slice_name is not None and not (isinstance(slice_name, float) and math.isnan(slice_name)):
            label += f" [{slice_name}]"
        lower_is_better = bool(row.get("lower_is_better", False)) or row.get("direction") == "lower_is_better"
        if lower_is_better:
            label += " (lower is better)"
        if "n_paired" in frame.columns and row.get("n_paired") is not None:
            label += f"  n={int(row['n_paired'])}"
        if not has_ci:
            label += "  (no interval)"
        labels.append(label)
    ax.axvline(0.0, color=PALETTE["black"], linewidth=0.8)
    ax.set_yticks(range(n))
    ax.set_yticklabels(list(reversed(labels)))
    # A DeltaReport's intervals are at 1 - alpha, a Comparison's at its level; a bare table
    # is assumed to be at 95%.
    alpha, level = getattr(report, "alpha", None), getattr(report, "level", None)
    if not isinstance(level, float):
        level = 1.0 - alpha if isinstance(alpha, float) else 0.95
    ax.set_xlabel(f"after − before, {level:.0%} interval (solid: difference detected)")
    ax.grid(axis="y", visible=False)
    ax.set_title(title or "Paired change per metric")
    return figure


@styled
def bias_study_figure(study: Any, *, width: float = 5.0, height: float = 3.2) -> Figure:
    """Estimated minus true pass@k against k for the plug-in and the unbiased estimator.

    The unbiased line carries a ±1.96 standard-error band of its Monte Carlo mean, so "zero
    bias" is read with its noise.

    Parameters
    ----------
    study : PassAtKBiasStudy
        A :func:`toolkit.pass_at_k_bias_study` result.
    width, height : float
        Figure size in inches. Default 5.0 x 3.2.

    Returns
    -------
    matplotlib.figure.Figure
    """
    frame = study.to_pandas()
    figure, ax = new_figure(width, height)
    ks = frame["k"].to_numpy()
    ax.plot(ks, frame["plugin_bias"], "-o", markersize=3.5, color=PALETTE["vermillion"],
            label="plug-in 1-(1-c/n)^k")
    ax.plot(ks, frame["unbiased_bias"], "-o", markersize=3.5, color=PALETTE["blue"],
            label="unbiased 1-C(n-c,k)/C(n,k)")
    error = 1.96 * np.asarray(study.unbiased_bias_standard_error)
    interval_band(ax, ks, frame["unbiased_bias"] - error, frame["unbiased_bias"] + error, PALETTE["blue"])
    ax.axhline(0.0, color=PALETTE["black"], linewidth=0.8)
    ax.set_xlabel("k")
    ax.set_ylabel("estimate − true pass@k")
    ax.set_title(f"Bias over {study.n_trials} trials ({study.n_tasks} tasks, n={study.n_samples} each)")
    # below the axes: the plug-in line runs through every corner as k grows
    legend_below(figure)
    return figure


@styled
def coverage_study_figure(study: Any, *, width: float = 4.2, height: float = 3.0) -> Figure:
    """Observed coverage of task- and row-resampled intervals, with Wilson intervals.

    A dashed line marks the nominal level.

    Parameters
    ----------
    study : IntervalCoverageStudy
        A :func:`toolkit.interval_coverage_study` result (its task and row coverages, their
        ``ci95`` intervals and ``level`` are drawn).
    width, height : float
        Figure size in inches. Default 4.2 x 3.0.

    Returns
    -------
    matplotlib.figure.Figure
    """
    figure, ax = new_figure(width, height)
    names = ["resample tasks", "resample rows"]
    values = [study.task_coverage, study.row_coverage]
    intervals = [study.task_coverage_ci95, study.row_coverage_ci95]
    colors = [PALETTE["blue"], PALETTE["vermillion"]]
    for position, (value, (low, high), color) in enumerate(zip(values, intervals, colors)):
        ax.bar(position, value, color=color, alpha=0.8, width=0.6)
        ax.errorbar(position, value, yerr=[[value - low], [high - value]], color=PALETTE["black"], capsize=4)
    ax.axhline(study.level, color=PALETTE["black"], linestyle="--", linewidth=0.9, label=f"nominal {study.level:.0%}")
    ax.set_xticks([0, 1])
    ax.set_xticklabels(names)
    ax.set_ylim(max(0.0, min(values) - 0.15), 1.0)
    ax.set_ylabel("share of intervals containing the truth")
    ax.set_title(f"{study.n_trials} trials, {study.n_tasks} tasks x {study.repeats} repeats")
    # below the axes: inside, it covered the row-resampling bar and its interval
    legend_below(figure)
    return figure


@styled
def power_study_figure(study: Any, *, holdout: int | None = None, width: float = 5.0, height: float = 3.2) -> Figure:
    """Simulated power of the paired sign-flip test against the number of tasks.

    A dotted line marks 80% power.

    Parameters
    ----------
    study : PairedPowerStudy
        A :func:`toolkit.paired_power_study` result; its power per number of tasks is drawn
        with its interval band.
    holdout : int, optional
        A number of tasks (e.g. ``tk.holdout_size(effect).n``) drawn as a vertical line, so the
        closed-form sizing can be checked against the simulation. Default None: no line.
    width, height : float
        Figure size in inches. Default 5.0 x 3.2.

    Returns
    -------
    matplotlib.figure.Figure
    """
    frame = study.to_pandas()
    figure, ax = new_figure(width, height)
    ax.plot(frame["n_tasks"], frame["power"], "-o", markersize=3.5, color=PALETTE["blue"],
            label=f"sign-flip test, +{study.effect:.2f} from {study.base_rate:.2f}, {study.repeats} repeats")
    interval_band(ax, frame["n_tasks"], frame["power_low"], frame["power_high"], PALETTE["blue"])
    ax.axhline(0.8, color=PALETTE["grey"], linestyle=":", linewidth=0.9, label="80% power")
    if holdout is not None:
        ax.axvline(holdout, color=PALETTE["vermillion"], linestyle="--", linewidth=0.9,
                   label=f"holdout_size: {holdout} tasks")
    ax.set_xlabel("tasks in the held-out set")
    ax.set_ylabel(f"power at alpha {study.alpha}")
    ax.set_ylim(0, 1.02)
    ax.set_title(f"Power over {study.n_trials} simulated comparisons per size")
    # below the axes: inside, it covered the power band and the holdout line
    legend_below(figure)
    return figure
