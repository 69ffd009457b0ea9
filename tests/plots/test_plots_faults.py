"""pass_rate_vs_fault_rate: one line per agent, points at pass@1 with task-bootstrap intervals;
attack_figure: the points and bars are attack_report's rates and bounds."""

import numpy as np
import pytest
from matplotlib.figure import Figure

import toolkit as tk


def _rows(rewards, prefix):
    return [{"schema_version": "1", "prompt": f"{prefix} task {i}", "steps": [], "final_text": "x", "task_id": f"{prefix}{i}", "reward": r}
            for i, r in enumerate(rewards)]


def test_points_are_pass_at_1_and_intervals_come_from_pass_at():
    runs = {
        "honest": {0.0: _rows([1, 1, 1, 0, 1, 1], "a"), 1.0: _rows([0, 1, 0, 0, 1, 0], "b")},
        "seeded": {0.0: _rows([1, 0, 1, 0, 1, 0], "c"), 0.5: _rows([0, 0, 1, 0, 0, 0], "d")},
    }
    figure = tk.plots.pass_rate_vs_fault_rate(runs, title="t")
    assert isinstance(figure, Figure)
    ax = figure.axes[0]
    containers = ax.containers  # one ErrorbarContainer per agent
    assert len(containers) == 2
    lines = [c.lines[0] for c in containers]
    np.testing.assert_allclose(np.asarray(lines[0].get_ydata(), dtype=float), [5 / 6, 2 / 6])
    np.testing.assert_allclose(np.asarray(lines[1].get_xdata(), dtype=float), [0.0, 0.5], atol=0.02)  # dodged
    labels = ax.get_legend_handles_labels()[1]
    assert labels == ["honest (n=6 tasks)", "seeded (n=6 tasks)"]
    # The drawn error bar spans exactly pass_at's 95% interval (independent call).
    low, high = tk.pass_at(runs["honest"][0.0]).ci95
    segments = containers[0].lines[2][0].get_segments()
    assert segments[0][:, 1].min() == pytest.approx(low) and segments[0][:, 1].max() == pytest.approx(high)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="mapping"):
        tk.plots.pass_rate_vs_fault_rate({})
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        tk.plots.pass_rate_vs_fault_rate({"a": {2.0: _rows([1, 0, 1], "x")}})


def _attack_rows(n_tasks=30, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for task in range(n_tasks):
        base = {"scenario_id": f"t{task}", "prompt": f"p{task}", "steps": [], "final_text": "x"}
        mode = ("prompt_injection", "wrong_data")[task % 2]
        rows.append({**base, "reward": float(rng.random() < 0.8), "faults": []})
        rows.append({**base, "reward": float(rng.random() < 0.4), "faults": [{"mode": mode, "attack": True}],
                     "markers": {"attack_success": float(rng.random() < (0.2 if mode == "wrong_data" else 0.6))}})
    return rows


def test_attack_figure_draws_the_report_rates_and_bounds():
    report = tk.attack_report(_attack_rows())
    figure = tk.plots.attack_figure(report)
    ax = figure.axes[0]
    containers = ax.containers
    assert len(containers) == 3  # clean, then each mode in the report's order
    expected = [(0.0, report.utility_clean, None)] + [
        (rates["attack_success"].estimate, rates["utility"], rates["attack_success"]) for rates in report.by_mode.values()
    ]
    for container, (x, utility, success) in zip(containers, expected):
        line, _, bars = container.lines
        assert float(line.get_xdata()[0]) == pytest.approx(x) and float(line.get_ydata()[0]) == pytest.approx(utility.estimate)
        spans = [segment for collection in bars for segment in collection.get_segments()]
        vertical = [s for s in spans if s[0][0] == pytest.approx(s[1][0])]
        assert sorted(vertical[0][:, 1]) == pytest.approx([utility.low, utility.high])
        horizontal = [s for s in spans if s[0][1] == pytest.approx(s[1][1])]
        if success is None:
            assert not horizontal  # the clean point has no attack-success interval
        else:
            assert sorted(horizontal[0][:, 0]) == pytest.approx([success.low, success.high])
    labels = ax.get_legend_handles_labels()[1]
    assert labels == [f"clean (n={report.utility_clean.n_tasks} tasks)"] + [
        f"{mode} (n={rates['utility'].n_tasks} tasks)" for mode, rates in report.by_mode.items()
    ]
    assert f"{report.difference.estimate:+.2f}" in ax.get_title()
    # a title given replaces the default one
    assert tk.plots.attack_figure(report, title="mine").axes[0].get_title() == "mine"


def test_attack_figure_refuses_what_is_not_a_report():
    with pytest.raises(TypeError, match="attack_report"):
        tk.plots.attack_figure(_attack_rows())
