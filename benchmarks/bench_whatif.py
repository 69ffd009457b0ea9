"""How often the what-if verdict is wrong, measured by simulation against a known truth.

Each cell draws cohorts of per-trace deltas (``replayed - original``) from a model whose
truth is known, runs the decision a fork runs (``toolkit.whatif.decide.summarize_cohort``
and ``decide``, the functions ``tk.whatif.fork`` calls after scoring), and counts Ship. The
threshold rules alone (what the fork decided before issue 15: improvement rate, regression
rate, median above epsilon, CI width) are read off the same decisions, side by side: a
verdict "old" Ships when no finding of those four codes blocks it and the floor passed.
Each rate is printed with its Monte Carlo standard error ``sqrt(r (1 - r) / sims)``.

Cells (n traces per cohort; default policy: epsilon 0.05, max_trace_drop 0.5,
max_severe_drops 0, ci_level 0.95):

- ``null``: the change does nothing (failure deltas N(0, 0.2), baseline N(0, 0.02)).
  Ship is a false Ship; target at most 0.025 (the failure test is two-sided at 0.05 and
  Ship needs the positive side).
- ``catastrophes``: 55% of failures rescued by +0.06, 45% wrecked by -0.9 (the audit's
  cohort, mean -0.37). Target 0.
- ``baseline_harm``: a real rescue (+0.3) with each baseline trace falling 1.0 -> 0.0 with
  probability 0.10 (mean harm 0.10 on known-good traffic). Target 0.
- ``aa_drift``: replaying moves every score by +0.15 whatever the change (harness or judge
  drift); the change itself adds nothing. Without ``aa_check`` the drift reads as a rescue;
  with it, Ship is a false Ship (target at most 0.025).
- ``power``: a real rescue of +0.3 (sd 0.15), and a small one of +0.1 (sd 0.2), baseline
  untouched: how often each rule set Ships (higher is better).
- ``coverage``: the decision interval (mean delta over traces) against the true mean, at
  one replay a trace and at 3 replays with per-trace effects (cluster = trace). Target
  [0.93, 0.97].

Run: ``.venv/bin/python benchmarks/bench_whatif.py [--sims 1000] [--only NAME]``.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from toolkit.whatif.decide import Policy, decide, summarize_cohort

OLD_CODES = {"failure_improvement_below_threshold", "baseline_regression_above_threshold",
             "practical_delta_below_threshold", "ci_too_wide"}
# Resamples of the median's bootstrap: 2,000 keeps a cell near a minute here; the verdict
# rules read the mean interval (Student t below 30 traces), which has no resampling.
B = 2000


def rate(hits: int, sims: int) -> str:
    r = hits / sims
    return f"{r:.3f} ± {math.sqrt(max(r * (1 - r), 1e-12) / sims):.3f}"


def verdicts(failure: np.ndarray, baseline: np.ndarray, policy: Policy, aa: tuple | None = None) -> tuple[bool, bool]:
    """(new Ship, old Ship) for one pair of cohorts."""
    cohorts = {}
    for name, deltas, aa_deltas in (("failure", failure, None if aa is None else aa[0]),
                                    ("baseline", baseline, None if aa is None else aa[1])):
        ids = [f"{name[0]}{i}" for i in range(len(deltas))]
        cohorts[name] = summarize_cohort(
            name, np.clip(deltas, -1, 1).tolist(), len(deltas), len(deltas), policy, trace_ids=ids,
            aa_deltas=None if aa_deltas is None else {t: [float(np.clip(d, -1, 1))] for t, d in zip(ids, aa_deltas)})
    decision = decide(cohorts, policy)
    old = decision.floor_passed and not any(f.code in OLD_CODES for f in decision.findings)
    return decision.verdict_state == "ship", old


def cell(name: str, sims: int, sizes, draw, policy: Policy | None = None, aa: bool = False) -> None:
    policy = policy or Policy(bootstrap_resamples=B)
    for n in sizes:
        rng = np.random.default_rng(15_000 + n)
        new = old = 0
        started = time.perf_counter()
        for _ in range(sims):
            drawn = draw(rng, n)
            ship_new, ship_old = verdicts(drawn[0], drawn[1], policy, drawn[2] if aa else None)
            new += ship_new
            old += ship_old
        print(f"  {name:<14} n={n:<3}  P(Ship) new {rate(new, sims)}   threshold rules only {rate(old, sims)}"
              f"   ({time.perf_counter() - started:.0f} s)")


def null(rng, n):
    return rng.normal(0, 0.2, n), rng.normal(0, 0.02, n), None


def catastrophes(rng, n):
    wrecked = rng.random(n) < 0.45
    failure = np.where(wrecked, -0.9, 0.06) + rng.normal(0, 0.02, n)
    return failure, rng.normal(0, 0.02, n), None


def baseline_harm(rng, n):
    falls = rng.random(n) < 0.10
    return rng.normal(0.3, 0.15, n), np.where(falls, -1.0, 0.0) + rng.normal(0, 0.02, n), None


def aa_drift(rng, n):
    failure = 0.15 + rng.normal(0, 0.1, n)
    baseline = rng.normal(0, 0.02, n)
    aa_failure = 0.15 + rng.normal(0, 0.1, n)
    aa_baseline = rng.normal(0, 0.02, n)
    return failure, baseline, (aa_failure, aa_baseline)


def power(rng, n):
    return rng.normal(0.3, 0.15, n), rng.normal(0, 0.02, n), None


def power_small(rng, n):
    return rng.normal(0.1, 0.2, n), rng.normal(0, 0.02, n), None


def coverage(sims: int) -> None:
    policy = Policy(bootstrap_resamples=B)
    for replays in (1, 3):
        for n in (10, 20, 50):
            rng = np.random.default_rng(15_500 + 10 * n + replays)
            hits = 0
            for _ in range(sims):
                # per-trace true effect ~ N(0.2, 0.15); each replay adds N(0, 0.2) of agent
                # and judge noise. Truth: the population mean effect 0.2 (no clipping: the
                # draws stay inside [-1, 1] with probability > 0.9999).
                effects = rng.normal(0.2, 0.15, n)
                deltas = (effects[:, None] + rng.normal(0, 0.2, (n, replays))).ravel()
                ids = np.repeat([f"t{i}" for i in range(n)], replays).tolist()
                cohort = summarize_cohort("failure", deltas.tolist(), n, n, policy, trace_ids=ids)
                hits += cohort.mean_ci_low <= 0.2 <= cohort.mean_ci_high
            print(f"  coverage       n={n:<3} replays={replays}  {rate(hits, sims)}  (target 0.93-0.97)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sims", type=int, default=1000)
    parser.add_argument("--only", default=None)
    args = parser.parse_args()
    cells = {
        "null": lambda: cell("null", args.sims, (10, 20, 50), null),
        "catastrophes": lambda: cell("catastrophes", args.sims, (20, 50), catastrophes),
        "baseline_harm": lambda: cell("baseline_harm", args.sims, (20, 50), baseline_harm),
        "aa_drift": lambda: (cell("aa_drift", args.sims, (20,), aa_drift),
                             cell("aa_drift+check", args.sims, (20,), aa_drift, Policy(bootstrap_resamples=B, aa_check=True), aa=True)),
        "power": lambda: (cell("power +0.3", args.sims, (10, 20, 50), power),
                          cell("power +0.1", args.sims, (10, 20, 50), power_small)),
        "coverage": lambda: coverage(args.sims),
    }
    for name, run in cells.items():
        if args.only and name != args.only:
            continue
        print(name)
        run()


if __name__ == "__main__":
    main()
