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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from scipy.special import ndtr, ndtri

from toolkit._util.results import Result
from toolkit._util.validate import check_count, check_level
from toolkit.errors import ConfigError, unknown_name_message

__all__ = [
    "bootstrap_ci",
    "BootstrapResult",
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


@dataclass(frozen=True)
class BootstrapResult(Result):
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

    @property
    def low(self) -> float | None:
        return self.confidence_interval.low

    @property
    def high(self) -> float | None:
        return self.confidence_interval.high

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["confidence_interval"] = {"low": _float_or_none(self.low), "high": _float_or_none(self.high)}
        return out

    def __str__(self) -> str:
        if self.estimate is None:
            return f"no estimate (n={self.n}): {self.note}"
        interval = (
            f"[{self.low:.4g}..{self.high:.4g}]" if self.low is not None else "[no interval]"
        )
        return (
            f"{self.estimate:.4g} {interval} ({self.level:.0%} {self.method}, "
            f"{self.n} units, {self.n_resamples} resamples)"
        )


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

    def __str__(self) -> str:
        if self.pvalue is None:
            return f"sign-flip test: no p-value (n={self.n}): {self.note}"
        draws = (
            f"all {self.n_patterns} sign patterns"
            if self.method == "exact"
            else f"{self.n_resamples} random patterns, MC se {self.mc_standard_error:.2g}"
        )
        return (
            f"mean diff {self.statistic:+.4g}, p = {self.pvalue:.4g} "
            f"({self.alternative}, {self.n} pairs, {draws})"
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
) -> BootstrapResult:
    """Bootstrap confidence interval of ``statistic`` over the given units (tasks).

    Parameters
    ----------
    values : one number per unit (e.g. per-task pass rates). Non-finite values raise.
    statistic : ``"mean"``, ``"median"`` or a callable reducing the last axis
        (``f(array, axis=-1)``; a callable without ``axis`` is applied per resample).
    level : confidence level in (0, 1).
    method : ``"percentile"`` or ``"bca"`` (formulas in the module docstring).
    n_resamples : B, the number of bootstrap resamples.
    seed : int or ``numpy.random.Generator``; indices come from
        ``rng.integers(0, n, (batch, n))``, the same stream ``scipy.stats.bootstrap`` uses.
    batch : resamples per chunk; default keeps a chunk near 16 MiB (int32 index + float64
        value per cell), which measured as fast as one big draw and bounds memory.

    Returns
    -------
    BootstrapResult with ``confidence_interval`` (``.low``, ``.high``), ``estimate``,
    ``standard_error``, ``n``, ``method``, ``level``, ``n_resamples``, ``note``.
    Fewer than 3 values: interval ``(None, None)`` with the reason. Constant values: the
    interval is ``(v, v)`` with a note (every resample equals v).
    """
    level = check_level("level", level)
    if not isinstance(method, str) or method.lower() not in _METHODS:
        raise ConfigError(unknown_name_message("method", str(method), _METHODS))
    method = method.lower()
    n_resamples = check_count("n_resamples", n_resamples)
    label, reduce = _statistic_function(statistic)
    data = _as_values(values, "values")
    n = int(data.size)
    empty = ConfidenceInterval(None, None)

    def result(ci: ConfidenceInterval, estimate: float | None, se: float | None, note: str | None) -> BootstrapResult:
        return BootstrapResult(ci, estimate, se, n, method, level, n_resamples, note)

    if n == 0:
        return result(empty, None, None, "no values: nothing to estimate; pass one number per task")
    estimate = float(reduce(data))
    if not math.isfinite(estimate):
        return result(empty, None, None, f"the statistic {label!r} is not finite on these values")
    if n < MIN_UNITS_FOR_INTERVAL:
        return result(
            empty,
            estimate,
            None,
            f"no interval: {n} value(s), and a bootstrap interval needs at least "
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
    note = None
    quantiles = np.array([tail, 1.0 - tail])
    if method == "bca":
        bca_levels, bca_note = _bca_levels(data, reduce, estimate, distribution, tail, batch)
        if bca_levels is None:
            note = bca_note
        else:
            quantiles = bca_levels
    low, high = np.quantile(distribution, quantiles, method="linear")
    return result(ConfidenceInterval(float(low), float(high)), estimate, standard_error, note)


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
) -> SignFlipResult:
    """Paired sign-flip (randomisation) test on the mean of per-task differences.

    Parameters
    ----------
    diffs : one paired difference per task (``after - before``).
    alternative : ``"two-sided"`` (|null| >= |obs|), ``"greater"`` (mean > 0) or ``"less"``.
    n_resamples : Monte Carlo draws when not exact.
    exact : ``"auto"`` enumerates all 2^n patterns when n <= 20; ``True`` forces it (up to
        n = 40); ``False`` forces Monte Carlo.
    seed : int or ``numpy.random.Generator`` (Monte Carlo only).
    batch : Monte Carlo patterns per chunk (default keeps a chunk near 16 MiB).

    Returns
    -------
    SignFlipResult: ``statistic`` (mean diff), ``pvalue``, ``method``, ``n``,
    ``n_patterns`` or ``n_resamples``, ``mc_standard_error`` (0.0 when exact), ``note``.
    All-zero diffs give p = 1.0 (every pattern ties the observed 0).
    """
    if not isinstance(alternative, str) or alternative not in _ALTERNATIVES:
        raise ConfigError(unknown_name_message("alternative", str(alternative), _ALTERNATIVES))
    if exact not in ("auto", True, False):
        raise ConfigError(f"exact must be 'auto', True or False; got {exact!r}")
    n_resamples = check_count("n_resamples", n_resamples)
    data = _as_values(diffs, "diffs")
    n = int(data.size)
    if n == 0:
        return SignFlipResult(None, None, alternative, "none", 0, None, None, None,
                              "no paired differences; pair tasks present in both runs")
    statistic = float(np.mean(data))
    total = float(np.sum(data))
    scale = float(np.sum(np.abs(data)))
    if scale == 0.0:
        return SignFlipResult(
            statistic, 1.0, alternative, "exact", n, 2**n, None, 0.0,
            "every difference is 0: every sign pattern ties the observed mean, p = 1",
        )
    # Compare sums, not means: dividing by n is monotone and only adds rounding.
    tolerance = _TIE_RTOL * scale
    use_exact = n <= EXACT_AUTO_MAX_N if exact == "auto" else bool(exact)
    if use_exact:
        if n > EXACT_MAX_N:
            raise ConfigError(
                f"exact=True enumerates 2^n patterns and allows n <= {EXACT_MAX_N}; got n={n} "
                "(use exact='auto' for Monte Carlo)"
            )
        hits = _exact_hits(data, total, tolerance, alternative)
        patterns = 2**n
        return SignFlipResult(statistic, hits / patterns, alternative, "exact", n, patterns, None, 0.0, None)

    rng = _generator(seed)
    n_bytes = (n + 7) // 8
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
    return SignFlipResult(statistic, pvalue, alternative, "monte_carlo", n, None, n_resamples, standard_error, None)


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
