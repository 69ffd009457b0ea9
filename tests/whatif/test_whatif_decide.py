"""Decision rules (docs/design/whatif.md §3-docs/design/whatif.md §5, facts 22-26) and the no-Ship-without-floor property."""

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from toolkit.whatif.decide import (
    FINDING_SEVERITY,
    FIX_SUGGESTIONS,
    FLOOR,
    CohortResult,
    Policy,
    classify_delta,
    decide,
    make_finding,
    summarize_cohort,
)


def cohort(name, deltas, selected=None, replayed=None, policy=Policy()):
    n = len(deltas)
    return summarize_cohort(name, deltas, selected=n if selected is None else selected,
                            replayed=n if replayed is None else replayed, policy=policy)


def run(failure, baseline, policy=Policy()):
    cohorts = {}
    if failure is not None:
        cohorts["failure"] = cohort("failure", failure, policy=policy)
    if baseline is not None:
        cohorts["baseline"] = cohort("baseline", baseline, policy=policy)
    return decide(cohorts, policy)


CLEAN_BASELINE = [0.0] * 20


def test_per_trace_classes_at_the_boundary():  # fact 24
    assert classify_delta(0.05, 0.05) == "unchanged"
    assert classify_delta(0.0501, 0.05) == "improved"
    assert classify_delta(-0.05, 0.05) == "unchanged"
    assert classify_delta(-0.0501, 0.05) == "regressed"
    assert classify_delta(0.55 - 0.5, 0.05) == "unchanged"  # float noise is not an improvement


def test_improvement_ratio_equality_passes():  # fact 22
    equal = run([0.2] * 5 + [0.0] * 5, CLEAN_BASELINE, Policy(practical_delta_epsilon=0.0))
    assert "failure_improvement_below_threshold" not in [f.code for f in equal.findings]
    below = run([0.2] * 4 + [0.0] * 6, CLEAN_BASELINE)
    finding = next(f for f in below.findings if f.code == "failure_improvement_below_threshold")
    assert finding.details["observed"] == "0.400" and below.verdict_state == "dont_ship"


def test_regression_ratio_equality_passes():  # fact 23
    failure = [0.2] * 20
    assert run(failure, [-0.2] * 2 + [0.0] * 18).verdict_state == "ship"
    assert run(failure, [-0.2] * 3 + [0.0] * 17).verdict_state == "dont_ship"


def test_practical_delta_compares_the_shown_median():  # fact 25
    blocked = run([0.05] * 8 + [0.2] * 2, CLEAN_BASELINE)
    assert "practical_delta_below_threshold" in [f.code for f in blocked.findings]
    assert blocked.verdict_state == "dont_ship"
    rounds_down = run([0.0504] * 10, CLEAN_BASELINE, Policy(min_failure_improvement_ratio=0.0))
    assert "practical_delta_below_threshold" in [f.code for f in rounds_down.findings]
    above = run([0.051] * 10, CLEAN_BASELINE)
    codes = [f.code for f in above.findings]
    assert "improvement_observed" in codes and "practical_delta_below_threshold" not in codes


def test_precedence():  # fact 26
    # floor failure + blocks_ship -> Inconclusive
    small = run([0.0] * 4, [-0.3] * 20)
    assert not small.floor_passed and small.verdict_state == "inconclusive"
    assert "baseline_regression_above_threshold" in [f.code for f in small.findings]
    # blocks_all + blocks_ship with the floor passing -> Inconclusive
    cohorts = {"failure": cohort("failure", [0.0] * 10), "baseline": cohort("baseline", [0.0] * 10)}
    lock = make_finding("cache_lock_unavailable", "locked", {"lock_path": "x"}, failure_ids=["failure_001"])
    both = decide(cohorts, Policy(), [lock])
    assert both.floor_passed and both.verdict_state == "inconclusive"


def test_regression_check_ignores_failure_logic():  # fact 27, docs/design/whatif.md §11.8
    policy = Policy(experiment_shape="regression_check")
    clean = decide({"baseline": cohort("baseline", [0.0] * 20, policy=policy)}, policy)
    # all-zero deltas Ship, flagged as zero variance (degrades trust, never blocks)
    assert clean.verdict_state == "ship" and clean.required_cohorts == ("baseline",)
    assert [f.code for f in clean.findings] == ["zero_variance_cohort"]
    # a failure-labelled cohort that slipped in is not evaluated
    stray = decide({"baseline": cohort("baseline", [0.0] * 20, policy=policy),
                    "failure": cohort("failure", [-0.4] * 3, policy=policy)}, policy)
    assert stray.verdict_state == "ship"


