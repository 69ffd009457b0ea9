"""One style for every figure: readable fonts, a colour-blind-safe palette, vector export.

Figures are built with matplotlib's object API (``Figure`` objects, never ``pyplot``
state), so they can be drawn from any thread and never call ``plt.show()``.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from pathlib import Path

import matplotlib
from matplotlib.figure import Figure

__all__ = ["PALETTE", "paper_rc", "new_figure", "export_figure", "interval_band", "legend_below", "styled",
           "enable_notebook_display"]

# Okabe & Ito (2008), "Color Universal Design": distinguishable under the common forms of
# colour blindness and in greyscale print.
PALETTE = {
    "blue": "#0072B2",
    "orange": "#E69F00",
    "green": "#009E73",
    "vermillion": "#D55E00",
    "sky": "#56B4E9",
    "purple": "#CC79A7",
    "yellow": "#F0E442",
    "black": "#000000",
    "grey": "#7F7F7F",
}
CYCLE = [PALETTE[c] for c in ("blue", "orange", "green", "vermillion", "sky", "purple", "black")]

# 9-10 pt reads at single-column width (3.3 in) in two-column papers; TrueType fonts
# (fonttype 42) keep text editable and searchable in PDF.
paper_rc = {
    "font.size": 9,
    "axes.titlesize": 10,
    # A 10 pt title's descenders hang ~3 pt below its baseline: matplotlib's 6 pt pad leaves
    # ~3 pt of air above the plot, which reads as the title touching the frame; 10 pt leaves ~7.
    "axes.titlepad": 10.0,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.25,
    "axes.prop_cycle": matplotlib.cycler(color=CYCLE),
    "pdf.fonttype": 42,
    "ps.fonttype": 42,
    "svg.fonttype": "none",
    "savefig.bbox": "tight",
    "figure.dpi": 110,
}


@contextlib.contextmanager
def _style() -> Iterator[None]:
    with matplotlib.rc_context(paper_rc):
        yield


def styled(function: Callable[..., Figure]) -> Callable[..., Figure]:
    """Run a figure function under :data:`paper_rc`.

    matplotlib reads many settings when an artist is made, not when the figure is drawn
    (``set_title`` reads the title size and pad, ``legend`` the legend font size), so a
    figure whose axes come from :func:`new_figure` but whose titles and legends are added
    afterwards silently gets matplotlib's defaults (12 pt titles on a 6 pt pad, 10 pt
    legends). Every public figure function is wrapped in this.
    """

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        with _style():
            return function(*args, **kwargs)

    return wrapper


def new_figure(width: float = 5.0, height: float = 3.2, nrows: int = 1, ncols: int = 1, **kwargs):
    """A ``(Figure, axes)`` pair in the toolkit style, created without pyplot.

    Parameters
    ----------
    width, height : float
        Figure size in inches (default 5.0 x 3.2). The figure uses constrained layout.
    nrows, ncols : int
        Grid of axes passed to ``Figure.subplots`` (default 1 x 1).
    **kwargs
        Passed on to ``Figure.subplots`` (``sharex``, ``gridspec_kw``, ...).

    Returns
    -------
    tuple
        ``(figure, axes)``: a matplotlib ``Figure`` and what ``Figure.subplots`` returns (one
        ``Axes`` for a 1 x 1 grid, else an array of them unless ``squeeze=False`` is passed).
    """
    with _style():
        figure = Figure(figsize=(width, height), layout="constrained")
        axes = figure.subplots(nrows, ncols, **kwargs)
    return figure, axes


def interval_band(ax, x, low, high, color, label=None, alpha=0.2):
    """Shade an interval; every estimate the toolkit draws carries one."""
    return ax.fill_between(x, low, high, color=color, alpha=alpha, linewidth=0, label=label)


def legend_below(figure: Figure, *, ncols: int | None = None, **kwargs):
    """The figure's legend under its axes, outside every plot, so it can cover no data.

    Any legend inside the axes covers some input's points (the pooled line over the bottom
    bar, the trust bar over the miss rate): under the axes it never does. Needs the figure's
    constrained layout (``new_figure``), which makes room for it.

    Parameters
    ----------
    figure : matplotlib.figure.Figure
        A figure from :func:`new_figure`; the entries are every labelled artist of its axes.
    ncols : int, optional
        Legend columns. Default None: as many as fit the figure's width (at most 3), judged
        from the longest entry.
    **kwargs
        Passed on to ``Figure.legend``.

    Returns
    -------
    matplotlib.legend.Legend or None
        The legend, or None when no artist carries a label.
    """
    handles, labels = [], []
    for ax in figure.axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    if not labels:
        return None
    if ncols is None:
        # legend text is 8 pt: ~4.6 pt a character, plus ~36 pt of handle and column gap
        longest = max(len(line) for label in labels for line in label.splitlines())
        fit = int(figure.get_figwidth() * 72 // (4.6 * longest + 36))
        ncols = max(1, min(len(labels), fit, 3))
    with _style():
        return figure.legend(handles, labels, loc="outside lower center", ncols=ncols, frameon=False, **kwargs)


def export_figure(figure: Figure, path: str | Path, formats: tuple[str, ...] = ("pdf", "svg", "png")) -> list[Path]:
    """Write ``figure`` as each format next to ``path`` (suffix replaced); return the paths.

    Parameters
    ----------
    figure : matplotlib.figure.Figure
        The figure to write; it is saved under the toolkit style (tight bounding box,
        TrueType fonts).
    path : str or pathlib.Path
        Base path of the files; its suffix, if any, is replaced by each format's. Missing
        parent directories are created.
    formats : tuple of str
        File formats to write, in order (default ``("pdf", "svg", "png")``); any format
        ``Figure.savefig`` knows. PNG is rendered at 300 dpi, the others at matplotlib's
        default (``dpi=None``).

    Returns
    -------
    list of pathlib.Path
        The files written, one per format, in the order of ``formats``.
    """
    base = Path(path)
    written = []
    with _style():
        for fmt in formats:
            target = base.with_suffix("." + fmt)
            target.parent.mkdir(parents=True, exist_ok=True)
            figure.savefig(target, format=fmt, dpi=300 if fmt == "png" else None)
            written.append(target)
    return written


def _figure_png(figure: Figure) -> bytes:
    import io

    buffer = io.BytesIO()
    with _style():
        figure.savefig(buffer, format="png", dpi=figure.dpi)
    return buffer.getvalue()


def enable_notebook_display() -> bool:
    """Let IPython show a bare ``Figure`` (the last expression of a cell) as a PNG.

    Our figures are made without pyplot, so matplotlib's inline backend never registers
    them, and with any other backend (Agg in a headless run) a notebook would print
    ``<Figure size ...>`` instead of the picture. Called on ``import toolkit``; a no-op
    outside IPython. Returns whether a formatter was registered.
    """
    try:
        from IPython import get_ipython
    except ImportError:  # IPython comes with jupyterlab; this guards bare installs
        return False
    shell = get_ipython()
    if shell is None:
        return False
    shell.display_formatter.formatters["image/png"].for_type(Figure, _figure_png)
    return True
