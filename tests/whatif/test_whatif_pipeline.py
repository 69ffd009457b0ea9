"""Runner, scorer, cache and settings behaviour of ``tk.whatif.fork`` (docs/design/whatif.md §7, docs/design/whatif.md §10)."""

import asyncio
import json
import time

import pytest
from test_whatif_walkthroughs import FIXTURE_MODULE, config_for, install_fixture, row, write_rows

import toolkit as tk
from toolkit.whatif.replay import ReplayConfig, ToolCache, ToolCacheMiss, run_bounded
from toolkit.whatif.sources import ToolRecord


@pytest.fixture
def fixture_dir(tmp_path, monkeypatch):
    install_fixture(tmp_path, monkeypatch)
    return tmp_path


def plain_rows(n_failure=6, n_baseline=6, failure_delta=0.2, baseline_delta=0.0):
    return [row(f"f-{i:02d}", "failure", failure_delta) for i in range(n_failure)] + [
        row(f"b-{i:02d}", "baseline", baseline_delta) for i in range(n_baseline)
    ]


def fork_rows(tmp_path, rows, profile=None, **kwargs):
    path = write_rows(tmp_path / "traces.jsonl", rows)
    return tk.whatif.fork(config_for(path, tmp_path, **kwargs), profile=profile)


# --- tool cache ---------------------------------------------------------------------------------


def test_tool_cache_hits_misses_and_recorded_none():
    cache = ToolCache([ToolRecord("search", {"q": "a", "n": 1}, {"hit": 1}), ToolRecord("noop", {}, None),
                       ToolRecord("search", {"n": 1, "q": "a"}, {"hit": 2})], "t-1")
    assert cache.lookup("search", {"q": "a", "n": 1}) == {"hit": 2}  # later record wins, key order irrelevant
    assert cache.lookup("noop") is None  # a recorded None is a hit (fact 29)
    with pytest.raises(ToolCacheMiss) as info:
        cache.lookup("search", {"q": "secret value"})
    assert "secret value" not in str(info.value)
    assert cache.misses == ["search"] and len(cache.calls) == 2


# --- per-trace failure codes (facts 28-30) -----------------------------------------------------------


def test_each_failure_gets_its_own_code_and_the_run_continues(fixture_dir):
    rows = plain_rows(10, 6)
    rows[0]["runner_raises"] = True
    rows[1]["call_tool"] = "search"
    rows[1]["call_args"] = {"q": "never recorded"}
    rows[2]["score_none"] = True
    rows[3]["bad_output"] = True
    rows[4]["call_tool"] = "search"
    rows[4]["call_args"] = {"q": "f-04"}  # recorded: a hit
    verdict = fork_rows(fixture_dir, rows)
    codes = {r.trace_id: r.code for r in verdict.failures}
    assert codes == {"f-00": "runner_exception", "f-01": "tool_cache_miss", "f-02": "scorer_invalid_output",
                     "f-03": "runner_invalid_output"}
    by_id = {r.trace_id: r for r in verdict.failures}
    assert by_id["f-00"].details["exception_type"] == "RuntimeError"
    assert by_id["f-01"].details == {"tool_name": "search"} and by_id["f-01"].stage == "replay"
    assert by_id["f-02"].stage == "score"
    failure = verdict.cohort("failure")
    # replayed and scored are counted separately (the scorer failure replayed fine)
    assert (failure.selected, failure.replayed, failure.scored) == (10, 7, 6)
    assert failure.failure_counts == {"runner_exception": 1, "tool_cache_miss": 1, "scorer_invalid_output": 1,
                                      "runner_invalid_output": 1}
    frame = verdict.traces
    assert set(frame.loc[frame.trace_id == "f-04", "status"]) == {"scored"}


def test_runner_timeout_is_a_record_and_the_verdict_still_comes(fixture_dir):  # fact 30
    rows = plain_rows(6, 6)
    rows[0]["sleep"] = 3.0
    started = time.perf_counter()
    verdict = fork_rows(fixture_dir, rows, timeouts={"replay_seconds": 0.3})
    elapsed = time.perf_counter() - started
    record = next(r for r in verdict.failures if r.trace_id == "f-00")
    assert record.code == "runner_timeout" and record.details == {"timeout_seconds": 0.3}
    assert elapsed < 2.5  # the run did not wait for the sleeping runner
    assert "abandoned_calls" in verdict.codes()
    assert verdict.cohort("failure").replayed == 5


def test_score_seconds_bounds_scoring(fixture_dir):
    rows = plain_rows(6, 6)
    rows[0]["score_sleep"] = 1.5
    slow = fork_rows(fixture_dir, rows, timeouts={"score_seconds": 0.3})
    assert {r.trace_id: r.code for r in slow.failures} == {"f-00": "scorer_timeout"}
    relaxed = fork_rows(fixture_dir, rows, timeouts={"score_seconds": 5.0})
    assert relaxed.failures == ()


def test_bounded_parallel_replay_is_faster_than_sequential():
    def sleepy(x):
        time.sleep(0.2)
        return x

    jobs = [(i, sleepy, (i,)) for i in range(8)]
    started = time.perf_counter()
    outcomes, _ = run_bounded(jobs, timeout=5, max_workers=4, is_async=False)
    elapsed = time.perf_counter() - started
    assert [outcomes[i].value for i in range(8)] == list(range(8))
    assert elapsed < 1.2  # 8 x 0.2 s sequentially would be 1.6 s; 4 at a time needs ~0.4 s


