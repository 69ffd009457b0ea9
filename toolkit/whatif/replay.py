"""Replay: call the user's runner on each trace's input with the change applied.

The runner contract (``target.runner = "python:<module.path>:<attr>"``)::

    run(trace_input: TraceInput, replay_config: ReplayConfig, tool_cache: ToolCache)
        -> str | {"text": str, "tool_calls": [...]} | object with a ``.text`` attribute

sync or ``async def`` (detected with :func:`inspect.iscoroutinefunction`, on the object or its
``__call__``). Tool calls are answered from the trace's recorded tool outputs through
``tool_cache.lookup(name, arguments)``; nothing live is called. Each lookup hands back a deep
copy of the recorded output, so a runner that edits what it got changes neither a later
lookup nor the recorded output the scorer sees. A recorded ``None`` output is a hit; an
unrecorded (name, arguments) pair raises :class:`ToolCacheMiss`, and a replay that missed the
cache fails with code ``tool_cache_miss`` even if the runner caught the error, because its
answer was produced without the tool's output.

Execution (docs/design/whatif.md §11.9: the reference's Jupyter problems). One engine,
:func:`arun_bounded`, runs a batch of calls on the event loop it is awaited on; the blocking
:func:`run_bounded` runs that engine on a fresh loop of its own.

- ``await arun_bounded(...)`` / ``await areplay_traces(...)`` use the CALLER's loop: an
  ``async def`` runner is awaited there, so it can use the clients, locks and queues the
  caller made on that loop (an ``httpx.AsyncClient`` opened in a notebook cell). A sync
  runner runs on a daemon thread and the loop awaits a loop future the thread settles, so
  the loop keeps serving other tasks meanwhile.
- ``run_bounded(...)`` / ``replay_traces(...)`` block: sync runners on a fresh loop made with
  ``asyncio.run`` on the calling thread when that thread runs no loop, else on a worker
  thread with its own loop (inside a notebook cell); async runners always on a worker thread,
  because only then can the caller stop waiting for a loop a runner has blocked (below).
- At most ``max_workers`` calls run at once (a sliding window, not waves). Each call gets
  ``timeout`` seconds of wall clock from its own start (status ``timeout``). A sync call over
  budget is abandoned, not killed (Python cannot kill a thread): its result is discarded and
  it is counted in ``abandoned_calls``, so a user sees that runners should set their own I/O
  timeouts.
- Blocking detection. Each async call's coroutine is driven by a timing wrapper that measures
  every synchronous step (each ``send``/``throw`` into it) and records when the current step
  began. A step lasting at least ``timeout`` blocked the loop (a sync HTTP call or
  ``time.sleep`` inside ``async def``): that call's status is ``blocked``, whatever it
  returned afterwards. The other async calls in flight during that step could not run;
  their deadlines move on by the step's length, so they are not charged for it.
- The batch has a wall-clock bound of ``(ceil(n / max_workers) + 1) x timeout + 1 s`` (a batch
  whose calls yield finishes within ``ceil(n / max_workers)`` timeouts; one more timeout and a
  second cover scheduling). When the bound passes, or the results are returned, the batch is
  closed: a call that has not started never will (a flag checked under the concurrency gate
  right before the user function is called), calls that never started are ``not_started``,
  calls that started and still had budget are ``starved``, both naming the blocking call.
- Where a block is seen. With the batch on a worker-thread loop (``run_bounded``), the caller
  waits on the thread until the bound; if the loop is then inside a step, it returns at
  once: that call is ``blocked`` (and abandoned: it goes on running until its step ends),
  the rest as above; when the step ends, the loop finds the batch closed, starts nothing and
  cancels what is left. With the caller's own loop (``arun_bounded``) nothing runs while a
  step blocks, not even a watchdog: the block is seen when the step returns, the batch is
  closed then if the bound has passed, and ``await arun_bounded(...)`` returns no sooner. A
  step that never returns holds the caller's loop for good, as any blocking call on it
  would; ``await asyncio.to_thread(replay_traces, ...)`` keeps the bound for a runner that
  may do that, at the price of the private loop.
- Only the runner's own coroutine is timed: a task it spawns (``asyncio.create_task``) that
  blocks the loop is not attributed to it; the batch bound still ends the batch, and the
  calls it cut off are ``not_started`` / ``starved`` without a named blocker.
- Trace metadata reaches the runner (``TraceInput.metadata``).

Every per-trace problem becomes a :class:`FailureRecord` with its own code (``runner_timeout``,
``runner_blocked_loop``, ``runner_not_started``, ``runner_starved``, ``runner_exception``,
``runner_invalid_output``, ``tool_cache_miss``, ``trace_skipped``); nothing crashes.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import inspect
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from toolkit._util.hashing import canonical_json
from toolkit._util.results import json_safe

__all__ = [
    "TraceInput",
    "ReplayConfig",
    "ReplayOutput",
    "ReplayResult",
    "ToolCache",
    "ToolCacheMiss",
    "FailureRecord",
    "CallOutcome",
    "arun_bounded",
    "run_bounded",
    "batch_bound",
    "is_async_callable",
    "areplay_traces",
    "replay_traces",
]

# Long exception messages are cut so one noisy runner cannot bloat the report (the reference
# uses the same 2048-character cap).
_MESSAGE_CAP = 2048

# Scheduling slack added to a batch's wall-clock bound (see :func:`batch_bound`): thread starts
# and timer lateness on a loaded machine, well under a second in practice.
_BOUND_SLACK_SECONDS = 1.0

# How long cancelled async calls get to unwind (leave their ``finally`` blocks, close a
# connection) once the batch bound has passed, before the batch returns without them.
# Ordinary cleanup takes milliseconds; one second is small beside a bound of several timeouts.
_GRACE_SECONDS = 1.0


@dataclasses.dataclass(frozen=True)
class TraceInput:
    user_message: str
    trace_id: str
    metadata: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    original_system_prompt: str | None = None
    recorded_tools: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class ReplayConfig:
    """The change under test; ``None`` means keep the runner's own default."""

    system_prompt: str | None = None
    model: str | None = None
    overrides: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class ReplayOutput:
    text: str
    tool_calls: tuple[Mapping[str, Any], ...] = ()