def test_floor_rules_and_absent_cohorts():
    empty = decide({}, Policy())
    assert [f.rule for f in empty.floor_failures] == ["required_cohort_present", "required_cohort_present"]
    assert str(empty.floor_failures[0]) == "required failure cohort is absent: no trace was selected into it"
    assert [f.code for f in empty.findings].count("required_cohort_absent") == 2
    partial = decide({"failure": cohort("failure", [0.2] * 4, selected=10, replayed=4),
                      "baseline": cohort("baseline", [0.0] * 10)}, Policy())
    rules = [f.rule for f in partial.floor_failures]
    assert rules == ["min_replayed_per_required_cohort", "min_scored_per_required_cohort",
                     "min_replay_validity_ratio_per_required_cohort"]
    assert partial.floor_failures[-1].observed == "0.400"


def test_every_blocking_code_has_a_next_step():
    for code, severity in FINDING_SEVERITY.items():
        if severity in ("blocks_all", "blocks_ship", "degrades_trust"):
            summary, steps = FIX_SUGGESTIONS[code]
            assert summary and steps, code
    with pytest.raises(KeyError):
        make_finding("no_such_code", "x")


def test_floor_is_not_configurable():
    from toolkit.whatif.config import DecisionConfig

    assert not {"min_selected", "min_scored", "min_replayed", "min_replay_validity"} & set(DecisionConfig.model_fields)
    assert (FLOOR.min_selected, FLOOR.min_replayed, FLOOR.min_scored, FLOOR.min_replay_validity) == (5, 5, 5, 0.5)


# --- statistics against independent references --------------------------------------------------


def test_bootstrap_ci_matches_scipy_percentile_bootstrap():
    deltas = [0.1, 0.4, 0.06, 0.3, 0.45, 0.2, 0.08, 0.35, -0.1, 0.22, 0.05, 0.5]
    policy = Policy(bootstrap_resamples=2000, seed=7)
    ours = cohort("failure", deltas, policy=policy)
    reference = scipy_stats.bootstrap((np.array(deltas),), np.median, n_resamples=2000, method="percentile",
                                      confidence_level=0.95, random_state=np.random.default_rng(7), vectorized=True)
    assert ours.ci_low == pytest.approx(reference.confidence_interval.low, abs=1e-12)
    assert ours.ci_high == pytest.approx(reference.confidence_interval.high, abs=1e-12)
    assert ours.median_delta == pytest.approx(np.median(deltas))


def test_sign_flip_p_matches_brute_force_enumeration():
    deltas = [0.3, -0.1, 0.2, 0.25, 0.05, -0.02, 0.4]
    ours = cohort("failure", deltas)
    observed = abs(np.mean(deltas))
    patterns = [np.mean([s * d for s, d in zip(signs, deltas)]) for signs in itertools.product((1, -1), repeat=len(deltas))]
    expected = np.mean([abs(m) >= observed - 1e-12 for m in patterns])
    assert ours.sign_flip_p == pytest.approx(expected, abs=1e-12) and ours.sign_flip_method == "exact"


def test_ci_needs_five_scored():
    four = cohort("failure", [0.1, 0.2, 0.3, 0.4])
    assert not four.ci_computable and four.ci_unavailable_reason == "sample_too_small" and four.ci_low is None
    none = cohort("failure", [])
    assert none.median_delta is None and none.sign_flip_p is None


# --- the invariant: no Ship without a floor pass -------------------------------------------------

delta_lists = st.lists(st.sampled_from([-0.4, -0.06, -0.05, 0.0, 0.01, 0.05, 0.051, 0.2, 0.5]), max_size=12)


@st.composite
def cohort_results(draw, name):
    deltas = draw(delta_lists)
    replayed = len(deltas) + draw(st.integers(0, 6))
    selected = replayed + draw(st.integers(0, 8))
    policy = Policy()
    return summarize_cohort(name, deltas, selected=selected, replayed=replayed, policy=policy)


policies = st.builds(
    Policy,
    experiment_shape=st.sampled_from(["failure_rescue", "regression_check"]),
    require_baseline=st.booleans(),
    max_baseline_regression_ratio=st.floats(0, 1),
    min_failure_improvement_ratio=st.floats(0, 1),
    practical_delta_epsilon=st.floats(0, 0.3),
    max_ci_width=st.one_of(st.none(), st.floats(0, 2)),
    bootstrap_resamples=st.just(200),
)


