"""Execution of replays (``toolkit.whatif.replay``): the caller's loop, blocking detection, the batch bound, tool-cache copies.

The time budgets here are small (0.2-0.5 s) so the tests stay quick; every assertion about time
is either a ticker that must tick or a generous hang guard, never a speed target.
"""

import asyncio
import threading
import time
import types

import pytest

from toolkit.whatif.replay import (
    ReplayConfig,
    ToolCache,
    _StepClock,
    _TimedAwaitable,
    areplay_traces,
    arun_bounded,
    batch_bound,
    replay_traces,
    run_bounded,
)
from toolkit.whatif.sources import ToolRecord, Trace


def make_traces(n, prefix="t"):
    return [Trace(f"{prefix}-{i:02d}", "failure", f"question {i}", "original answer",
                  (ToolRecord("search", {"q": str(i)}, {"hits": [f"doc-{i}"]}),)) for i in range(n)]


class Ticker:
    """A task on the running loop that counts its 50 ms ticks: it only ticks if the loop is free."""

    def __init__(self):
        self.ticks = 0
        self._task = asyncio.ensure_future(self._run())

    async def _run(self):
        while True:
            await asyncio.sleep(0.05)
            self.ticks += 1

    async def stop(self):
        self._task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self._task


class RecordingClock:
    """A stand-in for the batch's step clock: remembers each step's length."""

    def __init__(self):
        self.steps = []
        self.step_started = None

    def enter(self):
        assert self.step_started is None, "steps never nest"
        self.step_started = time.monotonic()

    def leave(self):
        self.steps.append(time.monotonic() - self.step_started)
        self.step_started = None


class Yield:
    """An awaitable that yields ``value`` once and returns what is sent back (drivable by hand)."""

    def __init__(self, value):
        self.value = value

    def __await__(self):
        return (yield self.value)


# --- the step-timing wrapper -------------------------------------------------------------------------


def test_timed_awaitable_passes_the_return_value_through_and_times_each_step():
    clock = RecordingClock()

    async def work():
        await asyncio.sleep(0)
        time.sleep(0.05)  # the second step holds the loop
        await asyncio.sleep(0)
        return {"answer": 42}

    async def main():
        return await _TimedAwaitable(work(), clock)

    assert asyncio.run(main()) == {"answer": 42}
    assert len(clock.steps) == 3 and clock.step_started is None
    assert clock.steps[1] >= 0.05 and clock.steps[1] == max(clock.steps)


def test_timed_awaitable_forwards_sent_values_thrown_exceptions_and_close():
    clock = RecordingClock()
    log = []

    async def inner():
        try:
            got = await Yield("first")
            log.append(("sent", got))
            try:
                await Yield("second")
            except KeyError as error:
                log.append(("caught", error.args[0]))
            await Yield("third")
        finally:
            log.append("inner finally")

    driver = _TimedAwaitable(inner(), clock).__await__()
    assert driver.send(None) == "first"
    assert driver.send("hello") == "second"
    assert driver.throw(KeyError("k")) == "third"  # handled inside, the next yield comes out
    driver.close()  # reaches the inner coroutine: its finally runs
    assert log == [("sent", "hello"), ("caught", "k"), "inner finally"]
    assert len(clock.steps) == 3 and clock.step_started is None


def test_timed_awaitable_lets_the_exception_raised_inside_out_and_closes_its_step():
    clock = RecordingClock()

    async def failing():
        await asyncio.sleep(0)
        raise ValueError("runner bug")

    async def main():
        await _TimedAwaitable(failing(), clock)

    with pytest.raises(ValueError, match="runner bug"):
        asyncio.run(main())
    assert len(clock.steps) == 2 and clock.step_started is None

    driver = _TimedAwaitable(Yield("x"), RecordingClock()).__await__()
    next(driver)
    with pytest.raises(StopIteration) as done:
        driver.send("returned")
    assert done.value.value == "returned"


