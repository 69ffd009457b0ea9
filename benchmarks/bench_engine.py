"""Engine throughput and memory. Prints our numbers next to the targets of issue 5.

    .venv/bin/python benchmarks/bench_engine.py [--rss-rows 100000] [--rss-repeats 8] [--quick] [--skip-rss]

1. offline rows/s (seeded agent, no latency) at concurrency 1 and 32 (target >= 500 rows/s in
   one process), with CPU ms per row (time.process_time) beside the wall clock: the machine
   may be shared, and CPU time per row separates our cost from the wait for a core. The
   seeded agent's rollouts run on the engine's thread (the line prints report()["execution"]):
   concurrency sets how many are planned and in flight per pass, not a thread count;
2. an agent that sleeps L = 50 ms per completion at C = 8, 32, 128: rows/s as a share of the
   C / L bound (target >= 90% at C = 32). "end-to-end" is rows / wall time of the whole
   simulate() call (setup and the last, partly idle wave included); "steady" is the landing
   rate between the 10% and the 90% row (the rate a long run sees). Budgets are 30 waves
   (30 x C rows) so setup does not dominate: the first version ran 6 waves at C = 32 and
   charged the ~0.1 s set-up to a 0.3 s run;
3. threads vs the dask executor (LocalCluster, processes=False) on the sleeping agent;
4. peak RSS (ru_maxrss) of a subprocess streaming N rows to output= (target <= 500 MB at
   100k, issue 21: including a ``data.pass_at`` read afterwards), its wall time, and RSS again
   after it decodes every row (``data.rows``).

Every line says how many rows landed and why the run stopped: a run that lands nothing (a
lost executor, an agent error) printed "0.0 rows/s" before, with no reason; it now prints the
run's first warning instead.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time

import toolkit as tk

TOOLS = str(tk.dataset_path("tools/airline_support.json"))
LATENCY = 0.05
OFFLINE_TARGET = 500.0
SHARE_TARGET = 0.90
RSS_TARGET_MB = 500.0


def sleeping_agent(message: str) -> dict:
    time.sleep(LATENCY)
    return {"steps": [], "final_text": "I checked that for you."}


def _verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def _timed(agent, budget: int, concurrency: int, executor=None, **options) -> dict:
    landed: list[float] = []
    wall0, cpu0 = time.perf_counter(), time.process_time()
    data = tk.simulate(agent, budget=budget, concurrency=concurrency, progress=False, executor=executor,
                       on_row=lambda row: landed.append(time.perf_counter()), **options)  # fmt: skip
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    n = len(data)
    out = {"rows": n, "wall": wall, "cpu_ms": cpu / n * 1000 if n else None, "rate": n / wall if n else 0.0,
           "stopped": data.stopped_because, "execution": data.report().get("execution"),
           "note": "" if n else f" -- no rows: {data.warnings[0] if data.warnings else '?'}"}  # fmt: skip
    if n >= 20:
        a, b = landed[n // 10], landed[(9 * n) // 10]
        out["steady"] = ((9 * n) // 10 - n // 10) / (b - a) if b > a else None
    else:
        out["steady"] = None
    return out


def offline(concurrency: int, budget: int) -> dict:
    return _timed(None, budget, concurrency)


def sleeping(concurrency: int, budget: int, executor=None) -> dict:
    return _timed(sleeping_agent, budget, concurrency, executor=executor, tools=TOOLS)


RSS_CODE = """
import resource, sys, time, toolkit as tk
def instant(message):
    return {"steps": [], "final_text": "ok, noted."}
started = time.perf_counter()
def graded(row):  # cheap and deterministic: the point is the memory of a graded run
    return float(len(row["prompt"]) % 2)
d = tk.simulate(instant, tools=sys.argv[1], budget=int(sys.argv[2]), output=sys.argv[3], progress=False,
                grader=graded, repeats=int(sys.argv[4]), advanced={"concurrency": 8})
