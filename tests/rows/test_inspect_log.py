"""Tests for toolkit.rows.inspect_log.read_inspect_log on logs written by inspect_ai's own eval().

Every log here comes from a real ``inspect_ai.eval()`` run, offline, with the ``mockllm/model``
model; the independent reference for rewards is the ``EvalLog`` that inspect's own
``read_eval_log`` returns for the same file, scored by inspect's ``match()`` / ``includes()``.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from inspect_ai import Task, eval
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.log import read_eval_log
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import includes, match, value_to_float
from inspect_ai.solver import generate, solver, use_tools
from inspect_ai.tool import tool

import toolkit as tk
from toolkit.errors import ConfigError, RowError

read_inspect_log = tk.read_inspect_log  # through the public namespace, as a user calls it

N_SAMPLES = 6
EPOCHS = 4  # pass_at's default min_k is 4, so the k-way numbers are reported at k = epochs


def _with_usage(output: ModelOutput) -> ModelOutput:
    # mockllm counts tokens with a tiktoken file it downloads on first use unless the output
    # already carries its usage (gotchas.md); setting it keeps eval() offline.
    output.usage = ModelUsage(input_tokens=7, output_tokens=2, total_tokens=9)
    return output


def mock_model(correct_epochs: dict[str, int]):
    """A mockllm model that answers sample ``s<i>`` correctly in ``correct_epochs[s<i>]`` of its
    calls and wrongly after. Keyed by prompt and counted, not by position in a list: samples
    and epochs run concurrently, so a fixed output list would be consumed in no fixed order."""
    calls: Counter[str] = Counter()

    def outputs(messages, tools, tool_choice, config):
        prompt = messages[-1].text
        number = int(prompt.split()[2].split("+")[0])
        seen = calls[prompt]
        calls[prompt] += 1
        right = seen < correct_epochs[f"s{number}"]
        return _with_usage(ModelOutput.from_content("mockllm/model", str(2 * number) if right else "no idea"))

    return get_model("mockllm/model", custom_outputs=outputs)


def arithmetic_task() -> Task:
    samples = [Sample(id=f"s{i}", input=f"What is {i}+{i}?", target=str(2 * i)) for i in range(N_SAMPLES)]
    return Task(dataset=MemoryDataset(samples), solver=generate(), scorer=[match(), includes()], epochs=EPOCHS)


def run(model, log_dir, log_format="eval", task=None, **kwargs):
    logs = eval(task or arithmetic_task(), model=model, log_dir=str(log_dir), display="none", log_format=log_format, **kwargs)
    assert len(logs) == 1
    return logs[0].location


STRONG = {f"s{i}": EPOCHS for i in range(N_SAMPLES - 1)} | {f"s{N_SAMPLES - 1}": 2}
WEAK = {f"s{i}": 1 for i in range(N_SAMPLES)}


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    """One strong and one weak run of the same task (.eval), and the strong run as .json."""
    root = tmp_path_factory.mktemp("inspect_logs")
    return {
        "strong": run(mock_model(STRONG), root / "strong"),
        "weak": run(mock_model(WEAK), root / "weak"),
        "strong_json": run(mock_model(STRONG), root / "json", log_format="json"),
    }


def inspect_rewards(location, scorer="match"):
    """Reference: (sample id, epoch) -> inspect's own score value mapped by its value_to_float."""
    log = read_eval_log(location)
    to_float = value_to_float()
    return {(str(s.id), s.epoch): to_float(s.scores[scorer].value) for s in log.samples}


@pytest.mark.parametrize("name", ["strong", "strong_json", "weak"])
def test_rows_match_inspects_own_scores(logs, name):
    """Reference: inspect's read_eval_log on the same file; one row per sample x epoch, the
    reward equal to inspect's match() value through inspect's value_to_float."""
    location = logs[name]
    assert location.endswith(".json" if name.endswith("json") else ".eval")
    with pytest.warns(UserWarning, match="2 scorers.*'match'"):
        rows = read_inspect_log(location)
    assert len(rows) == N_SAMPLES * EPOCHS
    assert rows.shapes == {"v1": len(rows)}
    reference = inspect_rewards(location)
    got = {(row["scenario_id"], row["rollout_index"] + 1): row["reward"] for row in rows}
    assert got == reference
    log = read_eval_log(location)
    for row in rows:
        tk.rows.validate_row(row)
        assert row["judge_status"] == "ok"
        assert row["reward_source"]["scorer"] == "match"
        assert row["reward_source"]["value"] in ("C", "I")
        assert set(row["markers"]) == {"includes"}
        assert row["lineage"]["model"] == "mockllm/model" == log.eval.model
        assert row["lineage"]["eval_run"] == log.eval.run_id
        assert row["lineage"]["inspect_task"] == log.eval.task
        assert row["prompt"].startswith("What is ")
        assert row["usage"] == {"input_tokens": 7, "output_tokens": 2}
        assert row["steps"] == [{"text": row["final_text"]}]


