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
    "adaptive_reproducible": "8bfe518afef20d2c959b5888897865c4584dcff4e186f837bfa8fbfd83659220",
    "explore_default": "9260c0f4773a5ce370b261b6792353d601e66c8a8fd832ab7cf120353f39e486",
    "explore_output": "9749081ac3bb0b88658265b8ac0ddd14ec82db3639a79643d52e8b0b2ca98b2a",
    "rl_grader": "2b32be021147ce568ecff9dc22f81102f1418bc54c547250552423605086224b",
    "sft_conduct": "41bd8e6f2438104d7cbda182a4d3369185f84c2facd3a04e7ebea34a54bda923",
    "sft_reproducible_grader_output": "c91a6397d471cef9344662c0b70221308516956d6aafa3a1444cc6b795c402bd",
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