seconds = time.perf_counter() - started
run_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
lines = sum(1 for _ in open(sys.argv[3], "rb"))
result = d.pass_at  # the first statistic a person reads after the run (issue 21 row 4: 3.06 GB once)
pass_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
rows = d.rows  # decode every row: what a person who reads them all in memory pays
read_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
# issue 21 row 3 at scale: no rollout twice, no line twice (counted after the RSS readings)
import hashlib, json
ids, digests = set(), set()
dup_ids = dup_lines = 0
with open(sys.argv[3], "rb") as handle:
    for line in handle:
        digest = hashlib.sha256(line).digest()
        dup_lines += digest in digests
        digests.add(digest)
        rollout = json.loads(line).get("rollout_id")
        dup_ids += rollout in ids
        ids.add(rollout)
print(len(d), lines, seconds, run_rss, pass_rss, read_rss, len(rows), dup_ids, dup_lines)
"""


def readme_example(budget: int = 320) -> dict:
    """The README's own example: seeded agent, shipped tools and policy, sft, conduct grader,
    template writer (no output= file, so the disk is not timed)."""
    tools = tk.dataset_path("tools/airline_support.json")
    policy = tk.dataset_path("tools/airline_support_policy.md").read_text()
    wall, cpu = time.perf_counter(), time.process_time()
    data = tk.simulate(tk.seeded_agent(tools, seed=0), tools=tools, system_prompt=policy, mode="sft", phrasings=1, repeats=4,
                       budget=budget, fault_rate=0.5, grader=tk.conduct_grader(policy), simulator=False, progress=False)  # fmt: skip
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"rows": len(data), "rate": len(data) / wall, "cpu_ms": 1000 * cpu / max(1, len(data)), "pass_at": str(data.pass_at)}


def delivery(budget: int = 400) -> None:
    """What the run delivers against what was asked: fault_rate (share of tool calls broken,
    the world's ledger), hard_share (the drawn tier mix) and the semantic-duplicate share.
    The references are the asked values themselves (the engine.py tolerances cite these)."""
    print(f"delivered vs asked, {budget} rows, seed 0 (engine tolerance: 0.05 on each share)")
    for rate in (0.0, 0.25, 0.5, 0.8, 1.0):
        data = tk.simulate(fault_rate=rate, budget=budget, progress=False, seed=0)
        report = data.report()
        share = report["delivered"]["fault_share"]
        print(f"  fault_rate {rate:4.2f}: delivered {share:.3f} of the tool calls | miss {abs(share - rate):.3f} "
              f"-> {_verdict(abs(share - rate) <= 0.03)}; semantic duplicates {report['semantic_duplicates'] / len(data):.1%} of rows")
    for mode in ("explore", "sft", "rl", "adaptive"):
        drawn = []
        for asked in (0.0, 0.2, 0.5, 0.8, 1.0):
            data = tk.simulate(mode=mode, hard_share=asked, budget=budget, progress=False, seed=0)
            drawn.append((asked, data.search["tier_mix"]["hard_share_drawn"]))
        worst = max(abs(d - a) for a, d in drawn)
        print(f"  hard_share {mode:>8}: " + ", ".join(f"{a:.1f}->{d:.3f}" for a, d in drawn) + f" | worst miss {worst:.3f} -> {_verdict(worst <= 0.05)}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rss-rows", type=int, default=100_000)
    # The template writer has 14,628 unique prompts on the airline tools: 8 rollouts of each
    # (pass@k's k) reach 100,000 rows, where one rollout each stops at 14,628.
    parser.add_argument("--rss-repeats", type=int, default=8)
    parser.add_argument("--quick", action="store_true", help="smaller budgets")
    parser.add_argument("--skip-rss", action="store_true")
    parser.add_argument("--repeats", type=int, default=3, help="offline runs per concurrency (best and median shown)")
    args = parser.parse_args()
    budget = 200 if args.quick else 600
    tk.simulate(budget=20, progress=False)  # imports and first-use caches out of the timing
    delivery(200 if args.quick else 400)
    example = readme_example()
    print(f"README example (sft, conduct grader, 320 rows): {example['rate']:.1f} rows/s, CPU {example['cpu_ms']:.2f} ms/row "
          f"(target >= {OFFLINE_TARGET:.0f} rows/s) -> {_verdict(example['rate'] >= OFFLINE_TARGET)}\n  {example['pass_at']}")
    print(f"offline seeded agent, budget {budget} (target >= {OFFLINE_TARGET:.0f} rows/s in one process)")
    for c in (1, 32):
        runs = [offline(c, budget) for _ in range(args.repeats)]
        best = max(runs, key=lambda r: r["rate"])
        median = statistics.median(r["rate"] for r in runs)
        cpu = statistics.median(r["cpu_ms"] for r in runs if r["cpu_ms"])
        cpu_bound = 1000 / cpu if cpu else 0
        print(f"  concurrency {c:>3}: best {best['rate']:6.1f} rows/s, median {median:6.1f} rows/s | CPU {cpu:.2f} ms/row "
              f"(= {cpu_bound:.0f} rows/s on an idle core) | {best['rows']} rows, {best['execution']}, stopped: {best['stopped']}{best['note']} "
              f"-> {_verdict(best['rate'] >= OFFLINE_TARGET)}")  # fmt: skip
    print(f"sleeping agent, L = {LATENCY * 1000:.0f} ms per completion (target >= {SHARE_TARGET:.0%} of C/L at C = 32)")
    for c in (8, 32, 128):
        waves = 10 if args.quick else 30
        r = sleeping(c, c * waves)
        bound = c / LATENCY
        steady = f"{r['steady']:7.1f} rows/s = {r['steady'] / bound:.0%}" if r["steady"] else "n/a"
        mark = f" -> {_verdict(max(r['rate'], r['steady'] or 0) / bound >= SHARE_TARGET)} (steady {_verdict((r['steady'] or 0) / bound >= SHARE_TARGET)}, end-to-end {_verdict(r['rate'] / bound >= SHARE_TARGET)})" if c == 32 else ""
        print(f"  C = {c:>3}: end-to-end {r['rate']:7.1f} rows/s = {r['rate'] / bound:.0%} | steady {steady} of the C/L bound "
              f"{bound:.0f} | CPU {r['cpu_ms'] or 0:.2f} ms/row | {r['rows']} rows, stopped: {r['stopped']}{r['note']}{mark}")  # fmt: skip
    print("threads vs dask executor (C = 8, sleeping agent, 20 waves)")
    threads = sleeping(8, 160)
    try:
        from dask.distributed import Client, LocalCluster

        with LocalCluster(n_workers=1, threads_per_worker=8, processes=False, dashboard_address=None) as cluster, Client(cluster) as client:
            dask_run = sleeping(8, 160, executor=client.get_executor())
        print(f"  threads {threads['rate']:7.1f} rows/s ({threads['rows']} rows) | dask {dask_run['rate']:7.1f} rows/s "
              f"({dask_run['rows']} rows, stopped: {dask_run['stopped']}{dask_run['note']}) | bound {8 / LATENCY:.0f}")  # fmt: skip
    except ImportError:
        print(f"  threads {threads['rate']:7.1f} rows/s | dask not installed")
    if args.skip_rss:
        return
    with tempfile.TemporaryDirectory() as folder:
        out = subprocess.run([sys.executable, "-c", RSS_CODE, TOOLS, str(args.rss_rows), f"{folder}/rows.jsonl", str(args.rss_repeats)], capture_output=True, text=True, check=True)
        rows, lines, seconds, run_rss, pass_rss, read_rss, decoded, dup_ids, dup_lines = out.stdout.split()
        print(f"peak RSS streaming {int(rows):,} graded rows to output= (target <= {RSS_TARGET_MB:.0f} MB): {float(run_rss):.0f} MB "
              f"-> {_verdict(float(run_rss) <= RSS_TARGET_MB)}; with data.pass_at read after: {float(pass_rss):.0f} MB "
              f"-> {_verdict(float(pass_rss) <= RSS_TARGET_MB)} | {int(lines):,} lines on disk | run {float(seconds):.0f} s "
              f"({int(rows) / float(seconds):.0f} rows/s) | after decoding all {int(decoded):,} rows in memory: {float(read_rss):.0f} MB")  # fmt: skip
        print(f"duplicates in the {int(lines):,} written rows (target 0 and 0): {int(dup_ids)} repeated rollout_id, "
              f"{int(dup_lines)} byte-identical lines -> {_verdict(int(dup_ids) == 0 and int(dup_lines) == 0)}")


if __name__ == "__main__":
    main()
