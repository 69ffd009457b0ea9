"""Model backends against a local protocol server (tests/_chat_server.py): no network."""

import json
import math
import sys
import time
from pathlib import Path

import pytest

import toolkit as tk

sys.path.insert(0, str(Path(__file__).parent))
from _chat_server import ChatServer, render, token_logprob, tokenize  # noqa: E402

TOOLS = [
    {"type": "function", "function": {"name": "get_order", "description": "Look up an order by id",
     "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}},
]  # fmt: skip
FAST = {"backoff": (0.01, 0.02)}


@pytest.fixture(scope="module")
def server():
    with ChatServer() as running:
        yield running


def _agent(server, model, **options):
    return tk.model_agent(f"vllm:{model}@{server.url}", **{**FAST, **options})


def test_tool_calling_rollout_with_usage_sampling_and_logprobs(server):
    agent = _agent(server, "tool-caller", temperature=0.3, max_tokens=100)
    row = tk.run_rollout(agent, "Where is ORD-1234?", tools=TOOLS, user=False, logprobs="tokens")
    tk.validate_row(row)
    call, final = row["steps"]
    assert call["tool"] == "get_order" and call["arguments"] == {"order_id": "ORD-1234"}
    assert call["result"]["status"] in ("ok", "not_found")
    assert final["text"] == row["final_text"] and row["final_text"].startswith("Done:")
    # Independent reference: the server's own tokenizer and per-token logprob rule.
    expected = [token_logprob(t) for t in tokenize(row["final_text"])]
    assert final["n_tokens"] == len(expected)
    assert final["logprob"] == pytest.approx(math.fsum(expected))
    assert [t["logprob"] for t in final["tokens"]] == pytest.approx(expected)
    assert row["logprob"] == pytest.approx(call["logprob"] + final["logprob"])
    assert row["n_tokens"] == call["n_tokens"] + final["n_tokens"]
    assert row["usage"]["output_tokens"] == call["output_tokens"] + final["output_tokens"]
    assert row["sampling"] == {"temperature": 0.3, "max_tokens": 100, "model": "tool-caller-served", "seed": 0}
    assert row["model_version"] == "tool-caller-served" and row["finish_reason"] == "stop"
    sent = [body for path, body in server.requests if body.get("model") == "tool-caller"][-1]
    assert sent["logprobs"] is True and sent["tools"][0]["function"]["name"] == "get_order"


def test_logprobs_off_sends_none_and_records_none(server):
    row = tk.run_rollout(_agent(server, "echo"), "hello", user=False)
    assert "logprob" not in row and "logprob" not in row["steps"][0]
    assert "logprobs" not in server.requests[-1][1]


def test_truncated_reply_is_marked(server):
    row = tk.run_rollout(_agent(server, "length"), "hello", user=False, logprobs=True)
    assert row["steps"][-1]["truncated"] is True and row["finish_reason"] == "length"


def test_429_is_retried_with_bounded_backoff(server):
    agent = _agent(server, "flaky-429")
    reply = agent([{"role": "user", "content": "hi"}], [])
    assert reply["content"] == "You said: hi" and agent.retries_made == 2
    stubborn = _agent(server, "always-429", max_retries=2)
    with pytest.raises(tk.BackendError) as caught:
        stubborn([{"role": "user", "content": "hi"}], [])
    assert caught.value.status == 429 and caught.value.retries == 2
    row = tk.run_rollout(stubborn, "hi", user=False)
    assert row["ended_by"] == "lost" and row["lost_reason"] == "agent_error" and "429" in row["lost_detail"]


def test_500_is_retried(server):
    agent = _agent(server, "flaky-500")
    assert agent([{"role": "user", "content": "yo"}], [])["content"] == "You said: yo"
    assert agent.retries_made == 1


def test_slow_reply_times_out_and_is_not_retried(server):
    server.slow_seconds = 1.5
    agent = _agent(server, "slow", timeout=0.3)
    began = time.perf_counter()
    row = tk.run_rollout(agent, "hi", user=False)
    assert time.perf_counter() - began < 1.4
    assert row["ended_by"] == "lost" and row["lost_reason"] == "timeout"
    # The rollout's own per-completion timeout also stops waiting on a slow backend.
    patient_sdk = _agent(server, "slow", timeout=30)
    row = tk.run_rollout(patient_sdk, "hi", user=False, timeout=0.3)
    assert row["lost_reason"] == "timeout"


def test_bad_tool_arguments_from_the_model_are_lost(server):
    row = tk.run_rollout(_agent(server, "bad-json"), "hi", tools=TOOLS, user=False)
    assert row["lost_reason"] == "bad_tool_arguments"


def test_prompt_logprobs_chat_and_text(server):
    agent = _agent(server, "echo")
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Where is ORD-1234?"}]
    completion = "It shipped yesterday."
    scored = agent.prompt_logprobs(messages, completion)
    prefix = tokenize(render(messages, add_generation_prompt=True))
    full = tokenize(render(messages + [{"role": "assistant", "content": completion}], continue_final_message=True))
    expected = [token_logprob(t) for t in full[len(prefix):]]
    assert full[len(prefix):] == tokenize(completion)
    assert scored.n_tokens == len(expected) and scored.logprob == pytest.approx(math.fsum(expected))
    assert [t["token"] for t in scored.tokens] == tokenize(completion)
    sent = [body for path, body in server.requests if body.get("prompt_logprobs") is not None][-1]
    assert sent["continue_final_message"] is True and sent["add_generation_prompt"] is False
    text = agent.prompt_logprobs("Q: where?\nA:", " It shipped.")
    assert text.n_tokens == len(tokenize(" It shipped."))
    assert text.logprob == pytest.approx(math.fsum(token_logprob(t) for t in tokenize(" It shipped.")))


def test_anthropic_messages_protocol(server):
    agent = tk.model_agent("anthropic:tool-caller", api_key="test-key", base_url=server.anthropic_url, **FAST)
    row = tk.run_rollout(agent, "Where is ORD-1234?", tools=TOOLS, user=False)
    assert row["steps"][0]["tool"] == "get_order" and row["steps"][0]["arguments"] == {"order_id": "ORD-1234"}
    assert row["final_text"].startswith("Done:") and row["ended_by"] == "agent_done"
    assert row["usage"]["input_tokens"] > 0 and row["sampling"]["temperature"] is None
    body = [b for p, b in server.requests if p.endswith("/messages")][-1]
    assert body["messages"][-1]["content"][0]["type"] == "tool_result"
    assert body["tools"][0]["input_schema"]["required"] == ["order_id"]
    pinned = tk.model_agent("anthropic:echo", api_key="k", base_url=server.anthropic_url, temperature=0.2)
    assert pinned([{"role": "system", "content": "s"}, {"role": "user", "content": "hey"}], [])["content"] == "You said: hey"
    body = [b for p, b in server.requests if p.endswith("/messages")][-1]
    assert body["temperature"] == 0.2 and body["system"] == "s"


def test_multi_turn_with_model_agent_and_template_user(server):
    row = tk.run_rollout(_agent(server, "echo"), "Check ORD-1234 please", situation={"stance": "hurried"}, patience="endless", avg_turns=6)
    users = [s for s in row["steps"] if "user" in s]
    assert len(users) <= 6 // 2 - 1 and row["user_model"] == "template"
    # The model saw the person's newest line: its echo is the final text.
    last_user_line = users[-1]["user"] if users else "Check ORD-1234 please"
    assert row["final_text"] == f"You said: {last_user_line}"
    assert sum("text" in s for s in row["steps"]) == len(users) + 1


def test_anthropic_429_is_retried_and_bounded(server):
    flaky = tk.model_agent("anthropic:flaky-429", api_key="k", base_url=server.anthropic_url, **FAST)
    assert flaky([{"role": "user", "content": "hi"}], [])["content"] == "You said: hi" and flaky.retries_made == 2
    stubborn = tk.model_agent("anthropic:always-429", api_key="k", base_url=server.anthropic_url, max_retries=1, **FAST)
    with pytest.raises(tk.BackendError) as caught:
        stubborn([{"role": "user", "content": "hi"}], [])
    assert caught.value.status == 429 and caught.value.retries == 1
