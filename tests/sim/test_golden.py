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
    "adaptive_reproducible": "6631079c8e6ed86a7f4512e00be7e614c19b52fbd3fda8e0f287b5a33ce6a6c2",
    "explore_default": "70ca8401e90161a7ce718e33a89571b62c9172a3bcd324fd9dde272d0db35e0d",
    "explore_output": "46b391f7cad4d80eecf92bcf183f07fdf68e9fd28b52bd2779e941844d578f53",
    "rl_grader": "a256fac7c20c19ae83deb2a4a157f17d45bd8700b30b845f69b845ae2bd17252",
    "sft_conduct": "4d78eeec44d30022490b4bf33618f4e7f29a2deb4b001d483a01a694b09856dc",
    "sft_reproducible_grader_output": "f42dec3329d4dd58e08477f810a9af895a0004269ca89cd3bd608d1786d52873",
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
