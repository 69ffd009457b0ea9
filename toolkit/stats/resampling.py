"""Resampling over tasks: the bootstrap interval and the paired sign-flip test.

Both functions take one number per *unit* (a task), never per rollout: rollouts of one task
are correlated, so resampling rows would make intervals too narrow (the coverage simulation
in ``notebooks/01_measuring_agents.ipynb`` shows it).

Bootstrap (:func:`bootstrap_ci`)
    B resamples of the n units with replacement, the statistic on each, then

    * percentile: the ``(1-level)/2`` and ``(1+level)/2`` quantiles of the B statistics
      (linear interpolation, as ``scipy.stats.bootstrap`` does);
    * BCa (Efron 1987, "Better bootstrap confidence intervals", JASA 82:171; Efron &
      Tibshirani 1993, *An Introduction to the Bootstrap*, eq. 14.14-14.15):
      ``z0 = Phi^-1((#{t* < t} + #{t* <= t}) / 2B)`` (ties count half),
      ``a = sum U^3 / (6 (sum U^2)^1.5)`` with ``U_i = mean(t_(.)) - t_(i)`` the jackknife
      deviations, and the quantile levels
      ``alpha_j = Phi(z0 + (z0 + z_j) / (1 - a (z0 + z_j)))`` for ``z_j = Phi^-1((1 -+ level)/2)``.

    Resample indices are drawn as ``rng.integers(0, n, (batch, n))`` chunk after chunk from
    ``numpy.random.default_rng(seed)``, the stream ``scipy.stats.bootstrap`` draws from the
    same generator, so given the same generator both give the same interval (tested).

Sign-flip test (:func:`sign_flip_test`)
    Under H0 "no effect", each paired difference is as likely to have either sign, so the
    null distribution of the mean difference is that of ``mean(s_i d_i)`` over sign
    vectors ``s`` in {-1, +1}^n (Fisher 1935; the one-sample "samples" permutation test of
    ``scipy.stats.permutation_test``).

    * exact (n <= 20 by default): all 2^n sign patterns. Rather than materialise a
      2^n x n matrix, we split the units in two halves, list the 2^(n/2) signed sums of
      each half by doubling, sort one half, and count with ``searchsorted`` for every sum
      of the other half ("meet in the middle", Horowitz & Sahni 1974). That is
      O(2^(n/2) log 2^(n/2)) and enumerates every pattern exactly once; at n = 16 it takes
      well under a millisecond where scipy's exact path iterates ``itertools.product``
      in Python (see ``benchmarks/bench_stats.py``).
    * normal limit (very many units, ``exact="auto"`` only): once Monte Carlo would take
      more than 5e7 table look-ups (about 40,000 units at 10,000 resamples), p is read from
      the normal limit of the null distribution, whose variance ``sum d_i^2`` is exact,
      with the Berry-Esseen bound on its error in the note.
    * Monte Carlo: B random sign vectors taken as raw generator bytes, 8 signs per byte;
      for each byte column a 256-entry table holds the sum of the diffs its set bits flip,
      so a resample costs n/8 table look-ups instead of n multiply-adds (measured at
      10k x 200 pairs: 0.5 ms against 8-16 ms for unpacking the bits and a float
      matrix-vector product). p = (1 + hits) / (1 + B)
      (Phipson & Smyth 2010, "Permutation p-values should never be zero",
      Stat Appl Genet Mol Biol 9:39), with Monte Carlo standard error sqrt(p(1-p)/B).

    Two-sided convention: p = P(|null mean| >= |observed mean| - tol). scipy instead reports
    2 min(p_less, p_greater); the sign-flip null is symmetric about 0, so the two are
    identical for exact enumeration (tested against scipy at n = 12) and agree in
    expectation under Monte Carlo. ``tol`` = 1e-12 x sum|d| / n: a null sum adds the
    same numbers as the observed one in another order, so a pattern that ties the
    observed value in exact arithmetic can land a few ulp below it; without a tolerance
    such ties would be dropped at random. The rounding error of an n-term sum is at most
    about n x 2.2e-16 x sum|d|, far below 1e-12 x sum|d| for any n we enumerate, and a
    real difference of one part in 10^12 of the data's scale is not a difference anyone
    measures. (scipy uses 100 eps x |observed|, which vanishes when the observed mean is
    near 0.)

Where we differ from the reference engine (docs/design/engine.md §6.1): its bootstrap used 2000
resamples and read sorted indices ``int(0.025 B)`` and ``int(0.975 B) - 1``; we default to
10,000 resamples and scipy's interpolated quantiles, and offer BCa.
"""

from __future__ import annotations

import inspect
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from scipy.special import ndtr, ndtri
from scipy.stats import t as student_t

from toolkit._util.results import Result
from toolkit._util.validate import check_count, check_level
from toolkit.errors import ConfigError, unknown_name_message

__all__ = [
    "bootstrap_ci",
    "BootstrapResult",
    "clustered_mean",
    "ClusteredMean",
    "ConfidenceInterval",
    "sign_flip_test",
    "SignFlipResult",
]

