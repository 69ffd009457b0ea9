"""Start-up cost: ``import toolkit`` and the first use of each sub-namespace, each in a
fresh interpreter (median of ``--repeats`` runs), with the heavy libraries each one loads.

Target (issue 12): ``import toolkit`` under 0.5 s on this machine, loading none of
matplotlib, ipywidgets or pydantic. Run ``python benchmarks/bench_import.py`` (add
``--src DIR`` to time another checkout, e.g. an older commit in a git worktree, side by side).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HEAVY = ("matplotlib", "ipywidgets", "pydantic", "pandas", "scipy", "jsonschema", "openai", "anthropic")
STEPS = {
    "import toolkit": "",
    "+ tk.simulate": "tk.simulate",
    "+ tk.pass_at": "tk.pass_at",
    "+ tk.plots": "tk.plots.pass_at_k_curve",
    "+ tk.whatif": "tk.whatif.fork",
    "+ tk.Dashboard": "tk.Dashboard",
}

_PROBE = """
import json, sys, time
if {src!r}:
    # time that checkout, not the editable install's (its finder would win over sys.path)
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
    sys.path.insert(0, {src!r})
t0 = time.perf_counter()
import toolkit as tk
t1 = time.perf_counter()
{use}
t2 = time.perf_counter()
print(json.dumps({{"import": t1 - t0, "use": t2 - t1, "loaded": [m for m in {heavy!r} if m in sys.modules],
                  "where": tk.__file__}}))
"""


def measure(src: Path | None, use: str, repeats: int) -> dict:
    runs = []
    for _ in range(repeats):
        code = _PROBE.format(use=use, heavy=HEAVY, src=str(src) if src is not None else "")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {
        "import_s": statistics.median(r["import"] for r in runs),
        "use_s": statistics.median(r["use"] for r in runs),
        "loaded": runs[-1]["loaded"],
        "where": runs[-1]["where"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--src", type=Path, default=None, help="another checkout to time beside this one")
    args = parser.parse_args()
    columns = [("this checkout", None)] + ([(f"--src {args.src}", args.src.resolve())] if args.src else [])
    print(f"{'step':18s}" + "".join(f"{name:>44s}" for name, _ in columns))
    for label, use in STEPS.items():
        cells = []
        for _, src in columns:
            try:
                m = measure(src, use, args.repeats)
            except subprocess.CalledProcessError:
                cells.append("n/a (name missing)")
                continue
            seconds = m["import_s"] if not use else m["import_s"] + m["use_s"]
            cells.append(f"{seconds:6.3f} s  {','.join(m['loaded']) or '-'}")
        print(f"{label:18s}" + "".join(f"{c:>44s}" for c in cells))
    print("target: 'import toolkit' < 0.500 s, loading none of matplotlib, ipywidgets, pydantic")


if __name__ == "__main__":
    main()
