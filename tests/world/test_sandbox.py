"""The sandbox world: call order, world rules (docs/design/engine.md §4.1, docs/design/engine.md §4.2, docs/design/engine.md §10 item 33),
fault modes, ledger, determinism, WorldOptions, execute= and current_rollout()."""

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import binomtest

import toolkit as tk


def _tool(name, properties=None, required=(), description="", kind=None):
    tool = {"name": name, "description": description,
            "parameters": {"type": "object", "properties": properties or {}, "required": list(required)}}
    if kind:
        tool["kind"] = kind
    return tool


S = {"type": "string"}
TOOLS = [
    _tool("get_order", {"order_id": S}, ["order_id"]),
    _tool("search_products", {"query": S}, ["query"]),
    _tool("create_ticket", {"subject": S, "email": S, "customer": {"type": "object", "properties": {"name": S, "phone": S}, "required": ["name"]}}, ["subject"]),
    _tool("delete_order", {"order_id": S}, ["order_id"]),
    _tool("update_order", {"order_id": S, "note": S, "status": S}, ["order_id"]),
    _tool("cancel_order", {"order_id": S}, ["order_id"]),
    _tool("calculate", {"expression": S}, ["expression"]),
    _tool("ask_customer", {"question": S}, ["question"], kind="human"),
    _tool("set_contact", {"channel": {"type": "string", "enum": ["email", "phone"]}}, ["channel"]),
]


def world(**kwargs):
    kwargs.setdefault("world_state", "exists")
    return tk.World(TOOLS, **kwargs)


# -- docs/design/engine.md §10 item 33 and the call order -------------------------------------------------------

def test_unknown_tool_is_error_with_suggestion():
    result = world().call("get_ordr", {"order_id": "A1"})
    assert result["status"] == "error" and result["reason"] == "unknown_tool"
    assert result["suggestions"][0] == "get_order"


def test_unknown_tool_comes_before_a_scheduled_fault():
    w = world(fault_plan={"*": {"mode": "timeout"}})
    assert w.call("nope", {})["reason"] == "unknown_tool"
    assert w.ledger == []


def test_placeholder_email_refused_naming_the_field():
    result = world().call("create_ticket", {"subject": "late parcel", "email": "user@example.com"})
    assert result["status"] == "rejected" and result["reason"] == "placeholder_argument"
    assert result["fields"] == ["email"]
    assert "ask the person" in result["hint"]


@pytest.mark.parametrize("value", ["<order id>", "[customer email]", "{email}", "your email", "xxx", "string", "order id", "ORDER_ID", "someone@test.org"])
def test_placeholder_values(value):
    result = world().call("update_order", {"order_id": "A1", "note": value}) if "order" not in value.lower() \
        else world().call("get_order", {"order_id": value})
    assert result["reason"] == "placeholder_argument"


def test_real_values_and_enum_words_are_not_placeholders():
    assert world().call("set_contact", {"channel": "email"})["status"] == "ok"
    assert world().call("create_ticket", {"subject": "late parcel", "email": "ana@northwind.io"})["status"] == "created"


def test_placeholder_inside_nested_object_names_the_path():
    result = world().call("create_ticket", {"subject": "s", "customer": {"name": "Ana", "phone": "<phone number>"}})
    assert result["fields"] == ["customer.phone"]


def test_missing_required_recurses_into_objects():
    result = world().call("create_ticket", {"subject": "s", "customer": {"phone": "555"}})
    assert (result["status"], result["reason"]) == ("rejected", "missing_required")
    assert result["fields"] == ["customer.name"]
    assert world().call("get_order", {})["fields"] == ["order_id"]
    assert world().call("get_order", {"order_id": "  "})["fields"] == ["order_id"]


def test_missing_required_comes_before_placeholder():
    result = world().call("create_ticket", {"email": "user@example.com"})
    assert result["reason"] == "missing_required"


