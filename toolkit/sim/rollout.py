"""One conversation, agent <-> simulated person <-> world, turned into one row (schema v1).

``tk.run_rollout(agent, prompt, tools=..., situation=...)`` drives a chat-shaped agent turn by
turn: tool calls go to the world (a human tool, ``kind: "human"``, goes to the person), text
turns go to the simulated person, who answers questions, follows up or walks away (see
:mod:`toolkit.sim.user`). A message-shaped agent is called once with the prompt (docs/design/engine.md §4.4:
callables are single-turn). The row carries the steps, the messages rebuilt from them, the
world's fault ledger, how the conversation ended, usage, timing, the planted-mistake truth
list, log-probabilities when asked, and the policy's identity.

Lost rollouts (docs/design/engine.md §2.4, docs/design/engine.md §9 item 3). A reply that cannot be graded is never
silently dropped and never crashes the caller: a reply whose values are unusable
(``bad_reply``: a message-shaped ``final_text`` of None, a chat tool call without a name), tool
arguments that are not a JSON object (``bad_tool_arguments``), neither text nor tool calls
(``empty_reply``), raw tool-call markup in the visible text (``tool_markup``), an agent that
raises (``agent_error``) or does not answer within ``timeout`` seconds (``timeout``), and a
model backend whose server never answered at all (``server_unreachable``: refused, or silent
for its whole timeout, on first contact) end the rollout as LOST: ``on_lost="return"``
(default) returns the partial row with ``ended_by="lost"``, ``lost_reason`` and
``lost_detail``; ``on_lost="raise"`` raises :class:`LostRollout` carrying the same row. The
caller (the engine) decides whether to re-roll; survivors of re-rolls are not missing at
random, which is why the reason is kept.

Replies of an impossible type are not lost rollouts. A reply whose Python type no reply of
the agent's shape can have (None, a number, a list, an SDK object, a dict with none of the
shape's keys: :mod:`toolkit.agents._protocol` draws the line) is a bug in the agent's code
that every rollout would repeat, so :class:`~toolkit.errors.AgentReplyError` is raised on
the first one, whatever ``on_lost`` says. A message-shaped agent's plain ``str`` is accepted
as its final text; its text step carries ``plain_text_reply: True``.

A message-shaped agent's step that cannot be a row step (not a dict, no ``user`` / ``tool`` /
``text``, arguments that are not an object) never costs the row: it is set aside in
``row["unmapped_steps"]`` (``position``, the step, ``error``) and the other steps and the
final answer are kept and graded. Arguments double-encoded as a JSON string of an object are
decoded, and the step carries ``arguments_decoded: True``.

Timeouts. With a ``timeout``, each agent call runs on a reusable daemon worker thread (one
is started only when none is idle; no thread per call) and the rollout stops waiting after
``timeout`` seconds; ``timeout=None`` calls the agent in the rollout's own thread, and so does
``"auto"`` for a seeded policy (in-process, it cannot hang). Python cannot kill a thread: an
abandoned call keeps running in the background until it returns on its own (its result is then
discarded). Model backends also pass the timeout to their SDK, so their requests do end.

Where we differ from the reference (whileai-sdk's engine, docs/design/engine.md): a message-shaped callable never receives simulated-user
turns; ``max_turns`` caps agent completions and a rollout cut there says ``turn_cap`` instead of
passing as finished; every assistant text turn (the final one included) is a text step.
"""

from __future__ import annotations

import contextvars
import json
import math
import os
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any

from toolkit._util.hashing import sha256_hex
from toolkit.agents import SeededAgent, agent_shape, resolve_agent
from toolkit.agents._protocol import BadReply, TurnContext, _turn_context, check_message_reply, has_tool_markup, normalize_reply
from toolkit.errors import AgentReplyError, ConfigError, LostRollout, ToolkitError
from toolkit.rows import messages_from_steps, validate_row
from toolkit.rows._schema import _Privileged
from toolkit.sim.user import SimulatedUser
from toolkit.situations import world_for
from toolkit.world import World, normalize_tools, rollout_context

__all__ = ["run_rollout", "LostRollout", "AgentReplyError", "LOST_REASONS", "ENDED_BY"]

#: Why a rollout can be lost. ``server_unreachable``: a model backend's server never answered
#: (:attr:`toolkit.errors.BackendError.first_contact`); no later rollout will fare better.
LOST_REASONS = ("agent_error", "bad_reply", "bad_tool_arguments", "empty_reply", "tool_markup", "timeout", "server_unreachable", "auth_failed")
#: How a rollout can end.
ENDED_BY = ("agent_done", "user_left", "turn_cap", "lost")

_FINISH_REASONS = {
    "stop": "stop", "end_turn": "stop", "stop_sequence": "stop", "eos": "stop",
    "length": "length", "max_tokens": "length",
    "tool_calls": "tool", "tool_use": "tool", "function_call": "tool", "tool": "tool",
}  # fmt: skip


#: Seconds per agent completion when neither the call nor the agent says (docs/design/engine.md §10 item 30).
DEFAULT_TIMEOUT = 300.0
_GRACE_SECONDS = 5.0


class _AgentTimeout(Exception):
    pass


