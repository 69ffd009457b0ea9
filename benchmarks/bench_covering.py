"""Covering-array sizes and times next to allpairspy and the best-known sizes.

Run: ``.venv/bin/python benchmarks/bench_covering.py [--repeats 3] [--effort default]``

Configurations and best-known sizes from docs/design/peers.md section A (Colbourn's covering
array tables, November 2024 snapshot; Kleitman-Spencer for v = 2; 42 for 2.3.4.5.6.7 is the
6 x 7 lower bound, attained). Our time is the best of ``--repeats`` runs in this process, as
in docs/design/peers.md A.1 (wall clock; CPU seconds next to it, since the box is shared); allpairspy runs once per
configuration (it is deterministic and slow at the large ones). Every array, ours and
allpairspy's, is checked for complete coverage with ``tk.coverage``.

Targets (issue 3) at effort="default": every array complete; never more rows than
allpairspy; median rows / best-known <= 1.10 and max <= 1.25; 10^30 in <= 0.25 s; strength-3
arrays for 3^10 and 2^20 in <= 5 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

import toolkit as tk

# (label, level counts, best-known CAN(2, k, v) or None, source)
PAIRWISE = [
    ("3^4", [3] * 4, 9, "orthogonal array"),
    ("2^10", [2] * 10, 6, "Kleitman-Spencer (exact)"),
    ("3^13", [3] * 13, 15, "tabu search (Nurmela)"),
    ("5^10", [5] * 10, 36, "tabu search"),
    ("4^20", [4] * 20, 28, "PCAx2PCA"),
    ("2.3.4.5.6.7", [2, 3, 4, 5, 6, 7], 42, "lower bound 6x7, attained"),
    ("3^50", [3] * 50, 20, "CA extender"),
    ("2^100", [2] * 100, 10, "Kleitman-Spencer (exact)"),
    ("10^30", [10] * 30, 190, "simulated annealing"),
    ("10^20", [10] * 20, 155, "fix 3 symbols"),
]
STRENGTH_THREE = [("3^10", [3] * 10), ("2^20", [2] * 20)]


def _ours(levels, strength, effort, repeats):
    walls, cpus, array = [], [], None
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        array = tk.covering_array(levels, strength, effort=effort, seed=0)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return array, min(walls), min(cpus)


def _allpairspy(levels, strength):
    from allpairspy import AllPairs  # benchmark-only dependency

    started = time.perf_counter()
    rows = [list(r) for r in AllPairs([list(range(v)) for v in levels], n=strength)]
    return np.asarray(rows, dtype=np.int64), time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--effort", default="default", choices=["fast", "default", "best"])
    parser.add_argument("--no-allpairspy", action="store_true", help="skip the peer (faster)")
    args = parser.parse_args()

    print(f"toolkit covering arrays, effort={args.effort!r}, python {sys.version.split()[0]}, "
          f"numpy {np.__version__}, {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.2f}")
    header = (f"{'config':<12} {'t':>1} {'ours':>5} {'our s':>7} {'cpu s':>6} {'method':<26} "
              f"{'allpairspy':>10} {'ap s':>6} {'best':>5} {'ours/best':>9} {'ap/best':>7} ours complete")
    print(header)
    print("-" * len(header))
    ratios, failures = [], []
    timings, cpu_timings = {}, {}
    for label, levels, best, _source in PAIRWISE:
        array, wall, cpu = _ours(levels, 2, args.effort, args.repeats)
        complete = tk.coverage(array).complete
        timings[label] = wall
        cpu_timings[label] = cpu
        ap_rows = ap_time = None
        if not args.no_allpairspy:
            ap_array, ap_time = _allpairspy(levels, 2)
            ap_rows = len(ap_array)
            if not tk.coverage(ap_array, levels).complete:
                failures.append(f"allpairspy array for {label} is incomplete")
            if array.size > ap_rows:
                failures.append(f"{label}: {array.size} rows > allpairspy's {ap_rows}")
        ratio = array.size / best
        ratios.append(ratio)
        if not complete:
            failures.append(f"{label}: our array is incomplete")
        print(f"{label:<12} {2:>1} {array.size:>5} {wall:>7.3f} {cpu:>6.3f} {array.method:<26} "
              f"{ap_rows if ap_rows is not None else '-':>10} "
              f"{ap_time if ap_time is not None else float('nan'):>6.2f} {best:>5} {ratio:>9.3f} "
              f"{(ap_rows / best) if ap_rows else float('nan'):>7.3f} {'yes' if complete else 'NO'}")
    for label, levels in STRENGTH_THREE:
        array, wall, cpu = _ours(levels, 3, args.effort, args.repeats)
        complete = tk.coverage(array, strength=3).complete
        ap_rows = ap_time = None
        ap_note = ""
        if not args.no_allpairspy:
            ap_array, ap_time = _allpairspy(levels, 3)
            ap_rows = len(ap_array)
            ap_report = tk.coverage(ap_array, levels, 3)
            # allpairspy's n=3 mode does not guarantee 3-way coverage; say so rather than
            # compare sizes of arrays that do different jobs.
            ap_note = f"  (allpairspy covers {ap_report.fraction:.1%} of triples)"
        if not complete:
            failures.append(f"{label} t=3: our array is incomplete")
        if wall > 5.0:
            failures.append(f"{label} t=3 took {wall:.2f} s > 5 s")
        print(f"{label:<12} {3:>1} {array.size:>5} {wall:>7.3f} {cpu:>6.3f} {array.method:<26} "
              f"{ap_rows if ap_rows is not None else '-':>10} "
              f"{ap_time if ap_time is not None else float('nan'):>6.2f} {'-':>5} {'-':>9} {'-':>7} "
              f"{'yes' if complete else 'NO'}{ap_note}")

    median_ratio, max_ratio = statistics.median(ratios), max(ratios)
    print()
    checks = [
        ("every array complete", not any("incomplete" in f for f in failures)),
        ("never more rows than allpairspy", not args.no_allpairspy and not any("> allpairspy" in f for f in failures)),
        (f"median ours/best = {median_ratio:.3f} <= 1.10", median_ratio <= 1.10),
        (f"max ours/best = {max_ratio:.3f} <= 1.25", max_ratio <= 1.25),
        (f"10^30 in {timings['10^30']:.3f} s <= 0.25 s (wall)", timings["10^30"] <= 0.25),
        # Wall time on a shared box includes waiting for a core; CPU time is the part we own.
        (f"10^30 in {cpu_timings['10^30']:.3f} CPU s <= 0.25 s (supplementary)", cpu_timings["10^30"] <= 0.25),
        ("t=3 arrays for 3^10 and 2^20 in <= 5 s", not any("t=3 took" in f for f in failures)),
    ]
    for text, ok in checks:
        print(f"[{'met' if ok else 'NOT MET'}] {text}")
    for failure in failures:
        print("  -", failure)
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