class ToolCacheMiss(LookupError):
    """The runner asked for a tool call the original trace did not record."""

    def __init__(self, trace_id: str, tool_name: str, n_arguments: int):
        # argument values stay out of the message: they may hold user data
        super().__init__(f"trace {trace_id}: no recorded output for tool {tool_name!r} with these {n_arguments} argument(s)")
        self.trace_id, self.tool_name = trace_id, tool_name


def _tool_key(name: str, arguments: Any) -> str:
    return f"{name}::{canonical_json({} if arguments is None else arguments)}"


class ToolCache:
    """Recorded tool outputs of one trace, looked up by (tool name, canonical JSON arguments).

    When a trace recorded the same call twice, the later output wins (the state the agent
    saw last), as in the reference. Every lookup returns a fresh deep copy of the recorded
    output, and ``calls`` keeps copies of its own (of the arguments too): the recorded
    objects are the trace's, and the scorer reads them as the original run's tool outputs, so
    a runner that edits what it was handed must not be able to change them.

    Parameters
    ----------
    records : iterable of ToolRecord
        The trace's recorded tool calls: objects with ``name``, ``arguments`` and ``result``
        (``arguments`` None counts as ``{}``).
    trace_id : str, optional
        The trace's id, named in :class:`ToolCacheMiss` messages; default ``""``.
    """

    def __init__(self, records, trace_id: str = ""):
        self._entries = {}
        for record in records:
            self._entries[_tool_key(record.name, record.arguments)] = record.result
        self.trace_id = trace_id
        self.calls: list[dict[str, Any]] = []
        self.misses: list[str] = []
        self._lock = threading.Lock()

    def __contains__(self, item) -> bool:
        name, arguments = item
        return _tool_key(name, arguments) in self._entries

    def lookup(self, tool_name: str, arguments: Any = None) -> Any:
        """The recorded output of ``tool_name`` called with ``arguments``, as a deep copy.

        Parameters
        ----------
        tool_name : str
            The tool's name as the trace recorded it.
        arguments : mapping or None, optional
            The call's arguments; matched by canonical JSON, so key order does not matter.
            None counts as ``{}``.

        Returns
        -------
        object
            A deep copy of the recorded output (``None`` when the trace recorded ``None``).

        Raises
        ------
        ToolCacheMiss
            When the trace recorded no such call; the miss is remembered in ``misses``.
        """
        key = _tool_key(tool_name, arguments)
        with self._lock:
            if key not in self._entries:
                self.misses.append(tool_name)
                raise ToolCacheMiss(self.trace_id, tool_name, len(arguments or {}))
            recorded = self._entries[key]
            self.calls.append({"tool": tool_name, "arguments": copy.deepcopy(arguments), "result": copy.deepcopy(recorded)})
            return copy.deepcopy(recorded)


