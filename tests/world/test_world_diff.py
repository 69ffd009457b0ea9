"""A world with consequences (issue 17): write verbs change the world's records, reads see
the changes, every change lands in ``world.diff`` / ``row["world_diff"]``; and the two attack
modes (``prompt_injection``, ``wrong_data``) with their privileged goals in the ledger.

References: the expected diffs are written out by hand from the world's rules
(toolkit/world/_world.py docstring, step 8: update verbs apply their arguments and move the
state a state verb names; delete removes; create issues an id)."""

import json

import pytest

import toolkit as tk
from toolkit._util.datasets import dataset_path

AIRLINE = json.loads(dataset_path("tools/airline_support.json").read_text())


def _tool(name, properties=None, required=()):
    return {"name": name, "parameters": {"type": "object", "properties": properties or {}, "required": list(required)}}


S = {"type": "string"}
TOOLS = [
    _tool("get_order", {"order_id": S}, ["order_id"]),
    _tool("cancel_order", {"order_id": S, "reason": S}, ["order_id"]),
    _tool("update_order", {"order_id": S, "note": S}, ["order_id"]),
    _tool("delete_order", {"order_id": S}, ["order_id"]),
    _tool("create_ticket", {"subject": S}, ["subject"]),
]


def _world(**kwargs):
    kwargs.setdefault("world_state", "exists")
    return tk.World(TOOLS, **kwargs)


def test_writes_change_the_world_and_reads_see_them():
    w = _world(seed=3)
    before = w.call("get_order", {"order_id": "A100"})["record"]
    w.call("cancel_order", {"order_id": "A100", "reason": "change of plan"})
    after = w.call("get_order", {"order_id": "A100"})["record"]
    assert after["state"] == "cancelled" and after["reason"] == "change of plan"
    assert before["state"] != "cancelled"
    assert w.record("A100")["state"] == "cancelled"
    assert w.diff == [
        {
            "record": "A100",
            "field": "state",
            "before": before["state"],
            "after": "cancelled",
            "call_index": 1,
            "tool": "cancel_order",
            "change": "updated",
        },
        {
            "record": "A100",
            "field": "reason",
            "before": None,
            "after": "change of plan",
            "call_index": 1,
            "tool": "cancel_order",
            "change": "updated",
        },
    ]


def test_create_and_delete_are_one_entry_each_and_reads_change_nothing():
    w = _world(seed=1)
    w.call("get_order", {"order_id": "B7"})
    assert w.diff == []
    created = w.call("create_ticket", {"subject": "lost bag"})
    w.call("delete_order", {"order_id": "B7"})
    kinds = [(c["record"], c["field"], c["change"]) for c in w.diff]
    assert kinds == [(created["id"], "*", "created"), ("B7", "*", "deleted")]
    assert w.diff[0]["after"]["subject"] == "lost bag" and w.diff[1]["after"] is None
    assert w.diff[1]["before"]["order_id"] == "B7"
    assert w.record("B7") is None
    assert w.call("get_order", {"order_id": "B7"})["status"] == "not_found"


def test_a_timed_out_call_changes_nothing_and_diff_is_deterministic_per_seed():
    faulted = _world(seed=2, fault_plan={"cancel_order": {"mode": "timeout"}})
    faulted.call("cancel_order", {"order_id": "C1"})
    assert faulted.diff == []

    def run(seed):
        w = _world(seed=seed)
        w.call("update_order", {"order_id": "C1", "note": "window seat"})
        w.call("cancel_order", {"order_id": "C1"})
        return w.diff

    assert run(5) == run(5)
    assert run(5) != run(6)  # the record the update starts from is the seed's


@pytest.mark.parametrize("mode", tk.FAULT_MODES)
def test_an_ordinary_fault_never_writes(mode):
    w = _world(seed=2, fault_plan={"cancel_order": {"mode": mode}})
    w.call("cancel_order", {"order_id": "C1", "reason": "r"})
    assert w.ledger[-1]["mode"] == mode and w.diff == [] and w.record("C1") is None


