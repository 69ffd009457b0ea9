"""bootstrap_ci and sign_flip_test against scipy and brute-force enumeration."""

import itertools
import math

import numpy as np
import pytest
import scipy.stats
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

import toolkit as tk


def _data(n, seed=3):
    rng = np.random.default_rng(seed)
    return rng.binomial(8, rng.beta(2, 2, n)) / 8


def _mean(x, axis=-1):
    return np.mean(x, axis=axis)


# --------------------------------------------------------------------------- bootstrap


@pytest.mark.parametrize("method", ["percentile", "BCa"])
@pytest.mark.parametrize("n", [5, 40, 300])
@pytest.mark.parametrize("statistic", ["mean", "median"])
def test_bootstrap_equals_scipy_given_the_same_generator(method, n, statistic):
    # Continuous data: on a grid the jackknife medians tie and BCa is undefined (next test).
    x = np.random.default_rng(n).gamma(2.0, 1.0, n)
    function = np.mean if statistic == "mean" else np.median
    reference = stats.bootstrap(
        (x,), function, method=method, n_resamples=2000, confidence_level=0.9,
        rng=np.random.default_rng(7), vectorized=True,
    )
    ours = tk.bootstrap_ci(
        x, statistic=statistic, method=method.lower(), level=0.9, n_resamples=2000,
        seed=np.random.default_rng(7),
    )
    np.testing.assert_allclose(
        [ours.confidence_interval.low, ours.confidence_interval.high],
        [reference.confidence_interval.low, reference.confidence_interval.high],
        rtol=1e-12, atol=1e-14,
    )
    np.testing.assert_allclose(ours.standard_error, reference.standard_error, rtol=1e-12)
    assert ours.estimate == pytest.approx(function(x))
    assert ours.n == n and ours.level == 0.9 and ours.method == method.lower()


# scipy's own BCa (the reference) divides 0 by 0 here; that warning is the point of the test.
@pytest.mark.filterwarnings("ignore:invalid value encountered in scalar divide:RuntimeWarning")
def test_bca_falls_back_to_percentile_with_a_note_where_scipy_gives_nan():
    x = _data(300)  # eighths: every jackknife median is equal, so the acceleration is 0/0
    with pytest.warns(stats.DegenerateDataWarning):
        reference = stats.bootstrap((x,), np.median, method="BCa", n_resamples=500,
                                    rng=np.random.default_rng(1), vectorized=True)
    assert np.isnan(reference.confidence_interval.low)
    ours = tk.bootstrap_ci(x, statistic="median", method="bca", n_resamples=500, seed=1)
    percentile = tk.bootstrap_ci(x, statistic="median", n_resamples=500, seed=1)
    assert (ours.low, ours.high) == (percentile.low, percentile.high)
    assert "percentile interval is shown instead" in ours.note


def test_bootstrap_integer_seed_is_default_rng_stream_and_chunking_does_not_matter():
    x = _data(120)
    reference = stats.bootstrap((x,), np.mean, method="BCa", n_resamples=3000,
                                rng=np.random.default_rng(11), vectorized=True)
    for batch in (None, 1, 7, 3000):
        ours = tk.bootstrap_ci(x, method="bca", n_resamples=3000, seed=11, batch=batch)
        assert ours.low == pytest.approx(reference.confidence_interval.low, abs=1e-14)
        assert ours.high == pytest.approx(reference.confidence_interval.high, abs=1e-14)


def test_bootstrap_callable_statistic_with_and_without_axis():
    x = _data(60)
    reference = stats.bootstrap((x,), np.std, method="percentile", n_resamples=1000,
                                rng=np.random.default_rng(5), vectorized=True)
    with_axis = tk.bootstrap_ci(x, statistic=np.std, n_resamples=1000, seed=5)
    without_axis = tk.bootstrap_ci(x, statistic=lambda a: float(np.std(a)), n_resamples=1000, seed=5)
    for ours in (with_axis, without_axis):
        assert ours.low == pytest.approx(reference.confidence_interval.low, rel=1e-12)
        assert ours.high == pytest.approx(reference.confidence_interval.high, rel=1e-12)