def test_json_and_eval_formats_give_the_same_rows(logs):
    """Reference: the same model and task written by eval() in both of inspect's formats."""
    with pytest.warns(UserWarning):
        a = read_inspect_log(logs["strong"])
    with pytest.warns(UserWarning):
        b = read_inspect_log(logs["strong_json"])

    # Which epoch got which answer can differ between runs (samples run concurrently); the
    # per-sample totals, the prompts and the formats' row shapes cannot.
    def totals(rows):
        return Counter((r["scenario_id"], r["reward"]) for r in rows)

    assert totals(a) == totals(b)
    assert sorted((r["scenario_id"], r["rollout_index"], r["prompt"]) for r in a) == sorted(
        (r["scenario_id"], r["rollout_index"], r["prompt"]) for r in b
    )

def test_epochs_become_k_and_paired_comparison_favours_the_strong_model(logs):
    """Reference: the mock's designed answers (strong right in 22 of 24 calls, weak in 6 of 24)
    and the exact sign-flip p of 6 tasks all improving, 2 / 2**6 = 0.03125."""
    strong = read_inspect_log(logs["strong"], scorer="match")
    # scorer= given: no "first scorer" warning for a multi-scorer log
    with warnings_as_errors():
        weak = read_inspect_log(logs["weak"], scorer="match")
    result = tk.pass_at(strong)
    assert result.k == EPOCHS
    assert sum(r["reward"] for r in strong) == 22
    assert sum(r["reward"] for r in weak) == 6
    comparison = tk.compare_runs(weak, strong)
    assert comparison.n_paired == N_SAMPLES
    assert comparison.delta == pytest.approx((22 - 6) / (N_SAMPLES * EPOCHS))
    assert comparison.pvalue == pytest.approx(0.03125)
    assert comparison.verdict == "b_better"
    report = tk.delta_report(weak, strong)  # the same paired comparison, as the report's target
    assert report[report.target].delta == pytest.approx(comparison.delta) and report[report.target].n_paired == N_SAMPLES


class warnings_as_errors:
    def __enter__(self):
        import warnings

        self._catch = warnings.catch_warnings()
        self._catch.__enter__()
        warnings.simplefilter("error")

    def __exit__(self, *exc):
        self._catch.__exit__(*exc)


def test_second_scorer_chosen_and_first_becomes_marker(logs):
    """Reference: inspect's includes() values in the EvalLog read by read_eval_log."""
    rows = read_inspect_log(logs["weak"], scorer="includes")
    reference = inspect_rewards(logs["weak"], "includes")
    assert {(r["scenario_id"], r["rollout_index"] + 1): r["reward"] for r in rows} == reference
    match_ref = inspect_rewards(logs["weak"], "match")
    assert {(r["scenario_id"], r["rollout_index"] + 1): r["markers"]["match"] for r in rows} == match_ref


def test_unknown_scorer_names_the_nearest(logs):
    """Reference: the log's scorers are match and includes (the task above declares them)."""
    with pytest.raises(ConfigError, match="'match'"):
        read_inspect_log(logs["weak"], scorer="mach")


def test_an_evallog_object_is_accepted(logs):
    """Reference: inspect's read_eval_log result passed in directly gives the same rows as the path."""
    log = read_eval_log(logs["weak"])
    rows = read_inspect_log(log, scorer="match")
    assert len(rows) == N_SAMPLES * EPOCHS
    assert {(r["scenario_id"], r["rollout_index"] + 1): r["reward"] for r in rows} == inspect_rewards(logs["weak"])


def test_not_an_inspect_log(tmp_path):
    """Reference: files inspect's read_eval_log refuses (a JSON list, a non-zip .eval, a missing file)."""
    (tmp_path / "x.json").write_text(json.dumps([{"a": 1}]))
    (tmp_path / "x.eval").write_text("hello")
    with pytest.raises(RowError, match="not an inspect_ai eval log"):
        read_inspect_log(tmp_path / "x.json")
    with pytest.raises(RowError, match="not an inspect_ai eval log"):
        read_inspect_log(tmp_path / "x.eval")
    with pytest.raises(FileNotFoundError):
        read_inspect_log(tmp_path / "missing.eval")
    with pytest.raises(TypeError):
        read_inspect_log(42)


