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
