"""Execution of scoring (``toolkit.whatif.scoring``): ``ascore_pairs`` on the caller's loop, blocked-loop codes."""

import asyncio
import time

import toolkit as tk
from toolkit.whatif.cache import ScoreCache
from toolkit.whatif.replay import ReplayOutput
from toolkit.whatif.scoring import Scorer, ascore_pairs, score_pairs
from toolkit.whatif.sources import ToolRecord, Trace


def make_config(tmp_path, score_seconds=5.0, max_workers=4):
    return tk.whatif.load_config({
        "source": {"adapter": "jsonl", "path": str(tmp_path / "unused.jsonl"), "label_field": "cohort"},
        "target": {"runner": "python:unused:run"},
        "selection": {"failure_cohort": {"limit": 5}, "baseline_cohort": {"limit": 5}},
        "change": {"system_prompt": "Be careful."},
        "scorer": {"adapter": "python", "score_fn": "python:unused:score", "cache_mode": "off",
                   "cache_dir": str(tmp_path / "cache"), "max_workers": max_workers},
        "decision": {}, "reporting": {}, "timeouts": {"score_seconds": score_seconds},
    })


def make_inputs(n):
    traces = [Trace(f"t-{i:02d}", "failure", f"question {i}", "score=0.5", (ToolRecord("search", {"q": str(i)}, {"hit": i}),))
              for i in range(n)]
    outputs = {i: ReplayOutput("score=0.7") for i in range(n)}
    return traces, outputs


def read_score(case):
    return float(case.output_text.split("=")[1])


def test_a_scorer_blocking_its_loop_gets_its_own_code_and_the_cases_it_kept_out_are_not_started(tmp_path):
    # 4 traces = 8 cases, budget 0.2 s, 4 at a time: bound (2 + 1) x 0.2 + 1 = 1.6 s. Scoring
    # t-00's original output sleeps 3 s inside async def; it is the first case to start.
    traces, outputs = make_inputs(4)
    config = make_config(tmp_path, score_seconds=0.2)
    started = []

    async def blocking_score(case):
        started.append((case.trace_id, case.which))
        if (case.trace_id, case.which) == ("t-00", "original"):
            time.sleep(3.0)
        await asyncio.sleep(0)
        return read_score(case)

    scorer = Scorer("python", blocking_score, "python:tests:blocking_score", "hash")
    scores = score_pairs(traces, outputs, scorer, config, ScoreCache(tmp_path / "cache", "off"))
    codes = {traces[p].trace_id: record.code for p, record in scores.failures.items()}
    assert started == [("t-00", "original")]
    assert codes == {"t-00": "scorer_blocked_loop", "t-01": "scorer_not_started", "t-02": "scorer_not_started",
                     "t-03": "scorer_not_started"}
    blocked = scores.failures[0]
    assert blocked.details["which"] == "original" and blocked.details["still_running"] is True
    assert "the async scorer blocked its event loop" in blocked.message
    kept_out = scores.failures[1]
    assert kept_out.details["blocked_by"] == "t-00" and kept_out.details["blocked_by_which"] == "original"
    assert "scoring trace t-00's original output blocked the event loop" in kept_out.message
    assert scores.original == {} and scores.replayed == {} and scores.abandoned_calls == 1


def test_ascore_pairs_awaits_an_async_scorer_on_the_callers_loop(tmp_path):
    traces, outputs = make_inputs(3)
    config = make_config(tmp_path)

    async def main():
        loop = asyncio.get_running_loop()
        gate = asyncio.Semaphore(1)  # a client-side limit made by the caller, bound to its loop
        seen = []

        async def judge(case):
            async with gate:
                seen.append(asyncio.get_running_loop() is loop)
                await asyncio.sleep(0.01)
            return {"score": read_score(case), "rationale": "read back"}

        scorer = Scorer("python", judge, "python:tests:judge", "hash")
        return await ascore_pairs(traces, outputs, scorer, config, ScoreCache(tmp_path / "cache", "off")), seen

    scores, seen = asyncio.run(main())
    assert scores.failures == {} and len(seen) == 6 and all(seen)
    assert scores.original == {0: 0.5, 1: 0.5, 2: 0.5} and scores.replayed == {0: 0.7, 1: 0.7, 2: 0.7}
    assert scores.rationales[(0, "replayed")] == "read back"


def test_ascore_pairs_runs_a_sync_scorer_on_threads_while_the_loop_serves(tmp_path):
    traces, outputs = make_inputs(1)
    config = make_config(tmp_path)

    def slow_judge(case):
        time.sleep(0.3)
        return read_score(case)

    async def main():
        ticks = [0]

        async def tick():
            while True:
                await asyncio.sleep(0.05)
                ticks[0] += 1

        ticker = asyncio.ensure_future(tick())
        scorer = Scorer("python", slow_judge, "python:tests:slow_judge", "hash")
        scores = await ascore_pairs(traces, outputs, scorer, config, ScoreCache(tmp_path / "cache", "off"))
        ticker.cancel()
        return scores, ticks[0]

    scores, ticks = asyncio.run(main())
    assert scores.failures == {} and scores.replayed == {0: 0.7}
    assert ticks >= 3  # about 6 ticks of 50 ms while the two cases sleep in their threads
