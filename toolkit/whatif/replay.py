"""Replay: call the user's runner on each trace's input with the change applied.

The runner contract (``target.runner = "python:<module.path>:<attr>"``)::

    run(trace_input: TraceInput, replay_config: ReplayConfig, tool_cache: ToolCache)
        -> str | {"text": str, "tool_calls": [...]} | object with a ``.text`` attribute

sync or ``async def`` (detected with :func:`inspect.iscoroutinefunction`, on the object or its
``__call__``). Tool calls are answered from the trace's recorded tool outputs through
``tool_cache.lookup(name, arguments)``; nothing live is called. A recorded ``None`` output is a
hit; an unrecorded (name, arguments) pair raises :class:`ToolCacheMiss`, and a replay that
missed the cache fails with code ``tool_cache_miss`` even if the runner caught the error,
because its answer was produced without the tool's output.

Execution (:func:`run_bounded`) fixes the reference's Jupyter problems (docs/design/whatif.md §11.9):
- async callables run on a private event loop in a worker thread, so they work when the
  caller already runs a loop (a notebook kernel); ``asyncio.run`` in the caller would fail;
- at most ``max_workers`` calls run at once (a sliding window, not sequential);
- a sync call over budget is abandoned, not killed (Python cannot kill a thread): it runs on
  a daemon thread, its result is discarded, and the count of abandoned calls is reported so
  a user sees that runners should set their own I/O timeouts;
- an ``async def`` runner that blocks its event loop (a sync call inside it) cannot be
  cancelled either; the async batch gets a wall-clock bound of (waves + 1) timeouts, after
  which unfinished calls are timeouts and counted as abandoned instead of hanging the run;
- trace metadata reaches the runner (``TraceInput.metadata``).
Every per-trace problem becomes a :class:`FailureRecord` with its own code; nothing crashes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import queue
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
    "ToolCache",
    "ToolCacheMiss",
    "FailureRecord",
    "CallOutcome",
    "run_bounded",
    "is_async_callable",
    "replay_traces",
]

# Long exception messages are cut so one noisy runner cannot bloat the report (the reference
# uses the same 2048-character cap).
_MESSAGE_CAP = 2048


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
    saw last), as in the reference.

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
        key = _tool_key(tool_name, arguments)
        with self._lock:
            if key not in self._entries:
                self.misses.append(tool_name)
                raise ToolCacheMiss(self.trace_id, tool_name, len(arguments or {}))
            result = self._entries[key]
            self.calls.append({"tool": tool_name, "arguments": arguments, "result": result})
            return result


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
    status: str  # ok | timeout | error
    value: Any = None
    error: BaseException | None = None
    seconds: float = 0.0


def is_async_callable(function: Any) -> bool:
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(getattr(function, "__call__", None))


async def _await(awaitable):
    return await awaitable


def _run_async_jobs(jobs, timeout: float, max_workers: int) -> tuple[dict, int]:
    done: dict[Any, CallOutcome] = {}

    async def main():
        gate = asyncio.Semaphore(max_workers)

        async def one(key, function, args):
            async with gate:
                started = time.perf_counter()
                try:
                    value = await asyncio.wait_for(function(*args), timeout)
                except TimeoutError as error:
                    elapsed = time.perf_counter() - started
                    status = "timeout" if elapsed >= timeout * 0.999 else "error"
                    done[key] = CallOutcome(status, None, error, elapsed)
                except Exception as error:
                    done[key] = CallOutcome("error", None, error, time.perf_counter() - started)
                else:
                    done[key] = CallOutcome("ok", value, None, time.perf_counter() - started)

        await asyncio.gather(*(one(*job) for job in jobs))

    box: dict[str, Any] = {}

    def target():
        try:
            asyncio.run(main())
        except BaseException as error:  # surfaced below, in the caller's thread
            box["error"] = error

    # A fresh loop on a worker thread works whether or not the caller's thread runs a loop.
    worker = threading.Thread(target=target, name="toolkit-whatif-async", daemon=True)
    worker.start()
    # wait_for cannot interrupt an ``async def`` that blocks its loop (a sync HTTP call inside
    # it); without a bound the whole run would hang. A loop that yields finishes within
    # ceil(n / max_workers) timeouts; one more timeout and a second of slack cover scheduling.
    waves = -(-len(jobs) // max_workers)
    worker.join((waves + 1) * timeout + 1.0)
    if worker.is_alive():
        stuck = [key for key, _, _ in jobs if key not in done]
        outcomes = dict(done)
        for key in stuck:
            outcomes[key] = CallOutcome("timeout", None, None, timeout)
        return outcomes, len(stuck)
    if "error" in box:
        raise box["error"]
    return dict(done), 0


def _run_sync_jobs(jobs, timeout: float, max_workers: int) -> tuple[dict, int]:
    completions: queue.Queue = queue.Queue()
    pending = list(reversed(jobs))
    running: dict[Any, float] = {}
    outcomes: dict[Any, CallOutcome] = {}
    abandoned = 0

    def work(key, function, args, started):
        try:
            value = function(*args)
            if inspect.isawaitable(value):
                value = asyncio.run(_await(value))
            completions.put((key, CallOutcome("ok", value, None, time.perf_counter() - started)))
        except BaseException as error:  # the runner's problem, recorded, never re-raised here
            completions.put((key, CallOutcome("error", None, error, time.perf_counter() - started)))

    while pending or running:
        while pending and len(running) < max_workers:
            key, function, args = pending.pop()
            started = time.perf_counter()
            running[key] = started
            threading.Thread(
                target=work, args=(key, function, args, started), name="toolkit-whatif-call", daemon=True
            ).start()
        deadline = min(running.values()) + timeout
        try:
            key, outcome = completions.get(timeout=max(0.0, deadline - time.perf_counter()))
        except queue.Empty:
            pass
        else:
            if key in running:
                del running[key]
                outcomes[key] = outcome
        now = time.perf_counter()
        for key, started in list(running.items()):
            if now - started >= timeout:
                del running[key]
                outcomes[key] = CallOutcome("timeout", None, None, now - started)
                abandoned += 1
    return outcomes, abandoned


def run_bounded(jobs, timeout: float, max_workers: int, is_async: bool) -> tuple[dict, int]:
    """Run ``jobs`` = [(key, function, args), ...] at most ``max_workers`` at a time.

    Each call gets ``timeout`` seconds of wall clock from its own start. Returns
    ``({key: CallOutcome}, abandoned_sync_calls)``.
    """
    jobs = list(jobs)
    if not jobs:
        return {}, 0
    if is_async:
        return _run_async_jobs(jobs, timeout, max_workers)
    return _run_sync_jobs(jobs, timeout, max_workers)


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


@dataclasses.dataclass(frozen=True)
class ReplayResult:
    outputs: Mapping[int, ReplayOutput]  # by position in the input list
    failures: Mapping[int, FailureRecord]
    seconds: Mapping[int, float]
    abandoned_calls: int


def replay_traces(traces, runner: Callable, change: ReplayConfig, timeout: float, max_workers: int) -> ReplayResult:
    """Replay every trace not carrying a skip reason; see the module docstring."""
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
    outcomes, abandoned = run_bounded(jobs, timeout, max_workers, is_async_callable(runner))
    outputs: dict[int, ReplayOutput] = {}
    seconds: dict[int, float] = {}
    for position, outcome in outcomes.items():
        trace = traces[position]
        seconds[position] = outcome.seconds
        base = {"trace_id": trace.trace_id, "cohort": trace.cohort, "stage": "replay", "scope": "trace"}
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
