"""tk.holdout_size / tk.detectable_effect against closed forms, statsmodels and simulation.

Acceptance facts (docs/design/engine.md §10 items 17-18) were stated with z = 1.96 + 0.8416; they hold
unchanged with the exact quantiles norm.ppf(0.975) + norm.ppf(0.8) = 2.8015852 that the
toolkit uses, and the tests below pin them at that precision.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import norm
from statsmodels.stats.power import NormalIndPower, TTestPower

import toolkit as tk

Z_TOTAL = norm.ppf(0.975) + norm.ppf(0.8)


def rows_with_counts(counts: list[int], k: int, prefix: str = "t") -> list[dict]:
    """k rollouts per task, the first counts[i] of them passing (exact per-task rates)."""
    rows = []
    for i, passed in enumerate(counts):
        for j in range(k):
            rows.append({"schema_version": "1", "task_id": f"{prefix}{i}", "prompt": "p",
                         "steps": [], "final_text": "x", "reward": 1 if j < passed else 0})
    return rows


# ------------------------------------------------------------------ acceptance facts


def test_holdout_size_acceptance_item_17():
    result = tk.holdout_size(0.05)
    assert round(result.sd, 4) == 0.3419
    assert result.sd == pytest.approx(math.sqrt((0.6 * 0.4 + 0.65 * 0.35) / 4), abs=1e-15)
    assert result.n == 367
    assert round(result.half_width, 3) == 0.035
    assert result.concentrated_n == 409
    assert result.sd_source == "binomial_model" and not result.saturated
    wider = tk.holdout_size(0.10)
    assert (wider.n, wider.concentrated_n) == (89, 106)


@pytest.mark.parametrize("n, expected", [(20, 0.198), (50, 0.131), (100, 0.094), (140, 0.080), (367, 0.050)])
def test_detectable_effect_acceptance_item_18(n, expected):
    result = tk.detectable_effect(n)
    assert round(result.effect, 3) == expected
    # It is the fixed point effect = z sd(effect) / sqrt(n) of the binomial model.
    sd = math.sqrt((0.24 + (0.6 + result.effect) * (0.4 - result.effect)) / 4)
    assert result.effect == pytest.approx(Z_TOTAL * sd / math.sqrt(n), abs=1e-10)


def test_formula_with_exact_quantiles():
    result = tk.holdout_size(0.07, task_std=0.25, alpha=0.01, power=0.9)
    raw = ((norm.ppf(0.995) + norm.ppf(0.9)) * 0.25 / 0.07) ** 2
    assert result.n == math.ceil(raw)
    assert result.sd_source == "task_std"


# ------------------------------------------------------------------ statsmodels cross-check


@pytest.mark.parametrize("effect, sd, alpha, power", [
    (0.05, 0.3419, 0.05, 0.8), (0.1, 0.2, 0.05, 0.9), (0.03, 0.4, 0.01, 0.8), (0.2, 0.5, 0.1, 0.95),
])
def test_matches_statsmodels_normal_power(effect, sd, alpha, power):
    ours = tk.holdout_size(effect, task_std=sd, alpha=alpha, power=power).n
    # ratio=0 is statsmodels' one-sample case: the paired test on per-task differences.
    # alternative="larger" at alpha/2 is exactly our one-tail approximation.
    one_tail = NormalIndPower().solve_power(effect_size=effect / sd, alpha=alpha / 2, power=power,
                                            ratio=0, alternative="larger")
    assert ours == max(2, math.ceil(one_tail - 1e-9))
    # statsmodels' two-sided solve also counts the far tail's power, so it may need a hair less.
    two_sided = NormalIndPower().solve_power(effect_size=effect / sd, alpha=alpha, power=power, ratio=0)
    assert ours - 1 < two_sided <= ours


def test_t_based_paired_power_needs_slightly_more():
    # The paired t-test (TTestPower) pays a little for estimating sd; our z sizing is the
    # large-n limit, so it is at most a couple of tasks below the t answer at these sizes.
    ours = tk.holdout_size(0.05, task_std=0.3).n
    t_based = TTestPower().solve_power(effect_size=0.05 / 0.3, alpha=0.05, power=0.8)
    assert ours <= math.ceil(t_based) <= ours + 2


# ------------------------------------------------------------------ models


def test_concentrated_variance_matches_simulation():
    # Simulate the concentrated-gain model: share f of tasks go to rate 1, the rest stay at
    # p; each rate is a mean of k Bernoulli draws. Compare the sd of paired differences.
    rng = np.random.default_rng(7)
    p, k, effect, tasks = 0.6, 4, 0.05, 400_000
    f = effect / (1 - p)
    moved = rng.random(tasks) < f
    before = rng.binomial(k, p, tasks) / k
    after = np.where(moved, 1.0, rng.binomial(k, p, tasks) / k)
    simulated = float(np.std(after - before, ddof=1))
    result = tk.holdout_size(effect)
    assert result.concentrated_sd == pytest.approx(simulated, rel=0.01)
    assert float(np.mean(after - before)) == pytest.approx(effect, abs=0.003)


def test_measured_paired_sd_is_used():
    before = rows_with_counts([0, 1, 2, 3, 4, 2, 1, 0, 3, 2], k=4)
    after = rows_with_counts([1, 1, 3, 4, 4, 2, 2, 1, 3, 4], k=4)
    diffs = np.array([1, 0, 1, 1, 0, 0, 1, 1, 0, 2]) / 4
    result = tk.holdout_size(0.1, before=before, after=after)
    assert result.sd_source == "measured_pairs"
    assert result.n_pairs_measured == 10
    assert result.sd == pytest.approx(np.std(diffs, ddof=1))
    assert result.n == math.ceil((Z_TOTAL * np.std(diffs, ddof=1) / 0.1) ** 2)
    # before= sets the base rate for the concentrated count.
    assert result.base == pytest.approx(18 / 40)


def test_saturated_suite_never_sizes_from_zero_sd():
    # #392: every task passes on both sides; sd 0 would give "2 tasks".
    before = rows_with_counts([4] * 12, k=4)
    after = rows_with_counts([4] * 12, k=4)
    result = tk.holdout_size(0.05, before=before, after=after)
    assert result.saturated
    assert result.sd_source == "binomial_model"
    assert result.n == 367  # the model at base 0.6
    assert "saturated" in result.note and "0.6" in result.note
    assert "saturated" in str(result)


def test_high_base_is_saturated():
    result = tk.holdout_size(0.05, base=0.95)
    assert result.saturated and result.base == 0.6 and result.n == 367
    assert "ceiling" in result.note


def test_detectable_effect_with_given_sd_is_closed_form():
    result = tk.detectable_effect(100, task_std=0.3)
    assert result.effect == pytest.approx(Z_TOTAL * 0.3 / 10)


def test_detectable_effect_too_few_tasks_says_so():
    result = tk.detectable_effect(2)
    assert result.effect is None
    assert "holdout_size" in result.note


@given(st.integers(min_value=10, max_value=5000))
def test_detectable_and_holdout_are_inverse(n):
    effect = tk.detectable_effect(n).effect
    # holdout_size rounds up, so the effect detectable at n needs n tasks (or one more for
    # the floating-point ceiling at an exact root).
    assert tk.holdout_size(effect).n in (n, n + 1)


@given(st.floats(min_value=0.01, max_value=0.39), st.floats(min_value=0.05, max_value=0.5))
def test_more_effect_needs_fewer_tasks(effect, sd):
    small = tk.holdout_size(effect, task_std=sd).n
    large = tk.holdout_size(min(effect * 1.5, 0.99), task_std=sd).n
    assert large <= small


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize("kwargs", [
    dict(effect=0), dict(effect=1.5), dict(effect=True), dict(effect=0.05, alpha=0),
    dict(effect=0.05, power=1), dict(effect=0.05, k=0), dict(effect=0.05, task_std=0),
    dict(effect=0.5),  # 0.6 + 0.5 > 1
])
def test_bad_arguments_raise_config_error(kwargs):
    effect = kwargs.pop("effect")
    with pytest.raises(tk.ConfigError):
        tk.holdout_size(effect, **kwargs)


def test_after_without_before_raises():
    with pytest.raises(tk.ConfigError, match="before"):
        tk.holdout_size(0.05, after=rows_with_counts([1, 2], 4))


def test_results_serialise_and_print():
    import json

    result = tk.holdout_size(0.05)
    json.dumps(result.to_dict())
    assert "367 tasks" in str(result) and "\n" not in str(result)
    json.dumps(tk.detectable_effect(50).to_dict())
