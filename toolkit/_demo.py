"""``python -m toolkit demo``: the offline main job.

It reads two runs of the same tasks shipped in ``datasets/`` (before and after a change to
an agent), prints pass@1 / pass^k / pass@k with their intervals for each, the paired
before/after report, and writes the figures. No key, no network, a few seconds.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

HELP = "offline demo: intervals and a paired before/after report on the shipped datasets"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--before", type=Path, default=None, help="rows JSONL of the baseline run")
    parser.add_argument("--after", type=Path, default=None, help="rows JSONL of the changed run")
    parser.add_argument("--out", type=Path, default=Path("out/demo"), help="folder for figures (default out/demo)")
    parser.add_argument("--seed", type=int, default=0, help="seed for every resampling draw")
    parser.set_defaults(run=run)


def _resolve(path: Path | None, name: str) -> Path:
    from toolkit._errors import ConfigError
    from toolkit.datasets import dataset_path

    if path is None:
        return dataset_path(name)
    if not path.exists():
        raise ConfigError(f"{path} does not exist")
    return path


def run(args: argparse.Namespace) -> int:
    import toolkit as tk
    from toolkit.plots import delta_forest, export_figure, pass_at_k_curve

    started = time.perf_counter()
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
    args.out.mkdir(parents=True, exist_ok=True)
    written = export_figure(
        pass_at_k_curve({"before": before, "after": after}, seed=args.seed), args.out / "pass_at_k", ("pdf", "png")
    )
    written += export_figure(delta_forest(report), args.out / "delta_forest", ("pdf", "png"))
    print()
    print("figures: " + ", ".join(str(p) for p in written))
    print(f"done in {time.perf_counter() - started:.1f} s")
    return 0
