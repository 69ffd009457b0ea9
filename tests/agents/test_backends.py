"""Model backends against a local protocol server (tests/_chat_server.py): no network."""

import math
import re
import sys
import time
from pathlib import Path

import pytest

import toolkit as tk

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
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
    with pytest.raises(tk.errors.BackendError) as caught:
        stubborn([{"role": "user", "content": "hi"}], [])
    assert caught.value.status == 429 and caught.value.retries == 2
    row = tk.run_rollout(stubborn, "hi", user=False)
    assert row["ended_by"] == "lost" and row["lost_reason"] == "agent_error" and "429" in row["lost_detail"]


def test_500_is_retried(server):
    agent = _agent(server, "flaky-500")
    assert agent([{"role": "user", "content": "yo"}], [])["content"] == "You said: yo"
    assert agent.retries_made == 1


def test_slow_reply_times_out_and_is_not_retried(server):
    agent = _agent(server, "slow", timeout=0.3)
    server.slow_seconds = 0.0
    agent([{"role": "user", "content": "warm up"}], [])  # the server has answered this backend once
    server.slow_seconds = 1.5
    began = time.perf_counter()
    row = tk.run_rollout(agent, "hi", user=False)
    assert time.perf_counter() - began < 1.4
    assert row["ended_by"] == "lost" and row["lost_reason"] == "timeout"
    # a fresh backend that never heard back cannot tell slow from silent: it gives up the same
    # way, but says the server never answered
    fresh = tk.run_rollout(_agent(server, "slow", timeout=0.3), "hi", user=False)
    assert fresh["lost_reason"] == "server_unreachable" and "never answered" in fresh["lost_detail"]
    # The rollout's own per-completion timeout also stops waiting on a slow backend.
    patient_sdk = _agent(server, "slow", timeout=30)
    server.slow_seconds = 0.0
    patient_sdk([{"role": "user", "content": "warm up"}], [])
    server.slow_seconds = 1.5
    row = tk.run_rollout(patient_sdk, "hi", user=False, timeout=0.3)
    assert row["lost_reason"] == "timeout"
    # whichever timer fires first, a backend that never heard back names it the same way
    never_answered = tk.run_rollout(_agent(server, "slow", timeout=30), "hi", user=False, timeout=0.3)
    assert never_answered["lost_reason"] == "server_unreachable" and server.url in never_answered["lost_detail"]


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
    with pytest.raises(tk.errors.BackendError) as caught:
        stubborn([{"role": "user", "content": "hi"}], [])
    assert caught.value.status == 429 and caught.value.retries == 1


# -- a bare server URL as the spec -------------------------------------------------------------


def _listings(server):
    return [path for path, body in server.requests if path.endswith("/models")]


def _closed_port_url():
    import socket

    with socket.socket() as probe:  # bind then close: nothing listens on that port afterwards
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_bare_url_parses_as_an_openai_compatible_server():
    spec = tk.agents.parse_model_spec("http://127.0.0.1:8000/v1")
    assert (spec.provider, spec.model, spec.base_url) == ("url", None, "http://127.0.0.1:8000/v1")
    assert str(spec) == "http://127.0.0.1:8000/v1"
    # one server, one spelling; the scheme is case-insensitive
    assert tk.agents.parse_model_spec("HTTPS://gpu.lab:8443/v1/").base_url == "HTTPS://gpu.lab:8443/v1"
    with pytest.raises(tk.ConfigError, match=r"'vllm:<model>@http://h:8000/v1'"):
        tk.agents.parse_model_spec("http://h:8000/v1#qwen")  # no documented '#model' convention: refused, not guessed
    with pytest.raises(tk.ConfigError, match="needs a host"):
        tk.agents.parse_model_spec("http:///v1")