def test_max_workers_bounds_concurrency():
    import threading

    live, peak, lock = [0], [0], threading.Lock()

    def tracked(_):
        with lock:
            live[0] += 1
            peak[0] = max(peak[0], live[0])
        time.sleep(0.05)
        with lock:
            live[0] -= 1

    run_bounded([(i, tracked, (i,)) for i in range(10)], timeout=5, max_workers=3, is_async=False)
    assert peak[0] <= 3


def test_async_runner_with_timeout(fixture_dir):
    rows = plain_rows(6, 6)
    rows[0]["async_sleep"] = 2.0
    verdict = fork_rows(fixture_dir, rows, target={"runner": f"python:{FIXTURE_MODULE}:run_async"},
                        timeouts={"replay_seconds": 0.3})
    assert {r.trace_id: r.code for r in verdict.failures} == {"f-00": "runner_timeout"}
    assert verdict.cohort("baseline").scored == 6


def test_async_runner_works_inside_a_running_event_loop(fixture_dir):
    path = write_rows(fixture_dir / "traces.jsonl", plain_rows(6, 6))
    config = config_for(path, fixture_dir, target={"runner": f"python:{FIXTURE_MODULE}:run_async"})

    async def notebook_cell():
        # a notebook kernel runs its own loop; fork must not call asyncio.run on it
        return tk.whatif.fork(config)

    verdict = asyncio.run(notebook_cell())
    assert verdict.state == "ship" and verdict.failures == ()


def test_runner_sees_change_and_trace_metadata(fixture_dir):
    rows = plain_rows(6, 6, failure_delta=0.0)
    for entry in rows:
        entry["prompt_shift"] = 0.3 if entry["cohort"] == "failure" else 0.0
    careful = fork_rows(fixture_dir, rows)  # system prompt "Be careful." triggers the shift
    assert careful.state == "ship"
    plain = fork_rows(fixture_dir, rows, change={"system_prompt": "Be quick."})
    assert plain.state == "dont_ship" and plain.cohort("failure").improved == 0


def test_independent_scores_allow_regressions(fixture_dir):
    verdict = fork_rows(fixture_dir, plain_rows(6, 6, failure_delta=0.3, baseline_delta=-0.3))
    frame = verdict.traces
    base = frame[frame.cohort == "baseline"]
    assert (base.delta_class == "regressed").all()
    assert (base.replayed_score - base.original_score).round(9).tolist() == base.delta.round(9).tolist()
    assert verdict.state == "dont_ship"


# --- setup failures (facts 15, 16) -------------------------------------------------------------


def test_setup_failures_are_toolkit_errors(fixture_dir):
    path = write_rows(fixture_dir / "traces.jsonl", plain_rows())
    missing_attr = config_for(path, fixture_dir, target={"runner": f"python:{FIXTURE_MODULE}:nope"})
    with pytest.raises(tk.whatif.SetupError, match="has no attribute 'nope'"):
        tk.whatif.fork(missing_attr)
    missing_module = config_for(path, fixture_dir, target={"runner": "python:no_such_module_xyz:run"})
    with pytest.raises(tk.whatif.SetupError, match="cannot import"):
        tk.whatif.fork(missing_module)
    absent = config_for(fixture_dir / "absent.jsonl", fixture_dir)
    with pytest.raises(tk.whatif.SetupError, match="does not exist"):
        tk.whatif.fork(absent)


# --- floor and decision through the pipeline (facts 17, 20, 21, 27) ------------------------------


def test_stub_with_zero_traces_is_inconclusive_with_two_absent_cohorts():  # fact 17
    config = {
        "source": {"adapter": "stub", "synthetic_traces": 0},
        "target": {"runner": "python:toolkit.whatif.examples:support_agent"},
        "selection": {"failure_cohort": {"limit": 5}, "baseline_cohort": {"limit": 5}},
        "change": {"system_prompt": "x"}, "scorer": {"adapter": "stub", "cache_mode": "off"},
        "decision": {}, "reporting": {}, "timeouts": {},
    }
    verdict = tk.whatif.fork(config)
    assert verdict.state == "inconclusive" and verdict.exit_code == 2
    absent = [f for f in verdict.findings if f.code == "required_cohort_absent"]
    assert [f.details["cohort"] for f in absent] == ["failure", "baseline"]
    assert verdict.to_dict()["experiment_shape"] == "failure_rescue"


def test_four_scored_is_inconclusive_whatever_the_policy(fixture_dir):  # fact 20, 21
    rows = plain_rows(10, 6)
    for entry in rows[:6]:
        entry["runner_raises"] = True
    lax = {"min_failure_improvement_ratio": 0.0, "max_baseline_regression_ratio": 1.0, "practical_delta_epsilon": 0.0}
    verdict = fork_rows(fixture_dir, rows, decision=lax)
    rules = {f.rule for f in verdict.floor_failures}
    assert {"min_scored_per_required_cohort", "min_replay_validity_ratio_per_required_cohort"} <= rules
    ratio = next(f for f in verdict.floor_failures if f.rule.startswith("min_replay_validity"))
    assert ratio.observed == "0.400"
    assert "ci_unavailable_for_required_cohort" in verdict.codes()
    assert verdict.state == "inconclusive"