# A bootstrap chunk holds one int32 index and one float64 gathered value per cell
# (12 bytes); 16 MiB per chunk runs as fast as one big B x n draw (docs/design/peers.md B.1 measured
# 1,000-resample chunks at 1,000 tasks at the same speed) while a full 10k x 1k draw with
# int64 indices peaks near 160 MB, too much for a notebook kernel next to other work.
_CHUNK_BYTES = 16 * 2**20
_BOOTSTRAP_BYTES_PER_CELL = 4 + 8
# A Monte Carlo sign-flip chunk holds one random byte per 8 pairs plus two float64
# accumulators per resample.
_SIGN_BYTES_PER_RESAMPLE = 16
# Above this many Monte Carlo table look-ups (B x n / 8; ~1 s here) exact="auto" uses the
# normal limit of the sign-flip distribution instead (see _normal_sign_flip).
_SIGN_FLIP_MAX_LOOKUPS = 50_000_000

# Intervals need at least 3 units: with 2 the resampled means take only 3 values and the
# "interval" is the data's range, which claims more than it knows (docs/design/engine.md §6).
MIN_UNITS_FOR_INTERVAL = 3

# Exact enumeration by default up to 2^20 (about a million) patterns; meet in the middle
# makes even this cost ~2^10 work per half. exact=True allows up to 2^40 patterns
# (two halves of 2^20 sums each: ~16 MB and a fraction of a second).
EXACT_AUTO_MAX_N = 20
EXACT_MAX_N = 40

# Tie tolerance relative to sum|d| / n (the mean's scale); see the module docstring.
_TIE_RTOL = 1e-12

# Fewer than 100 resamples put a 95% bound on the 2nd or 3rd order statistic of the
# resampled means: the bound is noise (refused). Below 1,000 the bound's own Monte Carlo
# error (about 0.4 x se at B = 500 for a 2.5% tail, Efron & Tibshirani 1993 §19.3) is still
# visible in the second printed digit, so it is allowed with a warning.
MIN_RESAMPLES = 100
WARN_RESAMPLES = 1_000

# The multinomial path of the bootstrap mean: when the units take few distinct values (a
# pass rate over k rollouts takes k + 1), a resample is fully described by how many times
# each value was drawn, so B multinomial count vectors give exactly the distribution of B
# index resamples at O(B x distinct) cost. Used once n x B passes 5e7 cells (the index path
# measured ~0.9 s per 1e8 cells on this machine); below that the index path keeps the
# interval equal to scipy's to the last bit.
_MULTINOMIAL_MIN_CELLS = 50_000_000
_MULTINOMIAL_MAX_DISTINCT = 256
# Above this many cells a bootstrap with many distinct values cuts its resample count
# (never below MIN_RESAMPLES x 2) and says so: 2e8 cells is about 2 s here.
_MAX_INDEX_CELLS = 200_000_000

_STATISTICS = ("mean", "median")
_METHODS = ("percentile", "bca")
_ALTERNATIVES = ("two-sided", "greater", "less")


class ConfidenceInterval(NamedTuple):
    """Lower and upper bound, like ``scipy.stats``' ``ConfidenceInterval``; ``None`` when missing.

    Parameters
    ----------
    low : float or None
        The lower bound; None when no interval could be formed.
    high : float or None
        The upper bound; None when no interval could be formed.
    """

    low: float | None
    high: float | None


class _HasInterval:
    """``low``/``high`` read from ``confidence_interval``; ``to_dict`` spells it out."""

    confidence_interval: ConfidenceInterval

    @property
    def low(self) -> float | None:
        return self.confidence_interval.low

    @property
    def high(self) -> float | None:
        return self.confidence_interval.high

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()  # type: ignore[misc]
        out["confidence_interval"] = {"low": _float_or_none(self.low), "high": _float_or_none(self.high)}
        return out


@dataclass(frozen=True)
class BootstrapResult(_HasInterval, Result):
    """A bootstrap interval over units (tasks).

    ``confidence_interval`` has ``.low``/``.high`` (``None`` with ``note`` when no interval
    can be given); ``standard_error`` is the sample standard deviation (ddof 1) of the
    bootstrap distribution, as in scipy.
    """

    confidence_interval: ConfidenceInterval
    estimate: float | None
    standard_error: float | None
    n: int
    method: str
    level: float
    n_resamples: int
    note: str | None = None
    n_clusters: int | None = None
    clustered_se: float | None = None

    def __str__(self) -> str:
        if self.estimate is None:
            return f"no estimate (n={self.n}): {self.note}"
        interval = (
            f"[{self.low:.4g}..{self.high:.4g}]" if self.low is not None else "[no interval]"
        )
        units = f"{self.n} units" if self.n_clusters is None else f"{self.n} units in {self.n_clusters} clusters"
        text = (
            f"{self.estimate:.4g} {interval} ({self.level:.0%} {self.method}, "
            f"{units}, {self.n_resamples} resamples)"
        )
        return text + (f": {self.note}" if self.note and self.low is not None else "")


@dataclass(frozen=True)
class SignFlipResult(Result):
    """Paired sign-flip test of "the mean difference is 0".

    ``method`` is ``"exact"`` (all ``n_patterns`` = 2^n sign patterns), ``"monte_carlo"``
    (``n_resamples`` random patterns, p = (1 + hits)/(1 + B)) or ``"none"`` (no data).
    """

    statistic: float | None
    pvalue: float | None
    alternative: str
    method: str
    n: int
    n_patterns: int | None
    n_resamples: int | None
    mc_standard_error: float | None
    note: str | None = None
    min_pvalue: float | None = None
    n_clusters: int | None = None

    def __str__(self) -> str:
        if self.pvalue is None:
            return f"sign-flip test: no p-value (n={self.n}): {self.note}"
        if self.method == "exact":
            draws = f"all {self.n_patterns} sign patterns"
        elif self.method == "normal":
            draws = self.note or "normal limit"
        else:
            draws = f"{self.n_resamples} random patterns, MC se {self.mc_standard_error:.2g}"
        pairs = f"{self.n} pairs" if self.n_clusters is None else f"{self.n} pairs flipped in {self.n_clusters} clusters"
        return (
            f"mean diff {self.statistic:+.4g}, p = {self.pvalue:.4g} "
            f"({self.alternative}, {pairs}, {draws})"
        )


