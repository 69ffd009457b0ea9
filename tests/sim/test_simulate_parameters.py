"""simulate(): every parameter and alias of the seed's parameter table, with its default.

The table below is copied from the "Parameter reference" of the user's spec (its section
"Parameters and output"; the spec is the user's document and not in this repository),
one entry per row: the parameter, its aliases (the table's closing line: ``phrasings=`` /
``n=`` for ``requests_per_situation``, ``repeats=`` for ``rollouts_per_request``,
``unique=`` for ``unique_situations``, ``policy=`` for ``system_prompt``, ``risk=`` for
``fault_rate``) and the default as the seed writes it. It is a literal on purpose: the test
must not depend on a file outside the repository. Where the seed's default is a hosted model
(``agent``, ``simulator``), ours is the offline path and ``report()["offline_defaults"]`` says
so; where it is "from mode" the signature default is ``None`` and the mode preset (reference
docs/design/engine.md §2.2) is what the report records.
"""

from __future__ import annotations

import inspect
import json
import threading
import time

import pytest

import toolkit as tk

FAST = {"progress": False, "reproducible": True}


def _strip(rows):
    return [{k: v for k, v in r.items() if k != "timing"} for r in rows]

# (parameter, aliases, default as the seed's table writes it)
SEED_PARAMETER_TABLE = [
    ("agent", (), "hosted Qwen"),
    ("spec", (), ""),
    ("tools", (), "from spec or agent"),
    ("system_prompt", ("policy",), "from spec or agent"),
    ("situations", (), ""),
    ("traces", (), "None"),
    ("tasks", (), "None"),
    ("runs", (), "1"),
    ("grader", (), "None"),
    ("execute", (), "None"),
    ("requests_per_situation", ("phrasings", "n"), "from mode"),
    ("rollouts_per_request", ("repeats",), "from mode"),
    ("repeat_policy", (), "from mode"),
    ("unique_situations", ("unique",), "on in explore"),
    ("mode", (), '"explore"'),
    ("fault_rate", ("risk",), "0.5"),
    ("hard_share", (), "from mode"),
    ("reproducible", (), "False"),
    ("budget", (), "1000"),
    ("time_budget", (), "None"),
    ("until", (), '"compute"'),
    ("logprobs", (), "None"),
    ("sampling", (), "None"),
    ("simulator", (), "hosted Qwen"),
    ("user_model", (), "None"),
    ("timeout", (), "300"),
    ("grade", (), "False"),
    ("llm_grade", (), "False"),
    ("output", (), ""),
    ("advanced", (), ""),
]

# Seed defaults that are resolved at run time: signature default None, resolved value here.
# "from mode" rows follow the mode preset table of docs/design/engine.md §2.2 (explore: n=1, k=1,
# no repeats, unique situations, fault_rate 0.5; hard_share 0.40 in every mode).
RESOLVED_EXPLORE = {
    "requests_per_situation": 1,
    "rollouts_per_request": 1,
    "repeat_policy": "none",
    "unique_situations": True,
    "fault_rate": 0.5,
    "hard_share": 0.4,
}
MODE_PRESETS = {  # mode -> (n, k, repeat policy, fault_rate, unique situations)
    "explore": (1, 1, "none", 0.5, True),
    "sft": (3, 4, "fixed", 0.5, False),  # ours: fixed, so k=4 is guaranteed (engine docstring)
    "rl": (1, 8, "successive", 0.8, False),
    "adaptive": (3, 3, "adaptive", 0.5, False),  # k=3: the default clock is 600 s (>= 90 s), docs/design/engine.md §2.2
}


def _seed_default_value(text: str):
    """The literal a seed default stands for, or a marker for the run-time resolved ones."""
    if text in ("", "None", "from spec or agent", "from mode", "on in explore", "hosted Qwen"):
        return None
    if text == "0.5":  # fault_rate: 0.5, but 0.8 under mode="rl" (the seed's own note), so resolved per mode
        return None
    if text in ("False", "True"):
        return text == "True"
    if text.startswith('"'):
        return text.strip('"')
    return int(text) if text.isdigit() else float(text)


