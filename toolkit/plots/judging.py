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
from toolkit.plots._style import PALETTE, new_figure
from toolkit.rows._read import as_row_list
from toolkit.stats.agreement import judge_agreement, wilson

__all__ = ["kl_by_task", "judge_confusion", "rl_band"]

# Fewer than 3 rollouts of a task give no bootstrap interval (the same floor as
# tk.bootstrap_ci); the bar is drawn without one and the label says n.
_MIN_ROWS_FOR_INTERVAL = 3


def kl_by_task(
    rows: Any,
    ref: Any = "ref_logprob",
    *,
    level: float = 0.95,
    n_resamples: int = 2000,
    max_tasks: int = 30,
    seed: int = 0,
    width: float = 5.0,
    height: float | None = None,
) -> Figure:
    """Sampled KL(pi || pi_ref) per generated token for each task (horizontal bars), with a
    percentile-bootstrap interval of the per-task ratio sum(logprob - ref) / sum(n_tokens)
    over that task's rollouts (``scipy.stats.bootstrap``, paired resampling of rows), and
    the pooled KL as a vertical line. Tasks are sorted by KL; at most ``max_tasks`` shown.
    A task with fewer than 3 usable rollouts (or the same ratio on every one) is drawn
    without an interval; each label carries the task's number of rows.

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
        Confidence level of the per-task bootstrap intervals (default 0.95); also shown in
        the title.
    n_resamples : int
        Bootstrap resamples per task. Default 2000.
    max_tasks : int
        Most tasks drawn (default 30): those with the largest KL.
    seed : int
        Seed of the numpy generator behind every bootstrap. Default 0.
    width : float
        Figure width in inches. Default 5.0.
    height : float, optional
        Figure height in inches. Default None: ``max(2.4, 0.28 * tasks drawn + 1.2)``.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    toolkit.errors.LogprobError
        If no row has both its logprob and a reference logprob; the message says how to get
        one.
    """
    from scipy.stats import bootstrap

    source = as_row_list(rows)
    summary = mean_kl(source, ref)
    if summary.mean_kl is None:
        # an empty chart would read as "KL zero everywhere"
        raise LogprobError(f"kl_by_task has nothing to draw: {summary.note}")
    refs, _, _ = _reference_values(source, ref)
    per_task: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for row, ref_value in zip(source, refs):
        logprob, n_tokens = _row_totals(row)
        if logprob is None or ref_value is None or not n_tokens:
            continue
        per_task[task_key(row)].append((logprob - ref_value, n_tokens))
    tasks = sorted(summary.per_task, key=lambda k: summary.per_task[k])[-max_tasks:]
    height = height or max(2.4, 0.28 * len(tasks) + 1.2)
    figure, ax = new_figure(width, height)
    rng = np.random.default_rng(seed)
    for y, task in enumerate(tasks):
        values = per_task[task]
        estimate = summary.per_task[task]
        low = high = None
        if len(values) >= _MIN_ROWS_FOR_INTERVAL:
            diffs = np.array([d for d, _ in values])
            tokens = np.array([t for _, t in values], dtype=float)
            if np.ptp(diffs / tokens) > 0:
                result = bootstrap(
                    (diffs, tokens),
                    lambda d, t, axis=-1: d.sum(axis=axis) / t.sum(axis=axis),
                    paired=True, vectorized=True, confidence_level=level, n_resamples=n_resamples,
                    method="percentile", random_state=rng,
                )
                low, high = result.confidence_interval.low, result.confidence_interval.high
        ax.barh(y, estimate, color=PALETTE["blue"], alpha=0.8, height=0.6)
        if low is not None:
            ax.errorbar(estimate, y, xerr=[[estimate - low], [high - estimate]], color=PALETTE["black"],
                        capsize=2, linewidth=1)
    ax.set_yticks(range(len(tasks)))
    ax.set_yticklabels([f"{t[:28]}  n={len(per_task[t])}" for t in tasks])
    if summary.mean_kl is not None:
        ax.axvline(summary.mean_kl, color=PALETTE["vermillion"], linestyle="--", linewidth=1,
                   label=f"pooled {summary.mean_kl:.4f} ({summary.n_rows} rows)")
        ax.legend(loc="lower right")
    ax.axvline(0, color=PALETTE["grey"], linewidth=0.8)
    ax.set_xlabel("sampled KL per generated token (nats)")
    ax.set_title(f"KL to reference by task ({int(level * 100)}% bootstrap intervals)")
    return figure


def judge_confusion(
    audit: Any,
    *,
    gold: Any = "gold_reward",
    width: float = 6.4,
    height: float = 2.8,
) -> Figure:
    """A judge against gold: the 2x2 confusion counts (left) and agreement, leak rate
    (passes when gold fails) and miss rate (fails when gold passes) with Wilson 95%
    intervals (right). A dotted line marks the trust bar 0.8.

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
    right.axvline(0.8, color=PALETTE["grey"], linestyle=":", linewidth=1, label="trust bar 0.8")
    right.set_yticks(range(len(rates)))
    right.set_yticklabels([f"{label} ({hits}/{total})" for label, hits, total in rates])
    right.set_xlim(0, 1)
    right.invert_yaxis()
    right.set_xlabel("rate (Wilson 95% interval)")
    right.legend(loc="lower right")
    return figure


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