def test_failure_rescue_with_only_baseline_is_inconclusive(fixture_dir):  # fact 27
    verdict = fork_rows(fixture_dir, plain_rows(0, 20))
    assert verdict.state == "inconclusive"
    assert any(f.code == "required_cohort_absent" and f.details["cohort"] == "failure" for f in verdict.findings)


# --- every setting has an effect -------------------------------------------------------------------


def test_cohort_limit_selects_traces(fixture_dir):
    wide = fork_rows(fixture_dir, plain_rows(12, 12), failure_limit=12, baseline_limit=12)
    narrow = fork_rows(fixture_dir, plain_rows(12, 12), failure_limit=7, baseline_limit=5)
    assert (wide.cohort("failure").selected, wide.cohort("baseline").selected) == (12, 12)
    assert (narrow.cohort("failure").selected, narrow.cohort("baseline").selected) == (7, 5)
    assert [f.code for f in narrow.findings].count("selection_truncated") == 2
    assert "selection_truncated" not in wide.codes()


def test_cohort_filter_selects_traces(fixture_dir):
    rows = plain_rows(10, 10)
    for i, entry in enumerate(rows[:10]):
        entry["reward"] = 0.2 if i < 6 else 0.7
    unfiltered = fork_rows(fixture_dir, rows)
    filtered = fork_rows(fixture_dir, rows, selection={"failure_cohort": {"limit": 100, "filter": "score-below:0.6"},
                                                       "baseline_cohort": {"limit": 100, "filter": "has-tool:search"}})
    assert unfiltered.cohort("failure").selected == 10
    assert filtered.cohort("failure").selected == 6 and filtered.cohort("baseline").selected == 10
    none_match = fork_rows(fixture_dir, rows, selection={"failure_cohort": {"limit": 100, "filter": "has-tool:other"},
                                                         "baseline_cohort": {"limit": 100}})
    assert none_match.state == "inconclusive" and "required_cohort_absent" in none_match.codes()


def test_require_baseline_changes_the_verdict(fixture_dir):
    rows = plain_rows(8, 3)  # baseline below the floor
    required = fork_rows(fixture_dir, rows)
    optional = fork_rows(fixture_dir, rows, decision={"require_baseline": False})
    assert required.state == "inconclusive"
    assert optional.state == "ship" and "baseline_unverified" in optional.codes()
    assert optional.cohort("baseline").required is False


def test_require_baseline_false_still_checks_a_present_baseline(fixture_dir):
    rows = plain_rows(8, 3, baseline_delta=-0.3)
    optional = fork_rows(fixture_dir, rows, decision={"require_baseline": False})
    assert optional.state == "dont_ship" and "baseline_regression_above_threshold" in optional.codes()


def test_max_ci_width_is_enforced(fixture_dir):
    rows = [row(f"f-{i:02d}", "failure", d) for i, d in enumerate([0.1, 0.4, 0.06, 0.3, 0.45, 0.2, 0.08, 0.35])]
    rows += [row(f"b-{i:02d}", "baseline", 0.0) for i in range(8)]
    loose = fork_rows(fixture_dir, rows)
    tight = fork_rows(fixture_dir, rows, decision={"max_ci_width": 0.05})
    width = loose.cohort("failure").ci_high - loose.cohort("failure").ci_low
    assert width > 0.05 and loose.state == "ship"
    assert tight.state == "dont_ship"
    finding = next(f for f in tight.findings if f.code == "ci_too_wide")
    assert finding.details["cohort"] == "failure" and not tight.cohort("failure").ci_meaningful


def test_decision_thresholds_have_effects(fixture_dir):
    rows = [row(f"f-{i:02d}", "failure", 0.2 if i < 4 else 0.0) for i in range(10)] + [
        row(f"b-{i:02d}", "baseline", -0.2 if i < 2 else 0.0) for i in range(10)]
    assert fork_rows(fixture_dir, rows).codes().count("failure_improvement_below_threshold") == 1
    lowered = fork_rows(fixture_dir, rows, decision={"min_failure_improvement_ratio": 0.4, "max_baseline_regression_ratio": 0.1})
    assert "failure_improvement_below_threshold" not in lowered.codes()
    stricter = fork_rows(fixture_dir, rows, decision={"max_baseline_regression_ratio": 0.15})
    assert "baseline_regression_above_threshold" in stricter.codes()
    wide_eps = fork_rows(fixture_dir, rows, decision={"practical_delta_epsilon": 0.25})
    assert wide_eps.cohort("failure").improved == 0


def test_bootstrap_settings_have_effects(fixture_dir):
    rows = [row(f"f-{i:02d}", "failure", d) for i, d in enumerate([0.1, 0.4, 0.06, 0.3, 0.45, 0.2, 0.08, 0.35])]
    rows += [row(f"b-{i:02d}", "baseline", 0.0) for i in range(8)]
    a = fork_rows(fixture_dir, rows, decision={"seed": 1}).cohort("failure")
    b = fork_rows(fixture_dir, rows, decision={"seed": 1}).cohort("failure")
    c = fork_rows(fixture_dir, rows, decision={"ci_level": 0.9}).cohort("failure")
    assert (a.ci_low, a.ci_high) == (b.ci_low, b.ci_high)  # seeded: reproducible
    assert c.ci_high - c.ci_low < a.ci_high - a.ci_low