def test_world_state_missing_is_not_found_for_any_call():
    w = world(world_state="entity missing")
    assert w.world_state == "missing"
    for tool, arguments in [("get_order", {"order_id": "A1"}), ("update_order", {"order_id": "A1"}),
                            ("search_products", {"query": "lamp"}), ("create_ticket", {"subject": "x"}),
                            ("get_order", {})]:
        assert w.call(tool, arguments)["status"] == "not_found"
    assert w.call("get_order", {"order_id": "A1"})["missing"] == ["A1"]


def test_already_done_blocks_writes_not_reads():
    w = world(world_state="already_done")
    assert w.call("update_order", {"order_id": "A1", "note": "x"}) == {
        "status": "already_done", "reason": "already_acted_on", "tool": "update_order"}
    assert w.call("cancel_order", {"order_id": "A1"})["status"] == "already_done"
    assert w.call("get_order", {"order_id": "A1"})["status"] == "ok"
    assert w.call("search_products", {"query": "lamp"})["status"] == "ok"
    # already_done comes before validation: even an incomplete write is "already done"
    assert w.call("update_order", {})["status"] == "already_done"


def test_scheduled_fault_fires_before_validation():
    w = world(fault_plan={"*": {"mode": "timeout"}})
    assert w.call("get_order", {})["status"] == "timeout"


def test_plan_star_timeout_times_out_every_call():
    w = world(fault_plan={"*": {"mode": "timeout"}})
    statuses = {w.call(t, a)["status"] for t, a in [("get_order", {"order_id": "A1"}), ("create_ticket", {"subject": "x"}),
                                                  ("search_products", {"query": "q"}), ("calculate", {"expression": "1+1"})]}
    assert statuses == {"timeout"}
    assert [entry["call_index"] for entry in w.ledger] == [0, 1, 2, 3]


def test_calculator_does_real_arithmetic_safely():
    w = world()
    assert w.call("calculate", {"expression": "2 ** 10 + 7 // 2 - -3 % 2"})["result"] == 2 ** 10 + 7 // 2 - -3 % 2
    assert w.call("calculate", {"expression": "1/4"})["result"] == 0.25
    for bad in ["__import__('os').system('true')", "1/0", "9**9**9", "abs(-1)", "x + 1"]:
        result = w.call("calculate", {"expression": bad})
        assert (result["status"], result["reason"]) == ("rejected", "invalid_expression")
    assert len(w.call("calculate", {"expression": "1+" * 200 + "1"})["expression"]) == 200


def test_calculator_comes_before_world_state_missing():
    assert world(world_state="missing").call("calculate", {"expression": "6*7"})["result"] == 42


def test_human_tool_is_not_answered_by_the_world():
    result = world(fault_plan={"*": "timeout"}).call("ask_customer", {"question": "which order?"})
    assert result == {"status": "error", "reason": "human_tool", "tool": "ask_customer"}


def test_bad_arguments_json():
    w = world()
    assert w.call("get_order", '{"order_id": "A1"}')["status"] == "ok"
    assert w.call("get_order", "{not json")["reason"] == "invalid_arguments"
    assert w.call("get_order", [1, 2])["reason"] == "invalid_arguments"


# -- verbs and memory -----------------------------------------------------------------------

def test_create_then_read_update_delete():
    w = tk.World(TOOLS, seed=3, world_state="unknown")
    created = w.call("create_ticket", {"subject": "broken lamp"})
    assert created["status"] == "created" and created["record"]["subject"] == "broken lamp"
    new_id = created["id"]
    assert new_id.startswith("ticket_")
    # a world-issued id that was never created does not exist
    assert w.call("get_order", {"order_id": "order_0123456789ab"})["status"] == "not_found"
    # created ids exist; deleted ones stay deleted
    assert w.call("get_order", {"order_id": new_id})["status"] == "ok"
    assert w.call("delete_order", {"order_id": new_id}) == {"status": "deleted", "deleted": [new_id]}
    assert w.call("get_order", {"order_id": new_id}) == {"status": "not_found", "missing": [new_id]}
    assert w.call("update_order", {"order_id": new_id})["status"] == "not_found"


