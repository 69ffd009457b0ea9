"""Agents: the two callable shapes, the offline seeded policy, and model backends.

* :mod:`toolkit.agents._protocol`: the message shape ``fn(message) -> {"steps", "final_text"}``
  and the chat shape ``fn(messages, tools) -> assistant message``; :func:`agent_shape`,
  :func:`chat_agent`, :func:`message_agent`.
* :mod:`toolkit.agents.seeded`: :func:`seeded_agent`, a stochastic policy with known
  probabilities and planted mistakes (the exact KL between two of them over whole rollouts is
  :func:`toolkit.sim.exact_kl`, since it runs rollouts).
* :mod:`toolkit.agents.backends`: :func:`model_agent` for ``openai:``, ``vllm:``, ``ollama:``
  and ``anthropic:`` specs through the official SDKs.

:func:`resolve_agent` turns whatever was passed as an agent into a callable.
"""

from __future__ import annotations

from typing import Any

from toolkit.agents._protocol import AGENT_SHAPES, AgentReplyError, AgentShapeError, agent_shape, chat_agent, message_agent
from toolkit.agents.backends import (
    MODEL_SPEC_PREFIXES,
    BackendError,
    ModelAgent,
    PromptLogprobs,
    default_timeout,
    model_agent,
    parse_model_spec,
)
from toolkit.agents.seeded import SEEDED_BEHAVIORS, SeededAgent, TurnOutcome, seeded_agent

__all__ = [
    "AGENT_SHAPES",
    "AgentReplyError",
    "AgentShapeError",
    "agent_shape",
    "chat_agent",
    "message_agent",
    "resolve_agent",
    "SEEDED_BEHAVIORS",
    "SeededAgent",
    "TurnOutcome",
    "seeded_agent",
    "MODEL_SPEC_PREFIXES",
    "BackendError",
    "ModelAgent",
    "PromptLogprobs",
    "default_timeout",
    "model_agent",
    "parse_model_spec",
]


def resolve_agent(agent: Any, **options: Any) -> Any:
    """A callable agent from a model spec string (``"openai:gpt-4o-mini"``) or a callable.

    Strings go to :func:`model_agent` with ``options``; callables are returned as they are
    after their shape is checked (:func:`agent_shape` raises for an ambiguous signature).

    Parameters
    ----------
    agent : str or callable
        A model spec string or bare server URL (built with :func:`model_agent`), or an agent
        callable of either shape (returned unchanged).
    **options
        Keyword options for :func:`model_agent` (temperature, max_tokens, ...); only valid
        with a spec string.

    Returns
    -------
    callable
        The :class:`ModelAgent` built from the spec, or ``agent`` itself.

    Raises
    ------
    TypeError
        When ``options`` are given with a callable, or ``agent`` is neither a string nor callable.
    AgentShapeError
        When a callable's shape is ambiguous.
    """
    if isinstance(agent, str):
        return model_agent(agent, **options)
    if options:
        raise TypeError(f"options {sorted(options)} only apply to model spec strings")
    agent_shape(agent)
    return agent
