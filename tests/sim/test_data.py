"""SimulationData.pass_at: always a result with a note, never a bare None."""

import toolkit as tk
from toolkit.sim.data import SimulationData


def _rows(n, **fields):
    return [{"schema_version": "1", "prompt": f"p{i}", "steps": [], "final_text": "t", "scenario_id": f"s{i}", **fields} for i in range(n)]


def test_ungraded_rows_give_a_result_whose_printed_line_says_grade_first():
    result = SimulationData(_rows(4)).pass_at
    assert isinstance(result, tk.stats.PassAt) and result.pass_at_1 is None
    assert result.note.startswith("no row has a usable reward: 4 rows, 0 grader errors, 4 not graded")
    assert "data.grade(judge=...)" in result.note and result.note in str(result)


def test_grader_errors_are_counted_with_the_first_one():
    rows = _rows(3, reward=None, judge_status="error", judge_name="grader", reason="ZeroDivisionError: division by zero")
    rows[2].update(judge_status="invalid_result", reason="grader returned True")
    result = SimulationData(rows).pass_at
    assert result.pass_at_1 is None
    assert result.note.startswith(
        "no row has a usable reward: 3 rows, 3 grader errors (error 2, invalid_result 1; first: ZeroDivisionError: division by zero)"
    )
    assert "fix the grader" in str(result)


def test_a_run_without_rows_says_what_it_lost():
    data = SimulationData(
        [], report={"rollouts_lost": 20, "rollouts_lost_by": {"bad_reply": 20}}, stopped_because="agent_failed",
        warnings=["agent_failed: no rollout produced a row after 44 attempts; fix the agent"],
    )  # fmt: skip
    result = data.pass_at
    assert result.pass_at_1 is None and result.n_groups == 0
    assert result.note == (
        "no rows to score: 20 rollout(s) lost (bad_reply 20); stopped: agent_failed; "
        "first warning: agent_failed: no rollout produced a row after 44 attempts; fix the agent"
    )
    assert str(result) == f"pass@1 n/a (0 groups): {result.note}"
    assert "no rows" in SimulationData([]).pass_at.note  # nothing known about the run: pass_at's own note


def test_graded_rows_are_scored_and_a_judge_that_passes_everything_is_flagged_on_the_line():
    result = SimulationData(_rows(6, reward=1.0)).pass_at
    assert result.pass_at_1 == 1.0
    text = str(result)
    assert text.startswith("every row scored 1 (6 of 6); check the judge before reading this number | pass@1 1.00")
    assert text.count("pass@1") == 1