def test_bootstrap_constant_small_and_empty_inputs():
    constant = tk.bootstrap_ci([0.75] * 4)
    assert tuple(constant.confidence_interval) == (0.75, 0.75)
    assert constant.standard_error == 0.0 and "equal" in constant.note
    two = tk.bootstrap_ci([0.1, 0.9])
    assert two.confidence_interval.low is None and two.confidence_interval.high is None
    assert two.estimate == pytest.approx(0.5)
    assert "2 value(s)" in two.note and "at least 3" in two.note
    empty = tk.bootstrap_ci([])
    assert empty.estimate is None and empty.low is None and empty.note
    assert "no interval" in str(two)
    assert tk.bootstrap_ci([1, 2, 3]).to_dict()["confidence_interval"]["low"] is not None


def test_bootstrap_rejects_bad_input_by_name():
    with pytest.raises(tk.ConfigError, match=r"values\[1\]"):
        tk.bootstrap_ci([0.1, float("nan"), 0.3])
    with pytest.raises(tk.ConfigError, match="1-D"):
        tk.bootstrap_ci([[1, 2], [3, 4]])
    with pytest.raises(tk.ConfigError, match="did you mean 'bca'"):
        tk.bootstrap_ci([1, 2, 3], method="bcaa")
    with pytest.raises(tk.ConfigError, match="level"):
        tk.bootstrap_ci([1, 2, 3], level=95)
    with pytest.raises(TypeError):
        tk.bootstrap_ci("abc")


def test_bootstrap_percentile_covers_the_mean_about_as_often_as_claimed():
    # 200 normal samples of 30: a 90% interval should cover the true mean ~90% of the time.
    rng = np.random.default_rng(0)
    hits = 0
    for i in range(200):
        sample = rng.normal(1.0, 1.0, 30)
        result = tk.bootstrap_ci(sample, level=0.9, n_resamples=500, seed=i)
        hits += result.low <= 1.0 <= result.high
    # Binomial(200, 0.9) lies in [160, 196] with probability > 0.999; the percentile
    # bootstrap under-covers slightly at n = 30, hence the lower edge.
    assert 160 <= hits <= 196


# --------------------------------------------------------------------------- sign flip


def _brute_force_p(diffs, alternative):
    """Enumerate every sign pattern with itertools.product; same tie convention."""
    d = np.asarray(diffs, dtype=float)
    n = d.size
    observed = d.mean()
    tolerance = 1e-12 * np.abs(d).sum() / n
    hits = 0
    for signs in itertools.product((1.0, -1.0), repeat=n):
        null = float(np.dot(signs, d)) / n
        if alternative == "greater":
            hits += null >= observed - tolerance
        elif alternative == "less":
            hits += null <= observed + tolerance
        else:
            hits += abs(null) >= abs(observed) - tolerance
    return hits / 2**n


diff_values = st.one_of(
    st.integers(-4, 4).map(float),  # many exact ties
    st.floats(-5, 5, allow_nan=False, allow_subnormal=False).filter(lambda v: v == 0 or abs(v) > 1e-6),
)


@given(st.lists(diff_values, min_size=1, max_size=10), st.sampled_from(["two-sided", "greater", "less"]))
def test_exact_sign_flip_equals_brute_force_enumeration(diffs, alternative):
    result = tk.sign_flip_test(diffs, alternative=alternative)
    assert result.method == "exact"
    assert result.n_patterns == 2 ** len(diffs)
    assert result.mc_standard_error == 0.0
    assert result.pvalue == pytest.approx(_brute_force_p(diffs, alternative), abs=1e-12)


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_exact_sign_flip_equals_scipy_permutation_test_n12(alternative):
    diffs = np.random.default_rng(12).normal(0.05, 0.2, 12)
    reference = stats.permutation_test(
        (diffs,), _mean, permutation_type="samples", n_resamples=np.inf,
        alternative=alternative, vectorized=True,
    )
    ours = tk.sign_flip_test(diffs, alternative=alternative)
    assert ours.pvalue == pytest.approx(reference.pvalue, abs=1e-12)
    assert ours.statistic == pytest.approx(reference.statistic)