def test_update_is_remembered_and_bumps_version():
    w = world()
    before = w.call("get_order", {"order_id": "A1"})["record"]
    updated = w.call("update_order", {"order_id": "A1", "note": "gift wrap"})["record"]
    assert updated["version"] == before["version"] + 1 and updated["note"] == "gift wrap"
    assert w.call("get_order", {"order_id": "A1"})["record"] == updated
    assert w.call("cancel_order", {"order_id": "A1"})["record"]["state"] == "cancelled"


def test_finding_arguments_do_not_override_facts():
    w = world()
    truth = w.call("get_order", {"order_id": "A1"})["record"]["state"]
    other = tk.World(TOOLS, world_state="exists")
    claimed = other.call("get_order", {"order_id": "A1", "state": "refunded", "status": "refunded"})
    assert claimed["record"]["state"] == truth


def test_same_record_for_same_seed_and_id_across_worlds_and_tools():
    first = tk.World(TOOLS, seed=11, world_state="exists").call("get_order", {"order_id": "Q77"})["record"]
    second = tk.World(TOOLS, seed=11, world_state="exists").call("get_order", {"order_id": "Q77"})["record"]
    assert first == second
    via_update = tk.World(TOOLS, seed=11, world_state="exists").call("update_order", {"order_id": "Q77"})["record"]
    assert via_update["record_id"] == first["record_id"] and via_update["name"] == first["name"]
    other_seed = tk.World(TOOLS, seed=12, world_state="exists").call("get_order", {"order_id": "Q77"})["record"]
    assert other_seed != first


def test_search_hits_exist_later_and_are_bounded():
    w = tk.World(TOOLS, seed=0, options={"search_hits": (2, 4)}, world_state="unknown")
    counts = set()
    for query in range(40):
        result = w.call("search_products", {"query": f"item {query}"})
        counts.add(result["count"])
        assert len(result["results"]) == result["count"]
    assert counts <= {2, 3, 4} and len(counts) == 3
    listed = result["results"][0]["id"]
    assert w.call("get_order", {"order_id": listed})["status"] == "ok"


def test_results_are_copies():
    w = world()
    result = w.call("get_order", {"order_id": "A1"})
    result["record"]["state"] = "tampered"
    assert w.call("get_order", {"order_id": "A1"})["record"]["state"] != "tampered"


def test_tool_verbs():
    assert [tk.world.tool_verb(name) for name in ["get_order", "search_products", "create_ticket", "delete_order",
                                             "cancel_order", "bookFlight", "refund_payment", "list_items"]] == [
        "read", "search", "create", "delete", "update", "create", "update", "search"]


# -- existence share ---------------------------------------------------------------------------

@pytest.mark.parametrize("share", [0.7, 0.35])
def test_unknown_ids_exist_at_exists_share(share):
    w = tk.World(TOOLS, seed=5, options=tk.WorldOptions(exists_share=share))
    n = 1500
    found = sum(w.call("get_order", {"order_id": f"ZX{index:05d}"})["status"] == "ok" for index in range(n))
    interval = binomtest(found, n, share).proportion_ci(0.999)
    assert interval.low <= share <= interval.high, (found / n, share)


def test_existence_is_per_value_not_per_tool():
    w = tk.World(TOOLS, seed=2)
    for index in range(30):
        value = f"K{index}"
        assert (w.call("get_order", {"order_id": value})["status"] == "ok") == \
               (tk.World(TOOLS, seed=2).call("update_order", {"order_id": value})["status"] == "ok")


# -- the other world states ---------------------------------------------------------------------