def test_model_reaches_the_runner(fixture_dir, tmp_path):
    seen = []
    import sys

    module = sys.modules[FIXTURE_MODULE]
    original = module.run

    def spy(trace_input, replay_config, tool_cache):
        seen.append(replay_config.model)
        return original(trace_input, replay_config, tool_cache)

    module.spy = spy
    fork_rows(fixture_dir, plain_rows(), target={"runner": f"python:{FIXTURE_MODULE}:spy"}, change={"model": "small-model-2"})
    assert set(seen) == {"small-model-2"}
    assert isinstance(ReplayConfig(), ReplayConfig)


# --- cache modes ------------------------------------------------------------------------------------


def scorer_calls():
    import sys

    return sys.modules[FIXTURE_MODULE].CALLS["n"]


def run_counting(fixture_dir, mode, monkeypatch=None, env=None):
    if monkeypatch is not None:
        for name in ("CI", "GITHUB_ACTIONS", "GITLAB_CI", "BUILDKITE", "JENKINS_URL"):
            monkeypatch.delenv(name, raising=False)
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
    before = scorer_calls()
    verdict = fork_rows(fixture_dir, plain_rows(), scorer={"cache_mode": mode})
    return verdict, scorer_calls() - before


def test_cache_modes_each_behave_differently(fixture_dir, monkeypatch):
    # 12 traces x 2 outputs = 24 scoring cases
    first, calls = run_counting(fixture_dir, "on", monkeypatch)
    assert calls == 24 and first.cache["writes"] == 24 and first.cache["misses"] == 24
    again, calls = run_counting(fixture_dir, "on", monkeypatch)
    assert calls == 0 and again.cache["hits"] == 24
    assert [t.delta for t in again.trace_results] == [t.delta for t in first.trace_results]
    off, calls = run_counting(fixture_dir, "off", monkeypatch)
    assert calls == 24 and off.cache["hits"] == 0 and off.cache["writes"] == 0
    readonly, calls = run_counting(fixture_dir, "read_only", monkeypatch)
    assert calls == 0 and readonly.cache["hits"] == 24 and readonly.cache["writes"] == 0
    refresh, calls = run_counting(fixture_dir, "refresh", monkeypatch)
    assert calls == 24 and refresh.cache["hits"] == 0 and refresh.cache["writes"] == 24
    local_auto, calls = run_counting(fixture_dir, "auto", monkeypatch)
    assert calls == 24 and local_auto.cache["mode"] == "off" and "cache_mode_inferred" not in local_auto.codes()
    ci_auto, calls = run_counting(fixture_dir, "auto", monkeypatch, {"CI": "true"})
    assert calls == 0 and ci_auto.cache["mode"] == "on"
    inferred = next(f for f in ci_auto.findings if f.code == "cache_mode_inferred")
    assert inferred.details == {"input_mode": "auto", "resolved_mode": "on", "env_signal": "CI"}
    _, calls = run_counting(fixture_dir, "auto", monkeypatch, {"CI": "false"})
    assert calls == 24


def test_read_only_on_empty_cache_writes_nothing(fixture_dir):
    verdict, calls = run_counting(fixture_dir, "read_only")
    assert calls == 24 and verdict.cache["writes"] == 0
    assert not (fixture_dir / "cache" / "entries").exists()


def test_rubric_edit_invalidates_cache_entries(fixture_dir):
    path = write_rows(fixture_dir / "traces.jsonl", plain_rows())
    config = config_for(path, fixture_dir, scorer={"cache_mode": "on", "rubric_text": "v1"})
    tk.whatif.fork(config)
    before = scorer_calls()
    tk.whatif.fork(config)
    assert scorer_calls() == before
    config["scorer"]["rubric_text"] = "v2"
    tk.whatif.fork(config)
    assert scorer_calls() - before == 24


def test_corrupt_cache_entry_makes_the_verdict_inconclusive(fixture_dir):
    run_counting(fixture_dir, "on")
    entry = next((fixture_dir / "cache" / "entries").rglob("*.json"))
    entry.write_text("{not json")
    verdict, _ = run_counting(fixture_dir, "on")
    assert verdict.state == "inconclusive"
    finding = verdict.findings[0]
    assert finding.code == "cache_corruption_detected" and finding.details["cache_path"] == str(entry)
    refreshed, _ = run_counting(fixture_dir, "refresh")  # refresh ignores and overwrites the entry
    assert refreshed.state == "ship"
    assert json.loads(entry.read_text())["score"] in (0.5, 0.7)


def test_lock_released_after_run(fixture_dir):
    run_counting(fixture_dir, "on")
    again, _ = run_counting(fixture_dir, "on")
    assert again.state == "ship"


def test_determinism_of_cohort_results(fixture_dir):  # fact 31, second half
    a = fork_rows(fixture_dir, plain_rows(8, 8))
    b = fork_rows(fixture_dir, plain_rows(8, 8))
    assert json.dumps([c.to_dict() for c in a.cohorts]) == json.dumps([c.to_dict() for c in b.cohorts])


def peak_concurrency(fixture_dir, **sections):
    import importlib

    module = importlib.import_module(FIXTURE_MODULE)
    module.LIVE.update(now=0, peak=0)
    fork_rows(fixture_dir, plain_rows(), **sections)
    return module.LIVE["peak"]