def test_sign_flip_zero_diffs_and_empty():
    zero = tk.sign_flip_test([0.0] * 7)
    assert zero.pvalue == 1.0 and zero.statistic == 0.0 and zero.note
    empty = tk.sign_flip_test([])
    assert empty.pvalue is None and empty.method == "none" and empty.note


def test_sign_flip_all_positive_small_n_exact_values():
    # all six diffs positive: only the all-plus and all-minus patterns are as extreme.
    assert tk.sign_flip_test([1] * 6).pvalue == pytest.approx(2 / 64)
    assert tk.sign_flip_test([1] * 5).pvalue == pytest.approx(2 / 32)
    assert tk.sign_flip_test([1] * 6, alternative="greater").pvalue == pytest.approx(1 / 64)


def test_monte_carlo_has_plus_one_correction_and_standard_error():
    diffs = np.ones(40)
    result = tk.sign_flip_test(diffs, n_resamples=999, seed=1)
    assert result.method == "monte_carlo" and result.n_resamples == 999 and result.n_patterns is None
    # No random pattern of 40 signs reaches all-plus (chance 2^-39 per draw).
    assert result.pvalue == pytest.approx(1 / 1000)
    assert result.mc_standard_error == pytest.approx(np.sqrt(result.pvalue * (1 - result.pvalue) / 999))


def test_monte_carlo_agrees_with_exact_and_with_scipy():
    diffs = np.random.default_rng(4).normal(0.04, 0.2, 16)
    exact = tk.sign_flip_test(diffs)
    monte_carlo = tk.sign_flip_test(diffs, exact=False, n_resamples=20_000, seed=2)
    assert abs(monte_carlo.pvalue - exact.pvalue) < 5 * monte_carlo.mc_standard_error
    wide = np.random.default_rng(5).normal(0.02, 0.2, 200)
    ours = tk.sign_flip_test(wide, n_resamples=20_000, seed=3)
    reference = stats.permutation_test((wide,), _mean, permutation_type="samples",
                                       n_resamples=20_000, vectorized=True, rng=np.random.default_rng(3))
    assert abs(ours.pvalue - reference.pvalue) < 6 * ours.mc_standard_error


def test_sign_flip_symmetry_and_forced_exact_above_auto_limit():
    diffs = np.random.default_rng(9).normal(0.1, 0.3, 24)
    greater = tk.sign_flip_test(diffs, alternative="greater", exact=True)
    less = tk.sign_flip_test(-diffs, alternative="less", exact=True)
    assert greater.method == "exact" and greater.n_patterns == 2**24
    assert greater.pvalue == pytest.approx(less.pvalue, abs=1e-15)
    two_sided = tk.sign_flip_test(diffs, exact=True)
    assert two_sided.pvalue == pytest.approx(min(1.0, 2 * greater.pvalue), abs=1e-12)
    assert tk.sign_flip_test(diffs).method == "monte_carlo"  # auto stops at n = 20


def test_sign_flip_rejects_bad_arguments():
    with pytest.raises(tk.ConfigError, match="did you mean 'two-sided'"):
        tk.sign_flip_test([1, 2], alternative="two_sided")
    with pytest.raises(tk.ConfigError, match="n <= 40"):
        tk.sign_flip_test(np.ones(41), exact=True)
    with pytest.raises(ValueError, match=r"diffs\[0\]"):
        tk.sign_flip_test([float("inf"), 1.0])
    assert "p = " in str(tk.sign_flip_test([0.1, 0.2, -0.05]))


# --------------------------------------------------------------------------- issue 14


