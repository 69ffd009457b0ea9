"""How many held-out tasks a before/after comparison needs, and what a given n can see.

Both functions size the test :func:`toolkit.compare_runs` actually runs, and they get its
power by simulation. Until issue 14 they used the normal z formula
``n = ceil(((z_{1-alpha/2} + z_power) sd / effect)^2)`` (Lambert, *RLHF*, ch. 16), which an
audit found sized too small: "20 tasks detect +0.2 with power 0.8" has power 0.65-0.70, and
"89 tasks for +0.1" has 0.76-0.77. That formula is still reported, as ``z_formula_n`` and
``z_formula_effect``.

The test being sized
--------------------
With ``n`` paired tasks and one difference ``d_i = after_i - before_i`` per task (each a
difference of two per-task pass rates over ``k`` rollouts), the verdict is ``b_better`` when
both of these hold:

(a) the two-sided sign-flip p is at most ``alpha`` (Fisher 1935, ch. III;
    :func:`toolkit.sign_flip_test`): exact over all ``2^n`` sign patterns for ``n <= 20``,
    else ``p = (1 + h)/(1 + B)`` from ``h`` hits among ``B = 10,000`` random patterns
    (Phipson & Smyth 2010);
(b) the ``1 - alpha`` interval of ``mean(d)`` lies above 0: for ``n < 30`` the Student
    interval ``mean ± t_{n-1, 1-alpha/2} sd(d, ddof=1) / sqrt(n)``, for ``n >= 30`` the
    percentile bootstrap (Efron & Tibshirani 1993, ch. 13), which we take as
    ``mean ± z_{1-alpha/2} sd(d, ddof=0) / sqrt(n)``. On 4 x 400 suites of 30-98 tasks the
    two gave the same verdict on every suite (``benchmarks/bench_power.py``). Above 30 tasks
    (a) is the binding condition.

Power is ``P(verdict = b_better)`` under a data model. ``holdout_size`` returns the smallest
``n`` whose simulated power is at least ``power``; ``detectable_effect`` returns the smallest
effect whose simulated power at ``n`` is at least ``power``.

Why the z formula falls short (base 0.6, k 4; 20,000 simulated suites). At 367 tasks for
+0.05, three tests have power 0.797-0.799: a z test with the true sd, the t test, and the
normal form of the sign-flip statistic ``sum d / sqrt(sum d^2)``. The sign-flip p itself
counts every pattern that ties the observed total as "at least as extreme". On the lattice
of pass-rate differences that atom holds ~0.4% of the null's mass per side. It acts as a
continuity correction of half a lattice step, costs ~0.011 of power, and so needs ~3% more
tasks (380). At 20 tasks for +0.2 the null variance ``sum d^2 = sum (d - mean)^2 + n mean^2``
also carries the mean: the sign-flip statistic's normal form has power 0.757 there (the t
test 0.799), and the coarse exact p and the t interval take it to 0.69-0.70 (25 tasks are
needed). Normal differences have no atoms; there the test sizes like the paired t test,
within 1-3%.

Data models
-----------
The paired sd (the ``sd`` field) comes, best first, from

1. measured pairs (``before=`` and ``after=`` rows): the sample sd (ddof 1) of the paired
   per-task differences (#733). The model is nonparametric: a simulated suite draws ``n`` of
   the measured differences with replacement, recentred to the effect
   (``d_i - mean(d) + effect``). That keeps the measured shape (lattice, skew, ties) and
   moves only the mean. The resampled law has the plug-in variance, ``(m-1)/m`` times
   ``sd^2`` for ``m`` measured pairs, so at large n the count is up to ``(m-1)/m`` of an
   sd-based one;
2. a given ``task_std``: ``d ~ Normal(effect, task_std^2)``. We chose the normal because a
   bare sd says nothing about a lattice or a skew, and ``compare_runs`` also passes marker
   sds here, on any scale. Both tests are scale-free, so the power depends only on
   ``effect / task_std``;
3. the binomial model with a homogeneous gain (the default): every task moves from rate
   ``p = base`` to ``q = p + effect``, and ``d = Bin(k, q)/k - Bin(k, p)/k``, so
   ``Var(d) = (p(1-p) + q(1-q)) / k``.

Concentrated gain (#292). Real gains are often carried by a few tasks that flip from
failing to always passing. A share ``f = effect / (1-p)`` of tasks goes to rate 1, with
difference ``1 - Bin(k, p)/k``; the rest keep rate ``p`` on both sides. By the law of total
variance, ``Var(d) = (1-f) 2p(1-p)/k + f p(1-p)/k + f(1-f)(1-p)^2`` (``concentrated_sd``).
``concentrated_n`` is the simulated count under this model. At k = 1 it is the binomial
model exactly.

Saturation (#392: a suite where everything passed reported "2 tasks"). A measured paired
sd of 0, or a base rate >= 0.9, means the suite has no room to show a gain. It does not
mean the gain is easy to see. We never size from sd = 0: we fall back to the binomial model
at base 0.6 (the engine's default), set ``saturated=True`` and say so in the note.

Simulation
----------
Each power is the mean over ``S`` simulated suites of the probability that the verdict is
``b_better``. ``S = max(1000, ceil(P(1 - P) / 0.01^2) + 1)`` for a target ``P >= 0.5`` (the
worst case 1/4 below), which is 1601 at 0.8, so even the plain Monte Carlo se of a power at
the target is at most 0.01. The +1 is for the ddof-1 estimate. Post-stratification (below)
brings the reported ``achieved_power_se`` down to 0.001-0.007.

Draws. Up to 2,000 tasks a suite is drawn task by task from fixed uniforms:
``numpy.random.SeedSequence(14, spawn_key=(0, block))`` gives 256 tasks per block, and each
task's ``d`` is the inverse CDF of the model's law at its uniform. The suite of ``n + 1``
tasks is therefore the suite of ``n`` plus one task (common random numbers across ``n``),
and the same uniforms serve every effect (common random numbers across effects). The same
call always gives the same answer.

For one suite (its counts of each value of ``d``):

* interval (b): from ``sum d`` and ``sum (d - mean)^2``, exactly as written above;
* sign-flip p on a lattice ``d = m / K`` (integer ``m``). Pass-rate differences with common
  ``k`` lie on one, and so do measured ones whose recentred values fit ``K <= 64``. The null
  of ``sum s_i m_i`` is the convolution of the two-point laws ``±|m_i|``, with
  characteristic function ``prod_j cos(j theta)^{c_j}`` (``c_j`` tasks have ``|m| = j``).
  An inverse FFT on ``N > 2 sum|m_i|`` points gives that null exactly, and
  ``p = P(|S| >= |sum m|)``. This is the number ``sign_flip_test`` enumerates: tested to
  1e-12, and rounded to ``hits / 2^n`` below 21 tasks. It is used up to 500 tasks. Above
  that, the continuity-corrected Edgeworth p (next item, shifted by half a lattice step)
  moves the power by less than 0.0003 (measured at k = 1, 4, 8);
* sign-flip p off a lattice (normal model, measured values that fit no ``K <= 64``): up to
  20 tasks, exact meet-in-the-middle enumeration like ``sign_flip_test``'s, with the same
  1e-12 tie tolerance. Above 20 tasks, the Edgeworth expansion of the permutation
  distribution (Pitman 1937 for its moments; Hall 1992, ch. 2) to ``O(1/n^2)``:
  ``P(S > x sqrt(V)) ≈ 1 - Phi(x) + phi(x)[g4/24 He3 + g6/720 He5 + g4^2/1152 He7]``, with
  ``V = sum d^2``, ``g4 = -2 sum d^4 / V^2`` and ``g6 = 16 sum d^6 / V^3`` (the cumulants of
  ``±|d_i|``). On normal differences at 21-26 tasks, near p = 0.05, its rms error against
  exact enumeration is 0.0008 (the plain normal approximation's is 0.0032). On a lattice it
  only screens: the exact p replaces it wherever it can change the verdict, i.e. within 5
  Monte Carlo sd of ``alpha``, widened by 1.3 (the worst screen/exact ratio measured near
  0.05 is 1.21);
* Monte Carlo test (above 20 tasks): given the exact p, ``compare_runs``' hit count is
  ``Bin(10,000, p)``. The verdict probability is ``P(Bin(10,000, p) <= h_max)``
  (``scipy.special.bdtr``), where ``h_max`` is the largest ``h`` with
  ``(1 + h)/(1 + B) <= alpha``. We compute it rather than add a second layer of Monte Carlo
  (tested against ``sign_flip_test`` over its seeds).

On identical suites the module's verdict probabilities match the real test's verdicts to
within ±0.0014 at 14-1,510 tasks (1,000 suites per case, in the benchmark).

Post-stratification. The verdict is nearly a function of the suite total ``sum m``. The
exact law of that total is the n-fold convolution of the model's law, one FFT of
``phi(theta)^n``. Suites fall into ``S/40`` strata of equal exact probability, and the power
is the exact-weighted mean of the stratum means (Glasserman 2004, §4.3). This stays unbiased
and removes the variance that comes from where the simulated totals happened to fall. At
380 tasks (+0.05) the seed-to-seed sd of the power fell from 0.010 to 0.002 over 30 seeds,
matching the reported se. Below 21 tasks, the normal model stratifies its exactly normal
total the same way.

Above 2,000 tasks a task-by-task draw would cost ``S x n``, so we draw the suite's
sufficient statistics from their joint limit instead. ``sum d`` gets the one-term
Cornish-Fisher skew correction (Cornish & Fisher 1938). ``sum d^2`` is its linear regression
on ``sum d`` plus a normal residual. The p is the continuity-corrected Edgeworth p, with the
expected ``sum d^4`` and ``sum d^6``. At 2,001 tasks this agrees with the task-by-task
simulation within 0.25 se (12,800 suites, k = 1). The normal model above 20 tasks draws
``sum d`` and ``sum (d - mean)^2`` exactly (normal and ``chi^2_{n-1}``, independent). Both
two-number draws use a Latin hypercube (McKay, Beckman & Conover 1979), which cut the
seed-to-seed spread of the power from ±0.01 to ±0.002.

Search. ``holdout_size`` starts from the z formula with the sign-flip null's variance,
``n0 = ((z_{1-alpha/2} + z_power) sqrt(sigma^2 + mu^2) / mu)^2``. It steps with the probit
secant (``power ≈ Phi(c sqrt(n) - z_{1-alpha/2})``) and bisects to a crossing
``power(n - 1) < target <= power(n)``. The power of an exact test on lattice data is a
sawtooth in ``n`` (Chernick & Liu 2002): here the teeth are at most 0.005 deep on the
benchmark grid. So the search then scans down from the crossing until the power is 0.01
below the target, and returns the smallest ``n`` that reaches it. Below 22 tasks, where the
teeth are coarse, it scans every ``n`` from the floor. On all 27 grid cells that is the
first crossing. It never returns fewer than 5 tasks (``compare_runs`` pairs from 5) or an
``n`` whose least exact p ``2/2^n`` exceeds ``alpha`` (6 at alpha 0.05).
``detectable_effect`` brackets the effect and refines it with the probit secant and
bisection to 0.1% of its size, ten times finer than a 0.01 power se allows. Results are
cached per parameter set (``functools.lru_cache``).

Measured (``benchmarks/bench_power.py``: alpha 0.05, power 0.8; independent simulation of 2000 suites per cell)
---------------------------------------------------------------------------------------------------------------
The independent simulation draws rollouts and calls ``sign_flip_test`` and the interval per
suite. ``call s`` is a cold call on the 2-core reference machine; a default
``holdout_size(0.05)`` takes 0.12-0.4 s cold (both searches; the range is machine load) and 1.5 ms cached.
::

    effect base k |  z n  new n | module power  | independent   | call s
      0.05  0.3 1 | 1374   1419 | 0.801 ± 0.002 | 0.797 ± 0.009 | 0.37
      0.05  0.3 4 |  344    353 | 0.800 ± 0.002 | 0.791 ± 0.009 | 0.18
      0.05  0.3 8 |  172    181 | 0.802 ± 0.003 | 0.802 ± 0.009 | 0.50
      0.05  0.6 1 | 1468   1510 | 0.800 ± 0.001 | 0.805 ± 0.009 | 0.23
      0.05  0.6 4 |  367    380 | 0.802 ± 0.002 | 0.803 ± 0.009 | 0.38
      0.05  0.6 8 |  184    191 | 0.801 ± 0.003 | 0.800 ± 0.009 | 0.54
      0.05  0.8 1 |  903    934 | 0.801 ± 0.002 | 0.808 ± 0.009 | 0.16
      0.05  0.8 4 |  226    235 | 0.801 ± 0.003 | 0.816 ± 0.009 | 0.08
      0.05  0.8 8 |  113    119 | 0.800 ± 0.004 | 0.803 ± 0.009 | 0.09
      0.1   0.3 1 |  354    377 | 0.802 ± 0.002 | 0.806 ± 0.009 | 0.10
      0.1   0.3 4 |   89     98 | 0.805 ± 0.004 | 0.814 ± 0.009 | 0.07
      0.1   0.3 8 |   45     50 | 0.805 ± 0.004 | 0.812 ± 0.009 | 0.08
      0.1   0.6 1 |  354    377 | 0.802 ± 0.002 | 0.797 ± 0.009 | 0.14
      0.1   0.6 4 |   89     98 | 0.805 ± 0.004 | 0.809 ± 0.009 | 0.07
      0.1   0.6 8 |   45     50 | 0.805 ± 0.004 | 0.802 ± 0.009 | 0.09
      0.1   0.8 1 |  197    218 | 0.803 ± 0.003 | 0.794 ± 0.009 | 0.08
      0.1   0.8 4 |   50     56 | 0.806 ± 0.004 | 0.790 ± 0.009 | 0.06
      0.1   0.8 8 |   25     30 | 0.809 ± 0.005 | 0.831 ± 0.008 | 0.07
      0.2   0.3 1 |   91    104 | 0.803 ± 0.003 | 0.790 ± 0.009 | 0.03
      0.2   0.3 4 |   23     29 | 0.822 ± 0.004 | 0.839 ± 0.008 | 0.06
      0.2   0.3 8 |   12     15 | 0.801 ± 0.006 | 0.803 ± 0.009 | 0.16
      0.2   0.6 1 |   79     91 | 0.806 ± 0.003 | 0.807 ± 0.009 | 0.05
      0.2   0.6 4 |   20     25 | 0.807 ± 0.005 | 0.822 ± 0.009 | 0.06
      0.2   0.6 8 |   10     14 | 0.819 ± 0.006 | 0.825 ± 0.009 | 0.15
      0.2   0.8 1 |   32     39 | 0.820 ± 0.000 | 0.824 ± 0.009 | 0.02
      0.2   0.8 4 |    8     12 | 0.820 ± 0.006 | 0.817 ± 0.009 | 0.03
      0.2   0.8 8 |    4      8 | 0.862 ± 0.007 | 0.843 ± 0.008 | 0.04

Module and independent power differ by at most 2.2 combined se (rms 1.0). Where the power
at ``n`` is well above 0.8 (small n), it is the step from ``n - 1``: at 7 tasks it is below
0.8.

Audit cases (base 0.6, k 4), independent power: the z formula's 20 tasks for +0.2 have
0.702 ± 0.010, and the new 25 tasks 0.812 ± 0.009. The z formula's 89 tasks for +0.1 have
0.763 ± 0.010, and the new 98 tasks 0.817 ± 0.009. For +0.05, 367 -> 380 tasks
(concentrated 409 -> 423). Detectable at 20/50/100/140/367 tasks: 0.222/0.139/0.099/0.082/
0.051 (z formula 0.198/0.131/0.094/0.080/0.050).

References
----------
Chernick, M. R. & Liu, C. Y. (2002). The saw-toothed behavior of power versus sample size
and software solutions: single binomial proportion using exact methods. The American
Statistician 56:149-155.
Cornish, E. A. & Fisher, R. A. (1938). Moments and cumulants in the specification of
distributions. Revue de l'Institut International de Statistique 5:307-320.
Efron, B. & Tibshirani, R. J. (1993). An Introduction to the Bootstrap. Chapman & Hall.
Fisher, R. A. (1935). The Design of Experiments, ch. III. Oliver & Boyd.
Glasserman, P. (2004). Monte Carlo Methods in Financial Engineering, ch. 4. Springer.
Hall, P. (1992). The Bootstrap and Edgeworth Expansion. Springer.
Lambert, N. RLHF, ch. 16 "Evaluation" (rlhfbook.com/c/16-evaluation), on sizing evals by
their standard error: the z formula, kept as ``z_formula_n``.
McKay, M. D., Beckman, R. J. & Conover, W. J. (1979). A comparison of three methods for
selecting values of input variables in the analysis of output from a computer code.
Technometrics 21:239-245.
Phipson, B. & Smyth, G. K. (2010). Permutation p-values should never be zero. Stat Appl
Genet Mol Biol 9:39.
Pitman, E. J. G. (1937). Significance tests which may be applied to samples from any
populations. JRSS Suppl. 4:119-130.

Where we differ from the reference engine (docs/design/engine.md §6.4): it sized with the z
formula, iterating its fixed point 12 times. We simulate the test ``compare_runs`` runs.
The z numbers of docs/design/engine.md §10 items 17-18 (367 tasks for +0.05, 89 for +0.10,
concentrated 409/106; detectable 0.198 ... 0.050) are kept as ``z_formula_n`` /
``z_formula_effect``, and tested at that precision.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.fft import irfft, next_fast_len, rfft
from scipy.optimize import brentq
from scipy.special import bdtr, chdtri, ndtr, ndtri
from scipy.stats import binom, norm
from scipy.stats import t as student_t

from toolkit._util.results import Result
from toolkit.errors import ConfigError
from toolkit.stats._metrics import _per_task_rates
from toolkit.stats.resampling import EXACT_AUTO_MAX_N

__all__ = ["holdout_size", "HoldoutSize", "detectable_effect", "DetectableEffect"]

# A base rate at or above 0.9 leaves at most 0.1 of room: the suite mostly measures its
# ceiling (docs/design/engine.md §6.4), so the model falls back to the default base below.
SATURATED_BASE = 0.9
# The engine's default base rate: a suite in the middle of its range, where a binary
# rate has most of its variance (p(1-p) = 0.24 of the maximum 0.25).
FALLBACK_BASE = 0.6
# Two tasks is the least that has a sample sd at all; below it no test can run.
MIN_TASKS = 2
# compare_runs pairs tasks only from 5 shared ones on (its MIN_PAIRED_TASKS; below, it
# compares unpaired, which this module does not model), so no sizing returns fewer. Not
# imported: compare imports this module.
PAIRED_MIN_TASKS = 5
# The sign-flip test compare_runs runs: exact up to sign_flip_test's default 20 pairs, then
# 10,000 Monte Carlo patterns (compare_runs' n_resamples default).
EXACT_MAX_N = EXACT_AUTO_MAX_N
MC_SIGN_FLIPS = 10_000
# compare_runs' interval: Student t below 30 paired tasks, percentile bootstrap from 30.
T_INTERVAL_MAX_N = 29
# Monte Carlo se of a simulated power at the target; the issue asks for <= 0.01.
TARGET_SE = 0.01
# At least 1000 suites, so a power's granularity (1/S) stays ten times below TARGET_SE
# even when the target power is near 0 or 1 and p(1-p)/se^2 alone would ask for fewer.
MIN_SIMULATIONS = 1000
# The fixed seed (issue 14) that makes every call reproducible; its value means nothing.
SEED = 14
# Task-by-task draws cost S x n; above 2,000 tasks the suite statistics come from their
# joint limit, where the lattice step is under 1/30 of the null's sd (module docstring).
TASK_LEVEL_MAX_N = 2000
# Above this z-formula n, holdout_size solves the normal-limit z test instead of simulating
# (see _holdout_search): the simulation there agreed with it to 1-2% and cost seconds.
ANALYTIC_MIN_N = 20_000
# Tasks per block of uniforms: blocks are seeded by index, so extending a search to more
# tasks never changes the tasks already drawn; 256 keeps a block at S x 2 KiB.
BLOCK = 256
# Recentred measured differences count as a lattice when K x d is an integer for some
# K <= 64: the FFT length grows with K, and 64 covers common rollout counts up to 64 as
# well as the usual recentring shifts (k = 4 pairs shifted by 0.025 need K = 40).
MAX_LATTICE_STEPS = 64
# A lattice value within 1e-9 of K x d is taken as exact: pass-rate differences carry
# float dust of ~1e-16, far below any real step 1/K.
_LATTICE_ATOL = 1e-9
# sign_flip_test's tie tolerance, relative to sum|d| (see toolkit.stats.resampling).
_TIE_RTOL = 1e-12
# Exact lattice p up to 500 tasks: above, the continuity-corrected Edgeworth p moves the
# power by less than 0.0003 (measured at k = 1, 4, 8) while the FFT grows with n.
EXACT_LATTICE_MAX_N = 500
# For lattice suites above 20 tasks the exact p replaces the Edgeworth screen wherever it
# can change the verdict probability: within 5 Monte Carlo sd of alpha (outside, bdtr is 0 or
# 1 to within 3e-7), widened by 1.3, above the worst screen/exact ratio (1.21) measured near
# p = 0.05 at k = 1, 2, 4, 8 and n = 21-400.
SCREEN_RATIO = 1.3
# Effects are refined to 0.1% of their size: the 0.01 se of a simulated power moves the
# detectable effect by ~1.3% (0.01 / (phi(z_0.8) (z_0.975 + z_0.8))), so this is 10x finer.
EFFECT_RTOL = 1e-3
# The exact test's power is a sawtooth in n (Chernick & Liu 2002): nested suites cross
# the target, dip below it by up to 0.005 on the benchmark grid, and cross again. After
# bisection the search scans down until the power is this far below the target, so it
# finds the first crossing unless a tooth is deeper than this.
TOOTH_DEPTH = 0.01
# A safety stop for the doubling search; no eval suite comes near 2^31 tasks.
MAX_SEARCH_N = 2**31
# Independent streams of the one seed.
_STREAM_TASKS, _STREAM_LIMIT, _STREAM_NORMAL_ROWS, _STREAM_NORMAL_STATS = range(4)
# Post-stratification: ~40 suites per stratum (module docstring); the exact law of the
# suite total is skipped when its FFT would exceed 2^21 points (n x lattice width).
SUITES_PER_STRATUM = 40
MAX_STRATA_FFT = 2**21
# Cache sizes: a search result is a few numbers; 512 distinct calls is more than a session makes.
_CACHE_SIZE = 512


@dataclass(frozen=True)
class HoldoutSize(Result):
    """Tasks needed to detect ``effect`` with the paired test, by simulation (module docstring).

    ``achieved_power`` (with ``achieved_power_se`` over ``n_simulations`` suites) is the
    simulated power at ``n``; ``z_formula_n`` is the old normal-formula count, kept for
    comparison.
    """

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
    achieved_power: float | None = None
    achieved_power_se: float | None = None
    n_simulations: int | None = None
    power_method: str = "simulation"
    z_formula_n: int | None = None

    def __str__(self) -> str:
        how = (
            f"simulated power {self.achieved_power:.3f} ± {self.achieved_power_se:.3f} of compare_runs' "
            f"sign-flip + interval test over {self.n_simulations} suites"
            if self.power_method == "simulation"
            else f"power {self.achieved_power:.3f} of the sign-flip test's normal limit (too many tasks to simulate)"
        )
        line = (
            f"{self.n} tasks to detect {self.effect:+.3g} at alpha {self.alpha:g}, power "
            f"{self.power:g} ({how}; paired sd "
            f"{self.sd:.4f} from {self.sd_source.replace('_', ' ')}; half-width {self.half_width:.3f}"
        )
        if self.concentrated_n is not None:
            line += f"; {self.concentrated_n} if the gain is concentrated"
        line += f"; the z formula said {self.z_formula_n})"
        if self.saturated:
            line += " [saturated suite]"
        return line


@dataclass(frozen=True)
class DetectableEffect(Result):
    """Smallest effect the paired test detects with ``power`` at ``n`` tasks, by simulation.

    ``achieved_power`` is the simulated power at ``effect``; ``z_formula_effect`` is the old
    normal-formula answer, kept for comparison.
    """

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
    achieved_power: float | None = None
    achieved_power_se: float | None = None
    n_simulations: int | None = None
    power_method: str = "simulation"
    z_formula_effect: float | None = None

    def __str__(self) -> str:
        if self.effect is None:
            return f"{self.n} tasks: no detectable effect ({self.note})"
        line = (
            f"{self.n} tasks detect {self.effect:+.3f} at alpha {self.alpha:g}, power "
            f"{self.power:g} (simulated power {self.achieved_power:.3f} ± {self.achieved_power_se:.3f} "
            f"over {self.n_simulations} suites; paired sd {self.sd:.4f} from "
            f"{self.sd_source.replace('_', ' ')})"
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
    """The old z-formula count, reported as ``z_formula_n``."""
    return max(MIN_TASKS, math.ceil((z_total * sd / effect) ** 2))


def _half_width(n: int, alpha: float, sd: float) -> float:
    """Half-width of compare_runs' 1 - alpha interval at n tasks (t below 30, z from 30)."""
    if n <= T_INTERVAL_MAX_N:
        quantile = float(student_t.ppf(1.0 - alpha / 2.0, n - 1))
    else:
        quantile = float(norm.ppf(1.0 - alpha / 2.0))
    return quantile * sd / math.sqrt(n)