def test_every_seed_parameter_and_alias_is_a_keyword_with_the_seed_default():
    parameters = inspect.signature(tk.simulate).parameters
    for name, aliases, seed_default in SEED_PARAMETER_TABLE:
        assert name in parameters, f"simulate() lacks the seed parameter {name!r}"
        expected_kind = inspect.Parameter.POSITIONAL_OR_KEYWORD if name == "agent" else inspect.Parameter.KEYWORD_ONLY
        assert parameters[name].kind == expected_kind, name
        assert parameters[name].default == _seed_default_value(seed_default), (name, seed_default, parameters[name].default)
        for alias in aliases:
            assert alias in parameters and parameters[alias].kind == inspect.Parameter.KEYWORD_ONLY, alias
            assert parameters[alias].default is None, alias


def test_resolved_defaults_are_the_seed_defaults_and_the_report_says_where_offline():
    data = tk.simulate(budget=6, progress=False)
    report = data.report()
    for key, value in RESOLVED_EXPLORE.items():
        assert report[key] == value, (key, report[key])
    assert report["mode"] == "explore" and report["runs"] == 1 and report["until"] == "compute"
    assert report["reproducible"] is False and report["time_budget"] is None and report["timeout"] == 300
    assert report["logprobs"] is False and report["sampling"] is None
    assert report["grade"] is False and report["llm_grade"] is False and report["grader"] is None
    assert report["tasks"] == 0 and report["traces"] == 0
    # hosted defaults replaced by the offline path, and said so
    offline = report["offline_defaults"]
    assert {"agent", "simulator", "user_model", "tools"} <= set(offline)
    # each says what to pass instead, by name (issue 22: no "reference" without saying which)
    assert all(f"pass {key}= a model spec" in offline[key] for key in ("agent", "simulator", "user_model"))
    assert not any("reference" in text for text in offline.values())
    assert report["simulator"] == "template" and data.metadata["writer_model"] == "template"
    assert report["user_model"] == "template" and data.metadata["user_model"] == "template"
    assert all(r["writer_model"] == "template" for r in data.rows)
    # the knob defaults of the experiment table that double as parameters
    assert report["seed"] == 0 and report["concurrency"] == 32 and report["patience"] == "normal" and report["avg_turns"] == 12


@pytest.mark.parametrize("mode", sorted(MODE_PRESETS))
def test_mode_presets(mode):
    n, k, policy, fault_rate, unique = MODE_PRESETS[mode]
    report = tk.simulate(mode=mode, budget=4, **FAST).report()
    assert (report["requests_per_situation"], report["rollouts_per_request"], report["repeat_policy"]) == (n, k, policy)
    assert report["fault_rate"] == fault_rate and report["unique_situations"] is unique and report["hard_share"] == 0.4


@pytest.mark.parametrize(
    "canonical, alias, value, other, report_key",
    [
        ("requests_per_situation", "phrasings", 2, 3, "requests_per_situation"),
        ("requests_per_situation", "n", 2, 3, "requests_per_situation"),
        ("rollouts_per_request", "repeats", 2, 3, "rollouts_per_request"),
        ("unique_situations", "unique", False, True, "unique_situations"),
        ("fault_rate", "risk", 0.3, 0.2, "fault_rate"),
    ],
)
def test_aliases_resolve_and_disagreeing_aliases_raise(canonical, alias, value, other, report_key):
    by_alias = tk.simulate(budget=4, mode="sft", **{alias: value}, **FAST).report()
    by_name = tk.simulate(budget=4, mode="sft", **{canonical: value}, **FAST).report()
    assert by_alias[report_key] == by_name[report_key] == value
    both = tk.simulate(budget=4, mode="sft", **{alias: value, canonical: value}, **FAST).report()
    assert both[report_key] == value  # agreeing aliases are fine
    with pytest.raises(tk.ConfigError) as info:
        tk.simulate(budget=4, **{alias: value, canonical: other}, **FAST)
    assert "aliases disagree" in str(info.value) and alias in str(info.value) and canonical in str(info.value)