def test_clustered_mean_equals_statsmodels_cluster_robust_ols():
    import statsmodels.api as sm

    rng = np.random.default_rng(5)
    clusters = np.repeat(np.arange(12), rng.integers(2, 7, 12))
    values = rng.normal(0, 1, 12)[clusters] + rng.normal(0, 1, clusters.size)
    result = tk.stats.clustered_mean(values, clusters, level=0.9)
    fit = sm.OLS(values, np.ones(values.size)).fit(cov_type="cluster", cov_kwds={"groups": clusters})
    g = 12
    # statsmodels' default small-sample factor is G/(G-1) x (N-1)/(N-K); with K = 1 (an
    # intercept) it is G/(G-1), our CR1 factor, so the se agree; without the correction
    # statsmodels gives Miller's uncorrected se, sqrt((G-1)/G) of ours.
    assert result.standard_error == pytest.approx(float(fit.bse[0]), rel=1e-10)
    bare = sm.OLS(values, np.ones(values.size)).fit(
        cov_type="cluster", cov_kwds={"groups": clusters, "use_correction": False})
    assert float(bare.bse[0]) == pytest.approx(result.standard_error * math.sqrt((g - 1) / g), rel=1e-10)
    half = scipy.stats.t.ppf(0.95, g - 1) * result.standard_error
    assert (result.low, result.high) == pytest.approx((values.mean() - half, values.mean() + half), abs=1e-12)
    assert result.n_clusters == 12 and result.df == 11
    assert result.design_effect == pytest.approx((result.standard_error / scipy.stats.sem(values)) ** 2)
    one = tk.stats.clustered_mean([1.0, 2.0], ["a", "a"])
    assert one.low is None and "one cluster" in one.note
    with pytest.raises(tk.ConfigError, match=r"clusters\[1\] is None"):
        tk.stats.clustered_mean([1.0, 2.0], ["a", None])
    with pytest.raises(tk.ConfigError, match="2 labels for 3 values"):
        tk.stats.clustered_mean([1.0, 2.0, 3.0], ["a", "b"])


def test_cluster_bootstrap_resamples_whole_clusters():
    # Reference: the same resample indices drawn by hand (G clusters with replacement),
    # each resample's mean = sum of picked cluster sums / sum of their sizes.
    values = np.array([0.0, 1.0, 1.0, 0.5, 0.2, 0.9, 0.4])
    clusters = ["a", "a", "b", "b", "b", "c", "d"]
    result = tk.bootstrap_ci(values, clusters=clusters, n_resamples=2000, seed=4)
    rng = np.random.default_rng(4)
    sums, sizes = np.array([1.0, 1.7, 0.9, 0.4]), np.array([2, 3, 1, 1])
    picks = rng.integers(0, 4, (2000, 4))
    reference = np.quantile(sums[picks].sum(1) / sizes[picks].sum(1), [0.025, 0.975])
    assert (result.low, result.high) == pytest.approx(tuple(reference), abs=1e-12)
    assert result.n_clusters == 4 and result.clustered_se is not None
    with pytest.raises(tk.ConfigError, match="clusters= supports statistic='mean' or 'median'"):
        tk.bootstrap_ci(values, method="bca", clusters=clusters)


def test_cluster_sign_flip_enumerates_cluster_sums_and_min_p_skips_ties():
    diffs = np.array([0.5, 0.25, -0.25, 0.75, 0.0, 0.5, 1.0, 0.25])
    clusters = [0, 0, 1, 1, 2, 3, 3, 4]
    result = tk.sign_flip_test(diffs, clusters=clusters)
    sums = np.array([0.75, 0.5, 0.0, 1.5, 0.25])
    hits = sum(abs(np.dot(s, sums)) >= abs(sums.sum()) - 1e-12 for s in itertools.product([-1, 1], repeat=5))
    assert result.pvalue == pytest.approx(hits / 32) and result.n_clusters == 5
    assert result.statistic == pytest.approx(diffs.mean())
    # One cluster sums to 0: it flips to itself, so only 4 clusters count: 2 / 2^4.
    assert result.min_pvalue == pytest.approx(2 / 16)
    assert tk.sign_flip_test([1.0, 0.0, 0.0, 2.0]).min_pvalue == pytest.approx(2 / 4)
    assert tk.sign_flip_test([1.0, 0.0, 0.0, 2.0], alternative="greater").min_pvalue == pytest.approx(1 / 4)


