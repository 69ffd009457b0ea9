"""Every model path of the toolkit against a real third-party server: llama.cpp through
llama-cpp-python's OpenAI-compatible server, serving SmolLM2-135M-Instruct on the CPU
(fixture in conftest.py; docs/design/real_servers.md says what was measured).

Nothing here hard-codes what the model says: the assertions are on shapes, counts and
invariants, and where a number is checked it is against a reference computed apart from the
code under test (the installed llama_cpp package's version, the server's own model listing,
the model's logits evaluated in this process with llama_cpp and a numpy log-softmax).
"""

from __future__ import annotations

import importlib.metadata
import json
import sys
import textwrap
import threading
import urllib.request
from pathlib import Path

import numpy as np
import pytest

import toolkit as tk

pytestmark = pytest.mark.real_model

TOOLS = tk.dataset_path("tools/airline_support.json")
POLICY = Path(tk.dataset_path("tools/airline_support_policy.md")).read_text()
TOOL_NAMES = {spec.name for spec in tk.world.normalize_tools(json.loads(Path(TOOLS).read_text()))}
# Small budgets keep each test to tens of seconds on two shared cores: a tool-calling turn of
# this server is several completions (tool choice, arguments, follow-up), ~3-10 s here.
BUDGET_TOKENS = 32


def _listed_model(url: str) -> str:
    with urllib.request.urlopen(f"{url}/models", timeout=10) as reply:
        return json.loads(reply.read())["data"][0]["id"]


@pytest.fixture(scope="module")
def agent_run(llama_server):
    agent = tk.model_agent(llama_server.url, max_tokens=BUDGET_TOKENS, logprobs=True, max_retries=1)
    data = tk.simulate(agent, tools=TOOLS, system_prompt=POLICY, budget=4, max_turns=2, concurrency=1, logprobs=True, seed=0,
                       progress=False)  # fmt: skip
    return data


def test_agent_rows_carry_the_server_tool_calls_usage_and_identity(agent_run, llama_server):
    data = agent_run
    assert len(data.rows) >= 1, data.warnings
    listed = _listed_model(llama_server.url)
    version = importlib.metadata.version("llama_cpp_python")
    calls = 0
    for row in data.rows:
        tk.validate_row(row)
        # identity: the model the server lists, the package version the server states
        assert row["model_version"] == listed
        assert row["server"]["url"] == llama_server.url and row["server"]["version"] == version
        assert "llama.cpp" in row["server"]["software"]
        for step in row["steps"]:
            if "tool" in step:
                calls += 1
                assert step["tool"] in TOOL_NAMES and isinstance(step["arguments"], dict)
            if "output_tokens" in step:
                assert isinstance(step["input_tokens"], int) and step["input_tokens"] > 0
        assert row["usage"]["output_tokens"] == sum(s.get("output_tokens", 0) for s in row["steps"])
        assert row["finish_reason"] in ("stop", "tool", "length", "error")
    # the model does call tools through this server's OpenAI-shaped tool calls
    assert calls >= 1


def test_tool_choice_none_stops_the_tool_calls_auto_makes(agent_run, llama_server):
    # the other value of tool_choice on the same server and prompts (seed 0): "auto" (the
    # agent_run fixture) calls tools, "none" must call none
    auto_calls = sum("tool" in step for row in agent_run.rows for step in row["steps"])
    agent = tk.model_agent(llama_server.url, max_tokens=BUDGET_TOKENS, tool_choice="none", max_retries=1)
    data = tk.simulate(agent, tools=TOOLS, system_prompt=POLICY, budget=2, max_turns=1, concurrency=1, seed=0, progress=False)
    assert data.rows, data.warnings
    assert auto_calls >= 1 and sum("tool" in step for row in data.rows for step in row["steps"]) == 0


