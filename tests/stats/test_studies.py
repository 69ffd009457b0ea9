"""The teaching studies against closed forms (binomial enumeration, normal approximation)."""

import numpy as np
import pytest
from scipy import stats

import toolkit as tk


def test_unbiased_estimator_expectation_is_exact_by_binomial_enumeration():
    # Independent of the simulation: E[estimator] = sum_c Binom(c; n, p) * estimate(c).
    n, p = 10, 0.3
    for k in (1, 3, 5, 10):
        expected = sum(stats.binom.pmf(c, n, p) * tk.stats.pass_at_k_estimate(n, c, k) for c in range(n + 1))
        assert expected == pytest.approx(1 - (1 - p) ** k, abs=1e-12)


def test_bias_study_plugin_is_low_and_unbiased_is_within_noise():
    rates = np.linspace(0.05, 0.6, 20)
    study = tk.pass_at_k_bias_study(rates, n_samples=10, ks=(1, 5, 10), n_trials=3000, seed=3)
    assert study.ks == (1, 5, 10)
    # plug-in bias at k matches its exact expectation by enumeration
    for k, bias in zip(study.ks, study.plugin_bias):
        exact = np.mean([
            sum(stats.binom.pmf(c, 10, p) * (1 - (1 - c / 10) ** k) for c in range(11)) - (1 - (1 - p) ** k)
            for p in rates
        ])
        assert bias == pytest.approx(exact, abs=0.01)
    assert study.plugin_bias[0] == pytest.approx(0.0, abs=0.01)  # k = 1 is unbiased for both
    assert study.plugin_bias[1] < -0.03 and study.plugin_bias[2] < -0.03
    for bias, error in zip(study.unbiased_bias, study.unbiased_bias_standard_error):
        assert abs(bias) < 4 * error + 1e-12
    assert "plug-in" in str(study)
    assert list(study.to_pandas().columns) == ["k", "true", "plugin", "unbiased", "plugin_bias", "unbiased_bias"]


def test_bias_study_rejects_bad_input():
    with pytest.raises(ValueError, match="task_rates"):
        tk.pass_at_k_bias_study([1.5])
    with pytest.raises(ValueError, match="every k"):
        tk.pass_at_k_bias_study([0.5], n_samples=4, ks=(5,))


def test_row_bootstrap_undercovers_and_task_bootstrap_does_not():
    study = tk.interval_coverage_study(n_tasks=30, repeats=4, n_trials=200, n_resamples=1000, seed=1)
    # Closed form: the row interval's width ratio to the correct one is about 0.65 here,
    # so its coverage is near P(|Z| < 1.96 * 0.65) = 0.80.
    assert study.task_coverage_ci95[1] >= 0.93
    assert study.row_coverage_ci95[1] < 0.92
    assert study.row_mean_width < study.task_mean_width
    assert study.true_mean == pytest.approx(0.5)


def test_power_grows_with_tasks_and_matches_normal_approximation():
    study = tk.paired_power_study(n_tasks=(10, 60), effect=0.2, repeats=4, n_trials=150, seed=2)
    assert study.power[1] > study.power[0]
    # normal approximation of a paired z-test on the per-task differences
    sd = np.sqrt((0.6 * 0.4 + 0.8 * 0.2) / 4)
    approx = stats.norm.cdf(0.2 / sd * np.sqrt(60) - stats.norm.ppf(0.975))
    low, high = study.power_ci95[1]
    assert low - 0.08 <= approx <= high + 0.08
    assert set(study.to_pandas().columns) == {"n_tasks", "power", "power_low", "power_high"}