def test_target_max_workers_bounds_replay_concurrency(fixture_dir):
    runner = f"python:{FIXTURE_MODULE}:run_tracked"
    assert peak_concurrency(fixture_dir, target={"runner": runner, "max_workers": 1}) == 1
    assert peak_concurrency(fixture_dir, target={"runner": runner, "max_workers": 4}) > 1


def test_scorer_max_workers_bounds_scoring_concurrency(fixture_dir):
    score_fn = f"python:{FIXTURE_MODULE}:score_tracked"
    assert peak_concurrency(fixture_dir, scorer={"score_fn": score_fn, "max_workers": 1}) == 1
    assert peak_concurrency(fixture_dir, scorer={"score_fn": score_fn, "max_workers": 6}) > 1


def test_bootstrap_resamples_changes_the_interval(fixture_dir):
    rows = [row(f"f-{i:02d}", "failure", d) for i, d in enumerate([0.1, 0.4, 0.06, 0.3, 0.45, 0.2, 0.08, 0.35, 0.12])]
    rows += [row(f"b-{i:02d}", "baseline", 0.0) for i in range(8)]
    bounds = {(c.ci_low, c.ci_high) for c in (fork_rows(fixture_dir, rows, decision={"bootstrap_resamples": b}).cohort("failure")
                                              for b in (100, 5000, 20000))}
    assert len(bounds) > 1
    assert fork_rows(fixture_dir, rows).methodology["bootstrap"]["resamples"] == 5000


def test_scoring_parameters_and_judge_fields_key_the_cache(fixture_dir):
    path = write_rows(fixture_dir / "traces.jsonl", plain_rows())
    config = config_for(path, fixture_dir, scorer={"cache_mode": "on", "scoring_parameters": {"temperature": 0.0}})
    tk.whatif.fork(config)
    before = scorer_calls()
    config["scorer"]["scoring_parameters"] = {"temperature": 0.5}
    tk.whatif.fork(config)
    assert scorer_calls() - before == 24
    before = scorer_calls()
    config["scorer"]["judge_model_snapshot"] = "judge-2026-11-01"
    tk.whatif.fork(config)
    assert scorer_calls() - before == 24


def test_stub_scorer_discloses_fields_it_does_not_read():
    config = {
        "source": {"adapter": "stub", "synthetic_traces": 6},
        "target": {"runner": "python:toolkit.whatif.examples:async_support_agent"},
        "selection": {"failure_cohort": {"limit": 6}, "baseline_cohort": {"limit": 6}},
        "change": {"system_prompt": "Quote the tool result verbatim."},
        "scorer": {"adapter": "stub", "cache_mode": "off", "rubric_text": "be grounded", "judge_model_id": "j"},
        "decision": {}, "reporting": {}, "timeouts": {},
    }
    verdict = tk.whatif.fork(config)
    unused = next(f for f in verdict.findings if f.code == "settings_unused")
    assert unused.details["fields"] == "judge_model_id, rubric_text"
    # a score_fn or scoring_parameters under the stub are not read either: said, not swallowed
    config["scorer"].update(score_fn="python:toolkit.whatif.examples:grounding_score", scoring_parameters={"temperature": 0})
    unused = next(f for f in tk.whatif.fork(config).findings if f.code == "settings_unused")
    assert unused.details["fields"] == "score_fn, judge_model_id, rubric_text, scoring_parameters"
    assert "stub_scorer_in_use" in verdict.codes()
    assert verdict.cohort("failure").improved == 6  # the async example runner, replayed in parallel


def test_score_values_accepted_and_refused():
    import numpy as np

    from toolkit.whatif.scoring import _normalise_score

    assert _normalise_score(np.float32(0.25))[0] == 0.25
    assert _normalise_score(True)[0] == 1.0
    assert _normalise_score({"score": 0.5, "rationale": "ok"})[:2] == (0.5, "ok")
    for bad in (None, "0.5", float("nan"), 1.5, -0.1, {"rationale": "no score"}):
        assert _normalise_score(bad)[2] is not None


# --- audit additions: cache contents, lock file, write failures, async scorer, setup errors ---------


def test_cache_entry_keys_every_component_and_holds_no_user_text(fixture_dir):
    rows = plain_rows()
    rows[0]["prompt"] = "PRIVATE-QUESTION about account 4711"
    path = write_rows(fixture_dir / "traces.jsonl", rows)
    config = config_for(path, fixture_dir, scorer={
        "cache_mode": "on", "judge_provider": "acme", "judge_model_id": "judge-1", "judge_model_snapshot": "judge-1-2026",
        "rubric_id": "grounded-v1", "rubric_text": "PRIVATE-RUBRIC", "scoring_parameters": {"temperature": 0.0}})
    tk.whatif.fork(config)
    entries = sorted((fixture_dir / "cache" / "entries").rglob("*.json"))
    assert len(entries) == 24
    for entry in entries:
        assert all(c in "0123456789abcdef" for c in entry.stem) and len(entry.stem) == 64
    stored = json.loads(entries[0].read_text())
    parts = stored["components"]
    assert {"adapter", "score_fn", "score_fn_source", "judge_provider", "judge_model_id", "judge_model_snapshot",
            "rubric_id", "rubric_hash", "scoring_parameters_hash", "case"} <= set(parts)
    assert {"trace_id", "which", "input_hash", "output_hash", "tools_hash", "metadata_hash"} == set(parts["case"])
    assert (parts["judge_model_id"], parts["judge_model_snapshot"]) == ("judge-1", "judge-1-2026")
    import hashlib

    assert parts["rubric_hash"] == hashlib.sha256(b"PRIVATE-RUBRIC").hexdigest()
    text = "".join(e.read_text() for e in entries)
    assert "PRIVATE-QUESTION" not in text and "PRIVATE-RUBRIC" not in text
    # each judge field is part of the key: changing one rescoring everything
    for field, value in (("judge_model_id", "judge-2"), ("judge_provider", "other"), ("rubric_id", "grounded-v2")):
        before = scorer_calls()
        tk.whatif.fork({**config, "scorer": {**config["scorer"], field: value}})
        assert scorer_calls() - before == 24, field


