"""How many held-out tasks a before/after comparison needs, and what a given n can see.

The test behind every sizing here is the paired one :func:`toolkit.compare_runs` runs: one
difference ``d_i = after_i - before_i`` per task, each a difference of two per-task pass
rates over ``k`` rollouts. With the normal approximation to its mean (Lambert, *RLHF*,
ch. 16 "Evaluation", rlhfbook.com/c/16-evaluation, on sizing evals by their standard
error), a two-sided level-``alpha`` test has power ``power`` against a mean shift
``effect`` when

    n = ceil( ((z_{1-alpha/2} + z_{power}) x sd / effect)^2 ),      n >= 2

(the one-sample z-test sample size; statsmodels' ``NormalIndPower(ratio=0)`` solves the same
equation, which the tests check). ``sd`` is the standard deviation of the per-task paired
difference, taken, best first, from

1. measured pairs (``before=`` and ``after=`` rows): the sample sd (ddof 1) of the paired
   per-task pass-rate differences, the number the test will actually face (#733);
2. a given ``task_std``;
3. the binomial model with a homogeneous gain: every task moves from rate ``p = base`` to
   ``q = p + effect`` and each rate is a mean of ``k`` Bernoulli rollouts, so
   ``Var(d) = (p(1-p) + q(1-q)) / k``.

Concentrated gain. Real gains are often carried by a few tasks that flip from failing to
always passing (#292). The report also sizes that case: a share ``f = effect / (1-p)`` of
tasks goes to rate 1 (difference ``1 - p-hat``), the rest stay at ``p``. By the law of total
variance, ``Var(d) = (1-f) 2p(1-p)/k + f p(1-p)/k + f(1-f)(1-p)^2``; at base 0.6, k 4 that
needs 409 tasks for a 0.05 gain where the homogeneous model says 367.

Saturation (#392: a suite where everything passed reported "2 tasks"). A measured paired
sd of 0, or a base rate >= 0.9, says the suite has no room to show a gain, not that the
gain is easy to see. We never size from sd = 0: we fall back to the binomial model at
base 0.6 (the engine's default), set ``saturated=True`` and say so in the note.

:func:`detectable_effect` inverts the formula: the smallest effect with the requested
power at ``n`` tasks, the root of ``effect = z x sd(effect) / sqrt(n)``.

Where we differ from the reference engine (docs/design/engine.md §6.4): it iterates the fixed point 12
times; we solve it with Brent's method to 1e-12 (the 12-iteration value agrees to 3
decimals on docs/design/engine.md §10 item 18's cases). Quantiles are exact (``scipy.stats.norm.ppf``), and the
acceptance numbers hold with them: sd 0.3419 -> 367 tasks (half-width 0.035, concentrated
409); effect 0.10 -> 89 (concentrated 106); detectable at 20/50/100/140/367 tasks ->
0.198/0.131/0.094/0.080/0.050.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import brentq
from scipy.stats import norm

from toolkit._util.results import Result
from toolkit.errors import ConfigError
from toolkit.stats._metrics import _per_task_rates

__all__ = ["holdout_size", "HoldoutSize", "detectable_effect", "DetectableEffect"]

# A base rate at or above 0.9 leaves at most 0.1 of room: the suite mostly measures its
# ceiling (docs/design/engine.md §6.4), so the model falls back to the default base below.
SATURATED_BASE = 0.9
# The engine's default base rate: a suite in the middle of its range, where a binary
# rate has most of its variance (p(1-p) = 0.24 of the maximum 0.25).
FALLBACK_BASE = 0.6
# Two tasks is the least that has a sample sd at all; below it no test can run.
MIN_TASKS = 2


@dataclass(frozen=True)
class HoldoutSize(Result):
    """Tasks needed to detect ``effect`` with the paired test (formulas in the module docstring)."""

    effect: float
    n: int
    sd: float
    sd_source: str
    half_width: float
    concentrated_n: int | None
    concentrated_sd: float | None
    base: float
    k: int
    alpha: float
    power: float
    saturated: bool
    n_pairs_measured: int | None
    note: str | None = None

    def __str__(self) -> str:
        line = (
            f"{self.n} tasks to detect {self.effect:+.3g} at alpha {self.alpha:g}, power "
            f"{self.power:g} (paired sd {self.sd:.4f} from {self.sd_source.replace('_', ' ')}; "
            f"half-width {self.half_width:.3f}"
        )
        if self.concentrated_n is not None:
            line += f"; {self.concentrated_n} if the gain is concentrated"
        line += ")"
        if self.saturated:
            line += " [saturated suite]"
        return line


@dataclass(frozen=True)
class DetectableEffect(Result):
    """Smallest effect the paired test detects with ``power`` at ``n`` tasks."""

    n: int
    effect: float | None
    sd: float | None
    sd_source: str
    base: float
    k: int
    alpha: float
    power: float
    saturated: bool
    n_pairs_measured: int | None
    note: str | None = None

    def __str__(self) -> str:
        if self.effect is None:
            return f"{self.n} tasks: no detectable effect ({self.note})"
        line = (
            f"{self.n} tasks detect {self.effect:+.3f} at alpha {self.alpha:g}, power "
            f"{self.power:g} (paired sd {self.sd:.4f} from {self.sd_source.replace('_', ' ')})"
        )
        return line + (" [saturated suite]" if self.saturated else "")


# --------------------------------------------------------------------------- helpers


def _probability(value: Any, name: str, *, low_open: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ConfigError(f"{name} must be a number in (0, 1); got {value!r}")
    number = float(value)
    if not (0.0 < number < 1.0 if low_open else 0.0 <= number < 1.0):
        bracket = "(0, 1)" if low_open else "[0, 1)"
        raise ConfigError(f"{name} must lie in {bracket}; got {number!r}")
    return number


def _z_total(alpha: float, power: float) -> float:
    """z_{1-alpha/2} + z_{power}, exact normal quantiles."""
    return float(norm.ppf(1.0 - alpha / 2.0) + norm.ppf(power))


def _model_sd(base: float, effect: float, k: int) -> float:
    """sd of a paired difference of two k-rollout rates, homogeneous gain base -> base+effect."""
    after = base + effect
    return math.sqrt((base * (1.0 - base) + after * (1.0 - after)) / k)


def _concentrated_sd(base: float, effect: float, k: int) -> float | None:
    """sd when a share effect/(1-base) of tasks goes to rate 1 (module docstring)."""
    if base >= 1.0:
        return None
    share = effect / (1.0 - base)
    if not 0.0 <= share <= 1.0:
        return None
    binomial = base * (1.0 - base) / k
    variance = (1.0 - share) * 2.0 * binomial + share * binomial + share * (1.0 - share) * (1.0 - base) ** 2
    return math.sqrt(variance)


def _tasks(z_total: float, sd: float, effect: float) -> int:
    return max(MIN_TASKS, math.ceil((z_total * sd / effect) ** 2))


@dataclass(frozen=True)
class _Spread:
    sd: float
    source: str
    base: float
    saturated: bool
    n_pairs: int | None
    note: str | None


def _spread(
    effect: float | None,
    before: Any,
    after: Any,
    task_std: Any,
    base: float,
    k: int,
) -> _Spread:
    """Choose the paired sd: measured pairs, then task_std, then the binomial model."""
    notes: list[str] = []
    saturated = False
    n_pairs = None
    if (before is None) != (after is None) and after is not None:
        raise ConfigError("after= needs before= as well (the paired sd comes from both runs)")
    if before is not None:
        # Local import: compare imports this module for tasks_needed.
        before_rates = _per_task_rates(before, "before")
        if before_rates:
            base = math.fsum(before_rates.values()) / len(before_rates)
        else:
            notes.append(f"before= has no binary rewards; the base rate stays at {base:g}")
        if after is not None:
            after_rates = _per_task_rates(after, "after")
            shared = sorted(set(before_rates) & set(after_rates))
            n_pairs = len(shared)
            if n_pairs < 2:
                notes.append(
                    f"only {n_pairs} shared task(s) between before and after; a paired sd "
                    "needs at least 2"
                )
            else:
                diffs = np.array([after_rates[t] - before_rates[t] for t in shared])
                sd = float(np.std(diffs, ddof=1))
                if sd > 0.0 and base < SATURATED_BASE:
                    return _Spread(sd, "measured_pairs", base, False, n_pairs, "; ".join(notes) or None)
                # At the ceiling the measured sd is small because little can move, and
                # sizing from it is the "2 tasks" answer of #392: fall back to the model.
                saturated = True
                if sd == 0.0:
                    notes.append(
                        f"the measured paired sd is 0 over {n_pairs} shared tasks (every task "
                        "moved by the same amount, typically all passing on both sides): a "
                        "saturated suite carries no spread to size from"
                    )
    if task_std is not None and not saturated:
        if isinstance(task_std, bool) or not isinstance(task_std, (int, float, np.integer, np.floating)):
            raise ConfigError(f"task_std must be a positive number; got {task_std!r}")
        if not float(task_std) > 0.0 or not math.isfinite(float(task_std)):
            raise ConfigError(
                f"task_std must be a positive finite number; got {task_std!r} (an sd of 0 "
                "would size any effect at 2 tasks)"
            )
        return _Spread(float(task_std), "task_std", base, False, n_pairs, "; ".join(notes) or None)
    if base >= SATURATED_BASE:
        saturated = True
        notes.append(_ceiling_note(base))
    if saturated:
        notes.append(
            f"sized from the binomial model at base {FALLBACK_BASE} instead; add harder "
            "tasks (rates between 0.2 and 0.8) before trusting any count"
        )
        base = FALLBACK_BASE
    if effect is not None and base + effect > 1.0:
        raise ConfigError(
            f"effect {effect:g} at base rate {base:.3g} needs an after rate of "
            f"{base + effect:.3g} > 1; effect must be <= {1.0 - base:.3g}"
        )
    sd = _model_sd(base, effect or 0.0, k)
    return _Spread(sd, "binomial_model", base, saturated, n_pairs, "; ".join(notes) or None)


def _ceiling_note(base: float) -> str:
    return (
        f"base rate {base:.3g} >= {SATURATED_BASE}: the suite is near its ceiling and can "
        "barely show a gain (#392)"
    )


def _check_common(base: Any, k: Any, alpha: Any, power: Any) -> tuple[float, int, float, float]:
    base = _probability(base, "base", low_open=False)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ConfigError(f"k (rollouts per task) must be an integer >= 1; got {k!r}")
    return base, int(k), _probability(alpha, "alpha"), _probability(power, "power")


# --------------------------------------------------------------------------- public


def holdout_size(
    effect: float,
    *,
    before: Any = None,
    after: Any = None,
    task_std: float | None = None,
    base: float = 0.6,
    k: int = 4,
    alpha: float = 0.05,
    power: float = 0.8,
) -> HoldoutSize:
    """Held-out tasks needed for the paired test to detect a pass@1 change of ``effect``.

    ``n = ceil(((z_{1-alpha/2} + z_power) x sd / effect)^2)``, at least 2, with exact normal
    quantiles; ``sd`` from measured pairs (``before=``/``after=`` rows), else ``task_std``,
    else the binomial model ``sqrt((p(1-p) + q(1-q))/k)``, ``p = base``, ``q = p + effect``
    (module docstring; Lambert, RLHF book ch. 16). ``before=`` alone sets ``base`` to its
    measured pass@1. ``half_width`` is the half-width ``z_{1-alpha/2} sd / sqrt(n)`` the
    ``1 - alpha`` interval (95% at the default alpha) will have at that n; ``concentrated_n``
    sizes a gain carried by ``effect/(1-p)`` of the tasks flipping to always-pass. A
    saturated suite (base >= 0.9 or measured sd 0) is sized from the model at base 0.6 and
    flagged, never from sd 0.

    Parameters
    ----------
    effect : float
        The pass@1 change to detect; its absolute value is used and must lie in (0, 1).
    before : rows or None, optional
        Measured rows of the baseline (any container :func:`toolkit.compare_runs` takes).
        When they carry exact 0/1 rewards, ``base`` is replaced by their pass@1 (mean over
        tasks of the per-task rate). Default None.
    after : rows or None, optional
        Measured rows of the change; needs ``before``. With 2 or more shared tasks the sd is
        the sample sd (ddof 1) of the per-task differences ``after - before``, used unless
        it is 0 or the base rate is ``>= 0.9`` (then the suite is saturated, see below).
        Default None.
    task_std : float or None, optional
        A given sd of the per-task paired difference, positive and finite. Used when there
        is no measured sd (fewer than 2 shared tasks, or no ``after``), even at a base rate
        ``>= 0.9``; ignored for a saturated measured suite. Default None.
    base : float, optional
        Base pass rate p in [0, 1) of the binomial model; default 0.6. Overridden by
        ``before``. At ``>= 0.9`` the model path treats the suite as saturated and sizes at
        0.6 instead.
    k : int, optional
        Rollouts per task per arm (integer ``>= 1``) in the binomial model
        ``sqrt((p(1-p) + q(1-q))/k)``; default 4. It has no effect on a measured or given
        sd (the concentrated-gain count always uses it).
    alpha : float, optional
        Two-sided test level in (0, 1); default 0.05.
    power : float, optional
        Wanted power in (0, 1); default 0.8.

    Returns
    -------
    HoldoutSize
        ``n``, ``sd`` and ``sd_source`` (``"measured_pairs"``, ``"task_std"`` or
        ``"binomial_model"``), ``half_width``, ``concentrated_n`` / ``concentrated_sd``
        (None when ``effect`` exceeds ``1 - base``), the inputs used (``effect``, ``base``,
        ``k``, ``alpha``, ``power``), ``saturated``, ``n_pairs_measured`` and ``note``.

    Raises
    ------
    ConfigError
        When ``effect`` is not a number with absolute value in (0, 1); ``base``, ``alpha``,
        ``power`` or ``k`` is out of range; ``after`` is given without ``before``; a
        ``task_std`` is not a positive finite number; or, under the binomial model,
        ``base + effect > 1``.
    TypeError
        When ``before`` or ``after`` is not a row container.

    Examples
    --------
    >>> holdout_size(0.05).n
    367
    """
    if isinstance(effect, bool) or not isinstance(effect, (int, float, np.integer, np.floating)):
        raise ConfigError(f"effect must be a number in (0, 1) (a pass-rate change); got {effect!r}")
    effect = abs(float(effect))
    if not 0.0 < effect < 1.0:
        raise ConfigError(f"effect must be a pass-rate change in (0, 1) in absolute value; got {effect!r}")
    base, k, alpha, power = _check_common(base, k, alpha, power)
    spread = _spread(effect, before, after, task_std, base, k)
    z_total = _z_total(alpha, power)
    n = _tasks(z_total, spread.sd, effect)
    half_width = float(norm.ppf(1.0 - alpha / 2.0)) * spread.sd / math.sqrt(n)
    concentrated_sd = _concentrated_sd(spread.base, effect, k)
    concentrated_n = None if concentrated_sd is None else _tasks(z_total, concentrated_sd, effect)
    note = spread.note
    if concentrated_sd is None:
        extra = f"no concentrated-gain count: effect {effect:g} exceeds the room 1 - base = {1 - spread.base:.3g}"
        note = f"{note}; {extra}" if note else extra
    return HoldoutSize(
        effect=effect,
        n=n,
        sd=spread.sd,
        sd_source=spread.source,
        half_width=half_width,
        concentrated_n=concentrated_n,
        concentrated_sd=concentrated_sd,
        base=spread.base,
        k=k,
        alpha=alpha,
        power=power,
        saturated=spread.saturated,
        n_pairs_measured=spread.n_pairs,
        note=note,
    )


def detectable_effect(
    n: int,
    *,
    before: Any = None,
    after: Any = None,
    task_std: float | None = None,
    base: float = 0.6,
    k: int = 4,
    alpha: float = 0.05,
    power: float = 0.8,
) -> DetectableEffect:
    """Smallest pass@1 change the paired test detects with ``power`` at ``n`` tasks.

    Solves ``effect = (z_{1-alpha/2} + z_power) x sd(effect) / sqrt(n)``. With a measured or
    given sd the root is closed-form; under the binomial model ``sd`` grows with the effect
    and the root is found by Brent's method on ``(0, 1 - base]``. ``effect`` is ``None``
    (with a note) when even ``1 - base`` is below the detection threshold.

    Parameters
    ----------
    n : int
        Paired tasks, an integer ``>= 2``.
    before : rows or None, optional
        Measured rows of the baseline (any container :func:`toolkit.compare_runs` takes).
        When they carry exact 0/1 rewards, ``base`` is replaced by their pass@1 (mean over
        tasks of the per-task rate). Default None.
    after : rows or None, optional
        Measured rows of the change; needs ``before``. With 2 or more shared tasks the sd is
        the sample sd (ddof 1) of the per-task differences ``after - before``, used unless
        it is 0 or the base rate is ``>= 0.9`` (then the suite is saturated, see below).
        Default None.
    task_std : float or None, optional
        A given sd of the per-task paired difference, positive and finite. Used when there
        is no measured sd (fewer than 2 shared tasks, or no ``after``), even at a base rate
        ``>= 0.9``; ignored for a saturated measured suite. Default None.
    base : float, optional
        Base pass rate p in [0, 1) of the binomial model; default 0.6. Overridden by
        ``before``. At ``>= 0.9`` the model path treats the suite as saturated and sizes at
        0.6 instead.
    k : int, optional
        Rollouts per task per arm (integer ``>= 1``) in the binomial model
        ``sqrt((p(1-p) + q(1-q))/k)``; default 4. It has no effect on a measured or given
        sd.
    alpha : float, optional
        Two-sided test level in (0, 1); default 0.05.
    power : float, optional
        Wanted power in (0, 1); default 0.8.

    Returns
    -------
    DetectableEffect
        ``effect`` (None when not detectable), ``sd`` at that effect, ``sd_source``, the
        inputs used (``n``, ``base``, ``k``, ``alpha``, ``power``), ``saturated``,
        ``n_pairs_measured`` and ``note``.

    Raises
    ------
    ConfigError
        When ``n`` is not an integer ``>= 2``; ``base``, ``alpha``, ``power`` or ``k`` is out
        of range; ``after`` is given without ``before``; or a ``task_std`` is not a positive
        finite number.
    TypeError
        When ``before`` or ``after`` is not a row container.

    Examples
    --------
    >>> round(detectable_effect(100).effect, 3)
    0.094
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < MIN_TASKS:
        raise ConfigError(f"n (tasks) must be an integer >= {MIN_TASKS}; got {n!r}")
    n = int(n)
    base, k, alpha, power = _check_common(base, k, alpha, power)
    spread = _spread(None, before, after, task_std, base, k)
    z_total = _z_total(alpha, power)
    common = dict(n=n, base=spread.base, k=k, alpha=alpha, power=power,
                  saturated=spread.saturated, n_pairs_measured=spread.n_pairs)
    if spread.source != "binomial_model":
        effect = z_total * spread.sd / math.sqrt(n)
        return DetectableEffect(effect=effect, sd=spread.sd, sd_source=spread.source, note=spread.note, **common)

    room = 1.0 - spread.base

    def gap(candidate: float) -> float:
        return candidate - z_total * _model_sd(spread.base, candidate, k) / math.sqrt(n)

    if room <= 0.0 or gap(room) < 0.0:
        note = (
            f"even a gain to rate 1 (effect {room:.3g}) is below what {n} tasks can detect "
            f"at power {power:g}; add tasks (holdout_size gives the count)"
        )
        if spread.note:
            note = f"{spread.note}; {note}"
        return DetectableEffect(effect=None, sd=None, sd_source=spread.source, note=note, **common)
    effect = float(brentq(gap, 0.0, room, xtol=1e-12))
    return DetectableEffect(
        effect=effect,
        sd=_model_sd(spread.base, effect, k),
        sd_source=spread.source,
        note=spread.note,
        **common,
    )
