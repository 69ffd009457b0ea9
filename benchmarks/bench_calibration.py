"""Calibration of the toolkit's intervals and tests, measured by simulation against the truth.

Every cell draws synthetic suites whose true value is known (a closed form, or a 2-million
draw Monte Carlo where no closed form exists), runs the public function a user would call
(``tk.pass_at``, ``tk.compare_runs``, ``tk.delta_report``) on rows built like a real run's,
and counts how often the interval covers the truth or the test rejects a true null. The
naive method (what the toolkit did before issue 14, or what ignoring clusters gives) runs
on the same suites, side by side. Each rate is printed with its Monte Carlo standard error
``sqrt(r (1 - r) / sims)``.

Targets (issue 14): coverage of 95% intervals in [0.93, 0.97] for pass@1, pass^k and paired
deltas at 20, 50 and 200 tasks and on clustered suites (20 clusters x 10 tasks, 50 x 4)
with ``cluster=``; false-positive rates at most alpha + 0.01. Power of the sizing functions
is measured by ``benchmarks/bench_power.py``.

Run: ``.venv/bin/python benchmarks/bench_calibration.py [--sims 1000] [--only NAME]``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings

import numpy as np
from scipy.special import expit

import toolkit as tk
from toolkit.stats.resampling import bootstrap_ci

# Resamples per bootstrap: 2,000 keeps a cell near a minute on this 2-core machine, and the
# bounds' Monte Carlo error at B = 2000 (~0.1 se) moves coverage by well under 0.005.
B = 2000
# Rollouts per task: the README example's repeats=4.
K = 4


def rate(hits: int, sims: int) -> str:
    r = hits / sims
    return f"{r:.3f} ± {math.sqrt(max(r * (1 - r), 1e-12) / sims):.3f}"


def rows_from_counts(counts: np.ndarray, k: int, families: np.ndarray | None = None, prefix: str = "t") -> list[dict]:
    """k rollouts per task, the first counts[i] pass; an optional cluster label per task."""
    rows = []
    for i, passed in enumerate(counts.tolist()):
        family = None if families is None else f"f{int(families[i])}"
        for j in range(k):
            row = {"task_id": f"{prefix}{i}", "rollout_id": f"{prefix}{i}-{j}", "reward": int(j < passed)}
            if family is not None:
                row["cluster"] = family
            rows.append(row)
    return rows


def clustered_rates(rng: np.random.Generator, n_clusters: int, per_cluster: int) -> np.ndarray:
    """logit p = cluster effect + task effect, sd 1 each (issue 14's design)."""
    return expit(rng.normal(0, 1, n_clusters)[:, None] + rng.normal(0, 1, (n_clusters, per_cluster))).ravel()


def clustered_pair(rng: np.random.Generator, n_clusters: int, per: int, shift_mean: float, shift_sd: float):
    """Before/after counts and rows of a clustered suite whose change shifts whole clusters.

    logit p = cluster effect + task effect (sd 1 each); the change adds a per-cluster logit
    shift N(shift_mean, shift_sd), so the tasks of one cluster move together.
    """
    logits = rng.normal(0, 1, n_clusters)[:, None] + rng.normal(0, 1, (n_clusters, per))
    shift = shift_mean + rng.normal(0, shift_sd, n_clusters)[:, None]
    families = np.repeat(np.arange(n_clusters), per)
    a = rng.binomial(K, expit(logits).ravel())
    b = rng.binomial(K, expit(logits + shift).ravel())
    return a, b, rows_from_counts(a, K, families), rows_from_counts(b, K, families)


def covers(interval, truth: float) -> bool:
    return interval is not None and interval[0] is not None and interval[0] <= truth <= interval[1]


# --------------------------------------------------------------------------- pass@1


def pass_at_1_coverage(sims: int) -> None:
    print("\npass@1, 95% interval coverage (k = 4 rollouts a task)")
    print(f"  {'design':<34} {'toolkit':>16} {'method':<22} {'naive (task bootstrap)':>22}")
    rng = np.random.default_rng(0)
    truth_clustered = float(expit(rng.normal(0, 1, 2_000_000) + rng.normal(0, 1, 2_000_000)).mean())
    designs = [(f"independent, {n} tasks, p ~ Beta(2,2)", n, None) for n in (20, 50, 200)]
    designs += [("clustered 20 x 10, cluster=", 200, (20, 10)), ("clustered 50 x 4, cluster=", 200, (50, 4))]
    for label, n, cluster in designs:
        hits = naive = 0
        method = ""
        for sim in range(sims):
            if cluster is None:
                rates, families, truth = rng.beta(2, 2, n), None, 0.5
            else:
                rates = clustered_rates(rng, *cluster)
                families, truth = np.repeat(np.arange(cluster[0]), cluster[1]), truth_clustered
            counts = rng.binomial(K, rates)
            result = tk.pass_at(rows_from_counts(counts, K, families), cluster="cluster" if cluster else None,
                                n_resamples=B, seed=sim)
            hits += covers(result.ci95, truth)
            method = getattr(result, "interval_method", "") or ""
            if isinstance(method, dict):
                method = method.get("pass_at_1", "")
            plain = bootstrap_ci(counts / K, n_resamples=B, seed=sim)
            naive += plain.low <= truth <= plain.high
        print(f"  {label:<34} {rate(hits, sims):>16} {str(method):<22} {rate(naive, sims):>22}")


# --------------------------------------------------------------------------- pass^k


def pass_pow_k_coverage(sims: int) -> None:
    print("\npass^4, 95% interval coverage (k = 4 rollouts, so each task's pass^4 is 0 or 1)")
    print(f"  {'design':<40} {'toolkit':>16} {'naive (task bootstrap)':>22} {'zero-width naive':>17}")
    rng = np.random.default_rng(1)
    # E[p^4] for p ~ Beta(a, b) is prod_{i<4} (a+i)/(a+b+i): Beta(1,3) -> 24/840 = 0.0286 (rare),
    # Beta(2,2) -> 120/840... computed below, not typed.
    for a, b in ((1, 3), (2, 2)):
        truth = math.prod((a + i) / (a + b + i) for i in range(4))
        for n in (10, 20, 50, 200):
            hits = naive = zero = 0
            for sim in range(sims):
                counts = rng.binomial(K, rng.beta(a, b, n))
                result = tk.pass_at(rows_from_counts(counts, K), n_resamples=B, seed=sim)
                hits += covers(result.pass_pow_k_ci95, truth)
                values = (counts == K).astype(float)
                plain = bootstrap_ci(values, n_resamples=B, seed=sim)
                naive += plain.low is not None and plain.low <= truth <= plain.high
                zero += plain.low is not None and plain.low == plain.high
            label = f"Beta({a},{b}) E[p^4] = {truth:.4f}, {n} tasks"
            print(f"  {label:<40} {rate(hits, sims):>16} {rate(naive, sims):>22} {zero / sims:>17.3f}")


# --------------------------------------------------------------------------- paired deltas


def paired_delta_coverage(sims: int) -> None:
    print("\npaired delta, 95% interval coverage (small true effect: logit shift +0.2, k = 4)")
    print(f"  {'design':<34} {'toolkit':>16} {'method':<22} {'naive (percentile bootstrap)':>28}")
    rng = np.random.default_rng(2)
    big = rng.beta(2, 2, 2_000_000)
    truth = float(np.mean(expit(np.log(big / (1 - big)) + 0.2) - big))
    for n in (10, 20, 50, 200):
        hits = naive = 0
        method = ""
        for sim in range(sims):
            before = rng.beta(2, 2, n)
            after = expit(np.log(before / (1 - before)) + 0.2)
            a, b = rng.binomial(K, before), rng.binomial(K, after)
            result = tk.compare_runs(rows_from_counts(a, K), rows_from_counts(b, K), n_resamples=B, seed=sim)
            hits += covers(result.ci, truth)
            method = result.interval_method
            plain = bootstrap_ci((b - a) / K, n_resamples=B, seed=sim)
            naive += plain.low <= truth <= plain.high
        print(f"  {f'independent, {n} tasks':<34} {rate(hits, sims):>16} {method:<22} {rate(naive, sims):>28}")
    # Clustered: the change moves whole clusters (a per-cluster logit shift around +0.2).
    for n_clusters, per in ((20, 10), (50, 4)):
        shift_sd = 0.5
        draws = 2_000_000
        base = rng.normal(0, 1, draws) + rng.normal(0, 1, draws)
        truth_c = float(np.mean(expit(base + 0.2 + rng.normal(0, shift_sd, draws)) - expit(base)))
        hits = naive = 0
        for sim in range(sims):
            a, b, rows_a, rows_b = clustered_pair(rng, n_clusters, per, 0.2, shift_sd)
            result = tk.compare_runs(rows_a, rows_b, cluster="cluster", n_resamples=B, seed=sim)
            hits += covers(result.ci, truth_c)
            plain = bootstrap_ci((b - a) / K, n_resamples=B, seed=sim)
            naive += plain.low <= truth_c <= plain.high
        label = f"clustered {n_clusters} x {per}, cluster="
        print(f"  {label:<34} {rate(hits, sims):>16} {'clustered t':<22} {rate(naive, sims):>28}")


# --------------------------------------------------------------------------- false positives


def paired_false_positives(sims: int) -> None:
    print("\npaired test, false-positive rate at alpha 0.05 (no effect on average)")
    print(f"  {'design':<46} {'toolkit':>16} {'naive':>16}")
    rng = np.random.default_rng(3)
    for n in (20, 50, 200):
        hits = 0
        for sim in range(sims):
            rates = rng.beta(2, 2, n)
            a, b = rng.binomial(K, rates), rng.binomial(K, rates)
            result = tk.compare_runs(rows_from_counts(a, K), rows_from_counts(b, K), n_resamples=B, seed=sim)
            hits += result.verdict in ("a_better", "b_better")
        print(f"  {f'independent, {n} tasks (verdict)':<46} {rate(hits, sims):>16} {'':>16}")
    # The change moves whole clusters by a logit shift with mean 0 (sd 0.5): tasks of one
    # cluster are correlated, the mean delta is 0 by symmetry.
    for n_clusters, per in ((20, 10), (50, 4)):
        hits = naive = 0
        for sim in range(sims):
            _, _, rows_a, rows_b = clustered_pair(rng, n_clusters, per, 0.0, 0.5)
            clustered = tk.compare_runs(rows_a, rows_b, cluster="cluster", n_resamples=B, seed=sim)
            plain = tk.compare_runs(rows_a, rows_b, n_resamples=B, seed=sim)
            hits += clustered.verdict in ("a_better", "b_better")
            naive += plain.verdict in ("a_better", "b_better")
        label = f"clustered {n_clusters} x {per} (cluster= vs none)"
        print(f"  {label:<46} {rate(hits, sims):>16} {rate(naive, sims):>16}")


def family_wise(sims: int) -> None:
    print("\ndelta_report with no real change, 8 markers on 25 tasks: share of reports where some metric moves")
    rng = np.random.default_rng(4)
    counts = {"holm": 0, "bh": 0, None: 0}
    names = [f"m{j}" for j in range(8)]
    reports = max(100, sims)
    for sim in range(reports):
        before, after = [], []
        for i in range(25):
            reward = int(rng.random() < 0.5)
            before.append({"task_id": f"t{i}", "reward": reward, "markers": {m: float(rng.normal()) for m in names}})
            after.append({"task_id": f"t{i}", "reward": reward, "markers": {m: float(rng.normal()) for m in names}})
        for correction in counts:
            report = tk.delta_report(before, after, metrics=names, target="m0", correction=correction, by=False,
                                     n_resamples=1000, seed=sim)
            counts[correction] += any(m.verdict in ("a_better", "b_better") for m in report.metrics)
    for correction, hits in counts.items():
        print(f"  correction={correction!s:<6} {rate(hits, reports):>16}   (target <= 0.05 for holm; "
              f"none: 1 - 0.95^8 = {1 - 0.95**8:.3f} at most)")


def kl_task_coverage(sims: int) -> None:
    """Coverage of ``tk.plots.kl_by_task``'s per-task interval (the delta-method ratio).

    A task's KL per token is sum(d) / sum(t) over its rollouts; each rollout has t ~ U{5..60}
    tokens and a per-token KL k independent of t, so the truth is E[k] = 0.1. Normal k (sd
    0.05) and skewed k (gamma, shape 2, scale 0.05), at 4, 8 and 30 rollouts a task.
    """
    from toolkit.plots.judging import _ratio_interval

    print("kl_by_task: per-task interval on KL per token (truth 0.1; target 0.93-0.97)")
    for shape in ("normal", "gamma"):
        for rollouts in (4, 8, 30):
            rng = np.random.default_rng(22_000 + rollouts)
            hits = drawn = 0
            for _ in range(sims):
                tokens = rng.integers(5, 61, rollouts)
                per_token = rng.normal(0.1, 0.05, rollouts) if shape == "normal" else rng.gamma(2.0, 0.05, rollouts)
                interval = _ratio_interval(list(zip((per_token * tokens).tolist(), tokens.tolist())), 0.95, B, rng)
                if interval is not None:
                    drawn += 1
                    hits += interval.low <= 0.1 <= interval.high
            print(f"  {shape:<6} {rollouts:>2} rollouts  {rate(hits, drawn):>16}  ({sims - drawn} without an interval)")


def _judged_run(rng: np.random.Generator, rates: np.ndarray, labels: int, leak: float, miss: float,
                prefix: str = "t") -> list[dict]:
    """K rollouts a task at the given pass rates; a judge that passes a failure with
    probability ``leak`` and fails a pass with ``miss``; ``labels`` rows chosen at random
    carry the gold label."""
    outcome = rng.random((rates.size, K)) < rates[:, None]
    flip = np.where(outcome, rng.random(outcome.shape) < miss, rng.random(outcome.shape) < leak)
    judged = outcome ^ flip
    labelled = np.zeros(outcome.size, dtype=bool)
    labelled[rng.choice(outcome.size, labels, replace=False)] = True
    labelled = labelled.reshape(outcome.shape)
    rows = []
    for i in range(rates.size):
        for j in range(K):
            rows.append({"task_id": f"{prefix}{i}", "rollout_id": f"{prefix}{i}-{j}", "reward": int(judged[i, j]),
                         "gold_reward": int(outcome[i, j]) if labelled[i, j] else None})
    return rows


def ppi_coverage(sims: int) -> None:
    """Coverage and width of ``tk.judge_corrected`` (prediction-powered, power-tuned).

    200 tasks x 4 rollouts, task pass rates Beta(2, 2) (truth E[p] = 0.5); the biased judge
    passes 30% of failures and fails 5% of passes (its rate is 0.625); the good judge flips
    5% of rows either way (its rate is 0.5, unbiased). Labels: a random subset of the rows.
    The paired cell: logit p_after = logit p_before + 0.4, logit p_before ~ N(0, 1), truth
    by a 2-million-draw Monte Carlo; 100 labels in each run.
    """
    print("judge_corrected: 95% interval on pass@1 over 200 tasks x 4 (truth 0.5; target 0.93-0.97)")
    print(f"  {'judge':<7} {'labels':>6}  {'corrected':>16}  {'judge only':>16}  {'gold only':>16}  width vs gold  worth")
    for judge, leak, miss in (("biased", 0.30, 0.05), ("good", 0.05, 0.05)):
        for labels in (10, 30, 100, 300):
            rng = np.random.default_rng(31_000 + labels + (0 if judge == "biased" else 7))
            hits = {"corrected": 0, "judge": 0, "gold": 0}
            ratio, worth, drawn = [], [], 0
            for _ in range(sims):
                rows = _judged_run(rng, rng.beta(2, 2, 200), labels, leak, miss)
                result = tk.judge_corrected(rows, n_resamples=B, seed=int(rng.integers(1 << 30)))
                hits["corrected"] += covers((result.low, result.high), 0.5)
                hits["judge"] += covers(result.judge_only[1:], 0.5)
                if result.gold_only[1] is not None:
                    drawn += 1
                    hits["gold"] += covers(result.gold_only[1:], 0.5)
                    if result.gold_only[2] > result.gold_only[1]:
                        ratio.append((result.high - result.low) / (result.gold_only[2] - result.gold_only[1]))
                if result.effective_labels is not None:
                    worth.append(result.effective_labels)
            gold = rate(hits["gold"], drawn) if drawn else "n/a"
            print(f"  {judge:<7} {labels:>6}  {rate(hits['corrected'], sims):>16}  {rate(hits['judge'], sims):>16}  "
                  f"{gold:>16}  {np.median(ratio) if ratio else float('nan'):>13.2f}  "
                  f"{np.median(worth) if worth else float('nan'):>5.0f}")
    draws = np.random.default_rng(9).normal(0, 1, 2_000_000)
    truth = float(np.mean(expit(draws + 0.4) - expit(draws)))
    print(f"judge_corrected(baseline=): paired delta, 200 tasks x 4 per run (truth {truth:+.4f})")
    for judge, leak, miss in (("biased", 0.30, 0.05), ("good", 0.05, 0.05)):
        rng = np.random.default_rng(32_000 + (0 if judge == "biased" else 7))
        hits = {"corrected": 0, "judge": 0}
        for _ in range(sims):
            u = rng.normal(0, 1, 200)
            before = _judged_run(rng, expit(u), 100, leak, miss)
            after = _judged_run(rng, expit(u + 0.4), 100, leak, miss)
            result = tk.judge_corrected(after, baseline=before, n_resamples=B, seed=int(rng.integers(1 << 30)))
            hits["corrected"] += covers((result.low, result.high), truth)
            hits["judge"] += covers(result.judge_only[1:], truth)
        print(f"  {judge:<7} 100+100  corrected {rate(hits['corrected'], sims)}  judge only {rate(hits['judge'], sims)}")


def sequential_stopping(sims: int) -> None:
    """``tk.stats.confidence_sequence`` watched after every task, against a fixed-n interval
    watched the same way.

    Null: pass@1 over 4 rollouts a task, task rates Beta(7, 3) (mean 0.7 = the threshold),
    up to 400 tasks; a run "decides" the first time its interval excludes 0.7 (from 10
    tasks on). Gap: paired deltas, every task moving from p = 0.6 to 0.7 over 4 rollouts a
    side; tasks until the sequence excludes 0, against the fixed n that
    ``tk.holdout_size(0.1, base=0.6, k=4)`` asks for.
    """
    runs = min(sims, 500)
    print(f"confidence_sequence: false decisions when the truth sits at the threshold ({runs} runs, target <= 0.05)")
    study = tk.stats.stopping_study(truth=0.7, n_units=400, k=K, runs=runs, seed=41_000)
    print(f"  anytime-valid sequence  {rate(round(study.sequence_rate * runs), runs):>16}")
    print(f"  t interval, peeked      {rate(round(study.peeking_rate * runs), runs):>16}")
    fixed = tk.holdout_size(0.1, base=0.6, k=K).n
    rng = np.random.default_rng(42_000)
    stops = []
    for _ in range(runs):
        deltas = (rng.binomial(K, 0.7, 4 * fixed) - rng.binomial(K, 0.6, 4 * fixed)) / K
        at, side = tk.stats.confidence_sequence(deltas, bounds=(-1, 1)).decided(0.0)
        stops.append(at if side == "above" else np.inf)
    stops = np.array(stops)
    decided = np.isfinite(stops)
    print(f"confidence_sequence: paired gain +0.10 from 0.6 ({runs} runs, up to {4 * fixed} tasks)")
    print(f"  holdout_size asks for {fixed} tasks (fixed n, power 0.8)")
    print(f"  sequence decided by {fixed} tasks: {np.mean(stops <= fixed):.3f}; by {2 * fixed}: "
          f"{np.mean(stops <= 2 * fixed):.3f}; by {4 * fixed}: {decided.mean():.3f}")
    print(f"  median tasks to decision {np.median(stops):.0f} ({np.median(stops) / fixed:.2f}x the fixed n)")


def _attacked_suite(rng: np.random.Generator, n_tasks: int, repeats: int) -> list[dict]:
    """Each task once clean and once attacked, ``repeats`` rows a side; a task's utility rates
    are logit-normal around 0.7 (clean) and 0.45 (attacked) with a shared task effect, its
    attack success Bernoulli(0.3)."""
    shift = rng.normal(0.0, 0.8, n_tasks)
    clean_p, attacked_p = expit(np.log(0.7 / 0.3) + shift), expit(np.log(0.45 / 0.55) + shift)
    rows = []
    for task in range(n_tasks):
        for _ in range(repeats):
            base = {"scenario_id": f"t{task}", "prompt": f"p{task}"}
            rows.append({**base, "reward": float(rng.random() < clean_p[task]), "faults": []})
            rows.append({**base, "reward": float(rng.random() < attacked_p[task]), "faults": [{"mode": "prompt_injection", "attack": True}],
                         "markers": {"attack_success": float(rng.random() < 0.3)}})
    return rows


def attack_coverage(sims: int) -> None:
    """Coverage of ``tk.attack_report``'s four intervals (utility clean, under attack, attack
    success, paired difference) against the design's truth (a 2-million-task Monte Carlo of the
    logit-normal rates; attack success 0.3 exactly), at 10 / 30 / 100 tasks, one row and four
    rows a side."""
    shift = np.random.default_rng(99).normal(0.0, 0.8, 2_000_000)
    true_clean = float(expit(np.log(0.7 / 0.3) + shift).mean())
    true_attacked = float(expit(np.log(0.45 / 0.55) + shift).mean())
    truth = {"utility_clean": true_clean, "utility_attacked": true_attacked, "attack_success": 0.3,
             "difference": true_attacked - true_clean}
    print(f"attack_report: coverage of 95% intervals (truth clean {true_clean:.3f}, attacked {true_attacked:.3f}, "
          "success 0.300; target 0.93-0.97)")
    print(f"  {'tasks':>5} {'rows':>4}  " + "  ".join(f"{name:>16}" for name in truth))
    for repeats in (1, 4):
        for n_tasks in (10, 30, 100):
            rng = np.random.default_rng(23_000 + 10 * n_tasks + repeats)
            hits = dict.fromkeys(truth, 0)
            for sim in range(sims):
                report = tk.attack_report(_attacked_suite(rng, n_tasks, repeats), n_resamples=B, seed=sim)
                for name, value in truth.items():
                    estimate = getattr(report, name)
                    hits[name] += covers((estimate.low, estimate.high), value)
            print(f"  {n_tasks:>5} {repeats:>4}  " + "  ".join(f"{rate(hits[name], sims):>16}" for name in truth))


CELLS = {
    "kl_task": kl_task_coverage,
    "attacks": attack_coverage,
    "ppi": ppi_coverage,
    "sequential": sequential_stopping,
    "pass_at_1": pass_at_1_coverage,
    "pass_pow_k": pass_pow_k_coverage,
    "paired_delta": paired_delta_coverage,
    "false_positives": paired_false_positives,
    "family_wise": family_wise,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=1000, help="simulated suites per cell (default 1000)")
    parser.add_argument("--only", choices=sorted(CELLS), action="append", help="run only these cells")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", UserWarning)  # n_resamples=1000 in the family cell warns by design
    start = time.perf_counter()
    for name in args.only or CELLS:
        begun = time.perf_counter()
        CELLS[name](args.sims)
        print(f"  ({time.perf_counter() - begun:.0f} s)")
    print(f"\n{args.sims} sims per cell, total {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
