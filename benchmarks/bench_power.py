"""Check tk.holdout_size against an independent simulation of compare_runs' paired test.

Run: ``.venv/bin/python benchmarks/bench_power.py [--sims 2000] [--quick]``

For every cell of the grid (effect 0.05/0.1/0.2 x base 0.3/0.6/0.8 x k 1/4/8, alpha 0.05,
power 0.8) it prints the old z-formula count, the new simulated count, the module's own
simulated power at that count, and an independent simulated power with its Monte Carlo
error. It also prints the cold call time, with the caches cleared first.

The independent simulation shares no code with toolkit.stats.power. It draws binomial
rollouts with its own generator, calls :func:`toolkit.sign_flip_test` per suite (exact up
to 20 tasks, 10,000 Monte Carlo patterns above, as compare_runs does) and forms the
interval per suite: Student t below 30 tasks, ``mean ± z sd(ddof 0)/sqrt(n)`` from 30 on.
That normal form stands in for compare_runs' percentile bootstrap, whose 10,000 resamples
per suite would take minutes per cell at n ~ 1,500. The section "bootstrap check" compares
the real :func:`toolkit.bootstrap_ci` with that normal form on the same suites.

Also printed:

* the two audit cases at their old z-formula counts;
* a same-suite check. On one set of independently drawn suites it compares the module's
  per-suite verdict probability with the real test's verdicts. The difference has a paired
  se far below either power's, so it isolates any systematic error of the module's
  computation from sampling noise;
* the percentile bootstrap against its normal form;
* the Edgeworth sign-flip p (used above 20 tasks off a lattice) against exact enumeration.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np
from scipy import stats

import toolkit as tk
from toolkit.stats import power as power_module

ALPHA, POWER = 0.05, 0.8
EFFECTS, BASES, KS = (0.05, 0.1, 0.2), (0.3, 0.6, 0.8), (1, 4, 8)


def independent_power(base, effect, k, n, sims, seed, bootstrap=False):
    """Share of simulated suites on which compare_runs' verdict would be b_better, and its se."""
    rng = np.random.default_rng(seed)
    z = stats.norm.ppf(1 - ALPHA / 2)
    t = stats.t.ppf(1 - ALPHA / 2, n - 1)
    hits = 0
    for i in range(sims):
        d = rng.binomial(k, base + effect, n) / k - rng.binomial(k, base, n) / k
        if tk.sign_flip_test(d, seed=i).pvalue > ALPHA:
            continue
        if n < 30:
            low = d.mean() - t * d.std(ddof=1) / math.sqrt(n)
        elif bootstrap:
            low = tk.bootstrap_ci(d, level=1 - ALPHA, seed=i).low
        else:
            low = d.mean() - z * d.std(ddof=0) / math.sqrt(n)
        hits += low is not None and low > 0
    share = hits / sims
    return share, math.sqrt(share * (1 - share) / sims)


def clear_caches():
    power_module._holdout_search.cache_clear()
    power_module._detectable_search.cache_clear()


def grid(sims, quick):
    print(f"grid: alpha {ALPHA}, power {POWER}; independent simulation {sims} suites per cell")
    header = (f"{'effect':>6} {'base':>4} {'k':>2} | {'z n':>5} {'new n':>5} | {'module power':>13} | "
              f"{'independent':>15} {'diff/se':>7} | {'call s':>6}")
    print(header)
    print("-" * len(header))
    rows, seed = [], 1000
    for effect in EFFECTS:
        for base in BASES:
            for k in KS:
                seed += 1
                if quick and k != 4:
                    continue
                clear_caches()
                start = time.perf_counter()
                result = tk.holdout_size(effect, base=base, k=k, alpha=ALPHA, power=POWER)
                elapsed = time.perf_counter() - start
                share, se = independent_power(base, effect, k, result.n, sims, seed)
                combined = math.hypot(se, result.achieved_power_se)
                gap = (share - result.achieved_power) / combined if combined else 0.0
                print(f"{effect:>6} {base:>4} {k:>2} | {result.z_formula_n:>5} {result.n:>5} | "
                      f"{result.achieved_power:.3f} ± {result.achieved_power_se:.3f} | "
                      f"{share:.3f} ± {se:.3f} {gap:>+7.2f} | {elapsed:>6.3f}", flush=True)
                rows.append((share, gap))
    shares = np.array([r[0] for r in rows])
    gaps = np.array([r[1] for r in rows])
    # n is the first integer reaching the target, so the power at n overshoots 0.8 by up to
    # the step from n - 1 to n (large at small n); the check is module vs independent.
    print(f"independent power at the new n: mean {shares.mean():.3f}, range {shares.min():.3f}-{shares.max():.3f}; "
          f"independent - module: max |diff/se| {np.max(np.abs(gaps)):.2f}, rms {np.sqrt(np.mean(gaps**2)):.2f} se")


def audit(sims):
    print("\naudit cases (base 0.6, k 4): independent power at the z-formula n and at the new n")
    for effect in (0.2, 0.1):
        result = tk.holdout_size(effect)
        old = independent_power(0.6, effect, 4, result.z_formula_n, sims, 7)
        new = independent_power(0.6, effect, 4, result.n, sims, 8)
        print(f"  +{effect}: z formula {result.z_formula_n} tasks -> power {old[0]:.3f} ± {old[1]:.3f}; "
              f"new {result.n} tasks -> {new[0]:.3f} ± {new[1]:.3f}")


