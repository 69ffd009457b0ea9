"""Training cuts: SFT rows and masks, DPO pairs, GRPO groups, reward-model set, publish gate,
decontamination (docs/design/engine.md §7; acceptance facts docs/design/engine.md §10 items 34-40)."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolkit as tk

PRIVILEGED = {"reference": "the refund for order 4411 is 12.50 dollars", "rubric": "must cite policy 7"}
SYSTEM = "You are a support agent."
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


def make_row(task="t1", reward=1.0, index=0, final="Your order ships today.", **extra):
    row = {
        "schema_version": "1",
        "scenario_id": task,
        "rollout_index": index,
        "prompt": f"Where is my order? ({task})",
        "steps": [
            {"tool": "lookup", "arguments": {"order_id": "A1"}, "result": {"status": "shipped"}, "call_id": "c1"},
            {"text": final},
        ],
        "final_text": final,
        "reward": reward,
        "judge_status": "ok",
        "privileged": dict(PRIVILEGED),
        "markers": {"grounded": 1.0},
        "lineage": {"seed": 7},
    }
    row.update(extra)
    return row


def privileged_keys(value, found=None):
    found = set() if found is None else found
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("privileged", "reference", "hidden_state", "principle", "rubric", "vector"):
                found.add(key)
            privileged_keys(item, found)
    elif isinstance(value, list):
        for item in value:
            privileged_keys(item, found)
    return found


# ---- item 34: loss masks and unroll ---------------------------------------------------


def test_loss_mask_assistant_final_and_unroll():
    row = make_row()
    out = tk.training_rows([row], system_prompt=SYSTEM, tools=TOOLS)
    sample = out.rows[0]
    assert [m["role"] for m in sample["messages"]] == ["system", "user", "assistant", "tool", "assistant"]
    assert sample["loss_mask"] == [0, 0, 1, 0, 1]
    final = tk.training_rows([row], system_prompt=SYSTEM, mask_mode="final").rows[0]
    assert final["loss_mask"] == [0, 0, 0, 0, 1]
    unrolled = tk.training_rows([row], system_prompt=SYSTEM, unroll=True).rows
    assert [s["loss_mask"] for s in unrolled] == [[0, 0, 1], [0, 0, 0, 0, 1]]
    assert [s["turn_index"] for s in unrolled] == [0, 1]


def test_sft_rows_carry_system_tools_and_wire_shaped_calls():
    out = tk.training_rows([make_row()], system_prompt=SYSTEM, tools=TOOLS)
    sample = out.rows[0]
    assert sample["messages"][0] == {"role": "system", "content": SYSTEM}
    assert sample["tools"] == TOOLS
    call = sample["messages"][2]["tool_calls"][0]
    assert call["type"] == "function" and call["id"] == "c1"
    assert isinstance(call["function"]["arguments"], str)
    assert json.loads(call["function"]["arguments"]) == {"order_id": "A1"}
    assert sample["messages"][3]["tool_call_id"] == "c1"
    # block list, not allow list: markers and lineage ride along (#149)
    assert sample["markers"] == {"grounded": 1.0} and sample["lineage"] == {"seed": 7}
    assert sample["schema_version"] == "1"


def test_double_encoded_arguments_are_unwrapped():
    inner = json.dumps({"order_id": "A1"})
    row = {
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "x", "type": "function", "function": {"name": "lookup", "arguments": json.dumps(inner)}}]},
            {"role": "tool", "tool_call_id": "x", "content": "{}"},
            {"role": "assistant", "content": "done"},
        ],
        "reward": 1.0,
    }
    sample = tk.training_rows([row]).rows[0]
    assert json.loads(sample["messages"][1]["tool_calls"][0]["function"]["arguments"]) == {"order_id": "A1"}


def test_arguments_that_are_not_objects_refuse_the_row():
    bad = {"messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "x", "type": "function", "function": {"name": "lookup", "arguments": "not json"}}]},
        {"role": "assistant", "content": "done"},
    ]}
    out = tk.training_rows([bad, make_row()])
    assert len(out.rows) == 1 and out.refused == {"tool_arguments_not_an_object": 1}
    with pytest.raises(tk.errors.ExportError, match="tool_arguments_not_an_object"):
        tk.training_rows([bad])


def test_trl_format_has_no_mask_and_uses_prompt_completion():
    row = make_row()
    full = tk.training_rows([row], system_prompt=SYSTEM, format="trl")
    sample = full.rows[0]
    assert "loss_mask" not in sample and "messages" in sample
    assert "prompt" not in sample and sample["prompt_text"] == row["prompt"]
    assert sample["messages"][2]["tool_calls"][0]["function"]["arguments"] == {"order_id": "A1"}
    assert "assistant_only_loss" in full.note
    final = tk.training_rows([row], system_prompt=SYSTEM, format="trl", mask_mode="final").rows[0]
    assert "loss_mask" not in final and "messages" not in final
    assert [m["role"] for m in final["prompt"]] == ["system", "user", "assistant", "tool"]
    assert final["completion"] == [{"role": "assistant", "content": row["final_text"]}]
    unrolled = tk.training_rows([row], format="trl", unroll=True).rows
    assert [len(s["prompt"]) for s in unrolled] == [1, 3]
    assert all(len(s["completion"]) == 1 for s in unrolled)


def test_unknown_format_names_the_nearest():
    with pytest.raises(tk.errors.ExportError, match="did you mean 'openai'"):
        tk.training_rows([make_row()], format="opnai")


def test_think_blocks_stripped_and_tool_output_cut_with_marker():
    row = make_row(final="<think>secret plan</think>Ships today.")
    row["steps"][0]["result"] = {"log": "x" * 500}
    sample = tk.training_rows([row], max_tool_output_chars=50).rows[0]
    assert sample["messages"][-1]["content"] == "Ships today."
    tool = sample["messages"][2]["content"] if sample["messages"][2]["role"] == "tool" else sample["messages"][3]["content"]
    kept, marker = tool.split("\n", 1)
    assert len(kept) == 50 and kept.startswith('{"log"') and "cut at 50 characters" in marker


# ---- item 35: group fields ------------------------------------------------------------


def test_group_fields_half_counts_as_neither():
    rows = [make_row(reward=r, index=i) for i, r in enumerate([1.0, 0.0, 0.5])]
    out = tk.training_rows(rows)
    fields = out.rows[0]
    assert fields["n1"] == 1 and fields["n0"] == 1 and fields["k"] == 3
    assert fields["reward_mean"] == pytest.approx(0.5)
    assert fields["reward_std"] == pytest.approx((1 / 6) ** 0.5)  # population sd of (1, 0, .5)
    assert len(fields["group_id"]) == 12
    assert any("reward < 0.5" in w for w in out.warnings)


def test_privileged_quote_refuses_row():
    leak = make_row(final="Per our notes the refund for order 4411 is 12.50 dollars.")
    out = tk.training_rows([leak, make_row(task="t2")])
    assert out.refused == {"privileged_quote": 1} and len(out.rows) == 1


# ---- item 36: preference pairs --------------------------------------------------------


def test_preference_pairs_margins():
    pairs = tk.build_preference_pairs([make_row(reward=1.0), make_row(reward=0.0, index=1, final="No idea.")])
    assert len(pairs.pairs) == 1 and pairs.pairs[0]["margin"] == 1.0
    assert pairs.pairs[0]["chosen_score"] == 1.0 and pairs.pairs[0]["rejected_score"] == 0.0
    half = [make_row(reward=1.0), make_row(reward=0.5, index=1, final="Maybe.")]
    assert len(tk.build_preference_pairs(half).pairs) == 0
    assert len(tk.build_preference_pairs(half, min_margin=0.5).pairs) == 1
    with pytest.raises(ValueError, match="min_margin"):
        tk.build_preference_pairs(half, min_margin=0)


def test_non_ok_status_never_pairs_and_length_match():
    rows = [
        make_row(reward=1.0, final="ok short"),
        make_row(reward=0.0, index=1, final="x" * 400),
        make_row(reward=0.0, index=2, final="short no"),
        make_row(reward=0.0, index=3, final="y", judge_status="error"),
    ]
    plain = tk.build_preference_pairs(rows)
    assert plain.dropped == {"judge_status_not_ok": 1}
    matched = tk.build_preference_pairs(rows, length_match=True)
    assert matched.pairs[0]["rejected"]["final_text"] == "short no"


def test_export_preference_formats_and_empty_refusal(tmp_path):
    rows = [make_row(reward=1.0), make_row(reward=0.0, index=1, final="No idea.")]
    pairs = tk.build_preference_pairs(rows)
    openai = tk.export_preference(pairs, tmp_path / "p.jsonl")
    assert openai[0]["chosen"][-1]["content"] == "Your order ships today."
    assert openai[0]["rejected"][-1]["content"] == "No idea."
    assert (tmp_path / "p.jsonl").read_text().count("\n") == 1
    trl = tk.export_preference(pairs, format="trl")
    assert [m["role"] for m in trl[0]["prompt"]] == ["user", "assistant", "tool"]
    assert trl[0]["chosen"] == [{"role": "assistant", "content": "Your order ships today."}]
    assert not privileged_keys(openai) and not privileged_keys(trl)
    empty = tk.build_preference_pairs([make_row(reward=1.0)])
    with pytest.raises(tk.errors.ExportError, match="nothing to write"):
        tk.export_preference(empty)


# ---- item 37: SFT selection -----------------------------------------------------------


def test_select_for_sft_reports_pass_filter():
    rows = [make_row(task=f"t{i}", reward=1.0) for i in range(5)]
    chosen = tk.select_for_sft(rows)
    assert chosen.selection_effective == "pass_filter" and len(chosen.rows) == 5
    many = [make_row(task="t", reward=r, index=i) for i, r in enumerate([1.0, 1.0, 2.0, 2.0])]
    real = tk.select_for_sft(many, min_reward=1.0)
    assert real.selection_effective == "top_per_prompt"
    assert len(real.rows) == 1 and real.rows[0]["reward"] == 2.0
    assert any("completions per prompt" in n for n in real.notes)


def test_select_for_sft_refuses_empty():
    with pytest.raises(tk.errors.ExportError, match="below_min_reward"):
        tk.select_for_sft([make_row(reward=0.0)])


# ---- item 38: GRPO band ---------------------------------------------------------------


def group(task, rewards):
    return [make_row(task=task, reward=float(r), index=i, final=f"reply {task} {i}") for i, r in enumerate(rewards)]


def test_select_for_rl_band_keeps_whole_groups_and_says_why():
    rows = (
        group("easy", [1] * 7 + [0])
        + group("quarter", [1, 1, 0, 0, 0, 0, 0, 0])
        + group("hard", [1] + [0] * 7)
        + group("allpass", [1] * 4)
        + group("allfail", [0] * 4)
    )
    out = tk.select_for_rl(rows, scan=False)
    assert set(out.groups) == {"quarter"} and len(out.rows) == 8
    assert out.dropped_groups == {
        "easy": "too_easy", "hard": "too_hard", "allpass": "unanimous_pass", "allfail": "unanimous_fail"
    }
    assert any("grad_norm 0" in w for w in out.warnings)
    assert all("calibration" in r and r["calibration"]["n"] == 8 for r in out.rows)
    assert not privileged_keys(out.rows)


def test_select_for_rl_truncation_modes_and_prior():
    rows = group("a", [1, 0, 1, 0])
    rows[0]["finish_reason"] = "length"
    assert tk.select_for_rl(rows, scan=False).dropped_rows == {"truncated": 1}
    penalised = tk.select_for_rl(rows, truncated="penalize", scan=False)
    hit = [r for r in penalised.rows if r.get("reward_before_penalty") is not None]
    assert len(hit) == 1 and hit[0]["reward"] == 0.0 and hit[0]["reward_before_penalty"] == 1.0
    prior = group("a", [1, 1, 1, 1, 1])
    with pytest.raises(tk.errors.ExportError, match="prior_solved"):
        tk.select_for_rl(rows, prior=prior, scan=False)


def test_select_for_rl_never_splits_groups():
    rows = group("a", [1, 0, 1, 0]) + group("b", [1, 0, 0, 1]) + group("c", [0, 1, 1, 0])
    out = tk.select_for_rl(rows, target=5, scan=False)
    assert len(out.rows) == 8 and len(out.groups) == 2
    assert list(out.dropped_groups.values()) == ["over_target"]


# ---- item 39: publish gate ------------------------------------------------------------


def test_publish_gate_refuses_unanimous_and_ungraded_rl():
    unanimous = group("a", [1, 1, 1]) + group("b", [0, 0, 0])
    with pytest.raises(tk.errors.PublishGateError, match="no_mixed_groups") as caught:
        tk.publish_gate(unanimous)
    assert caught.value.report.refusals == ["no_mixed_groups"]
    ungraded = [dict(r, reward=None) for r in group("a", [1, 0, 1])]
    with pytest.raises(tk.errors.PublishGateError, match="ungraded_rl_rows"):
        tk.publish_gate(ungraded)
    report = tk.publish_gate(unanimous, strict=False)
    assert report.ok is False and report.refusals == ["no_mixed_groups"]


def test_publish_gate_passes_mixed_and_explore_shaped():
    report = tk.publish_gate(group("a", [1, 0, 1, 0]) + group("b", [0, 1, 0, 0]), scan=False)
    assert report.ok and report.rl_shaped and report.signal["n_mixed"] == 2
    assert all("calibration" in r for r in report.rows)
    explore = tk.publish_gate([make_row(task=f"t{i}", reward=None) for i in range(3)])
    assert explore.ok and not explore.rl_shaped


# ---- reward model set -----------------------------------------------------------------


def test_reward_model_set_keeps_passes_and_failures():
    rows = group("a", [1, 0]) + [make_row(task="u", reward=None)]
    out = tk.reward_model_set(rows)
    assert (out.n_pass, out.n_fail, out.n_ungraded) == (1, 1, 1)
    assert all(r["messages"][-1]["role"] == "assistant" for r in out.rows)
    with pytest.raises(tk.errors.ExportError):
        tk.reward_model_set([make_row(reward=None)])


# ---- decontamination ------------------------------------------------------------------


def test_decontaminate_lists_rules_it_could_not_run():
    rows = [{"prompt": "Please cancel my order number 55 today because it arrived broken"},
            {"prompt": "what is the weather"},
            {"prompt": "Completely unrelated question about invoices and shipping fees for this month"}]
    evals = [{"prompt": "please cancel my order number 55 today because it arrived broken and late"},
             {"prompt": "What is the   weather"}]
    out = tk.decontaminate(rows, evals)
    assert {f["rule"] for f in out.flagged} == {"near_copy", "exact"}
    assert set(out.rules_skipped) == {"same_task", "semantic"}
    assert "same_task" in out.note and len(out.rows) == 1
    with_ids = tk.decontaminate([dict(r, task_id=f"x{i}") for i, r in enumerate(rows)], [dict(evals[0], task_id="x2")])
    assert "same_task" in with_ids.rules_run and {"index": 2, "rule": "same_task", "task": "x2"} in with_ids.flagged


def test_decontaminate_semantic_with_embedder():
    import numpy as np

    def embed(texts):
        return np.array([[1.0, 0.0] if "refund" in t else [0.0, 1.0] for t in texts])

    out = tk.decontaminate([{"prompt": "refund me", "task_id": "a"}, {"prompt": "hello", "task_id": "b"}],
                           [{"prompt": "I want a refund", "task_id": "z"}], embedder=embed)
    # both rows are shorter than 8 words: near_copy could not run and says so
    assert set(out.rules_skipped) == {"near_copy"} and "semantic" in out.rules_run
    assert out.flagged == [{"index": 0, "rule": "semantic", "task": "a"}]
    assert out.semantic_p99 is not None


# ---- item 40 + properties -------------------------------------------------------------

text = st.text(alphabet="abcdefgh ", min_size=1, max_size=30)
step = st.one_of(
    st.builds(lambda t: {"text": t}, text),
    st.builds(lambda t: {"user": t}, text),
    st.builds(
        lambda name, v: {"tool": name, "arguments": {"q": v, "privileged": {"x": 1}},
                         "result": {"ok": v, "hidden_state": "h", "nested": [{"rubric": "r"}]}},
        st.sampled_from(["lookup", "refund"]), text,
    ),
)


@given(
    steps=st.lists(step, min_size=0, max_size=6),
    final=text.filter(lambda t: t.strip()),  # an empty reply is junk and select_for_sft refuses it
    mask=st.sampled_from(["assistant", "final"]),
    unroll=st.booleans(),
    fmt=st.sampled_from(["openai", "trl"]),
    system=st.one_of(st.none(), text),
)
def test_property_masks_match_messages_and_nothing_privileged(steps, final, mask, unroll, fmt, system):
    row = {"prompt": "p", "steps": steps + [{"text": final}], "final_text": final,
           "reward": 1.0, "privileged": {"principle": "x"}, "vector": [0.1], "reference": "r" * 20}
    out = tk.training_rows([row], mask_mode=mask, unroll=unroll, format=fmt, system_prompt=system)
    n_assistant = sum(1 for s in row["steps"] if "user" not in s)
    assert len(out.rows) == (n_assistant if unroll else 1)
    for sample in out.rows:
        assert sample["schema_version"] == "1"
        assert not privileged_keys(sample)
        if fmt == "openai":
            assert len(sample["loss_mask"]) == len(sample["messages"])
            assert set(sample["loss_mask"]) <= {0, 1}
            roles = [m["role"] for m in sample["messages"]]
            assert all(roles[i] == "assistant" for i, bit in enumerate(sample["loss_mask"]) if bit)
            expected = 1 if (mask == "final" or unroll) else roles.count("assistant")
            assert sum(sample["loss_mask"]) == expected
        else:
            assert "loss_mask" not in sample
    for export in (tk.reward_model_set([row]).rows, tk.select_for_sft([row]).rows):
        assert not privileged_keys(export)
        assert all(r["schema_version"] == "1" for r in export)
    worse = dict(row, reward=0.0, final_text=final + " no", steps=steps + [{"text": final + " no"}])
    pair_rows = [dict(row, rollout_index=0), dict(worse, rollout_index=1)]
    for fmt_pairs in ("openai", "trl"):
        records = tk.export_preference(tk.build_preference_pairs(pair_rows), format=fmt_pairs)
        assert not privileged_keys(records) and all(r["schema_version"] == "1" for r in records)
    rl = tk.select_for_rl(pair_rows, scan=False)
    assert not privileged_keys(rl.rows) and len(rl.rows) == 2
    assert all(r["schema_version"] == "1" for r in rl.rows)


def test_save_writes_scrubbed_jsonl_and_refuses_empty(tmp_path):
    out = tk.training_rows([make_row()])
    path = out.save(tmp_path / "sft.jsonl")
    lines = path.read_text().splitlines()
    assert len(lines) == 1 and not privileged_keys(json.loads(lines[0]))
    with pytest.raises(tk.errors.ExportError, match="empty"):
        tk.training.write_jsonl([], tmp_path / "empty.jsonl")
    assert not (tmp_path / "empty.jsonl").exists()


def test_publish_gate_strict_hacks_refuses_a_length_paying_reward():
    import numpy as np

    rng = np.random.default_rng(0)
    rows = []
    for a in range(25):
        for i in range(6):
            words = int(rng.integers(3, 40))
            text = " ".join(["word"] * words)
            rows.append(make_row(task=f"a{a}", index=i, final=text, reward=float(words > 20)))
    with pytest.raises(tk.errors.PublishGateError, match="reward_hack") as caught:
        tk.publish_gate(rows, strict_hacks=True, endorsed=["tool:lookup"])
    assert caught.value.report.hack_scan.regime == "reward_hack"
    relaxed = tk.publish_gate(rows, endorsed=["tool:lookup"])
    assert relaxed.ok and any("reward_hack" in w for w in relaxed.warnings)


def test_rl_band_figure_colours_kept_and_dropped_groups():
    import matplotlib.pyplot as plt

    from toolkit.plots import rl_band

    rows = group("keep", [1, 0, 1, 0]) + group("easy", [1] * 7 + [0]) + group("same", [0, 0, 0])
    selection = tk.select_for_rl(rows, scan=False)
    assert selection.group_pass_rates == {"keep": 0.5, "easy": 0.875, "same": 0.0}
    figure = rl_band(selection)
    labels = figure.axes[0].get_legend_handles_labels()[1]
    assert labels == ["band 0.2-0.8", "kept (1)", "too_easy (1)", "unanimous_fail (1)"]
    xs = sorted(x for c in figure.axes[0].collections for x in c.get_offsets()[:, 0])
    assert xs == [0.0, 0.5, 0.875]
    assert plt.get_fignums() == []


def test_leaking_rows_never_reach_pairs_or_reward_model_sets():
    leak = make_row(reward=0.0, index=1, final="Per our notes the refund for order 4411 is 12.50 dollars.")
    clean_fail = make_row(reward=0.0, index=2, final="No idea.")
    rows = [make_row(reward=1.0), leak, clean_fail]
    pairs = tk.build_preference_pairs(rows)
    assert pairs.dropped == {"privileged_quote": 1}
    assert pairs.pairs[0]["rejected"]["final_text"] == "No idea."
    rm = tk.reward_model_set(rows)
    assert rm.n_leaks == 1 and len(rm.rows) == 2 and any("answer key" in w for w in rm.warnings)
    assert "4411" not in json.dumps(rm.rows)
    # select_for_sft returns scrubbed rows, so training_rows could no longer see the leak:
    # the selection itself must drop it
    sft = tk.select_for_sft([dict(r, reward=1.0) for r in rows])
    assert sft.dropped == {"privileged_quote": 1} and "4411" not in json.dumps(sft.rows)
    assert "4411" not in json.dumps(tk.training_rows(sft.rows).rows)


def test_repeating_what_the_agent_was_shown_is_not_a_leak():
    # the privileged block holds the user's own instruction; the agent repeats the user's words
    row = make_row(final="So you fly from New York to Seattle on May 20.",
                   privileged={"instruction": "You want to fly from New York to Seattle on May 20, economy."})
    row["steps"].insert(0, {"user": "I want to fly from New York to Seattle on May 20."})
    assert len(tk.training_rows([row]).rows) == 1
    secret = make_row(final="Economy it is.", privileged={"instruction": "You secretly prefer economy class seats."})
    secret["final_text"] = secret["steps"][-1]["text"] = "You secretly prefer economy class seats, I guess."
    assert tk.training_rows([secret, row]).refused == {"privileged_quote": 1}
    # eight consecutive words of a long privileged text the agent never saw is a leak
    copied = make_row(final="Note: travel only after 11am and never pay with the gift card.",
                      privileged={"instruction": "You travel only after 11am and never pay with the gift card, ever."})
    assert tk.training_rows([copied, row]).refused == {"privileged_quote": 1}


# ---- audit: empty refusal, scrubbing of every serialised form, TRL pairs, validation ----

# rows no cut can use: ungraded, failed judgments, or graded rows without any conversation
unusable_row = st.one_of(
    st.builds(lambda t: make_row(task=t, reward=None), st.sampled_from(["a", "b", "c"])),
    st.builds(lambda t: make_row(task=t, reward=1.0, judge_status="error"), st.sampled_from(["a", "b"])),
)


@given(rows=st.lists(unusable_row, min_size=0, max_size=6))
def test_property_every_export_refuses_an_empty_result(rows, tmp_path_factory):
    """No cut ever hands back (or writes) an empty training set: each raises ExportError."""
    folder = tmp_path_factory.mktemp("empty")
    for build in (
        lambda: tk.select_for_sft(rows),
        lambda: tk.select_for_rl(rows, scan=False),
        lambda: tk.reward_model_set(rows),
        lambda: tk.export_preference(tk.build_preference_pairs(rows), folder / "dpo.jsonl"),
        lambda: tk.training_rows([dict(r, steps=[], final_text="") for r in rows]),
    ):
        with pytest.raises(tk.errors.ExportError):
            build()
    assert list(folder.iterdir()) == []
    with pytest.raises(tk.errors.ExportError):
        tk.decontaminate(rows, [])  # an empty eval set checks nothing


@given(
    finals=st.lists(text.filter(lambda t: t.strip()), min_size=2, max_size=4, unique=True),
    rewards=st.lists(st.sampled_from([0.0, 1.0]), min_size=2, max_size=4),
)
def test_property_no_serialised_form_carries_a_privileged_key(finals, rewards, tmp_path_factory):
    """Reports' to_dict and every written file are scrubbed, not only the returned rows."""
    folder = tmp_path_factory.mktemp("scrub")
    n = min(len(finals), len(rewards))
    rows = [make_row(task="t", index=i, final=finals[i], reward=rewards[i],
                     steps=[{"tool": "lookup", "arguments": {"q": 1, "reference": "r"},
                             "result": {"ok": True, "hidden_state": {"vector": [1]}}}, {"text": finals[i]}])
            for i in range(n)]
    reports = [tk.decontaminate(rows, [{"prompt": "an unrelated evaluation question"}]),
               tk.build_preference_pairs(rows, min_margin=0.5),
               tk.publish_gate(rows, strict=False, scan=False),
               tk.calibrate(rows),
               tk.grade(rows, lambda r: r["reward"], trust="off")]
    for report in reports:
        assert not privileged_keys(json.loads(json.dumps(report.to_dict())))
    saved = [tk.decontaminate(rows, [{"prompt": "x y"}]).save(folder / "dec.jsonl"),
             tk.training_rows(rows).save(folder / "sft.jsonl"),
             tk.reward_model_set(rows).save(folder / "rm.jsonl")]
    for path in saved:
        for line in path.read_text().splitlines():
            assert not privileged_keys(json.loads(line))