class _CallWorkers:
    """Reusable daemon threads for agent calls that carry a timeout.

    Starting a thread per call cost ~3x a fast agent's own run time (measured: a 6 ms
    seeded rollout took 17 ms with a thread per call); a parked worker picks a call up in
    ~20 us. A worker whose call outlives its timeout is simply not parked again until the
    call returns on its own (Python cannot kill a thread), so a hung call never blocks later
    ones: a new worker is started when none is idle. Idle workers end after
    ``_IDLE_SECONDS`` so a finished run leaves no threads behind for long.
    """

    _IDLE_SECONDS = 30.0  # a worker idle this long exits; runs keep theirs busy far more often

    def __init__(self) -> None:
        self._reset()
        # A forked child (a process-pool executor) inherits the idle list but none of the
        # threads behind it: handing a call to one of those inboxes would hang until timeout.
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue] = []

    def submit(self, job: tuple) -> None:
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
        if inbox is None:
            inbox = queue.SimpleQueue()
            threading.Thread(target=self._work, args=(inbox,), name="toolkit-agent-call", daemon=True).start()
        inbox.put(job)

    def _work(self, inbox: queue.SimpleQueue) -> None:
        while True:
            try:
                job = inbox.get(timeout=self._IDLE_SECONDS)
            except queue.Empty:
                with self._lock:
                    if inbox in self._idle:
                        self._idle.remove(inbox)
                        return
                continue  # handed a job while timing out: it is already in the inbox
            context, fn, args, box, done = job
            try:
                box["value"] = context.run(fn, *args)
            except BaseException as error:  # handed back to the waiting thread
                box["error"] = error
            finally:
                done.set()
            del job, context, fn, args, box, done  # drop references before parking
            with self._lock:
                self._idle.append(inbox)


_WORKERS = _CallWorkers()

#: The running simulate()'s cancel event, set by the engine around each rollout on its own pool:
#: once set (Ctrl-C, the end of the run), a pool thread stops waiting for its agent call, so the
#: pool's non-daemon threads end and the process can exit (issue 21, row 9).
_RUN_CANCEL: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar("toolkit_run_cancel", default=None)
_CANCEL_POLL_S = 0.1


def _call_with_timeout(fn: Callable[..., Any], args: tuple, timeout: float | None) -> Any:
    """Call ``fn(*args)`` carrying this context; with a ``timeout``, on a reusable daemon
    worker (:class:`_CallWorkers`) that the caller stops waiting for after ``timeout`` s.
    ``timeout=None`` runs the call in this thread (no worker at all)."""
    context = contextvars.copy_context()
    cancel = _RUN_CANCEL.get()
    if timeout is None and cancel is None:
        return context.run(fn, *args)
    box: dict[str, Any] = {}
    done = threading.Event()
    _WORKERS.submit((context, fn, args, box, done))
    if cancel is None:
        finished = done.wait(timeout)
    else:
        end = None if timeout is None else time.monotonic() + timeout
        while not (finished := done.wait(_CANCEL_POLL_S if end is None else max(0.0, min(_CANCEL_POLL_S, end - time.monotonic())))):
            if cancel.is_set():
                raise _AgentTimeout("the run was interrupted while this call ran (the call keeps running in the background)")
            if end is not None and time.monotonic() >= end:
                break
    if not finished:
        raise _AgentTimeout(f"no reply within {timeout:g} s (the call keeps running in the background; Python cannot kill a thread)")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _call_until(fn: Callable[..., Any], args: tuple, timeout: float | None, stop: Any = None, poll: float = 0.05) -> Any:
    """:func:`_call_with_timeout` that also gives up when ``stop`` (a ``threading.Event``) is
    set, checked every ``poll`` s: a grader that hangs must not hold a run past its clock or
    its stop (issue 21, row 7). Raises :class:`_AgentTimeout` either way, saying which."""
    if stop is None:
        return _call_with_timeout(fn, args, timeout)
    context = contextvars.copy_context()
    box: dict[str, Any] = {}
    done = threading.Event()
    _WORKERS.submit((context, fn, args, box, done))
    end = None if timeout is None else time.monotonic() + timeout
    while not done.wait(poll if end is None else max(0.0, min(poll, end - time.monotonic()))):
        if stop.is_set():
            raise _AgentTimeout("cut off by the run's stop (the call keeps running in the background; Python cannot kill a thread)")
        if end is not None and time.monotonic() >= end:
            raise _AgentTimeout(f"no reply within {timeout:g} s (the call keeps running in the background; Python cannot kill a thread)")
    if "error" in box:
        raise box["error"]
    return box["value"]


_ARGUMENT_VALIDATORS: dict[str, Any] = {}

#: The longest agent reply text a row keeps, in characters. A 50 MB reply made four rows a
#: 1.78 GB file and 1.56 GB of memory, with no word said (issue 21, row 12); 1,000,000
#: characters is ~250k tokens, above any context window a served model has today, so a
#: reply this long is a runaway, not an answer. The rest is cut, marked and counted.
MAX_REPLY_CHARS = 1_000_000
# The reason a row gives for turns without a log-probability when the agent is not a model
# backend (a callable that returns none): logprob_turns["reasons"] keys it.
_NO_LOGPROB_FROM_AGENT = "the agent returned no log-probability (not a model backend)"