def test_duplicate_world_state():
    w = world(world_state="duplicate entity")
    read = w.call("get_order", {"order_id": "A1"})
    assert read["status"] == "ok" and read["count"] == 2 and len(read["results"]) == 2
    write = w.call("update_order", {"order_id": "A1"})
    assert (write["status"], write["reason"]) == ("rejected", "ambiguous_reference") and len(write["candidates"]) == 2


def test_partial_world_state():
    record = world(world_state="partial").call("get_order", {"order_id": "A1"})["record"]
    assert record["state"] == "partially_completed"
    assert 1 <= record["completed_steps"] < record["total_steps"]


def test_exists_world_state_and_unknown_alias():
    w = world(world_state="exists")
    assert all(w.call("get_order", {"order_id": f"N{i}"})["status"] == "ok" for i in range(50))
    assert tk.World(TOOLS, world_state="unspecified").world_state == "unknown"
    assert tk.World(TOOLS).world_state == "unknown"
    with pytest.raises(tk.ConfigError, match="did you mean 'missing'"):
        tk.World(TOOLS, world_state="mising")


# -- fault modes ----------------------------------------------------------------------------------

def test_each_fault_mode_has_its_own_payload():
    payloads = {}
    for mode in tk.FAULT_MODES:
        w = world(fault_plan={"get_order": {"mode": mode}})
        payloads[mode] = w.call("get_order", {"order_id": "A1"})
        assert w.ledger[0]["mode"] == mode
    honest = world().call("get_order", {"order_id": "A1"})
    assert payloads["timeout"]["status"] == "timeout" and "timed out" in payloads["timeout"]["error"]
    assert payloads["permission_denied"]["status"] == "permission_denied"
    assert payloads["rate_limited"]["status"] == "rate_limited" and payloads["rate_limited"]["retry_after_seconds"] == 20
    assert payloads["server_error"]["code"] == 500 and payloads["server_error"]["request_id"].startswith("req_")
    # malformed: status ok, a truncated JSON body that does not parse
    assert payloads["malformed"]["status"] == "ok"
    with pytest.raises(json.JSONDecodeError):
        json.loads(payloads["malformed"]["data"])
    # stale: the real answer, marked old
    stale = dict(payloads["stale"])
    assert stale.pop("stale") is True and stale.pop("as_of") == "3 days ago"
    assert stale == honest
    assert len({json.dumps(p, sort_keys=True) for p in payloads.values()}) == len(tk.FAULT_MODES)


def test_fault_peek_has_no_side_effects():
    w = tk.World(TOOLS, fault_plan={"create_ticket": {"mode": "stale"}})
    stale = w.call("create_ticket", {"subject": "x"})
    assert stale["stale"] is True
    assert w.call("get_order", {"order_id": stale["id"]})["status"] == "not_found"


def test_plan_for_one_tool_leaves_others_alone():
    w = world(fault_plan={"get_order": "rate_limited"})
    assert w.call("update_order", {"order_id": "A1"})["status"] == "ok"
    assert w.call("get_order", {"order_id": "A1"})["status"] == "rate_limited"
    assert [e["tool"] for e in w.ledger] == ["get_order"]
    assert w.ledger[0]["call_index"] == 1 and w.ledger[0]["plan_key"] == "get_order"


def test_ledger_entries():
    from toolkit._util.hashing import stable_hash

    arguments = {"order_id": "A1"}
    w = world(fault_plan={"*": {"mode": "permission_denied"}})
    w.call("get_order", arguments)
    assert w.ledger == [{"tool": "get_order", "mode": "permission_denied", "call_index": 0, "injected": True,
                         "arguments_sha": stable_hash(arguments), "plan_key": "*"}]
    w.ledger.append("x")  # a copy: the world's own ledger is untouched
    assert len(w.ledger) == 1


def test_on_call_breaks_only_the_named_call():
    w = world(fault_plan={"get_order": {"mode": "server_error", "on_call": 1}})
    statuses = [w.call("get_order", {"order_id": "A1"})["status"] for _ in range(4)]
    assert statuses == ["ok", "error", "ok", "ok"]
    assert [e["call_index"] for e in w.ledger] == [1]