def test_trace_metadata_change_invalidates_cache_entries(fixture_dir):
    rows = plain_rows()
    path = write_rows(fixture_dir / "traces.jsonl", rows)
    config = config_for(path, fixture_dir, scorer={"cache_mode": "on"})
    tk.whatif.fork(config)
    rows[0]["team"] = "payments"  # same texts, new metadata the score function can read
    write_rows(fixture_dir / "traces.jsonl", rows)
    before = scorer_calls()
    tk.whatif.fork(config)
    assert scorer_calls() - before == 2  # the original and replayed output of that one trace


def test_lock_file_names_the_holder_during_the_run_and_is_freed_after(fixture_dir):
    import fcntl
    import os
    import socket
    import sys

    module = sys.modules[FIXTURE_MODULE]
    seen = []

    def spying_score(case):
        seen.append(json.loads((fixture_dir / "cache" / ".lock").read_text()))
        return module.score(case)

    module.spying_score = spying_score
    verdict = fork_rows(fixture_dir, plain_rows(), scorer={"cache_mode": "on", "score_fn": f"python:{FIXTURE_MODULE}:spying_score"})
    assert verdict.state == "ship" and seen
    assert seen[0]["pid"] == os.getpid() and seen[0]["hostname"] == socket.gethostname() and seen[0]["started_at"]
    with open(fixture_dir / "cache" / ".lock", "a+") as handle:  # free: another run can take it
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    # modes that never write take no lock, so a held lock does not block them
    with open(fixture_dir / "cache" / ".lock", "a+") as holder:
        fcntl.flock(holder.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert fork_rows(fixture_dir, plain_rows(), scorer={"cache_mode": "read_only"}).state == "ship"
        assert fork_rows(fixture_dir, plain_rows(), scorer={"cache_mode": "refresh"}).codes()[0] == "cache_lock_unavailable"


def test_unwritable_cache_dir_is_a_setup_error(fixture_dir):
    blocker = fixture_dir / "not_a_dir"
    blocker.write_text("a file where the cache directory should go")
    with pytest.raises(tk.whatif.SetupError, match="cache_dir"):
        fork_rows(fixture_dir, plain_rows(), scorer={"cache_mode": "on", "cache_dir": str(blocker / "cache")})
    # cache_mode off never touches the directory
    assert fork_rows(fixture_dir, plain_rows(), scorer={"cache_mode": "off", "cache_dir": str(blocker / "cache")}).state == "ship"


def test_cache_write_failure_keeps_the_scores_and_is_disclosed(fixture_dir):
    cache_dir = fixture_dir / "cache"
    cache_dir.mkdir()
    (cache_dir / "entries").write_text("a file where the entry buckets should go")
    verdict = fork_rows(fixture_dir, plain_rows(), scorer={"cache_mode": "on"})
    assert verdict.state == "ship" and verdict.cache["writes"] == 0 and verdict.cache["write_errors"] == 24
    finding = next(f for f in verdict.findings if f.code == "cache_write_failed")
    assert finding.severity == "degrades_trust" and finding.details["count"] == 24 and finding.next_steps


def test_async_scorer_works_inside_a_running_event_loop(fixture_dir):
    import importlib

    module = importlib.import_module(FIXTURE_MODULE)

    async def async_score(case):
        await asyncio.sleep(0)
        return module.score(case)

    module.async_score = async_score
    path = write_rows(fixture_dir / "traces.jsonl", plain_rows(6, 6))
    config = config_for(path, fixture_dir, target={"runner": f"python:{FIXTURE_MODULE}:run_async"},
                        scorer={"score_fn": f"python:{FIXTURE_MODULE}:async_score"})

    async def notebook_cell():
        asyncio.get_running_loop()  # we are inside a running loop, as in a Jupyter cell
        with pytest.warns(RuntimeWarning, match="await tk.whatif.afork"):  # loud: the loop is blocked
            return tk.whatif.fork(config)

    verdict = asyncio.run(notebook_cell())
    assert verdict.state == "ship" and verdict.failures == () and verdict.cohort("failure").scored == 6


def test_runner_that_swallows_a_cache_miss_still_fails_the_trace(fixture_dir):
    import sys

    module = sys.modules[FIXTURE_MODULE]

    def swallowing(trace_input, replay_config, tool_cache):
        try:
            tool_cache.lookup("web_search", {"q": "live call"})
        except LookupError:
            pass  # a careless runner answers without the tool output
        return module.run(trace_input, replay_config, tool_cache)

    module.swallowing = swallowing
    verdict = fork_rows(fixture_dir, plain_rows(), target={"runner": f"python:{FIXTURE_MODULE}:swallowing"})
    assert {r.code for r in verdict.failures} == {"tool_cache_miss"} and len(verdict.failures) == 12
    assert verdict.state == "inconclusive"


def test_source_path_that_is_a_directory_is_a_setup_error(fixture_dir):
    (fixture_dir / "folder").mkdir()
    with pytest.raises(tk.whatif.SetupError, match="is not a file"):
        tk.whatif.fork(config_for(fixture_dir / "folder", fixture_dir))


def test_async_runner_that_blocks_its_loop_cannot_hang_the_run(fixture_dir):
    import importlib

    module = importlib.import_module(FIXTURE_MODULE)

    async def blocking(trace_input, replay_config, tool_cache):
        if trace_input.trace_id == "f-00":
            time.sleep(6.0)  # a sync call inside async def: wait_for cannot cancel it
        return module.run(trace_input, replay_config, tool_cache)

    module.blocking = blocking
    started = time.perf_counter()
    verdict = fork_rows(fixture_dir, plain_rows(), target={"runner": f"python:{FIXTURE_MODULE}:blocking"},
                        timeouts={"replay_seconds": 0.3})
    elapsed = time.perf_counter() - started
    # bound: (ceil(12 / 4) + 1) x 0.3 s + 1 s = 2.2 s, well before the 6 s block ends
    assert elapsed < 5.0
    codes = {r.trace_id: r.code for r in verdict.failures}
    # the blocking trace is named; the traces it kept from starting are not false timeouts
    assert codes["f-00"] == "runner_blocked_loop" and set(codes.values()) <= {"runner_blocked_loop", "runner_not_started", "runner_starved"}
    assert "abandoned_calls" in verdict.codes()


def test_cluster_by_task_makes_the_ci_and_the_sign_flips_cluster_wise(fixture_dir):
    # 12 failure traces from 3 tasks: every trace improved, so the trace-wise exact p is
    # 2/2^12; flipped per task only 3 units move and the smallest p is 2/2^3 = 0.25
    # (reference: enumeration). Baseline: 6 traces of 6 tasks, unchanged.
    rows = [dict(row(f"f-{i:02d}", "failure", 0.2 + 0.01 * i), task_id=f"task-{i % 3}") for i in range(12)]
    rows += [row(f"b-{i:02d}", "baseline", 0.0) for i in range(6)]
    plain = fork_rows(fixture_dir, rows)
    clustered = fork_rows(fixture_dir, rows, decision={"cluster_by": "task_id"})
    failure_plain = next(c for c in plain.cohorts if c.name == "failure")
    failure = next(c for c in clustered.cohorts if c.name == "failure")
    assert failure_plain.n_clusters is None and failure_plain.sign_flip_p == pytest.approx(2 / 2**12)
    assert failure.n_clusters == 3 and failure.sign_flip_p == pytest.approx(2 / 2**3)
    assert "(3 clusters)" in clustered.to_markdown()
    assert "cluster bootstrap" in json.dumps(clustered.to_dict())
    with pytest.raises(tk.whatif.WhatIfConfigError, match="cluster_by"):
        fork_rows(fixture_dir, rows, decision={"cluster_by": "tenant"})


# --- issue 15: replays, the A/A run, profiles, the stub gate ---------------------------------


def test_replays_average_each_trace_and_count_traces_not_replays(fixture_dir):
    import importlib

    module = importlib.import_module(FIXTURE_MODULE)
    rows = [row(f"f-{i:02d}", "failure", 0.1, jitter=[0.2, 0.0, -0.2]) for i in range(6)]
    rows += [row(f"b-{i:02d}", "baseline", 0.0) for i in range(6)]
    once = fork_rows(fixture_dir, rows).cohort("failure")
    assert once.replays == 1 and once.mean_delta == pytest.approx(0.3)  # the first replay alone
    module.SEEN.clear()
    verdict = fork_rows(fixture_dir, rows, target={"replays": 3})
    failure = verdict.cohort("failure")
    assert (failure.selected, failure.replayed, failure.scored, failure.replays) == (6, 6, 6, 3)
    assert failure.mean_delta == pytest.approx(0.1)  # +0.3, +0.1, -0.1 averaged per trace
    assert failure.flaky == 6 and failure.within_trace_sd == pytest.approx(0.2)
    assert "flaky_replays" in verdict.codes()
    assert len(verdict.traces) == 12 and verdict.traces.delta.iloc[0] == pytest.approx(0.1)
    assert sum(module.SEEN.values()) == 18  # 6 failure traces x 3 replays


def test_replay_failures_keep_unique_record_ids(fixture_dir):
    rows = plain_rows(6, 6)
    rows[0]["runner_raises"] = True
    verdict = fork_rows(fixture_dir, rows, target={"replays": 2})
    ids = [r.id for r in verdict.failures]
    assert len(ids) == len(set(ids)) == 2 and all(r.trace_id == "f-00" for r in verdict.failures)
    assert verdict.cohort("failure").failure_counts == {"runner_exception": 1}  # one trace, counted once


def test_aa_check_refuses_a_delta_the_unchanged_replay_also_shows(fixture_dir):
    # The fixture's runner moves every failure by +0.2 whatever the prompt: an A/A run (no
    # change) shows the same +0.2, so the "rescue" is replay drift, not the change.
    drift = plain_rows(8, 8, failure_delta=0.2)
    assert fork_rows(fixture_dir, drift).state == "ship"  # without the A/A run it ships
    checked = fork_rows(fixture_dir, drift, decision={"aa_check": True})
    assert checked.state == "dont_ship"
    assert {"inside_aa_noise", "aa_drift"} <= set(checked.codes())
    failure = checked.cohort("failure")
    assert failure.aa_scored == 8 and failure.aa_mean_delta == pytest.approx(0.2) and failure.vs_aa_mean == pytest.approx(0.0)
    # a change that works only through the prompt beats its A/A run and ships
    plan = [row(f"f-{i:02d}", "failure", 0.0, prompt_shift=0.3 + 0.01 * i) for i in range(8)]
    plan += [row(f"b-{i:02d}", "baseline", 0.0) for i in range(8)]
    real = fork_rows(fixture_dir, plan, decision={"aa_check": True})
    assert real.state == "ship", real.codes()
    assert real.cohort("failure").vs_aa_low > 0 and real.cohort("failure").aa_mean_delta == 0.0


def test_a_profile_can_be_lowered_freely_but_raised_only_with_the_acknowledgment(fixture_dir):
    rows = plain_rows(6, 6)
    assert fork_rows(fixture_dir, rows, profile="minimal", reporting={"profile": "review"}).profile == "minimal"
    with pytest.raises(tk.whatif.ForensicAffirmationError, match="raising a profile needs"):
        fork_rows(fixture_dir, rows, profile="review", reporting={"profile": "minimal"})
    acknowledged = {"profile": "minimal", "forensic_acknowledgment": {
        "accepted_by": "ops-7", "accepted_at": "2026-11-30", "reason": "incident review"}}
    assert fork_rows(fixture_dir, rows, profile="review", reporting=acknowledged).profile == "review"


def test_copies_of_one_trace_are_one_piece_of_evidence(fixture_dir):
    # The audit's attack: one failure trace and one baseline trace, each copied 5x, passed the
    # trust floor of five and shipped with exit 0.
    rows = [row("f-same", "failure", 0.4) for _ in range(5)] + [row("b-same", "baseline", 0.0) for _ in range(5)]
    verdict = fork_rows(fixture_dir, rows)
    assert verdict.state == "inconclusive" and verdict.exit_code == 2
    assert (verdict.cohort("failure").selected, verdict.cohort("baseline").selected) == (1, 1)
    collapsed = [f for f in verdict.findings if f.code == "duplicate_traces_collapsed"]
    assert sorted(f.details["count"] for f in collapsed) == [4, 4]
    # copies under fresh ids but with the same input and output collapse too
    renamed = [row(f"f-{i}", "failure", 0.4) for i in range(5)]
    for entry in renamed:
        entry["prompt"] = "question same"
    renamed += [row(f"b-{i:02d}", "baseline", 0.0) for i in range(6)]
    again = fork_rows(fixture_dir, renamed)
    assert again.cohort("failure").selected == 1 and again.state == "inconclusive"


def test_afork_runs_on_the_callers_loop_and_leaves_it_serving(fixture_dir):
    # A notebook's runner shares the kernel's loop: here it waits on an asyncio.Event that a
    # task on the caller's loop sets. On a private loop in another thread the event belongs
    # to the wrong loop and every trace fails; with afork it works and the ticker keeps ticking.
    import importlib

    module = importlib.import_module(FIXTURE_MODULE)
    path = write_rows(fixture_dir / "traces.jsonl", plain_rows(6, 6))

    async def notebook_cell():
        gate = asyncio.Event()
        ticks = []

        async def ticker():
            while True:
                await asyncio.sleep(0.05)
                ticks.append(time.perf_counter())
                gate.set()

        async def gated(trace_input, replay_config, tool_cache):
            await asyncio.wait_for(gate.wait(), 5)
            await asyncio.sleep(0.05)
            return module.run(trace_input, replay_config, tool_cache)

        module.gated = gated
        task = asyncio.create_task(ticker())
        config = config_for(path, fixture_dir, target={"runner": f"python:{FIXTURE_MODULE}:gated", "max_workers": 2})
        started = time.perf_counter()
        verdict = await tk.whatif.afork(config)
        finished = time.perf_counter()
        task.cancel()
        return verdict, [t for t in ticks if started <= t <= finished]

    verdict, ticks_during = asyncio.run(notebook_cell())
    assert verdict.failures == () and verdict.state == "ship"
    assert len(ticks_during) >= 3  # 12 replays at 2 at a time, >= 0.05 s each: the loop kept serving


def test_unrecognised_labels_are_counted_and_shown(fixture_dir):
    rows = plain_rows(6, 6)
    rows[0]["cohort"] = "Failure"  # recognised whatever the case
    rows += [row(f"x-{i}", "flaky", 0.0) for i in range(3)]
    verdict = fork_rows(fixture_dir, rows)
    assert verdict.cohort("failure").selected == 6
    finding = next(f for f in verdict.findings if f.code == "unrecognised_labels")
    assert finding.details["count"] == 3 and "'flaky' x3" in finding.message
    assert verdict.selection["left_out"]["unrecognised_labels"] == {"flaky": 3}
    assert "unrecognised labels flaky ×3" in verdict.to_markdown()
