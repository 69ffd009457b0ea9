"""Statistics over rows: intervals, pass@k, paired tests, judge agreement, summaries.

The names a notebook reader calls are also top-level (``tk.bootstrap_ci``); the rest are
``tk.stats.<name>``. Each module's public names are imported by name below, lower layers
first; ``__all__`` is written out.
"""

from toolkit.stats.resampling import (
    bootstrap_ci,
    BootstrapResult,
    ConfidenceInterval,
    sign_flip_test,
    SignFlipResult,
)
from toolkit.stats.passk import (
    pass_at,
    PassAt,
    PassAtCurve,
    pass_at_k_estimate,
    pass_pow_k_estimate,
    run_config,
)
from toolkit.stats.agreement import wilson, WilsonInterval, judge_agreement, JudgeAgreement
from toolkit.stats.summaries import (
    metric_summary,
    MetricSummary,
    marker_summary,
    MarkerSummary,
    group_signal,
    GroupSignal,
)
from toolkit.stats.power import holdout_size, HoldoutSize, detectable_effect, DetectableEffect
from toolkit.stats.compare import (
    compare_runs,
    Comparison,
    delta_report,
    DeltaReport,
    MetricDelta,
    SliceDelta,
    eval_variance,
    EvalVariance,
    noise_band,
    LOWER_IS_BETTER,
    MIN_PAIRED_TASKS,
)
from toolkit.stats.studies import (
    pass_at_k_bias_study,
    PassAtKBiasStudy,
    interval_coverage_study,
    IntervalCoverageStudy,
    paired_power_study,
    PairedPowerStudy,
)

__all__ = [
    "bootstrap_ci",
    "BootstrapResult",
    "ConfidenceInterval",
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