def test_preference_pairs_to_dict_is_scrubbed_but_memory_keeps_the_rows():
    pairs = tk.build_preference_pairs([make_row(reward=1.0), make_row(reward=0.0, index=1, final="No idea.")])
    assert pairs.pairs[0]["chosen"]["privileged"] == PRIVILEGED  # export_preference rebuilds from these
    payload = json.dumps(pairs.to_dict())
    assert "privileged" not in payload and "answer" not in payload and "4411" not in payload


def plain(task, index, reward, steps, prompt=None):
    final = next((s["text"] for s in reversed(steps) if "text" in s), "")
    return {"schema_version": "1", "scenario_id": task, "rollout_index": index, "prompt": prompt or f"ask {task}",
            "steps": steps, "final_text": final, "reward": reward}


def test_trl_preference_completions_are_non_empty_and_start_with_the_assistant():
    # chosen is a prefix of rejected: the longest common prefix would leave chosen empty
    short = plain("c", 0, 1.0, [{"text": "hello"}])
    longer = plain("c", 1, 0.0, [{"text": "hello"}, {"user": "more?"}, {"text": "bye"}])
    record = tk.export_preference(tk.build_preference_pairs([short, longer]), format="trl")[0]
    assert record["prompt"] == [{"role": "user", "content": "ask c"}]
    assert record["chosen"] == [{"role": "assistant", "content": "hello"}]
    assert [m["role"] for m in record["rejected"]] == ["assistant", "user", "assistant"]
    # the conversations first differ on a tool result: both completions open on the shared call
    good = plain("d", 0, 1.0, [{"tool": "lookup", "arguments": {"id": 1}, "result": {"ok": True}}, {"text": "good"}])
    bad = plain("d", 1, 0.0, [{"tool": "lookup", "arguments": {"id": 1}, "result": {"ok": False}}, {"text": "bad"}])
    record = tk.export_preference(tk.build_preference_pairs([good, bad]), format="trl")[0]
    assert [m["role"] for m in record["prompt"]] == ["user"]
    assert [m["role"] for m in record["chosen"]] == [m["role"] for m in record["rejected"]] == ["assistant", "tool", "assistant"]
    whole = tk.export_preference(tk.build_preference_pairs([good, bad]))[0]
    shape = lambda messages: [(m["role"], m.get("content")) for m in messages]  # noqa: E731
    for side in ("chosen", "rejected"):  # prompt + completion is the whole conversation
        assert shape(record["prompt"] + record[side]) == shape(whole[side])
    # two phrasings of one task share no prompt: TRL cannot score that pair, so it is refused
    a = plain("e", 0, 1.0, [{"text": "yes"}], prompt="Refund order 7")
    b = plain("e", 1, 0.0, [{"text": "no"}], prompt="Please refund my order 7")
    rephrased = tk.build_preference_pairs([a, b])
    assert rephrased.pairs[0]["same_prompt"] is False and any("different prompts" in w for w in rephrased.warnings)
    with pytest.raises(tk.errors.ExportError, match="without a shared prompt"):
        tk.export_preference(rephrased, format="trl")
    assert len(tk.export_preference(tk.build_preference_pairs([a, b]), format="openai")) == 1