def test_budget_overruns_are_counted_per_turn_and_warned(agent_run):
    over = 0
    for row in agent_run.rows:
        turns = [s for s in row["steps"] if "output_tokens" in s]
        past = [s for s in turns if s["output_tokens"] > BUDGET_TOKENS]
        # invariant: a turn longer than the budget is flagged, and only such a turn
        assert all(s.get("over_budget") for s in past) and not any(s.get("over_budget") for s in turns if s not in past)
        assert row.get("turns_over_budget", 0) == len(past)
        over += len(past)
    warned = [w for w in agent_run.warnings if "ran past the reply budget" in w]
    assert bool(warned) == bool(over)
    if over:
        assert warned[0].startswith(f"{over} agent turns")


def test_turns_without_logprobs_are_counted_and_named(agent_run):
    for row in agent_run.rows:
        steps = [s for s in row["steps"] if "output_tokens" in s]
        scored = [s for s in steps if "logprob" in s]
        if len(scored) == len(steps):
            assert row["logprob"] == pytest.approx(sum(s["logprob"] for s in scored))
            continue
        assert row["logprob"] is None
        gaps = row["logprob_turns"]
        assert (gaps["scored"], gaps["missing"]) == (len(scored), len(steps) - len(scored))
        assert sum(gaps["reasons"].values()) == gaps["missing"]
        # the reasons and the note name what the server did, not the agent's kind
        assert all("the server sent no log-probabilities" in why or "spell" in why for why in gaps["reasons"])
        assert "the server sent no log-probabilities" in row["logprob_note"] or "spell" in row["logprob_note"]
        assert "use a model backend" not in row["logprob_note"]
    # the run's warning counts the rows, once each, under every reason they gave
    lacking = [row for row in agent_run.rows if row["logprob"] is None]
    warned = [w for w in agent_run.warnings if w.startswith("logprobs were asked for")]
    assert bool(warned) == bool(lacking)
    if lacking:
        assert f"but {len(lacking)} rows have logprob None" in warned[0]


def test_a_reply_cut_at_the_budget_is_flagged(llama_server):
    agent = tk.model_agent(llama_server.url, max_tokens=3, temperature=0.0)
    row = tk.run_rollout(agent, "Write a long story about a cat.", user=False)
    assert row["steps"][0]["output_tokens"] == 3 and row["steps"][0]["truncated"] is True
    assert row["turns_at_budget"] == 1 and row["finish_reason"] == "length"


def _own_logprob(gguf: Path, prompt: str, completion: str) -> float:
    """log P(completion | prompt) from the model's logits in this process: llama_cpp evaluates
    the tokens, numpy takes the log-softmax (an independent path from the server's echo)."""
    import llama_cpp

    llm = llama_cpp.Llama(model_path=str(gguf), logits_all=True, verbose=False, n_ctx=512, n_threads=1)
    head = llm.tokenize(prompt.encode(), add_bos=False, special=True)
    full = llm.tokenize((prompt + completion).encode(), add_bos=False, special=True)
    assert full[: len(head)] == head
    llm.eval(full)
    logits = np.asarray(llm.scores[: len(full)], dtype=np.float64)
    logsoftmax = logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)
    return float(sum(logsoftmax[i - 1, full[i]] for i in range(len(head), len(full))))


def test_prompt_logprobs_through_echo_match_the_models_own_logits(llama_server, gguf_path):
    # a ChatML prompt starts with SmolLM2's BOS token (<|im_start|>), as this server's echo needs
    prompt, completion = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", "Hello! How are you?"
    scored = tk.model_agent(llama_server.url).prompt_logprobs(prompt, completion)
    assert "".join(t["token"] for t in scored.tokens) == completion
    assert scored.logprob == pytest.approx(_own_logprob(gguf_path, prompt, completion), abs=1e-3)
    chat = tk.model_agent(llama_server.url, prompt_template="chatml").prompt_logprobs([{"role": "user", "content": "hi"}], completion)
    assert chat.logprob == pytest.approx(scored.logprob, abs=1e-6)  # the template renders the same prompt