@dataclasses.dataclass(frozen=True)
class FailureRecord:
    """One operational failure: a trace (or the run) that could not be replayed or scored."""

    id: str
    code: str
    stage: str  # ingest | replay | score | cache
    scope: str  # trace | run
    message: str
    trace_id: str | None = None
    cohort: str | None = None
    details: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: json_safe(getattr(self, f.name)) for f in dataclasses.fields(self)}


@dataclasses.dataclass(frozen=True)
class CallOutcome:
    """How one call of a batch ended.

    ``status`` is one of:

    - ``"ok"``: returned ``value`` within its budget;
    - ``"error"``: raised ``error`` (a ``TimeoutError`` the function raised itself included);
    - ``"timeout"``: ran past its ``timeout``;
    - ``"blocked"``: an async call one of whose synchronous steps lasted at least ``timeout``
      (or was still running when the batch returned): it blocked its event loop;
      ``blocked_seconds`` is that step's length (so far);
    - ``"not_started"``: the batch closed before the call could start; ``blocked_by`` is the
      key of the call that blocked the loop longest, or None;
    - ``"starved"``: started, but the batch closed while its own budget had not run out
      (another call held the loop); ``blocked_by`` as above.

    ``seconds`` is the call's wall-clock time (0 for ``not_started``); ``still_running`` says
    the call was still running when the batch returned (it is then counted as abandoned).
    """

    status: str
    value: Any = None
    error: BaseException | None = None
    seconds: float = 0.0
    blocked_seconds: float | None = None
    blocked_by: Any = None
    still_running: bool = False


def is_async_callable(function: Any) -> bool:
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(getattr(function, "__call__", None))


