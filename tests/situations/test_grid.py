"""The situation grid on a wide tool axis (issue 21 row 13) and its progress bar.

Coverage is checked by brute force (every pair of axis values enumerated with itertools and
looked up in the rows), not with tk.coverage; timing is left to benchmarks/bench_covering.py
(``--only grid``), since a timed unit test on a shared machine cannot be trusted.
"""

import itertools

import numpy as np
import pytest

import toolkit as tk
from toolkit.errors import ConfigError
from toolkit.situations import _covering_core, grid

S = {"type": "string"}
POLICY = "Refunds go back to the original payment method only.\nNever share another customer's data."


def _tools(n):
    return [{"name": f"tool_{i:04d}", "parameters": {"type": "object", "properties": {"booking_id": S}}} for i in range(n)]


def _missing_pairs(dimension_rows, factors):
    """Pairs of (axis, value) of ``factors`` that no row holds (brute force)."""
    held = set()
    for row in dimension_rows:
        for a, b in itertools.combinations(factors, 2):
            held.add((a, row[a], b, row[b]))
    missing = []
    for a, b in itertools.combinations(factors, 2):
        for x, y in itertools.product(factors[a], factors[b]):
            if (a, x, b, y) not in held:
                missing.append((a, x, b, y))
    return missing


def test_grid_of_2000_tools_is_complete():
    # The size of issue 21 row 13. Every tool is a value of the base block, whose rows must
    # hold every pair of axis values; each rule block must hold every value with its rule.
    n = 2000
    g = tk.situation_grid(_tools(n), POLICY, progress=False)
    axes = {a: v for a, v in g.axes.items() if a != "rule" and len(v) >= 2}
    assert len(axes["tool"]) == n + 2  # + "unrelated", "multi_tool"
    base = [s.dimensions for s in g.situations if s.layer == "base"]
    assert {row["tool"] for row in base} == set(axes["tool"])
    assert _missing_pairs(base, axes) == []
    # The tool x stance product is a lower bound on the pairwise rows, and the grid meets it.
    assert len(base) == len(axes["tool"]) * len(axes["stance"])
    for rule in g.rules:
        rows = [s.dimensions for s in g.situations if s.dimensions["rule"] == rule]
        for axis, values in axes.items():
            assert {row[axis] for row in rows} == set(values), (rule, axis)
    assert len({s.id for s in g}) == len(g)
    assert g.coverage["pairs_covered"] == g.coverage["pairs_planned"]


def test_grid_of_many_tools_keeps_constraints():
    # A forbidden pair stays out of every row and every other pair is still covered.
    forbidden = {"stance": "adversarial", "history": "repeat_visit"}
    g = tk.situation_grid(_tools(300), None, constraints=[forbidden], progress=False)
    rows = [s.dimensions for s in g]
    assert not any(all(row[a] == v for a, v in forbidden.items()) for row in rows)
    axes = {a: v for a, v in g.axes.items() if a != "rule" and len(v) >= 2}
    missing = _missing_pairs(rows, axes)
    assert missing == [("stance", "adversarial", "history", "repeat_visit")]


@pytest.mark.parametrize("levels, t", [([600, 10, 3, 8, 5], 2), ([1200, 6, 4], 2), ([10] * 10, 3)])
def test_indexed_choice_gives_the_same_array(monkeypatch, levels, t):
    # The tuple -> rows index (used past _INDEXED_ROWS free rows) must pick exactly what the
    # plain F x S gather picks; the reference is the gather path, forced for every size.
    monkeypatch.setattr(_covering_core, "_INDEXED_ROWS", 1 << 40)
    plain = np.asarray(tk.covering_array(levels, t, seed=3, effort="fast").rows)
    monkeypatch.setattr(_covering_core, "_INDEXED_ROWS", 0)
    indexed = np.asarray(tk.covering_array(levels, t, seed=3, effort="fast").rows)
    assert plain.shape == indexed.shape
    assert (plain == indexed).all()


def test_progress_bar_is_shown_and_silenced(monkeypatch, capsys):
    tools = _tools(3)
    # Default delay: a small grid finishes before the bar would appear.
    tk.situation_grid(tools, POLICY, seed=11)
    assert "situation grid" not in capsys.readouterr().err
    # Without the delay the bar is drawn (tqdm writes to stderr in a terminal) and ends full.
    monkeypatch.setattr(grid, "_PROGRESS_DELAY", 0.0)
    tk.situation_grid(tools, POLICY, seed=12)
    err = capsys.readouterr().err
    assert "situation grid" in err and "100%" in err and "rule 2/2" in err
    tk.situation_grid(tools, POLICY, seed=13, progress=False)
    assert capsys.readouterr().err == ""


def test_progress_must_be_a_bool():
    with pytest.raises(ConfigError, match="progress"):
        tk.situation_grid(_tools(2), progress="yes")
