"""The decision: per-trace classes, per-cohort statistics, the trust floor, guards, verdict.

Order of evaluation (docs/design/whatif.md §3-docs/design/whatif.md §4, with the docs/design/whatif.md §11 fixes):

1. Each scored trace is *improved* when ``delta > eps``, *regressed* when ``delta < -eps``,
   else *unchanged* (exactly ±eps is unchanged; a 1e-9 tolerance absorbs float noise from
   ``replayed - original``, so 0.75 - 0.70 is not "improved" at eps 0.05).
2. Per cohort (a trace's replays averaged first, so traces are the unit): counts; median
   delta with a percentile bootstrap CI (``tk.bootstrap_ci``, seeded, B and level from the
   config; computed when ``scored >= 5``, the floor's minimum); the mean delta with its
   interval (``tk.stats.mean_interval``); the paired sign-flip p-value of the deltas
   (``tk.sign_flip_test``; the reference computed no test at all); severe drops, flaky
   replays and the A/A comparison (:func:`summarize_cohort`).
3. The trust floor (:data:`FLOOR`, not configurable): per required cohort at least 5
   selected, 5 replayed, 5 scored, and replayed/selected >= 0.50; every required cohort
   present. Replayed and scored are counted separately (the reference set replayed := scored).
4. Guards by experiment shape. failure_rescue: failure improvement rate >= threshold,
   baseline regression rate <= threshold, failure median > eps (practical delta; compared
   at the 3 decimals the report shows, so a printed "0.050" never passes an eps of 0.05),
   info ``improvement_observed``, CI availability and CI width (``max_ci_width``, enforced
   here; accepted and ignored in the reference) per required cohort. regression_check:
   baseline regression, CI availability, CI width. Required cohorts come from the shape
   (fix of docs/design/whatif.md §11.8). Plus ``cohort_systemic_failure`` when >= 50% of a cohort's selected
   traces failed with one code (registered but never emitted in the reference).
4b. Harm guards (issue 15; :func:`_harm_guards`): each scored cohort's interval on the mean
   delta above ``-eps`` (``harm_not_excluded``), at most ``max_severe_drops`` traces with a
   replay below ``-max_trace_drop`` (``severe_trace_drops``), the failure cohort's interval
   above 0 with sign-flip p < 1 - ci_level (``improvement_not_significant``), and with
   ``aa_check`` the failure cohort above its own A/A replay (``inside_aa_noise``, plus
   ``aa_drift`` when the A/A interval lies beyond +-eps). Zero-variance cohorts and flaky
   replays are flagged. Measured (``benchmarks/bench_whatif.py``, 1,000 draws a cell): a
   change that does nothing Ships 0.019 / 0.029 / 0.018 at 10 / 20 / 50 traces (threshold
   rules alone 0.234 / 0.185 / 0.076); the audit's 45%-wrecked failure cohort 0.000 (alone
   0.116 at 20); a baseline where each trace falls 1 -> 0 with p 0.1 ships 0.122 at 20
   traces (= 0.9^20, no trace fell) and 0.003 at 50 (alone 0.661 / 0.578); replay drift
   with no real effect 0.021 with ``aa_check`` (0.999 without). The decision interval
   covers 0.935 / 0.939 / 0.939 at 10 / 20 / 50 traces, 0.946-0.955 with three replays.
5. Verdict precedence: any floor failure -> Inconclusive; any ``blocks_all`` -> Inconclusive;
   any ``blocks_ship`` -> Don't Ship; else Ship. :func:`decide` is the only function that
   builds a verdict state, and it returns Ship only after the floor passed (tested as a
   property over random cohort results and policies). A cohort below the floor also gets a
   ``floor_failed`` finding (ours, not the reference's) so the report's next steps cover it.

``require_baseline`` (default true) makes the baseline a required cohort of a failure_rescue
run. When false, a missing or below-floor baseline no longer makes the run Inconclusive; the
baseline endpoint still runs on whatever baseline traces were scored (stricter, never
weaker), and the finding ``baseline_unverified`` (degrades_trust) says Ship was reached
without a verified baseline. The reference exposed the flag and read it nowhere.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from toolkit._util.results import Result
from toolkit.stats.resampling import bootstrap_ci, sign_flip_test

__all__ = [
    "FLOOR",
    "TrustFloor",
    "Policy",
    "FloorFailure",
    "Finding",
    "CohortResult",
    "Decision",
    "FINDING_SEVERITY",
    "FIX_SUGGESTIONS",
    "SEVERITY_RANK",
    "classify_delta",
    "summarize_cohort",
    "evaluate_floor",
    "run_guards",
    "decide",
    "make_finding",
]

SHIP, DONT_SHIP, INCONCLUSIVE = "ship", "dont_ship", "inconclusive"
FAILURE, BASELINE = "failure", "baseline"
SEVERITY_RANK = {"blocks_all": 4, "blocks_ship": 3, "degrades_trust": 2, "info": 1}
# Float noise of replayed - original on [0, 1] scores is ~1e-16; 1e-9 is far above it and far
# below any difference a rubric can express.
_TOLERANCE = 1e-9


@dataclasses.dataclass(frozen=True)
class TrustFloor:
    """Structural minimums; no config field reaches them (docs/design/whatif.md §3)."""

    version: str = "toolkit-whatif-floor/1"
    min_selected: int = 5
    min_replayed: int = 5
    min_scored: int = 5
    # Provisional in the reference too: a cohort where fewer than half the traces replay says
    # more about the replay harness than about the change.
    min_replay_validity: float = 0.50


FLOOR = TrustFloor()

FINDING_SEVERITY = {
    "improvement_observed": "info",
    "cache_mode_inferred": "info",
    "selection_truncated": "info",
    "abandoned_calls": "degrades_trust",
    "cache_write_failed": "degrades_trust",
    "stub_scorer_in_use": "degrades_trust",
    "baseline_unverified": "degrades_trust",
    "settings_unused": "info",
    "flaky_replays": "info",
    "zero_variance_cohort": "degrades_trust",
    "aa_drift": "degrades_trust",
    "duplicate_traces_collapsed": "degrades_trust",
    "unrecognised_labels": "degrades_trust",
    "source_lines_skipped": "degrades_trust",
    "source_warnings": "degrades_trust",
    "stub_source_in_use": "degrades_trust",
    "harm_not_excluded": "blocks_ship",
    "improvement_not_significant": "blocks_ship",
    "severe_trace_drops": "blocks_ship",
    "inside_aa_noise": "blocks_ship",
    "stub_not_allowed": "blocks_all",
    "aa_unavailable": "blocks_all",
    "baseline_regression_above_threshold": "blocks_ship",
    "failure_improvement_below_threshold": "blocks_ship",
    "practical_delta_below_threshold": "blocks_ship",
    "ci_too_wide": "blocks_ship",
    "cache_corruption_detected": "blocks_all",
    "cache_lock_unavailable": "blocks_all",
    "ci_unavailable_for_required_cohort": "blocks_all",
    "cohort_systemic_failure": "blocks_all",
    "required_cohort_absent": "blocks_all",
    "floor_failed": "blocks_all",
}

# Every blocking or trust-degrading code has a next step (a test enforces coverage).
FIX_SUGGESTIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "baseline_regression_above_threshold": (
        "The change breaks traces that used to work.",
        ("Read the regressed baseline traces (verdict.traces, class 'regressed') for a shared pattern.",
         "Diff this report against a known-good one: tk.whatif.diff(old, new).",
         "Raise max_baseline_regression_ratio only with a written reason; otherwise iterate on the change."),
    ),
    "failure_improvement_below_threshold": (
        "The change does not rescue enough failures.",
        ("Check that the failure cohort holds the failure mode the change targets (its filter and label).",
         "If the rescue is meant to be partial, lower min_failure_improvement_ratio with a written reason.",
         "Otherwise iterate on the change and rerun."),
    ),
    "practical_delta_below_threshold": (
        "The typical failure-cohort effect is inside the noise band.",
        ("Make the change stronger, or collect more failures to see whether a real effect is hiding.",
         "Lower practical_delta_epsilon only with evidence of the scorer's noise (e.g. an A/A run: an empty change)."),
    ),
    "ci_too_wide": (
        "The confidence interval of the median is wider than max_ci_width.",
        ("Raise the cohort limit so more traces are scored (width shrinks roughly as 1/sqrt(n)).",
         "Or widen max_ci_width with a written reason."),
    ),
    "cache_corruption_detected": (
        "A score-cache entry is unreadable or was edited.",
        ("Delete the named entry file (or the cache directory) and rerun, or rerun with cache_mode: refresh.",
         "Find the cause (concurrent writers outside the lock, a full disk, a killed process) before trusting the cache."),
    ),
    "cache_lock_unavailable": (
        "Another run holds the score-cache lock.",
        ("Wait for the run named in the lock details to finish, then rerun.",
         "Or point scorer.cache_dir at a separate directory, or use cache_mode: off or read_only (no lock)."),
    ),
    "ci_unavailable_for_required_cohort": (
        "A required cohort has no confidence interval.",
        ("Read the reason: for 'sample_too_small' raise the cohort limit or relax its filter.",
         "There is deliberately no switch to ship without an interval."),
    ),
    "cohort_systemic_failure": (
        "Most of a cohort failed for one reason.",
        ("Read the linked failure records: tool outputs not recorded (tool_cache_miss), timeouts, scorer errors.",
         "Fix the shared cause (runner, tracing of tool outputs, timeouts) and rerun."),
    ),
    "required_cohort_absent": (
        "A cohort the experiment needs has no traces.",
        ("Check the source's labels and the cohort filter: nothing was selected into this cohort.",
         "Collect such traces, or switch experiment_shape to regression_check if only the baseline matters."),
    ),
    "floor_failed": (
        "A required cohort is below the trust floor.",
        ("Raise the cohort limit or relax its filter so at least 5 traces are selected, replayed and scored.",
         "Fix the replay failures listed in the report; the floor cannot be lowered by config."),
    ),
    "abandoned_calls": (
        "Some calls ran past their timeout and were abandoned on background threads.",
        ("Give the runner or scorer its own I/O timeouts shorter than timeouts.*_seconds.",),
    ),
    "cache_write_failed": (
        "Some scores could not be written to the score cache.",
        ("The verdict used the fresh scores; only later reruns lose those cache hits.",
         "Check the free space and permissions of scorer.cache_dir (the first error is in the finding's details)."),
    ),
    "stub_scorer_in_use": (
        "The offline stub scorer measures tool-output grounding only.",
        ("Use scorer.adapter: python with a score_fn that implements your rubric before trusting a verdict.",),
    ),
    "baseline_unverified": (
        "Ship was reached without a baseline cohort that passes the floor.",
        ("Set decision.require_baseline: true and select at least 5 baseline traces.",),
    ),
    "harm_not_excluded": (
        "The interval on the mean change reaches below -epsilon: harm is not ruled out.",
        ("Read the cohort's worst traces (verdict.traces sorted by delta): a few large drops move the mean.",
         "Score more traces (raise the cohort limit) if the interval is wide rather than low.",
         "Iterate on the change; the mean, unlike the median, weighs how far traces fall."),
    ),
    "improvement_not_significant": (
        "The failure cohort's mean change is not distinguishable from no change.",
        ("Score more failures (raise the cohort limit), or replay each trace more than once (target.replays).",
         "Check that the failure cohort holds the failure the change targets."),
    ),
    "severe_trace_drops": (
        "Some traces fell by more than max_trace_drop.",
        ("Read the listed traces: a change that wrecks a few cases can hide behind good averages.",
         "Raise decision.max_severe_drops only with a written reason for accepting them."),
    ),
    "inside_aa_noise": (
        "The change does no better than replaying with no change at all (the A/A run).",
        ("The scorer or the agent is noisy at this size: replay more times (target.replays) or score more traces.",
         "Make the change stronger."),
    ),
    "aa_unavailable": (
        "aa_check was asked for but no trace was scored under the unchanged configuration.",
        ("Read the failure records of the A/A replays (runner errors, cache misses) and fix them.",),
    ),
    "aa_drift": (
        "Replaying with no change already moves the scores.",
        ("The replay harness differs from production (tools, prompt assembly) or the judge drifted since the traces "
         "were scored; compare a few A/A outputs with the originals.",),
    ),
    "zero_variance_cohort": (
        "Every trace of a cohort has the same delta.",
        ("A constant delta usually means the change never reached the runner or the scorer ignores its input; "
         "check both before trusting the verdict.",),
    ),
    "duplicate_traces_collapsed": (
        "The source held duplicate traces; each counted once.",
        ("Deduplicate the export; copies add no evidence and would have inflated the trust floor.",),
    ),
    "unrecognised_labels": (
        "Some traces carry a label that is neither a failure nor a baseline label.",
        ("Fix the labels in the source (or source.label_field); those traces were left out of both cohorts.",),
    ),
    "source_lines_skipped": (
        "A line of the trace file was cut off mid-write and held no trace.",
        ("Re-export the traces (the writer was probably killed); the other traces were read and used.",),
    ),
    "source_warnings": (
        "The reader of the trace source warned while loading the traces.",
        ("Read the warning in the finding: it may name a score chosen among several (inspect_scorer, "
         "source.score_name), traces with no reward (unlabelled, in neither cohort) or an empty file.",
         "Fix the source or the setting it names and run again; the traces were read as the warning says."),
    ),
    "stub_not_allowed": (
        "The stub scorer or source cannot back a verdict.",
        ("Use a real source and scorer.adapter: python (or inspect_ai) with your rubric.",
         "For a demo or a smoke test pass --allow-stub (fork(..., allow_stub=True))."),
    ),
    "stub_source_in_use": (
        "The traces are synthetic (source.adapter: stub).",
        ("Point source at your recorded traces before trusting a verdict.",),
    ),
}


def _fmt(value: float | None) -> str | None:
    return None if value is None else f"{value:.3f}"


@dataclasses.dataclass(frozen=True)
class Policy(Result):
    """The configurable thresholds (the ``decision`` section), plus the experiment shape."""

    experiment_shape: str = "failure_rescue"
    require_baseline: bool = True
    max_baseline_regression_ratio: float = 0.10
    min_failure_improvement_ratio: float = 0.50
    practical_delta_epsilon: float = 0.05
    max_ci_width: float | None = None
    bootstrap_resamples: int = 5000
    ci_level: float = 0.95
    seed: int = 42
    cluster_by: str | None = None
    max_trace_drop: float = 0.5
    max_severe_drops: int = 0
    aa_check: bool = False
    replays: int = 1

    @classmethod
    def from_config(cls, config) -> "Policy":
        decision = config.decision
        return cls(
            experiment_shape=config.experiment_shape, replays=config.target.replays,
            **{f.name: getattr(decision, f.name) for f in dataclasses.fields(cls) if f.name not in ("experiment_shape", "replays")},
        )

    @property
    def required_cohorts(self) -> tuple[str, ...]:
        if self.experiment_shape == "regression_check":
            return (BASELINE,)
        return (FAILURE, BASELINE) if self.require_baseline else (FAILURE,)

    def __str__(self) -> str:
        return (
            f"{self.experiment_shape}: improve >= {self.min_failure_improvement_ratio:.2f}, "
            f"regress <= {self.max_baseline_regression_ratio:.2f}, eps {self.practical_delta_epsilon:g}"
        )


@dataclasses.dataclass(frozen=True)
class FloorFailure(Result):
    cohort: str | None
    rule: str
    observed: Any
    threshold: Any

    def __str__(self) -> str:
        if self.rule == "required_cohort_present":
            # "requires 1, observed absent" reads badly in a CI line; say what happened
            return f"required {self.cohort} cohort is absent: no trace was selected into it"
        where = f"{self.cohort} cohort" if self.cohort else "run"
        return f"{where} below floor: {self.rule} requires {self.threshold}, observed {self.observed}"


@dataclasses.dataclass(frozen=True)
class Finding(Result):
    code: str
    severity: str
    message: str
    details: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    cohort: str | None = None
    failure_ids: tuple[str, ...] = ()
    next_step: str | None = None
    next_steps: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"[{self.severity}] {self.code}: {self.message}"


def make_finding(code: str, message: str, details: Mapping[str, Any] | None = None, cohort: str | None = None,
                 failure_ids: Sequence[str] = ()) -> Finding:
    """A finding with the severity and next steps the registries fix for ``code``."""
    if code not in FINDING_SEVERITY:
        raise KeyError(f"unregistered finding code {code!r}")
    summary, steps = FIX_SUGGESTIONS.get(code, (None, ()))
    return Finding(code, FINDING_SEVERITY[code], message, dict(details or {}), cohort, tuple(failure_ids), summary, tuple(steps))


@dataclasses.dataclass(frozen=True)
class CohortResult(Result):
    name: str
    selected: int
    replayed: int
    scored: int
    improved: int = 0
    unchanged: int = 0
    regressed: int = 0
    median_delta: float | None = None
    mean_delta: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    ci_level: float = 0.95
    ci_computable: bool = False
    ci_unavailable_reason: str | None = None
    ci_meaningful: bool = False
    sign_flip_p: float | None = None
    sign_flip_method: str | None = None
    available: int | None = None  # passed the filter, before the limit
    labelled: int | None = None  # labelled with this cohort in the source
    failure_counts: Mapping[str, int] = dataclasses.field(default_factory=dict)
    failure_ids: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    required: bool = True
    floor_passed: bool | None = None
    floor_failures: tuple[FloorFailure, ...] = ()
    note: str | None = None
    n_clusters: int | None = None
    # the decision interval: the mean delta over traces (each trace's replays averaged)
    mean_ci_low: float | None = None
    mean_ci_high: float | None = None
    mean_ci_method: str | None = None
    worst_delta: float | None = None
    severe_drops: int = 0
    severe_drop_ids: tuple[str, ...] = ()
    zero_variance: bool = False
    replays: int = 1
    flaky: int = 0
    within_trace_sd: float | None = None
    aa_scored: int = 0
    aa_mean_delta: float | None = None
    aa_ci_low: float | None = None
    aa_ci_high: float | None = None
    aa_sd: float | None = None
    vs_aa_mean: float | None = None
    vs_aa_low: float | None = None
    vs_aa_high: float | None = None
    vs_aa_p: float | None = None

    @property
    def ci_width(self) -> float | None:
        if self.ci_low is None or self.ci_high is None:
            return None
        return self.ci_high - self.ci_low

    def __str__(self) -> str:
        ci = f" CI [{_fmt(self.ci_low)}, {_fmt(self.ci_high)}]" if self.ci_computable else f" (CI not computed: {self.ci_unavailable_reason})"
        median = _fmt(self.median_delta) or "n/a"
        mean = ""
        if self.mean_delta is not None:
            bounds = "" if self.mean_ci_low is None else f" [{_fmt(self.mean_ci_low)}, {_fmt(self.mean_ci_high)}]"
            mean = f"; mean Δ {_fmt(self.mean_delta)}{bounds}"
        drops = f"; {self.severe_drops} severe drop(s)" if self.severe_drops else ""
        return (
            f"{self.name}: {self.improved} improved / {self.unchanged} unchanged / {self.regressed} regressed "
            f"of {self.scored} scored ({self.selected} selected, {self.replayed} replayed); median Δ {median}{ci}{mean}{drops}"
        )


def classify_delta(delta: float, epsilon: float) -> str:
    if delta > epsilon + _TOLERANCE:
        return "improved"
    if delta < -epsilon - _TOLERANCE:
        return "regressed"
    return "unchanged"


def _per_trace(values: Sequence[float], trace_ids: Sequence[Any] | None,
               clusters: Sequence[Any] | None) -> tuple[list[Any], dict[Any, list[float]], list[Any] | None]:
    """Group replay deltas by trace: (trace order, deltas by trace, one cluster label a trace)."""
    if trace_ids is None:
        trace_ids = [f"#{i}" for i in range(len(values))]
    if len(trace_ids) != len(values) or (clusters is not None and len(clusters) != len(values)):
        raise ValueError("summarize_cohort: trace_ids and clusters need one entry per delta")
    order: list[Any] = []
    grouped: dict[Any, list[float]] = {}
    label: dict[Any, Any] = {}
    for i, (trace, value) in enumerate(zip(trace_ids, values)):
        if trace not in grouped:
            order.append(trace)
            grouped[trace] = []
            label[trace] = None if clusters is None else clusters[i]
        grouped[trace].append(value)
    return order, grouped, None if clusters is None else [label[t] for t in order]


def _mean_interval(values: Sequence[float], clusters: Sequence[Any] | None, policy: Policy):
    from toolkit.stats import mean_interval

    # clusters that are all singletons are the unclustered case inside mean_interval
    return mean_interval(values, clusters=clusters, level=policy.ci_level,
                         n_resamples=policy.bootstrap_resamples, seed=policy.seed, proportion=True)


def summarize_cohort(name: str, deltas: Sequence[float], selected: int, replayed: int, policy: Policy,
                     failure_counts: Mapping[str, int] | None = None,
                     failure_ids: Mapping[str, Sequence[str]] | None = None,
                     available: int | None = None, labelled: int | None = None,
                     clusters: Sequence[Any] | None = None,
                     trace_ids: Sequence[Any] | None = None,
                     aa_deltas: Mapping[Any, Sequence[float]] | None = None) -> CohortResult:
    """Counts, median and mean with intervals, severe drops, A/A comparison of one cohort.

    Parameters
    ----------
    name : str
        ``"failure"`` or ``"baseline"``.
    deltas : sequence of float
        One ``replayed - original`` per scored replay.
    selected, replayed : int
        Traces selected into the cohort, and traces with at least one replay.
    policy : Policy
        Thresholds, interval level, resamples and seed.
    failure_counts, failure_ids : mapping, optional
        Failure records of the cohort by code.
    available, labelled : int, optional
        Traces that passed the filter, and traces labelled with this cohort.
    clusters : sequence, optional
        One label per delta (``decision.cluster_by``): intervals resample whole clusters and
        sign flips act on cluster sums.
    trace_ids : sequence, optional
        One trace id per delta. With ``target.replays > 1`` a trace has several deltas; they
        are averaged first, so every statistic resamples traces (cluster = trace) and the
        trust floor counts traces, not replays. Default: each delta its own trace.
    aa_deltas : mapping of trace id to deltas, optional
        The A/A run (``decision.aa_check``): deltas of replays under the unchanged
        configuration. The change is compared with it trace by trace.

    Notes
    -----
    The decision interval is on the *mean* delta over traces, by the rule of
    :func:`toolkit.stats.mean_interval` (clustered t with clusters; Wilson when every delta
    is 0 or 1; Student t below 30 traces; percentile bootstrap above). The median and its
    percentile bootstrap interval are kept for the report: the median is robust, which is
    exactly why it cannot be the guard: 11 traces at +0.06 and 9 at -0.9 have median +0.06
    and mean -0.372. A severe drop is a trace with any replay below ``-max_trace_drop``.
    """
    values = [float(d) for d in deltas]
    order, grouped, trace_clusters = _per_trace(values, trace_ids, clusters)
    means = [math.fsum(grouped[t]) / len(grouped[t]) for t in order]
    n_clusters = len(set(trace_clusters)) if trace_clusters is not None else None
    eps = policy.practical_delta_epsilon
    classes = [classify_delta(d, eps) for d in means]
    median = statistics.median(means) if means else None
    mean = math.fsum(means) / len(means) if means else None
    low = high = None
    computable, reason, note = False, None, None
    mean_low = mean_high = mean_method = None
    if len(means) < FLOOR.min_scored:
        reason = "sample_too_small" if means else "no_scored_traces"
    else:
        result = bootstrap_ci(means, statistic="median", level=policy.ci_level, method="percentile",
                              n_resamples=policy.bootstrap_resamples, seed=policy.seed, clusters=trace_clusters)
        low, high = result.confidence_interval.low, result.confidence_interval.high
        if low is None or high is None:
            reason, note = "computation_failed", result.note
        else:
            computable = True
            note = result.note
        interval = _mean_interval(means, trace_clusters, policy)
        mean_low, mean_high, mean_method = interval.low, interval.high, interval.method
        if interval.low is None:
            computable, reason, note = False, "computation_failed", interval.note
    p_value = method = None
    if means:
        test = sign_flip_test(means, seed=policy.seed, clusters=trace_clusters)
        p_value, method = test.pvalue, test.method
    width = None if low is None or high is None else high - low
    meaningful = computable and (policy.max_ci_width is None or width <= policy.max_ci_width + _TOLERANCE)
    severe = [t for t in order if min(grouped[t]) < -policy.max_trace_drop - _TOLERANCE]
    flaky = sum(1 for t in order if len(grouped[t]) > 1 and len({classify_delta(d, eps) for d in grouped[t]}) > 1)
    repeated = [statistics.stdev(grouped[t]) for t in order if len(grouped[t]) > 1]
    aa = _aa_summary(order, means, trace_clusters, aa_deltas, policy) if aa_deltas is not None else {}
    return CohortResult(
        name=name, selected=selected, replayed=replayed, scored=len(means),
        improved=classes.count("improved"), unchanged=classes.count("unchanged"), regressed=classes.count("regressed"),
        median_delta=median, mean_delta=mean, ci_low=low, ci_high=high, ci_level=policy.ci_level,
        ci_computable=computable, ci_unavailable_reason=reason, ci_meaningful=meaningful,
        sign_flip_p=p_value, sign_flip_method=method, available=available, labelled=labelled,
        failure_counts=dict(failure_counts or {}),
        failure_ids={k: tuple(v) for k, v in (failure_ids or {}).items()},
        required=name in policy.required_cohorts, note=note, n_clusters=n_clusters,
        mean_ci_low=mean_low, mean_ci_high=mean_high, mean_ci_method=mean_method,
        worst_delta=min(values) if values else None,
        severe_drops=len(severe), severe_drop_ids=tuple(str(t) for t in severe),
        zero_variance=len(means) >= 2 and max(means) - min(means) <= _TOLERANCE,
        replays=max((len(v) for v in grouped.values()), default=1), flaky=flaky,
        within_trace_sd=math.fsum(repeated) / len(repeated) if repeated else None,
        **aa,
    )


def _aa_summary(order, means, trace_clusters, aa_deltas, policy: Policy) -> dict[str, Any]:
    """The A/A numbers: the unchanged replay's deltas, and the change's deltas against them."""
    own = {t: [float(d) for d in aa_deltas[t]] for t in order if aa_deltas.get(t)}
    if not own:
        return {"aa_scored": 0}
    paired = [i for i, t in enumerate(order) if t in own]
    aa_means = [math.fsum(own[order[i]]) / len(own[order[i]]) for i in paired]
    versus = [means[i] - a for i, a in zip(paired, aa_means)]
    labels = None if trace_clusters is None else [trace_clusters[i] for i in paired]
    summary: dict[str, Any] = {
        "aa_scored": len(paired), "aa_mean_delta": math.fsum(aa_means) / len(aa_means),
        "vs_aa_mean": math.fsum(versus) / len(versus),
        "aa_sd": statistics.stdev(aa_means) if len(aa_means) > 1 else None,
    }
    if len(paired) >= FLOOR.min_scored:
        aa_interval = _mean_interval(aa_means, labels, policy)
        vs_interval = _mean_interval(versus, labels, policy)
        summary.update(aa_ci_low=aa_interval.low, aa_ci_high=aa_interval.high,
                       vs_aa_low=vs_interval.low, vs_aa_high=vs_interval.high,
                       vs_aa_p=sign_flip_test(versus, seed=policy.seed, clusters=labels).pvalue)
    return summary


def evaluate_floor(cohorts: Mapping[str, CohortResult], required: Sequence[str]) -> tuple[bool, list[FloorFailure]]:
    """The trust floor over the required cohorts; (passed, failures in canonical order)."""
    failures: list[FloorFailure] = []
    if not required:
        failures.append(FloorFailure(None, "required_cohorts_nonempty", 0, 1))
    for name in required:
        cohort = cohorts.get(name)
        if cohort is None or cohort.selected == 0:
            failures.append(FloorFailure(name, "required_cohort_present", "absent", 1))
            continue
        if cohort.selected < FLOOR.min_selected:
            failures.append(FloorFailure(name, "min_selected_per_required_cohort", cohort.selected, FLOOR.min_selected))
        if cohort.replayed < FLOOR.min_replayed:
            failures.append(FloorFailure(name, "min_replayed_per_required_cohort", cohort.replayed, FLOOR.min_replayed))
        if cohort.scored < FLOOR.min_scored:
            failures.append(FloorFailure(name, "min_scored_per_required_cohort", cohort.scored, FLOOR.min_scored))
        ratio = cohort.replayed / cohort.selected
        if ratio < FLOOR.min_replay_validity:
            failures.append(FloorFailure(name, "min_replay_validity_ratio_per_required_cohort", f"{ratio:.3f}", f"{FLOOR.min_replay_validity:.3f}"))
    return not failures, failures


def _total(cohort: CohortResult) -> int:
    return cohort.improved + cohort.unchanged + cohort.regressed


def _bounds(low: float | None, high: float | None) -> str:
    return f"[{low:+.3f}, {high:+.3f}]"


def _harm_guards(cohorts: Mapping[str, CohortResult], policy: Policy, failure: CohortResult | None,
                 baseline: CohortResult | None) -> list[Finding]:
    """Guards on the mean interval, the sign-flip p, severe drops and the A/A run (issue 15).

    The threshold rules above count traces; these weigh them. Ship needs, per scored cohort,
    the interval on the mean delta to stay above ``-epsilon`` (non-inferiority at the
    practical delta), no more than ``max_severe_drops`` traces falling by more than
    ``max_trace_drop``, and for the failure cohort a mean interval above 0 with sign-flip
    p < 1 - ci_level (and, with ``aa_check``, above the A/A run's).
    """
    findings: list[Finding] = []
    eps = policy.practical_delta_epsilon
    alpha = 1.0 - policy.ci_level
    level = f"{policy.ci_level:.0%}"
    scored = [c for c in (failure, baseline) if c is not None and c.scored]
    if failure is not None and failure.scored and failure.mean_ci_low is not None:
        p = failure.sign_flip_p
        if failure.mean_ci_low <= _TOLERANCE or p is None or p >= alpha - _TOLERANCE:
            findings.append(make_finding(
                "improvement_not_significant",
                f"failure cohort: mean Δ {failure.mean_delta:+.3f}, {level} CI {_bounds(failure.mean_ci_low, failure.mean_ci_high)}, "
                f"sign-flip p {p:.3g}: Ship needs the lower bound above 0 and p < {alpha:.3g}",
                {"mean_delta": _fmt(failure.mean_delta), "ci_low": _fmt(failure.mean_ci_low),
                 "ci_high": _fmt(failure.mean_ci_high), "pvalue": f"{p:.4g}", "alpha": f"{alpha:.4g}"}, FAILURE))
    for cohort in scored:
        if cohort.mean_ci_low is not None and cohort.mean_ci_low < -eps - _TOLERANCE:
            findings.append(make_finding(
                "harm_not_excluded",
                f"{cohort.name} cohort: mean Δ {cohort.mean_delta:+.3f}, {level} CI {_bounds(cohort.mean_ci_low, cohort.mean_ci_high)} "
                f"reaches below -ε = {-eps:+.3f}: harm beyond the practical delta is not excluded",
                {"cohort": cohort.name, "mean_delta": _fmt(cohort.mean_delta), "ci_low": _fmt(cohort.mean_ci_low),
                 "ci_high": _fmt(cohort.mean_ci_high), "threshold": _fmt(-eps)}, cohort.name))
        if cohort.severe_drops > policy.max_severe_drops:
            shown = ", ".join(cohort.severe_drop_ids[:5]) + (" ..." if cohort.severe_drops > 5 else "")
            findings.append(make_finding(
                "severe_trace_drops",
                f"{cohort.name} cohort: {cohort.severe_drops} of {cohort.scored} traces fell by more than "
                f"{policy.max_trace_drop:.2f} (worst Δ {cohort.worst_delta:+.3f}: {shown}); "
                f"max_severe_drops {policy.max_severe_drops}",
                {"cohort": cohort.name, "count": cohort.severe_drops, "threshold": _fmt(policy.max_trace_drop),
                 "allowed": policy.max_severe_drops, "worst_delta": _fmt(cohort.worst_delta)}, cohort.name,
                cohort.severe_drop_ids))
        if cohort.zero_variance:
            findings.append(make_finding(
                "zero_variance_cohort",
                f"{cohort.name} cohort: all {cohort.scored} traces have Δ {cohort.mean_delta:+.3f}",
                {"cohort": cohort.name, "delta": _fmt(cohort.mean_delta)}, cohort.name))
        if cohort.flaky:
            findings.append(make_finding(
                "flaky_replays",
                f"{cohort.name} cohort: {cohort.flaky} of {cohort.scored} traces changed class between their "
                f"{cohort.replays} replays (mean within-trace sd {cohort.within_trace_sd:.3f})",
                {"cohort": cohort.name, "count": cohort.flaky, "replays": cohort.replays}, cohort.name))
    if policy.aa_check:
        for cohort in scored:
            if cohort.aa_scored < FLOOR.min_scored or cohort.vs_aa_low is None:
                if cohort.required:
                    findings.append(make_finding(
                        "aa_unavailable",
                        f"{cohort.name} cohort: {cohort.aa_scored} trace(s) scored under the unchanged configuration; "
                        f"the A/A comparison needs {FLOOR.min_scored}",
                        {"cohort": cohort.name, "aa_scored": cohort.aa_scored}, cohort.name))
                continue
            if cohort.aa_ci_low is not None and (cohort.aa_ci_low > eps + _TOLERANCE or cohort.aa_ci_high < -eps - _TOLERANCE):
                findings.append(make_finding(
                    "aa_drift",
                    f"{cohort.name} cohort: replaying with no change moved scores by {cohort.aa_mean_delta:+.3f} "
                    f"({level} CI {_bounds(cohort.aa_ci_low, cohort.aa_ci_high)}), beyond ±ε",
                    {"cohort": cohort.name, "aa_mean_delta": _fmt(cohort.aa_mean_delta)}, cohort.name))
            if cohort is failure and cohort.vs_aa_low <= _TOLERANCE:
                findings.append(make_finding(
                    "inside_aa_noise",
                    f"failure cohort: the change beats the unchanged replay by {cohort.vs_aa_mean:+.3f} a trace, "
                    f"{level} CI {_bounds(cohort.vs_aa_low, cohort.vs_aa_high)}, p {cohort.vs_aa_p:.3g}; A/A spread "
                    f"(sd of the unchanged replay's deltas) {cohort.aa_sd:.3f}: the delta is inside the A/A noise",
                    {"vs_aa_mean": _fmt(cohort.vs_aa_mean), "ci_low": _fmt(cohort.vs_aa_low), "ci_high": _fmt(cohort.vs_aa_high),
                     "aa_sd": _fmt(cohort.aa_sd)}, FAILURE))
    return findings


def run_guards(cohorts: Mapping[str, CohortResult], policy: Policy) -> list[Finding]:
    """The guard chain of the policy's experiment shape (module docstring, step 4)."""
    findings: list[Finding] = []
    required = policy.required_cohorts
    eps = policy.practical_delta_epsilon
    failure = cohorts.get(FAILURE) if policy.experiment_shape == "failure_rescue" else None
    baseline = cohorts.get(BASELINE)
    # primary endpoints, in declaration order: failure rescue, then baseline non-regression
    if failure is not None and _total(failure):
        rate = failure.improved / _total(failure)
        if rate < policy.min_failure_improvement_ratio - _TOLERANCE:
            findings.append(make_finding(
                "failure_improvement_below_threshold",
                f"failure cohort: {failure.improved}/{_total(failure)} traces improved "
                f"({rate:.3f} < {policy.min_failure_improvement_ratio:.3f} required)",
                {"observed": _fmt(rate), "threshold": _fmt(policy.min_failure_improvement_ratio)}, FAILURE))
    if baseline is not None and _total(baseline):
        rate = baseline.regressed / _total(baseline)
        if rate > policy.max_baseline_regression_ratio + _TOLERANCE:
            median = _fmt(baseline.median_delta)
            findings.append(make_finding(
                "baseline_regression_above_threshold",
                f"baseline regressed {baseline.regressed}/{_total(baseline)} "
                f"({rate:.3f} > {policy.max_baseline_regression_ratio:.3f} allowed; median Δ {median})",
                {"observed": _fmt(rate), "threshold": _fmt(policy.max_baseline_regression_ratio)}, BASELINE))
    if failure is not None and failure.median_delta is not None:
        shown = round(failure.median_delta, 3)
        if shown <= eps + _TOLERANCE:
            findings.append(make_finding(
                "practical_delta_below_threshold",
                f"failure cohort median Δ {_fmt(failure.median_delta)} is not above the practical delta {eps:.3f}",
                {"median_delta": _fmt(failure.median_delta), "threshold": _fmt(eps)}, FAILURE))
        else:
            findings.append(make_finding(
                "improvement_observed",
                f"failure cohort median Δ {_fmt(failure.median_delta)} is above the practical delta {eps:.3f}",
                {"median_delta": _fmt(failure.median_delta), "threshold": _fmt(eps)}, FAILURE))
    findings.extend(_harm_guards(cohorts, policy, failure, baseline))
    for name in required:
        cohort = cohorts.get(name)
        if cohort is None or cohort.selected == 0:
            continue
        if not cohort.ci_computable:
            findings.append(make_finding(
                "ci_unavailable_for_required_cohort",
                f"{name} cohort: no confidence interval ({cohort.ci_unavailable_reason}; {cohort.scored} scored)",
                {"cohort": name, "reason": cohort.ci_unavailable_reason or "unspecified"}, name,
                [i for ids in cohort.failure_ids.values() for i in ids]))
        elif policy.max_ci_width is not None and not cohort.ci_meaningful:
            findings.append(make_finding(
                "ci_too_wide",
                f"{name} cohort: CI width {cohort.ci_width:.3f} exceeds max_ci_width {policy.max_ci_width:.3f}",
                {"cohort": name, "observed": _fmt(cohort.ci_width), "threshold": _fmt(policy.max_ci_width)}, name))
    for name in required:
        cohort = cohorts.get(name)
        if cohort is None or cohort.selected == 0:
            findings.append(make_finding(
                "required_cohort_absent", f"required {name} cohort has no traces", {"cohort": name}, name))
    for name, cohort in cohorts.items():
        if not cohort.selected:
            continue
        for code, count in sorted(cohort.failure_counts.items(), key=lambda item: (-item[1], item[0])):
            if count / cohort.selected >= 0.5:
                findings.append(make_finding(
                    "cohort_systemic_failure",
                    f"{name} cohort: {count}/{cohort.selected} traces failed with {code}",
                    {"cohort": name, "percent": f"{count / cohort.selected:.3f}", "code": code}, name,
                    cohort.failure_ids.get(code, ())))
                break
    if policy.experiment_shape == "failure_rescue" and not policy.require_baseline:
        _, baseline_floor = evaluate_floor(cohorts, (BASELINE,))
        if baseline_floor:
            findings.append(make_finding(
                "baseline_unverified",
                "require_baseline is false and the baseline cohort is below the trust floor: "
                "regressions on known-good traffic were not verified",
                {"floor_failures": ", ".join(f.rule for f in baseline_floor)}, BASELINE))
    return findings


@dataclasses.dataclass(frozen=True)
class Decision(Result):
    verdict_state: str
    floor_passed: bool
    floor_failures: tuple[FloorFailure, ...]
    findings: tuple[Finding, ...]
    cohorts: tuple[CohortResult, ...]
    required_cohorts: tuple[str, ...]

    @property
    def blocking(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity in ("blocks_all", "blocks_ship"))

    def __str__(self) -> str:
        return f"{self.verdict_state}: floor {'passed' if self.floor_passed else 'failed'}, {len(self.blocking)} blocking finding(s)"


def decide(cohorts: Mapping[str, CohortResult], policy: Policy, run_findings: Sequence[Finding] = (),
           halted_by: Finding | None = None) -> Decision:
    """The one place a verdict state is built (see module docstring, step 5).

    Parameters
    ----------
    cohorts : mapping of str to CohortResult
        The cohort summaries by name (``"failure"``, ``"baseline"``).
    policy : Policy
        Thresholds and experiment shape; they decide the required cohorts and the guards.
    run_findings : sequence of Finding, optional
        Run-level findings (cache mode inferred, settings unused, ...) listed before the
        guard findings; their severities count towards the verdict. Default none.
    halted_by : Finding or None, optional
        A run-level blocks_all finding (cache lock, cache corruption) that stopped the run
        before scoring; the floor is then not evaluated and the verdict is Inconclusive.
        Default None.

    Returns
    -------
    Decision
        The verdict state, the floor result and failures, every finding, and the cohorts
        marked required or not.
    """
    required = policy.required_cohorts
    if halted_by is not None:
        ordered = tuple(dataclasses.replace(c, required=c.name in required) for c in cohorts.values())
        return Decision(INCONCLUSIVE, False, (), (halted_by, *run_findings), ordered, tuple(required))
    floor_passed, floor_failures = evaluate_floor(cohorts, required)
    findings = list(run_findings) + run_guards(cohorts, policy)
    if not floor_passed:
        failing = sorted({f.cohort for f in floor_failures if f.cohort and f.rule != "required_cohort_present"})
        for name in failing:
            rules = [f for f in floor_failures if f.cohort == name]
            findings.append(make_finding(
                "floor_failed", f"{name} cohort below the trust floor: " + "; ".join(
                    f"{f.rule} requires {f.threshold}, observed {f.observed}" for f in rules),
                {"cohort": name, "rules": ", ".join(f.rule for f in rules)}, name))
    severities = {f.severity for f in findings}
    if not floor_passed or "blocks_all" in severities:
        state = INCONCLUSIVE
    elif "blocks_ship" in severities:
        state = DONT_SHIP
    else:
        state = SHIP
    assert state != SHIP or floor_passed  # the invariant, stated where the state is built
    ordered = []
    for name in (FAILURE, BASELINE, *sorted(set(cohorts) - {FAILURE, BASELINE})):
        if name in cohorts:
            own = tuple(f for f in floor_failures if f.cohort == name)
            ordered.append(dataclasses.replace(cohorts[name], floor_passed=not own if name in required else None,
                                               floor_failures=own, required=name in required))
    return Decision(state, floor_passed, tuple(floor_failures), tuple(findings), tuple(ordered), tuple(required))