def test_policy_is_system_prompt():
    assert tk.simulate(policy="Be brief.", budget=2, **FAST).system_prompts[0]["text"] == "Be brief."
    with pytest.raises(tk.ConfigError, match="aliases disagree"):
        tk.simulate(policy="Be brief.", system_prompt="Be long.", budget=2, **FAST)


@pytest.mark.parametrize("name", [name for name, _, _ in SEED_PARAMETER_TABLE if len(name) >= 5])
def test_misspelled_keyword_names_the_parameter(name):
    typo = name[:-2] + name[-1] + name[-2]  # swap the last two letters
    with pytest.raises(TypeError) as info:
        tk.simulate(**{typo: None})
    message = str(info.value)
    assert "did you mean" in message and f"'{name}'" in message.split("did you mean", 1)[1], message


def test_grade_true_is_the_deterministic_conduct_grade_and_llm_grade_is_advisory():
    graded = tk.simulate(grade=True, budget=8, **FAST)
    assert graded.report()["grade"] is True and graded.report()["grader"] == "conduct"
    assert all(r["label_source"] == "conduct" and r["reward"] in (0.0, 1.0) for r in graded.rows)
    assert _strip(tk.simulate(grade="conduct", budget=8, **FAST).rows) == _strip(graded.rows)
    with pytest.raises(tk.ConfigError, match="grader"):
        tk.simulate(grade=True, grader=lambda row: 1.0, budget=2, **FAST)
    with pytest.raises(tk.ConfigError, match="judge"):
        tk.simulate(llm_grade=True, budget=2, **FAST)  # no hosted judge offline: says what to pass instead

    def advisory(row):
        return {"reward": 0.25, "reason": "advisory"}

    both = tk.simulate(grade=True, llm_grade=advisory, budget=8, **FAST)
    assert [r["reward"] for r in both.rows] == [r["reward"] for r in graded.rows]  # llm_grade never overwrites reward
    assert all(r["llm_reward"] == 0.25 for r in both.rows) and both.report()["llm_grade"] is True
    assert all(r["llm_judge_status"] == "ok" for r in both.rows) and not any(w.startswith("llm_grade:") for w in both.warnings)

    def broken(row):
        raise RuntimeError("judge server down")

    # a judge that fails is heard: a status and a reason on every row, and a run warning with the count
    failed = tk.simulate(llm_grade=broken, budget=8, **FAST)
    assert all(r["llm_judge_status"] == "error" and r["llm_reward"] is None and "judge server down" in r["llm_reason"] for r in failed.rows)
    assert any(w.startswith(f"llm_grade: {len(failed.rows)} of {len(failed.rows)} rows have no verdict") for w in failed.warnings)


def test_execute_answers_every_call_without_the_fault_schedule_and_sees_the_rollout():
    calls = []

    def execute(tool, arguments):
        context = tk.current_rollout()
        calls.append((tool, context.prompt if context else None, context.rollout_index if context else None))
        return {"status": "ok", "note": "answered by my world"}

    data = tk.simulate(execute=execute, fault_rate=1.0, budget=20, **FAST)
    assert calls and all(prompt is not None for _, prompt, _ in calls)
    prompts = {r["prompt"] for r in data.rows}
    assert {prompt for _, prompt, _ in calls} <= prompts  # the context names the rollout being answered
    assert not any(r.get("faults") for r in data.rows)  # the fault schedule does not apply
    # a human tool (kind="human": ask_passenger) is answered by the simulated person, every
    # other tool call goes to execute and nothing else does
    human = {t.name for t in tk.world.normalize_tools(tk.dataset_path("tools/airline_support.json")) if t.kind == "human"}
    world_steps = [s for r in data.rows for s in r["steps"] if "tool" in s and s["tool"] not in human]
    assert len(world_steps) == len(calls)
    assert all(s["result"].get("note") == "answered by my world" for s in world_steps)


