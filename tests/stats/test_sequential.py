"""tk.stats.confidence_sequence: anytime-valid bounds on a mean.

References: the hedged-capital process of Waudby-Smith & Ramdas (2024, JRSS-B, eq. (26)-(27))
re-computed here in plain Python for single candidate means; and, by simulation against the
known truth, the probability that the sequence ever excludes the true mean (<= alpha), set
beside a fixed-n t interval read after every task (which exceeds alpha several-fold).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import t as student_t

import toolkit as tk
from toolkit.errors import ConfigError
from toolkit.stats import confidence_sequence


def _capital(values, m, alpha=0.05, cap=0.5):
    """(K+ + K-)/2 after every value, for one candidate mean m, straight from the paper."""
    k_plus = k_minus = 1.0
    total = squares = 0.0
    out = []
    for i, x in enumerate(values, start=1):
        variance = (0.25 + squares) / i
        bet = math.sqrt(2 * math.log(2 / alpha) / (variance * i * math.log(1 + i)))
        k_plus *= 1 + min(bet, cap / m) * (x - m)
        k_minus *= 1 - min(bet, cap / (1 - m)) * (x - m)
        out.append((k_plus + k_minus) / 2)
        total += x
        mu = (0.5 + total) / (i + 1)
        squares += (x - mu) ** 2
    return out


def test_the_set_is_the_candidates_whose_capital_stays_under_one_over_alpha():
    values = np.random.default_rng(0).beta(2, 5, 120)
    cs = confidence_sequence(values)
    for m in (0.0505, 0.1505, 0.2505, 0.3505, 0.5005, 0.7005):
        capital = _capital(values.tolist(), m)
        alive = np.cumprod([c < 20 for c in capital]).astype(bool)  # running intersection
        for t in (9, 39, 119):
            inside = cs.low[t] <= m <= cs.high[t]
            assert inside == alive[t], (m, t, capital[t])


def test_it_never_excludes_the_truth_more_often_than_alpha_where_peeking_does():
    """400 runs of 300 tasks at true mean 0.5: the share of runs whose interval ever
    excludes 0.5 (a false decision for a watcher who stops then)."""
    rng = np.random.default_rng(1)
    sequence = peeking = 0
    for _ in range(400):
        values = rng.beta(2, 2, 300)
        sequence += confidence_sequence(values).decided(0.5)[0] is not None
        n = np.arange(1, 301)
        means = np.cumsum(values) / n
        sd = np.sqrt(np.maximum(np.cumsum(values**2) / n - means**2, 0) * n / np.maximum(n - 1, 1))
        half = student_t.ppf(0.975, np.maximum(n - 1, 1)) * sd / np.sqrt(n)
        peeking += bool(np.any((np.abs(means - 0.5) > half)[9:]))  # from 10 tasks on
    assert sequence / 400 <= 0.05 + 0.02  # sd of a 0.05 rate over 400 runs is 0.011
    assert peeking / 400 > 0.15


def test_a_real_gap_is_decided_and_on_the_right_side():
    rng = np.random.default_rng(2)
    cs = confidence_sequence(rng.beta(4, 2, 400))  # mean 0.667
    at, side = cs.decided(0.5)
    assert side == "above" and at < 400
    assert confidence_sequence(1 - rng.beta(4, 2, 400)).decided(0.5)[1] == "below"


def test_bounds_map_a_paired_delta():
    rng = np.random.default_rng(3)
    deltas = np.clip(rng.normal(0.2, 0.3, 300), -1, 1)
    cs = confidence_sequence(deltas, bounds=(-1, 1))
    assert -1 <= cs.low[-1] < 0.2 < cs.high[-1] <= 1
    assert cs.means[-1] == pytest.approx(deltas.mean())


def test_the_sequence_only_narrows():
    cs = confidence_sequence(np.random.default_rng(4).random(200))
    assert all(a <= b for a, b in zip(cs.low, cs.low[1:]))
    assert all(a >= b for a, b in zip(cs.high, cs.high[1:]))


@pytest.mark.parametrize(("values", "kwargs", "message"), [
    ([0.2, float("nan")], {}, "values[1] is nan"),
    ([0.2, 1.5], {}, "outside bounds"),
    ([0.2], {"level": 1.0}, "level must be"),
    ([0.2], {"bounds": (1, 0)}, "low < high"),
])
def test_bad_input_is_refused_by_name(values, kwargs, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[")):
        confidence_sequence(values, **kwargs)


def test_the_fixed_n_band_beside_it_is_scipys_t_interval():
    values = np.random.default_rng(5).beta(2, 2, 50)
    cs = confidence_sequence(values)
    for t in (1, 9, 49):
        sample = values[: t + 1]
        low, high = student_t.interval(0.95, t, loc=sample.mean(), scale=sample.std(ddof=1) / math.sqrt(t + 1))
        assert cs.fixed_low[t] == pytest.approx(max(0, low)) and cs.fixed_high[t] == pytest.approx(min(1, high))
        if t >= 9:  # (at 2 units both are the whole range) the anytime-valid one is wider
            assert cs.high[t] - cs.low[t] > cs.fixed_high[t] - cs.fixed_low[t]
    assert cs.fixed_low[0] is None


def test_stopping_study_counts_more_false_decisions_at_a_lower_level():
    strict = tk.stats.stopping_study(runs=60, n_units=150, level=0.95, seed=3)
    loose = tk.stats.stopping_study(runs=60, n_units=150, level=0.8, seed=3)
    assert loose.sequence_rate >= strict.sequence_rate and loose.peeking_rate > strict.peeking_rate
    assert strict.peeking_rate > strict.sequence_rate
    assert "anytime-valid sequence" in str(strict) and "nominal 0.05" in str(strict)
    with pytest.raises(ConfigError, match="first_look"):
        tk.stats.stopping_study(n_units=5, first_look=10)
