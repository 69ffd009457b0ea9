"""Logprob coverage, sampled KL (docs/design/engine.md §6.7, docs/design/engine.md §10 item 24), calibration stamps, staleness,
and reference scoring (seeded policy offline; a prompt-logprob backend)."""

import json
import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

import toolkit as tk


def lp_row(task, logprob, n_tokens, ref=None, reward=None, index=0, **extra):
    row = {"schema_version": "1", "scenario_id": task, "rollout_index": index, "prompt": f"ask {task}",
           "steps": [{"text": "answer", "logprob": logprob, "n_tokens": n_tokens}], "final_text": "answer",
           "logprob": logprob, "n_tokens": n_tokens}
    if ref is not None:
        row["ref_logprob"] = ref
    if reward is not None:
        row["reward"] = reward
    row.update(extra)
    return row


# ---- mean_kl ----------------------------------------------------------------------------


def test_item_24_one_row():
    result = tk.mean_kl([lp_row("a", -10.0, 20, ref=-12.0)])
    assert result.mean_kl == pytest.approx(0.1) and result.n_tokens == 20 and result.n_rows == 1


def test_mean_kl_pools_tokens_per_task_and_counts_skips():
    rows = [lp_row("a", -10.0, 10, ref=-12.0), lp_row("a", -5.0, 30, ref=-5.0, index=1),
            lp_row("b", -3.0, 10, ref=-2.0), lp_row("c", -3.0, 10)]
    result = tk.mean_kl(rows)
    assert result.per_task == {"a": pytest.approx(2 / 40), "b": pytest.approx(-0.1)}
    assert result.mean_kl == pytest.approx(round((2 - 1) / 50, 6))
    assert result.n_skipped == 1 and result.n_rows == 3


def test_mean_kl_against_a_second_row_list():
    policy = [lp_row("a", -10.0, 20, index=i) for i in range(3)]
    reference = [lp_row("a", -12.0, 20, index=i) for i in range(2)]
    result = tk.mean_kl(policy, ref=reference)
    assert result.mean_kl == pytest.approx(0.1) and result.n_unmatched == 1 and result.n_skipped == 1


def test_mean_kl_without_reference_says_how_to_get_one():
    result = tk.mean_kl([lp_row("a", -1.0, 3)])
    assert result.mean_kl is None and "reference_logprobs" in result.note


def test_sampled_kl_converges_to_closed_form_on_two_categoricals():
    """Explicit fixture independent of the agents module: outputs o with lengths L(o),
    policy p and reference q. The estimator converges to KL(p||q) / E_p[L]."""
    outputs = {"short": 2, "medium": 5, "long": 9}
    p = np.array([0.5, 0.3, 0.2])
    q = np.array([0.2, 0.3, 0.5])
    lengths = np.array(list(outputs.values()))
    exact = float(np.sum(p * np.log(p / q)) / np.sum(p * lengths))
    rng = np.random.default_rng(0)
    draws = rng.choice(3, size=20_000, p=p)
    rows = [lp_row(f"t{i % 7}", math.log(p[d]), int(lengths[d]), ref=math.log(q[d]), index=i) for i, d in enumerate(draws)]
    assert tk.mean_kl(rows).mean_kl == pytest.approx(exact, abs=0.004)


