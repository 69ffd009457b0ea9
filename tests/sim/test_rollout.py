"""run_rollout: the row it returns, lost rollouts, timeouts, user and world wiring."""

import hashlib
import json
import math
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from scipy import stats

import toolkit as tk

TOOLS = [
    {"type": "function", "function": {"name": "get_order", "description": "Look up an order by id",
     "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}},
]  # fmt: skip
HUMAN = {"name": "ask_customer", "description": "Ask the customer", "kind": "human",
         "parameters": {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}}  # fmt: skip
PROMPT = "Where is my order ORD-1234?"


def _call(name, arguments):
    return {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}]}


def honest(messages, tools):
    if messages[-1]["role"] == "tool":
        return {"role": "assistant", "content": "Your order status: " + json.loads(messages[-1]["content"])["status"]}
    return _call("get_order", json.dumps({"order_id": "ORD-1234"}))


def test_row_fields_and_schema():
    system = "You are a careful support agent. Never guess."
    row = tk.run_rollout(tk.chat_agent(honest), PROMPT, tools=TOOLS, system_prompt=system, user=False, sampling={"temperature": 0.7, "model": "mine"})
    tk.validate_row(row)
    assert row["schema_version"] == "1" and row["prompt"] == PROMPT
    assert row["steps"][0]["tool"] == "get_order" and row["steps"][0]["result"]["status"] == "ok"
    assert row["steps"][-1] == {"text": row["final_text"]}
    assert row["ended_by"] == "agent_done" and row["faults"] == []
    assert row["messages"] == tk.rows.messages_from_steps(PROMPT, row["steps"], system)
    sha = hashlib.sha256(system.encode()).hexdigest()[:16]
    assert row["policy_version"] == f"mine@{sha}"
    assert row["lineage"] == {"system_prompt_sha": sha, "system_prompt_head": system[:120], "system_prompt_chars": len(system)}
    assert row["sampling"] == {"temperature": 0.7, "model": "mine"}
    assert row["timing"]["seconds"] >= row["timing"]["agent_seconds"] >= 0
    assert "seeded" not in row  # only agents that plant mistakes report a truth list