def test_tasks_from_a_path_and_runs_stamp_eval_run(tmp_path):
    path = tmp_path / "base.jsonl"
    base = tk.simulate(mode="sft", budget=16, output=path, **FAST)
    replay = tk.simulate(tasks=path, **FAST)  # the JSONL path works like the SimulationData
    assert replay.stopped_because == "tasks_done" and len(replay) == 16
    assert sorted(r["prompt"] for r in replay.rows) == sorted(r["prompt"] for r in base.rows)
    assert {r["scenario_id"] for r in replay.rows} == {r["scenario_id"] for r in base.rows}
    assert all(r["lineage"]["replayed"] and r["writer_model"] == "template" for r in replay.rows)
    assert replay.report()["rollouts_per_request"] == 4  # the pinned run's k, inherited
    assert len(tk.simulate(tasks=base.rows, repeats=1, **FAST)) == 4  # repeats= overrides it
    three = tk.simulate(budget=6, runs=3, **FAST)
    by_run = {}
    for row in three.rows:
        by_run.setdefault(row["lineage"]["eval_run"], []).append(row)
    assert sorted(by_run) == [0, 1, 2] and all(len(v) == 6 for v in by_run.values())
    assert all(r["lineage"]["replayed_from_run"] == 0 for run in (1, 2) for r in by_run[run])
    assert {r["prompt"] for r in by_run[2]} == {r["prompt"] for r in by_run[0]}
    assert three.report()["budget_per_run"] == 6 and three.report()["runs"] == 3


def test_report_knobs_record_every_resolved_value():
    advanced = {"collect_wait_s": 0.2, "pass_threshold": 0.7, "world": {"exists_share": 0.5}, "stop_grace": 2}
    data = tk.simulate(budget=4, seed=7, patience="short", advanced=advanced, **FAST)
    knobs = data.report()["knobs"]
    assert set(knobs) == set(tk.RunKnobs.names())
    expected = tk.RunKnobs.from_advanced({**advanced, "seed": 7, "patience": "short"}).to_dict()
    assert knobs == expected
    assert knobs["seed"] == 7 and knobs["patience"] == "short" and knobs["collect_wait_s"] == 0.2
    assert set(data.report()["knobs_changed"]) == {"collect_wait_s", "pass_threshold", "world", "stop_grace", "seed", "patience"}
    json.dumps(data.report())  # the record is JSON-safe


def test_keyboard_interrupt_keeps_rows_and_writes_the_sidecar(tmp_path):
    path = tmp_path / "run.jsonl"
    landed = []

    def on_row(row):
        landed.append(row)
        if len(landed) == 5:
            raise KeyboardInterrupt  # what Ctrl-C in a notebook does between two rows

    data = tk.simulate(budget=200, output=path, on_row=on_row, progress=False, concurrency=4)
    assert data.stopped_because == "interrupted"
    assert 5 <= len(data) < 200
    on_disk = tk.read_rows(path)
    assert [r["rollout_id"] for r in on_disk] == [r["rollout_id"] for r in data.rows]
    loaded = tk.load(path)
    assert loaded.stopped_because == "interrupted" and len(loaded) == len(data)


def test_rows_are_a_list_and_callable_and_load_round_trips(tmp_path):
    data = tk.simulate(budget=10, grade=True, seed=4, **FAST)
    assert isinstance(data.rows, list) and data.rows() is data.rows and list(data) == data.rows
    path = data.save(tmp_path / "saved.jsonl")
    loaded = tk.load(path)
    assert loaded.rows == data.rows and loaded.report() == data.report()
    assert loaded.stopped_because == data.stopped_because and loaded.metadata == data.metadata
    assert loaded.system_prompts == data.system_prompts and loaded.search == data.search
    assert loaded.warnings == data.warnings and loaded.degraded == data.degraded
    assert loaded.pass_at.pass_at_1 == data.pass_at.pass_at_1
    with pytest.raises(tk.ConfigError, match="does not exist"):
        tk.load(tmp_path / "missing.jsonl")


