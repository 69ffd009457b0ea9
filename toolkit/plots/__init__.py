"""Figures for papers. Every function returns a matplotlib ``Figure``; none calls ``plt.show()``.

Each figure module's public names are imported by name below; ``__all__`` is written out.
"""

from toolkit.plots._style import PALETTE, enable_notebook_display, export_figure, new_figure
from toolkit.plots.coverage import coverage_curves, coverage_heatmap, design_sizes
from toolkit.plots.faults import attack_figure, pass_rate_vs_fault_rate
from toolkit.plots.judging import judge_confusion, judge_corrected_figure, kl_by_task, rl_band
from toolkit.plots.live import run_progress_figure
from toolkit.plots.statistics import (
    bias_study_figure,
    coverage_study_figure,
    delta_forest,
    pass_at_k_curve,
    power_study_figure,
)
from toolkit.plots.stopping import confidence_sequence_figure
from toolkit.plots.whatif import whatif_figure

__all__ = [
    "PALETTE",
    "enable_notebook_display",
    "export_figure",
    "new_figure",
    "pass_at_k_curve",
    "delta_forest",
    "bias_study_figure",
    "coverage_study_figure",
    "power_study_figure",
    "kl_by_task",
    "judge_confusion",
    "judge_corrected_figure",
    "confidence_sequence_figure",
    "rl_band",
    "whatif_figure",
    "coverage_heatmap",
    "coverage_curves",
    "design_sizes",
    "pass_rate_vs_fault_rate",
    "attack_figure",
    "run_progress_figure",
]

enable_notebook_display()