def test_timed_awaitable_delivers_cancellation_to_the_inner_coroutine():
    clock = RecordingClock()
    cleaned = []

    async def stubborn():
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cleaned.append("caught")
            return "cleaned up"

    async def plain():
        try:
            await asyncio.sleep(10)
        finally:
            cleaned.append("finally")

    async def main():
        caught = asyncio.ensure_future(_await_timed(stubborn(), clock))
        passed = asyncio.ensure_future(_await_timed(plain(), clock))
        await asyncio.sleep(0.01)
        caught.cancel()
        passed.cancel()
        result = await caught  # the inner coroutine swallowed it and returned
        with pytest.raises(asyncio.CancelledError):
            await passed
        return result

    assert asyncio.run(main()) == "cleaned up"
    assert sorted(cleaned) == ["caught", "finally"] and clock.step_started is None


async def _await_timed(coroutine, clock):
    return await _TimedAwaitable(coroutine, clock)


def test_timed_awaitable_drives_a_generator_based_coroutine():
    @types.coroutine
    def legacy():
        value = yield None
        return ("legacy", value)

    clock = RecordingClock()

    async def main():
        return await _TimedAwaitable(legacy(), clock)

    assert asyncio.run(main()) == ("legacy", None)
    assert len(clock.steps) == 2


def test_the_step_start_is_visible_from_another_thread_while_the_step_runs():
    clock = _StepClock()
    seen = []
    inside = threading.Event()

    async def blocker():
        inside.set()
        time.sleep(0.3)

    def watch():
        inside.wait(5)
        seen.append(clock.step_started)

    watcher = threading.Thread(target=watch)
    watcher.start()

    async def main():
        await _TimedAwaitable(blocker(), clock)

    asyncio.run(main())
    watcher.join(5)
    assert seen and seen[0] is not None  # the watchdog saw a step in progress
    assert clock.step_started is None and clock.longest >= 0.3


# --- (a) an async runner that blocks its loop ---------------------------------------------------------


def test_a_runner_blocking_its_loop_is_named_and_the_traces_it_kept_out_never_start():
    # The audit's case: 16 traces, budget 0.5 s, 4 at a time; trace t-05 calls time.sleep(4)
    # inside async def. The bound is (ceil(16 / 4) + 1) x 0.5 + 1 = 3.5 s, before the sleep ends.
    traces = make_traces(16)
    starts, lock = [], threading.Lock()
    blocker_done = []

    async def runner(trace_input, replay_config, tool_cache):
        with lock:
            starts.append((trace_input.trace_id, time.monotonic()))
        if trace_input.trace_id == "t-05":
            time.sleep(4.0)
            blocker_done.append(time.monotonic())
        await asyncio.sleep(0.01)
        return f"answer {trace_input.trace_id}"

    result = replay_traces(traces, runner, ReplayConfig(), timeout=0.5, max_workers=4)
    returned = time.monotonic()
    codes = {traces[p].trace_id: record.code for p, record in result.failures.items()}
    started = {trace_id for trace_id, _ in starts}
    completed = {traces[p].trace_id for p in result.outputs}

    assert codes["t-05"] == "runner_blocked_loop"
    blocked = result.failures[5]
    assert blocked.details["still_running"] is True  # the caller stopped waiting at the bound
    assert "blocked its event loop for at least" in blocked.message and "budget 0.5 s" in blocked.message
    assert [code for code in codes.values()].count("runner_blocked_loop") == 1
    never = {t.trace_id for t in traces} - started
    assert len(never) >= 10
    assert all(codes[trace_id] == "runner_not_started" for trace_id in never)
    assert all("trace t-05 blocked the event loop" in result.failures[int(t[2:])].message for t in never)
    assert "runner_timeout" not in codes.values()
    assert completed and all(trace_id not in codes for trace_id in completed)
    # started, not finished, not the blocker: cut off while t-05 held the loop
    assert all(codes[trace_id] == "runner_starved" for trace_id in started - completed - {"t-05"})
    assert result.abandoned_calls == len(started - completed)
    assert set(result.seconds) == {int(trace_id[2:]) for trace_id in started}

    calls_at_return = len(starts)
    time.sleep(5.0)  # past the end of the 4 s sleep: the worker loop resumes and must start nothing
    assert blocker_done and blocker_done[0] > returned
    assert len(starts) == calls_at_return
    assert all(started_at < returned for _, started_at in starts)