def test_n_resamples_below_100_is_refused_and_below_1000_warns():
    with pytest.raises(tk.ConfigError, match="n_resamples must be >= 100"):
        tk.bootstrap_ci([1.0, 2.0, 3.0], n_resamples=1)
    with pytest.raises(tk.ConfigError, match="n_resamples must be >= 100"):
        tk.sign_flip_test([1.0, 2.0, 3.0], n_resamples=99)
    with pytest.warns(UserWarning, match="n_resamples=500 is below 1000"):
        tk.bootstrap_ci([1.0, 2.0, 3.0], n_resamples=500)


def test_multinomial_path_has_the_index_bootstrap_distribution():
    # 60,000 pass rates over 4 rollouts (5 distinct values): n x B passes the 5e7-cell
    # threshold, so resamples are multinomial counts. Reference: the normal interval of the
    # mean, which a bootstrap of 60k values matches to ~1e-4.
    rng = np.random.default_rng(1)
    values = rng.binomial(4, 0.3, 60_000) / 4
    result = tk.bootstrap_ci(values, n_resamples=2000, seed=0)
    se = values.std() / math.sqrt(values.size)
    assert result.low == pytest.approx(values.mean() - 1.96 * se, abs=3e-4)
    assert result.high == pytest.approx(values.mean() + 1.96 * se, abs=3e-4)
    assert result.standard_error == pytest.approx(se, rel=0.05)


def test_sign_flip_normal_limit_for_very_many_pairs_matches_monte_carlo():
    # 60,000 pairs at 10,000 resamples pass the look-up budget: exact="auto" reads p from the
    # normal limit. Reference: the Monte Carlo sign flip itself (exact=False) at 4,000 patterns.
    rng = np.random.default_rng(3)
    d = (rng.binomial(4, 0.5, 60_000) - rng.binomial(4, 0.5, 60_000)) / 4
    d[:800] += 0.25  # a small shift, so p sits in the informative range
    fast = tk.sign_flip_test(d)
    slow = tk.sign_flip_test(d, exact=False, n_resamples=4000, seed=1)
    assert fast.method == "normal" and "Berry-Esseen" in fast.note and "normal limit" in str(fast)
    assert 0.0005 < slow.pvalue < 0.5
    assert fast.pvalue == pytest.approx(slow.pvalue, abs=4 * slow.mc_standard_error + 0.002)
    tiny = tk.sign_flip_test(np.ones(200_000))
    assert tiny.pvalue > 0.0  # never 0, even where the tail underflows


def test_cluster_bootstrap_median_pools_the_units_of_the_drawn_clusters():
    # Reference: the same index stream, each resample's pooled units built by a Python loop.
    values = np.array([0.0, 1.0, 1.0, 0.5, 0.2, 0.9, 0.4, 0.3])
    clusters = ["a", "a", "b", "b", "b", "c", "d", "d"]
    result = tk.bootstrap_ci(values, statistic="median", clusters=clusters, n_resamples=1000, seed=2)
    members = {0: [0.0, 1.0], 1: [1.0, 0.5, 0.2], 2: [0.9], 3: [0.4, 0.3]}
    picks = np.random.default_rng(2).integers(0, 4, (1000, 4))
    medians = [np.median([v for c in row for v in members[c]]) for row in picks]
    assert (result.low, result.high) == pytest.approx(tuple(np.quantile(medians, [0.025, 0.975])), abs=1e-12)