@dataclass(frozen=True)
class _Spread:
    sd: float
    source: str
    base: float
    saturated: bool
    n_pairs: int | None
    note: str | None
    diffs: tuple[float, ...] | None = None


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
                    return _Spread(sd, "measured_pairs", base, False, n_pairs, "; ".join(notes) or None,
                                   tuple(float(d) for d in diffs))
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
    alpha = _probability(alpha, "alpha")
    if alpha < 2.0 / 2.0**EXACT_MAX_N:
        raise ConfigError(
            f"alpha {alpha:g} is below 2/2^{EXACT_MAX_N}, the least p compare_runs' sign-flip "
            f"test can give (exact up to {EXACT_MAX_N} tasks, at least 1/{MC_SIGN_FLIPS + 1} above): "
            "no number of tasks reaches it"
        )
    return base, int(k), alpha, _probability(power, "power")


# --------------------------------------------------------------------------- simulation


def _rng(*key: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(SEED, spawn_key=key))


def _latin_hypercube(rng: np.random.Generator, sims: int, dims: int) -> np.ndarray:
    """``sims`` points in [0, 1)^dims, exactly one in each of ``sims`` equal slices of every axis."""
    strata = np.stack([rng.permutation(sims) for _ in range(dims)], axis=1)
    return (strata + rng.random((sims, dims))) / sims


