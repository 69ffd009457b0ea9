"""Small simulation studies that show why the toolkit's statistics are built as they are.

They exist for teaching (notebook ``01_measuring_agents``) and for checking a design choice
on your own numbers: each draws synthetic tasks whose true pass rates are known, applies an
estimator or an interval many times, and reports how it behaved against the truth.

* :func:`pass_at_k_bias_study`: the plug-in pass@k, ``1 - (1 - c/n)^k``, is biased low;
  the unbiased estimator of Chen et al. (2021, arXiv 2107.03374) is not.
* :func:`interval_coverage_study`: a bootstrap that resamples *rows* treats the k
  rollouts of one task as independent evidence and under-covers when tasks differ; one that
  resamples *tasks* keeps its nominal level (Efron & Tibshirani 1993, ch. 6, on resampling
  the independent units; rlhfbook.com ch. 16 on evaluation).
* :func:`paired_power_study`: how often the paired sign-flip test detects a given
  improvement with a given number of tasks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from toolkit._util.results import Result
from toolkit._util.validate import check_count, check_share
from toolkit.stats.agreement import wilson
from toolkit.stats.passk import pass_at_k_estimate
from toolkit.stats.resampling import bootstrap_ci, sign_flip_test

__all__ = [
    "pass_at_k_bias_study",
    "PassAtKBiasStudy",
    "interval_coverage_study",
    "IntervalCoverageStudy",
    "paired_power_study",
    "PairedPowerStudy",
]


@dataclass(frozen=True)
class PassAtKBiasStudy(Result):
    """Mean plug-in and unbiased pass@k against the true value, for each k."""

    ks: tuple[int, ...]
    true_pass_at_k: tuple[float, ...]
    plugin_mean: tuple[float, ...]
    unbiased_mean: tuple[float, ...]
    plugin_bias: tuple[float, ...]
    unbiased_bias: tuple[float, ...]
    unbiased_bias_standard_error: tuple[float, ...]
    n_samples: int
    n_tasks: int
    n_trials: int

    def __str__(self) -> str:
        k = self.ks[-1]
        return (
            f"pass@{k} bias over {self.n_trials} trials of {self.n_tasks} tasks with n={self.n_samples}: "
            f"plug-in {self.plugin_bias[-1]:+.4f}, unbiased {self.unbiased_bias[-1]:+.4f} "
            f"(± {1.96 * self.unbiased_bias_standard_error[-1]:.4f})"
        )

    def to_pandas(self):
        import pandas as pd

        return pd.DataFrame({
            "k": self.ks,
            "true": self.true_pass_at_k,
            "plugin": self.plugin_mean,
            "unbiased": self.unbiased_mean,
            "plugin_bias": self.plugin_bias,
            "unbiased_bias": self.unbiased_bias,
        })


def pass_at_k_bias_study(
    task_rates, n_samples: int = 10, ks=None, n_trials: int = 2000, seed: int = 0
) -> PassAtKBiasStudy:
    """Draw ``n_samples`` rollouts per task ``n_trials`` times; average each estimator.

    True pass@k of a task with rate p is ``1 - (1 - p)^k``, averaged over tasks. The plug-in
    estimate replaces p by c/n; since ``1 - (1 - x)^k`` is concave in x, Jensen's inequality
    makes it biased low. The unbiased estimator ``1 - C(n-c, k)/C(n, k)`` averages exactly
    to the truth; its reported bias is Monte Carlo noise (its standard error is given).

    Parameters
    ----------
    task_rates : array_like of float
        The true pass rate of each task, a non-empty 1-D sequence of values in [0, 1].
    n_samples : int, optional
        Rollouts drawn per task in each trial (the ``n`` of the estimators), ``>= 1``;
        default 10.
    ks : iterable of int or None, optional
        The k values to study, each in ``1..n_samples``; default None, every k from 1 to
        ``n_samples``.
    n_trials : int, optional
        Simulated repetitions of the whole suite, ``>= 1``; default 2000. The standard
        error of the unbiased bias is 0.0 when it is 1.
    seed : int, optional
        Seed of ``numpy.random.default_rng``; default 0.

    Returns
    -------
    PassAtKBiasStudy
        Per k: ``true_pass_at_k``, ``plugin_mean``, ``unbiased_mean``, ``plugin_bias``,
        ``unbiased_bias`` and ``unbiased_bias_standard_error``; with ``ks``, ``n_samples``,
        ``n_tasks`` and ``n_trials``.

    Raises
    ------
    ValueError
        When ``task_rates`` is not a non-empty 1-D sequence of rates in [0, 1], a count is
        not an integer ``>= 1``, or a k is outside ``1..n_samples``.

    References
    ----------
    .. [1] M. Chen et al., "Evaluating Large Language Models Trained on Code", 2021,
       arXiv:2107.03374.
    """
    rates = np.asarray(task_rates, dtype=float)
    if rates.ndim != 1 or rates.size == 0 or np.any((rates < 0) | (rates > 1)):
        raise ValueError("task_rates must be a non-empty 1-D sequence of rates in [0, 1]")
    n_samples = check_count("n_samples", n_samples)
    n_trials = check_count("n_trials", n_trials)
    ks = tuple(range(1, n_samples + 1)) if ks is None else tuple(int(k) for k in ks)
    if any(k < 1 or k > n_samples for k in ks):
        raise ValueError(f"every k must be in 1..n_samples={n_samples}; got {ks}")
    rng = np.random.default_rng(seed)
    successes = rng.binomial(n_samples, rates, size=(n_trials, rates.size))
    # Tabulate the unbiased estimate for every possible c once (n_samples + 1 values).
    true, plugin_mean, unbiased_mean, plugin_bias, unbiased_bias, unbiased_se = [], [], [], [], [], []
    for k in ks:
        truth = float(np.mean(1.0 - (1.0 - rates) ** k))
        table = np.array([pass_at_k_estimate(n_samples, c, k) for c in range(n_samples + 1)])
        unbiased_per_trial = table[successes].mean(axis=1)
        plugin_per_trial = (1.0 - (1.0 - successes / n_samples) ** k).mean(axis=1)
        true.append(truth)
        plugin_mean.append(float(plugin_per_trial.mean()))
        unbiased_mean.append(float(unbiased_per_trial.mean()))
        plugin_bias.append(float(plugin_per_trial.mean() - truth))
        unbiased_bias.append(float(unbiased_per_trial.mean() - truth))
        unbiased_se.append(float(unbiased_per_trial.std(ddof=1) / np.sqrt(n_trials)) if n_trials > 1 else 0.0)
    return PassAtKBiasStudy(
        ks=ks,
        true_pass_at_k=tuple(true),
        plugin_mean=tuple(plugin_mean),
        unbiased_mean=tuple(unbiased_mean),
        plugin_bias=tuple(plugin_bias),
        unbiased_bias=tuple(unbiased_bias),
        unbiased_bias_standard_error=tuple(unbiased_se),
        n_samples=n_samples,
        n_tasks=int(rates.size),
        n_trials=n_trials,
    )


@dataclass(frozen=True)
class IntervalCoverageStudy(Result):
    """How often each interval contained the true mean pass rate of the task population."""

    level: float
    task_coverage: float
    task_coverage_ci95: tuple[float, float]
    row_coverage: float
    row_coverage_ci95: tuple[float, float]
    task_mean_width: float
    row_mean_width: float
    n_tasks: int
    repeats: int
    n_trials: int
    true_mean: float

    def __str__(self) -> str:
        return (
            f"nominal {self.level:.0%}: resampling tasks covers {self.task_coverage:.1%} "
            f"[{self.task_coverage_ci95[0]:.1%}..{self.task_coverage_ci95[1]:.1%}], resampling rows "
            f"{self.row_coverage:.1%} [{self.row_coverage_ci95[0]:.1%}..{self.row_coverage_ci95[1]:.1%}] "
            f"({self.n_trials} trials, {self.n_tasks} tasks x {self.repeats} repeats)"
        )


def interval_coverage_study(
    n_tasks: int = 30,
    repeats: int = 4,
    *,
    alpha: float = 0.6,
    beta: float = 0.6,
    level: float = 0.95,
    n_trials: int = 400,
    n_resamples: int = 2000,
    seed: int = 0,
) -> IntervalCoverageStudy:
    """Coverage of task-level and row-level percentile bootstraps of pass@1.

    Each trial draws ``n_tasks`` task pass rates from Beta(alpha, beta) (the default, a
    U-shaped 0.6/0.6, makes tasks differ as agent suites do: many nearly always or nearly
    never solved), then ``repeats`` 0/1 rollouts per task. The estimand is the population
    mean ``alpha / (alpha + beta)``. Resampling rows ignores that rollouts of one task are
    correlated, so its interval is too narrow and covers less than ``level``.

    Parameters
    ----------
    n_tasks : int, optional
        Tasks drawn per trial, ``>= 3`` (the least a bootstrap interval takes); default 30.
    repeats : int, optional
        0/1 rollouts per task, ``>= 1``; default 4.
    alpha, beta : float, optional
        Shape parameters of the Beta distribution of task pass rates, both ``> 0``; default
        0.6 each. They are not test levels.
    level : float, optional
        Confidence level of both intervals, strictly between 0 and 1; default 0.95.
    n_trials : int, optional
        Simulated studies, ``>= 1``; default 400.
    n_resamples : int, optional
        Bootstrap resamples per interval, ``>= 1``; default 2000.
    seed : int, optional
        Seed of the draws (``numpy.random.default_rng(seed)``); trial t's two bootstraps use
        ``seed + t``. Default 0.

    Returns
    -------
    IntervalCoverageStudy
        ``task_coverage`` and ``row_coverage`` (share of trials whose interval held the true
        mean) with Wilson 95% intervals ``*_coverage_ci95``, the mean interval widths
        ``task_mean_width`` / ``row_mean_width``, ``true_mean`` and the inputs ``level``,
        ``n_tasks``, ``repeats``, ``n_trials``.

    Raises
    ------
    ValueError
        When ``n_tasks``, ``repeats`` or ``n_trials`` is out of range, or ``alpha`` or
        ``beta`` is not ``> 0``.
    ConfigError
        When ``level`` or ``n_resamples`` is out of range (raised by
        :func:`toolkit.stats.bootstrap_ci`).

    References
    ----------
    .. [1] B. Efron and R. J. Tibshirani, *An Introduction to the Bootstrap*, Chapman &
       Hall, 1993, ch. 6.
    """
    n_tasks = check_count("n_tasks", n_tasks, 3)
    repeats = check_count("repeats", repeats)
    n_trials = check_count("n_trials", n_trials)
    if alpha <= 0 or beta <= 0:
        raise ValueError(f"alpha and beta must be > 0; got {alpha}, {beta}")
    rng = np.random.default_rng(seed)
    truth = alpha / (alpha + beta)
    task_hits = row_hits = 0
    task_widths, row_widths = [], []
    for trial in range(n_trials):
        rates = rng.beta(alpha, beta, size=n_tasks)
        outcomes = (rng.random((n_tasks, repeats)) < rates[:, None]).astype(float)
        by_task = bootstrap_ci(outcomes.mean(axis=1), level=level, n_resamples=n_resamples, seed=seed + trial)
        by_row = bootstrap_ci(outcomes.ravel(), level=level, n_resamples=n_resamples, seed=seed + trial)
        for result, widths, is_task in ((by_task, task_widths, True), (by_row, row_widths, False)):
            low, high = result.confidence_interval
            widths.append(high - low)
            hit = low <= truth <= high
            if is_task:
                task_hits += hit
            else:
                row_hits += hit
    task_interval = wilson(task_hits, n_trials)
    row_interval = wilson(row_hits, n_trials)
    return IntervalCoverageStudy(
        level=level,
        task_coverage=task_hits / n_trials,
        task_coverage_ci95=(task_interval.low, task_interval.high),
        row_coverage=row_hits / n_trials,
        row_coverage_ci95=(row_interval.low, row_interval.high),
        task_mean_width=float(np.mean(task_widths)),
        row_mean_width=float(np.mean(row_widths)),
        n_tasks=n_tasks,
        repeats=repeats,
        n_trials=n_trials,
        true_mean=truth,
    )


@dataclass(frozen=True)
class PairedPowerStudy(Result):
    """Share of simulated before/after comparisons the sign-flip test called significant."""

    n_tasks: tuple[int, ...]
    power: tuple[float, ...]
    power_ci95: tuple[tuple[float, float], ...]
    effect: float
    base_rate: float
    repeats: int
    alpha: float
    n_trials: int

    def __str__(self) -> str:
        parts = ", ".join(f"{n} tasks {p:.0%}" for n, p in zip(self.n_tasks, self.power))
        return f"power to detect +{self.effect:.2f} at alpha {self.alpha}: {parts}"

    def to_pandas(self):
        import pandas as pd

        return pd.DataFrame({
            "n_tasks": self.n_tasks,
            "power": self.power,
            "power_low": [c[0] for c in self.power_ci95],
            "power_high": [c[1] for c in self.power_ci95],
        })


def paired_power_study(
    n_tasks=(10, 20, 40, 80),
    effect: float = 0.1,
    *,
    base_rate: float = 0.6,
    repeats: int = 4,
    alpha: float = 0.05,
    n_trials: int = 300,
    seed: int = 0,
) -> PairedPowerStudy:
    """Simulated power of the paired sign-flip test on per-task pass-rate differences.

    Every task has pass rate ``base_rate`` before and ``base_rate + effect`` after; each arm
    runs ``repeats`` rollouts per task; the test is :func:`toolkit.stats.sign_flip_test` on
    the per-task differences (exact for n <= 20, Monte Carlo with 2000 patterns above). A
    trial counts as detected when ``p < alpha`` (two-sided). The binomial model behind
    :func:`toolkit.holdout_size` assumes the same data, so the two can be compared.

    Parameters
    ----------
    n_tasks : iterable of int, optional
        The suite sizes to study, each ``>= 1`` (values pass through ``int()``); default
        ``(10, 20, 40, 80)``.
    effect : float, optional
        The true gain in pass rate; default 0.1. ``base_rate + effect`` must lie in [0, 1].
    base_rate : float, optional
        Every task's pass rate before the change, in [0, 1]; default 0.6.
    repeats : int, optional
        Rollouts per task on each arm, ``>= 1``; default 4.
    alpha : float, optional
        Significance level the p-value is compared with; default 0.05. It is not
        validated.
    n_trials : int, optional
        Simulated comparisons per suite size, ``>= 1``; default 300.
    seed : int, optional
        Seed of the draws (``numpy.random.default_rng(seed)``); trial t's Monte Carlo test
        uses ``seed + t``. Default 0.

    Returns
    -------
    PairedPowerStudy
        Per suite size: ``power`` (share of trials detected) and ``power_ci95`` (Wilson
        95%); with ``n_tasks``, ``effect``, ``base_rate``, ``repeats``, ``alpha`` and
        ``n_trials``.

    Raises
    ------
    ValueError
        When ``base_rate`` or ``base_rate + effect`` is outside [0, 1], or ``repeats``,
        ``n_trials`` or a size is not an integer ``>= 1``.
    """
    base_rate = check_share("base_rate", base_rate)
    check_share("base_rate + effect", base_rate + effect)
    repeats = check_count("repeats", repeats)
    n_trials = check_count("n_trials", n_trials)
    sizes = tuple(check_count("n_tasks", int(n)) for n in n_tasks)
    rng = np.random.default_rng(seed)
    power, intervals = [], []
    for size in sizes:
        hits = 0
        for trial in range(n_trials):
            before = rng.binomial(repeats, base_rate, size=size) / repeats
            after = rng.binomial(repeats, base_rate + effect, size=size) / repeats
            # 2000 Monte Carlo draws above n = 20 give a p-value standard error under 0.005
            # near alpha = 0.05, far below the binomial error of the power estimate itself.
            result = sign_flip_test(after - before, n_resamples=2000, seed=seed + trial)
            hits += result.pvalue is not None and result.pvalue < alpha
        interval = wilson(hits, n_trials)
        power.append(hits / n_trials)
        intervals.append((interval.low, interval.high))
    return PairedPowerStudy(
        n_tasks=sizes,
        power=tuple(power),
        power_ci95=tuple(intervals),
        effect=float(effect),
        base_rate=base_rate,
        repeats=repeats,
        alpha=alpha,
        n_trials=n_trials,
    )
