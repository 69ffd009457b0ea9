"""wilson against statsmodels and the closed form; judge_agreement against sklearn.

The clustered agreement interval (``cluster=``, default by task) is checked against a
numpy closed form of Miller's (2024) cluster-robust se and statsmodels OLS with
``cov_type="cluster"`` on an intercept-only model.
"""

import math

import numpy as np
import pytest
import statsmodels.api as sm
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats
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


# --------------------------------------------------------------------------- cluster=


def _repeated_rows(n_tasks=15, per_task=4, seed=3):
    """Labelled rollouts of the same tasks: the judge errs task by task (correlated)."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(n_tasks):
        hard = rng.random() < 0.3  # on a hard task the judge errs on most rollouts
        for i in range(per_task):
            gold = int(rng.random() < 0.5)
            wrong = rng.random() < (0.7 if hard else 0.05)
            rows.append({"scenario_id": f"t{t}", "rollout_index": i, "reward": 1 - gold if wrong else gold,
                         "gold_reward": gold, "label_source": "human", "tool": f"tool{t % 5}"})
    return rows


def test_one_row_per_task_keeps_wilson_and_says_so():
    result = tk.judge_agreement(_confusion_rows(40, 5, 5, 50))
    assert result.interval_method == "wilson" and result.agreement_ci95 == result.wilson_ci95
    assert result.agreement_ci95 == pytest.approx(proportion_confint(90, 100, method="wilson"), abs=1e-9)
    assert str(result).endswith("(100 labels, gold human; Wilson over rows, one per task)")


def test_repeated_tasks_give_the_clustered_interval_like_statsmodels():
    rows = _repeated_rows()
    result = tk.judge_agreement(rows)
    agree = np.array([float(r["reward"] == r["gold_reward"]) for r in rows])
    groups = np.array([int(r["scenario_id"][1:]) for r in rows])
    # reference 1: numpy closed form, se = sqrt(G/(G-1) sum_c (sum_{i in c} (a_i - a-bar))^2) / n
    sums = np.array([np.sum(agree[groups == g] - agree.mean()) for g in range(15)])
    se = np.sqrt(15 / 14 * np.sum(sums**2)) / agree.size
    half = stats.t.ppf(0.975, 14) * se
    expected = (max(0.0, agree.mean() - half), min(1.0, agree.mean() + half))
    assert result.interval_method == "clustered t" and result.n_clusters == 15
    assert result.agreement_ci95 == pytest.approx(expected, abs=1e-12)
    # reference 2: statsmodels' intercept-only cluster se (its (N-1)/(N-K) factor is 1 at K = 1)
    fit = sm.OLS(agree, np.ones(agree.size)).fit(cov_type="cluster", cov_kwds={"groups": groups}, use_t=True)
    assert fit.bse[0] == pytest.approx(se, rel=1e-12)
    # the rows-as-trials Wilson is kept beside it, and is narrower here (the errors cluster)
    assert result.wilson_ci95 == pytest.approx(tuple(tk.wilson(int(agree.sum()), agree.size)), abs=1e-12)
    assert result.wilson_ci95[1] - result.wilson_ci95[0] < result.agreement_ci95[1] - result.agreement_ci95[0]
    assert result.design_effect > 1
    assert "(60 labels in 15 clusters, gold human; clustered t by task, design effect" in str(result)
    independent = tk.judge_agreement(rows, cluster=None)
    assert independent.interval_method == "wilson" and independent.agreement_ci95 == result.wilson_ci95
    by_tool = tk.judge_agreement(rows, cluster="tool")
    assert by_tool.n_clusters == 5 and by_tool.cluster_by == "tool" and by_tool.agreement_ci95 != result.agreement_ci95
    assert tk.judge_agreement(rows, cluster=lambda row: row["tool"]).agreement_ci95 == by_tool.agreement_ci95


def test_perfect_agreement_over_repeated_tasks_is_wilson_over_the_tasks():
    rows = [{"scenario_id": f"t{i % 10}", "rollout_index": i, "reward": i % 2, "gold_reward": i % 2,
             "label_source": "human"} for i in range(60)]
    result = tk.judge_agreement(rows)
    assert result.agreement == 1.0 and result.interval_method == "wilson over tasks"
    # each task one trial (10 of 10), not 60 of 60: the clustered se is 0 and says nothing
    assert result.agreement_ci95 == pytest.approx(proportion_confint(10, 10, method="wilson"), abs=1e-9)
    assert result.agreement_ci95[0] < result.wilson_ci95[0]
    assert "Wilson over the 10 clusters" in str(result)


def test_fewer_than_three_clusters_give_no_interval_and_rows_without_a_task_stay_independent():
    rows = [{"scenario_id": f"t{i % 2}", "rollout_index": i, "reward": int(i % 5 > 0), "gold_reward": 1,
             "label_source": "human"} for i in range(40)]
    two = tk.judge_agreement(rows)
    assert two.agreement_ci95 is None and two.interval_method == "none" and two.wilson_ci95 is not None
    assert "[no interval]" in str(two) and "a clustered interval needs 3" in str(two)
    anonymous = tk.judge_agreement([{"reward": i % 2, "gold_reward": 1, "label_source": "human"} for i in range(20)])
    assert anonymous.interval_method == "wilson"  # no task identity: each row its own cluster
    with pytest.raises(tk.ConfigError, match="has no cluster label"):
        tk.judge_agreement(rows, cluster="tool")


def test_gold_as_a_second_list_clusters_by_the_judged_rows_tasks():
    judged = [{"rollout_id": f"r{i}", "scenario_id": f"t{i % 6}", "reward": int(i % 4 > 0)} for i in range(24)]
    gold = [{"rollout_id": f"r{i}", "gold_reward": 1, "label_source": "human"} for i in range(24)]
    result = tk.judge_agreement(judged, gold=gold)
    assert result.n == 24 and result.n_clusters == 6 and result.interval_method == "clustered t"