@solver
def fail_on(sample_id: str):
    async def solve(state, generate_fn):
        if state.sample_id == sample_id:
            raise RuntimeError("boom: the solver broke on purpose")
        return await generate_fn(state)

    return solve


def test_errored_sample_is_kept_with_reward_none(tmp_path):
    """Reference: inspect's EvalLog for a run whose solver raises on s2 (fail_on_error=False):
    sample.error is set there for every epoch of s2, and the other rows carry inspect's scores."""
    samples = [Sample(id=f"s{i}", input=f"What is {i}+{i}?", target=str(2 * i)) for i in range(3)]
    task = Task(dataset=MemoryDataset(samples), solver=fail_on("s2"), scorer=match(), epochs=2)
    location = run(mock_model({"s0": 2, "s1": 0, "s2": 2}), tmp_path, task=task, fail_on_error=False)
    log = read_eval_log(location)
    errored = {(str(s.id), s.epoch) for s in log.samples if s.error is not None}
    assert errored == {("s2", 1), ("s2", 2)}
    with pytest.warns(UserWarning, match="2 of 6 samples.*errored"):
        rows = read_inspect_log(location)
    assert len(rows) == 6
    by_key = {(r["scenario_id"], r["rollout_index"] + 1): r for r in rows}
    for key in errored:
        assert by_key[key]["reward"] is None
        assert by_key[key]["judge_status"] == "error"
        assert "boom" in by_key[key]["reason"]
    to_float = value_to_float()
    for s in log.samples:
        if s.error is None:
            assert by_key[(str(s.id), s.epoch)]["reward"] == to_float(s.scores["match"].value)


@tool
def add():
    async def execute(a: int, b: int):
        """Add two integers.

        Args:
            a: The first integer.
            b: The second integer.
        """
        return json.dumps({"sum": a + b})

    return execute


def test_tool_calls_become_steps(tmp_path):
    """Reference: inspect's own messages for a run where the mock calls the add tool once and
    then answers; the tool call, its arguments and inspect's tool result become one step."""

    def outputs(messages, tools, tool_choice, config):
        if messages[-1].role == "tool":
            return _with_usage(ModelOutput.from_content("mockllm/model", "The sum is 4."))
        return _with_usage(
            ModelOutput.for_tool_call("mockllm/model", "add", {"a": 2, "b": 2}, tool_call_id="call_1", content="Let me add.")
        )

    task = Task(
        dataset=MemoryDataset([Sample(id=1, input="What is 2+2?", target="4")]),
        solver=[use_tools(add()), generate()],
        scorer=includes(),
    )
    location = run(get_model("mockllm/model", custom_outputs=outputs), tmp_path, task=task)
    log = read_eval_log(location)
    tool_message = [m for m in log.samples[0].messages if m.role == "tool"][0]
    rows = read_inspect_log(location)
    assert len(rows) == 1
    row = rows[0]
    assert row["scenario_id"] == "1" and row["task_id"] == 1 and row["rollout_index"] == 0
    assert row["steps"] == [
        {"tool": "add", "arguments": {"a": 2, "b": 2}, "call_id": "call_1", "text": "Let me add.", "result": json.loads(tool_message.text)},
        {"text": "The sum is 4."},
    ]
    assert row["final_text"] == "The sum is 4." == log.samples[0].output.completion
    assert row["reward"] == value_to_float()(log.samples[0].scores["includes"].value) == 1.0
    assert "markers" not in row
    assert row["privileged"]["inspect_target"] == "4"
    assert "privileged" not in tk.rows.scrub(row)


def test_out_of_range_value_is_refused(logs):
    """Reference: a score value of 3 set on inspect's own EvalLog; [0, 1] is the reward range."""
    log = read_eval_log(logs["weak"])
    log.samples[1].scores["match"].value = 3
    with pytest.raises(RowError, match=r"sample 's\d' epoch \d.*in \[0, 1\]"):
        read_inspect_log(log, scorer="match")


def test_missing_inspect_names_the_extra(logs, monkeypatch):
    """Reference: Python's import system, with inspect_ai.log made unimportable (None in sys.modules)."""
    import sys

    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)
    with pytest.raises(ImportError, match=r'pip install "toolkit\[inspect\]"'):
        read_inspect_log(logs["weak"])


def test_non_success_status_warns(logs):
    """Reference: inspect's EvalLog with its status set to 'cancelled' (as a stopped run leaves it)."""
    log = read_eval_log(logs["weak"])
    log.status = "cancelled"
    with pytest.warns(UserWarning, match="'cancelled'"):
        read_inspect_log(log, scorer="match")