@pytest.mark.parametrize("mode", tk.ATTACK_MODES)
def test_an_attacked_call_goes_through_and_only_its_answer_is_altered(mode):
    # the same call unfaulted: the change the attacked one must also make
    plain = _world(seed=3)
    plain.call("get_order", {"order_id": "A100"})
    real = plain.call("cancel_order", {"order_id": "A100", "reason": "change of plan"})
    attacked = _world(seed=3, fault_plan={"cancel_order": {"mode": mode}})
    attacked.call("get_order", {"order_id": "A100"})
    seen = attacked.call("cancel_order", {"order_id": "A100", "reason": "change of plan"})
    assert attacked.ledger[-1]["attack"] is True
    assert [(c["field"], c["after"]) for c in attacked.diff] == [("state", "cancelled"), ("reason", "change of plan")]
    assert attacked.diff == plain.diff
    assert attacked.record("A100") == plain.record("A100")
    assert seen != real  # the agent is shown the attacked answer, the world keeps the real one
    # a later read sees the real change, not the attack
    assert attacked.call("get_order", {"order_id": "A100"})["record"]["state"] == "cancelled"


def test_an_attacked_create_and_delete_go_through():
    w = _world(seed=4, fault_plan={"*": {"mode": "prompt_injection"}})
    created = w.call("create_ticket", {"subject": "lost bag"})
    w.call("delete_order", {"order_id": "B7"})
    assert [(c["record"], c["change"]) for c in w.diff] == [(created["id"], "created"), ("B7", "deleted")]
    assert created["record"]["notes"]  # the answer carries the injection, the world does not
    assert "notes" not in w.diff[0]["after"]


def test_rows_carry_world_diff_and_execute_worlds_do_not():
    agent = tk.seeded_agent(AIRLINE, seed=0, behaviors=())
    world = tk.World(AIRLINE, seed=0, world_state="exists")
    row = tk.run_rollout(agent, "Please cancel booking ABC123, change of plans.", tools=AIRLINE, world=world, max_turns=4)
    assert row["world_diff"] == world.diff
    tk.validate_row(row)
    own = tk.run_rollout(agent, "Please cancel booking ABC123.", tools=AIRLINE, world=lambda tool, arguments: {"status": "ok"})
    assert "world_diff" not in own


def test_world_diff_schema_names_the_bad_field():
    row = {
        "schema_version": "1",
        "prompt": "p",
        "steps": [],
        "final_text": "",
        "world_diff": [{"record": "A", "field": "state", "before": 1, "after": 2, "call_index": "first"}],
    }
    with pytest.raises(tk.RowError, match=r"row.world_diff\[0\].call_index: expected an integer"):
        tk.validate_row(row)


def test_scrub_drops_changes_to_privileged_named_fields():
    row = {
        "schema_version": "1",
        "prompt": "p",
        "steps": [],
        "final_text": "",
        "world_diff": [
            {"record": "A", "field": "reference", "before": None, "after": "secret", "call_index": 0},
            {"record": "A", "field": "note", "before": None, "after": {"ok": 1, "privileged": "x"}, "call_index": 0},
        ],
    }
    clean = tk.rows.scrub(row)
    assert [c["field"] for c in clean["world_diff"]] == ["note"]
    assert clean["world_diff"][0]["after"] == {"ok": 1}


# ---------------------------------------------------------------------------------- attacks


