"""tk.judge_corrected: prediction-powered pass@1 and paired deltas.

References: the closed forms of the PPI++ mean estimate (Angelopoulos, Duchi & Zrnic 2023,
arXiv:2311.01453; point estimate ``lambda mean(f) + mean_L(Y - lambda f)``, its variance and
optimal lambda written out for this design in the test below), computed here with numpy; and
coverage against the known truth of simulated suites.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import expit

import toolkit as tk
from toolkit.errors import ConfigError


def _run(rng, rates, labels, leak, miss, k=4, prefix="t", family=None):
    """k rollouts a task; a judge passing failures with prob. leak and failing passes with
    miss; ``labels`` random rows carry gold."""
    outcome = rng.random((rates.size, k)) < rates[:, None]
    flip = np.where(outcome, rng.random(outcome.shape) < miss, rng.random(outcome.shape) < leak)
    judged = outcome ^ flip
    labelled = np.zeros(outcome.size, dtype=bool)
    labelled[rng.choice(outcome.size, labels, replace=False)] = True
    labelled = labelled.reshape(outcome.shape)
    rows = []
    for i in range(rates.size):
        for j in range(k):
            row = {"task_id": f"{prefix}{i}", "rollout_id": f"{prefix}{i}-{j}", "reward": int(judged[i, j]),
                   "gold_reward": int(outcome[i, j]) if labelled[i, j] else None}
            if family is not None:
                row["cluster"] = f"c{family[i]}"
            rows.append(row)
    return rows


def _arrays(rows):
    f = np.array([r["reward"] for r in rows], dtype=float)
    mask = np.array([r["gold_reward"] is not None for r in rows])
    y = np.array([r["gold_reward"] for r in rows if r["gold_reward"] is not None], dtype=float)
    return f, mask, y


def test_point_estimates_match_the_closed_forms_at_fixed_lambda():
    rng = np.random.default_rng(0)
    rows = _run(rng, rng.beta(2, 2, 300), 80, 0.3, 0.05, k=1)
    f, mask, y = _arrays(rows)
    for lam in (0.0, 0.4, 1.0):
        expected = lam * f.mean() + np.mean(y - lam * f[mask])
        assert tk.judge_corrected(rows, lam=lam).estimate == pytest.approx(expected, abs=1e-12)
    # lambda 0 is the gold mean, whatever the judge says
    assert tk.judge_corrected(rows, lam=0.0).estimate == pytest.approx(y.mean(), abs=1e-12)


def test_tuned_lambda_and_standard_error_agree_with_the_closed_forms():
    """Every judged row feeds the judge's mean (labelled ones too), so with q = 1 - n/N::

        theta = Y_L - lambda q f_L + lambda q f_U
        Var   = (Var Y - 2 lambda q Cov(Y, f) + lambda^2 q^2 Var f) / n + lambda^2 q^2 Var f / (N - n)

    minimised at lambda = Cov(Y, f) / Var(f). (With a disjoint unlabelled sample of size N,
    PPI++'s optimum is Cov / ((1 + n/N) Var f); the two designs differ only in that.)"""
    rng = np.random.default_rng(1)
    rows = _run(rng, rng.beta(2, 2, 20_000), 2_000, 0.2, 0.1, k=1)
    f, mask, y = _arrays(rows)
    n, total = y.size, f.size
    cov = np.cov(y, f[mask])[0, 1]
    result = tk.judge_corrected(rows, n_resamples=1000)
    assert result.lam == pytest.approx(cov / f.var(ddof=1), abs=0.03)
    q = 1 - n / total
    for lam in (0.0, 0.5, 1.0):
        variance = (y.var(ddof=1) - 2 * lam * q * cov + lam**2 * q**2 * f.var(ddof=1)) / n \
            + lam**2 * q**2 * f.var(ddof=1) / (total - n)
        fixed = tk.judge_corrected(rows, lam=lam, n_resamples=1000)
        # the bootstrap standard error of the task-level Z, against the closed form
        assert fixed.standard_error == pytest.approx(math.sqrt(variance), rel=0.06), lam


def test_corrected_interval_covers_where_the_judge_alone_does_not():
    """300 suites (the benchmark runs 1,000): truth E[p] = 0.5; the judge's own rate is 0.625."""
    rng = np.random.default_rng(2)
    corrected = judge_only = 0
    for _ in range(300):
        result = tk.judge_corrected(_run(rng, rng.beta(2, 2, 100), 60, 0.3, 0.05), n_resamples=1000,
                                    seed=int(rng.integers(1 << 30)))
        corrected += result.low <= 0.5 <= result.high
        judge_only += result.judge_only[1] <= 0.5 <= result.judge_only[2]
    # binomial sd at 0.95 over 300 suites is 0.013: 0.90 is 4 sd below the target
    assert corrected / 300 >= 0.90
    assert judge_only / 300 < 0.5


def test_a_good_judge_makes_the_interval_narrower_than_gold_alone():
    rng = np.random.default_rng(3)
    result = tk.judge_corrected(_run(rng, rng.beta(2, 2, 200), 100, 0.05, 0.05), n_resamples=1000)
    corrected = result.high - result.low
    gold = result.gold_only[2] - result.gold_only[1]
    assert corrected < 0.75 * gold
    assert result.effective_labels > 1.5 * result.n_labelled
    # a useless judge (coin flips) is weighted towards 0: never much worse than gold alone
    useless = tk.judge_corrected(_run(np.random.default_rng(3), rng.beta(2, 2, 200), 100, 0.5, 0.5), n_resamples=1000)
    assert useless.lam < 0.3


def test_paired_delta_recovers_the_true_shift_with_a_biased_judge():
    """Truth E[expit(u + 0.4) - expit(u)], u ~ N(0, 1), by 2-million-draw Monte Carlo."""
    draws = np.random.default_rng(9).normal(0, 1, 2_000_000)
    truth = float(np.mean(expit(draws + 0.4) - expit(draws)))
    rng = np.random.default_rng(4)
    hits = 0
    for _ in range(200):
        u = rng.normal(0, 1, 150)
        before = _run(rng, expit(u), 80, 0.3, 0.05)
        after = _run(rng, expit(u + 0.4), 80, 0.3, 0.05)
        result = tk.judge_corrected(after, baseline=before, n_resamples=1000, seed=int(rng.integers(1 << 30)))
        assert result.paired and result.n_tasks == 150
        hits += result.low <= truth <= result.high
    assert hits / 200 >= 0.89  # sd 0.015 at 0.95


def test_cluster_widens_the_interval_on_clustered_tasks():
    rng = np.random.default_rng(5)
    family = np.repeat(np.arange(20), 10)
    rates = expit(np.repeat(rng.normal(0, 1.5, 20), 10) + rng.normal(0, 0.3, 200))
    rows = _run(rng, rates, 200, 0.1, 0.1, family=family)
    plain = tk.judge_corrected(rows, n_resamples=1000)
    clustered = tk.judge_corrected(rows, cluster="cluster", n_resamples=1000)
    assert "clustered t" in clustered.method and "clustered" not in plain.method
    assert clustered.high - clustered.low > 1.5 * (plain.high - plain.low)


def test_few_labels_are_said_in_the_printed_line():
    rng = np.random.default_rng(6)
    few = tk.judge_corrected(_run(rng, rng.beta(2, 2, 100), 12, 0.3, 0.05), n_resamples=1000)
    assert "only 12 gold labels" in str(few)
    enough = tk.judge_corrected(_run(rng, rng.beta(2, 2, 100), 60, 0.3, 0.05), n_resamples=1000)
    assert "gold labels" not in str(enough) and "judge only" in str(enough) and "gold only" in str(enough)


@pytest.mark.parametrize(("change", "message"), [
    ({"reward": float("nan")}, "row 3 (task 't0'): rows: judge score 'reward'"),
    ({"reward": 2}, "rewards must be in [0, 1]"),
    ({"gold_reward": "yes"}, "gold label 'gold_reward' is 'yes'"),
])
def test_bad_scores_are_refused_naming_the_row_and_field(change, message):
    rows = _run(np.random.default_rng(7), np.full(10, 0.5), 20, 0.1, 0.1)
    rows[3].update(change)
    with pytest.raises(ConfigError) as error:
        tk.judge_corrected(rows)
    assert message in str(error.value)


def test_refusals_and_skips():
    rows = _run(np.random.default_rng(8), np.full(10, 0.5), 20, 0.1, 0.1)
    for row in rows:
        row["gold_reward"] = None
    with pytest.raises(ConfigError, match="no judged row has a gold label"):
        tk.judge_corrected(rows)
    rows = _run(np.random.default_rng(8), np.full(10, 0.5), 20, 0.1, 0.1)
    with pytest.raises(ConfigError, match="lam must be"):
        tk.judge_corrected(rows, lam=1.5)
    with pytest.raises(ConfigError, match="level must be"):
        tk.judge_corrected(rows, level=95)
    other = _run(np.random.default_rng(8), np.full(10, 0.5), 20, 0.1, 0.1, prefix="u")
    with pytest.raises(ConfigError, match="share no task"):
        tk.judge_corrected(rows, baseline=other)
    rows[0]["reward"] = None
    result = tk.judge_corrected(rows)
    assert result.skipped == 1 and "1 rows skipped (no judge score)" in str(result)


def _judge_gains_but_gold_does_not(seed=10):
    """The after judge is more lenient (passes 40% of failures, before 10%), the agent is
    unchanged: the judge's delta is a gain, the truth is 0."""
    rng = np.random.default_rng(seed)
    rates = rng.beta(2, 2, 120)
    before = _run(rng, rates, 120, 0.1, 0.05)
    after = _run(rng, rates, 120, 0.4, 0.05)
    return before, after


def test_delta_report_with_gold_fails_a_gain_gold_does_not_confirm():
    before, after = _judge_gains_but_gold_does_not()
    # run_std: a known re-run noise floor, so one run a side can PASS
    plain = tk.delta_report(before, after, run_std=0.01)
    assert plain.headline.startswith("PASS") and plain.ok  # fooled by the lenient judge
    checked = tk.delta_report(before, after, gold="gold_reward", run_std=0.01)
    assert not checked.ok and checked.headline.startswith("FAIL")
    assert "not confirmed against gold" in checked.headline
    assert checked.judge_corrected.paired and checked.judge_corrected.low <= 0 <= checked.judge_corrected.high
    assert "gold-checked: delta pass@1 judge-corrected" in str(checked)


def test_delta_report_with_gold_keeps_a_real_gain_and_says_when_it_cannot_check():
    rng = np.random.default_rng(11)
    u = rng.normal(0, 1, 150)
    before = _run(rng, expit(u), 150, 0.1, 0.05)
    after = _run(rng, expit(u + 1.0), 150, 0.1, 0.05)
    checked = tk.delta_report(before, after, gold="gold_reward", run_std=0.01)
    assert checked.ok and checked.headline.startswith("PASS")
    assert checked.judge_corrected.low > 0
    for row in before:
        row["gold_reward"] = None
    unchecked = tk.delta_report(before, after, gold="gold_reward", run_std=0.01)
    assert unchecked.judge_corrected is None
    assert any("no before row carries a gold label" in w for w in unchecked.warnings)
