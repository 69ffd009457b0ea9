"""pass_at and the per-task estimators against closed forms, enumeration and scipy."""

import itertools
import random
import re
from math import comb

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

import toolkit as tk


def rows_from(groups):
    """{task: [rewards]} -> rows."""
    return [
        {"scenario_id": task, "rollout_index": i, "reward": reward}
        for task, rewards in groups.items()
        for i, reward in enumerate(rewards)
    ]


def _subset_average(n, c, k, all_pass):
    """Exact enumeration over all k-subsets of n rollouts of which the first c pass."""
    outcomes = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(outcomes, k))
    hits = sum((all(s) if all_pass else any(s)) for s in subsets)
    return hits / len(subsets)


# --------------------------------------------------------------------------- estimators


def test_acceptance_items_1_and_2_closed_forms():
    assert tk.stats.pass_at_k_estimate(5, 2, 3) == pytest.approx(1 - comb(3, 3) / comb(5, 3)) == pytest.approx(0.9)
    assert tk.stats.pass_pow_k_estimate(5, 2, 3) == 0.0
    assert tk.stats.pass_at_k_estimate(8, 3, 4) == pytest.approx(1 - 5 / 70)
    assert round(tk.stats.pass_at_k_estimate(8, 3, 4), 6) == 0.928571
    assert round(tk.stats.pass_pow_k_estimate(8, 6, 4), 6) == 0.214286