def _n_simulations(power: float) -> int:
    """Suites per power so that the estimated se sqrt(P(1-P)/(S-1)) <= TARGET_SE at P >= target.

    Above 0.5, P(1-P) falls as P rises, so the target's own variance bounds every power the
    search accepts; below 0.5 the bound is the worst case 1/4. The +1 is the ddof-1 se.
    """
    variance = power * (1.0 - power) if power >= 0.5 else 0.25
    return max(MIN_SIMULATIONS, math.ceil(variance / TARGET_SE**2) + 1)


def _max_hits(alpha: float) -> int:
    """Largest hit count h with (1 + h)/(1 + B) <= alpha, in the float arithmetic sign_flip_test uses."""
    hits = math.floor(alpha * (MC_SIGN_FLIPS + 1)) - 1
    while (hits + 2) / (MC_SIGN_FLIPS + 1) <= alpha:
        hits += 1
    while hits >= 0 and (hits + 1) / (MC_SIGN_FLIPS + 1) > alpha:
        hits -= 1
    return hits


def _lattice_p(abs_counts: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """Exact two-sided sign-flip p of integer differences, from the counts of each |m|.

    ``abs_counts[s, j - 1]`` tasks of suite ``s`` have ``|m| = j``; ``observed[s]`` is
    ``|sum m|``. The null law of ``sum s_i m_i`` has characteristic function
    ``prod_j cos(j theta)^{c_j}`` (a product of real factors, so its sign is the parity of
    the negative ones); an inverse FFT on more than ``2 sum|m|`` points gives it exactly.
    """
    sims, top = abs_counts.shape
    if sims == 0:
        return np.zeros(0)
    weights = np.arange(1, top + 1, dtype=float)
    reach = abs_counts @ weights
    widest = int(reach.max())
    length = next_fast_len(2 * widest + 1)
    theta = 2.0 * np.pi * np.arange(length // 2 + 1) / length
    cosines = np.cos(np.outer(weights, theta))
    # One product gives log|phi| and the number of negative factors (its sign's parity).
    # cos(j theta) is never exactly 0 in floating point (pi/2 is not representable), but a
    # floor keeps log finite regardless; a count of 0 then multiplies a finite number.
    logs_and_signs = abs_counts.astype(float) @ np.hstack(
        (np.log(np.maximum(np.abs(cosines), 1e-300)), (cosines < 0.0).astype(float)))
    half = theta.size
    spectrum = np.exp(logs_and_signs[:, :half])
    spectrum[(np.rint(logs_and_signs[:, half:]).astype(np.int64) & 1) == 1] *= -1.0
    pmf = irfft(spectrum, n=length, axis=1)
    cumulative = np.cumsum(pmf[:, : widest + 1], axis=1)
    bound = observed.astype(np.int64)
    # P(|S| < a) = pmf(0) + 2 sum_{x=1}^{a-1} pmf(x), the null being symmetric.
    inside = 2.0 * cumulative[np.arange(sims), np.maximum(bound - 1, 0)] - pmf[:, 0]
    return np.where(bound == 0, 1.0, np.clip(1.0 - inside, 0.0, 1.0))


def _signed_sums(magnitudes: np.ndarray) -> np.ndarray:
    """Row-wise all 2^m sums of +-magnitudes, built by doubling."""
    sums = np.zeros((magnitudes.shape[0], 1))
    for column in magnitudes.T:
        sums = np.concatenate((sums + column[:, None], sums - column[:, None]), axis=1)
    return sums


def _enumerated_p(rows: np.ndarray) -> np.ndarray:
    """Exact two-sided sign-flip p of each row (n <= 20), counted as sign_flip_test counts it.

    Meet in the middle: for each left-half sum L, the right-half sums R with
    ``|L + R| >= |sum d| - tol`` are counted by binary search. Rows with the same values
    (common under measured resampling) are counted once.
    """
    n = rows.shape[1]
    if rows.shape[0] == 0:
        return np.zeros(0)
    keys, inverse = np.unique(np.sort(rows, axis=1), axis=0, return_inverse=True)
    magnitudes = np.abs(keys)
    bound = np.abs(keys.sum(axis=1)) - _TIE_RTOL * magnitudes.sum(axis=1)
    left = _signed_sums(magnitudes[:, : n // 2])
    right = np.sort(_signed_sums(magnitudes[:, n // 2:]), axis=1)
    patterns = left.shape[1] * right.shape[1]
    hits = np.full(len(keys), float(patterns))
    for i in np.flatnonzero(bound > 0.0):
        above = patterns - np.searchsorted(right[i], bound[i] - left[i], side="left").sum()
        below = np.searchsorted(right[i], -bound[i] - left[i], side="right").sum()
        hits[i] = above + below
    return (hits / 2.0**n)[inverse.reshape(-1)]


def _edgeworth_p(observed: np.ndarray, variance: np.ndarray, fourth: np.ndarray, sixth: np.ndarray,
                 continuity: float) -> np.ndarray:
    """Two-sided sign-flip p from the Edgeworth expansion of ``sum s_i |d_i|`` to O(1/n^2).

    The cumulants of ``s |d|`` with a fair sign are ``d^2``, ``-2 d^4`` and ``16 d^6``
    (orders 2, 4, 6); odd ones vanish. ``continuity`` is half the null's lattice step.
    """
    positive = variance > 0.0
    safe = np.where(positive, variance, 1.0)
    x = np.where(positive, np.maximum(observed - continuity, 0.0) / np.sqrt(safe), 0.0)
    g4 = np.where(positive, -2.0 * fourth / safe**2, 0.0)
    g6 = np.where(positive, 16.0 * sixth / safe**3, 0.0)
    x2 = x * x
    he3 = x * (x2 - 3.0)
    he5 = x * (x2 * (x2 - 10.0) + 15.0)
    he7 = x * (x2 * (x2 * (x2 - 21.0) + 105.0) - 105.0)
    density = np.exp(-0.5 * x2) / math.sqrt(2.0 * math.pi)
    tail = ndtr(-x) + density * (g4 / 24.0 * he3 + g6 / 720.0 * he5 + g4 * g4 / 1152.0 * he7)
    return np.clip(2.0 * tail, 0.0, 1.0)


@dataclass
class _Suites:
    """Sufficient statistics of S simulated suites of n tasks (one entry per suite).

    ``observed``, ``variance``, ``fourth`` and ``sixth`` are ``|sum d|``, ``sum d^2``,
    ``sum d^4`` and ``sum d^6`` in the null's units (integer steps m for a lattice);
    ``exact(chosen)`` gives the exact p of the chosen suites, or is None when only the
    Edgeworth p is available.
    """

    n: int
    total: np.ndarray
    centred: np.ndarray
    observed: np.ndarray
    variance: np.ndarray
    fourth: np.ndarray
    sixth: np.ndarray
    continuity: float
    exact: Callable[[np.ndarray], np.ndarray] | None
    # Post-stratification on the suite total: each suite's stratum and the exact
    # probability of every stratum under the model (None when the law of the total is not
    # available, or the draws are already a Latin hypercube).
    stratum: np.ndarray | None = None
    stratum_weights: np.ndarray | None = None


def _interval_clears(n: int, total: np.ndarray, centred: np.ndarray, alpha: float) -> np.ndarray:
    """Whether compare_runs' 1 - alpha interval lies above 0 (condition (b))."""
    mean = total / n
    if n <= T_INTERVAL_MAX_N:
        quantile = float(student_t.ppf(1.0 - alpha / 2.0, n - 1))
        variance_of_mean = centred / (n - 1) / n
    else:
        quantile = float(norm.ppf(1.0 - alpha / 2.0))
        variance_of_mean = centred / n / n
    return (mean > 0.0) & (mean * mean > quantile * quantile * variance_of_mean)


def _detection(suites: _Suites, alpha: float) -> np.ndarray:
    """P(verdict b_better) for each simulated suite (0/1 below 21 tasks)."""
    clears = _interval_clears(suites.n, suites.total, suites.centred, alpha)
    probability = np.zeros(clears.size)
    chosen = np.flatnonzero(clears)
    if chosen.size == 0:
        return probability
    if suites.n <= EXACT_MAX_N:
        patterns = 2.0**suites.n
        hits = np.rint(suites.exact(chosen) * patterns)
        probability[chosen] = hits / patterns <= alpha
        return probability
    p = _edgeworth_p(suites.observed[chosen], suites.variance[chosen], suites.fourth[chosen],
                     suites.sixth[chosen], suites.continuity)
    if suites.exact is not None:
        spread = 5.0 * math.sqrt(alpha * (1.0 - alpha) / MC_SIGN_FLIPS)
        near = (p >= max(alpha - spread, 0.0) / SCREEN_RATIO) & (p <= (alpha + spread) * SCREEN_RATIO)
        if near.any():
            p[near] = suites.exact(chosen[near])
    limit = _max_hits(alpha)
    probability[chosen] = bdtr(limit, MC_SIGN_FLIPS, p) if limit >= 0 else 0.0
    return probability


def _power_of(suites: _Suites, alpha: float) -> tuple[float, float]:
    """Simulated power and its Monte Carlo se, post-stratified on the suite total when possible.

    The verdict is nearly a function of ``sum d``, whose exact law is known; weighting the
    stratum means by their exact probabilities (Glasserman 2004, §4.3) removes the variance
    that comes from how the simulated totals happened to fall, leaving only the spread of the
    verdict within a stratum. The estimate stays unbiased; empty strata lend their weight to
    the nearest filled one.
    """
    probability = _detection(suites, alpha)
    plain_se = float(probability.std(ddof=1) / math.sqrt(probability.size))
    if suites.stratum is None:
        return float(probability.mean()), plain_se
    weights = suites.stratum_weights.copy()
    sizes = np.bincount(suites.stratum, minlength=weights.size).astype(float)
    filled = np.flatnonzero(sizes > 0)
    if filled.size < 2:
        return float(probability.mean()), plain_se
    for empty in np.flatnonzero(sizes == 0):
        weights[filled[np.argmin(np.abs(filled - empty))]] += weights[empty]
        weights[empty] = 0.0
    sums = np.bincount(suites.stratum, weights=probability, minlength=weights.size)
    squares = np.bincount(suites.stratum, weights=probability**2, minlength=weights.size)
    means = np.divide(sums, sizes, out=np.zeros_like(sums), where=sizes > 0)
    within = np.divide(squares - sizes * means**2, sizes - 1, out=np.zeros_like(sums), where=sizes > 1)
    estimate = float(weights @ means)
    se = math.sqrt(float(np.sum(np.divide(weights**2 * np.maximum(within, 0.0), sizes, out=np.zeros_like(sums),
                                          where=sizes > 0))))
    return estimate, se


def _strata_count(sims: int) -> int:
    """About 40 suites per stratum, so each stratum mean and variance rests on enough suites."""
    return max(2, sims // SUITES_PER_STRATUM)


def _lattice_strata(steps: np.ndarray, probs: np.ndarray, n: int, totals: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Equal-probability strata of the exact law of ``sum m`` (n-fold convolution by FFT)."""
    low = int(steps.min())
    width = int(steps.max()) - low
    span = n * width + 1
    if span > MAX_STRATA_FFT:
        return None
    length = next_fast_len(span)
    single = np.zeros(length)
    single[steps - low] = probs
    law = irfft(rfft(single) ** n, n=length)[:span]
    law = np.maximum(law, 0.0)
    law /= law.sum()
    bins = _strata_count(totals.size)
    # A lattice value goes to the stratum holding the middle of its probability mass.
    centre = np.cumsum(law) - 0.5 * law
    stratum_of_value = np.minimum((centre * bins).astype(np.int64), bins - 1)
    weights = np.bincount(stratum_of_value, weights=law, minlength=bins)
    return stratum_of_value[totals - n * low], weights


@dataclass(frozen=True)
class _Categorical:
    """A law of d on finitely many values; ``lattice`` K when every value is an integer over K."""

    values: tuple[float, ...]
    probs: tuple[float, ...]
    lattice: int | None

    def moments(self) -> tuple[float, float]:
        values, probs = np.array(self.values), np.array(self.probs)
        mean = float(probs @ values)
        return mean, math.sqrt(max(float(probs @ values**2) - mean * mean, 0.0))


@dataclass(frozen=True)
class _Normal:
    """d ~ Normal(delta, 1): the task_std model in units of task_std."""

    delta: float

    def moments(self) -> tuple[float, float]:
        return self.delta, 1.0


class _Uniforms:
    """Per-task uniforms, S per task, in blocks seeded by index (common random numbers)."""

    def __init__(self, sims: int):
        self.sims = sims
        self._blocks: list[np.ndarray] = []

    def block(self, index: int) -> np.ndarray:
        while len(self._blocks) <= index:
            self._blocks.append(_rng(_STREAM_TASKS, len(self._blocks)).random((self.sims, BLOCK)))
        return self._blocks[index]


class _LawArrays:
    """A :class:`_Categorical` law as arrays, with what the suite statistics need."""

    def __init__(self, law: _Categorical):
        self.law = law
        self.values = np.array(law.values)
        self.probs = np.array(law.probs)
        self.cdf = np.cumsum(self.probs)[:-1]
        if law.lattice is not None:
            self.steps = np.rint(self.values * law.lattice).astype(np.int64)
            self.units = self.steps.astype(float)
            top = int(np.abs(self.steps).max())
            self.classes = (np.abs(self.steps)[:, None] == np.arange(1, top + 1)[None, :]).astype(np.int64)
        else:
            self.units = self.values

    def categories(self, uniforms: np.ndarray) -> np.ndarray:
        """Inverse CDF: the category of each uniform."""
        drawn = np.searchsorted(self.cdf, uniforms, side="right")
        # int16 holds any category index we build (measured laws have at most a few
        # thousand distinct values) at a quarter of the memory.
        return drawn.astype(np.int16 if self.values.size < 2**15 else np.int64)

    def suites(self, counts: np.ndarray, n: int, rows: Callable[[], np.ndarray]) -> _Suites:
        """Suite statistics from the (S, categories) counts; ``rows()`` gives the categories
        of the n tasks (only asked for off a lattice at n <= 20)."""
        if self.law.lattice is not None:
            scale = self.law.lattice
            total = counts @ self.steps
            squares = counts @ self.steps**2
            # n sum m^2 - (sum m)^2 is exact in integers; dividing once keeps it so.
            centred = (n * squares - total**2) / (n * scale * scale)
            exact = None
            if n <= EXACT_LATTICE_MAX_N:
                abs_counts = counts @ self.classes

                def exact(chosen: np.ndarray) -> np.ndarray:
                    return _lattice_p(abs_counts[chosen], np.abs(total[chosen]))

            strata = _lattice_strata(self.steps, self.probs, n, total)
            return _Suites(n, total / scale, centred.astype(float), np.abs(total).astype(float),
                           squares.astype(float), counts @ self.units**4, counts @ self.units**6, 1.0, exact,
                           *(strata if strata is not None else (None, None)))
        values = self.values
        total = counts @ values
        squares = counts @ values**2
        centred = np.maximum(squares - total**2 / n, 0.0)
        exact = None
        if n <= EXACT_MAX_N:
            def exact(chosen: np.ndarray) -> np.ndarray:
                return _enumerated_p(values[rows()[chosen]])

        return _Suites(n, total, centred, np.abs(total), squares, counts @ values**4, counts @ values**6, 0.0, exact)

    def limit(self, n: int, normals: np.ndarray) -> _Suites:
        """Suite statistics above TASK_LEVEL_MAX_N from their joint limit (module docstring)."""
        units, probs = self.units, self.probs
        mu1, mu2, mu3, mu4, mu6 = (float(probs @ units**j) for j in (1, 2, 3, 4, 6))
        var1 = mu2 - mu1 * mu1
        skew = float(probs @ (units - mu1) ** 3) / var1**1.5
        z1 = normals[:, 0] + skew / (6.0 * math.sqrt(n)) * (normals[:, 0] ** 2 - 1.0)
        total = n * mu1 + math.sqrt(n * var1) * z1
        slope = (mu3 - mu1 * mu2) / var1
        residual = max(mu4 - mu2 * mu2 - slope * (mu3 - mu1 * mu2), 0.0)
        squares = n * mu2 + slope * (total - n * mu1) + math.sqrt(n * residual) * normals[:, 1]
        squares = np.maximum(squares, total**2 / n)  # sum d^2 >= (sum d)^2 / n always
        centred = squares - total**2 / n
        scale = 1.0 if self.law.lattice is None else float(self.law.lattice)
        sims = normals.shape[0]
        return _Suites(n, total / scale, centred / scale**2, np.abs(total), squares, np.full(sims, n * mu4),
                       np.full(sims, n * mu6), 0.0 if self.law.lattice is None else 1.0, None)


def _limit_normals(sims: int) -> np.ndarray:
    return ndtri(_latin_hypercube(_rng(_STREAM_LIMIT), sims, 2))


def _count(categories: np.ndarray, size: int) -> np.ndarray:
    """(S, size) counts of each category per suite."""
    sims = categories.shape[0]
    offsets = np.arange(sims)[:, None] * size
    return np.bincount((categories + offsets).ravel(), minlength=sims * size).reshape(sims, size)


class _GrowingSuites:
    """Suites of one law for any n: task i of a suite is the same for every n (holdout_size).

    Categories are drawn block by block and counted cumulatively, so n tasks cost one
    partial-block count on top of the stored block totals.
    """

    def __init__(self, law: _Categorical, uniforms: _Uniforms):
        self.arrays = _LawArrays(law)
        self.uniforms = uniforms
        self.size = self.arrays.values.size
        self.blocks: list[np.ndarray] = []
        self.cumulative = [np.zeros((uniforms.sims, self.size), dtype=np.int64)]
        self.normals: np.ndarray | None = None

    def _block(self, index: int) -> np.ndarray:
        while len(self.blocks) <= index:
            drawn = self.arrays.categories(self.uniforms.block(len(self.blocks)))
            self.blocks.append(drawn)
            self.cumulative.append(self.cumulative[-1] + _count(drawn, self.size))
        return self.blocks[index]

    def suites(self, n: int) -> _Suites:
        if n > TASK_LEVEL_MAX_N:
            if self.normals is None:
                self.normals = _limit_normals(self.uniforms.sims)
            return self.arrays.limit(n, self.normals)
        full, rest = divmod(n, BLOCK)
        if rest:
            partial = _count(self._block(full)[:, :rest], self.size)  # draws blocks up to `full`
            counts = self.cumulative[full] + partial
        else:
            self._block(full - 1)
            counts = self.cumulative[full]
        return self.arrays.suites(counts, n, lambda: self._block(0)[:, :n])


class _FixedSuites:
    """Suites of n tasks for any law (detectable_effect): the same uniforms, sorted per suite,
    so a law's counts are binary searches of its CDF instead of n category look-ups."""

    def __init__(self, uniforms: _Uniforms, n: int):
        self.n = n
        self.sims = uniforms.sims
        if n <= TASK_LEVEL_MAX_N:
            blocks = range(-(-n // BLOCK))
            self.raw = np.concatenate([uniforms.block(b) for b in blocks], axis=1)[:, :n]
            self.sorted = np.sort(self.raw, axis=1)
        else:
            self.normals = _limit_normals(self.sims)

    def suites(self, law: _Categorical) -> _Suites:
        arrays = _LawArrays(law)
        if self.n > TASK_LEVEL_MAX_N:
            return arrays.limit(self.n, self.normals)
        # below[s, j] = tasks of suite s in categories 0..j, i.e. with u < cdf_j (the inverse
        # CDF puts u in category c when cdf_{c-1} <= u < cdf_c).
        below = np.empty((self.sims, arrays.cdf.size + 2), dtype=np.int64)
        below[:, 0], below[:, -1] = 0, self.n
        for row, values in enumerate(self.sorted):
            below[row, 1:-1] = np.searchsorted(values, arrays.cdf, side="left")
        return arrays.suites(np.diff(below, axis=1), self.n, lambda: arrays.categories(self.raw))


class _NormalDraws:
    """Suites of the normal model, standardised: d = delta + Z."""

    def __init__(self, sims: int):
        self.sims = sims
        self.rows = _rng(_STREAM_NORMAL_ROWS).standard_normal((sims, EXACT_MAX_N))
        uniforms = _latin_hypercube(_rng(_STREAM_NORMAL_STATS), sims, 2)
        self.z_mean = ndtri(uniforms[:, 0])
        self.u_spread = uniforms[:, 1]

    def suites(self, delta: float, n: int) -> _Suites:
        if n <= EXACT_MAX_N:
            rows = delta + self.rows[:, :n]
            total = rows.sum(axis=1)
            centred = ((rows - total[:, None] / n) ** 2).sum(axis=1)

            def exact(chosen: np.ndarray) -> np.ndarray:
                return _enumerated_p(rows[chosen])

            bins = _strata_count(self.sims)
            # sum d ~ N(n delta, n) exactly, so equal-probability strata have weight 1/bins.
            stratum = np.minimum((ndtr((total - n * delta) / math.sqrt(n)) * bins).astype(np.int64), bins - 1)
            return _Suites(n, total, centred, np.abs(total), (rows**2).sum(axis=1), (rows**4).sum(axis=1),
                           (rows**6).sum(axis=1), 0.0, exact, stratum, np.full(bins, 1.0 / bins))
        # Normal samples: sum d ~ N(n delta, n) and sum (d - mean)^2 ~ chi^2_{n-1}, independent.
        total = n * delta + math.sqrt(n) * self.z_mean
        centred = chdtri(n - 1, 1.0 - self.u_spread)
        mean, spread = total / n, centred / n
        # sum d^4 and sum d^6 only enter the Edgeworth terms; their normal expectations at the
        # suite's own mean and variance are within O(n^-1/2) of the realised sums.
        fourth = n * (mean**4 + 6.0 * mean**2 * spread + 3.0 * spread**2)
        sixth = n * (mean**6 + 15.0 * mean**4 * spread + 45.0 * mean**2 * spread**2 + 15.0 * spread**3)
        return _Suites(n, total, centred, np.abs(total), centred + total**2 / n, fourth, sixth, 0.0, None)


def _lattice_law(weights: dict[int, float], scale: int) -> _Categorical:
    """A law on steps/scale, with the scale reduced by the steps' common divisor."""
    steps = np.array(sorted(step for step, weight in weights.items() if weight > 0.0), dtype=np.int64)
    probs = np.array([weights[int(step)] for step in steps])
    nonzero = np.abs(steps[steps != 0])
    divisor = math.gcd(int(np.gcd.reduce(nonzero)), scale) if nonzero.size else scale
    return _Categorical(tuple(float(step // divisor) / (scale // divisor) for step in steps),
                        tuple((probs / probs.sum()).tolist()), scale // divisor)


def _binomial_law(base: float, effect: float, k: int) -> _Categorical:
    """d = Bin(k, base + effect)/k - Bin(k, base)/k."""
    after = binom.pmf(np.arange(k + 1), k, min(base + effect, 1.0))
    before = binom.pmf(np.arange(k + 1), k, base)
    pmf = np.convolve(after, before[::-1])  # index i is the step i - k
    return _lattice_law({i - k: float(w) for i, w in enumerate(pmf)}, k)


def _concentrated_law(base: float, effect: float, k: int) -> _Categorical:
    """A share effect/(1 - base) of tasks goes to rate 1; the rest stay at base."""
    share = effect / (1.0 - base)
    before = binom.pmf(np.arange(k + 1), k, base)
    weights = {i - k: (1.0 - share) * float(w) for i, w in enumerate(np.convolve(before, before[::-1]))}
    for passed, w in enumerate(before):
        weights[k - passed] = weights.get(k - passed, 0.0) + share * float(w)
    return _lattice_law(weights, k)


def _measured_law(diffs: tuple[float, ...], effect: float) -> _Categorical:
    """Resample the measured differences, recentred to mean ``effect``."""
    data = np.array(diffs)
    values, counts = np.unique(data, return_counts=True)
    shifted = values - math.fsum(diffs) / len(diffs) + effect
    probs = counts / counts.sum()
    for scale in range(1, MAX_LATTICE_STEPS + 1):
        steps = np.rint(shifted * scale)
        if np.all(np.abs(shifted * scale - steps) <= _LATTICE_ATOL * scale):
            merged: dict[int, float] = {}
            for step, prob in zip(steps.astype(np.int64).tolist(), probs.tolist()):
                merged[step] = merged.get(step, 0.0) + prob
            return _lattice_law(merged, scale)
    return _Categorical(tuple(shifted.tolist()), tuple(probs.tolist()), None)


def _n_floor(alpha: float) -> int:
    """Fewest tasks at which the verdict can be b_better: 5 pairs, and 2/2^n <= alpha if exact."""
    n = PAIRED_MIN_TASKS
    while n <= EXACT_MAX_N and 2.0 / 2.0**n > alpha:
        n += 1
    return n


# --------------------------------------------------------------------------- searches


@dataclass(frozen=True)
class _Found:
    value: Any
    power: float | None
    se: float | None
    sims: int


def _smallest_n(power_at: Callable[[int], tuple[float, float]], target: float, alpha: float,
                guess: int) -> tuple[int, tuple[float, float]]:
    """Smallest n with power_at(n) >= target: probit-secant steps and bisection to a crossing,
    then the sawtooth scan below it (module docstring, "Search")."""
    memo: dict[int, tuple[float, float]] = {}

    def power(n: int) -> float:
        if n not in memo:
            memo[n] = power_at(n)
        return memo[n][0]

    floor = _n_floor(alpha)
    # Above 20 tasks the Monte Carlo p is at least 1/(1 + B): for a smaller alpha only
    # exact sizes can reject.
    ceiling = EXACT_MAX_N if alpha < 1.0 / (MC_SIGN_FLIPS + 1) else MAX_SEARCH_N
    if floor > ceiling:
        raise ConfigError(f"no suite size can reach alpha {alpha:g} with compare_runs' sign-flip test")
    z_alpha = float(norm.ppf(1.0 - alpha / 2.0))
    z_target = float(norm.ppf(target))
    lo, hi = floor - 1, None  # power below the floor is 0 < target
    n = min(max(floor, guess), ceiling)
    previous_width = None
    while True:
        p = power(n)
        if p >= target:
            hi = n
        else:
            lo = n
        if hi is not None and hi - lo <= 1:
            break
        step = None
        if 0.0 < p < 1.0:
            # power ~ Phi(c sqrt(n) - z_alpha): solve for the n that gives the target.
            slope = (float(ndtri(p)) + z_alpha) / math.sqrt(n)
            if slope > 0.0:
                step = math.ceil(((z_alpha + z_target) / slope) ** 2)
        if hi is None:
            if lo >= ceiling:
                raise ConfigError(
                    f"no suite size up to {ceiling} tasks reaches power {target:g} at alpha {alpha:g}"
                )
            n = min(step if step is not None and step > lo else 2 * lo + 1, ceiling)
            continue
        width = hi - lo
        # Bisect when the secant step leaves the bracket or stopped halving it.
        if step is None or not lo < step < hi or (previous_width is not None and width > previous_width / 2):
            step = (lo + hi) // 2
        previous_width = width
        n = step
    if hi <= EXACT_MAX_N + 1:
        # Below 22 tasks the exact test's teeth are deep (2/2^n steps): scan them all.
        for candidate in range(floor, hi):
            if power(candidate) >= target:
                return candidate, memo[candidate]
        return hi, memo[hi]
    # Sawtooth: a tooth below the bisection's crossing may already reach the target.
    best, candidate = hi, hi - 1
    while candidate >= floor and power(candidate) >= target - TOOTH_DEPTH:
        if memo[candidate][0] >= target:
            best = candidate
        candidate -= 1
    return best, memo[best]


def _start_n(law: _Categorical | _Normal, alpha: float, target: float) -> int:
    """The z formula with the sign-flip null's variance sigma^2 + mu^2 (module docstring)."""
    mean, sd = law.moments()
    return max(1, math.ceil((_z_total(alpha, target) * math.hypot(sd, mean) / mean) ** 2))


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _holdout_search(law: _Categorical | _Normal, alpha: float, target: float) -> _Found:
    sims = _n_simulations(target)
    mean, sd = law.moments()
    if _start_n(law, alpha, target) > ANALYTIC_MIN_N:
        # Far out the test is the sign-flip z test with null variance sigma^2 + mu^2 (its
        # exact variance, module docstring) and the simulated n is within 1-2% of it, while
        # simulating 10^5+ tasks costs seconds per call (6.5 s at 78,000 tasks, 39 s at
        # 710,000; delta_report sizes every report). Solve that z test directly:
        # power(n) = Phi((sqrt(n) mu - z_{alpha/2} sqrt(sigma^2 + mu^2)) / sigma).
        z_alpha = float(norm.ppf(1.0 - alpha / 2.0))
        n = math.ceil(((z_alpha * math.hypot(sd, mean) + float(norm.ppf(target)) * sd) / abs(mean)) ** 2)
        power = float(norm.cdf((math.sqrt(n) * abs(mean) - z_alpha * math.hypot(sd, mean)) / sd))
        return _Found(n, power, 0.0, 0)
    if isinstance(law, _Normal):
        draws = _NormalDraws(sims)

        def power_at(n: int) -> tuple[float, float]:
            return _power_of(draws.suites(law.delta, n), alpha)
    else:
        suites = _GrowingSuites(law, _Uniforms(sims))

        def power_at(n: int) -> tuple[float, float]:
            return _power_of(suites.suites(n), alpha)

    n, (power, se) = _smallest_n(power_at, target, alpha, _start_n(law, alpha, target))
    return _Found(n, power, se, sims)


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _detectable_search(family: tuple, n: int, alpha: float, target: float, guess: float,
                       upper: float | None) -> _Found:
    """Smallest effect with simulated power >= target at n, or value None if none up to ``upper``.

    ``family`` is ``("binomial", base, k)``, ``("measured", diffs)`` or ``("normal",)``
    (effects in units of task_std).
    """
    sims = _n_simulations(target)
    kind = family[0]
    if kind == "normal":
        draws = _NormalDraws(sims)

        def power_at(effect: float) -> tuple[float, float]:
            return _power_of(draws.suites(effect, n), alpha)
    else:
        fixed = _FixedSuites(_Uniforms(sims), n)

        def power_at(effect: float) -> tuple[float, float]:
            law = _binomial_law(family[1], effect, family[2]) if kind == "binomial" else _measured_law(family[1], effect)
            return _power_of(fixed.suites(law), alpha)

    memo: dict[float, tuple[float, float]] = {}

    def power(effect: float) -> float:
        if effect not in memo:
            memo[effect] = power_at(effect)
        return memo[effect][0]

    z_alpha = float(norm.ppf(1.0 - alpha / 2.0))
    z_target = float(norm.ppf(target))
    lo, hi = 0.0, None
    effect = guess if upper is None else min(guess, upper)
    while hi is None:
        p = power(effect)
        if p >= target:
            hi = effect
            break
        lo = effect
        if upper is not None and effect >= upper:
            return _Found(None, p, memo[effect][1], sims)
        # power ~ Phi(c effect - z_alpha) at fixed n: step to the effect that gives the target.
        slope = (float(ndtri(min(max(p, 0.5 / sims), 1.0 - 0.5 / sims))) + z_alpha) / effect
        effect = 1.1 * (z_alpha + z_target) / slope if slope > 0.0 else 2.0 * effect
        effect = max(effect, 1.05 * lo)
        if upper is not None:
            effect = min(effect, upper)

    def probit(effect: float) -> float:
        return float(ndtri(min(max(memo[effect][0], 0.5 / sims), 1.0 - 0.5 / sims)))

    previous_width = None
    while hi - lo > EFFECT_RTOL * hi:
        width = hi - lo
        step = None
        if lo > 0.0 and probit(hi) > probit(lo):
            step = lo + (z_target - probit(lo)) * width / (probit(hi) - probit(lo))
        # Bisect when the secant step is not strictly inside or stopped halving the bracket.
        if step is None or not lo < step < hi or (previous_width is not None and width > previous_width / 2):
            step = 0.5 * (lo + hi)
        previous_width = width
        if power(step) >= target:
            hi = step
        else:
            lo = step
    return _Found(hi, *memo[hi], sims)


def _law_for(spread: _Spread, effect: float, k: int) -> _Categorical | _Normal:
    if spread.source == "measured_pairs":
        return _measured_law(spread.diffs, effect)
    if spread.source == "task_std":
        return _Normal(effect / spread.sd)
    return _binomial_law(spread.base, effect, k)


def _check_effect(effect: Any) -> float:
    if isinstance(effect, bool) or not isinstance(effect, (int, float, np.integer, np.floating)):
        raise ConfigError(f"effect must be a number in (0, 1) (a pass-rate change); got {effect!r}")
    effect = abs(float(effect))
    if not 0.0 < effect < 1.0:
        raise ConfigError(f"effect must be a pass-rate change in (0, 1) in absolute value; got {effect!r}")
    return effect


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
    """Held-out tasks needed for compare_runs' paired test to detect a pass@1 change of ``effect``.

    ``n`` is the smallest number of paired tasks whose simulated power is at least
    ``power``. Power here means the probability that :func:`toolkit.compare_runs` returns
    ``b_better``: sign-flip p <= ``alpha`` and its interval above 0. The power is simulated
    under the data model of the sd source (module docstring). With measured pairs
    (``before=``/``after=`` rows) the model resamples the measured differences, recentred
    to ``effect``. A ``task_std`` gives normal differences with that sd. Otherwise the
    binomial model moves every task from ``p = base`` to ``q = p + effect``, over ``k``
    rollouts a side. ``before=`` alone sets ``base`` to its measured pass@1.
    ``half_width`` is the half-width the ``1 - alpha`` interval will have at ``n``
    (``t_{n-1}`` below 30 tasks, ``z`` from 30, times ``sd / sqrt(n)``).
    ``concentrated_n`` is the simulated count when the gain is carried by ``effect/(1-p)``
    of the tasks flipping to always-pass. A saturated suite (base >= 0.9 or measured sd 0)
    is sized from the model at base 0.6 and flagged, never from sd 0. The answer is
    deterministic (fixed seed) and cached.

    Parameters
    ----------
    effect : float
        The pass@1 change to detect; its absolute value is used and must lie in (0, 1).
    before : rows or None, optional
        Measured rows of the baseline (any container :func:`toolkit.compare_runs` takes).
        When they carry exact 0/1 rewards, ``base`` is replaced by their pass@1 (mean over
        tasks of the per-task rate). Default None.
    after : rows or None, optional
        Measured rows of the change; needs ``before``. With 2 or more shared tasks, the
        per-task differences ``after - before`` are the data model (resampled, recentred
        to ``effect``) and their sample sd (ddof 1) is ``sd``. They are used unless the sd
        is 0 or the base rate is ``>= 0.9``; then the suite is saturated (see below).
        Default None.
    task_std : float or None, optional
        A given sd of the per-task paired difference, positive and finite; the model is
        then ``d ~ Normal(effect, task_std^2)``. Used when there is no measured sd (fewer
        than 2 shared tasks, or no ``after``), even at a base rate ``>= 0.9``; ignored for
        a saturated measured suite. Default None.
    base : float, optional
        Base pass rate p in [0, 1) of the binomial model; default 0.6. Overridden by
        ``before``. At ``>= 0.9`` the model path treats the suite as saturated and sizes at
        0.6 instead.
    k : int, optional
        Rollouts per task per arm (integer ``>= 1``) in the binomial model; default 4. It
        has no effect on a measured or given sd (the concentrated-gain count always uses it).
    alpha : float, optional
        Two-sided test level in (0, 1); default 0.05. It must be at least ``2/2^20``, the
        least p the sign-flip test can give.
    power : float, optional
        Wanted power in (0, 1); default 0.8.

    Returns
    -------
    HoldoutSize
        ``n``; ``achieved_power`` and ``achieved_power_se`` (simulated power at ``n`` and its
        Monte Carlo se, at most 0.01) over ``n_simulations`` suites; ``z_formula_n``, the old
        normal-formula count; ``sd`` and ``sd_source`` (``"measured_pairs"``,
        ``"task_std"`` or ``"binomial_model"``); ``half_width``; ``concentrated_n`` and
        ``concentrated_sd`` (None when ``effect`` exceeds ``1 - base``); the inputs used
        (``effect``, ``base``, ``k``, ``alpha``, ``power``); ``saturated``;
        ``n_pairs_measured``; ``power_method`` (``"simulation"``, or ``"normal limit"`` above
        20,000 tasks, where the sign-flip test's normal limit is solved directly); and ``note``.

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
    >>> holdout_size(0.2).n  # the z formula said 20; 20 tasks have power 0.69
    25
    """
    effect = _check_effect(effect)
    base, k, alpha, power = _check_common(base, k, alpha, power)
    spread = _spread(effect, before, after, task_std, base, k)
    found = _holdout_search(_law_for(spread, effect, k), alpha, power)
    concentrated_sd = _concentrated_sd(spread.base, effect, k)
    concentrated_n = None
    if concentrated_sd is not None:
        concentrated_n = _holdout_search(_concentrated_law(spread.base, effect, k), alpha, power).value
    note = spread.note
    if concentrated_sd is None:
        extra = f"no concentrated-gain count: effect {effect:g} exceeds the room 1 - base = {1 - spread.base:.3g}"
        note = f"{note}; {extra}" if note else extra
    return HoldoutSize(
        effect=effect,
        n=found.value,
        sd=spread.sd,
        sd_source=spread.source,
        half_width=_half_width(found.value, alpha, spread.sd),
        concentrated_n=concentrated_n,
        concentrated_sd=concentrated_sd,
        base=spread.base,
        k=k,
        alpha=alpha,
        power=power,
        saturated=spread.saturated,
        n_pairs_measured=spread.n_pairs,
        note=note,
        achieved_power=found.power,
        achieved_power_se=found.se,
        n_simulations=found.sims,
        power_method="simulation" if found.sims else "normal limit",
        z_formula_n=_tasks(_z_total(alpha, power), spread.sd, effect),
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
    """Smallest pass@1 change compare_runs' paired test detects with ``power`` at ``n`` tasks.

    The inverse of :func:`holdout_size`, also by simulation under the same data models. The
    effect is bracketed and refined to 0.1% of its size, on the same simulated suites for
    every candidate effect (common random numbers), so the power rises smoothly with it.
    Under the binomial model the effect is capped by the room ``1 - base``. ``effect`` is
    ``None`` (with a note) when even ``1 - base`` is not detected with ``power``, or when
    ``n`` is too small for any sign-flip verdict (below 5 pairs, or ``2/2^n > alpha``).

    Parameters
    ----------
    n : int
        Paired tasks, an integer ``>= 2``.
    before : rows or None, optional
        Measured rows of the baseline (any container :func:`toolkit.compare_runs` takes).
        When they carry exact 0/1 rewards, ``base`` is replaced by their pass@1 (mean over
        tasks of the per-task rate). Default None.
    after : rows or None, optional
        Measured rows of the change; needs ``before``. With 2 or more shared tasks, the
        per-task differences (resampled, recentred to each candidate effect) are the data
        model and their sample sd (ddof 1) is ``sd``. They are used unless the sd is 0 or the
        base rate is ``>= 0.9``; then the suite is saturated (see below). Default None.
    task_std : float or None, optional
        A given sd of the per-task paired difference, positive and finite; the model is
        normal. Used when there is no measured sd (fewer than 2 shared tasks, or no
        ``after``), even at a base rate ``>= 0.9``; ignored for a saturated measured suite.
        Default None.
    base : float, optional
        Base pass rate p in [0, 1) of the binomial model; default 0.6. Overridden by
        ``before``. At ``>= 0.9`` the model path treats the suite as saturated and sizes at
        0.6 instead.
    k : int, optional
        Rollouts per task per arm (integer ``>= 1``) in the binomial model; default 4. It
        has no effect on a measured or given sd.
    alpha : float, optional
        Two-sided test level in (0, 1); default 0.05.
    power : float, optional
        Wanted power in (0, 1); default 0.8.

    Returns
    -------
    DetectableEffect
        ``effect`` (None when not detectable); ``achieved_power`` and ``achieved_power_se``
        at that effect, over ``n_simulations`` suites; ``z_formula_effect`` (the old
        normal-formula answer); ``sd`` at that effect; ``sd_source``; the inputs used
        (``n``, ``base``, ``k``, ``alpha``, ``power``); ``saturated``;
        ``n_pairs_measured``; ``power_method``; and ``note``.

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
    >>> round(detectable_effect(100).effect, 3)  # the z formula said 0.094
    0.099
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < MIN_TASKS:
        raise ConfigError(f"n (tasks) must be an integer >= {MIN_TASKS}; got {n!r}")
    n = int(n)
    base, k, alpha, power = _check_common(base, k, alpha, power)
    spread = _spread(None, before, after, task_std, base, k)
    z_total = _z_total(alpha, power)
    common = dict(n=n, base=spread.base, k=k, alpha=alpha, power=power,
                  saturated=spread.saturated, n_pairs_measured=spread.n_pairs, power_method="simulation")
    room = 1.0 - spread.base

    def with_note(text: str) -> str:
        return f"{spread.note}; {text}" if spread.note else text

    if spread.source != "binomial_model":
        z_effect = z_total * spread.sd / math.sqrt(n)
    else:
        def gap(candidate: float) -> float:
            return candidate - z_total * _model_sd(spread.base, candidate, k) / math.sqrt(n)

        z_effect = float(brentq(gap, 0.0, room, xtol=1e-12)) if room > 0.0 and gap(room) >= 0.0 else None
    common["z_formula_effect"] = z_effect

    if n < _n_floor(alpha) or (alpha < 1.0 / (MC_SIGN_FLIPS + 1) and n > EXACT_MAX_N):
        note = (
            f"no effect is detectable at {n} tasks: compare_runs needs {PAIRED_MIN_TASKS} pairs and an "
            f"exact sign-flip p can reach alpha {alpha:g} only from {_n_floor(alpha)} tasks on; "
            "holdout_size gives the count"
        )
        return DetectableEffect(effect=None, sd=None, sd_source=spread.source, note=with_note(note), **common)
    if spread.source == "task_std":
        found = _detectable_search(("normal",), n, alpha, power, z_effect / spread.sd, None)
        effect = None if found.value is None else found.value * spread.sd
        sd = spread.sd
    elif spread.source == "measured_pairs":
        found = _detectable_search(("measured", spread.diffs), n, alpha, power, z_effect, None)
        effect, sd = found.value, spread.sd
    else:
        found = _detectable_search(("binomial", spread.base, k), n, alpha, power,
                                   room if z_effect is None else z_effect, room)
        effect = found.value
        sd = None if effect is None else _model_sd(spread.base, effect, k)
    common.update(achieved_power=found.power, achieved_power_se=found.se, n_simulations=found.sims)
    if effect is None:
        note = (
            f"even a gain to rate 1 (effect {room:.3g}) is below what {n} tasks can detect "
            f"at power {power:g}; add tasks (holdout_size gives the count)"
        )
        return DetectableEffect(effect=None, sd=None, sd_source=spread.source, note=with_note(note), **common)
    return DetectableEffect(effect=effect, sd=sd, sd_source=spread.source, note=spread.note, **common)
