"""The stopping figure: an anytime-valid confidence sequence beside the fixed-n interval."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure

from toolkit.plots._style import PALETTE, interval_band, legend_below, new_figure, styled

__all__ = ["confidence_sequence_figure"]


@styled
def confidence_sequence_figure(sequence: Any, *, threshold: float | None = None, truth: float | None = None,
                               width: float = 6.0, height: float = 3.2) -> Figure:
    """The running mean with its anytime-valid band (blue) and the fixed-n t band (orange)
    against units seen; the threshold as a dotted line and, when the sequence decides, the
    moment it does, marked and named.

    The fixed-n band is what a reader who peeks would stop on; it is drawn to show how much
    narrower, and how much less trustworthy, it is when read repeatedly.

    Parameters
    ----------
    sequence : ConfidenceSequence
        What :func:`toolkit.stats.confidence_sequence` returned.
    threshold : float, optional
        The value a decision is about (drawn dotted; its decision point marked).
    truth : float, optional
        The true mean, for simulations (dashed).
    width, height : float
        Figure size in inches. Default 6.0 x 3.2.

    Returns
    -------
    matplotlib.figure.Figure
    """
    n = len(sequence.low)
    x = np.arange(1, n + 1)
    figure, ax = new_figure(width, height)
    fixed_low = np.array([np.nan if v is None else v for v in sequence.fixed_low], dtype=float)
    fixed_high = np.array([np.nan if v is None else v for v in sequence.fixed_high], dtype=float)
    interval_band(ax, x, fixed_low, fixed_high, PALETTE["orange"], label="fixed-n t interval (valid once, at a planned n)",
                  alpha=0.25)
    interval_band(ax, x, np.array(sequence.low), np.array(sequence.high), PALETTE["blue"],
                  label=f"anytime-valid {sequence.level:.0%} sequence", alpha=0.25)
    ax.plot(x, sequence.means, color=PALETTE["black"], linewidth=1.2, label="running mean")
    title = f"n={n} units"
    if threshold is not None:
        ax.axhline(threshold, color=PALETTE["grey"], linestyle=":", linewidth=1.2, label=f"threshold {threshold:g}")
        at, side = sequence.decided(threshold)
        if at is not None:
            ax.axvline(at, color=PALETTE["vermillion"], linewidth=1.2, label=f"decided {side} at unit {at}")
            title += f"; decided {side} {threshold:g} at unit {at}"
        else:
            title += f"; not decided about {threshold:g}"
    if truth is not None:
        ax.axhline(truth, color=PALETTE["black"], linestyle="--", linewidth=1, label=f"truth {truth:g}")
    ax.set_xlim(1, max(n, 2))
    if n > 200:
        # the bands do their moving in the first tens of units; on a linear axis over
        # thousands they are a sliver at the left edge
        ax.set_xscale("log")
    ax.set_ylim(*sequence.bounds)
    ax.set_xlabel("units seen (tasks, in completion order)" + (", log scale" if n > 200 else ""))
    ax.set_ylabel("mean")
    ax.set_title(title)
    legend_below(figure)
    return figure
