"""Figures for judging and KL: the sampled KL per task, and a judge's confusion with intervals.

Both draw each estimate with its interval and say how many rows stand behind it.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from toolkit._util.hashing import stable_uniform
from toolkit._util.keys import task_key
from toolkit.logprobs import LogprobError, _reference_values, _row_totals, mean_kl
from toolkit.plots._labels import task_names
from toolkit.plots._style import PALETTE, legend_below, new_figure, paper_rc, styled
from toolkit.rows._read import as_row_list
from toolkit.stats import judge_agreement, mean_interval, wilson

__all__ = ["kl_by_task", "judge_confusion", "judge_corrected_figure", "rl_band"]

@styled
def kl_by_task(
    rows: Any,
    ref: Any = "ref_logprob",
    *,
    level: float = 0.95,
    n_resamples: int = 2000,
    max_tasks: int = 30,
    seed: int = 0,
    width: float | None = None,
    height: float | None = None,
) -> Figure:
    """Sampled KL(pi || pi_ref) per generated token for each task (horizontal bars), with an
    interval over that task's rollouts, and the pooled KL as a vertical line.

    A task's KL is the ratio sum(logprob - ref) / sum(n_tokens) over its rollouts. Its
    interval follows ``tk.stats.mean_interval``'s rule applied to the ratio's linearised
    values ``R + (d_i - R t_i) / mean(t)`` (the delta method; their mean is R): Student t
    below 30 rollouts, the percentile bootstrap from 30. Measured at 4 rollouts a task (5-60
    tokens each, nominal 0.95; issue 22's audit): Student t covers 0.925 when a rollout's KL
    per token is normal (20,000 simulated tasks) and 0.897 when it is skewed (gamma, shape 2;
    1,000 tasks), where the percentile bootstrap this figure drew before covered 0.79 and 0.78.
    ``benchmarks/bench_calibration.py --only kl_task`` (1,000 tasks a cell, se ~0.009) measures
    0.922 / 0.926 / 0.920 (normal) and 0.887 / 0.905 / 0.924 (gamma) at 4 / 8 / 30 rollouts:
    the interval runs a little narrow at every size (the linearisation plugs in the estimated
    ratio and mean length), so read it as a guide, not a 95% guarantee.
    Few rollouts stay rough, so the title says how many stand behind each bar. A task with
    fewer than 3 rollouts, or the same ratio on every one, is drawn without an interval.

    Tasks are sorted by KL, largest on top; when more than ``max_tasks`` have a KL the title
    says which are shown ("15 of 54 tasks, largest KL"). Each bar is labelled with the
    task's name, not its hash: the task key when it is readable, else the row's ``task_id``,
    else the situation values that differ between the tasks drawn (``scenario_dimensions``,
    "get_booking · exploratory · fresh"), else the prompt, cut to 40 characters. The legend
    sits under the axes, where it covers no bar.

    Parameters
    ----------
    rows : rows
        Rows carrying ``logprob`` and ``n_tokens`` (list of dicts, DataFrame, SimulationData
        or JSONL path), as :func:`toolkit.mean_kl` reads them.
    ref : str or rows
        The field holding the reference's summed logprob of the same completion (default
        ``"ref_logprob"``), or a second row list whose ``logprob`` is the reference's,
        matched row by row as in :func:`toolkit.mean_kl`.
    level : float
        Confidence level of the per-task intervals (default 0.95); also shown in the title.
    n_resamples : int
        Bootstrap resamples for a task with 30 or more rollouts. Default 2000.
    max_tasks : int
        Most tasks drawn (default 30): those with the largest KL.
    seed : int
        Seed of the numpy generator behind every bootstrap. Default 0.
    width : float, optional
        Figure width in inches. Default None: 5.0, wider when the task names are long, so the
        bars keep about 2.5 in.
    height : float, optional
        Figure height in inches. Default None: ``max(2.6, 0.28 * tasks drawn + 1.5)``.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    toolkit.errors.LogprobError
        If no row has both its logprob and a reference logprob; the message says how to get
        one.
    """
    source = as_row_list(rows)
    summary = mean_kl(source, ref)
    if summary.mean_kl is None:
        # an empty chart would read as "KL zero everywhere"
        raise LogprobError(f"kl_by_task has nothing to draw: {summary.note}")
    refs, _, _ = _reference_values(source, ref)
    per_task: dict[str, list[tuple[float, int]]] = defaultdict(list)
    first_row: dict[str, dict] = {}
    for row, ref_value in zip(source, refs):
        logprob, n_tokens = _row_totals(row)
        if logprob is None or ref_value is None or not n_tokens:
            continue
        key = task_key(row)
        per_task[key].append((logprob - ref_value, n_tokens))
        first_row.setdefault(key, row)
    ranked = sorted(summary.per_task, key=lambda k: summary.per_task[k])
    tasks = ranked[-max_tasks:]
    names = task_names({task: first_row.get(task, {}) for task in tasks})
    counts = sorted({len(per_task[t]) for t in tasks})
    # one n for every bar is said once, in the title; differing ones go on each label
    labels = [names[t] if len(counts) == 1 else f"{names[t]}  n={len(per_task[t])}" for t in tasks]
    # 8 pt tick labels take ~0.062 in a character; the bars keep ~2.5 in beside them
    width = width or max(5.0, 2.5 + 0.062 * max(len(label) for label in labels))
    height = height or max(2.6, 0.28 * len(tasks) + 1.5)
    figure, ax = new_figure(width, height)
    rng = np.random.default_rng(seed)
    methods = set()
    for y, task in enumerate(tasks):
        estimate = summary.per_task[task]
        ax.barh(y, estimate, color=PALETTE["blue"], alpha=0.8, height=0.6)
        interval = _ratio_interval(per_task[task], level, n_resamples, rng)
        if interval is not None and interval.low < interval.high:
            methods.add(interval.method)
            ax.errorbar(estimate, y, xerr=[[estimate - interval.low], [interval.high - estimate]],
                        color=PALETTE["black"], capsize=2, linewidth=1)
    ax.set_yticks(range(len(tasks)), labels)
    ax.set_ylim(-0.6, len(tasks) - 0.4)
    ax.axvline(summary.mean_kl, color=PALETTE["vermillion"], linestyle="--", linewidth=1,
               label=f"pooled {summary.mean_kl:.4f} over all {summary.n_rows} rows")
    ax.axvline(0, color=PALETTE["grey"], linewidth=0.8)
    ax.set_xlabel("sampled KL per generated token (nats)")
    shown = f"{len(tasks)} of {len(ranked)} tasks, largest KL" if len(tasks) < len(ranked) else f"{len(tasks)} tasks"
    rollouts = f"n={counts[0]} rollouts each" if len(counts) == 1 else f"n={counts[0]}-{counts[-1]} rollouts a task"
    method = " / ".join(sorted(m.replace("student t", "Student t") for m in methods)) if methods else "no"
    # over the whole figure, not the axes: the long task names push the axes right, and a
    # title centred on them would run off the figure's right edge
    figure.suptitle(f"KL to reference by task: {shown}\n{level * 100:g}% {method} intervals, {rollouts}",
                    fontsize=paper_rc["axes.titlesize"])
    legend_below(figure)
    return figure


def _ratio_interval(values: list[tuple[float, int]], level: float, n_resamples: int, rng):
    """``mean_interval`` on the linearised values of the ratio sum(d) / sum(t), or None."""
    diffs = np.array([d for d, _ in values], dtype=float)
    tokens = np.array([t for _, t in values], dtype=float)
    ratio = diffs.sum() / tokens.sum()
    # the delta method: R + (d_i - R t_i) / mean(t) averages to R, and its spread is the ratio's
    linearised = ratio + (diffs - ratio * tokens) / tokens.mean()
    interval = mean_interval(linearised, level=level, n_resamples=n_resamples, seed=rng, proportion=False)
    return None if interval.low is None else interval


@styled
def judge_confusion(
    audit: Any,
    *,
    gold: Any = "gold_reward",
    width: float = 6.4,
    height: float = 2.8,
) -> Figure:
    """A judge against gold: the 2x2 confusion counts (left) and agreement, leak rate
    (passes when gold fails) and miss rate (fails when gold passes) with Wilson 95%
    intervals (right). A dotted line marks the trust bar 0.8, named in the x label (no legend:
    inside the panel one covers a rate). The rate axis runs from -0.03 to 1.03 so a rate of
    0 or 1 shows its whole marker.

    Parameters
    ----------
    audit : JudgeTrust, JudgeAgreement or rows
        A ``JudgeTrust``, a ``JudgeAgreement`` (anything with ``confusion`` and
        ``agreement``; its confusion counts are drawn), or judged rows (audited with
        ``tk.judge_agreement(rows, gold=gold)``).
    gold : str or rows
        Passed to ``tk.judge_agreement`` when ``audit`` is rows: the gold-label field
        (default ``"gold_reward"``) or a second row collection carrying the labels. Ignored
        when ``audit`` is already an audit result.
    width, height : float
        Figure size in inches. Default 6.4 x 2.8.

    Returns
    -------
    matplotlib.figure.Figure
    """
    if hasattr(audit, "confusion") and hasattr(audit, "agreement"):
        confusion = audit.confusion
    else:
        confusion = judge_agreement(audit, gold=gold).confusion
    tp, fp, fn, tn = (confusion[k] for k in ("tp", "fp", "fn", "tn"))
    n = tp + fp + fn + tn
    figure, (left, right) = new_figure(width, height, 1, 2, gridspec_kw={"width_ratios": [1, 1.4]})
    matrix = np.array([[tp, fn], [fp, tn]])
    left.imshow(matrix, cmap="Blues", vmin=0, vmax=max(1, matrix.max()))
    for (i, j), value in np.ndenumerate(matrix):
        colour = "white" if value > matrix.max() / 2 else "black"
        left.text(j, i, str(value), ha="center", va="center", color=colour, fontsize=10)
    left.set_xticks([0, 1])
    left.set_xticklabels(["judge pass", "judge fail"])
    left.set_yticks([0, 1])
    left.set_yticklabels(["gold pass", "gold fail"])
    left.grid(False)
    left.set_title(f"confusion (n={n})")
    rates = [
        ("agreement", tp + tn, n),
        ("leak: pass | gold fail", fp, fp + tn),
        ("miss: fail | gold pass", fn, fn + tp),
    ]
    for y, (label, hits, total) in enumerate(rates):
        interval = wilson(hits, total)
        if interval.estimate is None:
            right.text(0.02, y, "no rows", va="center", fontsize=8, color=PALETTE["grey"])
            continue
        right.errorbar(interval.estimate, y, xerr=[[interval.estimate - interval.low], [interval.high - interval.estimate]],
                       fmt="o", color=PALETTE["blue"] if y == 0 else PALETTE["vermillion"], capsize=3)
    # Named in the axis label, not a legend: a legend inside the panel covers whichever rate
    # falls in its corner (the miss rate, bottom right, in issue 22), and the line needs no key.
    right.axvline(0.8, color=PALETTE["grey"], linestyle=":", linewidth=1)
    right.set_yticks(range(len(rates)))
    right.set_yticklabels([f"{label} ({hits}/{total})" for label, hits, total in rates])
    # a little past 0 and 1: a rate of exactly 0 or 1 keeps its whole marker, not half of it
    right.set_xlim(-0.03, 1.03)
    right.set_ylim(len(rates) - 0.5, -0.5)  # agreement on top
    right.set_xlabel("rate, Wilson 95% interval\ndotted line: trust bar 0.8")
    right.set_title("rates against gold")
    return figure


@styled
def rl_band(selection: Any, *, width: float = 5.0, height: float = 2.8) -> Figure:
    """Each group's pass rate (one dot per task, jittered vertically by a fixed hash) with the
    band ``select_for_rl`` kept shaded: kept groups in blue, dropped ones coloured by the
    reason they were dropped.

    Parameters
    ----------
    selection : RLSelection
        The result of ``tk.select_for_rl``: its ``group_pass_rates``, ``band``, ``groups``
        (kept) and ``dropped_groups`` (key -> reason) are drawn.
    width, height : float
        Figure size in inches. Default 5.0 x 2.8.

    Returns
    -------
    matplotlib.figure.Figure
    """
    rates = selection.group_pass_rates
    lo, hi = selection.band
    figure, ax = new_figure(width, height)
    ax.axvspan(lo, hi, color=PALETTE["green"], alpha=0.12, linewidth=0, label=f"band {lo}-{hi}")
    reasons = {key: "kept" for key in selection.groups}
    reasons.update({key: why for key, why in selection.dropped_groups.items() if key not in reasons})
    colours = [PALETTE[c] for c in ("blue", "vermillion", "orange", "purple", "sky", "grey", "black", "yellow")]
    order = ["kept"] + sorted({r for r in reasons.values() if r != "kept"})
    for index, reason in enumerate(order):
        keys = [k for k, r in reasons.items() if r == reason and k in rates]
        if not keys:
            continue
        xs = [rates[k] for k in keys]
        ys = [stable_uniform("rl_band", k) for k in keys]
        ax.scatter(xs, ys, s=14, color=colours[index % len(colours)], label=f"{reason} ({len(keys)})")
    ax.set_xlim(-0.03, 1.03)
    ax.set_yticks([])
    ax.set_xlabel("group pass rate")
    ax.set_title(f"GRPO selection: {len(selection.groups)} groups kept of {len(reasons)}")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=7)
    return figure


@styled
def judge_corrected_figure(result: Any, *, truth: float | None = None, width: float = 5.5,
                           height: float = 2.4) -> Figure:
    """The judge-only, gold-only and judge-corrected estimates of one pass@1 (or paired
    delta) with their intervals, one row each, and the truth as a dashed line when known.

    Parameters
    ----------
    result : JudgeCorrected
        What :func:`toolkit.judge_corrected` returned.
    truth : float, optional
        The true value, for simulations (drawn as a dashed line, named in the legend).
    width, height : float
        Figure size in inches. Default 5.5 x 2.4.

    Returns
    -------
    matplotlib.figure.Figure
    """
    estimates = [
        (f"judge only ({result.n_rows} rows)", result.judge_only, PALETTE["vermillion"]),
        (f"gold only ({result.n_labelled} labels)", result.gold_only, PALETTE["grey"]),
        ("judge-corrected (PPI++)", (result.estimate, result.low, result.high), PALETTE["blue"]),
    ]
    figure, ax = new_figure(width, height)
    for y, (label, (point, low, high), colour) in enumerate(estimates):
        if point is None:
            ax.text(0.5, y, "not computed", transform=ax.get_yaxis_transform(), va="center",
                    color=PALETTE["grey"], fontsize=8)
            continue
        if low is None:
            ax.plot([point], [y], "o", color=colour)
        else:
            ax.errorbar(point, y, xerr=[[point - low], [high - point]], fmt="o", color=colour, capsize=3)
    if truth is not None:
        ax.axvline(truth, color=PALETTE["black"], linestyle="--", linewidth=1, label=f"truth {truth:g}")
        legend_below(figure)
    ax.set_yticks(range(len(estimates)))
    ax.set_yticklabels([label for label, _, _ in estimates])
    ax.set_ylim(len(estimates) - 0.5, -0.5)
    what = "paired delta pass@1" if result.paired else "pass@1"
    ax.set_xlabel(f"{what}, {result.level:.0%} interval over {result.n_tasks} tasks")
    ax.set_title(f"{what}: judge, gold, and judge corrected")
    return figure
