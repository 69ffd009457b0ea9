"""SimulationData.pass_at: always a result with a note, never a bare None."""

import json

import toolkit as tk
from toolkit.sim import ARMS
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


def test_the_summary_says_phrasings_and_repeats_not_n_and_k():
    # "n" and "k" read as samples to anyone used to pass@k; the line spells out what they count
    for phrasings, repeats in ((1, 4), (2, 3)):
        first = tk.simulate(mode="sft", phrasings=phrasings, repeats=repeats, budget=12, progress=False, reproducible=True).summary().splitlines()[0]
        assert f"phrasings {phrasings} per situation, repeats {repeats} per phrasing" in first
        assert "n=" not in first and "k=" not in first


_WEIGHTS = {"structured": 0.40, "llm_guided": 0.48, "open_ended": 0.08, "behavior_targeted": 0.02, "failure_mutation": 0.02}


def _arms_line(data):
    return next(line for line in data.summary().splitlines() if line.startswith("search arms"))


def test_an_arm_that_ran_no_row_shows_as_not_run_without_a_weight():
    ran = SimulationData([{"arm": arm} for arm in ARMS], search={"arm_weights": _WEIGHTS})
    idle = SimulationData([{"arm": "structured"}] * 3, search={"arm_weights": _WEIGHTS})
    assert "failure_mutation 2% (1 row)" in _arms_line(ran) and "not run" not in _arms_line(ran)
    line = _arms_line(idle)
    assert line.startswith("search arms, final split (rows run): structured 40% (3 rows); not run: ")
    assert "failure_mutation (no failing row to mutate)" in line
    assert "llm_guided, open_ended, behavior_targeted (no slot drawn, or no candidate found)" in line
    assert "48%" not in line and "8%" not in line and "2%" not in line  # an arm that did not run holds no weight


def test_offline_the_gap_guided_arm_says_no_model_guides_it():
    data = tk.simulate(budget=40, progress=False, reproducible=True)
    line = _arms_line(data)
    assert "llm_guided" in line and "gap-guided from the least-seen axis values, template writer, no model" in line
    rows = sum(r["arm"] == "llm_guided" for r in data.rows)
    assert rows and f"({rows} rows; gap-guided" in line  # it ran: offline it needs no model
    modelled = SimulationData([{"arm": "llm_guided"}], search={"arm_weights": _WEIGHTS}, report={"writer_model": "openai:gpt-4o-mini"})
    assert "no model" not in _arms_line(modelled)


def test_the_offline_stand_ins_say_what_they_are_and_name_no_unexplained_reference():
    offline = tk.simulate(budget=4, progress=False).summary()
    assert "\n  agent: tk.seeded_agent, an offline policy with planted mistakes (pass agent=" in offline
    assert "ask_passenger, a human tool the simulated person answers" in offline
    assert "reference" not in offline
    own = tk.simulate(tk.seeded_agent(ONE_TOOL), tools=ONE_TOOL, simulator=False, budget=4, progress=False).summary()
    assert "\n  agent:" not in own and "\n  tools:" not in own and "\n  writer:" not in own  # given, so no stand-in
    assert "\n  simulated person: the template user" in own  # a chat agent still talks to the template user


ONE_TOOL = [{"type": "function", "function": {"name": "get_booking", "description": "Look up a booking by its id",
             "parameters": {"type": "object", "properties": {"booking_id": {"type": "string"}}, "required": ["booking_id"]}}}]  # fmt: skip


def test_trajectories_print_privileged_keys_not_values():
    # issue 21: data.trajectories keeps the answer key for a judge, and printing it in a
    # notebook must not put the key's values on screen (the written rows drop it entirely)
    tools = tk.dataset_path("tools/airline_support.json")
    data = tk.simulate(tk.seeded_agent(tools, seed=0), tools=tools, budget=6, seed=0, progress=False)
    trajectory = data.trajectories[0]
    assert trajectory["privileged"] and "privileged" not in data.rows[0]
    secret = json.dumps(dict(trajectory["privileged"]))
    shown = repr(data.trajectories) + repr(trajectory) + str(trajectory)
    assert "values hidden" in shown
    public = json.dumps(data.rows[0]) + repr(data.trajectories[1:])
    checked = 0
    for value in trajectory["privileged"].values():
        text = json.dumps(value).strip('"')
        if len(text) > 8 and text not in public:  # a value only the answer key holds
            assert text not in repr(trajectory)
            checked += 1
    assert checked >= 1
    assert json.loads(json.dumps(trajectory))["privileged"] == json.loads(secret)  # still plain data to read


def test_pass_at_on_the_statistics_view_equals_pass_at_on_whole_rows():
    # data.pass_at decodes stored rows onto the fields pass_at reads (issue 21, row 4); the
    # reference is tk.pass_at on the whole rows, with truncated steps, judge failures and
    # mixed run settings present so every field the view keeps is exercised
    from toolkit.sim.data import _statistics_view

    tools = tk.dataset_path("tools/airline_support.json")
    data = tk.simulate(tk.seeded_agent(tools, seed=0), tools=tools, budget=40, repeats=2, grade=True, seed=3, progress=False)
    rows = [dict(r) for r in data.rows]
    for i, row in enumerate(rows):
        if i % 7 == 0:
            row["reward"], row["judge_status"], row["reason"] = None, "error", f"judge down {i}"
        if i % 5 == 0:
            row["steps"] = [*row["steps"], {"text": "cut", "truncated": True}]
        if i % 9 == 0:
            row["sampling"] = {"temperature": 0.5, "max_tokens": 64}
    whole = tk.pass_at(rows, seed=0, on_bad_reward="skip")
    viewed = tk.pass_at([_statistics_view(r) for r in rows], seed=0, on_bad_reward="skip")
    assert repr(viewed) == repr(whole) and viewed.config == whole.config and viewed.warnings == whole.warnings
    assert str(viewed) == str(whole)
    fresh = tk.simulate(tk.seeded_agent(tools, seed=0), tools=tools, budget=40, repeats=2, grade=True, seed=3, progress=False)
    assert str(fresh.pass_at) == str(tk.pass_at(list(fresh.rows), seed=fresh._seed, on_bad_reward="skip"))