def test_plan_rate_is_honoured_and_retries_draw_afresh():
    rate = 0.3
    w = world(fault_plan={"*": {"mode": "timeout", "rate": rate}})
    n = 1200
    fired = sum(w.call("get_order", {"order_id": f"A{index}"})["status"] == "timeout" for index in range(n))
    interval = binomtest(fired, n, rate).proportion_ci(0.999)
    assert interval.low <= rate <= interval.high
    assert len(w.ledger) == fired
    # retrying the very same call is a fresh draw: over 60 attempts both outcomes occur
    again = {w.call("get_order", {"order_id": "SAME"})["status"] for _ in range(60)}
    assert again == {"ok", "timeout"}


def test_fault_schedule_is_deterministic_per_seed():
    def run(seed):
        w = tk.World(TOOLS, seed=seed, fault_plan={"*": {"mode": "timeout", "rate": 0.5}})
        return [w.call("get_order", {"order_id": f"A{i}"}) for i in range(40)], w.ledger
    assert run(1) == run(1)
    assert run(1) != run(2)


def test_default_fault_mode_and_rate_from_options():
    w = world(options={"default_fault_mode": "server_error", "default_fault_rate": 0.0}, fault_plan={"*": {}})
    assert w.fault_plan == {"*": {"mode": "server_error", "rate": 0.0}}
    assert w.call("get_order", {"order_id": "A1"})["status"] == "ok"


def test_user_fault_mode_through_options():
    seen = []

    def maintenance(call):
        seen.append(call)
        return {"status": "unavailable", "error": "down for maintenance", "tool": call.tool}

    options = tk.WorldOptions(fault_modes={"maintenance": maintenance})
    assert options.mode_names[-1] == "maintenance"
    w = world(options=options, fault_plan={"*": "maintenance"})
    assert w.call("get_order", {"order_id": "A1"})["status"] == "unavailable"
    assert w.ledger[0]["mode"] == "maintenance"
    assert seen[0].payload["status"] == "ok" and seen[0].call_index == 0
    assert options.to_dict()["fault_modes"]["maintenance"].endswith("maintenance")
    # another world without the option does not know the mode: no global registry
    with pytest.raises(tk.ConfigError, match="maintenance"):
        world(fault_plan={"*": "maintenance"})


def test_broken_builders_raise_config_errors():
    for builder in (lambda call: "not a dict", lambda call: 1 / 0):
        w = world(options={"fault_modes": {"broken": builder}}, fault_plan={"*": "broken"})
        with pytest.raises(tk.ConfigError, match="broken"):
            w.call("get_order", {"order_id": "A1"})


@pytest.mark.parametrize("plan, fragment", [
    ({"get_ordr": "timeout"}, "did you mean 'get_order'"),
    ({"*": {"mode": "timout"}}, "did you mean 'timeout'"),
    ({"*": {"mode": "timeout", "rte": 0.5}}, "did you mean 'rate'"),
    ({"*": {"mode": "timeout", "rate": 1.5}}, "[0, 1]"),
    ({"*": {"mode": "timeout", "on_call": -1}}, "on_call"),
])
def test_bad_fault_plans(plan, fragment):
    with pytest.raises(tk.ConfigError) as caught:
        world(fault_plan=plan)
    assert fragment in str(caught.value)


def test_reference_condition_names_are_aliases():
    assert world(fault_plan={"*": "malformed_result"}).fault_plan["*"]["mode"] == "malformed"


# -- WorldOptions ------------------------------------------------------------------------------------

