"""simulate(until="decided"): stop once the anytime-valid pass@1 bounds exclude a threshold.

Reference: tk.stats.confidence_sequence recomputed over the run's own rows (concurrency 1,
explore's one rollout a prompt: each row is one unit, in landing order)."""

from __future__ import annotations

import pytest

import toolkit as tk
from toolkit.errors import ConfigError, KnobError

DECIDE = {"decide": {"threshold": 0.3}}


def test_it_stops_where_the_sequence_over_its_rows_first_excludes_the_threshold():
    data = tk.simulate(budget=300, grade=True, until="decided", advanced={**DECIDE, "concurrency": 1},
                       progress=False, seed=3)
    decided = data.report()["decided"]
    assert data.stopped_because == "decided" and decided["side"] == "above"
    rewards = [row["reward"] for row in data.rows]
    at, side = tk.stats.confidence_sequence(rewards).decided(0.3)
    assert (at, side) == (decided["at_rows"], "above")
    assert len(data.rows) < 300 and "stopped: decided" in data.summary()


def test_without_until_decided_the_same_run_spends_its_budget():
    data = tk.simulate(budget=120, grade=True, advanced={"concurrency": 1}, progress=False, seed=3)
    assert data.stopped_because == "budget" and len(data.rows) == 120 and "decided" not in data.report()


def test_an_undecided_run_says_so_in_its_warnings():
    data = tk.simulate(budget=60, grade=True, until="decided", advanced={"decide": {"threshold": 0.62}},
                       progress=False, seed=3)
    assert data.stopped_because == "budget" and data.report()["decided"]["side"] is None
    assert any(w.startswith("until='decided': pass@1 against 0.62 was not decided") for w in data.warnings)
    assert "not decided" in data.summary()


def test_a_stricter_level_needs_more_rows():
    loose = tk.simulate(budget=400, grade=True, until="decided", progress=False, seed=3,
                        advanced={"decide": {"threshold": 0.5, "level": 0.8}, "concurrency": 1})
    strict = tk.simulate(budget=400, grade=True, until="decided", progress=False, seed=3,
                         advanced={"decide": {"threshold": 0.5, "level": 0.99}, "concurrency": 1})
    assert loose.report()["decided"]["at_rows"] < strict.report()["decided"]["at_rows"]


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"until": "decided", "grade": True}, ConfigError, "needs the question"),
    ({"until": "decided", "advanced": DECIDE}, ConfigError, "rows must be graded"),
    ({"until": "decided", "grade": True, "advanced": {"decide": {"threshold": 1.2}}}, KnobError, r"\['threshold'\] must be"),
    ({"until": "decided", "grade": True, "advanced": {"decide": {"threshhold": 0.5}}}, KnobError, "threshold"),
    ({"until": "decided", "grade": True, "advanced": {"decide": {"threshold": 0.5, "level": 0.5}}}, KnobError, "'level'"),
])
def test_what_until_decided_refuses(kwargs, error, message):
    with pytest.raises(error, match=message):
        tk.simulate(budget=10, progress=False, **kwargs)


def test_a_decide_question_without_until_decided_is_named_inert():
    data = tk.simulate(budget=12, grade=True, advanced=DECIDE, progress=False)
    assert any(name.startswith("decide (acts only with until='decided')") for name in data.report()["knobs_inert"])


def _baseline(tmp_path):
    path = tmp_path / "before.jsonl"
    data = tk.simulate(budget=200, grade=True, mode="sft", output=path, progress=False, seed=1,
                       advanced={"concurrency": 1})
    return data, path


def test_a_paired_delta_against_a_baseline_run_is_decided_per_prompt(tmp_path):
    """Reference: confidence_sequence(bounds=(-1, 1)) over each prompt group's mean minus the
    same prompt's baseline mean, in the order the groups completed."""
    before, path = _baseline(tmp_path)
    tools = tk.dataset_path("tools/airline_support.json")
    worse = tk.seeded_agent(tools, seed=0, rate=0.9)  # nine planted mistakes in ten
    after = tk.simulate(worse, tasks=before, grade=True, until="decided", progress=False, seed=1,
                        advanced={"decide": {"baseline": str(path)}, "concurrency": 1})
    decided = after.report()["decided"]
    assert after.stopped_because == "decided" and decided["side"] == "below" and decided["metric"] == "delta_pass_at_1"
    base = {}
    for row in before.rows:
        base.setdefault((row["scenario_id"], row["prompt"]), []).append(row["reward"])
    groups, deltas = {}, []
    k = after.report()["rollouts_per_request"]
    for row in after.rows:
        key = (row["scenario_id"], row["prompt"])
        groups.setdefault(key, []).append(row["reward"])
        if len(groups[key]) == k:
            deltas.append(sum(groups[key]) / k - sum(base[key]) / len(base[key]))
    at, side = tk.stats.confidence_sequence(deltas, bounds=(-1, 1)).decided(0.0)
    assert side == "below" and at == decided["groups_complete"]
    assert decided["groups_unpaired"] == 0


def test_the_same_agent_against_its_own_baseline_is_not_decided(tmp_path):
    before, path = _baseline(tmp_path)
    again = tk.simulate(tasks=before, grade=True, until="decided", progress=False, seed=2,
                        advanced={"decide": {"baseline": str(path)}, "concurrency": 1})
    assert again.stopped_because == "tasks_done" and again.report()["decided"]["side"] is None
    assert any("the paired delta pass@1 against 0 was not decided" in w for w in again.warnings)


def test_a_baseline_that_cannot_be_read_is_named(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        tk.simulate(budget=8, grade=True, until="decided", progress=False,
                    advanced={"decide": {"baseline": str(tmp_path / "missing.jsonl")}})
    with pytest.raises(KnobError, match="paired delta"):
        tk.simulate(budget=8, grade=True, until="decided", progress=False,
                    advanced={"decide": {"baseline": "x.jsonl", "threshold": 1.5}})