@given(policy=policies, failure=st.one_of(st.none(), cohort_results("failure")),
       baseline=st.one_of(st.none(), cohort_results("baseline")), lock=st.booleans())
def test_no_ship_without_a_floor_pass(policy, failure, baseline, lock):
    cohorts = {c.name: c for c in (failure, baseline) if c is not None}
    findings = [make_finding("cache_lock_unavailable", "held", {"lock_path": "p"}, failure_ids=["f1"])] if lock else []
    decision = decide(cohorts, policy, findings)
    if decision.verdict_state == "ship":
        # recomputed independently of decide(): every required cohort meets every floor rule
        for name in policy.required_cohorts:
            c = cohorts.get(name)
            assert c is not None and c.selected >= 5 and c.replayed >= 5 and c.scored >= 5
            assert c.replayed / c.selected >= 0.5
            assert c.ci_computable
        assert not lock
        assert decision.floor_passed
    if not decision.floor_passed:
        assert decision.verdict_state == "inconclusive"
    halted = decide(cohorts, policy, [], halted_by=make_finding("cache_corruption_detected", "bad", {"cache_path": "x"}, failure_ids=["f"]))
    assert halted.verdict_state == "inconclusive"


def test_cohort_result_str_is_one_line():
    text = str(cohort("failure", [0.1] * 6))
    assert "\n" not in text and "6 scored" in text
    assert isinstance(cohort("failure", [0.1] * 6), CohortResult)


# --- issue 15: attacks on the verdict (each the crafted cohort the audit used) ----------------


def test_a_few_catastrophes_inside_the_failure_cohort_block_ship():
    # 11 rescued by +0.06, 9 made worse by -0.9: median +0.06 > eps and 55% improved passed
    # every threshold rule; the mean is -0.372 and nine traces fell by 0.9.
    failure = [0.06] * 11 + [-0.9] * 9
    verdict = run(failure, CLEAN_BASELINE)
    assert verdict.verdict_state == "dont_ship"
    codes = [f.code for f in verdict.findings]
    assert {"harm_not_excluded", "severe_trace_drops", "improvement_not_significant"} <= set(codes)
    harm = next(f for f in verdict.findings if f.code == "harm_not_excluded")
    assert "-0.372" in harm.message and harm.cohort == "failure"
    drops = next(f for f in verdict.findings if f.code == "severe_trace_drops")
    assert drops.message.startswith("failure cohort: 9 of 20 traces fell by more than 0.50")
    # the old rules alone would have shipped it: no threshold finding fired
    assert not {"failure_improvement_below_threshold", "practical_delta_below_threshold"} & set(codes)


def test_two_baseline_traces_falling_to_zero_block_ship():
    # 2 of 20 baseline traces fall 1.0 -> 0.0: the regression rate 0.10 <= 0.10 passed.
    baseline = [0.0] * 18 + [-1.0] * 2
    policy = Policy()
    cohorts = {"failure": cohort("failure", [0.5] * 20, policy=policy),
               "baseline": summarize_cohort("baseline", baseline, 20, 20, policy,
                                            trace_ids=[f"b-{i:02d}" for i in range(20)])}
    verdict = decide(cohorts, policy)
    assert verdict.verdict_state == "dont_ship"
    drops = next(f for f in verdict.findings if f.code == "severe_trace_drops")
    assert drops.failure_ids == ("b-18", "b-19") and "worst Δ -1.000" in drops.message
    assert "baseline_regression_above_threshold" not in [f.code for f in verdict.findings]
    # the allowance is a real knob: two allowed severe drops leave the mean-interval guard
    # (CI [-0.244, +0.044] reaches below -0.05), so the verdict stays Don't Ship for that reason
    lenient = Policy(max_severe_drops=2)
    again = decide({"failure": cohort("failure", [0.5] * 20, policy=lenient),
                    "baseline": cohort("baseline", baseline, policy=lenient)}, lenient)
    assert [f.code for f in again.findings if f.severity == "blocks_ship"] == ["harm_not_excluded"]


def test_max_trace_drop_moves_the_count():
    baseline = [0.0] * 17 + [-0.3, -0.6, -0.95]
    counts = {drop: cohort("baseline", baseline, policy=Policy(max_trace_drop=drop)).severe_drops
              for drop in (0.2, 0.5, 0.9, 1.0)}
    assert counts == {0.2: 3, 0.5: 2, 0.9: 1, 1.0: 0}


