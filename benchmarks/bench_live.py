"""Dashboard overhead: the same offline simulation with and without ``tk.Dashboard`` attached.

Run: ``.venv/bin/python benchmarks/bench_live.py [--budget 300] [--repeats 3]``

Both arms call ``tk.simulate`` with identical arguments (seeded offline agent, conduct
grader, logprobs on, a seeded reference policy for KL); the dashboard arm adds its row
callback, its renderer thread (statistics + PNG frames + reference scoring under the duty
cap) and its widgets, without a kernel. The arms alternate (A B A B ...) so a change in
machine load hits both, and the median of each arm is compared.

Reported:
* simulate wall time per arm, and the overhead (dashboard median / plain median - 1);
  the project's target is <= 10%. On a shared, loaded machine wall time is noisy (other
  processes), so the process CPU time until simulate() returned is printed too: it counts
  what the dashboard's threads cost whatever else runs;
* how long after simulate() returned the dashboard's final frame appeared (it scores any
  KL backlog and draws with the 10,000-resample bootstrap);
* frames drawn per run and the renderer's busy share.
The reference notes (docs/design/jupyter.md) measured no overhead figure for their demo producer
(a sleep-paced fake), so there is no peer number to print next to ours.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import toolkit as tk


def _setup():
    tools = tk.dataset_path("tools/airline_support.json")
    policy = tk.dataset_path("tools/airline_support_policy.md").read_text()
    agent = tk.seeded_agent(tools, seed=0)
    reference = tk.seeded_agent(tools, rate=0.1, seed=0)
    grader = tk.conduct_grader(policy)
    return tools, policy, agent, reference, grader


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3, help="runs per arm (alternating)")
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    tools, policy, agent, reference, grader = _setup()
    common = dict(agent=agent, tools=tools, system_prompt=policy, grader=grader, budget=args.budget,
                  repeats=4, logprobs=True, concurrency=args.concurrency, seed=0)
    plain_times, dash_times, final_lags, frames, duty = [], [], [], [], []
    plain_cpu, dash_cpu = [], []
    # warm-up: imports, font cache, first figure
    tk.simulate(**{**common, "budget": 20}, progress=False)
    for repeat in range(args.repeats):
        started, cpu = time.perf_counter(), time.process_time()
        data = tk.simulate(**common, progress=False)
        plain_times.append(time.perf_counter() - started)
        plain_cpu.append(time.process_time() - cpu)
        assert len(data.rows) == args.budget, (len(data.rows), data.stopped_because)

        sim_kwargs = {k: v for k, v in common.items() if k not in ("agent", "tools", "system_prompt", "grader")}
        dashboard = tk.Dashboard(agent=agent, tools=tools, system_prompt=policy, grader=grader,
                                 reference=reference, **sim_kwargs)
        started, cpu = time.perf_counter(), time.process_time()
        dashboard.run()
        while dashboard._ended_at is None:  # noqa: SLF001 (bench reads internals)
            time.sleep(0.005)
        dash_cpu.append(time.process_time() - cpu)  # CPU until simulate() returned
        assert dashboard.wait(600)
        total = time.perf_counter() - started
        simulate_seconds = dashboard._ended_at - dashboard._started_at  # noqa: SLF001
        dash_times.append(simulate_seconds)
        final_lags.append(total - simulate_seconds)
        frames.append(dashboard._renderer.frames)  # noqa: SLF001
        duty.append(dashboard._renderer.live_busy_seconds / simulate_seconds)  # noqa: SLF001
        assert dashboard.error is None, dashboard.error
        assert len(dashboard.data.rows) == args.budget
        print(f"repeat {repeat}: plain {plain_times[-1]:.2f} s ({plain_cpu[-1]:.2f} s CPU) | with dashboard "
              f"{simulate_seconds:.2f} s ({dash_cpu[-1]:.2f} s CPU; final frame +{final_lags[-1]:.2f} s, "
              f"{frames[-1]} frames, renderer CPU {duty[-1]:.1%} of the run)", flush=True)
    plain = statistics.median(plain_times)
    dash = statistics.median(dash_times)
    print()
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")
    print(f"simulate budget={args.budget} repeats=4 logprobs=True concurrency={args.concurrency}, "
          f"{args.repeats} runs per arm, medians:")
    print(f"  plain simulate          {plain:7.2f} s  ({args.budget / plain:.1f} rows/s)")
    print(f"  with dashboard attached {dash:7.2f} s  ({args.budget / dash:.1f} rows/s)")
    print(f"  overhead, wall time     {dash / plain - 1:+7.1%}   (target <= +10%)")
    cpu_plain, cpu_dash = statistics.median(plain_cpu), statistics.median(dash_cpu)
    print(f"  process CPU until simulate returned: plain {cpu_plain:.2f} s, with dashboard {cpu_dash:.2f} s "
          f"-> overhead {cpu_dash / cpu_plain - 1:+.1%}")
    print(f"  final frame after simulate returned: median {statistics.median(final_lags):.2f} s")
    print(f"  frames per run: {frames}; renderer CPU share of the run: {', '.join(f'{d:.1%}' for d in duty)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
