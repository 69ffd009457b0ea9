"""The two agent shapes, how we tell them apart, and how a reply is checked.

Two callable shapes are accepted everywhere an agent is:

* **message shape** (the reference's single-turn callable, docs/design/engine.md §4.4 "callables are
  single-turn"): ``fn(message: str) -> {"steps": [...], "final_text": str, "seeded"?: [...]}``.
  The callable answers its own tool calls; a rollout gives it the prompt once and never adds
  simulated-user turns.
* **chat shape**: ``fn(messages: list[dict], tools: list[dict]) -> assistant message``, an
  OpenAI-style dict ``{"role": "assistant", "content": str | None, "tool_calls": [{"id",
  "type": "function", "function": {"name", "arguments"}}]}``. ``arguments`` is a JSON string
  (the wire form) or a dict. Multi-turn rollouts drive this shape: the world answers the tool
  calls and the simulated user answers questions. A chat agent may add ``logprob``,
  ``n_tokens``, ``tokens``, ``usage``, ``finish_reason``, ``truncated``, ``sampling`` and
  ``model`` to the dict; the rollout copies them onto the step.

Where we differ from the reference: it guessed the shape of a callable and failed later, inside
a rollout, when the guess was wrong. We inspect the signature once, accept only the unambiguous
cases (exactly two required positional parameters -> chat; exactly one positional parameter ->
message) and raise :class:`AgentShapeError` for everything else, naming the two wrappers
:func:`chat_agent` / :func:`message_agent` that state the shape explicitly.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import inspect
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from toolkit.errors import AgentShapeError, BadReply

__all__ = [
    "AgentShapeError",
    "AGENT_SHAPES",
    "agent_shape",
    "chat_agent",
    "message_agent",
]

# --------------------------------------------------------------------------------------
# Plain text from a chat model (a simulated user's line, a writer's phrasings).

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
#: Tool-call syntax in what should be plain words: a person or a writer never types it.
TOOL_CALL_SYNTAX = re.compile(r"<tool_call>|<function|\"arguments\"\s*:|\bfunction_call\b|\{\s*\"name\"\s*:")


def complete_text(model: Callable[..., Any], messages: list[dict], **sampling: Any) -> str | None:
    """Ask a chat model ``model(messages, tools)`` for text: ``sampling`` (temperature,
    max_tokens) is passed only to a model that takes it (``tk.model_agent``'s agents do); the
    reply's content without ``<think>`` blocks, stripped, or None when it has no text."""
    reply = model(messages, [], **sampling) if getattr(model, "accepts_sampling", False) else model(messages, [])
    text = reply.get("content") if isinstance(reply, Mapping) else reply
    if not isinstance(text, str):
        return None
    return _THINK_BLOCK.sub("", text).strip()


#: The two callable shapes an agent may have.
AGENT_SHAPES = ("chat", "message")


class _ShapedAgent:
    """A callable with its shape stated explicitly (made by :func:`chat_agent` / :func:`message_agent`)."""

    def __init__(self, fn: Callable[..., Any], shape: str) -> None:
        if not callable(fn):
            raise TypeError(f"an agent must be callable; got {type(fn).__name__}")
        self.__wrapped__ = fn
        self.agent_shape = shape
        functools.update_wrapper(self, fn, updated=())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.__wrapped__(*args, **kwargs)

    def __repr__(self) -> str:
        return f"{self.agent_shape}_agent({getattr(self.__wrapped__, '__qualname__', self.__wrapped__)!r})"


def chat_agent(fn: Callable[..., Any]) -> _ShapedAgent:
    """Mark ``fn`` as chat-shaped: ``fn(messages, tools) -> assistant message dict``.

    Parameters
    ----------
    fn : callable
        The agent, called as ``fn(messages, tools)``; its signature is not inspected. Calls
        pass through to it unchanged, and its name and docstring are copied onto the wrapper.

    Returns
    -------
    callable
        A wrapper with ``agent_shape = "chat"``.

    Raises
    ------
    TypeError
        When ``fn`` is not callable.
    """
    return _ShapedAgent(fn, "chat")


def message_agent(fn: Callable[..., Any]) -> _ShapedAgent:
    """Mark ``fn`` as message-shaped: ``fn(message) -> {"steps", "final_text"}``.

    Parameters
    ----------
    fn : callable
        The agent, called as ``fn(message)``; its signature is not inspected. Calls pass
        through to it unchanged, and its name and docstring are copied onto the wrapper.

    Returns
    -------
    callable
        A wrapper with ``agent_shape = "message"``.

    Raises
    ------
    TypeError
        When ``fn`` is not callable.
    """
    return _ShapedAgent(fn, "message")


def agent_shape(fn: Any) -> str:
    """Return ``"chat"`` or ``"message"`` for an agent callable, or raise :class:`AgentShapeError`.

    An explicit ``agent_shape`` attribute (set by the wrappers and by the toolkit's own agents)
    wins. Otherwise the signature decides: two required positional parameters -> chat; exactly
    one positional parameter (required) -> message. Anything else (``*args``, a second optional
    parameter, no inspectable signature) is ambiguous and refused rather than guessed.

    Parameters
    ----------
    fn : Any
        The agent: anything with an ``agent_shape`` attribute (which must be ``"chat"`` or
        ``"message"``), or a callable whose signature is read.

    Returns
    -------
    str
        ``"chat"`` or ``"message"``.

    Raises
    ------
    AgentShapeError
        For an invalid declared ``agent_shape``, an unreadable signature, or a signature that
        fits neither shape.
    TypeError
        When ``fn`` declares no shape and is not callable.
    """
    declared = getattr(fn, "agent_shape", None)
    if declared is not None:
        if declared not in AGENT_SHAPES:
            raise AgentShapeError(
                f"agent_shape must be one of {AGENT_SHAPES}; got {declared!r}"
            )
        return declared
    if not callable(fn):
        raise TypeError(
            f"an agent must be a callable or a model spec string; got {type(fn).__name__}"
        )
    fix = "wrap it as tk.chat_agent(fn) for fn(messages, tools) or tk.message_agent(fn) for fn(message)"
    name = getattr(fn, "__qualname__", type(fn).__name__)
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        raise AgentShapeError(f"cannot read the signature of agent {name!r}; {fix}") from None
    positional = [
        p
        for p in signature.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    variadic = any(p.kind == p.VAR_POSITIONAL for p in signature.parameters.values())
    required = [p for p in positional if p.default is p.empty]
    if not variadic and len(required) == 2 and len(positional) == 2:
        return "chat"
    if not variadic and len(required) == 1 and len(positional) == 1:
        return "message"
    raise AgentShapeError(
        f"agent {name!r} has signature {signature}, which fits neither shape unambiguously "
        f"(chat: exactly two required positional parameters; message: exactly one); {fix}"
    )


# --------------------------------------------------------------------------------------
# Per-turn context handed to the toolkit's own agents (seeded policy, model backends).


@dataclasses.dataclass(frozen=True)
class TurnContext:
    """What a toolkit agent may know about the turn it is answering (set by run_rollout)."""

    prompt: str = ""
    rollout_index: int = 0
    seed: int = 0
    turn: int = 0
    logprobs: bool | str = False
    timeout: float | None = None
    privileged: Mapping[str, Any] | None = None
    #: One dict per rollout, the same at every turn: where a toolkit agent may keep what it
    #: derived from earlier turns (the seeded policy keeps its read of the conversation).
    scratch: dict | None = dataclasses.field(default=None, repr=False, compare=False)


_turn_context: contextvars.ContextVar[TurnContext | None] = contextvars.ContextVar(
    "toolkit_turn_context", default=None
)


def current_turn() -> TurnContext | None:
    """The :class:`TurnContext` of the agent call running in this context, if any."""
    return _turn_context.get()


# --------------------------------------------------------------------------------------
# Checking a chat reply.


# Raw tool-call markup leaking into visible text (Hermes/Qwen <tool_call>, Llama
# <|python_tag|>, Mistral [TOOL_CALLS], or a dumped OpenAI tool schema): docs/design/engine.md §2.4
# counts such replies as lost (`tool_markup`) instead of grading them.
_TOOL_MARKUP = re.compile(
    r"<tool_call>|</tool_call>|<\|python_tag\|>|\[TOOL_CALLS\]|<function_calls>|<invoke name="
    r"|\"type\"\s*:\s*\"function\"\s*,\s*\"function\"\s*:",
)


def has_tool_markup(text: str) -> bool:
    return bool(_TOOL_MARKUP.search(text or ""))


def normalize_reply(reply: Any, call_id_prefix: str = "call") -> dict[str, Any]:
    """Check a chat agent's reply and return it in one canonical shape, or raise :class:`BadReply`.

    The canonical shape is ``{"role": "assistant", "content": str | None, "tool_calls": [{"id",
    "type": "function", "function": {"name", "arguments": <JSON str>}}], "parsed_arguments":
    [dict, ...]}`` plus the optional extras the agent returned.
    """
    if isinstance(reply, str):
        reply = {"role": "assistant", "content": reply}
    if not isinstance(reply, Mapping):
        raise BadReply("bad_reply", f"a chat agent must return a dict, got {type(reply).__name__}")
    content = reply.get("content")
    if isinstance(content, list):  # content parts: keep the text parts
        content = "".join(
            part.get("text", "") for part in content if isinstance(part, Mapping)
        )
    if content is not None and not isinstance(content, str):
        raise BadReply("bad_reply", f"'content' must be a string or None, got {type(content).__name__}")
    raw_calls = reply.get("tool_calls") or []
    if not isinstance(raw_calls, (list, tuple)):
        raise BadReply("bad_reply", "'tool_calls' must be a list")
    calls = []
    parsed = []
    for position, call in enumerate(raw_calls):
        if not isinstance(call, Mapping):
            raise BadReply("bad_reply", f"tool_calls[{position}] is not a dict")
        function = call.get("function", call)
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str) or not function.get("name"):
            raise BadReply("bad_reply", f"tool_calls[{position}] has no function name")
        arguments = function.get("arguments", {})
        if arguments is None or arguments == "":
            arguments = {}
        if isinstance(arguments, str):
            try:
                decoded = json.loads(arguments)
            except json.JSONDecodeError as error:
                raise BadReply(
                    "bad_tool_arguments",
                    f"tool_calls[{position}] ({function['name']}): arguments are not valid JSON ({error.msg} at char {error.pos})",
                ) from None
            arguments = decoded
        if not isinstance(arguments, Mapping):
            raise BadReply(
                "bad_tool_arguments",
                f"tool_calls[{position}] ({function['name']}): arguments must be a JSON object, got {type(arguments).__name__}",
            )
        arguments = dict(arguments)
        calls.append(
            {
                "id": str(call.get("id") or f"{call_id_prefix}_{position}"),
                "type": "function",
                "function": {"name": function["name"], "arguments": json.dumps(arguments, ensure_ascii=False)},
            }
        )
        parsed.append(arguments)
    if content is not None and has_tool_markup(content):
        raise BadReply("tool_markup", "the visible text contains raw tool-call markup or a dumped tool schema")
    if not calls and not (content or "").strip():
        raise BadReply("empty_reply", "the reply has neither text nor tool calls")
    if (content or "").lstrip().startswith("<agent error"):
        raise BadReply("agent_error", (content or "")[:200])
    out = {key: value for key, value in reply.items() if key not in ("content", "tool_calls", "role")}
    out.update({"role": "assistant", "content": content, "tool_calls": calls, "parsed_arguments": parsed})
    return out