def test_echo_without_a_leading_bos_is_refused_because_its_values_are_shifted(llama_server, gguf_path):
    # The reference shows why: the model's own logits give " Paris." after this prompt a
    # log-probability near -0.6 nats, while this server's echo reports about -26.6.
    assert _own_logprob(gguf_path, "The capital of France is", " Paris.") > -3
    with pytest.raises(tk.agents.BackendError, match="shifted by one token unless the prompt starts with the model's BOS"):
        tk.model_agent(llama_server.url).prompt_logprobs("The capital of France is", " Paris.")


def test_a_chat_without_prompt_logprobs_is_refused_naming_the_server(llama_server):
    with pytest.raises(tk.agents.BackendError, match="llama-cpp-python's server do not.*prompt_template='chatml'"):
        tk.model_agent(llama_server.url).prompt_logprobs([{"role": "user", "content": "hi"}], "Hello!")


def _text_rows(url: str, temperature: float, n: int = 4) -> list[dict]:
    agent = tk.model_agent(url, max_tokens=24, temperature=temperature, logprobs="tokens")
    asks = ["Say hello.", "Name a fruit.", "What is 2+2?", "Give me a colour.", "Name a city."]
    return [tk.run_rollout(agent, asks[i % len(asks)], user=False, rollout_index=i, seed=i, logprobs="tokens") for i in range(n)]


def test_logprobs_tokens_and_kl_of_the_model_to_itself(llama_server):
    reference = tk.model_agent(llama_server.url, prompt_template="chatml")
    for temperature in (1.0, 0.3):
        rows = _text_rows(llama_server.url, temperature)
        with_logprobs = [r for r in rows if r.get("logprob") is not None]
        assert with_logprobs, [r.get("logprob_note") for r in rows]
        for row in with_logprobs:
            assert len(row["token_logprobs"]) == row["n_tokens"] and row["logprob"] == pytest.approx(sum(row["token_logprobs"]))
        scored = tk.reference_logprobs(with_logprobs, reference)
        assert scored.n_scored >= 1, scored.failures
        kl = tk.mean_kl(scored.rows)
        # the same model scores the same tokens: the per-token log-ratio is ~0 at any
        # sampling temperature, because the server's logprobs are the untempered model's
        assert abs(kl.mean_kl) < 0.05, kl
        if temperature != 1.0:
            assert "before temperature" in kl.note


def test_model_judge_with_and_without_the_verdict_schema(llama_server):
    # Two values of response_format on the same four short rows (the agent's long rows
    # overflow this model's 2,048-token context: those verdicts fail with the server's 400,
    # named on the row). Without a schema this 135M model wraps its verdict in prose or
    # breaks the JSON; with the verdict schema as llama.cpp takes it, the server's grammar
    # holds it to {"reward": 0|1, "reason": ...}. Nothing here depends on what it says.
    rows = _text_rows(llama_server.url, 0.0)
    verdicts = {}
    for shape in (None, {"type": "json_object", "schema": tk.grading.JUDGE_VERDICT_SCHEMA}):
        judge = tk.model_judge(llama_server.url, max_tokens=96, response_format=shape)
        graded = list(tk.grade(rows, judge=judge))
        assert len(graded) == len(rows)
        for row in graded:  # every row: a verdict, or a failure with its reason
            assert row["judge_status"] in ("ok", "invalid_result", "error", "timeout")
            assert row["reward"] in (0, 1) if row["judge_status"] == "ok" else row["reward"] is None and row["reason"]
        verdicts[shape is not None] = sum(row["judge_status"] == "ok" for row in graded)
    # the schema is the difference between no parsed verdict and (nearly) all of them
    assert verdicts[True] >= len(rows) - 1 and verdicts[True] > verdicts[False], verdicts