def test_world_options_unknown_key_names_nearest_fields():
    with pytest.raises(tk.ConfigError, match="did you mean 'exists_share'"):
        tk.WorldOptions.from_dict({"exist_share": 0.5})
    # The keyword constructor names the nearest field too (not a bare TypeError).
    with pytest.raises(tk.ConfigError, match="did you mean 'exists_share'"):
        tk.WorldOptions(exist_share=0.5)
    import dataclasses
    import pickle

    options = tk.WorldOptions(exists_share=0.25)
    assert pickle.loads(pickle.dumps(options)) == options
    assert dataclasses.replace(options, exists_share=0.5).exists_share == 0.5
    with pytest.raises(tk.ConfigError, match="did you mean 'search_hits'"):
        dataclasses.replace(options, search_hit=(1, 2))


@pytest.mark.parametrize("field, value, fragment", [
    ("exists_share", 1.2, "[0, 1]"), ("exists_share", True, "[0, 1]"), ("per_call_fault_rate", -0.1, "[0, 1]"),
    ("search_hits", (5, 2), "lo <= hi"), ("search_hits", (1, 500), "100"), ("id_range", (5, 5), "lo < hi"),
    ("date_years", (1900, 5), "1970"), ("people", (), "non-empty"), ("nouns", ("a", "a"), "duplicate"),
    ("default_fault_mode", "timout", "did you mean 'timeout'"), ("timeout_seconds", 0, "(0, 3600]"),
    ("fault_modes", {"success": lambda c: {}}, "success"), ("fault_modes", {"x": 3}, "callable"),
    ("stale_as_of", "", "1 to 100"),
])
def test_world_options_bounds(field, value, fragment):
    with pytest.raises(tk.ConfigError) as caught:
        tk.WorldOptions(**{field: value})
    assert fragment in str(caught.value) and field in str(caught.value)


def test_world_options_round_trip_and_frozen():
    options = tk.WorldOptions.from_dict({"exists_share": 0.5, "search_hits": [2, 3]})
    assert options.search_hits == (2, 3)
    again = tk.WorldOptions.from_dict(options.to_dict())
    assert again == options
    json.dumps(options.to_dict())
    with pytest.raises(Exception):
        options.exists_share = 0.9


# -- fault_rate: the share of tool calls a situation's world breaks -----------------------------------

def test_fault_plan_for_breaks_the_asked_share_of_calls():
    situation = {"tool": "get_order", "tool_condition": "timeout", "world_state": "exists"}
    assert all(tk.situations.fault_plan_for(situation, fault_rate=0.0, key=str(i)) == {} for i in range(200))
    plan = tk.situations.fault_plan_for(situation, fault_rate=1.0, key="p")
    assert plan["*"]["mode"] == "timeout" and plan["*"]["rate"] == 1.0 and 0.0 <= plan["*"]["phase"] < 1.0
    # a "success" situation breaks too (with a seeded built-in mode), so rate 1 breaks every call
    success = tk.situations.fault_plan_for({"tool_condition": "success"}, fault_rate=1.0, key="p")
    assert success["*"]["mode"] in tk.world.FAULT_MODES
    # the realised share, counted on the World's ledger over 100 prompts x 5 calls = 500 calls,
    # against the asked rate (reference: the rate itself; the even spread keeps each rollout
    # within one call of rate x calls, so the total is within 100 / 500 = 0.2 at worst and
    # far closer with random phases)
    for rate in (0.0, 0.25, 0.5, 0.8, 1.0):
        broken = 0
        for i in range(100):
            world = tk.World(TOOLS, fault_plan=tk.situations.fault_plan_for(situation, fault_rate=rate, seed=4, key=f"prompt {i}"))
            for j in range(5):
                world.call("get_order", {"order_id": f"A{j}"})
            broken += len(world.ledger)
            assert abs(len(world.ledger) - rate * 5) < 1.0 + 1e-9  # within one call in every rollout
        assert abs(broken / 500 - rate) <= 0.03, (rate, broken)
    # a dimensions dict and the Situation built from it get the same plan
    as_situation = tk.situations.Situation(situation)
    assert [tk.situations.fault_plan_for(situation, fault_rate=0.5, key=str(i)) for i in range(50)] == \
           [tk.situations.fault_plan_for(as_situation, fault_rate=0.5, key=str(i)) for i in range(50)]
    # same key, same plan (every rollout of one prompt meets the same schedule)
    assert tk.situations.fault_plan_for(situation, fault_rate=0.5, key="x") == tk.situations.fault_plan_for(situation, fault_rate=0.5, key="x")
    with pytest.raises(tk.ConfigError):
        tk.situations.fault_plan_for(situation, fault_rate=2)
    with pytest.raises(tk.ConfigError, match="phase"):
        tk.World(TOOLS, fault_plan={"*": {"mode": "timeout", "rate": 0.5, "phase": 1.0}})