def test_decontaminate_reads_chat_rows_and_never_matches_empty_text():
    chat = lambda q: {"messages": [{"role": "user", "content": q}, {"role": "assistant", "content": "ok"}]}  # noqa: E731
    rows = [chat("how do I reset my password"), {"steps": [], "final_text": "no ask at all"}]
    out = tk.decontaminate(rows, [chat("How do I reset my   password"), {"final_text": "nothing"}])
    assert [(f["index"], f["rule"]) for f in out.flagged] == [(0, "exact")]
    assert len(out.rows) == 1  # the row without text is kept, not matched against the eval row without text
    assert "exact" in out.rules_partial and "without a prompt or user message" in out.rules_partial["exact"]
    assert "near_copy" in out.rules_skipped  # every row is shorter than 8 words
    assert "partial" in str(out) and "rules run on part of the rows" in out.note
    # when no eval row has any text, the text rules could not run at all
    nothing = tk.decontaminate([chat("a question")], [{"final_text": "x"}])
    assert {"exact", "near_copy", "semantic", "same_task"} == set(nothing.rules_skipped) and nothing.rules_run == []


def test_decontaminate_rejects_bad_arguments():
    rows = [{"prompt": "refund me please"}]
    with pytest.raises(tk.errors.ExportError, match="no evaluation set"):
        tk.decontaminate(rows, [])
    with pytest.raises(tk.errors.ExportError, match="no rows"):
        tk.decontaminate([], rows)
    with pytest.raises(tk.errors.ExportError, match=r"similarity .* \[-1, 1\]"):
        tk.decontaminate(rows, rows, similarity=2, embedder=lambda texts: [[1.0]] * len(texts))
    with pytest.raises(tk.errors.ExportError, match="shape"):
        tk.decontaminate(rows, rows, embedder=lambda texts: [1.0, 2.0, 3.0])