def same_suite_check(sims):
    print(f"\nsame suites ({sims} each): module verdict probability vs the real test's verdicts")
    z = stats.norm.ppf(1 - ALPHA / 2)
    for base, effect, k, n in ((0.6, 0.2, 8, 14), (0.6, 0.2, 4, 25), (0.6, 0.1, 4, 98), (0.6, 0.05, 4, 380),
                               (0.6, 0.05, 1, 1510)):
        rng = np.random.default_rng(n + 17 * k)
        law = power_module._binomial_law(base, effect, k)
        arrays = power_module._LawArrays(law)
        steps = np.rint(np.array(law.values) * law.lattice).astype(int)
        scale = k // law.lattice
        real = np.empty(sims)
        counts = np.empty((sims, steps.size), dtype=np.int64)
        for i in range(sims):
            m = rng.binomial(k, base + effect, n) - rng.binomial(k, base, n)
            d = m / k
            counts[i] = [(m == step * scale).sum() for step in steps]
            verdict = tk.sign_flip_test(d, seed=i).pvalue <= ALPHA
            if verdict and n < 30:
                verdict = d.mean() - stats.t.ppf(1 - ALPHA / 2, n - 1) * d.std(ddof=1) / math.sqrt(n) > 0
            elif verdict:
                verdict = d.mean() - z * d.std(ddof=0) / math.sqrt(n) > 0
            real[i] = verdict
        module = power_module._detection(arrays.suites(counts, n, None), ALPHA)
        gap = module - real
        print(f"  base {base} +{effect} k {k} n {n}: module {module.mean():.4f}, real {real.mean():.4f}, "
              f"difference {gap.mean():+.4f} ± {gap.std(ddof=1) / math.sqrt(sims):.4f}")


def bootstrap_check(sims):
    # Same suites, same sign-flip p; only the interval differs. Disagreements can only come
    # from suites whose p clears alpha, since both intervals need it.
    print(f"\nbootstrap check: compare_runs' percentile bootstrap (10,000 resamples) vs mean ± z sd/sqrt(n), "
          f"{sims} suites each")
    for base, effect, k, n in ((0.6, 0.1, 4, 98), (0.6, 0.2, 4, 30), (0.6, 0.2, 1, 91), (0.8, 0.1, 8, 30)):
        rng = np.random.default_rng(n + k)
        agree = clears_boot = clears_normal = 0
        z = stats.norm.ppf(1 - ALPHA / 2)
        for i in range(sims):
            d = rng.binomial(k, base + effect, n) / k - rng.binomial(k, base, n) / k
            if tk.sign_flip_test(d, seed=i).pvalue > ALPHA:
                agree += 1
                continue
            boot = tk.bootstrap_ci(d, level=1 - ALPHA, seed=i).low > 0
            normal = d.mean() - z * d.std(ddof=0) / math.sqrt(n) > 0
            agree += boot == normal
            clears_boot += boot
            clears_normal += normal
        print(f"  base {base} +{effect} k {k} n {n}: verdicts agree on {agree}/{sims}; b_better "
              f"{clears_boot / sims:.3f} (bootstrap) vs {clears_normal / sims:.3f} (normal form)")


def edgeworth_check():
    rng = np.random.default_rng(3)
    errors = {"normal": [], "edgeworth": []}
    while len(errors["normal"]) < 150:
        n = int(rng.integers(21, 27))
        d = rng.normal(0.45, 1, n)
        x = abs(d.sum()) / math.sqrt(np.sum(d**2))
        if not 1.7 < x < 2.3:  # near p = 0.05, where the verdict turns
            continue
        exact = tk.sign_flip_test(d, exact=True).pvalue
        a = np.abs(d)
        edgeworth = power_module._edgeworth_p(np.array([abs(d.sum())]), np.array([np.sum(a**2)]),
                                              np.array([np.sum(a**4)]), np.array([np.sum(a**6)]), 0.0)[0]
        errors["normal"].append(2 * stats.norm.sf(x) - exact)
        errors["edgeworth"].append(edgeworth - exact)
    print("\nsign-flip p above 20 tasks off a lattice: error against exact enumeration, normal d at 21-26 tasks, p near 0.05")
    for name, values in errors.items():
        values = np.array(values)
        print(f"  {name:>9}: rms {np.sqrt(np.mean(values**2)):.4f}, max {np.max(np.abs(values)):.4f}")


def timing():
    clear_caches()
    start = time.perf_counter()
    tk.holdout_size(0.05)
    cold = time.perf_counter() - start
    start = time.perf_counter()
    tk.holdout_size(0.05)
    warm = time.perf_counter() - start
    clear_caches()
    start = time.perf_counter()
    tk.detectable_effect(100)
    detect = time.perf_counter() - start
    print(f"\ntiming: holdout_size(0.05) cold {cold:.3f} s (both searches), cached {warm * 1e6:.0f} us; "
          f"detectable_effect(100) cold {detect:.3f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=2000, help="independent suites per cell (default 2000)")
    parser.add_argument("--quick", action="store_true", help="only k = 4 and fewer checks")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}")
    timing()
    print()
    grid(args.sims, args.quick)
    audit(args.sims)
    same_suite_check(300 if args.quick else 1000)
    bootstrap_check(200 if args.quick else 400)
    edgeworth_check()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