def test_mean_kl_between_two_seeded_policies_converges_to_exact_kl():
    tools = [
        {"type": "function", "function": {"name": "get_order", "description": "Look up an order by id",
         "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}},
        {"type": "function", "function": {"name": "refund_order", "description": "Refund an order",
         "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}},
    ]
    policy = tk.seeded_agent(tools, seed=0, temperature=1.0)
    reference = tk.seeded_agent(tools, seed=0, temperature=2.0)
    prompt = "Please refund order A123"
    exact = tk.exact_kl(policy, reference, prompt=prompt, tools=tools,
                        world_factory=lambda: tk.World(tools, seed=0)).kl_per_token
    rows = [tk.run_rollout(policy, prompt, tools=tools, world=tk.World(tools, seed=0), user=False,
                           logprobs=True, rollout_index=i, seed=0) for i in range(600)]
    scored = tk.reference_logprobs(rows, reference)
    assert scored.n_scored == 600 and scored.n_failed == 0
    estimate = tk.mean_kl(scored.rows).mean_kl
    # delta-method standard error of the ratio estimator sum(d)/sum(t)
    d = np.array([r["logprob"] - r["ref_logprob"] for r in scored.rows])
    t = np.array([r["n_tokens"] for r in scored.rows], dtype=float)
    ratio = d.sum() / t.sum()
    se = np.std(d - ratio * t, ddof=1) / math.sqrt(len(d)) / t.mean()
    assert se < 0.25 * exact
    assert abs(estimate - exact) < 4 * se


# ---- logprob_report ---------------------------------------------------------------------


def test_logprob_report_numbers_match_independent_computation():
    rng = np.random.default_rng(1)
    rows = []
    for i in range(30):
        n = int(rng.integers(5, 40))
        reward = float(i % 3 == 0)
        lp = -n * (0.5 + 0.5 * reward + rng.random() * 0.2)  # confidence tracks reward on purpose
        rows.append(lp_row(f"t{i}", lp, n, reward=reward, index=i))
    rows.append({"prompt": "no logprobs", "steps": [], "final_text": "", "reward": 1.0})
    report = tk.logprob_report(rows)
    usable = rows[:-1]
    means = sorted(r["logprob"] / r["n_tokens"] for r in usable)
    assert report.mean_token_logprob == pytest.approx(sum(r["logprob"] for r in usable) / sum(r["n_tokens"] for r in usable))
    assert report.p10 == means[round(0.1 * 29)] and report.p50 == means[round(0.5 * 29)] and report.p90 == means[round(0.9 * 29)]
    expected_r = stats.pearsonr([r["reward"] for r in usable], [r["logprob"] / r["n_tokens"] for r in usable])[0]
    assert report.reward_confidence_r == pytest.approx(expected_r)
    assert any("fluency" in w for w in report.warnings)
    assert report.coverage == pytest.approx(30 / 31)


def test_logprob_report_sums_steps_and_counts_truncation():
    row = {"prompt": "p", "final_text": "b", "steps": [
        {"tool": "x", "arguments": {}, "result": {}, "logprob": -1.0, "n_tokens": 2},
        {"text": "b", "logprob": -3.0, "n_tokens": 2, "truncated": True}]}
    report = tk.logprob_report([row])
    assert report.mean_token_logprob == pytest.approx(-1.0) and report.n_truncated == 1
    empty = tk.logprob_report([{"prompt": "p", "steps": [], "final_text": ""}])
    assert empty.mean_token_logprob is None and "logprobs=True" in empty.note


# ---- calibrate --------------------------------------------------------------------------


def test_calibrate_stamps_wilson_and_kl_per_task():
    rows = [lp_row("a", -10.0, 20, ref=-12.0, reward=float(i < 3), index=i) for i in range(4)]
    rows += [lp_row("b", -5.0, 10, ref=-5.0, reward=0.0, index=i) for i in range(2)]
    rows.append(lp_row("c", -1.0, 1, reward=None))
    report = tk.calibrate(rows, ref="ref_logprob", policy="student-v1")
    stamp = report.rows[0]["calibration"]
    assert stamp["n"] == 4 and stamp["pass_rate"] == 0.75 and stamp["student"] == "student-v1"
    assert stamp["pass_rate_ci95"] == pytest.approx(list(proportion_confint(3, 4, method="wilson")), abs=1e-9)
    assert stamp["mean_kl"] == pytest.approx(0.1)
    assert report.rows[4]["calibration"]["mean_kl"] == 0.0
    assert "calibration" not in report.rows[-1] and report.n_ungraded == 1
    assert report.n_stamped == 6 and "calibration" not in rows[0]


def test_calibrate_keeps_a_carried_stamp_from_a_larger_group():
    rows = [lp_row("a", -1.0, 1, reward=1.0, calibration={"n": 8, "pass_rate": 0.5}),
            lp_row("a", -1.0, 1, reward=0.0, index=1)]
    report = tk.calibrate(rows)
    assert report.n_carried == 1 and report.rows[0]["calibration"] == {"n": 8, "pass_rate": 0.5}
    assert report.rows[1]["calibration"]["n"] == 2


# ---- staleness --------------------------------------------------------------------------


def test_staleness_report_counts_versions_and_stale_rows():
    rows = [lp_row("a", -1.0, 2, model_version="m-new", policy_version="m-new@aaaa", sampling={"temperature": 1.0})]
    rows.append(lp_row("b", -1.0, 2, model_version="m-old", policy_version="m-old@bbbb", sampling={"temperature": 0.7}))
    bare = {"prompt": "x", "steps": [], "final_text": "", "model_version": "m-old", "policy_version": "m-old@bbbb"}
    rows.append(bare)
    report = tk.staleness_report(rows, base_model="m-new")
    assert report.n_stale == 2 and report.n_stale_without_logprobs == 1
    assert report.by_policy_version == {"m-new@aaaa": 1, "m-old@bbbb": 2}
    assert report.temperatures == {"1.0": 1, "0.7": 1, "unknown": 1}
    assert report.coverage["logprob"] == pytest.approx(2 / 3)
    assert any("importance ratio" in w for w in report.warnings)
    assert any("2 policy versions" in w for w in report.warnings)


# ---- reference_logprobs -----------------------------------------------------------------


class FakeBackend:
    """A model backend stand-in with vLLM-style prompt logprobs: -0.5 per whitespace token."""

    name = "fake-ref"

    def __init__(self):
        self.calls = []

    def prompt_logprobs(self, messages, completion):
        self.calls.append((len(messages), messages[-1]["role"]))
        n = len(completion.split())

        class Scored:
            logprob = -0.5 * n
            n_tokens = n
            model = "fake-ref"

        return Scored()


def test_reference_logprobs_through_a_prompt_logprob_backend():
    row = {"schema_version": "1", "prompt": "refund A1", "final_text": "Refund done for you",
           "steps": [{"tool": "refund", "arguments": {"id": "A1"}, "result": {"ok": True}},
                     {"text": "Refund done for you"}], "logprob": -3.0, "n_tokens": 5}
    backend = FakeBackend()
    out = tk.reference_logprobs([row], backend)
    scored = out.rows[0]
    # the tool-call turn is scored on its JSON rendering: [{"name": "refund", "arguments": "{\"id\": \"A1\"}"}]
    wire_call = tk.rows.messages_from_steps(row["prompt"], row["steps"])[1]["tool_calls"][0]["function"]
    call_words = len(json.dumps([wire_call]).split())
    assert scored["ref_logprob"] == pytest.approx(-0.5 * (call_words + 4))
    assert scored["ref_n_tokens"] == call_words + 4 and scored["ref_status"] == "ok" and scored["ref_model"] == "fake-ref"
    assert backend.calls == [(1, "user"), (3, "tool")]  # context grows turn by turn
    assert "ref_logprob" not in row


def test_reference_failures_stay_on_the_row():
    class Broken:
        def score_total(self, row):
            if row["prompt"] == "bad":
                raise RuntimeError("server went away")
            return -1.0

    rows = [{"prompt": "good", "steps": [], "final_text": ""}, {"prompt": "bad", "steps": [], "final_text": ""}]
    out = tk.reference_logprobs(rows, Broken())
    assert [r["ref_status"] for r in out.rows] == ["ok", "error"]
    assert out.rows[1]["ref_logprob"] is None and "server went away" in out.rows[1]["ref_error"]
    assert out.n_failed == 1 and out.failures == {"RuntimeError": 1}
    with pytest.raises(tk.ToolkitError, match="prompt_logprobs"):
        tk.reference_logprobs(rows, object())


def test_reference_logprobs_against_the_local_protocol_server():
    """vLLM-style prompt logprobs over HTTP (tests/_chat_server.py): each assistant turn is
    scored in its context; the server's token logprobs are known in closed form."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from _chat_server import ChatServer, token_logprob, tokenize

    row = {"schema_version": "1", "prompt": "refund A1", "final_text": "Refund done for you",
           "steps": [{"tool": "refund", "arguments": {"id": "A1"}, "result": {"ok": True}},
                     {"text": "Refund done for you"}], "logprob": -3.0, "n_tokens": 6}
    wire_call = tk.rows.messages_from_steps(row["prompt"], row["steps"])[1]["tool_calls"][0]["function"]
    completions = [json.dumps([wire_call]), "Refund done for you"]
    expected = sum(token_logprob(t) for text in completions for t in tokenize(text))
    with ChatServer() as server:
        out = tk.reference_logprobs([row], f"vllm:echo@{server.url}")
    scored = out.rows[0]
    assert scored["ref_status"] == "ok", scored.get("ref_error")
    assert scored["ref_logprob"] == pytest.approx(expected)
    assert scored["ref_n_tokens"] == sum(len(tokenize(text)) for text in completions)
    assert tk.mean_kl(out.rows).mean_kl == pytest.approx(round((-3.0 - expected) / 6, 6))


def test_kl_by_task_figure_draws_per_task_bars_and_pooled_line():
    import matplotlib.pyplot as plt

    from toolkit.plots import kl_by_task

    rng = np.random.default_rng(2)
    rows = []
    for task, shift in (("a", 0.05), ("b", 0.2), ("c", 0.1)):
        for i in range(8):
            n = int(rng.integers(5, 20))
            rows.append(lp_row(task, -n * 1.0, n, ref=-n * (1.0 + shift) - rng.normal(0, 0.3), index=i))
    rows.append(lp_row("d", -1.0, 2, ref=-1.5))  # one rollout: a bar without an interval
    summary = tk.mean_kl(rows)
    figure = kl_by_task(rows)
    ax = figure.axes[0]
    widths = sorted(p.get_width() for p in ax.patches)
    assert widths == pytest.approx(sorted(summary.per_task.values()))
    assert len(ax.containers) >= 4  # 4 bar containers
    pooled = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert pooled and pooled[0].get_xdata()[0] == pytest.approx(summary.mean_kl)
    assert any("n=1" in t.get_text() for t in ax.get_yticklabels())
    assert plt.get_fignums() == []


def test_numpy_token_counts_are_counts():
    row = lp_row("a", -10.0, np.int64(20), ref=-12.0)
    assert tk.mean_kl([row]).mean_kl == pytest.approx(0.1)


def test_misspelt_ref_field_names_the_nearest_and_unscored_rows_get_a_note():
    rows = [lp_row("a", -10.0, 20, ref=-12.0, reward=1.0)]
    with pytest.raises(tk.errors.LogprobError, match="did you mean 'ref_logprob'"):
        tk.mean_kl(rows, ref="ref_logprb")
    with pytest.raises(tk.errors.LogprobError, match="did you mean 'ref_logprob'"):
        tk.calibrate(rows, ref="ref_logprb")
    # rows never scored: the default field is simply absent, which is a note, not an error
    unscored = [lp_row("a", -10.0, 20)]
    assert "reference_logprobs" in tk.mean_kl(unscored).note
    # a custom field the rows do carry works
    assert tk.mean_kl([dict(rows[0], base_lp=-12.0)], ref="base_lp").mean_kl == pytest.approx(0.1)


def test_kl_by_task_refuses_to_draw_an_empty_chart():
    from toolkit.plots import kl_by_task

    with pytest.raises(tk.errors.LogprobError, match="reference_logprobs"):
        kl_by_task([lp_row("a", -1.0, 3)])


def test_a_dead_reference_is_not_called_on_every_row():
    calls = []

    class Dead:
        def score_total(self, row):
            calls.append(row["prompt"])
            raise ConnectionError("refused")

    rows = [{"prompt": f"p{i}", "steps": [], "final_text": ""} for i in range(10)]
    out = tk.reference_logprobs(rows, Dead())
    assert len(calls) == 3 and len(out.rows) == 10 and out.n_failed == 10
    assert [r["ref_status"] for r in out.rows] == ["error"] * 3 + ["skipped"] * 7
    assert "first 3 rows" in out.rows[-1]["ref_error"] and "refused" in out.rows[-1]["ref_error"]
    assert out.rows[-1]["ref_error"].startswith("not attempted: the reference policy 'Dead' failed")  # which reference
    assert out.failures == {"ConnectionError": 3, "skipped": 7}


def test_rows_without_a_model_are_neither_stale_nor_fresh():
    rows = [lp_row("a", -1.0, 2, model_version="m-new"), lp_row("b", -1.0, 2, model_version="m-old"), lp_row("c", -1.0, 2)]
    report = tk.staleness_report(rows, base_model="m-new")
    assert report.n_stale == 1 and report.n_unknown_model == 1
    assert any("no model_version" in w for w in report.warnings) and "1 with no model_version" in str(report)


def test_an_alive_reference_is_never_cut_short():
    calls = []

    class Flaky:
        def score_total(self, row):
            calls.append(row["prompt"])
            if row["prompt"] in ("p0", "p1", "p2"):
                return float("-inf")  # answered: probability 0, not a dead server
            if row["prompt"] == "p3":
                raise ConnectionError("blip")
            return -1.0

    rows = [{"prompt": f"p{i}", "steps": [], "final_text": ""} for i in range(6)]
    out = tk.reference_logprobs(rows, Flaky())
    assert len(calls) == 6 and out.n_scored == 2
    assert [r["ref_status"] for r in out.rows] == ["unscorable"] * 3 + ["error", "ok", "ok"]
    assert out.rows[0]["ref_error"] == "the reference policy 'Flaky' gives this completion probability 0 (logprob -inf)"


def test_the_printed_kl_says_what_it_is_measured_against():
    rows = [lp_row("a", -10.0, 20, ref=-12.0)]
    assert str(tk.mean_kl(rows)).startswith("mean KL(policy || reference policy, from ref_logprob) 0.1000 nats/token")
    assert str(tk.mean_kl([dict(rows[0], base_lp=-11.0)], ref="base_lp")).startswith(
        "mean KL(policy || reference policy, from base_lp) 0.0500 nats/token")
