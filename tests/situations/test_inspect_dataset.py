"""Tests for toolkit.situations.inspect_dataset.to_inspect_dataset: our situations through a
real third-party harness and back.

The round trip runs inspect_ai's own ``eval()`` offline with its ``mockllm/model`` and reads the
log with ``tk.read_inspect_log``; the independent reference is the situation grid itself (its
ids, axes and size) and inspect's own ``read_eval_log`` of the same file.
"""

from __future__ import annotations

import zipfile

import pytest
from inspect_ai import Task, eval
from inspect_ai.dataset import MemoryDataset
from inspect_ai.log import read_eval_log
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import CORRECT, INCORRECT, Score, accuracy, scorer
from inspect_ai.solver import generate

import toolkit as tk
from toolkit.errors import ConfigError

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_order",
            "description": "Look up an order by its id, e.g. ORD-1234",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
        },
    }
]
POLICY = "Rules:\n1. Never refund without the customer's confirmation."
# The axes toolkit/sim/engine.py keeps in a rollout's privileged hidden_state.
HIDDEN = ("world_state", "tool_condition")


@pytest.fixture(scope="module")
def grid():
    return tk.situation_grid(TOOLS, POLICY, seed=0)


def _mock():
    def outputs(messages, tools, tool_choice, config):
        # usage set so mockllm does not fetch a tokenizer (offline; see test_inspect_log.py)
        output = ModelOutput.from_content("mockllm/model", "I can help with that.")
        output.usage = ModelUsage(input_tokens=5, output_tokens=3, total_tokens=8)
        return output

    return get_model("mockllm/model", custom_outputs=outputs)


@scorer(metrics=[accuracy()])
def ordinary_stance():
    """Passes exactly the samples whose stance axis is "ordinary": the scorer sees our axes
    only through the sample metadata, so the rewards read back prove the metadata arrived."""

    async def score(state, target):
        return Score(value=CORRECT if state.metadata["axes"]["stance"] == "ordinary" else INCORRECT)

    return score


def test_round_trip_through_inspect_eval(grid, tmp_path):
    dataset = tk.to_inspect_dataset(grid)
    assert isinstance(dataset, MemoryDataset) and len(dataset) == len(grid)
    logs = eval(
        Task(dataset=dataset, solver=generate(), scorer=ordinary_stance(), epochs=2),
        model=_mock(),
        log_dir=str(tmp_path),
        display="none",
    )
    rows = tk.read_inspect_log(logs[0].location)
    assert len(rows) == 2 * len(grid)
    expected = {f"{s.id}-p0": s for s in grid}
    assert {r["scenario_id"] for r in rows} == set(expected)
    for row in rows:
        situation = expected[row["scenario_id"]]
        metadata = row["privileged"]["inspect_metadata"]
        assert metadata["situation_id"] == situation.id
        # the hidden axes stay out by default (the engine keeps them for the judge)
        assert metadata["axes"] == {a: v for a, v in situation.dimensions.items() if a not in HIDDEN}
        assert metadata["tier"] == situation.tier and metadata["layer"] == situation.layer
        assert row["reward"] == (1.0 if situation.dimensions["stance"] == "ordinary" else 0.0)
        assert row["prompt"] == tk.write_prompts(situation, 1, seed=0, tools=None)[0].text
    # the statistics take the round-tripped rows: epochs are k
    assert tk.pass_at(rows, min_k=2).k == 2
    log = read_eval_log(logs[0].location)
    assert {str(s.id) for s in log.samples} == set(expected)


def test_prompts_per_situation_and_seed_change_the_samples(grid):
    one = tk.to_inspect_dataset(grid[:5])
    three = tk.to_inspect_dataset(grid[:5], prompts_per_situation=3)
    assert len(one) == 5 and len(three) == 15
    assert {s.id for s in three} == {f"{s.id}-p{v}" for s in grid[:5] for v in range(3)}
    other_seed = tk.to_inspect_dataset(grid[:5], seed=1)
    assert [s.input for s in one] != [s.input for s in other_seed]
    assert [s.input for s in one] == [s.input for s in tk.to_inspect_dataset(grid[:5])]
    assert tk.to_inspect_dataset(grid[:1], name="mine").name == "mine"


def test_tools_shape_the_prompts(grid):
    """Reference: write_prompts with and without tools for the same situations."""
    with_tools = tk.to_inspect_dataset(grid, tools=TOOLS)
    without = tk.to_inspect_dataset(grid)
    assert [s.input for s in with_tools] == [tk.write_prompts(s, 1, tools=TOOLS)[0].text for s in grid]
    assert [s.input for s in with_tools] != [s.input for s in without]


def test_prompts_given_directly(grid):
    prompts = tk.write_prompts(grid[0], 2, seed=3)
    dataset = tk.to_inspect_dataset(prompts)
    assert [s.id for s in dataset] == [f"{grid[0].id}-p0", f"{grid[0].id}-p1"]
    assert [s.input for s in dataset] == [p.text for p in prompts]
    assert dataset[1].metadata["persona"] == dict(prompts[1].persona)


