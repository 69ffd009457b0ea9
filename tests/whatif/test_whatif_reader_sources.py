"""What-if sources ``inspect_log`` and ``tau2``: the rows readers as trace sources.

The inspect log is written by inspect_ai's own ``eval()`` (offline, ``mockllm/model``); the tau2
file is hand-written from tau2-bench's data model (sierra-research/tau2-bench commit
a2c024725189473d2d7cea3a5cfdbcc67478e41f, src/tau2/data_model/simulation.py and message.py).
The reference for the cohorts is the designed outcome of each sample / simulation.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from inspect_ai import Task, eval
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import CORRECT, PARTIAL, Score, accuracy, includes, match, scorer
from inspect_ai.solver import generate

import toolkit as tk
from toolkit.errors import SetupError
from toolkit.whatif.config import WhatIfConfigError, load_config
from toolkit.whatif.sources import load_traces, select_cohorts


def base_config(source):
    return load_config(
        {
            "source": source,
            "target": {"runner": "python:toolkit.whatif.examples:support_agent"},
            "selection": {"failure_cohort": {"limit": 100}, "baseline_cohort": {"limit": 100}},
            "change": {"system_prompt": "Quote the tool result verbatim."},
            "scorer": {"adapter": "python", "score_fn": "python:toolkit.whatif.examples:grounding_score", "cache_mode": "off"},
            "decision": {},
            "reporting": {},
            "timeouts": {},
        }
    )


@scorer(metrics=[accuracy()])
def partial():
    """P (partial credit, 0.5 through inspect's value_to_float) for an answer that is not exactly "4"."""

    async def score(state, target):
        return Score(value=CORRECT if state.output.completion == "4" else PARTIAL)

    return score


@pytest.fixture(scope="module")
def inspect_log(tmp_path_factory):
    """Samples s0..s5; the mock answers s0-s2 exactly ("4"), s3-s5 with the answer first in a
    sentence ("4, I think"): match() (the target at the end) fails those, includes() passes them."""

    def outputs(messages, tools, tool_choice, config):
        number = int(messages[-1].text.split()[-1])
        text = "4" if number < 3 else "4, I think"
        output = ModelOutput.from_content("mockllm/model", text)
        output.usage = ModelUsage(input_tokens=3, output_tokens=1, total_tokens=4)  # offline, gotchas.md
        return output

    samples = [Sample(id=f"s{i}", input=f"Say four, sample {i}", target="4") for i in range(6)]
    task = Task(dataset=MemoryDataset(samples), solver=generate(), scorer=[match(), includes(), partial()])
    root = tmp_path_factory.mktemp("whatif_inspect")
    logs = eval(task, model=get_model("mockllm/model", custom_outputs=outputs), log_dir=str(root), display="none")
    return logs[0].location


def test_inspect_log_source_cohorts_follow_the_chosen_scorer(inspect_log):
    with pytest.warns(UserWarning, match="3 scorers"):
        default = load_traces(base_config({"adapter": "inspect_log", "path": inspect_log}).source)
    assert len(default) == 6
    assert {t.task_id: t.cohort for t in default} == {f"s{i}": ("baseline" if i < 3 else "failure") for i in range(6)}
    lenient = load_traces(base_config({"adapter": "inspect_log", "path": inspect_log, "inspect_scorer": "includes"}).source)
    assert Counter(t.cohort for t in lenient) == {"baseline": 6}
    assert default[0].user_message == "Say four, sample 0" and default[0].original_output == "4"
    assert "privileged" not in default[0].metadata


def test_inspect_log_source_failure_below_moves_partial_credit(inspect_log):
    """Reference: P maps to 0.5; the default threshold 0.5 keeps it a baseline, 0.75 does not."""
    source = {"adapter": "inspect_log", "path": inspect_log, "inspect_scorer": "partial"}
    default = load_traces(base_config(source).source)
    assert Counter(t.cohort for t in default) == {"baseline": 6}
    assert sorted(t.original_score for t in default) == [0.5, 0.5, 0.5, 1.0, 1.0, 1.0]
    stricter = load_traces(base_config({**source, "failure_below": 0.75}).source)
    assert {t.task_id: t.cohort for t in stricter} == {f"s{i}": ("baseline" if i < 3 else "failure") for i in range(6)}


def tau2_results(rewards):
    sims = []
    for task_id, trials in rewards.items():
        for trial, reward in enumerate(trials):
            sims.append(
                {
                    "id": f"sim-{task_id}-{trial}",
                    "task_id": task_id,
                    "trial": trial,
                    "start_time": "t",
                    "end_time": "t",
                    "duration": 1.0,
                    "termination_reason": "user_stop",
                    "reward_info": None if reward is None else {"reward": reward, "reward_breakdown": {"DB": reward}},
                    "messages": [
                        {"role": "user", "content": f"Where is order {task_id}?"},
                        {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [{"id": "c1", "name": "get_order", "arguments": {"order_id": task_id}}],
                        },
                        {"role": "tool", "id": "c1", "content": json.dumps({"status": "shipped"}), "requestor": "assistant"},
                        {"role": "assistant", "content": f"Order {task_id} has shipped."},
                    ],
                }
            )
    return {
        "timestamp": "2026-01-01T00:00:00",
        "tasks": [{"id": t, "user_scenario": {}} for t in rewards],
        "info": {
            "git_commit": "x",
            "num_trials": 2,
            "max_steps": 10,
            "max_errors": 3,
            "agent_info": {"implementation": "llm_agent", "llm": "m"},
            "user_info": {"implementation": "user_simulator"},
            "environment_info": {"domain_name": "retail", "policy": "You are a retail agent."},
        },
        "simulations": sims,
    }


def test_tau2_source_traces_and_failure_threshold(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(tau2_results({"1": [1.0, 0.0], "2": [0.0, 1.0], "3": [1.0, None]})))
    traces = load_traces(base_config({"adapter": "tau2", "path": str(path)}).source)
    assert len(traces) == 6
    assert Counter(t.cohort for t in traces) == {"baseline": 3, "failure": 2, "": 1}
    first = traces[0]
    assert first.user_message == "Where is order 1?" and first.original_output == "Order 1 has shipped."
    assert first.tool_calls[0].name == "get_order" and first.tool_calls[0].result == {"status": "shipped"}
    assert first.system_prompt == "You are a retail agent."
    # the reward is tau2's 0/1 pass, so any threshold in (0, 1] splits the same way; the
    # trace without a reward stays out of both cohorts and is counted as unlabelled
    selections = select_cohorts(traces, base_config({"adapter": "tau2", "path": str(path)}))
    assert len(selections["failure"].traces) == 2 and len(selections["baseline"].traces) == 3
    assert selections.unlabelled == 1


def test_tau2_source_runs_a_whole_fork(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(tau2_results({str(i): [float(i % 2), 1.0] for i in range(10)})))
    result = tk.whatif.fork(base_config({"adapter": "tau2", "path": str(path)}))
    # 5 failing trials; 15 passing, of which the 5 second trials of odd tasks repeat the first
    # trial's prompt, output and cohort and are collapsed as duplicates (sources.py)
    assert result.cohort("failure").selected == 5 and result.cohort("baseline").selected == 10
    assert result.cohort("failure").replayed == 5


def test_reader_sources_config_errors(tmp_path):
    with pytest.raises(WhatIfConfigError) as caught:
        base_config({"adapter": "tau2"})
    assert "requires: path" in str(caught.value) and "tk.read_tau2" in str(caught.value)
    with pytest.raises(WhatIfConfigError) as caught:
        base_config({"adapter": "inspect_log"})
    assert "tk.read_inspect_log" in str(caught.value)
    with pytest.raises(WhatIfConfigError, match="inspect_scorer .adapter inspect_log. do not apply to adapter 'tau2'"):
        base_config({"adapter": "tau2", "path": "x.json", "inspect_scorer": "match"})
    with pytest.raises(SetupError, match="does not exist"):
        load_traces(base_config({"adapter": "tau2", "path": str(tmp_path / "nope.json")}).source)
    (tmp_path / "bad.json").write_text("[1]")
    with pytest.raises(SetupError, match="expected a tau2-bench Results object"):
        load_traces(base_config({"adapter": "tau2", "path": str(tmp_path / "bad.json")}).source)
    (tmp_path / "bad.eval").write_text("not a zip")
    with pytest.raises(SetupError, match="not an inspect_ai eval log"):
        load_traces(base_config({"adapter": "inspect_log", "path": str(tmp_path / "bad.eval")}).source)


def test_inspect_scorer_unknown_is_named(inspect_log):
    with pytest.raises(SetupError, match="'includes'"):
        load_traces(base_config({"adapter": "inspect_log", "path": inspect_log, "inspect_scorer": "include"}).source)


# --- reader warnings in the verdict; label_field from the sample's own metadata ----------------


def test_reader_warnings_become_findings_of_the_fork(inspect_log, tmp_path):
    """Reference: the readers' own warnings (inspect: 3 scorers, the first is the reward;
    tau2: a simulation that never ran) appear in the verdict, each as one finding."""
    with pytest.warns(UserWarning, match="3 scorers"):  # still shown as it was
        verdict = tk.whatif.fork(base_config({"adapter": "inspect_log", "path": inspect_log}))
    found = [f for f in verdict.findings if f.code == "source_warnings"]
    assert len(found) == 1 and found[0].severity == "degrades_trust"
    assert "3 scorers" in found[0].message and found[0].message.startswith("source.adapter inspect_log: ")
    assert found[0].next_steps  # decide.FIX_SUGGESTIONS
    chosen = tk.whatif.fork(base_config({"adapter": "inspect_log", "path": inspect_log, "inspect_scorer": "match"}))
    assert not [f for f in chosen.findings if f.code == "source_warnings"]  # choosing the scorer silences it

    data = tau2_results({str(i): [float(i % 2), 1.0] for i in range(10)})
    data["simulations"][3]["termination_reason"] = "infrastructure_error"
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    with pytest.warns(UserWarning, match="infrastructure error"):
        verdict = tk.whatif.fork(base_config({"adapter": "tau2", "path": str(path)}))
    found = [f for f in verdict.findings if f.code == "source_warnings"]
    assert len(found) == 1 and "1 of 20 simulations in results.json ended with an infrastructure error" in found[0].message


@pytest.fixture(scope="module")
def labelled_inspect_log(tmp_path_factory):
    """Samples l0..l5 labelled in their own metadata: ``cohort`` says l0-l2 failed, ``review``
    says the opposite; every answer is right, so the reward alone would call all six baselines."""

    def outputs(messages, tools, tool_choice, config):
        output = ModelOutput.from_content("mockllm/model", "4")
        output.usage = ModelUsage(input_tokens=3, output_tokens=1, total_tokens=4)  # offline, gotchas.md
        return output

    samples = [
        Sample(id=f"l{i}", input=f"Say four, sample {i}", target="4",
               metadata={"cohort": "failure" if i < 3 else "baseline", "review": "baseline" if i < 3 else "failure"})
        for i in range(6)
    ]
    task = Task(dataset=MemoryDataset(samples), solver=generate(), scorer=match())
    logs = eval(task, model=get_model("mockllm/model", custom_outputs=outputs), log_dir=str(tmp_path_factory.mktemp("labelled")), display="none")
    return logs[0].location


def test_label_field_reads_the_samples_own_metadata(labelled_inspect_log):
    source = {"adapter": "inspect_log", "path": labelled_inspect_log}
    assert Counter(t.cohort for t in load_traces(base_config(source).source)) == {"baseline": 6}
    by_cohort = load_traces(base_config({**source, "label_field": "cohort"}).source)
    assert {t.task_id: t.cohort for t in by_cohort} == {f"l{i}": ("failure" if i < 3 else "baseline") for i in range(6)}
    by_review = load_traces(base_config({**source, "label_field": "review"}).source)
    assert {t.task_id: t.cohort for t in by_review} == {f"l{i}": ("baseline" if i < 3 else "failure") for i in range(6)}
    assert all("privileged" not in t.metadata for t in by_review)
    # a row field works as before: judge_status "ok" names no cohort, so all six are unrecognised
    assert {t.label for t in load_traces(base_config({**source, "label_field": "judge_status"}).source)} == {"ok"}
    with pytest.raises(SetupError, match=r"source\.label_field 'cohrt' is in no row read from"):
        load_traces(base_config({**source, "label_field": "cohrt"}).source)


def test_tau2_label_field_naming_nothing_is_a_setup_error(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(tau2_results({"1": [1.0, 0.0]})))
    with pytest.raises(SetupError, match=r"source\.label_field 'cohort' is in no row .*ended_by"):
        load_traces(base_config({"adapter": "tau2", "path": str(path), "label_field": "cohort"}).source)
    ended = load_traces(base_config({"adapter": "tau2", "path": str(path), "label_field": "ended_by"}).source)
    assert [t.label for t in ended] == ["user_stop", "user_stop"]