@dataclass(frozen=True)
class ClusteredMean(_HasInterval, Result):
    """A mean over units with the cluster-robust standard error of Miller (2024).

    ``standard_error`` is the clustered one (with the ``G / (G - 1)`` small-sample factor),
    ``naive_standard_error`` the one that treats units as independent (``sd / sqrt(n)``),
    ``design_effect`` their squared ratio (how many times the naive variance is too
    small). ``confidence_interval`` is ``estimate +/- t_{G-1} x standard_error``; it covers
    the mean of the population the *clusters* were drawn from.
    """

    estimate: float | None
    standard_error: float | None
    naive_standard_error: float | None
    design_effect: float | None
    confidence_interval: ConfidenceInterval
    n: int
    n_clusters: int
    df: int | None
    level: float
    note: str | None = None

    def __str__(self) -> str:
        if self.estimate is None:
            return f"no estimate (n={self.n}): {self.note}"
        if self.low is None:
            return f"{self.estimate:.4g} [no interval] ({self.n} units in {self.n_clusters} clusters): {self.note}"
        deff = f", design effect {self.design_effect:.2f}" if self.design_effect is not None else ""
        return (
            f"{self.estimate:.4g} [{self.low:.4g}..{self.high:.4g}] ({self.level:.0%} clustered t, "
            f"{self.n} units in {self.n_clusters} clusters, se {self.standard_error:.3g}{deff})"
            + (f": {self.note}" if self.note else "")
        )


# --------------------------------------------------------------------------- helpers


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


def _generator(seed: Any) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, np.random.RandomState):
        # The legacy global-state API draws a different stream; refuse it rather than
        # silently give intervals that do not match scipy's for the "same" seed.
        raise TypeError("seed must be an int or a numpy.random.Generator, not a RandomState")
    return np.random.default_rng(seed)


def _as_values(values: Any, name: str) -> np.ndarray:
    """1-D float array; refuse NaN/inf and non-numbers by position instead of dropping them."""
    if isinstance(values, (str, bytes)) or isinstance(values, dict):
        raise TypeError(f"{name} must be a 1-D sequence of numbers, got {type(values).__name__}")
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as error:
        raise TypeError(f"{name} must be a 1-D sequence of numbers ({error})") from None
    if array.ndim == 0:
        raise TypeError(f"{name} must be a 1-D sequence of numbers, got a scalar")
    if array.ndim != 1:
        raise ConfigError(f"{name} must be 1-D (one number per task); got shape {array.shape}")
    bad = np.flatnonzero(~np.isfinite(array))
    if bad.size:
        raise ConfigError(
            f"{name}[{int(bad[0])}] is {array[bad[0]]}; every value must be finite "
            "(drop or fill missing tasks before resampling)"
        )
    return array


def check_resamples(value: Any, name: str = "n_resamples") -> int:
    """``value`` as an int >= ``MIN_RESAMPLES`` (100); below ``WARN_RESAMPLES`` (1,000) it warns."""
    number = check_count(name, value)
    if number < MIN_RESAMPLES:
        raise ConfigError(
            f"{name} must be >= {MIN_RESAMPLES}; got {number}: with so few resamples a 95% bound "
            "sits on the 2nd or 3rd resampled value, which is noise (10,000 is the default)"
        )
    if number < WARN_RESAMPLES:
        warnings.warn(
            f"{name}={number} is below {WARN_RESAMPLES}: the interval's ends carry visible Monte "
            "Carlo error; use it for a quick look only",
            UserWarning,
            stacklevel=3,
        )
    return number


def cluster_codes(clusters: Any, n: int, name: str = "clusters") -> tuple[np.ndarray, int]:
    """Integer codes 0..G-1 (in order of first appearance) for ``n`` cluster labels, and G.

    Labels are any hashable values; None (a unit without a cluster) is refused by position.
    """
    if isinstance(clusters, (str, bytes)) or isinstance(clusters, dict):
        raise TypeError(f"{name} must be a sequence of labels, one per unit; got {type(clusters).__name__}")
    labels = list(clusters)
    if len(labels) != n:
        raise ConfigError(f"{name} has {len(labels)} labels for {n} values; give one label per value")
    index: dict[Any, int] = {}
    codes = np.empty(n, dtype=np.int64)
    for position, label in enumerate(labels):
        if label is None or (isinstance(label, float) and math.isnan(label)):
            raise ConfigError(f"{name}[{position}] is {label!r}; every unit needs a cluster label")
        try:
            codes[position] = index.setdefault(label, len(index))
        except TypeError:
            raise TypeError(f"{name}[{position}] is {type(label).__name__}, which cannot label a cluster (not hashable)") from None
    return codes, len(index)


def _clustered_se(data: np.ndarray, codes: np.ndarray, n_clusters: int) -> float:
    """Miller (2024) eq. for the clustered se of a mean, with the CR1 factor sqrt(G/(G-1))."""
    residual_sums = np.bincount(codes, weights=data - data.mean(), minlength=n_clusters)
    return float(math.sqrt(n_clusters / (n_clusters - 1) * float(np.sum(residual_sums**2))) / data.size)


