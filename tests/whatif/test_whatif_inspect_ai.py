"""The ``inspect_ai`` scorer adapter (``toolkit/whatif/_inspect_ai.py``), offline.

The scorers are Inspect AI's own ``match()`` and ``includes()`` and a custom ``@scorer``; no
model is called. Expected scores are computed by calling the same Inspect scorers directly on
an Inspect ``TaskState`` built here, independently of the adapter.

``inspect_ai`` is an optional extra for users (``pip install -e '.[inspect]'``; the adapter's
docstring says why it is not a base dependency) and part of the ``dev`` extra, so these tests
always run in the suite; a missing package fails them rather than skipping them.
"""

import asyncio
import sys
import textwrap

import pytest

import toolkit as tk

AGENT_MODULE = "whatif_inspect_agent"
AGENT_SOURCE = textwrap.dedent('''
    """Fixture runner and custom Inspect scorer for the inspect_ai adapter tests."""


    def run(trace_input, replay_config, tool_cache):
        record = tool_cache.lookup("lookup", {"id": trace_input.metadata["record"]})
        if "quote" in (replay_config.system_prompt or ""):
            return f"Your order is {record['status']}."
        return trace_input.metadata["original"]


    SEEN_MODELS = []
    try:
        from inspect_ai.scorer import Score, accuracy, scorer

        @scorer(metrics=[accuracy()])
        def graded(model=None, partial="P"):
            SEEN_MODELS.append(model)

            async def score(state, target):
                text = state.output.completion
                if "unsure" in text:
                    return Score(value={"a": 1, "b": 0})
                if "boom" in text:
                    raise RuntimeError("judge down")
                return Score(value=partial if "partly" in text else ("C" if target.text in text else "I"),
                             explanation=f"graded by {model}")

            return score

        READY = graded()
    except ImportError:
        pass
''')

# the rubric text is only the fallback target: traces that carry a "target" are scored against it
JUDGE = {"judge_provider": "anthropic", "judge_model_id": "claude-haiku-4-5", "rubric_id": "states-status",
         "rubric_text": "delivered"}


def statuses():
    # (cohort, recorded status, original answer)
    failures = [("failure", "shipped", "I'm looking into it.")] * 6
    baselines = [("baseline", "shipped", "Your order is shipped.")] * 6
    return failures + baselines


def rows(answers=None, with_target=True):
    out = []
    for index, (cohort, status, original) in enumerate(statuses()):
        record = f"ORD-{index:05d}"
        original = answers[index] if answers else original
        entry = {
            "schema_version": "1", "trace_id": f"{cohort[0]}-{index:02d}", "task_id": f"t{index}",
            "prompt": f"Where is my order {record}?",
            "steps": [{"tool": "lookup", "arguments": {"id": record}, "result": {"status": status}}, {"text": original}],
            "final_text": original, "reward": 0.0 if cohort == "failure" else 1.0, "cohort": cohort,
            "record": record, "original": original,
        }
        if with_target:
            entry["target"] = status
        out.append(entry)
    return out