def test_world_for_a_situation():
    situation = {"tool": "get_order", "tool_condition": "stale_result", "world_state": "entity missing"}
    w = tk.situations.world_for(situation, TOOLS, fault_rate=1.0, key="p")
    assert w.world_state == "missing" and w.fault_plan["*"]["mode"] == "stale"


# -- execute= and current_rollout ---------------------------------------------------------------------

def test_execute_routes_every_call_and_ignores_faults():
    calls = []

    def my_world(tool, arguments):
        calls.append((tool, arguments, tk.current_rollout()))
        if tool == "boom":
            raise RuntimeError("db down")
        return {"status": "ok", "echo": arguments}

    w = tk.World(TOOLS, execute=my_world, fault_plan={"*": "timeout"})
    assert w.fault_plan == {}
    with tk.world.rollout_context("where is my order?", 2, situation_id="sc-1"):
        assert w.call("get_order", {"order_id": "A1"}) == {"status": "ok", "echo": {"order_id": "A1"}}
    assert calls[0][2].prompt == "where is my order?" and calls[0][2].rollout_index == 2
    result = w.call("boom", {})
    assert result["reason"] == "execute_raised" and "db down" in result["error"]
    assert w.execute_errors == [{"tool": "boom", "call_index": 1, "error": "RuntimeError: db down"}]
    assert w.ledger == []
    assert tk.World(TOOLS, execute=lambda t, a: 42).call("get_order", {}) == {"status": "ok", "result": 42}


def test_current_rollout_outside_is_none_and_nesting_restores():
    assert tk.current_rollout() is None
    with tk.world.rollout_context("outer", 0):
        with tk.world.rollout_context("inner", 1):
            assert tk.current_rollout().prompt == "inner"
        assert tk.current_rollout().prompt == "outer"
    assert tk.current_rollout() is None


def _answer_in_thread(index):
    import time
    with tk.world.rollout_context(f"prompt {index}", index, situation_id=f"s{index}"):
        time.sleep(0.001 * (index % 3))
        w = tk.World(TOOLS, execute=lambda tool, arguments: {"status": "ok", "seen": tk.current_rollout().prompt})
        return w.call("get_order", {"order_id": "A"})["seen"], tk.current_rollout().rollout_index


def test_current_rollout_under_threads():
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(_answer_in_thread, range(40)))
    assert results == [(f"prompt {i}", i) for i in range(40)]


def test_current_rollout_under_asyncio_gather():
    async def one(index):
        with tk.world.rollout_context(f"prompt {index}", index):
            await asyncio.sleep(0.001 * ((7 * index) % 5))
            return tk.current_rollout().prompt

    async def main():
        return await asyncio.gather(*(one(i) for i in range(30)))

    assert asyncio.run(main()) == [f"prompt {i}" for i in range(30)]


def test_world_repr_and_to_dict():
    w = world(fault_plan={"*": "timeout"})
    w.call("get_order", {"order_id": "A1"})
    assert "injected=1" in repr(w)
    assert json.loads(json.dumps(w.to_dict()))["world_state"] == "exists"
    assert w.n_calls == 1 and w.calls[0]["status"] == "timeout"