def test_lost_rollouts_are_rerolled_then_counted_by_reason():
    def agent(message):
        text = message.lower()
        if "booking" in text:
            return {"steps": [], "final_text": ""}  # empty reply, on every try
        if "flight" in text:
            return {"steps": [], "final_text": '<tool_call>{"name": "search_flights"}</tool_call>'}  # raw markup
        return {"steps": [], "final_text": "Noted, I will look into it."}

    data = tk.simulate(agent, tools=str(tk.dataset_path("tools/airline_support.json")), budget=40, **FAST)
    report = data.report()
    assert set(report["rollouts_lost_by"]) == {"empty_reply", "tool_markup"}
    assert report["rollouts_lost"] == sum(report["rollouts_lost_by"].values()) > 0
    assert report["rollouts_rerolled"] >= report["rollouts_lost"]  # k = 1: one re-roll before a loss counts
    assert all(r["final_text"] and "<tool_call>" not in r["final_text"] for r in data.rows)
    assert "rollouts_lost" in data.degraded and any("not missing at random" in w for w in data.warnings)


def test_pass_threshold_and_mutate_graded_failures_steer_as_documented():
    def grader(row):
        return 0.6

    strict = tk.simulate(budget=30, grader=grader, advanced={"pass_threshold": 0.7}, **FAST)
    assert strict.search["mutation_aims"].get("graded_failure") == 30  # 0.6 < 0.7: every row failed
    lenient = tk.simulate(budget=30, grader=grader, **FAST)  # default threshold 0.5: none failed
    assert "graded_failure" not in lenient.search["mutation_aims"]
    beside = tk.simulate(budget=30, grader=lambda row: 0.0, advanced={"mutate_graded_failures": False}, **FAST)
    assert "graded_failure" not in beside.search["mutation_aims"]
    assert beside.search["failure_criteria"]["graded_failures_steer"] is False
    assert all(r["reward"] == 0.0 for r in beside.rows)  # still graded beside the loop


def test_stop_grace_abandons_rollouts_still_running():
    stop = threading.Event()
    started = []

    def agent(message):
        started.append(message)
        if len(started) > 1:
            time.sleep(3.0)  # still running when the stop comes
        return {"steps": [], "final_text": "noted: " + message[:30]}

    began = time.perf_counter()
    data = tk.simulate(agent, tools=str(tk.dataset_path("tools/airline_support.json")), budget=50, stop=stop,
                       on_row=lambda row: stop.set(), concurrency=4, progress=False, advanced={"stop_grace": 0.3})
    assert data.stopped_because == "stopped" and len(data) == 1
    assert time.perf_counter() - began < 2.5  # waited stop_grace, not the sleeping rollouts
    assert data.report()["rollouts_abandoned"] >= 1 and "rollouts_abandoned" in data.degraded
    assert any("stop_grace" in w for w in data.warnings)


def test_grade_after_and_to_pandas():
    data = tk.simulate(budget=8, **FAST)
    assert data.pass_at.pass_at_1 is None and "no row has a usable reward" in str(data.pass_at)  # nothing graded yet, and it says so
    graded = data.grade(judge=lambda row: {"reward": 1.0 if row.get("privileged") else 0.0})
    assert [r["reward"] for r in graded.rows] == [1.0] * 8  # the judge saw the privileged block
    assert not any("privileged" in r for r in graded.rows) and all("privileged" in r for r in graded.trajectories)
    assert graded.pass_at.pass_at_1 == 1.0 and data.pass_at.pass_at_1 is None  # a graded copy; the run is unchanged
    frame = data.to_pandas()
    assert len(frame) == 8 and list(frame["prompt"]) == [r["prompt"] for r in data.rows]


def test_execute_with_a_named_fault_rate_says_it_has_no_effect():
    def execute(tool, arguments):
        return {"status": "ok"}

    data = tk.simulate(execute=execute, fault_rate=1.0, budget=20, **FAST)
    fault_warnings = [w for w in data.warnings if "fault_rate" in w]
    assert len(fault_warnings) == 1 and "no effect with execute=" in fault_warnings[0]
    assert not any("raise fault_rate" in w for w in data.warnings)
    assert not any("fault_rate" in w for w in tk.simulate(execute=execute, budget=20, **FAST).warnings)  # not named: silent


