"""The what-if verdict figure: per-cohort trace deltas, the median and the mean with their
intervals, the eps band."""

from __future__ import annotations

from toolkit._util.hashing import stable_uniform
from toolkit.plots._style import PALETTE, new_figure, styled

__all__ = ["whatif_figure"]

_CLASS_COLOURS = {"improved": PALETTE["green"], "unchanged": PALETTE["grey"], "regressed": PALETTE["vermillion"]}


@styled
def whatif_figure(verdict, width: float = 5.5, height: float | None = None):
    """One row per cohort: each scored trace's delta (dot, coloured by class), the median
    (black diamond) with its bootstrap CI (bar), the mean (open square, just below) with the
    interval the harm guards read (``tk.stats.mean_interval``; docs/design/whatif.md §12),
    and the ±practical-delta band around 0.

    Both centres are drawn because they can disagree: a few catastrophes leave the median
    at +0.06 while the mean falls to −0.37, and only the mean explains a Don't Ship.

    Jitter is a hash of the trace id, so the same verdict draws the same picture.

    Parameters
    ----------
    verdict : toolkit.whatif.Verdict
        The what-if verdict: its ``cohorts``, ``trace_results``, ``label`` and the policy's
        ``practical_delta_epsilon`` (the band's half-width) are drawn.
    width : float
        Figure width in inches. Default 5.5.
    height : float, optional
        Figure height in inches. Default None: ``1.2 + 0.9 * max(1, number of cohorts)``.

    Returns
    -------
    matplotlib.figure.Figure
    """
    cohorts = list(verdict.cohorts)
    height = height or 1.2 + 0.9 * max(1, len(cohorts))
    figure, ax = new_figure(width, height)
    eps = verdict.policy.practical_delta_epsilon
    ax.axvspan(-eps, eps, color=PALETTE["sky"], alpha=0.18, linewidth=0, label=f"±{eps:g} (no practical change)")
    ax.axvline(0.0, color=PALETTE["black"], linewidth=0.6)
    seen = set()
    for row, cohort in enumerate(cohorts):
        traces = [t for t in verdict.trace_results if t.cohort == cohort.name and t.delta is not None]
        for trace in traces:
            jitter = (stable_uniform("whatif-figure", trace.trace_id) - 0.5) * 0.35
            label = trace.delta_class if trace.delta_class not in seen else None
            seen.add(trace.delta_class)
            ax.scatter([trace.delta], [row + jitter], s=14, color=_CLASS_COLOURS[trace.delta_class], alpha=0.75,
                       linewidths=0, label=label, zorder=3)
        if cohort.median_delta is not None:
            if cohort.ci_computable:
                ax.errorbar([cohort.median_delta], [row], xerr=[[cohort.median_delta - cohort.ci_low], [cohort.ci_high - cohort.median_delta]],
                            fmt="none", color=PALETTE["black"], ecolor=PALETTE["black"], elinewidth=1.6, capsize=4, zorder=4)
            ax.scatter([cohort.median_delta], [row], marker="D", s=36, color=PALETTE["black"], zorder=5,
                       label=f"median ({cohort.ci_level:.0%} CI)" if row == 0 else None)
        if cohort.mean_delta is not None:
            # a quarter row below the median, clear of it when the two centres agree
            at = row + 0.25
            if cohort.mean_ci_low is not None and cohort.mean_ci_high is not None:
                ax.errorbar([cohort.mean_delta], [at], xerr=[[cohort.mean_delta - cohort.mean_ci_low],
                                                             [cohort.mean_ci_high - cohort.mean_delta]],
                            fmt="none", color=PALETTE["black"], ecolor=PALETTE["black"], elinewidth=1.0, capsize=3, zorder=4)
            ax.scatter([cohort.mean_delta], [at], marker="s", s=30, facecolors="white", edgecolors=PALETTE["black"],
                       linewidths=1.2, zorder=5,
                       label=f"mean ({cohort.ci_level:.0%} interval, the harm guards')" if "mean" not in seen else None)
            seen.add("mean")
    ax.set_yticks(range(len(cohorts)))
    ax.set_yticklabels([f"{c.name}\n{c.scored} scored" for c in cohorts])
    ax.set_ylim(-0.6, max(0.6, len(cohorts) - 0.4))
    ax.invert_yaxis()  # failure cohort on top, as in the reports
    ax.set_xlabel("delta = score(replayed) − score(original)")
    ax.set_title(f"What-if verdict: {verdict.label}")
    if cohorts:
        # below the axes: points can sit anywhere in the plot, the legend must not cover them
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.28), ncol=2, frameon=False)
    return figure