def test_rows_one_sample_per_scenario_and_no_privileged(tmp_path):
    rows = [
        {
            "schema_version": "1",
            "scenario_id": "s1",
            "task_id": 1,
            "prompt": "Cancel order 7",
            "steps": [],
            "final_text": "",
            "messages": [{"role": "system", "content": "Be careful."}, {"role": "user", "content": "Cancel order 7"}],
            "rollout_index": r,
            "privileged": {"answer": "SECRET-KEY"},
            "reward": 1.0,
        }
        for r in range(3)
    ] + [{"scenario_id": "s2", "prompt": "Where is my parcel?", "steps": [], "final_text": "", "tier": "ordinary"}]
    dataset = tk.to_inspect_dataset(rows)
    assert [s.id for s in dataset] == ["s1", "s2"]
    assert dataset[0].input[0].role == "system" and dataset[0].input[1].text == "Cancel order 7"
    assert dataset[0].metadata == {"scenario_id": "s1", "task_id": 1}
    assert dataset[1].metadata == {"scenario_id": "s2", "tier": "ordinary"}
    logs = eval(
        Task(dataset=dataset, solver=generate(), scorer=ordinary_stance_free()), model=_mock(), log_dir=str(tmp_path), display="none"
    )
    with zipfile.ZipFile(logs[0].location) as archive:
        text = "".join(archive.read(n).decode("utf-8", "replace") for n in archive.namelist())
    assert "SECRET-KEY" not in text
    back = tk.read_inspect_log(logs[0].location)
    assert sorted(r["prompt"] for r in back) == ["Cancel order 7", "Where is my parcel?"]


@scorer(metrics=[accuracy()])
def ordinary_stance_free():
    async def score(state, target):
        return Score(value=CORRECT)

    return score


def test_hostile_inputs_named():
    with pytest.raises(ConfigError, match=r"item 0\.prompt"):
        tk.to_inspect_dataset([{"scenario_id": "a", "prompt": 3}])
    with pytest.raises(ConfigError, match="hidden_axes must be True or False"):
        tk.to_inspect_dataset([], hidden_axes="no")
    with pytest.raises(ConfigError, match="item 1: expected a Situation"):
        tk.to_inspect_dataset([{"scenario_id": "a", "prompt": "x"}, 42])
    with pytest.raises(ConfigError, match="prompts_per_situation"):
        tk.to_inspect_dataset([], prompts_per_situation=0)
    prompt = tk.write_prompts(tk.situation_grid(TOOLS)[0], 1)[0]
    with pytest.raises(ConfigError, match="item 1 has sample id .* already used by item 0"):
        tk.to_inspect_dataset([prompt, prompt])
    with pytest.raises(ConfigError, match="expected situations, prompts or rows"):
        tk.to_inspect_dataset(7)


def test_hidden_axes_left_out_by_default_and_included_on_request(grid):
    """Reference: the situation's own dimensions and the prompt write_prompts gives it."""
    situation, prompt = next((s, p) for s in grid for p in tk.write_prompts(s, 1, seed=0, tools=TOOLS) if p.reference)
    default = tk.to_inspect_dataset(situation, tools=TOOLS)[0].metadata
    assert set(default["axes"]) == {"tool", "rule", "stance", "history"} and "reference" not in default
    shown = tk.to_inspect_dataset(situation, tools=TOOLS, hidden_axes=True)[0].metadata
    assert shown["axes"] == dict(situation.dimensions) and shown["reference"] == prompt.reference
    assert shown["axes"]["world_state"] == situation.dimensions["world_state"]
    assert "reference" not in tk.to_inspect_dataset([prompt])[0].metadata
    assert tk.to_inspect_dataset([prompt], hidden_axes=True)[0].metadata["reference"] == prompt.reference


def test_two_prompts_of_one_scenario_are_two_samples():
    rows = [{"scenario_id": "a", "prompt": p, "tier": "ordinary"} for p in ("x", "y", "x")] + [{"scenario_id": "b", "prompt": "z"}]
    dataset = tk.to_inspect_dataset(rows)
    assert [s.input for s in dataset] == ["x", "y", "z"]
    assert [s.id for s in dataset][2] == "b" and len({s.id for s in dataset}) == 3
    assert dataset[0].id.startswith("a-") and dataset[1].id.startswith("a-")
    assert dataset[0].metadata == dataset[1].metadata == {"scenario_id": "a", "tier": "ordinary"}
    # the ids do not depend on the rows' order
    assert {s.input: s.id for s in tk.to_inspect_dataset(list(reversed(rows)))} == {s.input: s.id for s in dataset}


def test_simulate_rows_end_to_end(tmp_path):
    """tk.simulate (offline, seeded default) writes several phrasings per scenario; each
    distinct (scenario, prompt) is one sample carrying its scenario's axes, and the log read
    back keys the rows by those samples. Reference: the rows themselves."""
    rows = tk.simulate(budget=6, phrasings=3, progress=False).rows
    pairs = list(dict.fromkeys((r["scenario_id"], r["prompt"]) for r in rows))
    by_scenario = {r["scenario_id"]: r for r in rows}
    assert len(pairs) > len(by_scenario)  # the case under test: a scenario with several prompts
    dataset = tk.to_inspect_dataset(rows)
    assert [(s.metadata["scenario_id"], s.input[-1].text) for s in dataset] == pairs
    assert len({s.id for s in dataset}) == len(pairs)
    for sample in dataset:
        row = by_scenario[sample.metadata["scenario_id"]]
        assert sample.metadata["tier"] == row["tier"]
        assert sample.metadata["axes"] == {a: v for a, v in row["scenario_dimensions"].items() if a not in HIDDEN}
        assert sample.input[0].role == "system" and sample.input[0].text == row["messages"][0]["content"]
    shown = tk.to_inspect_dataset(rows, hidden_axes=True)
    assert [s.metadata["axes"] for s in shown] == [by_scenario[s.metadata["scenario_id"]]["scenario_dimensions"] for s in shown]
    logs = eval(Task(dataset=dataset, solver=generate(), scorer=ordinary_stance_free()), model=_mock(), log_dir=str(tmp_path), display="none")
    back = tk.read_inspect_log(logs[0].location)
    assert sorted(r["scenario_id"] for r in back) == sorted(s.id for s in dataset)
    assert sorted((r["privileged"]["inspect_metadata"]["scenario_id"], r["prompt"]) for r in back) == sorted(pairs)