def test_summary_reads_like_a_sentence():
    def empty_for_bookings(message):
        return {"steps": [], "final_text": "" if "booking" in message.lower() else "ok, done"}

    data = tk.simulate(empty_for_bookings, tools=str(tk.dataset_path("tools/airline_support.json")), budget=30, **FAST)
    report = data.report()
    assert report["rollouts_lost_by"]  # the agent loses every booking ask
    line = next(x for x in data.summary().splitlines() if x.startswith("lost rollouts"))
    lost_by = ", ".join(f"{reason} {count}" for reason, count in sorted(report["rollouts_lost_by"].items()))
    assert line.startswith(f"lost rollouts {report['rollouts_lost']} ({lost_by}), re-rolled {report['rollouts_rerolled']}, fault share ")
    clean = tk.simulate(budget=30, **FAST)
    share = clean.report()["delivered"]["fault_share"]
    line = next(x for x in clean.summary().splitlines() if x.startswith("lost rollouts"))
    assert line == f"lost rollouts 0, re-rolled 0, fault share {round(share * 100)}% (fault_rate 0.5)"


def test_load_restores_the_knobs(tmp_path):
    data = tk.simulate(budget=6, patience=(0.1, 0.2), advanced={"world": {"exists_share": 0.5}, "stop_grace": 2}, **FAST)
    loaded = tk.load(data.save(tmp_path / "run.jsonl"))
    assert isinstance(loaded.knobs, tk.RunKnobs) and loaded.knobs == data.knobs
    assert loaded.knobs.to_dict() == data.report()["knobs"]


def test_a_second_interrupt_during_the_stop_grace_still_returns_the_rows():
    landed = []

    def on_row(row):
        landed.append(row)
        if len(landed) >= 5:
            raise KeyboardInterrupt  # Ctrl-C, then Ctrl-C again while the run drains

    def slow(message):
        time.sleep(0.02)
        return {"steps": [], "final_text": "noted: " + message[:30]}

    data = tk.simulate(slow, tools=str(tk.dataset_path("tools/airline_support.json")), budget=200, on_row=on_row, progress=False, concurrency=4)
    assert data.stopped_because == "interrupted" and len(data) == len(landed) >= 5


def test_until_saturation_stops_when_the_grid_is_covered_or_coverage_plateaus():
    # one tool keeps the grid small (the airline set needs ~350 explore rows, ~1,350 sft rows)
    tools = [{"type": "function", "function": {"name": "get_booking", "description": "Look up a booking by its id",
              "parameters": {"type": "object", "properties": {"booking_id": {"type": "string"}}, "required": ["booking_id"]}}}]
    explore = tk.simulate(tools=tools, until="saturation", budget=3000, **FAST)
    report = explore.report()
    assert explore.stopped_because == "saturation" and len(explore) < 3000
    assert report["min_cell_copies"] >= 1 and report["pairwise"]["fraction"] == 1.0  # unique cells: one row each is full
    # the plateau rule alone (the copy and fresh-share rules made unreachable)
    advanced = {"per_round": 8, "saturation_flat_batches": 3, "copies_needed": 100_000, "saturation_fresh_share": 0.0}
    plateau = tk.simulate(tools=tools, mode="sft", until="saturation", budget=3000, advanced=advanced, **FAST)
    assert plateau.stopped_because == "saturation" and len(plateau) < 3000
    covered = [entry["pairs_covered"] for entry in plateau.search["arm_history"]]
    assert len(set(covered[-4:])) == 1  # three batches in a row added no planned pair
    assert tk.simulate(tools=tools, mode="sft", budget=200, advanced=advanced, **FAST).stopped_because == "budget"  # until="compute" ignores it


