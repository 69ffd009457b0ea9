"""metric_summary, marker_summary and group_signal against hand counts, scipy and statsmodels.

References: hand counts; ``scipy.stats.t.interval`` (Student t below 30 tasks) and
``scipy.stats.bootstrap`` (percentile above); statsmodels' ``proportion_confint`` (Wilson
over tasks) and OLS with ``cov_type="cluster"`` (the clustered t interval, Miller 2024).
"""

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

import toolkit as tk


def _rows():
    rows = []
    for task, (rewards, refusals) in {
        "a": ([1, 1, 0, 1], [0, 0, 1, 0]),
        "b": ([0, 0], [1, 1]),
        "c": ([1, 0, 1], [0, 0, 0]),
        "d": ([0.5, 1, 1, 0], [0, 1, 0, 0]),
    }.items():
        for reward, refusal in zip(rewards, refusals):
            rows.append({"scenario_id": task, "reward": reward, "markers": {"refusal": refusal, "dead": 0}})
    return rows


def test_metric_summary_is_mean_of_task_means_with_a_student_t_interval_below_30_tasks():
    rows = _rows()
    result = tk.stats.metric_summary(rows, "pass_at_1", n_resamples=2000)
    task_means = {"a": 0.75, "b": 0.0, "c": 2 / 3, "d": 2 / 3}  # d's 0.5 is not binary
    assert result.per_task == pytest.approx(task_means)
    assert result.mean == pytest.approx(np.mean(list(task_means.values())))
    assert result.n_skipped == 1 and result.n_rows == 12 and result.n_tasks == 4
    values = np.array([task_means[t] for t in "abcd"])
    low, high = stats.t.interval(0.95, df=3, loc=values.mean(), scale=stats.sem(values))
    # a pass rate lies in [0, 1]: the t interval (-0.035, 1.077) is clipped there
    assert low < 0 and high > 1
    assert result.ci95 == (0.0, 1.0) and result.interval_method == "student t"
    assert "Student t interval" in str(result)
    assert result.n_rows_at_1 == 7 and result.n_rows_at_0 == 5
    reward = tk.stats.metric_summary(rows, "reward")
    assert reward.per_task["d"] == pytest.approx(2.5 / 4) and reward.n_skipped == 0


def test_metric_summary_above_30_tasks_is_scipys_percentile_bootstrap():
    rng = np.random.default_rng(4)
    rows = [{"scenario_id": f"t{t}", "rollout_index": i, "reward": float(rng.random() < 0.4)} for t in range(40) for i in range(3)]
    result = tk.stats.metric_summary(rows, "pass_at_1", n_resamples=2000)
    means = np.array([result.per_task[t] for t in sorted(result.per_task)])
    reference = stats.bootstrap((means,), np.mean, method="percentile", n_resamples=2000,
                                rng=np.random.default_rng(0), vectorized=True)
    assert result.ci95 == pytest.approx(tuple(reference.confidence_interval), abs=1e-12)
    assert result.interval_method == "percentile bootstrap" and "interval" not in str(result).split("(")[1]


def test_wilson_over_tasks_is_for_pass_at_1_only():
    rows = [{"scenario_id": f"t{t}", "reward": float(t % 3 == 0), "markers": {"m": float(t % 3 == 0)}} for t in range(24)]
    passing = tk.stats.metric_summary(rows, "pass_at_1")
    assert passing.interval_method == "wilson over tasks"
    assert passing.ci95 == pytest.approx(proportion_confint(8, 24, alpha=0.05, method="wilson"), abs=1e-9)
    assert "Wilson over tasks interval" in str(passing)
    # the same 0/1 values as a marker are not a proportion of passing tasks
    assert tk.stats.metric_summary(rows, "marker:m").interval_method == "student t"