def clustered_mean(values: Any, clusters: Any, level: float = 0.95) -> ClusteredMean:
    """Mean of ``values`` with a cluster-robust standard error and t interval.

    For units ``i`` in clusters ``c = 1..G`` with mean ``x-bar`` (Miller 2024, "Adding Error
    Bars to Evals", arXiv:2411.00640, §2.2; Liang & Zeger 1986; Cameron & Miller 2015):

        se_C = sqrt( G / (G - 1) x sum_c ( sum_{i in c} (x_i - x-bar) )^2 ) / n

    and the interval ``x-bar +/- t_{1-(1-level)/2}(G - 1) x se_C``. The ``G / (G - 1)``
    factor and the t quantile with ``G - 1`` degrees of freedom are the usual small-sample
    corrections (CR1; Cameron & Miller 2015, §VI); Miller's paper gives the se without
    them.

    Measured coverage of the 95% interval on pass@1 through ``tk.pass_at(cluster=)``
    (``benchmarks/bench_calibration.py``, 1,000 simulated suites per cell, Monte Carlo se
    0.007; per-task pass rates over 4 rollouts, logit p = cluster effect + task effect, sd 1
    each): 0.946 at 20 clusters x 10 tasks and 0.945 at 50 x 4, where the task bootstrap that
    ignores clusters covers 0.672 and 0.828; on paired deltas 0.953 and 0.950. In a one-off
    simulation of the same design (2,000 suites) the cluster bootstrap covered 0.936 and
    0.947, and a two-stage one (tasks resampled inside the clusters too) 0.957 and 0.970
    (too wide at 50 x 4), which is why the analytic interval is the one results print and
    the cluster bootstrap stands beside it.

    Parameters
    ----------
    values : sequence of float
        One finite number per unit (task).
    clusters : sequence of hashable
        One cluster label per unit (same length); None is refused.
    level : float, optional
        Confidence level in (0, 1); default 0.95.

    Returns
    -------
    ClusteredMean
        ``estimate``, ``standard_error`` (clustered), ``naive_standard_error``,
        ``design_effect``, ``confidence_interval``, ``n``, ``n_clusters``, ``df`` (G - 1),
        ``level``, ``note``. With one cluster there is no interval (a note says why).

    Raises
    ------
    ConfigError
        When a value is not finite, the label count differs from the value count, a label
        is None, or ``level`` is outside (0, 1).
    """
    level = check_level("level", level)
    data = _as_values(values, "values")
    codes, n_clusters = cluster_codes(clusters, data.size)
    empty = ConfidenceInterval(None, None)
    if data.size == 0:
        return ClusteredMean(None, None, None, None, empty, 0, 0, None, level, "no values: nothing to estimate")
    estimate = float(math.fsum(data) / data.size)
    naive = float(np.std(data, ddof=1) / math.sqrt(data.size)) if data.size > 1 else None
    if n_clusters < 2:
        return ClusteredMean(
            estimate, None, naive, None, empty, data.size, n_clusters, None, level,
            f"all {data.size} units are in one cluster: a clustered interval needs at least 2 clusters",
        )
    se = _clustered_se(data, codes, n_clusters)
    df = n_clusters - 1
    half = float(student_t.ppf(1.0 - (1.0 - level) / 2.0, df)) * se
    design = (se / naive) ** 2 if naive else None
    note = None
    if se == 0.0:
        note = (
            "every cluster's values sum to its share of the mean (se 0), so the interval is the "
            "point; it says nothing about other tasks"
        )
    return ClusteredMean(
        estimate, se, naive, design, ConfidenceInterval(estimate - half, estimate + half),
        int(data.size), n_clusters, df, level, note,
    )


def _statistic_function(statistic: Any) -> tuple[str, Callable[[np.ndarray], np.ndarray]]:
    """Return (label, f) where f reduces the last axis of a 2-D (or 1-D) array."""
    if isinstance(statistic, str):
        if statistic == "mean":
            return "mean", lambda a: np.mean(a, axis=-1)
        if statistic == "median":
            return "median", lambda a: np.median(a, axis=-1)
        raise ConfigError(unknown_name_message("statistic", statistic, _STATISTICS))
    if not callable(statistic):
        raise TypeError(f"statistic must be 'mean', 'median' or a callable; got {type(statistic).__name__}")
    try:
        takes_axis = "axis" in inspect.signature(statistic).parameters
    except (TypeError, ValueError):  # builtins / ufuncs without a signature: numpy ones take axis
        takes_axis = True
    label = getattr(statistic, "__name__", "callable")
    if takes_axis:
        return label, lambda a: np.asarray(statistic(a, axis=-1), dtype=float)
    # A statistic without `axis` runs once per resample in Python: correct, but slower.
    return label, lambda a: np.asarray(np.apply_along_axis(statistic, -1, a), dtype=float)


# --------------------------------------------------------------------------- bootstrap