def test_attack_modes_are_opt_in_and_selectable_per_axis():
    assert set(tk.ATTACK_MODES) == {"prompt_injection", "wrong_data"}
    assert not set(tk.ATTACK_MODES) & set(tk.FAULT_MODES)
    assert tk.WorldOptions().mode_names == tk.FAULT_MODES
    options = tk.WorldOptions(attacks=["wrong_data", "prompt_injection"])
    assert options.mode_names == tk.FAULT_MODES + ("prompt_injection", "wrong_data")
    axes = tk.situations.situation_axes(AIRLINE, fault_modes=options)
    assert {"prompt_injection", "wrong_data"} <= set(axes.axes["tool_condition"])
    plan = tk.situations.fault_plan_for("wrong_data", fault_rate=1.0)
    assert plan["*"]["mode"] == "wrong_data"
    with pytest.raises(tk.ConfigError, match="WorldOptions.attacks: unknown attack mode 'prompt_injektion'.*prompt_injection"):
        tk.WorldOptions(attacks=["prompt_injektion"])
    # a hand-written plan names an attack without opting the whole world in
    w = tk.World(AIRLINE, world_state="exists", fault_plan={"get_booking": "prompt_injection"})
    assert w.call("get_booking", {"booking_id": "ABC123"})["record"]["notes"]


def _attacked(mode, seed, tool="get_booking", arguments=None):
    w = tk.World(AIRLINE, seed=seed, world_state="exists", fault_plan={tool: {"mode": mode}})
    result = w.call(tool, arguments or {"booking_id": "ABC123"})
    return result, w.ledger[-1]


def test_prompt_injection_library_is_varied_seeded_and_its_goal_privileged():
    kinds, texts = set(), set()
    for seed in range(60):
        result, entry = _attacked("prompt_injection", seed)
        goal = entry["privileged"]["attack_goal"]
        assert entry["attack"] is True and entry["mode"] == "prompt_injection"
        assert result["status"] == "ok" and result["record"]["notes"] == goal["injection"]
        assert "_attack" not in result and "attack_goal" not in json.dumps(result)
        kinds.add(goal["kind"])
        texts.add(goal["injection"].split(" ")[0])
        if goal["kind"] == "destructive_call":
            assert goal["tool"] in ("cancel_booking", "refund_payment") and goal["arguments"] == {"booking_id": "ABC123"}
        else:
            assert goal["text"] in goal["injection"]
    assert kinds == {"destructive_call", "exfiltrate", "ignore_policy"}
    assert len(texts) == 3  # the three framings
    assert _attacked("prompt_injection", 4) == _attacked("prompt_injection", 4)
    # the goal is teacher-only: gone from a scrubbed row, hidden in repr
    row = {"schema_version": "1", "prompt": "p", "steps": [], "final_text": "", "faults": [entry]}
    assert "privileged" not in tk.rows.scrub(row)["faults"][0]
    assert goal["injection"] not in repr(entry)


def test_wrong_data_is_plausible_and_records_true_and_false_values():
    seen = set()
    for seed in range(40):
        clean = tk.World(AIRLINE, seed=seed, world_state="exists").call("get_booking", {"booking_id": "ABC123"})["record"]
        result, entry = _attacked("wrong_data", seed)
        goal = entry["privileged"]["attack_goal"]
        record = result["record"]
        assert result["status"] == "ok" and "stale" not in result
        assert record[goal["field"]] == goal["false"] != goal["true"] == clean[goal["field"]]
        assert {k for k in record if record[k] != clean[k]} == {goal["field"]}
        seen.add(goal["kind"])
    assert seen == {"swapped_id"}  # first sight of a record: the id it names is what can be checked
    # a record already shown can be contradicted in its findings too
    kinds = set()
    for seed in range(60):
        w = tk.World(AIRLINE, seed=seed, world_state="exists", fault_plan={"get_booking": {"mode": "wrong_data", "on_call": 1}})
        w.call("get_booking", {"booking_id": "ABC123"})
        w.call("get_booking", {"booking_id": "ABC123"})
        kinds.add(w.ledger[-1]["privileged"]["attack_goal"]["kind"])
    assert kinds == {"swapped_id", "wrong_date", "wrong_state"}  # airline bookings carry no amount
    # a refusal has nothing to falsify: a ledger fault, not an attack
    w = tk.World(AIRLINE, seed=0, world_state="missing", fault_plan={"get_booking": "wrong_data"})
    assert w.call("get_booking", {"booking_id": "ABC123"})["status"] == "not_found"
    assert w.ledger[-1]["attack"] is False and "privileged" not in w.ledger[-1]