@pytest.mark.parametrize(
    "reply, reason",
    [
        (_call("get_order", "{not json"), "bad_tool_arguments"),
        ({"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "", "arguments": "{}"}}]}, "bad_reply"),
        (_call("get_order", "[1, 2]"), "bad_tool_arguments"),
        ({"role": "assistant", "content": "<tool_call>{\"name\": \"get_order\"}</tool_call>"}, "tool_markup"),
        ({"role": "assistant", "content": "   "}, "empty_reply"),
        ({"role": "assistant", "content": None, "tool_calls": []}, "empty_reply"),
        ({"role": "assistant", "content": "<agent error: crashed>"}, "agent_error"),
    ],
)
def test_garbage_from_an_agent_is_a_lost_rollout_never_a_crash(reply, reason):
    row = tk.run_rollout(tk.chat_agent(lambda m, t: reply), PROMPT, tools=TOOLS, user=False)
    assert row["ended_by"] == "lost" and row["lost_reason"] == reason and row["lost_detail"]
    tk.validate_row(row)
    with pytest.raises(tk.errors.LostRollout) as caught:
        tk.run_rollout(tk.chat_agent(lambda m, t: reply), PROMPT, tools=TOOLS, user=False, on_lost="raise")
    assert caught.value.reason == reason and caught.value.row["ended_by"] == "lost"


def test_raising_agent_is_lost_with_the_exception_kept():
    def broken(messages, tools):
        raise RuntimeError("model fell over")

    row = tk.run_rollout(broken, PROMPT, tools=TOOLS, user=False)
    assert row["lost_reason"] == "agent_error" and "model fell over" in row["lost_detail"]
    with pytest.raises(tk.errors.LostRollout) as caught:
        tk.run_rollout(broken, PROMPT, tools=TOOLS, user=False, on_lost="raise")
    assert isinstance(caught.value.exception, RuntimeError)


def test_hanging_agent_is_abandoned_after_timeout():
    release = threading.Event()

    def hangs(messages, tools):
        release.wait(10)
        return {"role": "assistant", "content": "late"}

    began = time.perf_counter()
    row = tk.run_rollout(hangs, PROMPT, tools=TOOLS, user=False, timeout=0.3)
    assert time.perf_counter() - began < 3
    assert row["ended_by"] == "lost" and row["lost_reason"] == "timeout"
    release.set()


def test_message_shaped_agent_is_single_turn():
    def single(message):
        return {"steps": [{"tool": "get_order", "arguments": {"order_id": "X1"}, "result": {"status": "ok"}}], "final_text": f"Checked: {message}"}

    row = tk.run_rollout(single, PROMPT, tools=TOOLS)
    assert row["final_text"] == f"Checked: {PROMPT}" and row["steps"][-1] == {"text": row["final_text"]}
    assert "user_model" not in row and not any("user" in s for s in row["steps"])
    lost = tk.run_rollout(lambda message: {"steps": [], "final_text": ""}, PROMPT)
    assert lost["lost_reason"] == "empty_reply"


# ---- reply shapes: a plain str is text; a wrong type is AgentReplyError; a bad value is lost


def test_a_plain_str_from_a_message_shaped_agent_is_its_final_text():
    def agent(message):
        return "Sure, I have cancelled it."

    row = tk.run_rollout(agent, PROMPT, tools=TOOLS)
    tk.validate_row(row)
    assert row["ended_by"] == "agent_done" and "lost_reason" not in row
    assert row["final_text"] == "Sure, I have cancelled it."
    # the row says the reply was a bare str: the text step carries the marker
    assert row["steps"] == [{"text": "Sure, I have cancelled it.", "plain_text_reply": True}]
    assert row["messages"][-1] == {"role": "assistant", "content": "Sure, I have cancelled it."}
    # a dict reply carries no marker
    assert "plain_text_reply" not in tk.run_rollout(lambda m: {"steps": [], "final_text": "ok"}, PROMPT)["steps"][-1]
    # an empty str is the right type with an unusable value: lost, as an empty final_text is
    assert tk.run_rollout(lambda m: "  ", PROMPT)["lost_reason"] == "empty_reply"


class _SdkMessage:
    """Stands in for an SDK object (the OpenAI ChatCompletionMessage is a pydantic model)."""

    def model_dump(self):
        return {"role": "assistant", "content": "hi"}


@pytest.mark.parametrize(
    "reply, field, hint",
    [
        (None, "the reply", "return statement"),
        (42, "the reply", ""),
        ({"text": "hi"}, "the reply", ""),
        ({"role": "assistant", "content": "hi"}, "the reply", "tk.chat_agent"),
        (["a", "b"], "the reply", ""),
        ({"steps": [], "final_text": 7}, "reply['final_text']", ""),
    ],
)
def test_a_message_shaped_reply_of_an_impossible_type_raises_on_the_first_call(reply, field, hint):
    calls = []

    def agent(message):
        calls.append(message)
        return reply

    for on_lost in ("return", "raise"):
        calls.clear()
        with pytest.raises(tk.AgentReplyError) as caught:
            tk.run_rollout(agent, PROMPT, tools=TOOLS, on_lost=on_lost)
        assert len(calls) == 1  # the first reply, not after re-rolls
    error = caught.value
    text = str(error)
    assert isinstance(error, TypeError) and isinstance(error, tk.ToolkitError)
    assert error.shape == "message" and error.got == type(reply if field == "the reply" else reply["final_text"]).__name__
    assert "agent 'test_a_message_shaped_reply_of_an_impossible_type_raises_on_the_first_call.<locals>.agent' (message-shaped)" in text
    assert f"{field} must be " in text and "'final_text'" in text
    assert f"got {error.got} " in text and hint in text


@pytest.mark.parametrize(
    "reply, field, hint",
    [
        (None, "the reply", "return statement"),
        (3.5, "the reply", ""),
        (["not", "a", "dict"], "the reply", ""),
        ([{"role": "assistant", "content": "hi"}], "the reply", "the one new assistant message"),
        (_SdkMessage(), "the reply", "model_dump()"),
        ({"steps": [], "final_text": "hi"}, "the reply", "tk.message_agent"),
        ({"choices": [{"message": {"content": "hi"}}]}, "the reply", "response['choices'][0]['message']"),
        ({"role": "assistant", "content": 5}, "reply['content']", ""),
        ({"role": "assistant", "content": None, "tool_calls": "get_order"}, "reply['tool_calls']", ""),
        ({"role": "assistant", "content": None, "tool_calls": ["get_order"]}, "reply['tool_calls'][0]", ""),
    ],
)
def test_a_chat_reply_of_an_impossible_type_raises_on_the_first_call(reply, field, hint):
    calls = []

    def agent(messages, tools):
        calls.append(messages)
        return reply

    with pytest.raises(tk.AgentReplyError) as caught:
        tk.run_rollout(agent, PROMPT, tools=TOOLS, on_lost="raise")
    assert len(calls) == 1
    text = str(caught.value)
    assert caught.value.shape == "chat" and f"(chat-shaped): {field} must be " in text
    assert hint in text and "got " in text


def test_agent_reply_error_shows_a_short_repr_of_what_came_back():
    huge = list(range(10_000))
    with pytest.raises(tk.AgentReplyError) as caught:
        tk.run_rollout(lambda m: huge, PROMPT)
    text = str(caught.value)
    assert "got list [0, 1, 2, 3" in text and text.count(",") < 120  # cut at ~200 characters
    assert repr(huge)[:200] + "..." in text and len(text) < 600


def test_a_chat_reply_of_the_right_type_with_bad_values_stays_a_lost_rollout():
    # the other side of the line: what a real model emits now and then is lost and re-rolled
    lost = {
        "bad_tool_arguments": _call("get_order", "{not json"),
        "empty_reply": {"role": "assistant", "content": ""},
        "tool_markup": {"role": "assistant", "content": "<tool_call>{}</tool_call>"},
    }
    for reason, reply in lost.items():
        row = tk.run_rollout(tk.chat_agent(lambda m, t, reply=reply: reply), PROMPT, tools=TOOLS, user=False)
        assert row["ended_by"] == "lost" and row["lost_reason"] == reason
    # a message-shaped final_text of None (a model's missing content passed on) is lost too
    row = tk.run_rollout(lambda m: {"steps": [], "final_text": None}, PROMPT)
    assert row["lost_reason"] == "bad_reply" and "'final_text' must be a string" in row["lost_detail"]
    # and a chat agent's plain str is its text, as before
    assert tk.run_rollout(lambda m, t: "All done.", PROMPT, tools=TOOLS, user=False)["final_text"] == "All done."


def test_an_unreachable_backend_loses_the_rollout_as_server_unreachable():
    assert "server_unreachable" in tk.LOST_REASONS

    def dead(messages, tools):
        raise tk.errors.BackendError("http://127.0.0.1:9/v1: connection refused", "connection", first_contact=True)

    def slow_but_alive(messages, tools):
        raise tk.errors.BackendError("http://127.0.0.1:9/v1: no reply within 3 s", "timeout")

    row = tk.run_rollout(dead, PROMPT, tools=TOOLS, user=False)
    assert row["lost_reason"] == "server_unreachable" and "connection refused" in row["lost_detail"]
    tk.validate_row(row)
    assert tk.run_rollout(slow_but_alive, PROMPT, tools=TOOLS, user=False)["lost_reason"] == "timeout"


def test_simulate_raises_agent_reply_error_on_the_first_bad_reply():
    calls = []

    def agent(message):
        calls.append(message)
        return None

    began = time.perf_counter()
    with pytest.raises(tk.AgentReplyError, match=r"the reply must be a dict \{'steps'"):
        tk.simulate(agent, progress=False, budget=20)
    assert time.perf_counter() - began < 5
    assert len(calls) <= 8  # the first reply stops the run (a few may already be in flight)


def test_simulate_with_a_plain_str_agent_lands_rows():
    def agent(message):
        return "Sure, I have cancelled it."

    data = tk.simulate(agent, progress=False, budget=20)
    assert len(data) == 20
    assert all(row["final_text"] == "Sure, I have cancelled it." for row in data.rows)
    assert all(row["steps"][-1].get("plain_text_reply") is True for row in data.rows)
    assert data.report()["plain_text_replies"] == 20  # the report says so
    assert tk.simulate(lambda message: {"final_text": "done", "steps": []}, progress=False, budget=5).report()["plain_text_replies"] == 0



def test_an_unmappable_step_never_loses_the_row():
    good = {"tool": "get_order", "arguments": {"order_id": "X1"}, "result": {"status": "ok"}}
    odd = {"steps": [{"thought": "hm"}, good, "free text", {"tool": "get_order", "arguments": "not json"}], "final_text": "ok"}
    row = tk.run_rollout(lambda message: odd, PROMPT)
    assert row["ended_by"] == "agent_done" and "lost_reason" not in row and row["final_text"] == "ok"
    assert row["steps"] == [good, {"text": "ok"}]
    assert [u["position"] for u in row["unmapped_steps"]] == [0, 2, 3]
    assert "'user', 'tool' or 'text'" in row["unmapped_steps"][0]["error"] and "str" in row["unmapped_steps"][1]["error"]
    assert "JSON object" in row["unmapped_steps"][2]["error"]
    tk.validate_row(row)
    json.dumps(row)  # the set-aside steps stay writable
    # Arguments double-encoded as a JSON string of an object are decoded, and the step says so.
    double_encoded = {"steps": [{"tool": "get_order", "arguments": '{"order_id": "X1"}', "result": {}}], "final_text": "ok"}
    decoded = tk.run_rollout(lambda message: double_encoded, PROMPT)
    assert decoded["ended_by"] == "agent_done" and decoded["steps"][0]["arguments"] == {"order_id": "X1"}
    assert decoded["steps"][0]["arguments_decoded"] is True and "unmapped_steps" not in decoded
    # Not even a list of steps: set aside, the answer kept; an object that is not JSON is kept as its repr.
    weird = tk.run_rollout(lambda message: {"steps": {"a": object()}, "final_text": "fine"}, PROMPT)
    assert weird["final_text"] == "fine" and weird["unmapped_steps"][0]["position"] is None
    json.dumps(weird)


def test_shape_detection_never_guesses():
    assert tk.agents.agent_shape(lambda m, t: None) == "chat"
    assert tk.agents.agent_shape(lambda message: None) == "message"
    with pytest.raises(tk.errors.AgentShapeError, match="chat_agent"):
        tk.agents.agent_shape(lambda *args: None)
    with pytest.raises(tk.errors.AgentShapeError):
        tk.agents.agent_shape(lambda message, tools=None: None)
    with pytest.raises(tk.errors.AgentShapeError):
        tk.run_rollout(lambda message, tools=None, extra=None: None, PROMPT)
    assert tk.agents.agent_shape(tk.chat_agent(lambda *args: None)) == "chat"
    assert tk.agents.agent_shape(tk.message_agent(lambda m, t=None: None)) == "message"


def test_situation_faults_ledger_and_fault_rate():
    situation = {"tool": "get_order", "stance": "hurried", "tool_condition": "timeout", "world_state": "exists"}
    broken = tk.run_rollout(tk.chat_agent(honest), PROMPT, tools=TOOLS, situation=situation, fault_rate=1.0, user=False)
    assert broken["faults"] and broken["faults"][0]["mode"] == "timeout" and broken["faults"][0]["tool"] == "get_order"
    assert broken["steps"][0]["result"]["status"] == "timeout"
    assert broken["scenario_dimensions"] == situation and broken["scenario_id"]
    assert broken["world_state"] == "exists"
    clean = tk.run_rollout(tk.chat_agent(honest), PROMPT, tools=TOOLS, situation=situation, fault_rate=0.0, user=False)
    assert clean["faults"] == [] and clean["steps"][0]["result"]["status"] == "ok"


def test_execute_world_sees_the_current_rollout():
    seen = []

    def execute(tool, arguments):
        context = tk.current_rollout()
        seen.append((context.prompt, context.rollout_index))
        return {"status": "ok", "mine": True}

    row = tk.run_rollout(tk.chat_agent(honest), PROMPT, tools=TOOLS, world=execute, rollout_index=7, user=False)
    assert seen == [(PROMPT, 7)] and row["steps"][0]["result"] == {"status": "ok", "mine": True}


def test_user_follow_ups_and_turn_cap():
    asker = tk.chat_agent(lambda messages, tools: {"role": "assistant", "content": "Which order id do you mean?"})
    row = tk.run_rollout(asker, "Check my order", tools=TOOLS, patience="endless", avg_turns=8)
    users = [s for s in row["steps"] if "user" in s]
    assert len(users) == 8 // 2 - 1  # the opener counts as one of the person's turns
    assert row["ended_by"] == "turn_cap" and row["user_model"] == "template"
    capped = tk.run_rollout(asker, "Check my order", tools=TOOLS, patience="endless", avg_turns=40, max_turns=3)
    assert capped["ended_by"] == "turn_cap" and sum("text" in s for s in capped["steps"]) == 3


def test_walk_away_rate_through_run_rollout():
    asker = tk.chat_agent(lambda messages, tools: {"role": "assistant", "content": "Which order id do you mean?"})
    n = 600
    left_at_second = 0
    for index in range(n):
        row = tk.run_rollout(asker, "Check my order", tools=TOOLS, patience="short", avg_turns=40, max_turns=2, rollout_index=index, timeout=None)
        left_at_second += row["ended_by"] == "user_left"
        if row["ended_by"] == "user_left":
            assert row["final_text"].endswith("?")  # a left row ends on the agent's question
    assert stats.binomtest(left_at_second, n, 0.60).pvalue > 1e-3


def test_human_tool_goes_to_the_person():
    def asks_human(messages, tools):
        if messages[-1]["role"] == "tool":
            return {"role": "assistant", "content": "Thanks, noted: " + json.loads(messages[-1]["content"])["answer"]}
        return _call("ask_customer", json.dumps({"question": "Which order id?"}))

    row = tk.run_rollout(asks_human, "Check my order", tools=TOOLS + [HUMAN], patience="endless")
    assert row["steps"][0]["tool"] == "ask_customer" and row["steps"][0]["result"]["status"] == "answered"
    assert row["faults"] == []


def test_usage_from_a_callable_is_summed_in_either_naming():
    def with_usage(messages, tools):
        reply = honest(messages, tools)
        if messages[-1]["role"] == "tool":
            return {**reply, "usage": {"prompt_tokens": 30, "completion_tokens": 7}}
        return {**reply, "usage": {"input_tokens": 20, "output_tokens": 5}}

    row = tk.run_rollout(with_usage, PROMPT, tools=TOOLS, user=False)
    assert row["usage"] == {"input_tokens": 50, "output_tokens": 12}
    assert row["steps"][0]["input_tokens"] == 20 and row["steps"][1]["output_tokens"] == 7


def test_logprobs_from_a_callable_without_them_say_so():
    row = tk.run_rollout(tk.chat_agent(honest), PROMPT, tools=TOOLS, user=False, logprobs=True)
    assert row["logprob"] is None and "no log-probability" in row["logprob_note"]
    turns = row["logprob_turns"]["missing"]
    assert turns >= 1
    assert row["logprob_turns"] == {"scored": 0, "missing": turns, "reasons": {"the agent returned no log-probability (not a model backend)": turns}}
    # the run says it once, counting rows
    data = tk.simulate(tk.chat_agent(honest), tools=TOOLS, budget=6, logprobs=True, progress=False)
    warned = [w for w in data.warnings if w.startswith("logprobs were asked for")]
    assert len(warned) == 1 and f"but {len(data.rows)} rows have logprob None" in warned[0]
    assert f"{len(data.rows)} rows: the agent returned no log-probability" in warned[0]


def test_seeded_agent_rollouts_are_reproducible_and_thread_independent():
    agent = tk.seeded_agent(TOOLS, rate=0.5, seed=4)
    situation = {"stance": "unsure", "tool_condition": "stale"}

    def one(index):
        row = tk.run_rollout(agent, PROMPT, situation=situation, fault_rate=0.5, rollout_index=index, logprobs=True)
        return {k: row[k] for k in ("steps", "final_text", "ended_by", "faults", "seeded", "logprob")}

    sequential = [one(i) for i in range(12)]
    with ThreadPoolExecutor(4) as pool:
        threaded = list(pool.map(one, range(12)))
    assert sequential == threaded
    assert len({json.dumps(r["steps"]) for r in sequential}) > 1  # repeats differ
    for row in sequential:
        assert math.isfinite(row["logprob"])


def test_privileged_reaches_the_seeded_leak_and_is_scrubbed_on_write(tmp_path):
    agent = tk.seeded_agent(TOOLS, rate=1.0, behaviors=["leak"])
    row = tk.run_rollout(agent, PROMPT, user=False, privileged={"reference": "shipped on Monday"})
    assert row["seeded"] == ["leak"] and "shipped on Monday" in row["final_text"]
    assert "privileged" in row
    path = tmp_path / "rows.jsonl"
    tk.save_rows([row], path)
    assert "privileged" not in path.read_text()


def test_bad_options_are_refused():
    with pytest.raises(tk.ConfigError, match="max_turns"):
        tk.run_rollout(honest, PROMPT, max_turns=0)
    with pytest.raises(tk.ConfigError, match="on_lost"):
        tk.run_rollout(honest, PROMPT, on_lost="ignore")
    with pytest.raises(tk.ConfigError, match="prompt"):
        tk.run_rollout(honest, "")


def test_seeded_agent_with_the_template_person_end_to_end():
    airline = [
        {"type": "function", "function": {"name": "change_flight", "description": "Move a booking to another flight.",
         "parameters": {"type": "object", "properties": {
             "booking_id": {"type": "string", "description": "Confirmation code, e.g. QXR482."},
             "new_flight_number": {"type": "string", "description": "Flight to move to, e.g. SW-1042."},
             "date": {"type": "string", "description": "YYYY-MM-DD"}},
             "required": ["booking_id", "new_flight_number", "date"]}}},
        {"name": "ask_passenger", "kind": "human", "description": "Ask the passenger",
         "parameters": {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}},
    ]  # fmt: skip
    agent = tk.seeded_agent(airline, seed=1)
    asked_and_answered = 0
    for index in range(40):
        situation = tk.situations.Situation({"tool": "change_flight", "stance": "ordinary", "world_state": "exists",
                                  "tool_condition": "success", "history": "fresh"})  # fmt: skip
        row = tk.run_rollout(agent, "I need to change my flight QXR123.", situation=situation, rollout_index=index,
                             avg_turns=12, patience="endless", timeout=None)  # fmt: skip
        user_lines = [s["user"] for s in row["steps"] if "user" in s]
        assert len(user_lines) == len(set(user_lines)), user_lines
        for step in row["steps"]:
            if step.get("tool") == "change_flight":
                arguments = step["arguments"]
                assert arguments["booking_id"] == "QXR123"
                assert arguments["new_flight_number"] != arguments["booking_id"] != arguments["date"]
                assert arguments["new_flight_number"] in ("the new flight number",) or re.fullmatch(r"SW-\d{4}", arguments["new_flight_number"])
            if step.get("tool") == "ask_passenger" and "flight number" in step["arguments"]["question"]:
                answer = step["result"].get("answer", "")
                assert re.search(r"SW-\d{4}", answer), answer
                asked_and_answered += 1
    assert asked_and_answered >= 5


def test_timeout_calls_reuse_worker_threads_and_survive_a_hung_call():
    seen = []

    def agent(message):
        seen.append(threading.get_ident())
        if "hang" in message:
            time.sleep(1.0)
        return {"steps": [], "final_text": "done"}

    for index in range(20):
        row = tk.run_rollout(agent, PROMPT, tools=TOOLS, rollout_index=index, timeout=5)
        assert row["ended_by"] != "lost"
    assert len(set(seen)) == 1  # one parked worker served every call, no thread per call
    assert threading.get_ident() not in seen  # yet the calls ran off the caller's thread
    hung = tk.run_rollout(agent, "please hang here", tools=TOOLS, timeout=0.1)
    assert hung["lost_reason"] == "timeout"
    started = time.perf_counter()
    after = tk.run_rollout(agent, PROMPT, tools=TOOLS, timeout=5)
    assert after["ended_by"] != "lost" and time.perf_counter() - started < 0.9  # another worker took it


def test_seeded_agent_runs_without_a_worker_thread():
    agent = tk.seeded_agent(TOOLS, seed=1)
    names = []
    original = agent.__class__.__call__

    class Watching(agent.__class__):
        def __call__(self, *args, **kwargs):
            names.append(threading.current_thread().name)
            return original(self, *args, **kwargs)

    agent.__class__ = Watching
    tk.run_rollout(agent, PROMPT, tools=TOOLS, user=False)
    assert names and all(name == threading.current_thread().name for name in names)


def test_seeded_sample_read_off_the_enumerated_tree_equals_a_direct_sample():
    from toolkit.agents.seeded import _read_context

    agent = tk.seeded_agent(tk.dataset_path("tools/airline_support.json"), seed=4, rate=0.5)
    checked = 0
    for index in range(12):
        row = tk.run_rollout(agent, "Please change my flight BK-7731 to Tuesday, and refund the old one.", rollout_index=index, timeout=None)
        messages = tk.rows.messages_from_steps(row["prompt"], row["steps"])
        for position, message in enumerate(messages):
            if message["role"] != "assistant":
                continue
            ctx = _read_context(messages[:position], None)
            for rollout_index in (index, index + 100):
                direct_path, direct = agent._sample_path(ctx, rollout_index)
                read_path, read = agent._sampled(ctx, rollout_index, agent._paths(ctx))
                assert read == direct and read_path.choices == direct_path.choices
                checked += 1
    assert checked > 40


def test_timeout_workers_work_in_a_forked_child():
    import multiprocessing

    def agent(message):
        return {"steps": [], "final_text": "done"}

    tk.run_rollout(agent, PROMPT, tools=TOOLS, timeout=5)  # leaves a parked worker in this process
    context = multiprocessing.get_context("fork")
    with context.Pool(1) as pool:
        ended = pool.apply(_forked_rollout, ())
    assert ended == "agent_done"


def _forked_rollout():
    return tk.run_rollout(lambda message: {"steps": [], "final_text": "done"}, PROMPT, tools=TOOLS, timeout=2)["ended_by"]


def _every_context_value():
    """What code running now can read from any context variable (public or private)."""
    import contextvars

    import toolkit.agents._protocol as protocol
    import toolkit.world.context as world_context

    seen = [repr(value) for _, value in contextvars.copy_context().items()]
    seen += [repr(tk.current_rollout()), repr(protocol.current_turn()), repr(world_context._CURRENT.get())]
    seen += [repr(getattr(protocol.current_turn(), "privileged", None))]
    return " ".join(seen)


def test_the_agent_under_test_reads_no_reference_and_no_hidden_state():
    # Issue 21 row 8: the attack is an agent that looks in every context it can import.
    reference, hidden = "ANSWER-KEY-shipped-on-Monday", "duplicate"
    in_agent, in_world = [], []

    def peeking(messages, tools):
        in_agent.append(_every_context_value())
        return honest(messages, tools)

    def execute(tool, arguments):
        in_world.append(_every_context_value())
        return {"status": "ok"}

    situation = {"tool": "get_order", "tool_condition": "success", "world_state": hidden}
    world = tk.World(TOOLS, world_state=hidden, execute=execute)
    row = tk.run_rollout(tk.chat_agent(peeking), PROMPT, tools=TOOLS, world=world, situation=situation, user=False,
                         privileged={"reference": reference, "hidden_state": {"world_state": hidden}})  # fmt: skip
    assert row["privileged"]["reference"] == reference and len(in_agent) == 2
    assert not any(reference in seen or hidden in seen for seen in in_agent), in_agent
    # the same inspection from execute= does find the world state: the check can fail
    assert in_world and hidden in in_world[0] and reference not in in_world[0]

    # through simulate: the engine builds a reference and hidden state for every prompt
    in_agent.clear()
    data = tk.simulate(peeking, tools=TOOLS, budget=6, seed=3, progress=False)
    rows = list(data.trajectories)
    assert rows and all(r.get("privileged", {}).get("reference") for r in rows)
    for r in rows:
        for secret in (r["privileged"]["reference"], json.dumps(r["privileged"]["hidden_state"])):
            assert not any(secret in seen for seen in in_agent)
        if r.get("world_state"):
            assert not any(f"world_state={r['world_state']!r}" in seen for seen in in_agent)


BOOKING_TOOL = [{"type": "function", "function": {"name": "get_booking", "description": "Look up a booking by its id",
                 "parameters": {"type": "object", "properties": {"booking_id": {"type": "string"}}, "required": ["booking_id"]}}}]  # fmt: skip


@pytest.mark.parametrize("arguments, fragment", [
    ({"booking_id": 12345}, "booking_id: 12345 is not of type 'string'"),
    ({"booking_id": "B1", "sneaky": True}, "'sneaky' was unexpected"),
    ({}, "'booking_id' is a required property"),
])  # fmt: skip
def test_arguments_that_break_the_schema_are_a_tool_error_the_agent_sees(arguments, fragment):
    # Issue 21 row 15: the world answered not_found / ok, recording a malformed call as a missing record.
    seen = []

    def agent(messages, tools):
        if messages[-1]["role"] == "tool":
            seen.append(json.loads(messages[-1]["content"]))
            return {"role": "assistant", "content": "done"}
        return _call("get_booking", json.dumps(arguments))

    def execute(tool, args):
        raise AssertionError("the world must not be asked a malformed call")

    row = tk.run_rollout(tk.chat_agent(agent), PROMPT, tools=BOOKING_TOOL, world=execute, user=False)
    result = row["steps"][0]["result"]
    assert result["status"] == "error" and result["reason"] == "bad_tool_arguments" and fragment in " ".join(result["errors"])
    assert seen == [result] and row["bad_tool_arguments"] == 1
    # well-formed arguments reach the world and are not counted
    good = tk.run_rollout(tk.chat_agent(honest), PROMPT, tools=TOOLS, user=False)
    assert good["steps"][0]["result"]["status"] == "ok" and "bad_tool_arguments" not in good


def test_simulate_warns_with_the_count_of_malformed_tool_calls():
    def typo(messages, tools):
        if messages[-1]["role"] == "tool":
            return {"role": "assistant", "content": "done"}
        return _call("get_booking", json.dumps({"booking_id": 12345}))

    data = tk.simulate(typo, tools=BOOKING_TOOL, budget=6, progress=False, reproducible=True)
    total = sum(r.get("bad_tool_arguments", 0) for r in data.rows)
    assert len(data.rows) == 6 and all(r.get("bad_tool_arguments", 0) >= 1 for r in data.rows)
    assert any(f"{total} tool calls in 6 rows broke their tool's schema" in w for w in data.warnings)


def test_a_runaway_reply_is_cut_marked_counted_and_warned(tmp_path):
    """Issue 21, row 12: a 3 MB reply (the audit sent 50 MB) is kept to MAX_REPLY_CHARS with a
    marker saying how much went; the row counts it, simulate warns, and the file stays small."""
    from toolkit.sim.rollout import MAX_REPLY_CHARS

    huge = "x" * (3 * MAX_REPLY_CHARS)

    def chatty(messages, tools):
        return {"role": "assistant", "content": huge}

    def verbose(message):
        return {"steps": [], "final_text": huge}

    for agent in (chatty, verbose):
        row = tk.run_rollout(agent, "Cancel booking ABC123", tools=TOOLS, user=False)
        assert len(row["final_text"]) < MAX_REPLY_CHARS + 200 and row["final_text"].startswith("xxx")
        assert f"{2 * MAX_REPLY_CHARS:,} characters cut" in row["final_text"]
        assert row["replies_truncated"] == 1
    path = tmp_path / "rows.jsonl"
    data = tk.simulate(verbose, tools=TOOLS, budget=3, output=path, progress=False)
    assert all(r["replies_truncated"] == 1 for r in data.rows)
    assert any("longer than 1,000,000 characters" in w for w in data.warnings)
    # a row holds its reply text up to three times (final_text, the step, the trajectory's copy):
    # capped, 3 rows stay under 12 MB; uncapped they were 27 MB
    assert path.stat().st_size < 4 * 3 * (MAX_REPLY_CHARS + 1000)
    short = tk.run_rollout(lambda message: {"steps": [], "final_text": "fine"}, "hi", tools=TOOLS, user=False)
    assert "replies_truncated" not in short