@pytest.fixture
def agent_dir(tmp_path, monkeypatch):
    (tmp_path / f"{AGENT_MODULE}.py").write_text(AGENT_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop(AGENT_MODULE, None)
    return tmp_path


def config(tmp_path, data, **scorer):
    path = tmp_path / "traces.jsonl"
    tk.save_rows(data, path)
    return {
        "source": {"adapter": "jsonl", "path": str(path), "label_field": "cohort"},
        "target": {"runner": f"python:{AGENT_MODULE}:run"},
        "selection": {"failure_cohort": {"limit": 50}, "baseline_cohort": {"limit": 50}},
        "change": {"system_prompt": "Look the record up and quote its status."},
        "scorer": {"adapter": "inspect_ai", "score_fn": "python:inspect_ai.scorer:includes", "cache_mode": "off",
                   **JUDGE, **scorer},
        "decision": {}, "reporting": {}, "timeouts": {},
    }


def test_missing_inspect_ai_is_a_setup_error_naming_the_install(agent_dir, monkeypatch):
    for name in [m for m in sys.modules if m == "inspect_ai" or m.startswith("inspect_ai.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "inspect_ai", None)  # import inspect_ai -> ImportError
    with pytest.raises(tk.whatif.SetupError) as info:
        tk.whatif.fork(config(agent_dir, rows()))
    message = str(info.value)
    assert 'pip install "inspect_ai>=0.3.285"' in message and "adapter 'python'" in message


# --- with inspect_ai installed --------------------------------------------------------------------


@pytest.fixture
def inspect_api():
    from inspect_ai.model import ChatMessageAssistant, ChatMessageUser, ModelName, ModelOutput
    from inspect_ai.scorer import Target, includes, match, value_to_float
    from inspect_ai.solver import TaskState

    def direct(scorer, user, text, target):
        """The Inspect scorer called by hand, independent of the adapter."""
        state = TaskState(model=ModelName("test/reference"), sample_id="x", epoch=1, input=user,
                          messages=[ChatMessageUser(content=user), ChatMessageAssistant(content=text)],
                          output=ModelOutput.from_content("test/reference", text))
        return value_to_float()(asyncio.run(scorer(state, Target(target))).value)

    return {"direct": direct, "includes": includes, "match": match}


def test_includes_scores_each_output_independently(agent_dir, inspect_api):
    verdict = tk.whatif.fork(config(agent_dir, rows()))
    frame = verdict.traces
    data = rows()
    for _, trace in frame.iterrows():
        entry = next(r for r in data if r["trace_id"] == trace.trace_id)
        expected_original = inspect_api["direct"](inspect_api["includes"](), entry["prompt"], entry["final_text"], "shipped")
        expected_replayed = inspect_api["direct"](inspect_api["includes"](), entry["prompt"], "Your order is shipped.", "shipped")
        assert trace.original_score == expected_original and trace.replayed_score == expected_replayed
        assert trace.delta == expected_replayed - expected_original
    assert verdict.cohort("failure").improved == 6 and verdict.cohort("baseline").unchanged == 6
    assert verdict.state == "ship" and verdict.methodology["scorer"] == "inspect_ai"
    unused = next(f for f in verdict.findings if f.code == "settings_unused")  # includes() takes no judge model
    assert unused.details["fields"] == "judge_provider, judge_model_id"


def test_rubric_text_is_the_target_when_a_trace_has_none(agent_dir, inspect_api):
    shipped = tk.whatif.fork(config(agent_dir, rows(with_target=False), rubric_text="shipped"))
    assert shipped.cohort("failure").improved == 6
    other = tk.whatif.fork(config(agent_dir, rows(with_target=False)))
    assert all(t.original_score == 0.0 and t.replayed_score == 0.0 for t in other.trace_results)


def test_scoring_parameters_reach_the_factory(agent_dir, inspect_api):
    # match() looks at the END of the answer by default; 'exact' needs the whole answer to equal the target
    answers = ["shipped, it is"] * 6 + ["It is shipped"] * 6
    end = tk.whatif.fork(config(agent_dir, rows(answers), score_fn="python:inspect_ai.scorer:match"))
    exact = tk.whatif.fork(config(agent_dir, rows(answers), score_fn="python:inspect_ai.scorer:match",
                                  scoring_parameters={"location": "begin"}))
    base_end = [t.original_score for t in end.trace_results if t.cohort == "baseline"]
    base_begin = [t.original_score for t in exact.trace_results if t.cohort == "baseline"]
    fail_begin = [t.original_score for t in exact.trace_results if t.cohort == "failure"]
    reference = inspect_api["direct"](inspect_api["match"](location="begin"), "q", "shipped, it is", "shipped")
    assert base_end == [1.0] * 6 and base_begin == [0.0] * 6 and fail_begin == [reference] * 6 == [1.0] * 6
    with pytest.raises(tk.whatif.SetupError, match="did you mean 'location'"):
        tk.whatif.fork(config(agent_dir, rows(), score_fn="python:inspect_ai.scorer:match",
                              scoring_parameters={"locaton": "begin"}))


def test_judge_fields_choose_the_judge_of_a_factory_with_a_model_argument(agent_dir, inspect_api):
    verdict = tk.whatif.fork(config(agent_dir, rows(), score_fn=f"python:{AGENT_MODULE}:graded",
                                    judge_model_snapshot="claude-haiku-4-5-20251001"))
    assert sys.modules[AGENT_MODULE].SEEN_MODELS[-1] == "anthropic/claude-haiku-4-5-20251001"
    assert "settings_unused" not in verdict.codes() and verdict.state == "ship"
    assert verdict.trace_results[0].rationale_replayed == "graded by anthropic/claude-haiku-4-5-20251001"
    tk.whatif.fork(config(agent_dir, rows(), score_fn=f"python:{AGENT_MODULE}:graded",
                          scoring_parameters={"model": "openai/gpt-judge"}))
    assert sys.modules[AGENT_MODULE].SEEN_MODELS[-1] == "openai/gpt-judge"  # an explicit parameter wins


def test_score_values_and_failures(agent_dir, inspect_api):
    answers = ["partly shipped"] + ["unsure"] + ["boom"] + ["I'm looking into it."] * 3 + ["Your order is shipped."] * 6
    verdict = tk.whatif.fork(config(agent_dir, rows(answers), score_fn=f"python:{AGENT_MODULE}:graded"))
    by_id = {t.trace_id: t for t in verdict.trace_results}
    assert by_id["f-00"].original_score == 0.5  # 'P' through inspect's value_to_float
    codes = {r.trace_id: r.code for r in verdict.failures}
    assert codes == {"f-01": "scorer_invalid_output", "f-02": "scorer_failed"}
    assert verdict.cohort("failure").scored == 4


def test_a_ready_scorer_is_used_as_is_and_refuses_parameters(agent_dir, inspect_api):
    verdict = tk.whatif.fork(config(agent_dir, rows(), score_fn=f"python:{AGENT_MODULE}:READY"))
    assert verdict.state == "ship"
    with pytest.raises(tk.whatif.SetupError, match="ready scorer"):
        tk.whatif.fork(config(agent_dir, rows(), score_fn=f"python:{AGENT_MODULE}:READY", scoring_parameters={"partial": "C"}))


def test_cache_key_holds_the_inspect_version_and_the_judge(agent_dir, inspect_api):
    import json

    import inspect_ai

    settings = config(agent_dir, rows(), cache_mode="on", cache_dir=str(agent_dir / "cache"))
    tk.whatif.fork(settings)
    entry = json.loads(next((agent_dir / "cache" / "entries").rglob("*.json")).read_text())
    parts = entry["components"]
    assert parts["inspect_ai_version"] == inspect_ai.__version__ and parts["adapter"] == "inspect_ai"
    assert parts["judge_model_id"] == "claude-haiku-4-5" and parts["rubric_id"] == "states-status"
    again = tk.whatif.fork(settings)
    assert again.cache["hits"] == 24 and again.cache["misses"] == 0


def test_inspect_scorer_inside_a_running_event_loop(agent_dir, inspect_api):
    async def notebook_cell():
        return tk.whatif.fork(config(agent_dir, rows()))

    assert asyncio.run(notebook_cell()).state == "ship"
