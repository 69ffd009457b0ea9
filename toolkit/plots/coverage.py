"""Figures for covering arrays: pair-coverage heat map, coverage curves, design sizes.

Each function returns a matplotlib ``Figure`` built with the object API (no pyplot state).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.patches import Rectangle

from toolkit.errors import ConfigError
from toolkit.plots._style import CYCLE, PALETTE, interval_band, legend_below, new_figure, styled
from toolkit.situations import CoverageReport, coverage

__all__ = ["coverage_heatmap", "coverage_curves", "design_sizes"]


@styled
def coverage_heatmap(report_or_rows: Any, factors: Mapping[str, Sequence] | None = None, *,
                     constraints: Any = None, title: str | None = None):
    """Share of each factor pair's value combinations that the rows cover (k x k grid).

    One cell per factor pair, below the diagonal (the pair (a, b) is the pair (b, a)); cells
    read "covered/planned", and a pair with nothing planned is grey.

    Parameters
    ----------
    report_or_rows : CoverageReport, CoveringArray or rows
        A strength-2 :class:`~toolkit.situations.covering.CoverageReport` (drawn as it is), a
        ``CoveringArray``, or rows accepted by :func:`toolkit.coverage` (the map is then
        computed at strength 2).
    factors : mapping or sequence of int, optional
        Passed on to :func:`toolkit.coverage` when ``report_or_rows`` is not a report; ignored
        for a report. Default None: the factors are those of the array, or the keys and values
        seen in the rows.
    constraints : optional
        Forbidden combinations and/or predicates, passed on to :func:`toolkit.coverage` (tuples
        they forbid are not planned). Ignored for a report. Default None.
    title : str, optional
        Axes title. Default None: "pairwise coverage {covered}/{planned} over {n} rows".

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ConfigError
        If a report of strength other than 2 is given.
    """
    report = report_or_rows
    if not isinstance(report, CoverageReport):
        report = coverage(report_or_rows, factors, 2, constraints=constraints)
    if report.strength != 2:
        raise ConfigError(
            f"coverage_heatmap shows factor pairs; the report has strength {report.strength}. "
            "Pass the rows instead (the map is then computed at strength 2)."
        )
    names: list[str] = []
    for entry in report.per_factors:
        for name in entry["factors"]:
            if name not in names:
                names.append(name)
    k = len(names)
    # A pair is one cell: the map of (a, b) equals that of (b, a), so only the lower triangle
    # is drawn (row factor after column factor), k - 1 rows by k - 1 columns, no diagonal.
    size = k - 1
    share = np.full((size, size), np.nan)
    labels: dict[tuple[int, int], str] = {}
    nothing_planned = []
    for entry in report.per_factors:
        first, second = sorted(names.index(n) for n in entry["factors"])
        cell = (second - 1, first)
        labels[cell] = f"{entry['covered']}/{entry['planned']}"
        if entry["planned"]:
            share[cell] = entry["covered"] / entry["planned"]
        else:
            nothing_planned.append(cell)
    side = max(3.2, 0.75 * size + 1.6)
    figure, ax = new_figure(side + 0.8, side)
    # cells above the diagonal are not pairs: transparent, so the triangle stands alone
    cmap = _sequential_cmap().with_extremes(bad=(1.0, 1.0, 1.0, 0.0))
    edges = np.arange(size + 1) - 0.5
    # white cell borders: neighbouring cells of equal share would otherwise merge into a block
    image = ax.pcolormesh(edges, edges, np.ma.masked_invalid(share), vmin=0.0, vmax=1.0, cmap=cmap,
                          edgecolors="white", linewidth=1.0)
    for row, column in nothing_planned:
        ax.add_patch(Rectangle((column - 0.5, row - 0.5), 1, 1, facecolor="#E6E6E6", edgecolor="white", linewidth=1.0))
    ax.set_aspect("equal")
    ax.invert_yaxis()  # the first factor pair at the top left, as a table reads
    ax.grid(False)
    for spine in ax.spines.values():
        spine.set_visible(False)
    # a strength-2 report has at least 2 factors (tk.coverage refuses fewer)
    ax.set_xticks(range(size), names[:size], rotation=35, ha="right", rotation_mode="anchor")
    ax.set_yticks(range(size), names[1:])
    ax.tick_params(length=0)
    for (row, column), text in labels.items():
        dark = not np.isnan(share[row, column]) and share[row, column] > 0.6
        ax.text(column, row, text, ha="center", va="center", fontsize=7, color="white" if dark else "black")
    figure.colorbar(image, ax=ax, label="pairs covered (share; grey: none planned)", shrink=0.8)
    ax.set_title(title or f"pairwise coverage {report.covered}/{report.planned} over {report.n_rows} rows")
    return figure


def _sequential_cmap():
    from matplotlib.colors import LinearSegmentedColormap

    # White -> the palette's blue: one hue, so greyscale print keeps the order.
    return LinearSegmentedColormap.from_list("toolkit_blue", ["#FFFFFF", PALETTE["sky"], PALETTE["blue"]])


@styled
def coverage_curves(*curves, title: str | None = None, log_x: bool = False):
    """Coverage (= chance to trigger a random t-factor bug) against the number of rows.

    Random-design curves draw their 2.5-97.5% band and, dashed, the closed-form expectation;
    their legend entry carries the number of random draws.

    Parameters
    ----------
    *curves : CoverageCurve
        One or more :class:`~toolkit.situations.covering.CoverageCurve` objects (from
        :func:`toolkit.coverage_curve` or :func:`toolkit.random_design_curve`), one line each.
        The y label, and the default title, use the first curve's strength and planned tuples.
    title : str, optional
        Axes title. Default None: "chance to trigger a random {t}-factor bug ({planned} tuples)".
    log_x : bool
        Draw the rows axis on a log scale. Default False.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ConfigError
        If no curve is given.
    """
    if not curves:
        raise ConfigError("coverage_curves needs at least one CoverageCurve")
    figure, ax = new_figure(5.2, 3.3)
    for index, curve in enumerate(curves):
        color = CYCLE[index % len(CYCLE)]
        x = np.asarray(curve.n_rows)
        # a random design's band rests on its number of draws: say it, as every figure says its n
        label = curve.label if curve.repeats is None else f"{curve.label} (n={curve.repeats} draws)"
        ax.plot(x, curve.fraction, color=color, label=label, linewidth=1.6,
                drawstyle="steps-post" if curve.repeats is None else "default")
        if curve.low is not None and curve.high is not None:
            interval_band(ax, x, curve.low, curve.high, color)
        if curve.expected is not None:
            ax.plot(x, curve.expected, color=color, linestyle="--", linewidth=0.9,
                    label=f"{curve.label}: closed form")
    ax.set_ylim(0, 1.02)
    if log_x:
        ax.set_xscale("log")
    strength = curves[0].strength
    ax.set_xlabel("rows run")
    ax.set_ylabel(f"share of {strength}-way tuples covered")
    ax.set_title(title or f"chance to trigger a random {strength}-factor bug ({curves[0].planned} tuples)")
    # below the axes: curves and bands can pass through any corner of the plot
    legend_below(figure)
    return figure


@styled
def design_sizes(table: Sequence[Mapping[str, Any]], *, label_key: str = "config",
                 title: str | None = None):
    """Grouped bars (log scale) of design sizes per configuration.

    Parameters
    ----------
    table : sequence of mapping
        One dict per configuration, e.g. ``{"config": "3^13", "covering array": 15,
        "random (99%)": 64, "exhaustive": 1594323}``. Every key of the first dict other than
        ``label_key`` becomes a bar series (values are numbers; a missing key or None leaves
        that bar out). Each bar is annotated with its value.
    label_key : str
        Key holding each configuration's tick label. Default ``"config"``.
    title : str, optional
        Axes title. Default None: "rows needed to cover every pair".

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ConfigError
        If ``table`` is empty.
    """
    if not table:
        raise ConfigError("design_sizes needs at least one row")
    series = [key for key in table[0] if key != label_key]
    figure, ax = new_figure(max(4.5, 1.1 * len(table) + 2.0), 3.3)
    width = 0.8 / max(1, len(series))
    x = np.arange(len(table))
    for index, key in enumerate(series):
        values = [row.get(key) for row in table]
        heights = [np.nan if v is None else float(v) for v in values]
        bars = ax.bar(x + (index - (len(series) - 1) / 2) * width, heights, width,
                      color=CYCLE[index % len(CYCLE)], label=key)
        for bar, value in zip(bars, values):
            if value is not None:
                ax.annotate(_short(value), (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                            ha="center", va="bottom", fontsize=7)
    ax.set_yscale("log")
    ax.set_xticks(x, [str(row[label_key]) for row in table])
    ax.set_ylabel("rows (log scale)")
    ax.set_title(title or "rows needed to cover every pair")
    # below the axes: inside, it covered the bars of the first configuration
    legend_below(figure)
    ax.grid(axis="x", visible=False)
    return figure


def _short(value: float) -> str:
    value = float(value)
    if value >= 1e6:
        return f"{value:.1e}"
    return f"{value:.0f}"
