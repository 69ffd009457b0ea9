"""Golden digests: six seeded ``simulate()`` configurations pinned byte for byte.

Each case hashes (sha256) the canonical JSON of its rows and of ``report()``, with the
fields that measure wall time removed (``row["timing"]``, ``report()["elapsed_s"]``, a sidecar's ``created``) and the
temporary directory replaced by a fixed token; runs that write ``output=`` also hash the
file and its sidecar. A refactor must leave every digest unchanged. A change that alters
behaviour on purpose updates the digest in the same commit and says why in its message.

Regenerate after an intended change with ``python tests/sim/test_golden.py`` (prints the table).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

import toolkit as tk


def _graded_by_tool_use(row: dict) -> dict:
    """A deterministic grader: passes a row whose agent called at least one tool."""
    calls = sum(1 for step in row.get("steps") or [] if step.get("kind") == "tool_call")
    return {"reward": 1.0 if calls else 0.0, "reason": f"{calls} tool calls"}


CASES: dict[str, dict] = {
    "explore_default": dict(mode="explore", budget=48, seed=11),
    "sft_conduct": dict(mode="sft", budget=48, seed=12, grade=True),
    "rl_grader": dict(mode="rl", budget=48, seed=13, grader=_graded_by_tool_use),
    "adaptive_reproducible": dict(mode="adaptive", budget=48, seed=14, reproducible=True, concurrency=4),
    "explore_output": dict(mode="explore", budget=40, seed=15, output="rows.jsonl"),
    "sft_reproducible_grader_output": dict(
        mode="sft", budget=48, seed=16, reproducible=True, concurrency=8, grader=_graded_by_tool_use, output="rows.jsonl"
    ),
}

DIGESTS = {
    "adaptive_reproducible": "8948bdb25f194bd217d3833fcefa9d3ea988ecb523e483715b56a4571b658acc",
    "explore_default": "b72bfa214d8b23a481b07c594851649c73ac681e657653e325e1a1b94bfff2f5",
    "explore_output": "d1d1314fb30774693911656b333dded654eb3e3f2a1c84b2ded79ba50978829f",
    "rl_grader": "f16a0b7be5f5877d79adbe6601e406771f461b0ae7cfcb754e493c4e39f829aa",
    "sft_conduct": "9bfd9486109be97fe9c4c61698a0fa8c22e7ae07dc2b3cb68146baadb9d3097f",
    "sft_reproducible_grader_output": "951913a2d6db18d0e18041cb18ad87cc601c571ff98d8bd304aa295054ed4448",
}


def _canonical(value) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode()


_WALL_TIME_KEYS = frozenset({"timing", "elapsed_s", "created"})


def _untimed(value, tmp: Path):
    """``value`` without wall-time fields (at any depth), the temporary folder as ``<tmp>``."""
    if isinstance(value, dict):
        return {k: _untimed(v, tmp) for k, v in value.items() if k not in _WALL_TIME_KEYS}
    if isinstance(value, list):
        return [_untimed(v, tmp) for v in value]
    if isinstance(value, str):
        return value.replace(str(tmp), "<tmp>")
    return value


def digest_case(name: str, tmp: Path) -> str:
    """The sha256 of one case's rows, report (and written files), timing removed."""
    options = dict(CASES[name])
    if "output" in options:
        options["output"] = tmp / options["output"]
    data = tk.simulate(progress=False, **options)
    parts = [_canonical(_untimed(list(data.rows), tmp)), _canonical(_untimed(data.report(), tmp))]
    if "output" in options:
        lines = options["output"].read_text(encoding="utf-8").splitlines()
        parts.append(_canonical(_untimed([json.loads(line) for line in lines], tmp)))
        sidecar = options["output"].with_name(options["output"].stem + ".meta.json")
        assert sidecar.exists(), f"no sidecar beside {options['output']}"
        parts.append(_canonical(_untimed(json.loads(sidecar.read_text(encoding="utf-8")), tmp)))
    return hashlib.sha256(b"\n".join(parts)).hexdigest()


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_digest(name: str, tmp_path: Path) -> None:
    assert name in DIGESTS, f"no committed digest for {name}; run python tests/sim/test_golden.py"
    assert digest_case(name, tmp_path) == DIGESTS[name]


def test_digest_sees_a_change(tmp_path: Path) -> None:
    # the digest must move when behaviour moves: another seed gives another digest
    CASES["_other_seed"] = dict(CASES["explore_default"], seed=12)
    try:
        assert digest_case("_other_seed", tmp_path / "a") != digest_case("explore_default", tmp_path / "b")
    finally:
        del CASES["_other_seed"]


if __name__ == "__main__":  # pragma: no cover - regeneration helper
    import tempfile

    for case in sorted(CASES):
        with tempfile.TemporaryDirectory() as folder:
            print(f'    "{case}": "{digest_case(case, Path(folder))}",')
    sys.exit(0)