def test_on_the_callers_loop_a_block_is_seen_when_its_step_returns():
    # 8 traces, budget 0.2 s, 4 at a time: bound (2 + 1) x 0.2 + 1 = 1.6 s; t-02 blocks 2 s.
    traces = make_traces(8)
    starts, block_ended = [], []

    async def runner(trace_input, replay_config, tool_cache):
        starts.append((trace_input.trace_id, time.monotonic()))
        if trace_input.trace_id == "t-02":
            time.sleep(2.0)
            block_ended.append(time.monotonic())
        await asyncio.sleep(0.01)
        return "fine"

    async def main():
        result = await areplay_traces(traces, runner, ReplayConfig(), 0.2, 4)
        returned = time.monotonic()
        count = len(starts)
        await asyncio.sleep(0.5)  # the loop is free again: nothing of the batch may start now
        return result, returned, count

    result, returned, count = asyncio.run(main())
    codes = {traces[p].trace_id: r.code for p, r in result.failures.items()}
    assert codes["t-02"] == "runner_blocked_loop"
    assert result.failures[2].details["still_running"] is False
    assert result.failures[2].details["blocked_seconds"] >= 2.0
    started = {trace_id for trace_id, _ in starts}
    assert started == {"t-00", "t-01", "t-02"}
    # t-03 had a free slot, but its first step came after the block, past the bound
    assert all(codes[trace_id] == "runner_not_started" for trace_id in ("t-03", "t-04", "t-05", "t-06", "t-07"))
    assert "trace t-02 blocked the event loop" in result.failures[3].message
    # t-00 and t-01 were waiting in asyncio.sleep during the block: their deadlines moved on
    assert "t-00" not in codes and "t-01" not in codes
    assert len(starts) == count and all(at < block_ended[0] < returned for _, at in starts)
    assert result.abandoned_calls == 0  # the loop got control back, so every started call ended


def test_calls_running_while_another_blocks_keep_their_budget():
    # budget 0.3 s; job 0 holds the loop for 0.6 s while jobs 1-3 wait in asyncio.sleep(0.2).
    # Their timers expire during the block, but the block was not theirs: they must finish.
    async def job(index):
        if index == 0:
            await asyncio.sleep(0.01)  # let the others start first
            time.sleep(0.6)
        await asyncio.sleep(0.2)
        return index

    async def main():
        return await arun_bounded([(i, job, (i,)) for i in range(4)], 0.3, 4, True)

    outcomes, abandoned = asyncio.run(main())
    assert outcomes[0].status == "blocked" and outcomes[0].blocked_seconds >= 0.6
    assert [outcomes[i].status for i in (1, 2, 3)] == ["ok"] * 3
    assert [outcomes[i].value for i in (1, 2, 3)] == [1, 2, 3]
    assert abandoned == 0


def test_cancelling_arun_bounded_closes_the_batch():
    starts = []

    async def job(index):
        starts.append(index)
        await asyncio.sleep(0.2)

    async def main():
        batch = asyncio.ensure_future(arun_bounded([(i, job, (i,)) for i in range(8)], 5.0, 2, True))
        await asyncio.sleep(0.05)
        batch.cancel()
        with pytest.raises(asyncio.CancelledError):
            await batch
        count = len(starts)
        await asyncio.sleep(0.5)
        return count

    count = asyncio.run(main())
    assert count == 2 and starts == [0, 1]


# --- (b), (c) the caller's loop keeps serving and its objects can be shared ------------------------


def test_async_runners_run_on_the_callers_loop_and_leave_it_serving():
    async def main():
        loop = asyncio.get_running_loop()
        ticker = Ticker()
        seen_loops = []

        async def runner(index):
            seen_loops.append(asyncio.get_running_loop())
            await asyncio.sleep(0.2)
            return index * 10

        outcomes, abandoned = await arun_bounded([(i, runner, (i,)) for i in range(4)], 5.0, 2, True)
        await ticker.stop()
        return loop, seen_loops, outcomes, abandoned, ticker.ticks

    loop, seen_loops, outcomes, abandoned, ticks = asyncio.run(main())
    assert all(seen is loop for seen in seen_loops) and len(seen_loops) == 4
    assert {k: o.value for k, o in outcomes.items()} == {0: 0, 1: 10, 2: 20, 3: 30} and abandoned == 0
    assert ticks >= 3  # two waves of 0.2 s: about 8 ticks of 50 ms if the loop stayed free