def bootstrap_ci(
    values: Any,
    statistic: str | Callable[..., Any] = "mean",
    level: float = 0.95,
    method: str = "percentile",
    n_resamples: int = 10_000,
    seed: int | np.random.Generator | None = 0,
    batch: int | None = None,
    clusters: Any = None,
) -> BootstrapResult:
    """Bootstrap confidence interval of ``statistic`` over the given units (tasks).

    Parameters
    ----------
    values : one number per unit (e.g. per-task pass rates). Non-finite values raise.
    statistic : ``"mean"``, ``"median"`` or a callable reducing the last axis
        (``f(array, axis=-1)``; a callable without ``axis`` is applied per resample).
    level : confidence level in (0, 1).
    method : ``"percentile"`` or ``"bca"`` (formulas in the module docstring).
    n_resamples : B, the number of bootstrap resamples; at least 100, and below 1,000 it
        warns (the bounds' own Monte Carlo error shows).
    seed : int or ``numpy.random.Generator``; indices come from
        ``rng.integers(0, n, (batch, n))``, the same stream ``scipy.stats.bootstrap`` uses.
    batch : resamples per chunk; default keeps a chunk near 16 MiB (int32 index + float64
        value per cell), which measured as fast as one big draw and bounds memory.
    clusters : sequence of labels, one per value, or None
        Cluster bootstrap: whole clusters are resampled (G of the G clusters, with
        replacement) and the statistic is taken over the units they hold (the mean as
        ``sum of resampled cluster sums / sum of their sizes``; the median of the pooled
        units). ``"mean"`` or ``"median"``, ``"percentile"`` only. The result also carries ``clustered_se``, the analytic
        cluster-robust se of :func:`clustered_mean` (Miller 2024), whose t interval
        measured better coverage than this bootstrap at 20 clusters (0.952 against 0.936).

    Returns
    -------
    BootstrapResult with ``confidence_interval`` (``.low``, ``.high``), ``estimate``,
    ``standard_error``, ``n``, ``method``, ``level``, ``n_resamples`` (the number actually
    drawn), ``note``, ``n_clusters``, ``clustered_se``.
    Fewer than 3 values (or clusters): interval ``(None, None)`` with the reason. Constant
    values: the interval is ``(v, v)`` with a note (every resample equals v).

    Notes
    -----
    Large inputs: for the mean without clusters, once ``n x B`` passes 5e7 cells and the
    values take at most 256 distinct numbers (a pass rate over k rollouts takes k + 1), each
    resample is drawn as multinomial counts of the distinct values, which has exactly the
    distribution of an index resample at a cost independent of n. With many distinct values
    and ``n x B`` above 2e8 cells, B is cut to fit (never below 200) and the note says so.
    """
    level = check_level("level", level)
    if not isinstance(method, str) or method.lower() not in _METHODS:
        raise ConfigError(unknown_name_message("method", str(method), _METHODS))
    method = method.lower()
    n_resamples = check_resamples(n_resamples)
    label, reduce = _statistic_function(statistic)
    data = _as_values(values, "values")
    n = int(data.size)
    empty = ConfidenceInterval(None, None)
    codes = n_clusters = None
    clustered_se = None
    if clusters is not None:
        if statistic not in ("mean", "median") or method != "percentile":
            raise ConfigError(
                "clusters= supports statistic='mean' or 'median' with method='percentile' only; "
                f"got statistic={label!r}, method={method!r}"
            )
        codes, n_clusters = cluster_codes(clusters, n)

    def result(
        ci: ConfidenceInterval, estimate: float | None, se: float | None, note: str | None, drawn: int = n_resamples
    ) -> BootstrapResult:
        return BootstrapResult(ci, estimate, se, n, method, level, drawn, note, n_clusters, clustered_se)

    if n == 0:
        return result(empty, None, None, "no values: nothing to estimate; pass one number per task")
    estimate = float(reduce(data))
    if not math.isfinite(estimate):
        return result(empty, None, None, f"the statistic {label!r} is not finite on these values")
    if codes is not None and n_clusters >= 2:
        clustered_se = _clustered_se(data, codes, n_clusters)
    units = n if codes is None else n_clusters
    if units < MIN_UNITS_FOR_INTERVAL:
        what = "value(s)" if codes is None else "cluster(s)"
        return result(
            empty,
            estimate,
            None,
            f"no interval: {units} {what}, and a bootstrap interval needs at least "
            f"{MIN_UNITS_FOR_INTERVAL}; add units (tasks)",
        )
    if np.all(data == data[0]):
        return result(
            ConfidenceInterval(estimate, estimate),
            estimate,
            0.0,
            f"all {n} values equal {data[0]:.6g}: every resample gives the same statistic, "
            "so the interval is the point; it says nothing about other tasks",
        )

    rng = _generator(seed)
    note = None
    if codes is not None and statistic == "median":
        distribution = _cluster_median_distribution(data, codes, n_clusters, n_resamples, rng)
    elif codes is not None:
        distribution = _cluster_distribution(data, codes, n_clusters, n_resamples, rng, batch)
    else:
        distinct = np.unique(data) if statistic == "mean" and n * n_resamples > _MULTINOMIAL_MIN_CELLS else None
        if distinct is not None and distinct.size <= _MULTINOMIAL_MAX_DISTINCT:
            frequencies = np.searchsorted(distinct, data)
            shares = np.bincount(frequencies, minlength=distinct.size) / n
            distribution = rng.multinomial(n, shares, size=n_resamples) @ distinct / n
        else:
            if statistic == "mean" and n * n_resamples > _MAX_INDEX_CELLS:
                drawn = max(2 * MIN_RESAMPLES, _MAX_INDEX_CELLS // n)
                note = (
                    f"resamples cut from {n_resamples} to {drawn} to keep the cost near "
                    f"{_MAX_INDEX_CELLS:.0e} draws at n = {n} (the values take {np.unique(data).size} distinct numbers)"
                )
                n_resamples = drawn
            if batch is None:
                batch = max(1, _CHUNK_BYTES // (n * _BOOTSTRAP_BYTES_PER_CELL))
            batch = check_count("batch", batch)
            distribution = np.empty(n_resamples, dtype=float)
            index_type = np.int32 if n < 2**31 else np.int64
            for start in range(0, n_resamples, batch):
                size = min(batch, n_resamples - start)
                # int32 indices draw the same numbers as scipy's int64 ones (numpy's bounded
                # integers share one 32-bit Lemire path for ranges below 2^32) at half the memory.
                indices = rng.integers(0, n, (size, n), dtype=index_type)
                distribution[start : start + size] = reduce(data[indices])
    if not np.all(np.isfinite(distribution)):
        return result(empty, estimate, None, f"the statistic {label!r} gave non-finite values on resamples")
    standard_error = float(np.std(distribution, ddof=1))

    tail = (1.0 - level) / 2.0
    quantiles = np.array([tail, 1.0 - tail])
    if method == "bca":
        if batch is None:
            batch = max(1, _CHUNK_BYTES // (n * _BOOTSTRAP_BYTES_PER_CELL))
        bca_levels, bca_note = _bca_levels(data, reduce, estimate, distribution, tail, batch)
        if bca_levels is None:
            note = bca_note
        else:
            quantiles = bca_levels
    low, high = np.quantile(distribution, quantiles, method="linear")
    return result(ConfidenceInterval(float(low), float(high)), estimate, standard_error, note, n_resamples)


def _cluster_median_distribution(
    data: np.ndarray, codes: np.ndarray, n_clusters: int, n_resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """Medians of B cluster resamples: the units of G clusters drawn with replacement, pooled.

    Clusters are laid out as rows of a NaN-padded (G, largest size) table, so a resample is
    a gather of G rows and ``nanmedian`` skips the padding.
    """
    sizes = np.bincount(codes, minlength=n_clusters)
    table = np.full((n_clusters, int(sizes.max())), np.nan)
    order = np.argsort(codes, kind="stable")
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    columns = np.arange(data.size) - np.repeat(starts, sizes)
    table[codes[order], columns] = data[order]
    rows_per_chunk = max(1, _CHUNK_BYTES // (table.size * 8))
    distribution = np.empty(n_resamples, dtype=float)
    for start in range(0, n_resamples, rows_per_chunk):
        size = min(rows_per_chunk, n_resamples - start)
        picks = rng.integers(0, n_clusters, (size, n_clusters))
        distribution[start : start + size] = np.nanmedian(table[picks].reshape(size, -1), axis=1)
    return distribution


def _cluster_distribution(
    data: np.ndarray, codes: np.ndarray, n_clusters: int, n_resamples: int, rng: np.random.Generator, batch: int | None
) -> np.ndarray:
    """Means of B cluster resamples: G clusters drawn with replacement, units pooled."""
    sums = np.bincount(codes, weights=data, minlength=n_clusters)
    sizes = np.bincount(codes, minlength=n_clusters).astype(float)
    if batch is None:
        batch = max(1, _CHUNK_BYTES // (n_clusters * _BOOTSTRAP_BYTES_PER_CELL))
    distribution = np.empty(n_resamples, dtype=float)
    for start in range(0, n_resamples, batch):
        size = min(batch, n_resamples - start)
        picks = rng.integers(0, n_clusters, (size, n_clusters))
        distribution[start : start + size] = sums[picks].sum(axis=1) / sizes[picks].sum(axis=1)
    return distribution


def _bca_levels(
    data: np.ndarray,
    reduce: Callable[[np.ndarray], np.ndarray],
    estimate: float,
    distribution: np.ndarray,
    tail: float,
    batch: int,
) -> tuple[np.ndarray | None, str | None]:
    """BCa quantile levels (alpha_1, alpha_2), or None and why (then percentile is used)."""
    n = data.size
    below = np.count_nonzero(distribution < estimate) + np.count_nonzero(distribution <= estimate)
    z0 = float(ndtri(below / (2.0 * distribution.size)))
    jackknife = _jackknife(data, reduce, batch)
    deviations = (n - 1) * (jackknife.mean() - jackknife)
    # scipy's normalisation (sums / n^3 and / n^2) cancels in the ratio; kept so the
    # floating-point result matches scipy's to the last bits.
    numerator = np.sum(deviations**3) / n**3
    denominator = np.sum(deviations**2) / n**2
    if denominator == 0.0 or not math.isfinite(z0):
        return None, (
            "BCa is undefined here (bias correction z0 infinite or jackknife constant: the "
            "estimate lies outside the bootstrap distribution); the percentile interval is "
            "shown instead"
        )
    acceleration = float(numerator / denominator**1.5 / 6.0)
    levels = []
    for z_tail in (float(ndtri(tail)), -float(ndtri(tail))):
        shifted = z0 + z_tail
        levels.append(float(ndtr(z0 + shifted / (1.0 - acceleration * shifted))))
    levels_array = np.array(levels)
    if not np.all(np.isfinite(levels_array)):
        return None, "BCa levels are not finite for these data; the percentile interval is shown instead"
    return levels_array, None


def _jackknife(data: np.ndarray, reduce: Callable[[np.ndarray], np.ndarray], batch: int) -> np.ndarray:
    """The statistic on each leave-one-out sample (n values)."""
    n = data.size
    out = np.empty(n, dtype=float)
    rows = max(1, min(n, batch))
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        keep = np.ones((stop - start, n), dtype=bool)
        keep[np.arange(stop - start), np.arange(start, stop)] = False
        samples = np.broadcast_to(data, (stop - start, n))[keep].reshape(stop - start, n - 1)
        out[start:stop] = reduce(samples)
    return out


# --------------------------------------------------------------------------- sign flip


def sign_flip_test(
    diffs: Any,
    alternative: str = "two-sided",
    n_resamples: int = 10_000,
    exact: bool | str = "auto",
    seed: int | np.random.Generator | None = 0,
    batch: int | None = None,
    clusters: Any = None,
) -> SignFlipResult:
    """Paired sign-flip (randomisation) test on the mean of per-task differences.

    Parameters
    ----------
    diffs : one paired difference per task (``after - before``).
    alternative : ``"two-sided"`` (|null| >= |obs|), ``"greater"`` (mean > 0) or ``"less"``.
    n_resamples : Monte Carlo draws when not exact (at least 100; below 1,000 it warns).
    exact : ``"auto"`` enumerates all 2^m patterns when m <= 20 flipped units; ``True``
        forces it (up to m = 40); ``False`` forces Monte Carlo.
    seed : int or ``numpy.random.Generator`` (Monte Carlo only).
    batch : Monte Carlo patterns per chunk (default keeps a chunk near 16 MiB).
    clusters : sequence of labels, one per difference, or None
        Flip whole clusters: under "no effect" a cluster's summed difference is as likely
        to have either sign, while tasks inside one cluster need not be independent. The
        flipped units are then the G cluster sums (the statistic stays the mean over
        tasks). Measured false-positive rate of ``compare_runs`` at alpha 0.05 when the
        change shifts whole clusters (logit shift N(0, 0.5) per cluster, mean effect 0;
        1,000 suites, se 0.007): 0.050 at 20 clusters x 10 tasks and 0.037 at 50 x 4,
        against 0.140 and 0.062 when tasks are flipped one by one
        (``benchmarks/bench_calibration.py``).

    Returns
    -------
    SignFlipResult: ``statistic`` (mean diff), ``pvalue``, ``method``, ``n`` (pairs),
    ``n_patterns`` or ``n_resamples``, ``mc_standard_error`` (0.0 when exact), ``note``,
    ``min_pvalue`` (the smallest p the exact test can reach here: ``2 / 2^m`` two-sided,
    ``1 / 2^m`` one-sided, counting only the m units whose difference is not 0, since a
    zero difference flips to itself) and ``n_clusters``. All-zero diffs give p = 1.0.
    """
    if not isinstance(alternative, str) or alternative not in _ALTERNATIVES:
        raise ConfigError(unknown_name_message("alternative", str(alternative), _ALTERNATIVES))
    if exact not in ("auto", True, False):
        raise ConfigError(f"exact must be 'auto', True or False; got {exact!r}")
    n_resamples = check_resamples(n_resamples)
    data = _as_values(diffs, "diffs")
    n = int(data.size)
    n_clusters = None
    if n == 0:
        return SignFlipResult(None, None, alternative, "none", 0, None, None, None,
                              "no paired differences; pair tasks present in both runs")
    statistic = float(np.mean(data))
    if clusters is not None:
        codes, n_clusters = cluster_codes(clusters, n)
        data = np.bincount(codes, weights=data, minlength=n_clusters)
    total = float(np.sum(data))
    scale = float(np.sum(np.abs(data)))
    # Tolerance relative to the mean's scale (module docstring); a zero unit flips to itself.
    informative = int(np.count_nonzero(np.abs(data) > _TIE_RTOL * scale)) if scale else 0
    # 2^-m underflows past m = 1074; the floor then is the smallest positive double.
    sides = 2.0 if alternative == "two-sided" else 1.0
    min_p = min(1.0, max(sides * math.ldexp(1.0, -informative), np.finfo(float).tiny)) if informative else 1.0
    units = data.size
    if scale == 0.0:
        return SignFlipResult(
            statistic, 1.0, alternative, "exact", n, 2**units, None, 0.0,
            "every difference is 0: every sign pattern ties the observed mean, p = 1", 1.0, n_clusters,
        )
    # Compare sums, not means: dividing by n is monotone and only adds rounding.
    tolerance = _TIE_RTOL * scale
    use_exact = units <= EXACT_AUTO_MAX_N if exact == "auto" else bool(exact)
    if use_exact:
        if units > EXACT_MAX_N:
            raise ConfigError(
                f"exact=True enumerates 2^n patterns and allows n <= {EXACT_MAX_N}; got n={units} "
                "(use exact='auto' for Monte Carlo)"
            )
        hits = _exact_hits(data, total, tolerance, alternative)
        patterns = 2**units
        return SignFlipResult(statistic, hits / patterns, alternative, "exact", n, patterns, None, 0.0, None, min_p, n_clusters)

    if exact == "auto" and units * n_resamples > _SIGN_FLIP_MAX_LOOKUPS * 8:
        return _normal_sign_flip(data, statistic, alternative, n, min_p, n_clusters)
    rng = _generator(seed)
    n_bytes = (units + 7) // 8
    if batch is None:
        batch = max(1, _CHUNK_BYTES // (n_bytes + _SIGN_BYTES_PER_RESAMPLE))
    batch = check_count("batch", batch)
    tables = _byte_tables(data)
    hits = 0
    for start in range(0, n_resamples, batch):
        size = min(batch, n_resamples - start)
        # Each random byte holds the signs of 8 consecutive pairs (bit set = flipped);
        # the flipped part of the sum is read from that byte column's 256-entry table.
        patterns = np.frombuffer(rng.bytes(size * n_bytes), dtype=np.uint8).reshape(size, n_bytes)
        flipped = np.zeros(size)
        for column in range(n_bytes):
            flipped += tables[column][patterns[:, column]]
        # sum(s_i d_i) with s_i = 1 - 2 bit_i  ==  total - 2 sum(bit_i d_i)
        hits += _count_hits(total - 2.0 * flipped, total, tolerance, alternative)
    pvalue = (1 + hits) / (1 + n_resamples)
    standard_error = math.sqrt(pvalue * (1.0 - pvalue) / n_resamples)
    # Monte Carlo p is never below 1/(1+B) (Phipson & Smyth 2010); the exact floor still holds.
    return SignFlipResult(
        statistic, pvalue, alternative, "monte_carlo", n, None, n_resamples, standard_error, None,
        max(min_p, 1.0 / (1 + n_resamples)), n_clusters,
    )


def _normal_sign_flip(
    data: np.ndarray, statistic: float, alternative: str, n: int, min_p: float, n_clusters: int | None
) -> SignFlipResult:
    """The sign-flip p from the normal limit of its null distribution (very many units).

    Under the null, ``S = sum s_i d_i`` has mean 0 and variance ``sum d_i^2`` exactly; by the
    Lyapunov CLT ``S / sqrt(sum d^2)`` is close to N(0, 1), with the Berry-Esseen bound
    ``0.56 x sum |d|^3 / (sum d^2)^1.5`` (Shevtsova 2011's constant) on the error of any tail
    probability, which the note quotes. Used by ``exact="auto"`` once Monte Carlo would cost
    more than 5e7 table look-ups (about 40,000 units at 10,000 resamples, ~1 s here), where
    that bound is already below a Monte Carlo p's own standard error near 0.05 (0.002).
    """
    squares = float(np.sum(data**2))
    z = float(np.sum(data)) / math.sqrt(squares)
    if alternative == "greater":
        pvalue = float(ndtr(-z))
    elif alternative == "less":
        pvalue = float(ndtr(z))
    else:
        pvalue = float(2.0 * ndtr(-abs(z)))
    bound = 0.56 * float(np.sum(np.abs(data) ** 3)) / squares**1.5
    # p is never 0: below the smallest double the tail would underflow, so floor it there.
    pvalue = min(1.0, max(pvalue, min_p, np.finfo(float).tiny))
    return SignFlipResult(
        statistic, pvalue, alternative, "normal", n, None, None, None,
        f"normal limit of the sign-flip distribution ({data.size} units; error at most {bound:.2g} by Berry-Esseen)",
        min_p, n_clusters,
    )


def _byte_tables(data: np.ndarray) -> np.ndarray:
    """tables[j][b] = sum of d_{8j+t} over the bits t set in byte b (big-endian bit order).

    Pairs past n (padding of the last byte) weigh 0, so their random bits change nothing.
    """
    n_bytes = (data.size + 7) // 8
    padded = np.zeros(n_bytes * 8)
    padded[: data.size] = data
    bits = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).astype(float)  # (256, 8)
    return (bits @ padded.reshape(n_bytes, 8).T).T.copy()  # (n_bytes, 256)


def _count_hits(null_sums: np.ndarray, observed: float, tolerance: float, alternative: str) -> int:
    if alternative == "greater":
        return int(np.count_nonzero(null_sums >= observed - tolerance))
    if alternative == "less":
        return int(np.count_nonzero(null_sums <= observed + tolerance))
    return int(np.count_nonzero(np.abs(null_sums) >= abs(observed) - tolerance))


def _signed_sums(values: np.ndarray) -> np.ndarray:
    """All 2^m sums sum(s_i v_i), s in {-1,+1}^m, built by doubling (one pattern each)."""
    sums = np.zeros(1)
    for value in values:
        sums = np.concatenate((sums + value, sums - value))
    return sums


def _exact_hits(data: np.ndarray, observed: float, tolerance: float, alternative: str) -> int:
    """Count sign patterns at least as extreme as ``observed`` among all 2^n, exactly.

    Meet in the middle: every pattern is a pair (left pattern, right pattern); for each
    left sum L, the right sums R with L + R >= t are R >= t - L, counted by binary search
    in the sorted right sums.
    """
    half = data.size // 2
    left = _signed_sums(data[:half])
    right = np.sort(_signed_sums(data[half:]))
    m = right.size

    def at_least(threshold: float) -> int:  # number of pairs with L + R >= threshold
        return int(m * left.size - np.searchsorted(right, threshold - left, side="left").sum())

    def at_most(threshold: float) -> int:  # number of pairs with L + R <= threshold
        return int(np.searchsorted(right, threshold - left, side="right").sum())

    if alternative == "greater":
        return at_least(observed - tolerance)
    if alternative == "less":
        return at_most(observed + tolerance)
    bound = abs(observed) - tolerance
    if bound <= 0:
        return m * left.size
    # |S| >= b  <=>  S >= b or S <= -b, disjoint when b > 0.
    return at_least(bound) + at_most(-bound)