# -- properties ------------------------------------------------------------------------------------


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=12),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=8,
)


@given(tool=st.sampled_from([t["name"] for t in TOOLS] + ["nope"]),
       arguments=st.dictionaries(st.sampled_from(["order_id", "query", "subject", "note", "expression", "x"]), _json_values, max_size=4),
       seed=st.integers(0, 3), state=st.sampled_from(tk.world.WORLD_STATES))
def test_any_call_answers_json_with_a_status_and_is_deterministic(tool, arguments, seed, state):
    first = tk.World(TOOLS, seed=seed, world_state=state).call(tool, arguments)
    second = tk.World(TOOLS, seed=seed, world_state=state).call(tool, arguments)
    assert first == second
    assert isinstance(first.get("status"), str)
    json.dumps(first)


@given(calls=st.lists(st.tuples(st.sampled_from(["get_order", "update_order", "create_ticket"]),
                                st.sampled_from(["A1", "B2", "C3"])), min_size=1, max_size=12),
       rate=st.sampled_from([0.0, 0.5, 1.0]))
def test_ledger_matches_fault_statuses(calls, rate):
    w = tk.World(TOOLS, seed=1, world_state="exists", fault_plan={"*": {"mode": "rate_limited", "rate": rate}})
    statuses = []
    for tool, ref in calls:
        arguments = {"order_id": ref} if tool != "create_ticket" else {"subject": ref}
        statuses.append(w.call(tool, arguments)["status"])
    faulted = [index for index, status in enumerate(statuses) if status == "rate_limited"]
    assert [entry["call_index"] for entry in w.ledger] == faulted
    if rate == 0.0:
        assert faulted == []
    if rate == 1.0:
        assert len(faulted) == len(calls)


def test_stale_after_an_update_serves_the_old_version():
    w = tk.World(TOOLS, world_state="exists", fault_plan={"get_order": {"mode": "stale", "on_call": 1}})
    before = w.call("get_order", {"order_id": "A1"})["record"]
    after = w.call("update_order", {"order_id": "A1", "note": "gift wrap"})["record"]
    stale = w.call("get_order", {"order_id": "A1"})
    assert stale["stale"] is True and stale["record"] == before != after
    assert w.call("get_order", {"order_id": "A1"})["record"] == after


def test_a_shared_world_stays_consistent_under_threads():
    w = tk.World(TOOLS, world_state="exists", fault_plan={"*": {"mode": "timeout", "rate": 0.5}})

    def call(index):
        return w.call("get_order", {"order_id": f"A{index}"})["status"]

    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(call, range(200)))
    assert w.n_calls == 200
    assert sorted(c["call_index"] for c in w.calls) == list(range(200))
    assert len(w.ledger) == statuses.count("timeout")
    assert len({e["call_index"] for e in w.ledger}) == len(w.ledger)


def test_the_per_call_fault_rate_keeps_its_old_spelling():
    # WorldOptions.per_call_fault_rate was default_fault_rate; both spellings set it, and
    # it has its effect: 0.0 means a kept plan never fires, 1.0 that every call faults
    for spelling in ("per_call_fault_rate", "default_fault_rate"):
        never = tk.World(TOOLS, options={spelling: 0.0}, fault_plan={"*": {"mode": "timeout"}})
        always = tk.World(TOOLS, options=tk.world.WorldOptions(**{spelling: 1.0}), fault_plan={"*": {"mode": "timeout"}})
        assert [never.call("get_order", {"order_id": f"ORD-{i}"})["status"] for i in range(5)] != ["timeout"] * 5
        assert [always.call("get_order", {"order_id": f"ORD-{i}"})["status"] for i in range(5)] == ["timeout"] * 5
        assert never.options.per_call_fault_rate == 0.0
    with pytest.raises(tk.ConfigError, match="disagree"):
        tk.world.WorldOptions(per_call_fault_rate=0.5, default_fault_rate=1.0)
