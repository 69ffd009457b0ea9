"""kl_by_task and judge_confusion (toolkit/plots/judging.py): the numbers drawn, the names
shown, the subset stated, and nothing hidden under a legend (issue 22)."""

import hashlib

import numpy as np
import pytest
from scipy.stats import t as student_t

import toolkit as tk
from toolkit import plots


def _kl_rows(n_tasks, repeats, seed=0, hashed=True):
    rng = np.random.default_rng(seed)
    rows = []
    for task in range(n_tasks):
        for index in range(repeats):
            tokens = int(rng.integers(5, 60))
            logprob = -float(rng.uniform(0.2, 1.5)) * tokens
            row = {"scenario_id": f"k{task}", "rollout_index": index, "prompt": f"ask k{task}", "logprob": logprob,
                   "n_tokens": tokens, "ref_logprob": logprob - float(rng.gamma(2.0, 0.05)) * tokens}
            if hashed:
                row["scenario_id"] = "sc-" + hashlib.sha256(f"situation {task}".encode()).hexdigest()[:12]
                row["scenario_dimensions"] = {"tool": ("get_booking", "refund_payment", "cancel_booking")[task % 3],
                                              "rule": "Refunds go back to the original payment method only.",
                                              "stance": f"stance{task}"}
            rows.append(row)
    return rows


def _bars(figure):
    """``{tick label: (bar length, (low, high) or None)}`` as drawn."""
    ax = figure.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    lengths = {round(p.get_y() + p.get_height() / 2): p.get_width() for p in ax.patches}
    intervals = {}
    for container in ax.containers:
        if hasattr(container, "has_xerr") and container.has_xerr:
            segment = container.lines[2][0].get_segments()[0]
            intervals[round(segment[0, 1])] = (segment[:, 0].min(), segment[:, 0].max())
    return {label: (lengths[y], intervals.get(y)) for y, label in enumerate(labels)}


def test_interval_at_four_rollouts_is_student_t_on_the_ratio():
    rows = _kl_rows(6, 4)
    bars = _bars(plots.kl_by_task(rows))
    # reference: the delta-method interval of a ratio of means (Cochran, Sampling Techniques,
    # 3rd ed., §6.4) with t(n - 1), computed here from the rows
    for task in range(6):
        own = [r for r in rows if r["scenario_dimensions"]["stance"] == f"stance{task}"]
        d = np.array([r["logprob"] - r["ref_logprob"] for r in own])
        t = np.array([r["n_tokens"] for r in own], dtype=float)
        ratio = d.sum() / t.sum()
        se = np.std((d - ratio * t) / t.mean(), ddof=1) / np.sqrt(len(d))
        half = student_t.ppf(0.975, len(d) - 1) * se
        (length, interval), = [v for label, v in bars.items() if label.endswith(f"stance{task}")]
        assert length == pytest.approx(ratio, abs=1e-6)  # mean_kl rounds to 6 decimals
        assert interval == pytest.approx((ratio - half, ratio + half), abs=1e-6)


def test_title_says_the_method_and_the_rollouts_behind_each_bar():
    few = plots.kl_by_task(_kl_rows(4, 4))
    assert "95% Student t intervals, n=4 rollouts each" in few._suptitle.get_text()
    # from 30 rollouts the rule of tk.stats.mean_interval is the percentile bootstrap
    many = plots.kl_by_task(_kl_rows(3, 30))
    assert "percentile bootstrap intervals, n=30 rollouts each" in many._suptitle.get_text()


def test_tasks_are_named_by_their_situation_not_their_hash():
    figure = plots.kl_by_task(_kl_rows(6, 4))
    labels = [t.get_text() for t in figure.axes[0].get_yticklabels()]
    # the values that tell the tasks apart; the rule (a sentence every task shares) is left out
    expected = {f"{('get_booking', 'refund_payment', 'cancel_booking')[task % 3]} · stance{task}" for task in range(6)}
    assert set(labels) == expected
    assert not any("sc-" in label for label in labels)


def test_a_task_id_or_prompt_names_a_hashed_task_without_situation():
    rows = _kl_rows(3, 4)
    for row in rows:
        del row["scenario_dimensions"]
    for row in rows[:4]:
        row["task_id"] = "refund-flow-17"
    labels = {t.get_text() for t in plots.kl_by_task(rows).axes[0].get_yticklabels()}
    assert "refund-flow-17" in labels
    assert {label for label in labels if label != "refund-flow-17"} <= {"ask k1", "ask k2"}


def test_a_subset_says_how_many_of_how_many_and_shows_the_largest():
    rows = _kl_rows(54, 4)
    figure = plots.kl_by_task(rows, max_tasks=15)
    assert "15 of 54 tasks, largest KL" in figure._suptitle.get_text()
    per_task = tk.mean_kl(rows).per_task
    threshold = sorted(per_task.values())[-15]
    drawn = [length for length, _ in _bars(figure).values()]
    assert len(drawn) == 15 and min(drawn) == pytest.approx(threshold)
    everything = plots.kl_by_task(rows, max_tasks=60)
    assert "54 tasks" in everything._suptitle.get_text() and " of " not in everything._suptitle.get_text()


def test_the_pooled_line_is_named_below_the_bars():
    figure = plots.kl_by_task(_kl_rows(5, 4))
    ax = figure.axes[0]
    assert ax.get_legend() is None and len(figure.legends) == 1
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    legend = figure.legends[0].get_window_extent(canvas.get_renderer())
    assert legend.y1 <= ax.bbox.y0  # under the axes: it can cover no bar
    assert "pooled" in figure.legends[0].get_texts()[0].get_text()


def _judged(tp, fn, fp, tn):
    rows = []
    for gold, judge, count in ((1, 1, tp), (1, 0, fn), (0, 1, fp), (0, 0, tn)):
        rows += [{"scenario_id": f"j{len(rows) + i}", "gold_reward": gold, "reward": judge} for i in range(count)]
    return tk.judge_agreement(rows, gold="gold_reward", judge="reward")


def test_judge_confusion_names_the_trust_bar_without_a_legend_and_draws_rates_at_the_edges_whole():
    # a judge that misses every pass: miss rate 1, bottom right, where the legend used to sit
    figure = plots.judge_confusion(_judged(tp=0, fn=30, fp=0, tn=30))
    right = figure.axes[1]
    assert right.get_legend() is None and not figure.legends
    assert "trust bar 0.8" in right.get_xlabel()
    low, high = right.get_xlim()
    assert low < 0 and high > 1  # markers at rates 0 and 1 are not cut in half by the frame
    estimates = [container.lines[0].get_xdata()[0] for container in right.containers]
    assert estimates == pytest.approx([0.5, 0.0, 1.0])  # agreement, leak, miss
