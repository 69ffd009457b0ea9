"""Figures: they draw what the statistics say, with intervals, and never touch pyplot state."""

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

import toolkit as tk
from toolkit.plots import delta_forest, export_figure, pass_at_k_curve


def _rows(rates, repeats=6, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for task, rate in enumerate(rates):
        for index in range(repeats):
            rows.append({"scenario_id": f"t{task}", "rollout_index": index, "prompt": f"ask {task}",
                         "reward": float(rng.random() < rate)})
    return rows


def test_pass_at_k_curve_draws_both_curves_with_their_values():
    rows = _rows(np.linspace(0.1, 0.9, 12))
    result = tk.pass_at(rows)
    figure = pass_at_k_curve(result)
    assert isinstance(figure, Figure)
    lines = figure.axes[0].get_lines()
    assert len(lines) == 2
    curve = result.curve().to_pandas()
    np.testing.assert_allclose(lines[0].get_ydata(), curve["pass_at_k"])
    np.testing.assert_allclose(lines[1].get_ydata(), curve["pass_pow_k"])
    # pass@1 equals pass^1 at k = 1
    assert lines[0].get_ydata()[0] == pytest.approx(lines[1].get_ydata()[0])
    assert "n=12 tasks" in lines[0].get_label()
    assert figure.axes[0].collections, "interval bands are drawn"
    assert plt.get_fignums() == [], "no pyplot figure was opened"


def test_pass_at_k_curve_compares_runs():
    figure = pass_at_k_curve({"before": _rows([0.3] * 8), "after": _rows([0.7] * 8, seed=1)})
    labels = [line.get_label() for line in figure.axes[0].get_lines()]
    assert any(label.startswith("before") for label in labels)
    assert any(label.startswith("after") for label in labels)


def test_delta_forest_marks_intervals_that_exclude_zero():
    table = pd.DataFrame({
        "metric": ["pass_at_1", "hedging"],
        "delta": [0.12, -0.01],
        "ci_low": [0.05, -0.08],
        "ci_high": [0.19, 0.06],
        "n_paired": [40, 40],
        "lower_is_better": [False, True],
    })
    figure = delta_forest(table)
    ax = figure.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["hedging (lower is better)  n=40", "pass_at_1  n=40"]
    markers = [line for line in ax.get_lines() if line.get_marker() == "o"]
    faces = [line.get_markerfacecolor() for line in markers]
    assert faces[1] == "white" and faces[0] != "white"


def test_delta_forest_rejects_a_table_without_intervals():
    with pytest.raises(ValueError, match="ci_low"):
        delta_forest(pd.DataFrame({"metric": ["x"], "delta": [0.1]}))
    with pytest.raises(TypeError, match="delta_report"):
        delta_forest(42)


def test_export_writes_vector_formats(tmp_path):
    figure = pass_at_k_curve(_rows([0.5] * 5))
    paths = export_figure(figure, tmp_path / "curve", ("pdf", "svg"))
    assert [p.suffix for p in paths] == [".pdf", ".svg"]
    assert paths[0].read_bytes().startswith(b"%PDF")
    assert b"<svg" in paths[1].read_bytes()[:500]


def test_study_figures_draw_the_study_numbers():
    from toolkit.plots import bias_study_figure, coverage_study_figure, power_study_figure

    bias = tk.pass_at_k_bias_study([0.2, 0.5], n_samples=5, n_trials=200)
    line = bias_study_figure(bias).axes[0].get_lines()[0]
    np.testing.assert_allclose(line.get_ydata(), bias.plugin_bias)
    coverage = tk.interval_coverage_study(n_tasks=5, repeats=2, n_trials=20, n_resamples=200)
    bars = coverage_study_figure(coverage).axes[0].patches
    assert [bar.get_height() for bar in bars] == pytest.approx([coverage.task_coverage, coverage.row_coverage])
    power = tk.paired_power_study(n_tasks=(5, 10), effect=0.3, n_trials=20)
    figure = power_study_figure(power, holdout=8)
    assert any("holdout_size: 8" in line.get_label() for line in figure.axes[0].get_lines())


def test_delta_forest_follows_the_report_verdict_not_the_interval_alone():
    # The interval excludes zero but the paired test did not reject: hollow, as the report says.
    table = pd.DataFrame({"metric": ["pass_at_1"], "delta": [0.1], "ci_low": [0.01], "ci_high": [0.2],
                          "verdict": ["no_difference_detected"], "gain_verdict": ["no_difference_detected"]})
    marker = [line for line in delta_forest(table).axes[0].get_lines() if line.get_marker() == "o"][0]
    assert marker.get_markerfacecolor() == "white"


def test_delta_forest_draws_a_real_delta_report():
    before = _rows([0.3] * 12, repeats=4)
    after = _rows([0.8] * 12, repeats=4, seed=5)
    report = tk.delta_report(before, after)
    figure = delta_forest(report)
    labels = [t.get_text() for t in figure.axes[0].get_yticklabels()]
    assert any(label.startswith("pass_at_1") for label in labels)


def test_bare_figures_display_as_png_in_ipython():
    from IPython.core.interactiveshell import InteractiveShell

    from toolkit.plots import enable_notebook_display

    shell = InteractiveShell.instance()
    try:
        assert enable_notebook_display() is True
        figure = pass_at_k_curve(_rows([0.5] * 4))
        data, _ = shell.display_formatter.format(figure)
        assert data["image/png"][:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        InteractiveShell.clear_instance()


def test_delta_forest_draws_the_seed_aware_interval_at_the_report_level():
    rng = np.random.default_rng(7)
    before = [dict(row, lineage={"train_run": 0}) for row in _rows([0.3] * 12, repeats=4)]
    after = [dict(row, lineage={"train_run": seed})
             for seed in range(3) for row in _rows([0.5 + 0.1 * seed] * 12, repeats=4, seed=int(rng.integers(99)))]
    report = tk.delta_report(before, after, train_runs="after", alpha=0.1, by=False)
    target = report["pass_at_1"]
    ax = delta_forest(report).axes[0]
    segment = [line for line in ax.get_lines() if line.get_marker() != "o" and len(line.get_xdata()) == 2
               and line.get_ydata()[0] == line.get_ydata()[1]][0]
    np.testing.assert_allclose(segment.get_xdata(), target.ci)
    assert target.ci != target.task_ci
    assert "90% interval" in ax.get_xlabel()


def test_delta_forest_draws_a_compare_runs_result_at_its_level():
    before = _rows([0.2] * 10, repeats=4)
    after = _rows([0.9] * 10, repeats=4, seed=3)
    comparison = tk.compare_runs(before, after, level=0.8)
    ax = delta_forest(comparison).axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"pass_at_1  n={comparison.n_paired}"]
    marker = [line for line in ax.get_lines() if line.get_marker() == "o"][0]
    assert marker.get_xdata()[0] == pytest.approx(comparison.delta)
    assert "80% interval" in ax.get_xlabel()
