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
arrays for 3^10 and 2^20 in <= 5 s. Issue 19's t = 2 target (median <= 1.08 over 3^13, 5^10,
4^20, 3^50, 2^100, 10^20, 10^30) measured 1.056 (10^20 1.168 and 10^30 1.100 not improved;
docs/design/covering.md says what was tried).

``--only higher``: issue 19's strength-3 targets at effort="default" (median rows / best-known
<= 1.15, max <= 1.30, 4^20 in <= 5 s) and the t = 4 arrays. Measured (load ~2.4 on 2 cores,
wall / CPU s): median 1.042, max 1.212 (2^100: 40 rows against 33); 5^10 205 rows (5.4 s),
6^8 306 (3.1 s; best known 301), 10^10 1312 (3.6 s), 4^20 127 (1.5 s); the table and what
was tried for the rest are in docs/design/covering.md.

``--only grid``: tk.situation_grid for 500 / 1,000 / 2,000 synthetic tools (issue 21 row 13).
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

# Issue 19: (label, levels, best-known CAN(3, k, v), its source, rows before issue 19 at
# effort="default", seed 0). Best known from Colbourn's covering array tables as quoted in
# issue 19; 7^8 = 343 is v^3 (Bush's orthogonal array meets the product bound). 6^8 = 301
# (Torres-Jimenez) is the November 2024 table entry (3, 8, 6) as kept in the colbourn_catalogue.csv
# of github.com/chrispbsmolen/ca-tools (the tables themselves are no longer public); our lower
# bound there is 6 x CAN(2, 7, 6) >= 6 x 37 = 222 (no OA(36; 2, 4, 6): Tarry 1900), so the
# issue's 1.30 x 222 = 288 would beat the table. The same catalogue confirms the other values.
# "before" = the toolkit at the commit before issue 19 (issue text, plus measured here for
# 4^10, 3^50, 2^100, 6^8, 7^8, 10^10).
STRENGTH_THREE_TARGETS = [
    ("3^13", [3] * 13, 45, "cover starter", 64),
    ("5^10", [5] * 10, 185, "Chateauneuf-Kreher", 269),
    ("4^20", [4] * 20, 127, "Raaphorst-Moura-Stevens", 199),
    ("3^20", [3] * 20, 59, "simulated annealing", 79),
    ("2^20", [2] * 20, 18, "Roux / table", 21),
    ("2^10", [2] * 10, 12, "exact", 12),
    ("4^10", [4] * 10, 100, "table", 134),
    ("3^50", [3] * 50, 102, "table", 117),
    ("2^100", [2] * 100, 33, "table", 40),
    ("6^8", [6] * 8, 301, "Torres-Jimenez (table; our lower bound is 222)", 309),
    ("7^8", [7] * 8, 343, "orthogonal array (optimal)", 343),
    ("10^10", [10] * 10, 1215, "table", 1313),
]
# t = 4 (issue 19: "works and is complete"): the reference is our recursive lower bound
# v x CAN(3, k-1, v) bound, not a table value.
STRENGTH_FOUR = [("3^8", [3] * 8), ("4^8", [4] * 8), ("2^20", [2] * 20)]


def _strength_three_table(effort: str) -> list[str]:
    """Issue 19 table: t=3 sizes against the best known, before and after; returns failures."""
    header = (f"{'config':<7} {'best':>5} {'before':>6} {'after':>6} {'ratio':>6} {'seconds':>8} "
              f"{'cpu s':>6} complete  method")
    print(header)
    print("-" * len(header))
    failures, ratios = [], []
    for label, levels, best, _source, before in STRENGTH_THREE_TARGETS:
        array, wall, cpu = _ours(levels, 3, effort, 1)
        complete = tk.coverage(array, strength=3).complete
        ratio = array.size / best
        ratios.append(ratio)
        if not complete:
            failures.append(f"{label} t=3: our array is incomplete")
        print(f"{label:<7} {best:>5} {before:>6} {array.size:>6} {ratio:>6.3f} {wall:>8.2f} {cpu:>6.2f} "
              f"{'yes' if complete else 'NO':<9} {array.method}")
    for effort_4x6 in ("fast", "default", "best"):
        size = tk.covering_array([4] * 6, 3, effort=effort_4x6, seed=0, time_budget=5.0).size
        print(f"4^6 at effort={effort_4x6!r}: {size} rows (target 64)")
        if size != 64:
            failures.append(f"4^6 at {effort_4x6}: {size} rows != 64")
    _, wall, _ = _ours([4] * 20, 3, "default", 1)
    median_ratio, max_ratio = statistics.median(ratios), max(ratios)
    checks = [
        (f"t=3 median ratio {median_ratio:.3f} <= 1.15", median_ratio <= 1.15),
        (f"t=3 max ratio {max_ratio:.3f} <= 1.30", max_ratio <= 1.30),
        (f"t=3 4^20 in {wall:.2f} s <= 5 s (default effort, wall)", wall <= 5.0),
    ]
    for text, ok in checks:
        print(f"[{'met' if ok else 'NOT MET'}] {text}")
        if not ok:
            failures.append(text)
    print()
    header = f"{'config':<7} {'t':>1} {'rows':>6} {'lower bd':>8} {'seconds':>8} complete  method"
    print(header)
    print("-" * len(header))
    for label, levels in STRENGTH_FOUR:
        array, wall, _ = _ours(levels, 4, effort, 1)
        complete = tk.coverage(array, strength=4).complete
        if not complete:
            failures.append(f"{label} t=4: our array is incomplete")
        print(f"{label:<7} {4:>1} {array.size:>6} {array.lower_bound:>8} {wall:>8.2f} "
              f"{'yes' if complete else 'NO':<9} {array.method}")
    return failures


