"""Engine throughput and memory. Prints our numbers next to the targets of issue 5.

    .venv/bin/python benchmarks/bench_engine.py [--rss-rows 100000] [--quick]

1. offline rows/s (seeded agent, no latency) at concurrency 1 and 32 (target >= 500 rows/s);
2. an agent that sleeps L = 50 ms per completion at C = 8, 32, 128: rows/s as a share of the
   C / L bound (target >= 90% at C = 32);
3. threads vs the dask executor (LocalCluster, processes=False) on the sleeping agent;
4. peak RSS of a subprocess streaming N rows to output= (ru_maxrss; target <= 500 MB at 100k).
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time

import toolkit as tk

TOOLS = str(tk.dataset_path("tools/airline_support.json"))
LATENCY = 0.05


def sleeping_agent(message: str) -> dict:
    time.sleep(LATENCY)
    return {"steps": [], "final_text": "I checked that for you."}


def offline(concurrency: int, budget: int) -> float:
    started = time.perf_counter()
    data = tk.simulate(budget=budget, concurrency=concurrency, progress=False)
    return len(data.rows) / (time.perf_counter() - started)


def sleeping(concurrency: int, budget: int, executor=None) -> float:
    started = time.perf_counter()
    data = tk.simulate(sleeping_agent, tools=TOOLS, budget=budget, concurrency=concurrency, progress=False, executor=executor)
    return len(data.rows) / (time.perf_counter() - started)


RSS_CODE = """
import resource, sys, time, toolkit as tk
def instant(message):
    return {"steps": [], "final_text": "ok, noted."}
started = time.perf_counter()
d = tk.simulate(instant, tools=sys.argv[1], budget=int(sys.argv[2]), output=sys.argv[3], progress=False,
                advanced={"concurrency": 8})
print(len(d.rows), time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rss-rows", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true", help="smaller budgets")
    args = parser.parse_args()
    budget = 150 if args.quick else 400
    print("offline seeded agent (target >= 500 rows/s)")
    for c in (1, 32):
        print(f"  concurrency {c:>3}: {offline(c, budget):7.1f} rows/s")
    print(f"sleeping agent, L = {LATENCY * 1000:.0f} ms per completion (target >= 90% of C/L at C = 32)")
    for c in (8, 32, 128):
        rate = sleeping(c, max(200, c * 6))
        print(f"  C = {c:>3}: {rate:7.1f} rows/s = {rate / (c / LATENCY):.0%} of the C/L bound {c / LATENCY:.0f}")
    print("threads vs dask executor (C = 8, sleeping agent)")
    threads = sleeping(8, 160)
    try:
        from dask.distributed import Client, LocalCluster

        with LocalCluster(n_workers=1, threads_per_worker=8, processes=False, dashboard_address=None) as cluster, Client(cluster) as client:
            dask_rate = sleeping(8, 160, executor=client.get_executor())
        print(f"  threads {threads:7.1f} rows/s | dask {dask_rate:7.1f} rows/s")
    except ImportError:
        print(f"  threads {threads:7.1f} rows/s | dask not installed")
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        out = subprocess.run([sys.executable, "-c", RSS_CODE, TOOLS, str(args.rss_rows), f"{folder}/rows.jsonl"], capture_output=True, text=True, check=True)
        rows, seconds, rss = out.stdout.split()
        print(f"peak RSS streaming {int(rows):,} rows to output= (target <= 500 MB): {float(rss):.0f} MB ({float(seconds):.0f} s)")


if __name__ == "__main__":
    main()