def test_time_budget_closes_on_time():
    def agent(message):
        time.sleep(0.05)
        return {"steps": [], "final_text": "noted: " + message[:30]}

    began = time.perf_counter()
    data = tk.simulate(agent, tools=str(tk.dataset_path("tools/airline_support.json")), budget=100_000, time_budget=1.0,
                       concurrency=4, progress=False)
    elapsed = time.perf_counter() - began
    assert data.stopped_because == "time_budget" and 0 < len(data) < 100_000
    # the closing margin stops opening rollouts that could not finish: no stop_grace wait (5 s)
    assert elapsed < 1.0 + 1.5, elapsed
    assert data.report()["time_budget"] == 1.0 and tk.simulate(time_budget=0, budget=2, **FAST).report()["time_budget"] is None


def test_avg_turns_delivery_warning_only_when_named_and_a_person_was_simulated():
    def named(data):
        return [w for w in data.warnings if w.startswith("avg_turns=")]

    assert not named(tk.simulate(budget=30, **FAST))  # the default is never warned about
    # the seeded agent's threads run ~12 turns at most (the turn cap is 13 on six tools), so 40 is far off
    far = tk.simulate(budget=30, avg_turns=40, **FAST)
    mean_user_turns = far.report()["delivered"]["mean_user_turns"]
    assert 2 * mean_user_turns < 20 and len(named(far)) == 1 and f"{2 * mean_user_turns:.1f} turns" in named(far)[0]
    assert len(named(tk.simulate(budget=30, advanced={"avg_turns": 40}, **FAST))) == 1  # named through advanced too

    def single_turn(message):
        return {"steps": [], "final_text": "noted: " + message[:30]}

    assert not named(tk.simulate(single_turn, tools=str(tk.dataset_path("tools/airline_support.json")), budget=30, avg_turns=40, **FAST))


def test_traces_pull_the_grid_toward_the_failing_region():
    failing = [{"schema_version": "1", "prompt": f"cancel booking KQN4{i}8 now", "steps": [], "final_text": "x", "reward": 0.0,
                "scenario_dimensions": {"tool": "cancel_booking", "tool_condition": "timeout"}} for i in range(3)]  # fmt: skip

    def shares(data):
        structured = [r["scenario_dimensions"] for r in data.rows if r["arm"] == "structured"]
        return (sum(d["tool"] == "cancel_booking" for d in structured) / len(structured),
                sum(d.get("tool_condition") == "timeout" for d in structured) / len(structured))  # fmt: skip

    aimed, plain = shares(tk.simulate(traces=failing, budget=80, **FAST)), shares(tk.simulate(budget=80, **FAST))
    assert aimed[0] > plain[0] and aimed[1] > plain[1]  # both the hot tool and its hot condition gain grid weight


def test_tools_keyed_by_name_run_like_the_same_tools_in_a_list():
    # {"get_booking": schema} was refused as "unknown key 'get_booking'"; the key is the name
    schema = {"type": "object", "properties": {"booking_id": {"type": "string"}}, "required": ["booking_id"]}
    listed = tk.simulate(tools=[{"name": "get_booking", "description": "Look up a booking", "parameters": schema}], budget=6, **FAST)
    keyed = tk.simulate(tools={"get_booking": {"description": "Look up a booking", "parameters": schema}}, budget=6, **FAST)
    assert _strip(keyed.rows) == _strip(listed.rows) and keyed.report()["tools"]["get_booking"]["calls"] > 0


def test_simulator_model_agent_with_output_writes_rows(tmp_path):
    # Issue 21 row 6: simulate(simulator=tk.model_agent(spec), output=...) as documented.
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from _chat_server import ChatServer

    with ChatServer() as server:
        spec = f"vllm:writer@{server.url}"
        out = tmp_path / "rows.jsonl"
        data = tk.simulate(simulator=tk.model_agent(spec), output=out, budget=4, progress=False, reproducible=True)
        rows = tk.read_rows(out)
        assert len(rows) == len(data.rows) == 4
        assert {row["writer_model"] for row in rows} == {spec}  # the spec as text, as simulator=spec gives
        by_string = tk.simulate(simulator=spec, budget=4, progress=False, reproducible=True)
        assert {row["writer_model"] for row in by_string.rows} == {spec}