def test_mean_interval_matches_student_t_and_guards_use_its_bounds():
    # Reference: scipy.stats.t interval on the same deltas (below 30 traces the rule is Student t).
    rng = np.random.default_rng(3)
    deltas = list(np.round(rng.normal(0.03, 0.2, 12), 3))
    c = cohort("baseline", deltas)
    mean = np.mean(deltas)
    low, high = scipy_stats.t.interval(0.95, len(deltas) - 1, loc=mean, scale=scipy_stats.sem(deltas))
    assert c.mean_ci_method == "student t"
    assert c.mean_ci_low == pytest.approx(low) and c.mean_ci_high == pytest.approx(high)
    harm = [f for f in run([0.5] * 20, deltas).findings if f.code == "harm_not_excluded"]
    assert bool(harm) == (low < -0.05)


def test_a_rescue_that_is_not_significant_does_not_ship():
    # median 0.1 > eps and 55% improved, but 9 traces fall by 0.3: the mean interval reaches 0
    failure = [0.1] * 11 + [-0.3] * 9
    verdict = run(failure, CLEAN_BASELINE, Policy(max_trace_drop=0.5))
    codes = [f.code for f in verdict.findings]
    assert verdict.verdict_state == "dont_ship" and "improvement_not_significant" in codes
    finding = next(f for f in verdict.findings if f.code == "improvement_not_significant")
    assert float(finding.details["pvalue"]) >= 0.05 or float(finding.details["ci_low"]) <= 0


def test_replays_average_within_a_trace_and_the_floor_counts_traces():
    # 4 traces x 3 replays = 12 deltas: four traces of evidence, below the floor of five
    ids = [t for t in ("a", "b", "c", "d") for _ in range(3)]
    deltas = [0.2, 0.4, 0.3, 0.1, 0.1, 0.1, 0.5, -0.1, 0.2, 0.3, 0.3, 0.3]
    c = summarize_cohort("failure", deltas, 4, 4, Policy(), trace_ids=ids)
    assert c.scored == 4 and c.replays == 3
    assert c.mean_delta == pytest.approx(np.mean([0.3, 0.1, 0.2, 0.3]))
    assert c.flaky == 1  # trace c: +0.5 improved, -0.1 regressed
    verdict = decide({"failure": c, "baseline": cohort("baseline", CLEAN_BASELINE)}, Policy())
    assert verdict.verdict_state == "inconclusive" and not verdict.floor_passed


def test_aa_check_refuses_a_delta_inside_the_unchanged_replays_spread():
    # The change moves failures by +0.1 a trace, and so does replaying with no change at all.
    ids = [f"f-{i:02d}" for i in range(20)]
    rng = np.random.default_rng(5)
    change = list(0.1 + rng.normal(0, 0.05, 20))
    aa = {t: [0.1 + float(rng.normal(0, 0.05))] for t in ids}
    policy = Policy(aa_check=True)
    failure = summarize_cohort("failure", change, 20, 20, policy, trace_ids=ids, aa_deltas=aa)
    baseline = summarize_cohort("baseline", [0.0] * 20, 20, 20, policy, trace_ids=[f"b-{i}" for i in range(20)],
                                aa_deltas={f"b-{i}": [0.0] for i in range(20)})
    verdict = decide({"failure": failure, "baseline": baseline}, policy)
    codes = [f.code for f in verdict.findings]
    assert "inside_aa_noise" in codes and verdict.verdict_state == "dont_ship"
    assert "aa_drift" in codes  # the unchanged replay already moves scores by +0.1
    # the same change with a quiet A/A run ships
    quiet = summarize_cohort("failure", change, 20, 20, policy, trace_ids=ids, aa_deltas={t: [0.0] for t in ids})
    assert decide({"failure": quiet, "baseline": baseline}, policy).verdict_state == "ship"
    # without aa_check the A/A numbers are not asked for
    assert "inside_aa_noise" not in [f.code for f in decide({"failure": failure, "baseline": baseline}, Policy()).findings]


def test_aa_check_with_no_aa_scores_is_inconclusive():
    policy = Policy(aa_check=True)
    cohorts = {"failure": cohort("failure", [0.5] * 20, policy=policy), "baseline": cohort("baseline", CLEAN_BASELINE, policy=policy)}
    verdict = decide(cohorts, policy)
    assert verdict.verdict_state == "inconclusive" and "aa_unavailable" in [f.code for f in verdict.findings]