def _capped(text: str) -> tuple[str, int]:
    """(``text`` cut at :data:`MAX_REPLY_CHARS` with a marker saying how much went, chars cut)."""
    if len(text) <= MAX_REPLY_CHARS:
        return text, 0
    cut = len(text) - MAX_REPLY_CHARS
    return text[:MAX_REPLY_CHARS] + f" [... {cut:,} characters cut by the toolkit: the reply exceeded {MAX_REPLY_CHARS:,}]", cut


def _argument_problems(spec: Any, arguments: Any) -> list[str]:
    """Why ``arguments`` break ``spec``'s parameter schema (at most 5 reasons), or [].

    Undeclared keys are refused too when the schema declares properties and says nothing of
    ``additionalProperties``: tool calling sends the declared ones only, so an extra key is
    the agent's mistake, not the world's data. Validators are built once per schema."""
    if spec is None or not isinstance(arguments, Mapping):
        return []
    schema = spec.parameters
    key = json.dumps(schema, sort_keys=True, default=str)
    validator = _ARGUMENT_VALIDATORS.get(key)
    if validator is None:
        import jsonschema  # a core dependency; imported on first use (see world/tools.py)

        strict = dict(schema)
        if "properties" in strict and "additionalProperties" not in strict:
            strict["additionalProperties"] = False
        validator = jsonschema.Draft202012Validator(strict)
        if len(_ARGUMENT_VALIDATORS) >= 1024:
            _ARGUMENT_VALIDATORS.clear()
        _ARGUMENT_VALIDATORS[key] = validator
    problems = []
    for error in validator.iter_errors(dict(arguments)):
        where = ".".join(str(p) for p in error.absolute_path) or "arguments"
        problems.append(f"{where}: {error.message}")
        if len(problems) >= 5:
            break
    return sorted(problems)