def test_async_runners_can_use_a_lock_and_a_queue_bound_to_the_callers_loop():
    # Objects the caller already used on its loop are bound to it. The private-loop engine this
    # replaced failed here on every call with "... is bound to a different event loop"
    # (checked against that code when this test was written).
    traces = make_traces(4)

    async def main():
        queue = asyncio.Queue()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(queue.get(), 0.01)  # a waiter was made: bound to this loop
        lock = asyncio.Lock()

        async def hold():
            async with lock:
                await asyncio.sleep(0.01)

        await asyncio.gather(hold(), hold())  # contended once: bound to this loop

        async def runner(trace_input, replay_config, tool_cache):
            async with lock:
                await asyncio.sleep(0.01)
            item = await queue.get()  # fed by a task of the caller's
            return f"{trace_input.trace_id} got {item}"

        async def producer():
            for i in range(4):
                await asyncio.sleep(0.02)
                queue.put_nowait(i)

        feeding = asyncio.ensure_future(producer())
        result = await areplay_traces(traces, runner, ReplayConfig(), 5.0, 4)
        await feeding
        return result

    result = asyncio.run(main())
    assert result.failures == {}
    assert sorted(output.text.split(" got ")[1] for output in result.outputs.values()) == ["0", "1", "2", "3"]


def test_sync_runners_under_arun_bounded_do_not_block_the_loop():
    def sleepy(index):
        time.sleep(0.5)
        return index

    async def main():
        ticker = Ticker()
        outcomes, abandoned = await arun_bounded([(i, sleepy, (i,)) for i in range(2)], 5.0, 2, False)
        await ticker.stop()
        return outcomes, abandoned, ticker.ticks

    outcomes, abandoned, ticks = asyncio.run(main())
    assert [outcomes[i].status for i in range(2)] == ["ok", "ok"] and abandoned == 0
    assert ticks >= 3  # about 10 ticks of 50 ms while the threads sleep


def test_run_bounded_works_inside_a_running_loop_for_both_kinds():
    async def twice(x):
        await asyncio.sleep(0.01)
        return 2 * x

    def thrice(x):
        return 3 * x

    async def notebook_cell():
        asyncio.get_running_loop()
        return run_bounded([(i, twice, (i,)) for i in range(3)], 5.0, 2, True), run_bounded(
            [(i, thrice, (i,)) for i in range(3)], 5.0, 2, False)

    (doubled, _), (tripled, _) = asyncio.run(notebook_cell())
    assert [doubled[i].value for i in range(3)] == [0, 2, 4]
    assert [tripled[i].value for i in range(3)] == [0, 3, 6]


# --- (d), (e) timeouts, abandoned calls, exceptions ------------------------------------------------------


@pytest.mark.parametrize("awaited", [False, True], ids=["run_bounded", "arun_bounded"])
def test_timeouts_are_counted_and_abandoned_sync_calls_too(awaited):
    def sync_job(seconds):
        time.sleep(seconds)
        return seconds

    async def async_job(seconds):
        await asyncio.sleep(seconds)
        return seconds

    async def stubborn_job(seconds):
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            return "returned anyway"  # swallows its own timeout's cancellation

    def run(jobs, is_async):
        if awaited:
            return asyncio.run(arun_bounded(jobs, 0.2, 2, is_async))
        return run_bounded(jobs, 0.2, 2, is_async)

    sync_outcomes, sync_abandoned = run([(0, sync_job, (0.01,)), (1, sync_job, (2.0,))], False)
    assert sync_outcomes[0].status == "ok" and sync_outcomes[1].status == "timeout"
    assert sync_outcomes[1].still_running and sync_abandoned == 1  # its thread sleeps on
    async_outcomes, async_abandoned = run([(0, async_job, (0.01,)), (1, async_job, (2.0,)), (2, stubborn_job, (2.0,))], True)
    assert [async_outcomes[i].status for i in range(3)] == ["ok", "timeout", "timeout"]
    assert async_outcomes[2].value is None
    assert async_abandoned == 0  # cancelled, so not left running


