"""Statistics over rows: intervals, pass@k, paired tests, judge agreement, summaries.

The names a notebook reader calls are also top-level (``tk.bootstrap_ci``); the rest are
``tk.stats.<name>``. Each module's public names are imported by name below, lower layers
first; ``__all__`` is written out.
"""

from toolkit.stats._intervals import MeanInterval, mean_interval
from toolkit.stats.agreement import JudgeAgreement, WilsonInterval, judge_agreement, wilson
from toolkit.stats.attacks import AttackRate, AttackReport, attack_report
from toolkit.stats.compare import (
    LOWER_IS_BETTER,
    MIN_PAIRED_TASKS,
    Comparison,
    DeltaReport,
    EvalVariance,
    MetricDelta,
    SliceDelta,
    compare_runs,
    delta_report,
    eval_variance,
    noise_band,
)
from toolkit.stats.passk import (
    PassAt,
    PassAtCurve,
    pass_at,
    pass_at_k_estimate,
    pass_pow_k_estimate,
    run_config,
)
from toolkit.stats.power import DetectableEffect, HoldoutSize, detectable_effect, holdout_size
from toolkit.stats.ppi import JudgeCorrected, judge_corrected
from toolkit.stats.resampling import (
    BootstrapResult,
    ClusteredMean,
    ConfidenceInterval,
    SignFlipResult,
    bootstrap_ci,
    clustered_mean,
    sign_flip_test,
)
from toolkit.stats.sequential import ConfidenceSequence, StoppingStudy, confidence_sequence, stopping_study
from toolkit.stats.studies import (
    IntervalCoverageStudy,
    PairedPowerStudy,
    PassAtKBiasStudy,
    interval_coverage_study,
    paired_power_study,
    pass_at_k_bias_study,
)
from toolkit.stats.summaries import (
    GroupSignal,
    MarkerSummary,
    MetricSummary,
    group_signal,
    marker_summary,
    metric_summary,
)

__all__ = [
    "AttackRate",
    "AttackReport",
    "attack_report",
    "bootstrap_ci",
    "BootstrapResult",
    "ConfidenceInterval",
    "clustered_mean",
    "ClusteredMean",
    "mean_interval",
    "MeanInterval",
    "sign_flip_test",
    "SignFlipResult",
    "pass_at",
    "PassAt",
    "PassAtCurve",
    "pass_at_k_estimate",
    "pass_pow_k_estimate",
    "run_config",
    "wilson",
    "WilsonInterval",
    "judge_agreement",
    "JudgeAgreement",
    "judge_corrected",
    "JudgeCorrected",
    "confidence_sequence",
    "ConfidenceSequence",
    "stopping_study",
    "StoppingStudy",
    "metric_summary",
    "MetricSummary",
    "marker_summary",
    "MarkerSummary",
    "group_signal",
    "GroupSignal",
    "holdout_size",
    "HoldoutSize",
    "detectable_effect",
    "DetectableEffect",
    "compare_runs",
    "Comparison",
    "delta_report",
    "DeltaReport",
    "MetricDelta",
    "SliceDelta",
    "eval_variance",
    "EvalVariance",
    "noise_band",
    "LOWER_IS_BETTER",
    "MIN_PAIRED_TASKS",
    "pass_at_k_bias_study",
    "PassAtKBiasStudy",
    "interval_coverage_study",
    "IntervalCoverageStudy",
    "paired_power_study",
    "PairedPowerStudy",
]
