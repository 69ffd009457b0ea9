"""``python -m toolkit demo``: the offline main job.

Simulation (default): the shipped airline tool set and policy, the seeded offline agent, the
template writer and template user, graded by the deterministic conduct grader. It prints the
run's summary and the pass@1 / pass^k / pass@k line with intervals, and writes the rows
(JSONL + .meta.json) and a pass@k figure under ``--out``. No key, no network; about 10 s on the
2-core development machine (2026-12-02), statistics part included.

The second part (skip it with ``--no-stats``) reads two shipped runs of the same tasks
(before and after a change to an agent): their pass@k lines and the paired before/after
report, with the pass@k and delta-forest figures.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

#: Rollouts per prompt: sft mode's preset k, named here so the help text and the summary line say it.
REPEATS = 4

HELP = "offline demo: simulate an agent, grade it, pass@k with intervals, then a paired before/after report"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("out/demo"), help="folder for rows and figures (default out/demo)")
    parser.add_argument("--seed", type=int, default=0, help="seed for the simulation and every resampling draw")
    parser.add_argument("--budget", type=int, default=320, help=f"rows to simulate (default 320 = 80 prompts x {REPEATS} repeats; the search words some situations more than once, "
                        "so the summary counts fewer situations than prompts, and pass@k one task per situation)")
    parser.add_argument("--no-stats", dest="stats", action="store_false",
                        help="skip the paired before/after report on the shipped runs")
    parser.add_argument("--before", type=Path, default=None, help="rows JSONL of the baseline run (default: shipped demo)")
    parser.add_argument("--after", type=Path, default=None, help="rows JSONL of the changed run (default: shipped demo)")
    parser.set_defaults(run=run)


def _resolve(path: Path | None, name: str) -> Path:
    from toolkit._util.datasets import dataset_path
    from toolkit.errors import ConfigError

    if path is None:
        return dataset_path(name)
    if not path.exists():
        raise ConfigError(f"{path} does not exist")
    return path


def _simulation(args: argparse.Namespace) -> list[Path]:
    import toolkit as tk
    from toolkit.plots import coverage_heatmap, export_figure, pass_at_k_curve

    tools = tk.dataset_path("tools/airline_support.json")
    policy = tk.dataset_path("tools/airline_support_policy.md").read_text(encoding="utf-8")
    agent = tk.seeded_agent(tools, seed=args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    rows_path = args.out / "simulated_rows.jsonl"
    # sft mode gives every prompt exactly k = 4 rollouts, so pass^4 and pass@4 are defined for
    # every group; one phrasing per situation card spends the budget on more prompts (80 at the
    # default budget), which covers more of the grid and narrows the interval over tasks. The
    # search's arms may come back to a situation with a new prompt (a grid cell drawn again,
    # open-ended probes sharing one card, a mutated failure), so there are fewer situations
    # (72 at the default budget) than prompts, and pass@k counts one task per situation.
    data = tk.simulate(
        agent, tools=tools, system_prompt=policy, mode="sft", phrasings=1, repeats=REPEATS, budget=args.budget,
        grade=True, simulator=False, output=rows_path, overwrite=True, reproducible=True, progress=False, advanced={"seed": args.seed},
    )  # fmt: skip
    print("simulation: seeded agent on the airline tool set, template writer and user, conduct grader")
    print(data.summary())
    print(_budget_line(data.rows))
    print()
    print(f"  {data.pass_at}")
    written = [rows_path]
    written += export_figure(pass_at_k_curve({"simulated": data.rows}, seed=args.seed), args.out / "simulated_pass_at_k", ("pdf", "png"))
    # the same grid the engine drew from, so the figure's counts are the report's pairwise numbers
    grid = tk.situation_grid(tools, policy, seed=args.seed)
    dimensions = [row["scenario_dimensions"] for row in data.rows if row.get("scenario_dimensions")]
    report = tk.coverage(dimensions, grid.coverage_factors, strength=2)
    written += export_figure(coverage_heatmap(report), args.out / "simulated_coverage", ("pdf", "png"))
    return written


def _budget_line(rows: list[dict]) -> str:
    """How the rows split into prompts and situations, counted from the rows themselves: the
    help text promises prompts x repeats, and the summary's situation count is smaller."""
    prompts = len({row["prompt"] for row in rows})
    situations = len({row.get("scenario_id") for row in rows})
    repeats = f"x {REPEATS} repeats" if len(rows) == REPEATS * prompts else f"of up to {REPEATS} repeats"
    return (
        f"{len(rows)} rows = {prompts} prompts {repeats}, on {situations} situations (the search words some "
        f"situations more than once); pass@k below counts each situation as one task"
    )


def _statistics(args: argparse.Namespace) -> list[Path]:
    import toolkit as tk
    from toolkit.plots import delta_forest, export_figure, pass_at_k_curve

    before_path = _resolve(args.before, "demo_before.jsonl")
    after_path = _resolve(args.after, "demo_after.jsonl")
    before = tk.read_rows(before_path)
    after = tk.read_rows(after_path)
    print(f"before: {before_path} ({len(before)} rows)")
    print(f"  {tk.pass_at(before, seed=args.seed)}")
    print(f"after:  {after_path} ({len(after)} rows)")
    print(f"  {tk.pass_at(after, seed=args.seed)}")
    print()
    report = tk.delta_report(before, after, seed=args.seed)
    print(report)
    written = export_figure(pass_at_k_curve({"before": before, "after": after}, seed=args.seed), args.out / "pass_at_k", ("pdf", "png"))
    written += export_figure(delta_forest(report), args.out / "delta_forest", ("pdf", "png"))
    return written


def run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    written = _simulation(args)
    if args.stats:
        print()
        written += _statistics(args)
    print()
    print("written: " + ", ".join(str(p) for p in written))
    print(f"done in {time.perf_counter() - started:.1f} s")
    return 0
