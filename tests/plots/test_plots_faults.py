"""pass_rate_vs_fault_rate: one line per agent, points at pass@1 with task-bootstrap intervals."""

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