@pytest.mark.parametrize("awaited", [False, True], ids=["run_bounded", "arun_bounded"])
def test_exceptions_become_error_outcomes(awaited):
    def sync_bad(_):
        raise ValueError("sync bug")

    async def async_bad(_):
        await asyncio.sleep(0)
        raise KeyError("async bug")

    async def own_timeout(_):
        raise TimeoutError("the runner's own client timed out")

    def run(jobs, is_async):
        if awaited:
            return asyncio.run(arun_bounded(jobs, 1.0, 2, is_async))
        return run_bounded(jobs, 1.0, 2, is_async)

    outcomes, _ = run([(0, sync_bad, (0,))], False)
    assert outcomes[0].status == "error" and isinstance(outcomes[0].error, ValueError)
    outcomes, _ = run([(0, async_bad, (0,)), (1, own_timeout, (1,))], True)
    assert outcomes[0].status == "error" and isinstance(outcomes[0].error, KeyError)
    assert outcomes[1].status == "error" and isinstance(outcomes[1].error, TimeoutError)  # not ours: an error


def test_replay_maps_timeouts_and_exceptions_to_their_codes():
    traces = make_traces(3)

    async def runner(trace_input, replay_config, tool_cache):
        if trace_input.trace_id == "t-00":
            await asyncio.sleep(2.0)
        if trace_input.trace_id == "t-01":
            raise RuntimeError("exploded")
        return "fine"

    result = replay_traces(traces, runner, ReplayConfig(), 0.2, 4)
    assert {p: r.code for p, r in result.failures.items()} == {0: "runner_timeout", 1: "runner_exception"}
    assert result.outputs[2].text == "fine" and result.abandoned_calls == 0


def test_batch_bound_is_waves_plus_one_timeouts_plus_slack():
    assert batch_bound(16, 0.5, 4) == pytest.approx(3.5)
    assert batch_bound(1, 2.0, 4) == pytest.approx(5.0)


# --- (f) the tool cache hands out copies ----------------------------------------------------------------


def test_tool_cache_lookups_are_deep_copies():
    record = ToolRecord("search", {"q": "a"}, {"hits": ["doc-1"], "meta": {"n": 1}})
    cache = ToolCache([record], "t-1")
    first = cache.lookup("search", {"q": "a"})
    first["hits"].append("forged")
    first["meta"]["n"] = 99
    assert cache.lookup("search", {"q": "a"}) == {"hits": ["doc-1"], "meta": {"n": 1}}
    assert record.result == {"hits": ["doc-1"], "meta": {"n": 1}}
    assert [call["result"] for call in cache.calls] == [{"hits": ["doc-1"], "meta": {"n": 1}}] * 2
    arguments = {"q": "a"}
    cache.lookup("search", arguments)
    arguments["q"] = "edited later"
    assert cache.calls[-1]["arguments"] == {"q": "a"}


def test_a_runner_mutating_its_tool_output_changes_nothing_recorded():
    traces = make_traces(2)

    def runner(trace_input, replay_config, tool_cache):
        index = trace_input.trace_id[-1]
        got = tool_cache.lookup("search", {"q": str(int(index))})
        got["hits"][0] = "FORGED"  # the attack: edit what the cache returned
        got["injected"] = True
        return f"answer with {got['hits'][0]}"

    result = replay_traces(traces, runner, ReplayConfig(), 5.0, 2)
    assert result.failures == {}
    assert [t.tool_calls[0].result for t in traces] == [{"hits": ["doc-0"]}, {"hits": ["doc-1"]}]
    for position, output in result.outputs.items():
        assert output.text == "answer with FORGED"
        assert output.tool_calls[0]["result"] == {"hits": [f"doc-{position}"]}
