"""coverage_heatmap (toolkit/plots/coverage.py): one cell per factor pair (issue 22: the map was
mirrored, each pair drawn twice across the diagonal)."""

import re

import toolkit as tk
from toolkit import plots


def test_each_factor_pair_is_one_cell_below_the_diagonal():
    factors = {"tool": ["a", "b", "c"], "stance": ["x", "y"], "history": ["fresh", "returning"], "tier": [1, 2, 3]}
    rows = tk.covering_array(factors).to_dicts()[:4]
    report = tk.coverage(rows, factors)
    ax = plots.coverage_heatmap(report).axes[0]
    names = list(factors)
    assert [t.get_text() for t in ax.get_xticklabels()] == names[:-1]
    assert [t.get_text() for t in ax.get_yticklabels()] == names[1:]
    cells = {(round(t.get_position()[0]), round(t.get_position()[1])): t.get_text()
             for t in ax.texts if re.fullmatch(r"\d+/\d+", t.get_text())}
    # reference: the report's own per-pair counts, one cell each, row factor after column factor
    expected = {}
    for entry in report.per_factors:
        first, second = sorted(names.index(n) for n in entry["factors"])
        expected[(first, second - 1)] = f"{entry['covered']}/{entry['planned']}"
    assert cells == expected
    assert len(cells) == len(names) * (len(names) - 1) // 2
    assert all(column <= row for column, row in cells)  # nothing above the diagonal