def _check_options(prompt: Any, rollout_index: Any, max_turns: Any, timeout: Any, logprobs: Any, on_lost: Any, seed: Any) -> None:
    if not isinstance(prompt, str) or not prompt.strip():
        raise ConfigError(f"prompt must be a non-empty string; got {prompt!r}")
    if isinstance(rollout_index, bool) or not isinstance(rollout_index, int) or rollout_index < 0:
        raise ConfigError(f"rollout_index must be an integer >= 0; got {rollout_index!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"seed must be an int; got {seed!r}")
    if isinstance(max_turns, bool) or not isinstance(max_turns, int) or not 1 <= max_turns <= 500:
        raise ConfigError(f"max_turns must be an integer in [1, 500]; got {max_turns!r}")
    if timeout is not None and timeout != "auto" and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        raise ConfigError(f"timeout must be 'auto', None or a number of seconds > 0; got {timeout!r}")
    if logprobs not in (False, True, "tokens", None):
        raise ConfigError(f"logprobs must be False, True or 'tokens'; got {logprobs!r}")
    if on_lost not in ("return", "raise"):
        raise ConfigError(f"on_lost must be 'return' or 'raise'; got {on_lost!r}")


def _model_name(agent: Any, reply_model: Any, sampling: Mapping[str, Any] | None) -> str:
    for candidate in (reply_model, getattr(agent, "model", None), (sampling or {}).get("model")):
        if isinstance(candidate, str) and candidate:
            return candidate
    inner = getattr(agent, "__wrapped__", agent)
    return "callable:" + str(getattr(inner, "__qualname__", type(inner).__name__))


def run_rollout(
    agent: Any,
    prompt: str,
    *,
    tools: Any = None,
    world: Any = None,
    user: Any = None,
    situation: Any = None,
    system_prompt: str | None = None,
    rollout_index: int = 0,
    seed: int = 0,
    logprobs: bool | str = False,
    max_turns: int = 15,
    avg_turns: int = 12,
    patience: Any = "normal",
    fault_rate: float = 0.5,
    timeout: float | str | None = "auto",
    sampling: Mapping[str, Any] | None = None,
    privileged: Mapping[str, Any] | None = None,
    on_lost: str = "return",
) -> dict:
    """Run one conversation and return its row (schema v1); see the module docstring.

    Parameters
    ----------
    agent : callable, SeededAgent or str
        A chat- or message-shaped callable (:func:`toolkit.agents.agent_shape`), a seeded policy,
        or a model spec string (``"openai:gpt-4o-mini"``, resolved with
        :func:`toolkit.agents.resolve_agent`).
    prompt : str or Prompt
        The opening message (a non-empty string), or a :class:`toolkit.situations.Prompt` from
        :func:`toolkit.write_prompts` (its ``text`` is sent; its ``reference`` is an id the
        simulated person knows).
    tools : Any, default None
        Keyword-only, like everything after ``prompt``. The tool list (any shape
        :func:`toolkit.world.normalize_tools` accepts); None uses a seeded agent's own tools (no
        tools for any other agent).
    world : World, callable or None, default None
        None builds a fresh :class:`toolkit.World`: from ``situation`` via
        :func:`toolkit.situations.world_for` at ``fault_rate`` when one is given (keyed by the prompt),
        else a plain World at ``seed``. A World is used as is. A callable
        ``execute(tool, arguments)`` is your own world (no fault schedule).
    user : SimulatedUser, False or None, default None
        None = the template person of ``situation`` (``patience``, ``avg_turns``, ``seed``);
        False = nobody answers (the rollout ends at the agent's first text turn); or a
        :class:`toolkit.sim.SimulatedUser`. A message-shaped agent never gets a person.
    situation : Situation, Mapping or None, default None
        A Situation (or its dimensions dict): stamps ``scenario_id`` / ``scenario_dimensions``
        and shapes the world and the person; its ``privileged`` block is used when
        ``privileged`` is None.
    system_prompt : str or None, default None
        The policy: the first (system) message a chat-shaped agent receives, and part of the
        row's ``messages``, ``policy_version`` and ``lineage`` (sha, head, length). A
        message-shaped agent is called with the prompt alone.
    rollout_index : int, default 0
        Which rollout of this prompt this is (an integer >= 0): recorded on the row, handed
        to the agent (``TurnContext``) and the person, and part of their draws.
    seed : int, default 0
        Seeds the world, the template person and the agent's turn context, and is recorded
        on the row (an int; bools are refused).
    logprobs : bool or "tokens", default False
        True records ``logprob`` / ``n_tokens`` per agent turn and on the row; ``"tokens"``
        also keeps the per-token list (``step["tokens"]``, row ``token_logprobs``). None
        counts as False.
    max_turns : int, default 15
        Cap on agent completions, in [1, 500] (``ended_by="turn_cap"`` when hit).
    avg_turns : int, default 12
        Target conversation length of the template person built when ``user`` is None (it
        speaks at most ``avg_turns // 2`` times); not read otherwise.
    patience : str, Mapping or tuple, default "normal"
        How long the template person built when ``user`` is None keeps answering questions
        (:func:`toolkit.sim.resolve_patience`); not read otherwise.
    fault_rate : float, default 0.5
        The per-prompt chance that a faulted situation's fault plan is kept, used only when
        the world is built here from ``situation`` (``world`` None and a situation given).
    timeout : float, "auto" or None, default "auto"
        Seconds per agent completion (> 0). "auto": a model backend's own timeout plus 5 s
        (so its error arrives first), none for a seeded policy, else 300 s; None: no limit
        (the call runs in this thread). A call that overruns loses the rollout (``timeout``).
    sampling : Mapping[str, Any] or None, default None
        How your own callable samples, recorded on the row as given (a reply's own
        ``sampling`` or the agent's ``sampling`` attribute wins).
    privileged : Mapping[str, Any] or None, default None
        The teacher-only block (reference, hidden_state); kept on the in-memory row for the
        judge, scrubbed on every write. A reply's ``conditioning`` dict (a seeded policy's
        digest of that block) is copied onto the turn's first step and is written, so a
        written row can still be re-scored exactly.
    on_lost : {"return", "raise"}, default "return"
        "return" the lost row (``ended_by="lost"``) or "raise" :class:`LostRollout`.

    Returns
    -------
    dict
        The row (schema v1), including ``privileged`` when there is one.

    Raises
    ------
    ConfigError
        An option out of range, or a ``world``, ``user`` or ``situation`` of the wrong kind.
    AgentReplyError
        On the agent's first reply of an impossible type, whatever ``on_lost`` says. Message
        shape: not a ``str`` or a dict, a dict with neither ``final_text`` nor ``steps``, or a
        ``final_text`` that is neither a ``str`` nor None. Chat shape: not a ``str`` or a dict
        (None, a number, a list, an SDK object), a dict with neither ``content`` nor
        ``tool_calls``, a ``content`` not a ``str`` / None / list of parts, a ``tool_calls``
        not a list, or a tool call not a dict. Right types with unusable values (empty text,
        a message-shaped ``final_text`` of None, tool arguments that are not JSON, a
        nameless tool call) lose the rollout instead: a real model produces those now and
        then, and a re-roll may fare better.
    LostRollout
        With ``on_lost="raise"``, when the rollout is lost.
    """
    reference_ids: tuple[str, ...] = ()
    if not isinstance(prompt, str) and isinstance(getattr(prompt, "text", None), str):
        # A tk.write_prompts Prompt: its text is the message, its reference an id the person knows.
        reference = getattr(prompt, "reference", None)
        reference_ids = (str(reference),) if reference else ()
        prompt = prompt.text
    _check_options(prompt, rollout_index, max_turns, timeout, logprobs, on_lost, seed)
    if isinstance(agent, str):
        agent = resolve_agent(agent)
    shape = agent_shape(agent)
    if timeout == "auto" and isinstance(agent, SeededAgent):
        timeout = None  # in-process policy: it cannot hang, so no worker hand-off per call
    if timeout == "auto":
        own = getattr(agent, "timeout", None)
        # A model backend times its own requests out; waiting a little longer lets its error
        # (which names the backend) arrive first. Anything else gets the reference's 300 s.
        timeout = float(own) + _GRACE_SECONDS if isinstance(own, (int, float)) and not isinstance(own, bool) else DEFAULT_TIMEOUT
    if tools is None and isinstance(agent, SeededAgent):
        tools = agent.tools
    specs = normalize_tools(tools)
    dimensions = getattr(situation, "dimensions", situation) if situation is not None else None
    if dimensions is not None and not isinstance(dimensions, Mapping):
        raise ConfigError(f"situation must be a Situation or a dimensions dict; got {type(situation).__name__}")
    if privileged is None and situation is not None:
        privileged = getattr(situation, "privileged", None)
    if world is None:
        world = world_for(situation, specs, fault_rate=fault_rate, seed=seed, key=prompt) if situation is not None else World(specs, seed=seed)
    elif not isinstance(world, World):
        if not callable(world):
            raise ConfigError(f"world must be None, a tk.World or an execute(tool, arguments) callable; got {type(world).__name__}")
        world = World(specs, seed=seed, execute=world)
    if user is None and shape == "chat":
        user = SimulatedUser(situation, patience=patience, avg_turns=avg_turns, seed=seed)
    elif user is False or shape == "message":
        user = None
    elif not isinstance(user, SimulatedUser):
        raise ConfigError(f"user must be None, False or a tk.sim.simulated_user(...); got {type(user).__name__}")

    run = _Run(
        agent=agent, shape=shape, prompt=prompt, specs=specs, world=world, user=user, reference_ids=reference_ids,
        system_prompt=system_prompt, rollout_index=rollout_index, seed=seed, logprobs=logprobs,
        max_turns=max_turns, timeout=timeout, sampling=sampling, privileged=privileged,
    )  # fmt: skip
    # The rollout context (world state, situation) is set only around the world's calls
    # (``_Run.call_world``), never around the agent's: the agent under test must not read the
    # hidden state it is being tested against (issue 21, row 8).
    run.situation_id = getattr(situation, "id", None) if situation is not None else None
    if shape == "message":
        run.run_message()
    else:
        run.run_chat()
    row = run.row(situation, dimensions)
    if row["ended_by"] == "lost" and on_lost == "raise":
        raise LostRollout(row["lost_reason"], row["lost_detail"], row, run.lost_exception)
    return row


class _Run:
    def __init__(self, **kwargs: Any) -> None:
        self.__dict__.update(kwargs)
        self.steps: list[dict] = []
        self.final_text = ""
        self.ended_by = "agent_done"
        self.lost_reason: str | None = None
        self.lost_detail: str | None = None
        self.lost_exception: BaseException | None = None
        self.seeded: list[str] | None = [] if isinstance(self.agent, SeededAgent) else None
        self.turn_logprobs: list[float | None] = []
        self.turn_tokens: list[int | None] = []
        self.token_logprobs: list[float] = []
        self.input_tokens: list[int] = []
        self.output_tokens: list[int] = []
        self.finish_reason: str | None = None
        self.reply_sampling: Mapping[str, Any] | None = None
        self.reply_model: str | None = None
        self.agent_seconds = 0.0
        self.started = time.perf_counter()
        self.started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.unmapped_steps: list[dict] = []
        self.agent_scratch: dict = {}  # handed to the agent at every turn (TurnContext.scratch)
        self.spec_by_name = {spec.name: spec for spec in self.specs}
        self.bad_tool_arguments = 0  # tool calls refused for breaking their schema
        self.replies_truncated = 0  # replies cut at MAX_REPLY_CHARS
        self.turns_at_budget = 0  # turns that stopped at the reply budget (finish_reason "length")
        self.turns_over_budget = 0  # turns longer than the budget: the server did not apply it
        self.logprob_missing: Counter = Counter()  # why a model backend's turn had no logprobs
        self.server: dict | None = None  # the model server, as its last reply described it
        self.user_state = self.user.new_state(tools=self.specs, reference_ids=self.reference_ids) if self.user is not None else None

    # -- bookkeeping ---------------------------------------------------------------------

    def lose(self, reason: str, detail: str, exception: BaseException | None = None) -> None:
        self.ended_by = "lost"
        self.lost_reason = reason
        self.lost_detail = detail
        self.lost_exception = exception

    def lose_timeout(self, error: _AgentTimeout) -> None:
        """Lose the rollout to our own wait running out: ``timeout``, or ``server_unreachable``
        when the agent is a model backend whose server has never answered it. The two timers
        often end together (simulate(timeout=) sets both), and which one fires first must not
        decide how the loss is named."""
        if getattr(self.agent, "server_answered", None) is False:
            where = getattr(self.agent, "server_url", None) or "the model server"
            return self.lose("server_unreachable", f"{where}: {error}; the server has never answered this backend", error)
        return self.lose("timeout", str(error), error)

    def call_agent(self, *args: Any) -> Any:
        turn = len(self.turn_logprobs)
        # The teacher-only block reaches the toolkit's own seeded policy (whose simulated
        # mistakes include quoting it, and whose rows are scored against it) and no other
        # agent: an agent under test that reads the turn context must not find the answer key.
        # ``type(...) is``, not isinstance: a subclass could override how the block is used.
        privileged = self.privileged if type(self.agent) is SeededAgent else None
        context = TurnContext(
            prompt=self.prompt, rollout_index=self.rollout_index, seed=self.seed, turn=turn,
            logprobs=self.logprobs or False, timeout=self.timeout, privileged=privileged, scratch=self.agent_scratch,
        )  # fmt: skip
        token = _turn_context.set(context)
        began = time.perf_counter()
        try:
            return _call_with_timeout(self.agent, args, self.timeout)
        finally:
            self.agent_seconds += time.perf_counter() - began
            _turn_context.reset(token)

    def call_world(self, name: str, arguments: Any) -> Any:
        """The world's answer to one tool call, with :func:`tk.current_rollout` set for
        ``execute=`` functions (and only for them: agent calls run outside this block).

        Arguments that break the tool's schema (a wrong type, an undeclared key, a missing
        required one) get a tool error the agent sees, and the row counts them
        (``bad_tool_arguments``): the world used to answer them ``not_found`` / ``ok``, so a
        malformed call was recorded as a missing record (issue 21, row 15)."""
        problems = _argument_problems(self.spec_by_name.get(name), arguments)
        if problems:
            self.bad_tool_arguments += 1
            return {"status": "error", "reason": "bad_tool_arguments", "tool": name, "errors": problems}
        with rollout_context(self.prompt, self.rollout_index, situation_id=self.situation_id, seed=self.seed, world_state=self.world.world_state):
            return self.world.call(name, arguments)

    def note_turn(self, reply: Mapping[str, Any], first_step: dict) -> None:
        """Copy the per-turn extras of a reply onto the turn's first step."""
        usage = reply.get("usage") or {}
        if isinstance(usage, Mapping):
            for key, alias, bucket in (("input_tokens", "prompt_tokens", self.input_tokens), ("output_tokens", "completion_tokens", self.output_tokens)):
                # OpenAI's usage names are accepted too, since a callable often passes them on as is.
                value = usage.get(key, usage.get(alias))
                if isinstance(value, int) and not isinstance(value, bool):
                    first_step[key] = value
                    bucket.append(value)
        finish = reply.get("finish_reason")
        if finish is not None:
            self.finish_reason = _FINISH_REASONS.get(str(finish), str(finish))
        truncated = bool(reply.get("truncated")) or self.finish_reason == "length"
        if truncated:
            first_step["truncated"] = True
            self.turns_at_budget += 1
        if reply.get("over_budget") is True:
            first_step["over_budget"] = True
            self.turns_over_budget += 1
        if isinstance(reply.get("server"), Mapping):
            self.server = dict(reply["server"])
        if self.logprobs:
            logprob = reply.get("logprob")
            n_tokens = reply.get("n_tokens")
            ok = isinstance(logprob, (int, float)) and not isinstance(logprob, bool) and isinstance(n_tokens, int)
            if ok:
                first_step["logprob"] = float(logprob)
                first_step["n_tokens"] = int(n_tokens)
                if self.logprobs == "tokens" and isinstance(reply.get("tokens"), list):
                    first_step["tokens"] = list(reply["tokens"])
                    self.token_logprobs.extend(float(t.get("logprob", 0.0)) for t in reply["tokens"] if isinstance(t, Mapping))
            self.turn_logprobs.append(float(logprob) if ok else None)
            self.turn_tokens.append(int(n_tokens) if ok else None)
            if not ok and isinstance(reply.get("logprob_missing"), str):
                self.logprob_missing[reply["logprob_missing"]] += 1
        else:
            self.turn_logprobs.append(None)
            self.turn_tokens.append(None)
        conditioning = reply.get("conditioning")
        if isinstance(conditioning, Mapping) and conditioning:
            # What the turn was drawn from beyond the messages (a seeded policy's digest of the
            # teacher-only reference): kept on the written row, where ``privileged`` is
            # scrubbed, so the policy can re-score its own turn exactly.
            first_step["conditioning"] = dict(conditioning)
        if isinstance(reply.get("sampling"), Mapping):
            self.reply_sampling = dict(reply["sampling"])
        if isinstance(reply.get("model"), str):
            self.reply_model = reply["model"]
        for kind in reply.get("seeded") or []:
            if self.seeded is None:
                self.seeded = []
            if kind not in self.seeded:
                self.seeded.append(kind)

    # -- the two shapes ------------------------------------------------------------------

    def run_message(self) -> None:
        try:
            raw = self.call_agent(self.prompt)
        except _AgentTimeout as error:
            return self.lose_timeout(error)
        except Exception as error:
            return self.lose(_reason_of(error), f"{type(error).__name__}: {error}", error)
        self.turn_logprobs.append(None)
        self.turn_tokens.append(None)
        # an impossible type raises AgentReplyError here, out of the rollout (not a lost row)
        result, plain = check_message_reply(raw, agent=_agent_label(self.agent))
        steps, final_text = result.get("steps", []), result.get("final_text")
        if steps is None:
            steps = []
        if isinstance(steps, tuple):
            steps = list(steps)
        if not isinstance(steps, list):
            self.unmapped_steps.append({"position": None, "step": _printable(steps), "error": f"'steps' must be a list of dicts, got {type(steps).__name__}"})
            steps = []
        # A step we cannot map is set aside on the row (``unmapped_steps``, with why), never
        # a reason to lose the row: the final answer is still gradable.
        for position, step in enumerate(steps):
            mapped, problem = self._map_step(step)
            if mapped is None:
                self.unmapped_steps.append({"position": position, "step": _printable(step), "error": problem})
            else:
                self.steps.append(mapped)
        if not isinstance(final_text, str):
            return self.lose("bad_reply", f"'final_text' must be a string, got {type(final_text).__name__}")
        final_text = self.cap(final_text)
        if isinstance(result.get("seeded"), list):
            self.seeded = list(result["seeded"])
        if not final_text.strip():
            return self.lose("empty_reply", "final_text is empty")
        if final_text.lstrip().startswith("<agent error"):
            return self.lose("agent_error", final_text[:200])
        if has_tool_markup(final_text):
            return self.lose("tool_markup", "final_text contains raw tool-call markup or a dumped tool schema")
        if plain:
            # a bare str was taken as the final text: the row says so, since the agent gave
            # no steps and no other field to tell it from a dict reply
            self.steps.append({"text": final_text, "plain_text_reply": True})
        elif not self.steps or self.steps[-1].get("text") != final_text:
            self.steps.append({"text": final_text})
        self.final_text = final_text

    def cap(self, text: str) -> str:
        capped, cut = _capped(text)
        if cut:
            self.replies_truncated += 1
        return capped

    def _map_step(self, step: Any) -> tuple[dict | None, str]:
        """A message-shaped agent's step as a row step, or (None, why it cannot be one).

        Tool arguments given as a JSON string that decodes to an object (the double-encoding
        of docs/design/engine.md §9.12) are decoded, and the step says so (``arguments_decoded: True``)."""
        if not isinstance(step, Mapping):
            return None, f"expected a step (dict), got {type(step).__name__}"
        mapped = dict(step)
        if "tool" in mapped and isinstance(mapped.get("arguments"), str):
            try:
                decoded = json.loads(mapped["arguments"])
            except json.JSONDecodeError:
                decoded = None
            if not isinstance(decoded, dict):
                return None, "tool step 'arguments' is a string that is not a JSON object"
            mapped["arguments"] = decoded
            mapped["arguments_decoded"] = True
        try:
            validate_row({"schema_version": "1", "prompt": self.prompt, "steps": [mapped], "final_text": ""})
        except ToolkitError as error:
            return None, str(error).replace("steps[0]", "step")
        return mapped, ""

    def run_chat(self) -> None:
        messages: list[dict] = []
        if self.system_prompt:
            messages.append({"role": "system", "content": self.system_prompt})
        messages.append({"role": "user", "content": self.prompt})
        # one shared, read-only payload per spec (to_openai deep-copies the schema: 0.2 ms a
        # rollout); each turn hands the agent fresh top-level copies
        tool_payload = [spec._openai_entry for spec in self.specs]
        human = {spec.name for spec in self.specs if spec.is_human}
        for turn in range(self.max_turns):
            try:
                raw = self.call_agent([dict(m) for m in messages], [dict(t) for t in tool_payload])
            except _AgentTimeout as error:
                return self.lose_timeout(error)
            except Exception as error:
                return self.lose(_reason_of(error), f"{type(error).__name__}: {error}", error)
            try:
                # an impossible type raises AgentReplyError out of the rollout (not a lost row)
                reply = normalize_reply(raw, call_id_prefix=f"call_{turn}", agent=_agent_label(self.agent))
            except BadReply as error:
                return self.lose(error.reason, error.detail)
            content = self.cap(reply["content"]) if isinstance(reply["content"], str) else reply["content"]
            calls = reply["tool_calls"]
            if calls:
                messages.append({"role": "assistant", "content": content, "tool_calls": calls})
                first = True
                for call, arguments in zip(calls, reply["parsed_arguments"]):
                    name = call["function"]["name"]
                    step: dict[str, Any] = {"tool": name, "arguments": arguments, "call_id": call["id"]}
                    if first:
                        if content:
                            step["text"] = content
                            self.final_text = content
                        self.note_turn(reply, step)
                    else:
                        step["turn_continued"] = True
                    if name in human:
                        if self.user is None:
                            result: Any = {"status": "error", "reason": "no_simulated_user", "tool": name}
                        else:
                            answer = self.user.answer_tool(name, arguments, messages, prompt=self.prompt, rollout_index=self.rollout_index, state=self.user_state)
                            if answer.action != "speak":
                                step["result"] = {"status": "user_left" if answer.action == "leave" else "no_answer", "reason": answer.reason}
                                self.steps.append(step)
                                self.ended_by = "user_left" if answer.action == "leave" else "turn_cap"
                                return None
                            result = {"status": "answered", "answer": answer.text}
                    else:
                        result = self.call_world(name, arguments)
                    step["result"] = result
                    self.steps.append(step)
                    messages.append({"role": "tool", "tool_call_id": call["id"], "content": _as_text(result)})
                    first = False
                continue
            # A text turn.
            step = {"text": content}
            self.note_turn(reply, step)
            self.steps.append(step)
            messages.append({"role": "assistant", "content": content})
            self.final_text = content
            if self.user is None:
                self.ended_by = "agent_done"
                return None
            move = self.user.respond(messages, prompt=self.prompt, rollout_index=self.rollout_index, state=self.user_state)
            if move.action == "leave":
                self.ended_by = "user_left"
                return None
            if move.action == "stop":
                self.ended_by = "turn_cap" if "?" in content else "agent_done"
                return None
            self.steps.append({"user": move.text})
            messages.append({"role": "user", "content": move.text})
        self.ended_by = "turn_cap"
        return None

    # -- the row ---------------------------------------------------------------------------

    def row(self, situation: Any, dimensions: Mapping[str, Any] | None) -> dict:
        sampling = self.reply_sampling or getattr(self.agent, "sampling", None) or (dict(self.sampling) if self.sampling else None)
        model = _model_name(self.agent, self.reply_model, sampling)
        prompt_sha = sha256_hex(self.system_prompt or "")[:16]
        row: dict[str, Any] = {
            "schema_version": "1",
            "prompt": self.prompt,
            "steps": self.steps,
            "final_text": self.final_text,
            "ended_by": self.ended_by,
            "rollout_index": self.rollout_index,
            "seed": self.seed,
            "faults": self.world.ledger,
            "world_state": self.world.world_state,
            "usage": {
                "input_tokens": sum(self.input_tokens) if self.input_tokens else None,
                "output_tokens": sum(self.output_tokens) if self.output_tokens else None,
            },
            "timing": {
                "started_at": self.started_at,
                "seconds": round(time.perf_counter() - self.started, 6),
                "agent_seconds": round(self.agent_seconds, 6),
            },
            "sampling": dict(sampling) if sampling else None,
            "model_version": model,
            "policy_version": f"{model}@{prompt_sha}",
            "lineage": {
                "system_prompt_sha": prompt_sha,
                "system_prompt_head": (self.system_prompt or "")[:120],
                "system_prompt_chars": len(self.system_prompt or ""),
            },
            "finish_reason": "error" if self.ended_by == "lost" else self.finish_reason,
        }
        try:
            row["messages"] = messages_from_steps(self.prompt, self.steps, self.system_prompt)
        except ToolkitError as error:  # a message-shaped agent's odd step; keep the row, say why
            row["messages"] = None
            row["messages_error"] = str(error)
        if self.unmapped_steps:
            row["unmapped_steps"] = list(self.unmapped_steps)
        if self.bad_tool_arguments:
            row["bad_tool_arguments"] = self.bad_tool_arguments
        if self.replies_truncated:
            row["replies_truncated"] = self.replies_truncated
        if self.turns_at_budget:
            row["turns_at_budget"] = self.turns_at_budget
        if self.turns_over_budget:
            row["turns_over_budget"] = self.turns_over_budget
        if self.server is not None:
            row["server"] = self.server
        if self.world.execute_errors:
            row["execute_errors"] = list(self.world.execute_errors)
        if self.world.execute is None:
            # what the agent did to the world (issue 17): the state grader reads it
            row["world_diff"] = self.world.diff
        if self.seeded is not None:
            row["seeded"] = list(self.seeded)
        if self.user is not None:
            row["user_model"] = self.user.name
        if self.logprobs:
            known = [lp for lp in self.turn_logprobs if lp is not None]
            if self.turn_logprobs and len(known) == len(self.turn_logprobs):
                row["logprob"] = math.fsum(known)
                row["n_tokens"] = sum(n for n in self.turn_tokens if n is not None)
                if self.logprobs == "tokens":
                    row["token_logprobs"] = list(self.token_logprobs)
            else:
                row["logprob"] = None
                row["n_tokens"] = None
                missing = len(self.turn_logprobs) - len(known)
                # why, turn by turn: a model backend says what the server did; any other agent
                # simply returned none
                reasons = dict(self.logprob_missing) or {_NO_LOGPROB_FROM_AGENT: missing}
                row["logprob_turns"] = {"scored": len(known), "missing": missing, "reasons": reasons}
                if self.logprob_missing:
                    why = "; ".join(f"{reason} ({n} turn{'s' if n != 1 else ''})" for reason, n in self.logprob_missing.most_common())
                    row["logprob_note"] = f"no log-probability on {missing} of {len(self.turn_logprobs)} turns: {why}"
                else:
                    row["logprob_note"] = (
                        f"the agent returned no log-probability on {missing} of "
                        f"{len(self.turn_logprobs)} turns; use a model backend or tk.seeded_agent for logprobs"
                    )
        if situation is not None:
            row["scenario_id"] = getattr(situation, "id", None) or sha256_hex(str(sorted((dimensions or {}).items())))[:16]
            row["scenario_dimensions"] = dict(dimensions or {})
        if self.privileged:
            # shown in a notebook as its keys only (data.trajectories, rows[0]): issue 21
            row["privileged"] = _Privileged(self.privileged)
        if self.ended_by == "lost":
            row["lost_reason"] = self.lost_reason
            row["lost_detail"] = self.lost_detail
        return row


def _reason_of(error: BaseException) -> str:
    status = getattr(error, "status", None)
    if getattr(error, "first_contact", False) is True and status in ("connection", "timeout"):
        # A model backend whose server never answered at all (BackendError.first_contact):
        # named apart from a live server's timeout, since no re-roll can fare better.
        return "server_unreachable"
    if status in (401, 403):
        # The server refused the credentials: every other call would be refused alike, so the
        # engine stops the run at once instead of retrying (issue 21, row 9).
        return "auth_failed"
    # A model backend that gave up waiting on a live server is a timeout too.
    return "timeout" if status == "timeout" else "agent_error"


def _agent_label(agent: Any) -> str:
    """The name an AgentReplyError gives the agent: the wrapped callable's qualified name."""
    inner = getattr(agent, "__wrapped__", agent)
    return str(getattr(inner, "__qualname__", None) or type(inner).__name__)


def _printable(value: Any) -> Any:
    """``value`` if JSON can hold it, else its repr (an unmapped step must still be writable)."""
    try:
        json.dumps(value, allow_nan=False)
        return value
    except (TypeError, ValueError):
        return repr(value)[:2000]


def _as_text(result: Any) -> str:
    return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)