def test_model_user_model_writer_and_llm_grade_in_one_run(llama_server):
    data = tk.simulate(tk.model_agent(llama_server.url, max_tokens=BUDGET_TOKENS), tools=TOOLS, system_prompt=POLICY, budget=2,
                       max_turns=2, concurrency=1, seed=1, progress=False, user_model=llama_server.url, simulator=llama_server.url,
                       llm_grade=llama_server.url)  # fmt: skip
    assert data.rows, data.warnings
    failed = 0
    for row in data.rows:  # the judge ran on every row: a verdict or a named failure, never silence
        assert row["llm_judge_status"] in ("ok", "invalid_result", "error", "timeout", "missing_reward")
        if row["llm_judge_status"] == "ok":
            assert row["llm_reward"] in (0, 1)
        else:
            failed += 1
            assert row["llm_reward"] is None and row["llm_reason"]
    # a row the judge gave no verdict is counted in the run's warnings, with its status
    assert any(w.startswith(f"llm_grade: {failed} of ") for w in data.warnings) == bool(failed), data.warnings
    writer = data.report()["writer"]
    assert writer["calls"] >= 1 and writer["phrasings_written"] + writer["phrasings_from_template"] >= len(data.rows)
    for row in data.rows:
        assert row["user_model"] and row["writer_model"]
        assert isinstance(row["prompt"], str) and row["prompt"].strip()


RUNNER = textwrap.dedent('''
    """A what-if runner that asks the real model (the URL comes from the test)."""
    import toolkit as tk

    URL = None


    def run(trace_input, replay_config, tool_cache):
        agent = tk.model_agent(URL, max_tokens=24, temperature=0.0)
        prompt = replay_config.system_prompt or trace_input.original_system_prompt or ""
        reply = agent([{"role": "system", "content": prompt}, {"role": "user", "content": trace_input.user_message}], [])
        return {"text": reply["content"] or "", "tool_calls": []}
''')


def test_what_if_runner_that_calls_the_model(llama_server, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "real_model_runner.py").write_text(RUNNER)
    monkeypatch.syspath_prepend(str(tmp_path))
    import real_model_runner

    real_model_runner.URL = llama_server.url
    from toolkit.whatif.examples import write_example

    config_path, _ = write_example(tmp_path / "whatif.config.yaml")
    text = config_path.read_text().replace("python:toolkit.whatif.examples:support_agent", "python:real_model_runner:run")
    text = text.replace("limit: 20", "limit: 6").replace("max_workers: 4", "max_workers: 2")
    config_path.write_text(text)
    verdict = tk.whatif.fork(str(config_path))
    assert verdict.state in ("ship", "dont_ship", "inconclusive")
    results = list(verdict.trace_results)
    assert len(results) == 12  # 6 failures and 6 baselines, each replayed once through the model
    scored = [r for r in results if r.status == "scored"]
    assert scored, [r.failure_message for r in results]
    assert all(r.failure_message for r in results if r.status != "scored")  # a trace not scored says why
    for result in scored:
        # the replayed output is the model's reply, scored by the example's grounding scorer
        assert isinstance(result.replayed_output, str) and 0 <= result.replayed_score <= 1
        assert result.delta == pytest.approx(result.replayed_score - result.original_score)
    sys.modules.pop("real_model_runner", None)


def test_a_server_that_goes_away_mid_run_ends_it_with_the_rows_kept(server_factory):
    server = server_factory()
    landed: list[dict] = []

    def on_row(row):
        landed.append(row)
        if len(landed) == 2:
            threading.Thread(target=server.stop, daemon=True).start()

    try:
        agent = tk.model_agent(server.url, max_tokens=16, max_retries=1, backoff=(0.1, 0.2))
        data = tk.simulate(agent, tools=TOOLS, system_prompt=POLICY, budget=12, max_turns=1, concurrency=1, seed=2, progress=False,
                           on_row=on_row, advanced={"dead_agent_consecutive": 3})  # fmt: skip
    finally:
        server.stop()
    assert data.stopped_because == "agent_failed"
    assert len(data.rows) == len(landed) >= 2
    assert any("looks dead" in w for w in data.warnings), data.warnings