def batch_bound(n_calls: int, timeout: float, max_workers: int) -> float:
    """The wall-clock bound of a batch of ``n_calls``, in seconds.

    Calls that yield to their loop finish within ``ceil(n_calls / max_workers)`` timeouts
    (a sliding window never does worse than waves); one more timeout and
    ``_BOUND_SLACK_SECONDS`` cover scheduling. Past it the batch closes (see the module
    docstring).
    """
    waves = -(-n_calls // max_workers)
    return (waves + 1) * timeout + _BOUND_SLACK_SECONDS


async def _await(awaitable):
    return await awaitable


class _StepClock:
    """Times the synchronous steps of one async call.

    ``step_started`` is the start of the step running now (None between steps); a watchdog
    on another thread reads it to see a loop stuck inside this call. ``longest`` is the
    longest step so far. After each step the batch hears of it (``batch._after_step``).
    """

    __slots__ = ("_batch", "_key", "step_started", "longest")

    def __init__(self, batch: _Batch | None = None, key: Any = None):
        self._batch, self._key = batch, key
        self.step_started: float | None = None
        self.longest = 0.0

    def enter(self) -> None:
        self.step_started = time.monotonic()

    def leave(self) -> None:
        ended = time.monotonic()
        duration = ended - self.step_started
        self.step_started = None
        self.longest = max(self.longest, duration)
        if self._batch is not None:
            self._batch._after_step(self._key, duration, ended)


class _TimedAwaitable:
    """Await ``awaitable`` with each of its synchronous steps bracketed by ``clock``.

    A task runs a coroutine in steps: it sends a value (or throws an exception) in, and the
    coroutine runs synchronously until it yields a future or finishes. Awaiting this object
    puts a generator between the task and the coroutine's ``__await__()`` iterator that
    forwards each send/throw and calls ``clock.enter()`` before it and ``clock.leave()``
    after it. What crosses it is unchanged: yielded futures, sent values, thrown exceptions
    (``CancelledError`` included: the inner coroutine may catch it), the return value, the
    exception it raises, and ``close()``.
    """

    __slots__ = ("_iterator", "_clock")

    def __init__(self, awaitable: Any, clock: Any):
        # a generator-based coroutine (types.coroutine) is its own iterator and has no __await__
        self._iterator = awaitable.__await__() if hasattr(type(awaitable), "__await__") else awaitable
        self._clock = clock

    def __await__(self):
        iterator, clock = self._iterator, self._clock
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            clock.enter()
            try:
                if thrown is not None:
                    error, thrown = thrown, None
                    throw = getattr(iterator, "throw", None)
                    if throw is None:  # a bare iterator cannot take it: it surfaces here, as with yield from
                        raise error
                    signal = throw(error)
                elif sent is None:
                    signal = next(iterator)
                else:
                    signal = iterator.send(sent)
            except StopIteration as stop:
                return stop.value
            finally:
                clock.leave()
            try:
                sent = yield signal
            except GeneratorExit:
                close = getattr(iterator, "close", None)
                if close is not None:
                    close()
                raise
            except BaseException as error:  # forwarded on the next pass, timed like a send
                thrown, sent = error, None


class _Batch:
    """One batch of calls: its gate, deadline, closed flag and what each call did.

    The state is shared by the loop running the calls and, under :func:`run_bounded`, the
    calling thread watching the deadline, so it changes only under ``_lock``. Once
    ``_result`` is set the answer is final and late news from calls is ignored.
    """

    def __init__(self, jobs: list, timeout: float, max_workers: int, is_async: bool):
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, got {max_workers}")
        self.jobs = jobs
        self.timeout = float(timeout)
        self.max_workers = int(max_workers)
        self.is_async = is_async
        self.deadline = time.monotonic() + batch_bound(len(jobs), self.timeout, self.max_workers)
        self._lock = threading.Lock()
        self._closed = False
        self._result: tuple[dict, int] | None = None
        self._outcomes: dict[Any, CallOutcome] = {}
        self._started: dict[Any, float] = {}
        self._budget_end: dict[Any, float] = {}  # moves on when another call blocks the loop
        self._alive: set = set()  # started and not finished
        self._clocks: dict[Any, _StepClock] = {}
        self._scopes: dict[Any, asyncio.Timeout] = {}  # touched on the loop thread only
        self._blocking: dict[Any, float] = {}  # key -> its longest blocking step
        self._abandoned = 0  # sync calls left running past their timeout

    # -- bookkeeping ---------------------------------------------------------------------------

    def _try_start(self, key) -> float | None:
        """Admit ``key`` unless the batch is closed; the start time, or None."""
        now = time.monotonic()
        with self._lock:
            if self._closed or now >= self.deadline:
                # the deadline is checked here too: a call woken in the same loop pass as the
                # bound's timer may run before the code that sets the flag does
                self._closed = True
                return None
            self._started[key] = now
            self._budget_end[key] = now + self.timeout
            self._alive.add(key)
            return now

    def _record(self, key, outcome: CallOutcome, abandoned: bool = False) -> None:
        with self._lock:
            if self._result is None:
                self._outcomes[key] = outcome
                self._abandoned += abandoned

    def _close(self) -> None:
        with self._lock:
            self._closed = True

    def _after_step(self, key, duration: float, ended: float) -> None:
        """Called on the loop thread after each timed step of ``key``."""
        if duration < self.timeout:
            return
        with self._lock:
            self._blocking[key] = max(self._blocking.get(key, 0.0), duration)
            # every other running call was started before this step began (the loop was held),
            # so each lost exactly ``duration`` of its budget to it
            others = [other for other in self._alive if other != key]
            for other in others:
                self._budget_end[other] += duration
            if ended >= self.deadline:
                self._closed = True
        for other in others:
            scope = self._scopes.get(other)
            if scope is not None and not scope.expired() and scope.when() is not None:
                scope.reschedule(scope.when() + duration)

    def _stuck(self) -> bool:
        """Whether the loop is inside a step of a running call right now."""
        with self._lock:
            return any(self._clocks[key].step_started is not None for key in self._alive if key in self._clocks)

    def _finish(self) -> tuple[dict, int]:
        """Close the batch for good and classify every call without an outcome."""
        now = time.monotonic()
        with self._lock:
            if self._result is not None:
                return self._result
            self._closed = True
            outcomes = dict(self._outcomes)
            abandoned = self._abandoned
            blocking = dict(self._blocking)
            # the step the loop is inside as we speak (at most one: a loop runs one step at a
            # time); the other running calls have lost its length so far, as in _after_step
            held = 0.0
            for key in self._alive:
                clock = self._clocks.get(key)
                began = None if clock is None else clock.step_started
                if began is not None:
                    held = now - began
                    blocking[key] = max(blocking.get(key, 0.0), held)
            culprit = max(blocking, key=blocking.get) if blocking else None
            for key, _, _ in self.jobs:
                if key in outcomes:
                    continue
                if key not in self._started:
                    outcomes[key] = CallOutcome("not_started", blocked_by=culprit)
                    continue
                alive = key in self._alive
                seconds = now - self._started[key]
                if key in blocking:
                    outcomes[key] = CallOutcome("blocked", seconds=seconds, blocked_seconds=blocking[key], still_running=alive)
                elif now >= self._budget_end[key] + held:
                    outcomes[key] = CallOutcome("timeout", seconds=seconds, still_running=alive)
                else:
                    outcomes[key] = CallOutcome("starved", seconds=seconds, blocked_by=culprit, still_running=alive)
                abandoned += int(alive)
            self._result = (outcomes, abandoned)
            return self._result

    # -- running -------------------------------------------------------------------------------

    async def drive(self) -> tuple[dict, int]:
        """Run the batch on the current loop; ``({key: CallOutcome}, abandoned_calls)``."""
        gate = asyncio.Semaphore(self.max_workers)
        tasks = [asyncio.ensure_future(self._one(gate, key, function, args)) for key, function, args in self.jobs]
        try:
            _, pending = await asyncio.wait(tasks, timeout=max(0.0, self.deadline - time.monotonic()))
            if pending:
                self._close()
                for task in pending:
                    task.cancel()
                await asyncio.wait(pending, timeout=_GRACE_SECONDS)
        finally:
            # also reached when the caller cancels us: nothing of this batch may go on starting
            self._close()
            for task in tasks:
                if not task.done():
                    task.cancel()
        for task in tasks:
            if task.done() and not task.cancelled() and task.exception() is not None:
                raise task.exception()  # not a call's failure (those are outcomes): ours, or an interrupt
        return self._finish()

    async def _one(self, gate: asyncio.Semaphore, key, function, args) -> None:
        async with gate:
            started = self._try_start(key)
            if started is None:
                return
            try:
                if self.is_async:
                    await self._call_async(key, function, args, started)
                else:
                    await self._call_sync(key, function, args, started)
            finally:
                with self._lock:
                    self._alive.discard(key)

    async def _call_async(self, key, function, args, started: float) -> None:
        clock = _StepClock(self, key)
        with self._lock:
            self._clocks[key] = clock
        value, error, status = None, None, "ok"
        scope = asyncio.timeout(self.timeout)
        try:
            async with scope:
                self._scopes[key] = scope
                clock.enter()  # calling an ``async def`` runs none of its body, but a callable may
                try:
                    awaitable = function(*args)
                finally:
                    clock.leave()
                value = await _TimedAwaitable(awaitable, clock) if inspect.isawaitable(awaitable) else awaitable
        except TimeoutError as caught:
            status, error = ("timeout" if scope.expired() else "error"), caught
        except Exception as caught:
            status, error = "error", caught
        else:
            if scope.expired():  # it caught the cancellation and returned anyway, past its budget
                status, value = "timeout", None
        finally:
            self._scopes.pop(key, None)
        if clock.longest >= self.timeout:
            self._record(key, CallOutcome("blocked", value, error, time.monotonic() - started, blocked_seconds=clock.longest))
        else:
            self._record(key, CallOutcome(status, value, error, time.monotonic() - started))

    async def _call_sync(self, key, function, args, started: float) -> None:
        loop = asyncio.get_running_loop()
        settled = loop.create_future()

        def settle(outcome: CallOutcome) -> None:
            if not settled.done():  # cancelled when the call timed out
                settled.set_result(outcome)

        def work() -> None:
            try:
                value = function(*args)
                if inspect.isawaitable(value):
                    value = asyncio.run(_await(value))
                outcome = CallOutcome("ok", value, None, time.monotonic() - started)
            except BaseException as error:  # the runner's problem, recorded, never re-raised here
                outcome = CallOutcome("error", None, error, time.monotonic() - started)
            try:
                loop.call_soon_threadsafe(settle, outcome)
            except RuntimeError:
                pass  # that loop is closed: its batch returned long ago and nobody waits for this

        threading.Thread(target=work, name="toolkit-whatif-call", daemon=True).start()
        try:
            async with asyncio.timeout(self.timeout):
                outcome = await settled
        except TimeoutError:
            # the thread may have settled in the same loop pass as the timer fired: then it is over
            running = not (settled.done() and not settled.cancelled())
            self._record(key, CallOutcome("timeout", None, None, time.monotonic() - started, still_running=running), abandoned=running)
            return
        self._record(key, outcome)


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def arun_bounded(jobs, timeout: float, max_workers: int, is_async: bool) -> tuple[dict, int]:
    """Run ``jobs`` on the current event loop, at most ``max_workers`` at a time.

    Async functions are awaited on this loop, so they may use objects bound to it (clients,
    locks, queues made before the call); sync ones run on daemon threads that the loop awaits
    through loop futures, so it keeps serving other tasks. See the module docstring for
    timeouts, blocking detection and the batch bound.

    Parameters
    ----------
    jobs : iterable of (key, function, args)
        Each call is ``function(*args)``; keys are hashable and name the outcomes.
    timeout : float
        Seconds of wall clock each call gets from its own start.
    max_workers : int
        How many calls may run at once, >= 1.
    is_async : bool
        True when the functions are ``async def`` (see :func:`is_async_callable`).

    Returns
    -------
    (dict, int)
        ``{key: CallOutcome}`` for every job, and the number of calls abandoned (still
        running when the batch returned, or sync calls left running past their timeout).

    Notes
    -----
    Nothing can run on a loop while one of its steps blocks, this function included: an
    async call that blocks the loop (a synchronous call inside ``async def``) is recognised
    when its step returns, and the batch returns no sooner than that. If the step returns
    after the batch bound, the batch closes at that moment: that call is ``"blocked"``, the
    calls that had not started are ``"not_started"`` and never start, the others that were
    running are cancelled (``"starved"``). A step that never returns holds this loop for
    good; :func:`run_bounded` (on a worker thread, e.g. ``await asyncio.to_thread(...)``)
    can stop waiting for it at the bound instead.
    """
    jobs = list(jobs)
    if not jobs:
        return {}, 0
    return await _Batch(jobs, timeout, max_workers, is_async).drive()


def run_bounded(jobs, timeout: float, max_workers: int, is_async: bool) -> tuple[dict, int]:
    """Run ``jobs`` = [(key, function, args), ...] at most ``max_workers`` at a time; blocking.

    The batch of :func:`arun_bounded` on a fresh event loop: sync functions with
    ``asyncio.run`` on this thread when it runs no loop, otherwise (a notebook cell, or
    async functions) on a worker thread with its own loop. Arguments and result are those of
    :func:`arun_bounded`.

    Notes
    -----
    With the loop on a worker thread this thread watches the batch bound: if the loop is
    then stuck inside an async call's step, it returns at once with that call ``"blocked"``
    and counted as abandoned (it runs on until its step ends, after which its loop starts
    nothing more and cancels what is left). Async functions always get a worker thread for
    this reason, even when this thread runs no loop.
    """
    jobs = list(jobs)
    if not jobs:
        return {}, 0
    batch = _Batch(jobs, timeout, max_workers, is_async)
    if not is_async and not _loop_running():
        # no user code runs on this loop (sync calls live on their threads), so it cannot be blocked
        return asyncio.run(batch.drive())
    return _drive_on_worker_loop(batch)


def _drive_on_worker_loop(batch: _Batch) -> tuple[dict, int]:
    finished = threading.Event()
    box: dict[str, Any] = {}

    async def main():
        # the answer is handed over as soon as the batch has it, not when asyncio.run has also
        # waited out calls that ignore their cancellation
        try:
            box["value"] = await batch.drive()
        except BaseException as error:  # re-raised in the caller's thread
            box["error"] = error
        finally:
            finished.set()

    def target():
        try:
            asyncio.run(main())
        except BaseException as error:  # an interrupt raised out of the loop itself
            box.setdefault("error", error)
        finally:
            finished.set()

    threading.Thread(target=target, name="toolkit-whatif-loop", daemon=True).start()
    if not finished.wait(max(0.0, batch.deadline - time.monotonic())) and not batch._stuck():
        # the loop is free, so drive() is closing the batch itself: it gives cancelled calls
        # the grace, plus the slack for its own bookkeeping
        finished.wait(_GRACE_SECONDS + _BOUND_SLACK_SECONDS)
    if finished.is_set():
        if "error" in box:
            raise box["error"]
        return box["value"]
    return batch._finish()  # the loop is held by a call's step: stop waiting for it


def _normalise_output(value: Any) -> ReplayOutput | None:
    if isinstance(value, ReplayOutput):
        return value
    if isinstance(value, str):
        return ReplayOutput(value)
    if isinstance(value, Mapping) and isinstance(value.get("text"), str):
        calls = value.get("tool_calls") or ()
        return ReplayOutput(value["text"], tuple(dict(c) for c in calls if isinstance(c, Mapping)))
    text = getattr(value, "text", None)
    if isinstance(text, str):
        return ReplayOutput(text)
    return None


def _cut(text: str) -> str:
    return text if len(text) <= _MESSAGE_CAP else text[:_MESSAGE_CAP] + "...(truncated)"


def _execution_failure(outcome: CallOutcome, what: str, subject: str, blocker: tuple[str, Any] | None,
                       timeout: float, bound: float) -> tuple[str, str, dict[str, Any]] | None:
    """(code suffix, message, details) for the statuses a batch gives; None for the others.

    ``what`` is "runner" or "scorer"; ``subject`` names the call in the message ("trace t-1");
    ``blocker`` is the blocking call as (its name in the message, its value in the details),
    or None when no call was seen blocking the loop.
    """
    if outcome.status == "blocked":
        lasted = outcome.blocked_seconds or 0.0
        qualifier = "at least " if outcome.still_running else ""
        tail = "; still blocking when the batch returned" if outcome.still_running else ""
        return "blocked_loop", (
            f"{subject}: the async {what} blocked its event loop for {qualifier}{lasted:.2f} s (a synchronous call "
            f"inside async def); budget {timeout:g} s{tail}"
        ), {"blocked_seconds": round(lasted, 3), "timeout_seconds": timeout, "still_running": outcome.still_running}
    if outcome.status not in ("not_started", "starved"):
        return None
    if blocker is None:
        cause, blocked_by = f"the batch's {bound:g} s bound passed first (the event loop was kept busy)", None
    else:
        cause, blocked_by = f"{blocker[0]} blocked the event loop until the batch's {bound:g} s bound passed", blocker[1]
    if outcome.status == "not_started":
        return "not_started", f"{subject}: the {what} was never called: {cause}", {
            "blocked_by": blocked_by, "batch_bound_seconds": bound}
    return "starved", f"{subject}: the {what} started but was cut off before its own {timeout:g} s budget ran out: {cause}", {
        "blocked_by": blocked_by, "batch_bound_seconds": bound, "timeout_seconds": timeout}


@dataclasses.dataclass(frozen=True)
class ReplayResult:
    outputs: Mapping[int, ReplayOutput]  # by position in the input list
    failures: Mapping[int, FailureRecord]
    seconds: Mapping[int, float]
    abandoned_calls: int


def _prepare_replay(traces, runner: Callable, change: ReplayConfig):
    caches: dict[int, ToolCache] = {}
    jobs = []
    failures: dict[int, FailureRecord] = {}
    for position, trace in enumerate(traces):
        if trace.skip_reason:
            failures[position] = FailureRecord(
                id=f"skip-{trace.trace_id}", code="trace_skipped", stage="ingest", scope="trace",
                message=f"trace {trace.trace_id} skipped: {trace.skip_reason}",
                trace_id=trace.trace_id, cohort=trace.cohort, details={"reason": trace.skip_reason},
            )
            continue
        cache = ToolCache(trace.tool_calls, trace.trace_id)
        caches[position] = cache
        trace_input = TraceInput(
            user_message=trace.user_message,
            trace_id=trace.trace_id,
            metadata=dict(trace.metadata),
            original_system_prompt=trace.system_prompt,
            recorded_tools=tuple(sorted({call.name for call in trace.tool_calls})),
        )
        jobs.append((position, runner, (trace_input, change, cache)))
    return jobs, caches, failures


def _replay_result(traces, jobs, caches, failures, outcomes, abandoned, timeout: float, max_workers: int) -> ReplayResult:
    bound = batch_bound(len(jobs), timeout, max_workers)
    outputs: dict[int, ReplayOutput] = {}
    seconds: dict[int, float] = {}
    for position, outcome in outcomes.items():
        trace = traces[position]
        base = {"trace_id": trace.trace_id, "cohort": trace.cohort, "stage": "replay", "scope": "trace"}
        culprit = None if outcome.blocked_by is None else traces[outcome.blocked_by].trace_id
        blocker = None if culprit is None else (f"trace {culprit}", culprit)
        cut_off = _execution_failure(outcome, "runner", f"trace {trace.trace_id}", blocker, timeout, bound)
        if outcome.status != "not_started":
            seconds[position] = outcome.seconds
        if cut_off is not None:
            # before the cache check: a call that is still running could add a miss while we read
            suffix, message, details = cut_off
            failures[position] = FailureRecord(id=f"replay-{trace.trace_id}", code=f"runner_{suffix}", message=message,
                                               details=details, **base)
            continue
        cache = caches[position]
        if cache.misses or isinstance(outcome.error, ToolCacheMiss):
            tool = cache.misses[0] if cache.misses else outcome.error.tool_name
            failures[position] = FailureRecord(
                id=f"replay-{trace.trace_id}", code="tool_cache_miss",
                message=f"trace {trace.trace_id}: the runner called tool {tool!r} with arguments the trace did not record",
                details={"tool_name": tool}, **base,
            )
        elif outcome.status == "timeout":
            failures[position] = FailureRecord(
                id=f"replay-{trace.trace_id}", code="runner_timeout",
                message=f"trace {trace.trace_id}: replay exceeded {timeout:g} s",
                details={"timeout_seconds": timeout}, **base,
            )
        elif outcome.status == "error":
            failures[position] = FailureRecord(
                id=f"replay-{trace.trace_id}", code="runner_exception",
                message=_cut(f"trace {trace.trace_id}: runner raised {type(outcome.error).__name__}: {outcome.error}"),
                details={"exception_type": type(outcome.error).__name__, "message": _cut(str(outcome.error))}, **base,
            )
        else:
            output = _normalise_output(outcome.value)
            if output is None:
                failures[position] = FailureRecord(
                    id=f"replay-{trace.trace_id}", code="runner_invalid_output",
                    message=f"trace {trace.trace_id}: runner returned {type(outcome.value).__name__}; expected str or {{'text': str}}",
                    details={"returned_type": type(outcome.value).__name__}, **base,
                )
            else:
                if not output.tool_calls and cache.calls:
                    output = ReplayOutput(output.text, tuple(cache.calls))
                outputs[position] = output
    return ReplayResult(outputs, failures, seconds, abandoned)


def replay_traces(traces, runner: Callable, change: ReplayConfig, timeout: float, max_workers: int) -> ReplayResult:
    """Replay every trace not carrying a skip reason, blocking until done; see the module docstring.

    Parameters
    ----------
    traces : sequence of Trace
        The traces to replay, in order; results are keyed by position in this sequence.
    runner : callable
        The user's runner, sync or ``async def``.
    change : ReplayConfig
        The change under test, handed to every call.
    timeout : float
        Seconds each replay gets (``timeouts.replay_seconds``).
    max_workers : int
        How many replays may run at once (``target.max_workers``).

    Returns
    -------
    ReplayResult
        Outputs, failure records (one per failed trace, with its code) and seconds, each by
        position, and the number of abandoned calls.
    """
    jobs, caches, failures = _prepare_replay(traces, runner, change)
    outcomes, abandoned = run_bounded(jobs, timeout, max_workers, is_async_callable(runner))
    return _replay_result(traces, jobs, caches, failures, outcomes, abandoned, timeout, max_workers)


async def areplay_traces(traces, runner: Callable, change: ReplayConfig, timeout: float, max_workers: int) -> ReplayResult:
    """:func:`replay_traces` on the caller's event loop (:func:`arun_bounded`).

    An ``async def`` runner is awaited on this loop, so it can share the caller's clients,
    locks and queues; a sync runner runs on worker threads while the loop keeps serving.
    Arguments and result are those of :func:`replay_traces`; the limits of detecting a runner
    that blocks this loop are in :func:`arun_bounded`'s notes.
    """
    jobs, caches, failures = _prepare_replay(traces, runner, change)
    outcomes, abandoned = await arun_bounded(jobs, timeout, max_workers, is_async_callable(runner))
    return _replay_result(traces, jobs, caches, failures, outcomes, abandoned, timeout, max_workers)