def test_cut_arguments_are_validated_with_the_field_named():
    rows = group("a", [1, 0, 1, 0])
    with pytest.raises(tk.errors.ExportError, match="band must be a pair"):
        tk.select_for_rl(rows, band=(0.1, 0.2, 0.3), scan=False)
    with pytest.raises(tk.errors.ExportError, match="target must be an integer >= 1"):
        tk.select_for_rl(rows, target=0, scan=False)
    with pytest.raises(tk.errors.ExportError, match="band must satisfy"):
        tk.publish_gate(rows, band=(0.9, 0.1))
    with pytest.raises(tk.errors.ExportError, match="did you mean 'rl'"):
        tk.publish_gate(rows, mode="rll")
    with pytest.raises(tk.errors.ExportError, match="tools must be a list of tool schemas"):
        tk.training_rows(rows, tools="lookup")
    with pytest.raises(tk.errors.ExportError, match="did you mean 'reward'"):
        tk.build_preference_pairs(rows, score="rewrd")
    assert len(tk.build_preference_pairs([dict(r, judge_score=r["reward"]) for r in rows], score="judge_score")) == 1


def test_system_prompt_from_simulation_data_records_and_a_warning_when_lost():
    text = "You are the order desk."
    row = make_row(lineage={"seed": 7, "system_prompt_sha": "abc123", "system_prompt_chars": len(text)})
    lost = tk.training_rows([row])
    assert lost.rows[0]["messages"][0]["role"] == "user"
    assert any("system_prompt_sha" in w for w in lost.warnings)
    # SimulationData.system_prompts is a list of {"sha", "text"}; {sha: text} works the same
    for prompts in ([{"sha": "abc123", "text": text}], {"abc123": text}):
        found = tk.training_rows([row], system_prompt=prompts)
        assert found.rows[0]["messages"][0] == {"role": "system", "content": text}
        assert not any("system_prompt_sha" in w for w in found.warnings)
    with pytest.raises(tk.errors.ExportError, match="system_prompt must be"):
        tk.training_rows([row], system_prompt=3)


def test_the_scan_over_an_rl_selection_groups_by_task_like_the_selection():
    """A task whose rollouts open with different prompts (a simulated user) is one group for
    select_for_rl, and so one ask for the hack scan that runs over it."""
    rows = []
    for t in range(4):
        for i in range(4):
            rows.append(make_row(task=f"t{t}", index=i, reward=float(i % 2), final=f"reply {t} {i}",
                                 prompt=f"opening {t} variant {i}"))
    selection = tk.select_for_rl(rows)
    assert len(selection.groups) == 4 and selection.hack_scan.n_asks == 4
    gate = tk.publish_gate(rows)
    assert gate.hack_scan.n_asks == 4