@given(st.integers(1, 12).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
def test_estimators_equal_enumeration_over_k_subsets(group):
    n, c, k = group
    assert tk.stats.pass_at_k_estimate(n, c, k) == pytest.approx(_subset_average(n, c, k, all_pass=False), abs=1e-12)
    assert tk.stats.pass_pow_k_estimate(n, c, k) == pytest.approx(_subset_average(n, c, k, all_pass=True), abs=1e-12)


def test_estimators_are_stable_where_binomials_overflow_floats():
    # C(2000, 1000) overflows a float; the product forms do not.
    assert tk.stats.pass_at_k_estimate(2000, 1, 1000) == pytest.approx(0.5)
    assert tk.stats.pass_pow_k_estimate(2000, 1999, 1000) == pytest.approx(0.5)
    with pytest.raises(tk.ConfigError):
        tk.stats.pass_at_k_estimate(4, 5, 2)
    with pytest.raises(tk.ConfigError):
        tk.stats.pass_pow_k_estimate(4, 2, 5)


# --------------------------------------------------------------------------- pass_at


def test_acceptance_item_3_four_identical_tasks():
    result = tk.pass_at(rows_from({f"t{i}": [1, 1, 0, 1] for i in range(4)}))
    assert result.pass_at_1 == pytest.approx(0.75)
    assert result.k == 4
    assert result.pass_pow_k == 0.0 and result.pass_at_k == 1.0
    assert result.headroom == pytest.approx(0.25)
    assert result.ci95 == (0.75, 0.75)
    assert result.n_groups == 4 and result.n_rows == 16 and result.n_groups_at_k == 4


def test_acceptance_item_4_repeats_of_two():
    result = tk.pass_at(rows_from({f"t{i}": [1, i % 2] for i in range(5)}))
    assert result.pass_at_1 == pytest.approx(0.7)
    assert result.pass_pow_k is None and result.pass_at_k is None and result.headroom is None
    assert result.k == 2 and "repeats>=4" in result.note


def test_acceptance_item_5_two_tasks_have_no_interval():
    result = tk.pass_at(rows_from({"a": [1, 0, 1, 1], "b": [0, 0, 1, 0]}))
    assert result.ci95 is None
    assert "2 task(s)" in result.note and "needs 3" in result.note


def test_acceptance_item_6_uneven_groups_suggest_the_largest_k():
    result = tk.pass_at(rows_from({"a": [1, 0, 1], "b": [1, 0, 1, 1], "c": [0, 0, 1]}))
    assert result.k == 3 and result.pass_pow_k is None and result.pass_at_k is None
    assert "uneven" in result.note and "k=4" in result.note
    explicit = tk.pass_at(rows_from({"a": [1, 0, 1], "b": [1, 0, 1, 1], "c": [0, 0, 1]}), k=4)
    assert explicit.n_groups_at_k == 1 and explicit.n_groups_short == 2
    assert explicit.pass_pow_k == pytest.approx(0.0) and explicit.pass_at_k == 1.0


def test_acceptance_item_7_unanimous_short_groups():
    groups = {"full": [1, 0, 1, 1, 1, 0, 1, 1], "unanimous": [1, 1], "mixed": [1, 0]}
    plain = tk.pass_at(rows_from(groups), k=8)
    assert plain.n_groups_at_k == 1 and plain.n_groups_short == 2
    successive = tk.pass_at(rows_from(groups), k=8, unanimous_short=True)
    assert successive.n_groups_at_k == 2 and successive.n_groups_short == 1
    assert successive.pass_pow_k == pytest.approx((0.0 + 1.0) / 2)
    assert successive.pass_at_k == pytest.approx((1.0 + 1.0) / 2)


def test_acceptance_item_8_all_zero_note_comes_first():
    result = tk.pass_at(rows_from({f"t{i}": [0, 0, 0, 0] for i in range(3)}))
    assert result.pass_at_1 == 0.0
    assert result.note.startswith("every row scored 0 (12 of 12); check the judge")
    # the printed line carries it too, before any number
    assert result.warnings == ("every row scored 0 (12 of 12); check the judge before reading this number",)
    assert str(result).startswith(result.warnings[0] + " | pass@1 0.00")


def test_at_k_1_the_line_prints_pass_at_1_once_with_the_judge_warning():
    one_each = tk.pass_at(rows_from({f"t{i}": [1] for i in range(20)}))
    assert one_each.k == 1
    assert str(one_each) == (
        "every row scored 1 (20 of 20); check the judge before reading this number | pass@1 1.00 [1.00..1.00] (20 groups, k=1)"
    )
    mixed = tk.pass_at(rows_from({f"t{i}": [i % 2] for i in range(6)}))
    text = str(mixed)
    assert text.count("pass@1") == 1 and "pass^" not in text and text.endswith("(6 groups, k=1)")
    assert not mixed.warnings
    # asked for explicitly, k=1 gives three equal numbers: printed once all the same
    explicit = tk.pass_at(rows_from({f"t{i}": [1, i % 2] for i in range(5)}), k=1, min_k=1)
    assert explicit.pass_pow_k == explicit.pass_at_k == explicit.pass_at_1
    assert str(explicit).count("pass@1") == 1 and "pass^1" not in str(explicit)


def test_per_task_trial_count_not_global():
    # tau-bench divides by the global trial count (4); task b lost a trial and has n = 3.
    groups = {"a": [1, 1, 1, 1], "b": [1, 1, 0], "c": [0, 1, 0, 1], "d": [1, 0, 1, 1]}
    result = tk.pass_at(rows_from(groups), k=3, min_k=3)
    expected = np.mean([
        tk.stats.pass_pow_k_estimate(len(v), sum(v), 3) for v in groups.values()
    ])
    assert result.pass_pow_k == pytest.approx(expected)
    assert result.per_task["b"] == pytest.approx(2 / 3)
    assert result.counts["b"] == (2, 3)


def test_intervals_are_scipy_percentile_bootstraps_over_tasks():
    rng = np.random.default_rng(2)
    groups = {f"t{i:02d}": [int(v) for v in rng.integers(0, 2, 6)] for i in range(20)}
    result = tk.pass_at(rows_from(groups), n_resamples=2000, seed=0)
    tasks = sorted(groups)
    rates = np.array([np.mean(groups[t]) for t in tasks])
    reference = stats.bootstrap((rates,), np.mean, method="percentile", n_resamples=2000,
                                rng=np.random.default_rng(0), vectorized=True)
    assert result.ci95 == pytest.approx(tuple(reference.confidence_interval), abs=1e-12)
    at_k = np.array([tk.stats.pass_at_k_estimate(6, int(sum(groups[t])), 6) for t in tasks])
    reference = stats.bootstrap((at_k,), np.mean, method="percentile", n_resamples=2000,
                                rng=np.random.default_rng(0), vectorized=True)
    assert result.pass_at_k_ci95 == pytest.approx(tuple(reference.confidence_interval), abs=1e-12)


def test_str_format():
    rng = random.Random(1)
    groups = {f"t{i}": [int(rng.random() < 0.6) for _ in range(4)] for i in range(16)}
    text = str(tk.pass_at(rows_from(groups)))
    pattern = (
        r"pass@1 \d\.\d\d \[\d\.\d\d\.\.\d\.\d\d\] \| pass\^4 \d\.\d\d \[\d\.\d\d\.\.\d\.\d\d\] \| "
        r"pass@4 \d\.\d\d \[\d\.\d\d\.\.\d\.\d\d\] \| headroom -?\d\.\d\d \(16 groups, k=4\)"
    )
    assert re.fullmatch(pattern, text), text


def test_bad_rewards_are_skipped_and_counted():
    rows = rows_from({"a": [1, 0, 1, 1], "b": [0, 1, 1, 1], "c": [1, 1, 1, 0]})
    rows += [
        {"scenario_id": "a", "reward": True},
        {"scenario_id": "b", "reward": "1"},
        {"scenario_id": "c", "reward": 0.5},
        {"scenario_id": "c", "reward": float("nan")},
        {"scenario_id": "c"},
    ]
    result = tk.pass_at(rows)
    assert result.n_rows == 12 and result.n_skipped == 4 and result.n_ungraded == 1
    assert result.pass_at_1 == pytest.approx(0.75)


def test_empty_ungraded_and_wrong_container():
    assert "no rows" in tk.pass_at([]).note
    nothing = tk.pass_at([{"scenario_id": "a", "reward": 0.4}])
    assert nothing.pass_at_1 is None
    assert nothing.note.startswith("no row has a usable reward: 1 row, 0 grader errors, 1 with a reward that is not exactly 0 or 1 (first: 0.4)")
    failed = tk.pass_at([
        {"scenario_id": "a", "judge_status": "timeout", "reason": "judge timed out"},
        {"scenario_id": "b", "judge_status": "error"},
    ])
    assert failed.note.startswith("no row has a usable reward: 2 rows, 2 grader errors (error 1, timeout 1; first: judge timed out)")
    assert "re-run the judge" in failed.note and str(failed) == f"pass@1 n/a (0 groups): {failed.note}"
    ungraded = tk.pass_at([{"scenario_id": "a"}, {"scenario_id": "b"}])
    assert ungraded.note.startswith("no row has a usable reward: 2 rows, 0 grader errors, 2 not graded; grade first")
    with pytest.raises(TypeError, match="list of row dicts"):
        tk.pass_at(42)
    with pytest.raises(TypeError, match="single dict"):
        tk.pass_at({"reward": 1})


def test_dataframe_input_and_qwen_reward_fallback():
    rows = rows_from({"a": [1, 0, 1, 1], "b": [0, 1, 1, 1], "c": [1, 1, 1, 0]})
    frame = pd.DataFrame(rows)
    assert tk.pass_at(frame).to_dict() == tk.pass_at(rows).to_dict()
    legacy = [{"scenario_id": r["scenario_id"], "qwen_reward": r["reward"]} for r in rows]
    assert tk.pass_at(legacy).pass_at_1 == tk.pass_at(rows).pass_at_1


group_lists = st.dictionaries(
    st.text("abcdefgh", min_size=1, max_size=3),
    st.lists(st.integers(0, 1), min_size=1, max_size=9),
    min_size=1,
    max_size=8,
)


@given(group_lists, st.randoms(use_true_random=False))
def test_invariant_to_row_order(groups, shuffler):
    rows = rows_from(groups)
    shuffled = list(rows)
    shuffler.shuffle(shuffled)
    assert tk.pass_at(rows, n_resamples=200).to_dict() == tk.pass_at(shuffled, n_resamples=200).to_dict()


@given(group_lists)
def test_pass_pow_k_le_pass_at_1_le_pass_at_k_when_every_group_reaches_k(groups):
    k = min(len(v) for v in groups.values())
    result = tk.pass_at(rows_from(groups), k=k, min_k=1, n_resamples=100)
    assert result.n_groups_short == 0
    assert result.pass_pow_k <= result.pass_at_1 + 1e-12
    assert result.pass_at_1 <= result.pass_at_k + 1e-12
    assert result.headroom == pytest.approx(result.pass_at_k - result.pass_at_1)


def test_curve_matches_estimators_and_plots_as_a_frame():
    groups = {f"t{i}": [1, 0, 1, 1, 0, 1][: 4 + i % 3] for i in range(9)}
    result = tk.pass_at(rows_from(groups))
    curve = result.curve()
    assert curve.ks == (1, 2, 3, 4)
    assert curve.pass_at_k[0] == pytest.approx(result.pass_at_1)
    assert curve.pass_pow_k[0] == pytest.approx(result.pass_at_1)
    assert curve.pass_at_k[3] == pytest.approx(result.pass_at_k)
    assert curve.pass_pow_k[3] == pytest.approx(result.pass_pow_k)
    assert list(curve.pass_at_k) == sorted(curve.pass_at_k)
    assert list(curve.pass_pow_k) == sorted(curve.pass_pow_k, reverse=True)
    wide = result.curve(ks=[5, 6])
    assert wide.n_groups == (6, 3)
    assert wide.pass_at_k[1] == pytest.approx(np.mean([tk.stats.pass_at_k_estimate(6, 4, 6)] * 3))
    frame = curve.to_pandas()
    assert list(frame["k"]) == [1, 2, 3, 4]
    assert {"pass_at_k_low", "pass_pow_k_high", "n_groups"} <= set(frame.columns)
    assert (frame["pass_at_k_low"] <= frame["pass_at_k"]).all()


def test_run_config_agreement_and_mixing():
    rows = rows_from({"a": [1, 0, 1, 1], "b": [0, 1, 1, 1], "c": [1, 1, 1, 0]})
    for i, row in enumerate(rows):
        row["sampling"] = {"temperature": 0.7 if i else 1.0, "max_tokens": 512}
        row["policy_version"] = "m@abc"
        row["finish_reason"] = "length" if i < 3 else "stop"
        row["final_text"] = "<think>hmm" if i == 0 else "done"
    config = tk.pass_at(rows).config
    assert config["max_tokens"] == 512 and config["policy_version"] == "m@abc"
    assert config["temperature"] is None and config["mixed"] == ["temperature"]
    assert config["mixed_values"]["temperature"] == [0.7, 1.0]
    assert config["truncated_share"] == pytest.approx(3 / 12)
    assert config["unclosed_think_share"] == pytest.approx(1 / 12)
    assert config["answered_share"] == pytest.approx(11 / 12)
    assert config["graded_share"] == 1.0 and config["judge_version"] is None


@pytest.mark.parametrize("kwargs, field", [
    ({"level": 2}, "level"), ({"level": 0.0}, "level"), ({"n_resamples": 0}, "n_resamples"),
])
def test_bad_interval_settings_are_refused_even_when_no_interval_is_drawn(kwargs, field):
    # One task: no bootstrap runs, so only an up-front check can name the bad setting.
    with pytest.raises(tk.ConfigError, match=field):
        tk.pass_at([{"task_id": "a", "reward": 1}], **kwargs)
