"""wilson against statsmodels and the closed form; judge_agreement against sklearn."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.proportion import proportion_confint

import toolkit as tk


def _wilson_z196(successes, n):
    """The reference engine's formula with z fixed at 1.96 (docs/design/engine.md §6.5)."""
    z = 1.96
    p = successes / n
    denominator = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, center - half), min(1.0, center + half)


@given(
    st.integers(1, 2000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
    st.sampled_from([0.8, 0.9, 0.95, 0.99]),
)
def test_wilson_equals_statsmodels(counts, level):
    successes, n = counts
    low, high = proportion_confint(successes, n, alpha=1 - level, method="wilson")
    ours = tk.wilson(successes, n, level)
    assert ours.low == pytest.approx(low, abs=1e-9)
    assert ours.high == pytest.approx(high, abs=1e-9)
    assert ours.estimate == successes / n and ours.n == n


@pytest.mark.parametrize(
    "successes, n, low, high",
    [(8, 10, 0.4902, 0.9433), (14, 14, 0.7847, 1.0), (45, 50, 0.7864, 0.9565), (0, 3, 0.0, 0.5615)],
)
def test_acceptance_item_10_exact_quantile_and_196_agree_to_4_dp(successes, n, low, high):
    ours = tk.wilson(successes, n)
    assert round(ours.low, 4) == low and round(ours.high, 4) == high
    fixed = _wilson_z196(successes, n)
    assert round(fixed[0], 4) == low and round(fixed[1], 4) == high


def test_wilson_zero_trials_and_bad_counts():
    empty = tk.wilson(0, 0)
    assert empty.low is None and empty.high is None and empty.note
    low, high = tk.wilson(3, 4)
    assert 0 < low < 0.75 < high < 1
    with pytest.raises(tk.ConfigError):
        tk.wilson(5, 4)
    with pytest.raises(TypeError):
        tk.wilson(2.5, 4)
    with pytest.raises(TypeError):
        tk.wilson(True, 4)


def _confusion_rows(tp, fp, fn, tn, label_source="human"):
    cells = [(1, 1)] * tp + [(1, 0)] * fp + [(0, 1)] * fn + [(0, 0)] * tn
    return [
        {"scenario_id": f"s{i}", "reward": judge, "gold_reward": gold, "label_source": label_source}
        for i, (judge, gold) in enumerate(cells)
    ]


def test_acceptance_item_11_confusion_numbers():
    result = tk.judge_agreement(_confusion_rows(40, 5, 5, 50))
    assert result.n == 100 and result.confusion == {"tp": 40, "fp": 5, "fn": 5, "tn": 50}
    assert result.agreement == pytest.approx(0.90)
    assert round(result.kappa, 3) == 0.798
    assert round(result.pass_when_gold_fail, 4) == 0.0909
    assert round(result.fail_when_gold_pass, 4) == 0.1111
    assert result.agreement_ci95 == pytest.approx(tuple(tk.wilson(90, 100)))
    assert result.gold_kind == "human" and result.trusted and result.ok
    assert result.warnings == ()


def test_acceptance_item_12_judge_passes_everything():
    result = tk.judge_agreement(_confusion_rows(45, 5, 0, 0))
    assert result.agreement == pytest.approx(0.90)
    assert result.kappa == pytest.approx(0.0)
    assert result.pass_when_gold_fail == 1.0
    assert any("leak rate" in w for w in result.warnings)
    assert not any("coarse" in w for w in result.warnings)  # 50 labels: the edge of the target range
    assert result.judge_pass_rate == 1.0 and result.gold_pass_rate == pytest.approx(0.9)


@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 1)), min_size=2, max_size=80))
def test_kappa_equals_sklearn(pairs):
    judge = [j for j, _ in pairs]
    gold = [g for _, g in pairs]
    rows = [{"reward": j, "gold_reward": g, "label_source": "program"} for j, g in pairs]
    result = tk.judge_agreement(rows)
    if len(set(judge)) == 1 and len(set(gold)) == 1:
        # sklearn divides 0 by 0 here; we call constant raters 1 when they agree, else 0.
        assert result.kappa == (1.0 if judge[0] == gold[0] else 0.0)
    else:
        assert result.kappa == pytest.approx(cohen_kappa_score(judge, gold), abs=1e-12)
    assert result.agreement == pytest.approx(sum(j == g for j, g in pairs) / len(pairs))


