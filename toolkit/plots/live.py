"""The dashboard's figure: pass@1 / pass@k and mean KL per token against rows landed.

The same function draws the live frames (from the points the dashboard collected while
the run went) and the final figure for a paper (``dashboard.figure()``, or from any saved
rows through :func:`toolkit.run_progress`). Object API only; never ``plt.show()``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure

from toolkit.plots._style import PALETTE, _style, interval_band, new_figure, styled
from toolkit.sim import run_progress

__all__ = ["run_progress_figure"]


def _column(points, name: str) -> np.ndarray:
    return np.array([np.nan if getattr(p, name) is None else getattr(p, name) for p in points], dtype=float)


def _progress_points(progress: Any) -> tuple:
    if hasattr(progress, "points"):
        return tuple(progress.points)
    if isinstance(progress, (list, tuple)) and (not progress or hasattr(progress[0], "n_rows")):
        return tuple(progress)
    return tuple(run_progress(progress).points)


@styled
def run_progress_figure(progress: Any, *, title: str | None = None, width: float = 7.5, height: float = 3.6,
                        dpi: float | None = None, layout: str | None = "constrained",
                        legend: bool = True) -> Figure:
    """Two panels against rows landed: pass@1 and pass@k with 95% bands; mean KL per token.

    Bands are percentile bootstraps over tasks; a panel with nothing to draw says why in its
    middle instead of staying silently empty. The live frames use ``layout=None`` and
    ``legend=False``, because constrained layout doubles the drawing time of a frame and the
    two legends add ~40%.

    Parameters
    ----------
    progress : RunProgress, sequence of ProgressPoint, or rows
        A :class:`toolkit.sim.RunProgress` (its ``points``), a sequence of ``ProgressPoint`` s, or
        rows (recomputed with :func:`toolkit.run_progress`, no reference: KL only when the rows
        carry ``ref_logprob``).
    title : str, optional
        Figure title (``suptitle``) above both panels. Default None: none.
    width, height : float
        Figure size in inches. Default 7.5 x 3.6.
    dpi : float, optional
        Figure resolution, set with ``Figure.set_dpi`` when given. Default None keeps the
        toolkit style's figure dpi.
    layout : {"constrained", None}
        ``"constrained"`` (default) uses matplotlib's constrained layout; None uses fixed
        margins (faster to draw). Any other value raises ``ValueError``.
    legend : bool
        Draw the legends below the panels (default True). False puts the legend's facts
        (which colour is which curve, n) in the panel titles instead.

    Returns
    -------
    matplotlib.figure.Figure
    """
    points = _progress_points(progress)
    if layout == "constrained":
        figure, (left, right) = new_figure(width, height, ncols=2)
    elif layout is None:
        with _style():
            figure = Figure(figsize=(width, height))
            left, right = figure.subplots(1, 2)
        # fixed margins leave room for the legends under the axes
        bottom = 0.33 if legend else 0.15
        # without legends the panel titles take two lines, so the axes start lower
        top = (0.82 if title else 0.89) if legend else (0.76 if title else 0.84)
        figure.subplots_adjust(left=0.08, right=0.985, bottom=bottom, top=top, wspace=0.28)
    else:
        raise ValueError(f"layout must be 'constrained' or None; got {layout!r}")
    if dpi:
        figure.set_dpi(dpi)
    x = np.array([p.n_rows for p in points], dtype=float)
    last = points[-1] if points else None

    drawn = False
    named = []
    for name, color, label in (("pass_at_1", PALETTE["blue"], "pass@1"),
                               ("pass_at_k", PALETTE["orange"], None)):
        y = _column(points, name)
        if not np.isfinite(y).any():
            continue
        drawn = True
        if label is None:
            ks = {p.k for p in points if p.pass_at_k is not None}
            label = f"pass@{ks.pop()}" if len(ks) == 1 else "pass@k"
        n = last.n_tasks if last else 0
        named.append(f"{label} ({'blue' if name == 'pass_at_1' else 'orange'})")
        left.plot(x, y, color=color, linewidth=1.6, label=f"{label} (n={n} tasks)", **_markers(len(points)))
        low, high = _column(points, name + "_low"), _column(points, name + "_high")
        if np.isfinite(low).any():
            interval_band(left, x, low, high, color)
    seq_low, seq_high = _column(points, "sequence_low"), _column(points, "sequence_high")
    if drawn and np.isfinite(seq_low).any():
        # the anytime-valid pass@1 bounds as dashed edges, not a fill: the bootstrap band is
        # the estimate's, these are the ones that may be watched and stopped on
        for edge in (seq_low, seq_high):
            left.plot(x, edge, color=PALETTE["blue"], linestyle="--", linewidth=0.9,
                      label="pass@1 anytime-valid 95%" if edge is seq_low else None)
    if last is not None and last.threshold is not None:
        left.axhline(last.threshold, color=PALETTE["grey"], linestyle=":", linewidth=1.0,
                     label=f"threshold {last.threshold:g}")
        if last.decided:
            left.axvline(last.decided_at_rows, color=PALETTE["vermillion"], linewidth=1.0,
                         label=f"decided {last.decided} at {last.decided_at_rows} rows")
    left.set_ylim(-0.02, 1.02)
    left.set_xlabel("rows landed")
    left.set_ylabel("probability")
    decision = ""
    if last is not None and last.threshold is not None:
        decision = (f"; decided {last.decided} {last.threshold:g}" if last.decided
                    else f"; {last.threshold:g} not decided yet")
    if legend or not drawn:
        left.set_title("pass@1 and pass@k, 95% intervals over tasks" + ("\n" + decision[2:] if decision else ""))
    else:
        # two lines, like the KL panel's: one line of both ran into the neighbour's title
        # at 410 tasks in the dashboard's 600 px frame
        left.set_title(f"{', '.join(named)}\nn={last.n_tasks} tasks{decision}")
    if drawn and legend:
        # below the axes: inside, a legend hides the curves it names
        left.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2, frameon=False)
    elif not drawn:
        reason = (last.note if last and last.note else "waiting for graded rows") if last else "no rows yet"
        left.text(0.5, 0.5, _wrap(reason), ha="center", va="center", transform=left.transAxes, color=PALETTE["grey"])

    kl = _column(points, "mean_kl")
    if np.isfinite(kl).any():
        color = PALETTE["vermillion"]
        right.plot(x, kl, color=color, linewidth=1.6, **_markers(len(points)),
                   label=f"mean KL ({last.kl_rows_text()}, {last.n_kl_tokens} tokens)"
                   + (f"\n{last.n_kl_impossible} rows impossible under the reference" if last.n_kl_impossible else ""))
        low, high = _column(points, "mean_kl_low"), _column(points, "mean_kl_high")
        if np.isfinite(low).any():
            interval_band(right, x, low, high, color)
        right.axhline(0.0, color=PALETTE["grey"], linewidth=0.8)
        if legend:
            right.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)
    else:
        reason = "no KL yet: needs logprobs=True and a reference policy" if last else "no rows yet"
        right.text(0.5, 0.5, _wrap(reason), ha="center", va="center", transform=right.transAxes, color=PALETTE["grey"])
    right.set_xlabel("rows landed")
    right.set_ylabel("nats per token")
    if legend or not np.isfinite(kl).any():
        right.set_title("running mean KL to the reference")
    else:
        impossible = f", {last.n_kl_impossible} impossible" if last.n_kl_impossible else ""
        # a sample is said as such: a reader must not take it for the mean over every row
        right.set_title(f"KL per token to the reference\n{last.kl_rows_text()}{impossible}")
    if x.size:
        for ax in (left, right):
            ax.set_xlim(0, max(x.max(), 1))
    if title:
        figure.suptitle(title)
    return figure


def _wrap(text: str, width: int = 38) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width))


def _markers(n_points: int) -> dict:
    # a line through one or two points is invisible or misleading; mark them
    return {"marker": "o", "markersize": 3} if n_points < 8 else {}