# Issue 21 row 13: the situation grid on a wide tool axis (synthetic tools, each with a
# reference parameter so world_state varies too; two policy clauses = two rule blocks).
GRID_TOOLS = (500, 1000, 2000)
GRID_POLICY = "Refunds go back to the original payment method only.\nNever share another customer's data."
GRID_CONSTRAINT = {"stance": "adversarial", "history": "repeat_visit"}


def _grid_table() -> list[str]:
    """Wall seconds of tk.situation_grid for 500 / 1,000 / 2,000 tools, without and with a
    forbidden pair; every grid is checked complete with tk.coverage. Target: 2,000 tools in
    <= 10 s. Before issue 21 row 13 (HEAD 5a57e1e, same machine): 7.3 / 17.6 / 73.6 s
    unconstrained, 4.0 / 13.3 s constrained at 500 / 1,000."""
    failures = []
    tools = lambda n: [  # noqa: E731
        {"name": f"tool_{i:04d}", "parameters": {"type": "object", "properties": {"booking_id": {"type": "string"}}}}
        for i in range(n)
    ]
    tk.situation_grid(tools(3), GRID_POLICY, progress=False)  # imports (jsonschema formats) out of the timing
    print(f"{'tools':>6} {'constraint':>10} {'rows':>7} {'seconds':>8} {'cpu s':>6} complete")
    for n in GRID_TOOLS:
        for constrained in (False, True):
            specs = tools(n)
            wall, cpu = time.perf_counter(), time.process_time()
            grid = tk.situation_grid(specs, GRID_POLICY, constraints=[GRID_CONSTRAINT] if constrained else None,
                                     progress=False)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            factors = grid.coverage_factors
            report = tk.coverage([dict(s.dimensions) for s in grid], factors, 2,
                                 constraints=[GRID_CONSTRAINT] if constrained else None)
            if not report.complete:
                failures.append(f"grid of {n} tools (constrained={constrained}) is incomplete")
            if n == 2000 and wall > 10.0:
                failures.append(f"grid of 2,000 tools (constrained={constrained}) took {wall:.1f} s > 10 s")
            print(f"{n:>6} {'yes' if constrained else 'no':>10} {len(grid):>7} {wall:>8.2f} {cpu:>6.2f} "
                  f"{'yes' if report.complete else 'NO'}")
    return failures


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
    parser.add_argument("--only", choices=["all", "pairwise", "higher", "grid"], default="all",
                        help="pairwise: the issue-3 table; higher: the issue-19 t=3 / t=4 tables; "
                             "grid: the situation grid for 500 / 1,000 / 2,000 tools (issue 21 row 13)")
    args = parser.parse_args()
    if args.only == "grid":
        print(f"tk.situation_grid on synthetic tools, {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.2f}")
        failures = _grid_table()
        for failure in failures:
            print("  -", failure)
        return 1 if failures else 0
    if args.only == "higher":
        print(f"toolkit covering arrays t=3/4, effort={args.effort!r}, {os.cpu_count()} cpus, "
              f"load average {os.getloadavg()[0]:.2f}")
        failures = _strength_three_table(args.effort)
        for failure in failures:
            print("  -", failure)
        return 1 if failures else 0

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
        # None: not measured (--no-allpairspy skips the peer), printed as such, not as a miss
        ("never more rows than allpairspy", None if args.no_allpairspy else not any("> allpairspy" in f for f in failures)),
        (f"median ours/best = {median_ratio:.3f} <= 1.10", median_ratio <= 1.10),
        (f"max ours/best = {max_ratio:.3f} <= 1.25", max_ratio <= 1.25),
        (f"10^30 in {timings['10^30']:.3f} s <= 0.25 s (wall)", timings["10^30"] <= 0.25),
        # Wall time on a shared box includes waiting for a core; CPU time is the part we own.
        (f"10^30 in {cpu_timings['10^30']:.3f} CPU s <= 0.25 s (supplementary)", cpu_timings["10^30"] <= 0.25),
        ("t=3 arrays for 3^10 and 2^20 in <= 5 s", not any("t=3 took" in f for f in failures)),
    ]
    for text, ok in checks:
        print(f"[{'not measured' if ok is None else 'met' if ok else 'NOT MET'}] {text}")
    if args.only == "all":
        print()
        failures += _strength_three_table(args.effort)
    for failure in failures:
        print("  -", failure)
    return 0 if all(ok for _, ok in checks) and not failures else 1


if __name__ == "__main__":
    raise SystemExit(main())