def test_coarse_warning_below_50_labels_only():
    assert any("coarse" in w for w in tk.judge_agreement(_confusion_rows(20, 0, 0, 29)).warnings)
    assert not any("coarse" in w for w in tk.judge_agreement(_confusion_rows(20, 0, 0, 30)).warnings)


def test_partial_and_bool_values_are_skipped_and_counted():
    rows = _confusion_rows(30, 0, 0, 30)
    rows += [
        {"reward": 0.5, "gold_reward": 1, "label_source": "human"},
        {"reward": True, "gold_reward": 1, "label_source": "human"},
        {"reward": 1, "gold_reward": 0.5, "label_source": "human"},
        {"gold_reward": 1, "label_source": "human"},
        {"reward": 1},  # unlabelled: not part of the audit
    ]
    result = tk.judge_agreement(rows)
    assert result.n == 60 and result.n_skipped == 4
    assert any("4 labelled row(s) skipped" in w for w in result.warnings)


def test_gold_kind_untrusted_and_mixed():
    model = tk.judge_agreement(_confusion_rows(30, 0, 0, 30, label_source="model"))
    assert model.gold_kind == "model" and not model.trusted and not model.ok
    assert tk.judge_agreement(_confusion_rows(30, 0, 0, 30, "model"), allow_model_gold=True).ok
    rows = _confusion_rows(30, 0, 0, 30)
    rows[0]["label_source"] = "program"
    assert tk.judge_agreement(rows).gold_kind == "mixed"
    for row in rows:
        del row["label_source"]
    assert tk.judge_agreement(rows).gold_kind == "unknown"


def test_gold_as_second_row_list_matched_three_ways():
    judged = [
        {"rollout_id": "r1", "reward": 1, "prompt": "p1", "final_text": "a"},
        {"scenario_id": "s2", "rollout_index": 0, "reward": 0, "prompt": "p2", "final_text": "b"},
        {"reward": 1, "prompt": "p3", "final_text": "c"},
        {"reward": 0, "prompt": "p4", "final_text": "d"},
    ]
    gold = [
        {"rollout_id": "r1", "reward": 1, "label_source": "human"},
        {"scenario_id": "s2", "rollout_index": 0, "gold_reward": 1, "label_source": "human"},
        {"prompt": "p3", "final_text": "c", "reward": 0, "label_source": "human"},
        {"rollout_id": "nobody", "reward": 1, "label_source": "human"},
    ]
    result = tk.judge_agreement(judged, gold=gold)
    assert result.n == 3 and result.n_unmatched == 1
    assert result.confusion == {"tp": 1, "fp": 1, "fn": 1, "tn": 0}
    assert result.matched_by == {"rollout_id": 1, "scenario_id#rollout_index": 1, "content_hash": 1}


def test_misspelled_gold_field_is_named_in_the_note():
    result = tk.judge_agreement(_confusion_rows(10, 0, 0, 10), gold="gold_rewrd")
    assert result.n == 0 and "did you mean 'gold_reward'" in result.note


def test_empty_and_wrong_container():
    empty = tk.judge_agreement([])
    assert empty.n == 0 and empty.agreement is None and empty.note and not empty.ok
    with pytest.raises(TypeError, match="expected"):
        tk.judge_agreement(3.5)
    assert "agreement" in str(tk.judge_agreement(_confusion_rows(40, 5, 5, 50)))


def test_bad_level_is_refused_even_without_labelled_pairs():
    with pytest.raises(tk.ConfigError, match="level"):
        tk.judge_agreement([{"task_id": "a", "reward": 1}], level=3)


def test_wilson_bounds_hold_the_estimate_at_zero_and_n():
    # reference: the Wilson interval contains p-hat by construction (it is the set of p whose
    # score test accepts p-hat); rounding put low = 1.4e-17 above 0 at 0 of 24
    for n in range(1, 200):
        low, high = tk.wilson(0, n)
        assert low == 0.0 <= high
        low, high = tk.wilson(n, n)
        assert low <= 1.0 == high
