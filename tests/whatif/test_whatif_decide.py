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
    assert clean.verdict_state == "ship" and clean.findings == () and clean.required_cohorts == ("baseline",)
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
