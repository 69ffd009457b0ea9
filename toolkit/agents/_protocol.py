"""The two agent shapes, how we tell them apart, and how a reply is checked.

Two callable shapes are accepted everywhere an agent is:

* **message shape** (the single-turn callable of the reference, whileai-sdk's engine,
  docs/design/engine.md §4.4 "callables are single-turn"): ``fn(message: str) -> {"steps": [...], "final_text": str, "seeded"?: [...]}``.
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

Replies: a wrong type is a bug, a bad value is a glitch. A message-shaped agent may also
return a plain ``str``: it is taken as the final text (no steps) and the text step says so
(``plain_text_reply: True``); a chat agent's plain ``str`` is taken as the message's text.
Beyond that the line between the two failures is drawn by what a *model* can produce:

* :class:`AgentReplyError` (raised on the first such reply, never counted as a lost
  rollout): the reply's Python type is one no reply of the shape can have, so the code
  around the model is wrong and every rollout would repeat it. Message shape: anything but
  a ``str`` or a dict; a dict with neither ``final_text`` nor ``steps``; a ``final_text`` that
  is neither a ``str`` nor None. Chat shape: anything but a ``str`` or a dict (None, a
  number, a list, an SDK object such as the OpenAI ``ChatCompletionMessage``); a dict with
  neither ``content`` nor ``tool_calls``; a ``content`` that is not a ``str``, None or a
  list of content parts; a ``tool_calls`` that is not a list; a tool call that is not a dict.
* :class:`BadReply` / a lost rollout (re-rolled by the engine): the types are right but the
  values are unusable, which a real model does now and then: empty text, tool arguments
  that are not JSON or not an object, a tool call without a name, raw tool-call markup,
  ``<agent error`` text, a message-shaped ``final_text`` of None.
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

from toolkit.errors import AgentReplyError, AgentShapeError, BadReply

__all__ = [
    "AgentReplyError",
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

    The shape also fixes what a reply must be. Message: a dict ``{"steps", "final_text"}`` or
    a plain ``str`` (the final text). Chat: an assistant message dict with ``content`` and/or
    ``tool_calls``, or a plain ``str``. A reply of another *type* (None, a number, a list, an
    SDK object, a dict with none of those keys) makes :func:`toolkit.run_rollout` raise
    :class:`~toolkit.errors.AgentReplyError` at once; right types with unusable values (empty
    text, tool arguments that are not JSON) lose that one rollout instead (module docstring).

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


# How much of a wrong reply an AgentReplyError shows: enough to recognise the value, short
# enough that the message stays one readable line in a traceback.
_REPR_LIMIT = 200

#: What each shape's reply must look like, as the errors say it.
REPLY_SHAPES = {
    "message": "a dict {'steps': [...], 'final_text': str} or a plain str (taken as the final text)",
    "chat": (
        "an assistant message dict {'role': 'assistant', 'content': str | None, 'tool_calls': [...]} "
        "or a plain str (taken as the text)"
    ),
}


def _short_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 -- a broken __repr__ must not hide the real error
        text = f"<{type(value).__name__} with a failing repr>"
    return text if len(text) <= _REPR_LIMIT else text[:_REPR_LIMIT] + "..."


def _hint(shape: str, value: Any) -> str:
    """What the code most likely meant, for the mistakes we have seen; empty when unsure."""
    if value is None:
        return " (a function that returns None usually lacks a return statement)"
    if hasattr(value, "model_dump") and not isinstance(value, Mapping):
        # an SDK object (OpenAI's ChatCompletionMessage is a pydantic model)
        return " (an SDK object: return message.model_dump() instead)"
    if isinstance(value, Mapping):
        if shape == "chat" and ("final_text" in value or "steps" in value):
            return " (this is the message shape's reply: wrap a fn(message) agent as tk.message_agent(fn))"
        if shape == "message" and ("content" in value or "tool_calls" in value):
            return " (this is a chat message: a chat agent takes (messages, tools); wrap it as tk.chat_agent(fn))"
        if "choices" in value:
            return " (a whole completion response: return response['choices'][0]['message'])"
    if isinstance(value, (list, tuple)) and value and all(isinstance(item, Mapping) for item in value):
        return " (a list of messages: return the one new assistant message)"
    return ""


def reply_type_error(shape: str, value: Any, field: str = "the reply", wanted: str | None = None, agent: str | None = None) -> AgentReplyError:
    """The :class:`AgentReplyError` for a ``shape`` agent whose ``field`` holds ``value``.

    The message names the agent, the field, the expected shape and what came back: its type
    and a repr cut at 200 characters."""
    who = f"agent {agent!r} ({shape}-shaped)" if agent else f"a {shape}-shaped agent"
    expected = wanted or REPLY_SHAPES[shape]
    got = type(value).__name__
    message = f"{who}: {field} must be {expected}; got {got} {_short_repr(value)}{_hint(shape, value)}"
    return AgentReplyError(message, shape=shape, got=got)


def check_message_reply(reply: Any, agent: str | None = None) -> tuple[Mapping[str, Any], bool]:
    """A message-shaped agent's reply as a dict, and whether it was a plain ``str``.

    Raises :class:`AgentReplyError` for a reply of an impossible type (see the module
    docstring); the values inside are checked by the rollout, which loses the row for them."""
    if isinstance(reply, str):
        return {"steps": [], "final_text": reply}, True
    if not isinstance(reply, Mapping):
        raise reply_type_error("message", reply, agent=agent)
    if "final_text" not in reply and "steps" not in reply:
        raise reply_type_error("message", reply, wanted="a dict with 'final_text' (and 'steps'), or a plain str", agent=agent)
    final_text = reply.get("final_text")
    if final_text is not None and not isinstance(final_text, str):
        raise reply_type_error("message", final_text, field="reply['final_text']", wanted="a str", agent=agent)
    return reply, False


def normalize_reply(reply: Any, call_id_prefix: str = "call", agent: str | None = None) -> dict[str, Any]:
    """Check a chat agent's reply and return it in one canonical shape.

    The canonical shape is ``{"role": "assistant", "content": str | None, "tool_calls": [{"id",
    "type": "function", "function": {"name", "arguments": <JSON str>}}], "parsed_arguments":
    [dict, ...]}`` plus the optional extras the agent returned. A reply of an impossible type
    raises :class:`AgentReplyError` (naming ``agent``); a usable type with unusable values
    raises :class:`BadReply` with its ``.reason`` (see the module docstring for the line).
    """
    if isinstance(reply, str):
        reply = {"role": "assistant", "content": reply}
    if not isinstance(reply, Mapping):
        raise reply_type_error("chat", reply, agent=agent)
    if "content" not in reply and "tool_calls" not in reply:
        raise reply_type_error("chat", reply, wanted="a dict with 'content' and/or 'tool_calls', or a plain str", agent=agent)
    content = reply.get("content")
    if isinstance(content, list):  # content parts: keep the text parts
        content = "".join(
            part.get("text", "") for part in content if isinstance(part, Mapping)
        )
    if content is not None and not isinstance(content, str):
        raise reply_type_error("chat", content, field="reply['content']", wanted="a str, None or a list of content parts", agent=agent)
    raw_calls = reply.get("tool_calls") or []
    if not isinstance(raw_calls, (list, tuple)):
        raise reply_type_error("chat", raw_calls, field="reply['tool_calls']", wanted="a list of tool-call dicts", agent=agent)
    calls = []
    parsed = []
    for position, call in enumerate(raw_calls):
        if not isinstance(call, Mapping):
            raise reply_type_error(
                "chat", call, field=f"reply['tool_calls'][{position}]",
                wanted="a dict {'id', 'type': 'function', 'function': {'name', 'arguments'}}", agent=agent,
            )  # fmt: skip
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