def test_metric_summary_clustered_equals_statsmodels_ols_cluster():
    rng = np.random.default_rng(6)
    effect = rng.normal(0, 0.15, 12)
    rows = [
        {"scenario_id": f"c{c}-t{t}", "rollout_index": i, "family": f"c{c}",
         "reward": float(np.clip(0.5 + effect[c] + rng.normal(0, 0.2), 0, 1))}
        for c in range(12) for t in range(5) for i in range(2)
    ]
    result = tk.stats.metric_summary(rows, "reward", cluster="family", level=0.9)
    tasks = sorted(result.per_task)
    x = np.array([result.per_task[t] for t in tasks])
    groups = np.array([int(t.split("-")[0][1:]) for t in tasks])
    # intercept-only OLS: statsmodels' factor G/(G-1)(N-1)/(N-K) is G/(G-1) at K = 1, as ours
    fit = sm.OLS(x, np.ones(x.size)).fit(cov_type="cluster", cov_kwds={"groups": groups}, use_t=True)
    assert result.interval_method == "clustered t" and result.n_clusters == 12
    assert tuple(fit.conf_int(0.1)[0]) == pytest.approx(result.ci95, abs=1e-12)
    assert result.bootstrap_ci95 is not None and result.design_effect > 1
    assert "clustered t interval; clustered by family: 60 tasks in 12 clusters" in str(result)
    plain = tk.stats.metric_summary(rows, "reward", level=0.9)
    assert plain.ci95[1] - plain.ci95[0] < result.ci95[1] - result.ci95[0]
    few = tk.stats.metric_summary(rows, "reward", cluster=lambda row: int(row["family"][1:]) % 2)
    assert few.ci95 is None and "2 cluster(s)" in few.note
    auto = tk.stats.metric_summary(rows, "reward", cluster="auto", level=0.9)
    assert auto.ci95 == plain.ci95 and "cluster='auto' found no cluster key" in str(auto)
    markers = tk.stats.marker_summary([dict(r, markers={"m": r["reward"]}) for r in rows], cluster="family", level=0.9)
    assert markers["m"].ci95 == pytest.approx(result.ci95)


def test_marker_metric_forms_and_unknown_name():
    rows = _rows()
    prefixed = tk.stats.metric_summary(rows, "marker:refusal")
    bare = tk.stats.metric_summary(rows, "refusal")
    assert prefixed.to_dict() == bare.to_dict()
    assert prefixed.metric == "marker:refusal"
    assert prefixed.per_task["b"] == 1.0 and prefixed.mean == pytest.approx((0.25 + 1 + 0 + 0.25) / 4)
    with pytest.raises(tk.ConfigError, match="did you mean 'refusal'"):
        tk.stats.metric_summary(rows, "refusl")
    with pytest.raises(tk.ConfigError, match="pass_at_1"):
        tk.stats.metric_summary(rows, "pass_at1")


def test_degenerate_metric_has_no_interval_and_a_warning():
    rows = _rows()
    dead = tk.stats.metric_summary(rows, "marker:dead")
    assert dead.degenerate and dead.ci95 is None and dead.mean == 0.0
    assert "must_not_regress" in dead.warnings[0] and "13 of 13" in dead.warnings[0]
    zeros = tk.stats.metric_summary([{"scenario_id": t, "reward": 0} for t in "abcde"], "pass_at_1")
    assert zeros.degenerate and zeros.warnings[0].startswith("every row scored 0 (5 of 5); check the judge")


def test_bool_marker_values_are_skipped_and_counted():
    rows = [{"scenario_id": t, "markers": {"x": v}} for t, v in zip("abcd", [1, 0, True, "yes"])]
    result = tk.stats.metric_summary(rows, "x")
    assert result.n_rows == 2 and result.n_skipped == 2


def test_metric_summary_empty_and_few_tasks():
    empty = tk.stats.metric_summary([], "pass_at_1")
    assert empty.mean is None and "no rows" in empty.note
    two = tk.stats.metric_summary([{"scenario_id": "a", "reward": 1}, {"scenario_id": "b", "reward": 0}], "pass_at_1")
    assert two.mean == 0.5 and two.ci95 is None and "2 task(s)" in two.note
    with pytest.raises(TypeError):
        tk.stats.metric_summary(7, "pass_at_1")


