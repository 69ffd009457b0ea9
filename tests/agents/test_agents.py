"""Agent shapes, resolution and model spec parsing (no network, no server)."""

import pytest

import toolkit as tk


def test_wrappers_state_the_shape_and_call_through():
    chat = tk.chat_agent(lambda *args: {"role": "assistant", "content": str(len(args))})
    message = tk.message_agent(lambda text, **kw: {"steps": [], "final_text": text})
    assert tk.agents.agent_shape(chat) == "chat" and chat([], [])["content"] == "2"
    assert tk.agents.agent_shape(message) == "message" and message("hi")["final_text"] == "hi"
    with pytest.raises(TypeError):
        tk.chat_agent("not callable")


def test_signature_rules():
    def two(messages, tools):
        return None

    def one(message):
        return None

    class Bound:
        def __call__(self, messages, tools):
            return None

    assert tk.agents.agent_shape(two) == "chat"
    assert tk.agents.agent_shape(one) == "message"
    assert tk.agents.agent_shape(Bound()) == "chat"
    assert tk.agents.agent_shape(tk.seeded_agent([])) == "chat"
    for ambiguous in (lambda: None, lambda a, b, c: None, lambda a, b=1: None, lambda *a, **k: None):
        with pytest.raises(tk.errors.AgentShapeError, match="message_agent"):
            tk.agents.agent_shape(ambiguous)
    with pytest.raises(TypeError):
        tk.agents.agent_shape(42)


def test_resolve_agent():
    fn = lambda messages, tools: None  # noqa: E731
    assert tk.agents.resolve_agent(fn) is fn
    agent = tk.agents.resolve_agent("vllm:my-model@http://127.0.0.1:9/v1")
    assert isinstance(agent, tk.agents.ModelAgent) and agent.model == "my-model"
    with pytest.raises(TypeError):
        tk.agents.resolve_agent(fn, temperature=0.2)


@pytest.mark.parametrize(
    "spec, provider, model, url",
    [
        ("openai:gpt-4o-mini", "openai", "gpt-4o-mini", None),
        ("vllm:Qwen/Qwen3-4B@http://host:8000/v1", "vllm", "Qwen/Qwen3-4B", "http://host:8000/v1"),
        ("ollama:llama3.1:8b", "ollama", "llama3.1:8b", "http://localhost:11434/v1"),
        ("ollama:qwen3@http://gpu:11434/v1", "ollama", "qwen3", "http://gpu:11434/v1"),
        ("anthropic:claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5", None),
    ],
)
def test_parse_model_spec(spec, provider, model, url):
    parsed = tk.agents.parse_model_spec(spec)
    assert (parsed.provider, parsed.model, parsed.base_url) == (provider, model, url)


def test_misspelled_prefix_fails_at_construction_with_did_you_mean():
    with pytest.raises(tk.ConfigError, match="did you mean 'openai'"):
        tk.model_agent("opneai:gpt-4o")
    with pytest.raises(tk.ConfigError, match="did you mean 'anthropic'"):
        tk.agents.resolve_agent("antropic:claude")
    with pytest.raises(tk.ConfigError, match="needs the server"):
        tk.model_agent("vllm:qwen")
    with pytest.raises(tk.ConfigError, match="looks like"):
        tk.model_agent("gpt-4o")


def test_missing_key_names_the_environment_variable(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(tk.ConfigError, match="OPENAI_API_KEY"):
        tk.model_agent("openai:gpt-4o-mini")
    with pytest.raises(tk.ConfigError, match="ANTHROPIC_API_KEY"):
        tk.model_agent("anthropic:claude-sonnet-4-5")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert tk.model_agent("openai:gpt-4o-mini").sampling == {"temperature": 1.0, "max_tokens": 512, "model": "gpt-4o-mini"}


def test_model_agent_option_validation():
    with pytest.raises(tk.ConfigError, match="temperature"):
        tk.model_agent("vllm:m@http://h/v1", temperature=3)
    with pytest.raises(tk.ConfigError, match="no log-probabilities"):
        tk.model_agent("anthropic:claude", api_key="x", logprobs=True)
    with pytest.raises(tk.ConfigError, match="max_retries"):
        tk.model_agent("vllm:m@http://h/v1", max_retries=-1)


def test_default_timeout_reproduces_the_reference_points():
    # docs/design/engine.md §10 item 30: 300 s at the 768-token reply budget, 1024 s at 4096.
    assert tk.agents.default_timeout(768) == 300.0 and tk.agents.default_timeout(4096) == 1024.0
    assert tk.model_agent("vllm:m@http://h/v1", max_tokens=4096).timeout == 1024.0
    assert tk.model_agent("vllm:m@http://h/v1").timeout == 300.0