def test_misspelled_url_scheme_gets_did_you_mean():
    with pytest.raises(tk.ConfigError, match="unknown model spec prefix 'htp'; did you mean 'http'"):
        tk.model_agent("htp://127.0.0.1:8000/v1")
    with pytest.raises(tk.ConfigError, match="did you mean 'https'"):
        tk.agents.resolve_agent("htps://gpu.lab/v1")
    with pytest.raises(tk.ConfigError, match="did you mean 'vllm'"):  # prefixes still win for their typos
        tk.model_agent("vlm:qwen@http://h/v1")
    with pytest.raises(tk.ConfigError, match=re.escape("for a server write 'http://localhost:8000/v1'")):
        tk.model_agent("localhost:8000/v1")
    with pytest.raises(tk.ConfigError, match=re.escape("starts with 'http://'")):
        tk.model_agent("http:/127.0.0.1:8000/v1")


def test_bare_url_agent_runs_the_first_listed_model_resolved_once(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with ChatServer(models=["tool-caller", "echo"]) as server:
        agent = tk.agents.resolve_agent(server.url, **FAST)
        assert isinstance(agent, tk.agents.ModelAgent) and server.requests == []  # lazy: nothing asked yet
        assert agent.model == server.url  # before resolution a lost row still names the server
        row = tk.run_rollout(agent, "Where is ORD-1234?", tools=TOOLS, user=False, logprobs=True)
        pinned = tk.run_rollout(tk.model_agent(f"vllm:tool-caller@{server.url}", **FAST), "Where is ORD-1234?",
                                tools=TOOLS, user=False, logprobs=True)  # fmt: skip
        assert len(_listings(server)) == 1  # two completions, one listing
        completions = [body for path, body in server.requests if path.endswith("/chat/completions")]
        assert [body["model"] for body in completions] == ["tool-caller"] * 4
        assert server.authorizations[0] == "Bearer EMPTY"  # no OPENAI_API_KEY: the placeholder
    tk.validate_row(row)
    assert row["steps"][0]["tool"] == "get_order" and row["final_text"].startswith("Done:")
    # recorded exactly as the vllm: spec naming the same server and model records it
    for field in ("model_version", "sampling", "usage", "logprob", "n_tokens", "final_text", "finish_reason"):
        assert row[field] == pinned[field], field
    assert row["model_version"] == "tool-caller-served" and row["sampling"]["model"] == "tool-caller-served"
    assert agent.model == "tool-caller" and agent.resolved_spec() == f"vllm:tool-caller@{server.url}"


def test_bare_url_key_comes_from_openai_api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test")
    with ChatServer() as server:
        agent = tk.model_agent(server.url + "/", **FAST)
        assert agent([{"role": "user", "content": "hi"}], [])["content"] == "You said: hi"  # "echo" is listed first
        assert set(server.authorizations) == {"Bearer sk-local-test"}
        with pytest.raises(tk.ConfigError, match="contradicts"):
            tk.model_agent(server.url, base_url="http://elsewhere:8000/v1")


def test_bare_url_resolves_once_under_concurrent_first_calls():
    from concurrent.futures import ThreadPoolExecutor

    with ChatServer() as server:
        agent = tk.model_agent(server.url, **FAST)
        with ThreadPoolExecutor(max_workers=6) as pool:
            replies = list(pool.map(lambda i: agent([{"role": "user", "content": f"n{i}"}], []), range(6)))
        assert len(_listings(server)) == 1
    assert [reply["content"] for reply in replies] == [f"You said: n{i}" for i in range(6)]


def test_bare_url_judge_grades_rows():
    def graded_row(task, final):
        return {"schema_version": "1", "scenario_id": task, "prompt": f"Where is my order ({task})?",
                "steps": [{"text": final}], "final_text": final, "model_version": "policy-model"}  # fmt: skip

    rows = [graded_row("a", "ORD-1234 ships today."), graded_row("b", "I cannot help."), graded_row("c", "Order ORD-1234 is lost.")]
    # the server's rule, applied here independently: reward 1 when the conversation names ORD-1234
    expected = [1.0 if "ORD-1234" in r["final_text"] else 0.0 for r in rows]
    with ChatServer(models=["grader", "echo"]) as server:
        report = tk.grade(rows, judge=server.url, rubric="Name the order id.")
        direct = tk.grade(rows, tk.model_judge(server.url))
        judged = [body for path, body in server.requests if path.endswith("/chat/completions")]
    assert [r["judge_status"] for r in report.rows] == ["ok"] * 3
    assert [r["reward"] for r in report.rows] == expected == [r["reward"] for r in direct.rows]
    assert [r["reason"] for r in report.rows] == ["names ORD-1234", "no order id", "names ORD-1234"]
    assert {body["model"] for body in judged} == {"grader"} and all(body["temperature"] == 0 for body in judged)
    meta = report.rows[0]["judge_meta"]
    assert meta["model"] == f"vllm:grader@{server.url}" and meta["rubric_hash"] and meta["temperature"] == 0.0


def test_server_listing_no_models_is_an_error_naming_the_url():
    with ChatServer(models=[]) as server:
        agent = tk.model_agent(server.url, **FAST)
        with pytest.raises(tk.errors.BackendError, match=re.escape(f"{server.url}: the server lists no models")) as caught:
            agent([{"role": "user", "content": "hi"}], [])
        assert caught.value.status == "no_models"
        assert "vllm:<model>@" in str(caught.value)
        row = tk.run_rollout(agent, "hi", user=False)
        try:  # today the judge asks on its first row (a row status); a judge that pins its model up front raises
            report = tk.grade([{"schema_version": "1", "prompt": "p", "steps": [{"text": "t"}], "final_text": "t"}], server.url)
            assert report.rows[0]["judge_status"] == "error"
            judge_error = report.rows[0]["judge_meta"]["error"]
        except tk.errors.BackendError as error:
            judge_error = str(error)
        # a server that starts listing later (weights loaded) is asked again: failures are not cached
        server.models = ["echo"]
        assert agent([{"role": "user", "content": "hi"}], [])["content"] == "You said: hi"
    assert row["ended_by"] == "lost" and server.url in row["lost_detail"] and row["model_version"] == server.url
    assert f"{server.url}: the server lists no models" in judge_error


def test_unreachable_bare_url_is_an_error_naming_the_url():
    url = _closed_port_url()
    agent = tk.model_agent(url, max_retries=1, **FAST)
    with pytest.raises(tk.errors.BackendError, match=re.escape(f"{url}: cannot list the served models at GET {url}/models")) as caught:
        agent([{"role": "user", "content": "hi"}], [])
    # first contact: a refused connection is not retried
    assert caught.value.status == "connection" and caught.value.retries == 0 and caught.value.first_contact
    assert "connection refused" in str(caught.value) and "never answered" in str(caught.value)


# -- a server that is not there: give up on first contact ----------------------------------------

# Seconds per request in these tests: short, so the bound below is a behaviour check (no
# retries, no backoff schedule), not a speed benchmark.
SILENT_TIMEOUT = 1.0
# A request's connect and read phases each get the timeout: 2 x timeout at most, plus 1 s slack.
FIRST_CONTACT_BOUND = 2 * SILENT_TIMEOUT + 1.0


@pytest.fixture
def silent_url():
    """A socket that accepts connections (the kernel's backlog does) and never replies."""
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"


@pytest.mark.parametrize("spec", ["vllm:some-model@{url}", "{url}", "anthropic:some-model"])
def test_a_silent_server_fails_on_first_contact_within_two_timeouts(silent_url, spec):
    options = {"api_key": "k", "base_url": silent_url} if spec.startswith("anthropic") else {}
    agent = tk.model_agent(spec.format(url=silent_url), timeout=SILENT_TIMEOUT, max_retries=3, **options)
    began = time.perf_counter()
    with pytest.raises(tk.errors.BackendError) as caught:
        agent([{"role": "user", "content": "hi"}], [])
    elapsed = time.perf_counter() - began
    assert elapsed < FIRST_CONTACT_BOUND, elapsed
    error = caught.value
    assert error.status == "timeout" and error.retries == 0 and error.first_contact is True
    assert silent_url.removesuffix("/v1") in str(error) and "no reply within 1 s" in str(error)
    began = time.perf_counter()
    row = tk.run_rollout(agent, "hi", user=False)
    assert time.perf_counter() - began < FIRST_CONTACT_BOUND
    assert row["ended_by"] == "lost" and row["lost_reason"] == "server_unreachable"
    assert silent_url.removesuffix("/v1") in row["lost_detail"] and "no reply within 1 s" in row["lost_detail"]


def test_a_refused_connection_fails_on_first_contact_without_backoff():
    url = _closed_port_url()
    # the default backoff (0.5 s base): retrying 3 times would sleep >= 0.875 s before failing
    agent = tk.model_agent(f"vllm:some-model@{url}", timeout=SILENT_TIMEOUT, max_retries=3)
    began = time.perf_counter()
    with pytest.raises(tk.errors.BackendError) as caught:
        agent([{"role": "user", "content": "hi"}], [])
    assert time.perf_counter() - began < FIRST_CONTACT_BOUND
    error = caught.value
    assert error.status == "connection" and error.retries == 0 and error.first_contact is True
    assert str(error).startswith(f"vllm:some-model@{url}: connection refused") and agent.retries_made == 0
    row = tk.run_rollout(agent, "hi", user=False)
    assert row["lost_reason"] == "server_unreachable" and "connection refused" in row["lost_detail"]


def test_once_the_server_has_answered_dropped_connections_are_retried():
    with ChatServer() as gone:
        agent = tk.model_agent(f"vllm:echo@{gone.url}", max_retries=2, **FAST)
        assert agent([{"role": "user", "content": "hi"}], [])["content"] == "You said: hi"
        assert agent.server_answered
    # the server has stopped: a live server's transient error now, retried with backoff
    with pytest.raises(tk.errors.BackendError) as caught:
        agent([{"role": "user", "content": "hi"}], [])
    assert caught.value.status == "connection" and caught.value.retries == 2 and not caught.value.first_contact
    assert tk.run_rollout(agent, "hi", user=False)["lost_reason"] == "agent_error"


def test_an_error_status_is_an_answer_so_it_is_retried_even_on_first_contact(server):
    stubborn = _agent(server, "always-429", max_retries=1)
    with pytest.raises(tk.errors.BackendError) as caught:
        stubborn([{"role": "user", "content": "hi"}], [])
    assert caught.value.status == 429 and caught.value.retries == 1 and not caught.value.first_contact
    assert stubborn.server_answered


def test_reference_logprobs_under_a_bare_url():
    row = {"schema_version": "1", "prompt": "refund A1", "final_text": "Refund done for you",
           "steps": [{"text": "Refund done for you"}], "logprob": -3.0, "n_tokens": 4}  # fmt: skip
    with ChatServer() as server:
        out = tk.reference_logprobs([row], server.url)
        sent = [body for path, body in server.requests if body.get("prompt_logprobs") is not None]
    scored = out.rows[0]
    assert scored["ref_status"] == "ok", scored.get("ref_error")
    assert scored["ref_logprob"] == pytest.approx(math.fsum(token_logprob(t) for t in tokenize("Refund done for you")))
    assert sent and all(body["model"] == "echo" for body in sent)


def test_a_missing_sdk_names_the_extra_to_install(monkeypatch):
    # an install without the `models` extra: None in sys.modules makes `import openai` fail
    # exactly as a missing package does; the error says what to run
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(tk.ConfigError, match=r"pip install 'toolkit\[models\]'"):
        tk.model_agent("vllm:some-model@http://127.0.0.1:9/v1")
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(tk.ConfigError, match=r"'anthropic' package.*pip install 'toolkit\[models\]'"):
        tk.model_agent("anthropic:claude", api_key="k")


# ---- issue 16: what real servers need, tested here at two values each (the real server in tests/real) ----


def test_tool_choice_auto_is_sent_with_tools_and_none_sends_nothing(server):
    messages = [{"role": "user", "content": "Where is ORD-1234?"}]
    _agent(server, "tool-caller")(messages, TOOLS)
    assert [b for p, b in server.requests if b.get("model") == "tool-caller"][-1]["tool_choice"] == "auto"
    _agent(server, "tool-caller", tool_choice=None)(messages, TOOLS)
    assert "tool_choice" not in [b for p, b in server.requests if b.get("model") == "tool-caller"][-1]
    _agent(server, "echo")(messages, [])
    assert "tool_choice" not in [b for p, b in server.requests if b.get("model") == "echo"][-1]  # no tools, no choice
    with pytest.raises(tk.ConfigError, match="tool_choice must be"):
        tk.model_agent(f"vllm:x@{server.url}", tool_choice="sometimes")


def test_response_format_json_object_is_sent_only_when_asked(server):
    messages = [{"role": "user", "content": "hi"}]
    _agent(server, "echo", response_format="json_object")(messages, [])
    assert [b for p, b in server.requests if b.get("model") == "echo"][-1]["response_format"] == {"type": "json_object"}
    _agent(server, "echo")(messages, [])
    assert "response_format" not in [b for p, b in server.requests if b.get("model") == "echo"][-1]
    with pytest.raises(tk.ConfigError, match="response_format must be"):
        tk.model_agent(f"vllm:x@{server.url}", response_format="yaml")
    with pytest.raises(tk.ConfigError, match="Anthropic Messages API has no response_format"):
        tk.model_agent("anthropic:claude", api_key="k", response_format="json_object")
    # a mapping goes out as given (the server's dialect), copied: changing the caller's dict
    # afterwards changes nothing sent
    shape = {"type": "json_object", "schema": dict(tk.grading.JUDGE_VERDICT_SCHEMA)}
    agent = _agent(server, "echo", response_format=shape)
    shape["schema"] = {"type": "string"}
    agent(messages, [])
    sent = [b for p, b in server.requests if b.get("model") == "echo"][-1]["response_format"]
    assert sent == {"type": "json_object", "schema": tk.grading.JUDGE_VERDICT_SCHEMA}
    with pytest.raises(tk.ConfigError, match="needs a 'type' string"):
        tk.model_agent(f"vllm:x@{server.url}", response_format={"schema": {}})
    with pytest.raises(tk.ConfigError, match="must be JSON"):
        tk.model_agent(f"vllm:x@{server.url}", response_format={"type": "json_object", "schema": {1, 2}})


def test_logprobs_also_ask_top_logprobs_zero(server):
    _agent(server, "echo", logprobs=True)([{"role": "user", "content": "hi"}], [])
    body = [b for p, b in server.requests if b.get("model") == "echo"][-1]
    assert body["logprobs"] is True and body["top_logprobs"] == 0


def test_a_turn_past_the_budget_is_flagged_counted_and_warned(server):
    # the fake server ignores max_tokens for tool calls (as llama-cpp-python does): a call of
    # tokenize('[{"name": ...}]') tokens against a budget of 2
    def run(max_tokens):
        agent = _agent(server, "tool-caller", max_tokens=max_tokens)
        return tk.simulate(agent, tools=TOOLS, budget=3, max_turns=2, concurrency=1, seed=0, progress=False)

    tight, roomy = run(2), run(200)
    assert tight.rows and all(r["turns_over_budget"] >= 1 for r in tight.rows)
    flagged = [s for r in tight.rows for s in r["steps"] if s.get("over_budget")]
    assert flagged and all(s["output_tokens"] > 2 for s in flagged)
    turns = sum(r["turns_over_budget"] for r in tight.rows)
    assert any(w.startswith(f"{turns} agent turns in {len(tight.rows)} rows ran past the reply budget (max_tokens=2)") for w in tight.warnings)
    assert not any("turns_over_budget" in r for r in roomy.rows) and not any("ran past the reply budget" in w for w in roomy.warnings)


def test_a_turn_at_the_budget_is_counted_and_warned(server):
    data = tk.simulate(_agent(server, "length"), tools=TOOLS, budget=2, max_turns=1, concurrency=1, seed=0, progress=False)
    assert data.rows and all(r["turns_at_budget"] == 1 for r in data.rows)
    assert any("stopped at the reply budget" in w for w in data.warnings)
    echo = tk.simulate(_agent(server, "echo"), tools=TOOLS, budget=2, max_turns=1, concurrency=1, seed=0, progress=False)
    assert not any("turns_at_budget" in r for r in echo.rows) and not any("stopped at the reply budget" in w for w in echo.warnings)


def test_rows_record_the_server_and_its_stated_version(server):
    agent = _agent(server, "echo")
    assert agent([{"role": "user", "content": "hi"}], [])["server"] == {
        "url": server.url, "model": "echo-served", "software": None, "version": None,
    }  # the fake server states no version: recorded as unknown, not guessed
    server.version = "0.9.1"
    try:
        row = tk.run_rollout(_agent(server, "echo"), "hello", user=False)  # a new agent asks once
    finally:
        server.version = None
    assert row["server"] == {"url": server.url, "model": "echo-served", "software": "vLLM", "version": "0.9.1"}
    assert [p for p, _ in server.requests].count("/version") >= 2


def test_a_server_that_trickles_its_version_holds_the_agent_at_most_the_probe_budget(server):
    # the probe runs under the agent's lock: a /version answer sent a byte every 0.4 s (19
    # bytes: ~8 s) held every rollout thread of the agent until it ended; now the probe gives
    # up at its total budget and the row says the version is unknown
    budget = tk.agents.backends._VERSION_PROBE_TOTAL_SECONDS
    server.version, server.trickle_seconds = "0.9.1", 0.4
    try:
        agent = _agent(server, "echo")
        began = time.monotonic()
        reply = agent([{"role": "user", "content": "hi"}], [])
        held = time.monotonic() - began
    finally:
        server.version, server.trickle_seconds = None, None
    assert reply["server"]["version"] is None and reply["content"]
    assert held < budget + 2.0  # the completion itself takes milliseconds on this server
    # the same server answering at once: the version is recorded
    server.version = "0.9.1"
    try:
        assert _agent(server, "echo")([{"role": "user", "content": "hi"}], [])["server"]["version"] == "0.9.1"
    finally:
        server.version = None


def test_the_server_url_on_rows_drops_credentials():
    assert tk.agents.backends._public_url("http://user:secret@host:8000/v1?key=abc#x") == "http://host:8000/v1"


def test_prompt_template_chatml_scores_a_chat_through_echo(server):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    before = len(server.requests)
    _agent(server, "echo").prompt_logprobs(messages, "Hello there")  # this server has vLLM's chat prompt_logprobs
    assert all(p.endswith("/chat/completions") for p, _ in server.requests[before:])
    scored = _agent(server, "echo", prompt_template="chatml").prompt_logprobs(messages, "Hello there")
    sent = [b for p, b in server.requests if p.endswith("/completions") and not p.endswith("/chat/completions")][-1]
    assert sent["prompt"] == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nHello there"
    # independent reference: the fake server's own tokenizer and logprob rule
    assert scored.n_tokens == len(tokenize("Hello there"))
    assert scored.logprob == pytest.approx(math.fsum(token_logprob(t) for t in tokenize("Hello there")))
    with pytest.raises(tk.ConfigError, match="prompt_template must be"):
        tk.model_agent(f"vllm:x@{server.url}", prompt_template="llama3")


def test_logprobs_that_do_not_spell_the_reply_are_trimmed_or_refused():
    spell = tk.agents.backends._spelling
    tokens = [{"token": t, "logprob": -1.0} for t in ["Hi", " there", "<|", "im_end", "|>"]]
    assert [t["token"] for t in spell(tokens, "Hi there")] == ["Hi", " there"]  # the stop string the server removed
    assert spell(tokens, "Hi there<|im_end|>") == tokens
    assert spell(tokens, "Hello") is None and spell(tokens, "") is None
    # "café" with the é split over two tokens: their strings do not spell it, their bytes do
    # (OpenAI's logprobs carry each token's bytes); without bytes the turn has no sum
    split = [{"token": "caf", "logprob": -1.0}, {"token": "\ufffd", "logprob": -2.0}, {"token": "\ufffd", "logprob": -0.5}]
    assert spell(split, "café") is None
    assert spell(split, "café", [list(b"caf"), [0xC3], [0xA9]]) == split
    assert spell(split + [{"token": "<|im_end|>", "logprob": -0.1}], "café", [list(b"caf"), [0xC3], [0xA9], list(b"<|im_end|>")]) == split
    assert spell(split, "cafe", [list(b"caf"), [0xC3], [0xA9]]) is None