def test_marker_summary_covers_every_marker():
    result = tk.stats.marker_summary(_rows())
    assert sorted(result) == ["dead", "refusal"]
    assert result["refusal"].to_dict() == tk.stats.metric_summary(_rows(), "marker:refusal").to_dict()
    assert result["dead"].degenerate
    with pytest.raises(KeyError, match="did you mean"):
        result["refusl"]
    few = tk.stats.marker_summary([{"scenario_id": "a", "markers": {"m": 1}}, {"scenario_id": "b", "markers": {"m": 0}}])
    assert "no interval for m" in few.note
    assert "no row carries markers" in tk.stats.marker_summary([{"reward": 1}]).note
    assert isinstance(result.to_dict()["markers"]["refusal"], dict)


def test_group_signal_acceptance_item_35_half_counts_as_neither():
    result = tk.group_signal([{"scenario_id": "g", "reward": r} for r in (1, 0, 0.5)])
    group = result.groups["g"]
    assert group["n1"] == 1 and group["n0"] == 1 and group["reward_mean"] == pytest.approx(0.5)
    assert result.n_mixed == 1 and result.n_in_band == 1


def test_group_signal_counts():
    groups = {
        "single": [1],
        "zeros": [0, 0, 0],
        "ones": [1, 1],
        "band": [1, 0, 1, 0],  # p = 0.5
        "easy": [1, 1, 1, 1, 1, 1, 1, 0],  # p = 0.875, mixed but out of band
    }
    rows = [{"scenario_id": t, "reward": r} for t, values in groups.items() for r in values]
    rows.append({"scenario_id": "band", "reward": True})
    result = tk.group_signal(rows)
    assert result.n_groups == 5 and result.n_single == 1
    assert result.n_all_zero == 1 and result.n_all_one == 1
    assert result.n_mixed == 2 and result.n_in_band == 1
    assert result.mixed_rate == pytest.approx(2 / 4)
    assert result.n_skipped == 1
    reference = tk.pass_at(rows, on_bad_reward="skip")  # the True reward is skipped, as group_signal counts it
    assert result.pass_at_1 == reference.pass_at_1 and result.k == reference.k == 2
    assert tk.group_signal(rows, lo=0.1, hi=0.9).n_in_band == 2
    with pytest.raises(tk.ConfigError):
        tk.group_signal(rows, lo=0.9, hi=0.1)


def test_group_signal_empty_and_singletons():
    assert "no rows" in tk.group_signal([]).note
    singles = tk.group_signal([{"scenario_id": t, "reward": 1} for t in "abc"])
    assert singles.mixed_rate is None and "repeats" in singles.note


def test_bad_level_is_refused_even_with_too_few_tasks_for_an_interval():
    with pytest.raises(tk.ConfigError, match="level"):
        tk.stats.metric_summary([{"task_id": "a", "reward": 1}], "reward", level=3)
    with pytest.raises(tk.ConfigError, match="n_resamples"):
        tk.stats.metric_summary([], "reward", n_resamples=-1)
    with pytest.raises(tk.ConfigError, match="n_resamples must be >= 100"):
        tk.stats.metric_summary([], "reward", n_resamples=99)


def test_a_degenerate_pass_line_prints_the_judge_warning():
    rows = [{"scenario_id": f"t{i}", "reward": 1} for i in range(4)]
    assert str(tk.stats.metric_summary(rows, "pass_at_1")).endswith(
        "DEGENERATE: every row scored 1 (4 of 4); check the judge before reading this number"
    )
    failed = tk.group_signal([{"scenario_id": "a", "judge_status": "error", "reason": "boom"}])
    assert failed.note.startswith("no row has a usable reward: 1 row, 1 grader error (error 1; first: boom)")
