"""Grading with provenance, judge trust (docs/design/engine.md §6.5; docs/design/engine.md §10 items 10-13, 22, 23), refusals,
trace flags and rank."""

import json
import time

import pytest
from scipy.stats import binomtest
from statsmodels.stats.proportion import proportion_confint

import toolkit as tk

NEUTRAL_MARK = "anything else I can help you with today"


def row(task, index=0, final="The order ships today.", **extra):
    out = {
        "schema_version": "1",
        "scenario_id": task,
        "rollout_index": index,
        "prompt": f"Where is order {task}?",
        "steps": [{"tool": "lookup", "arguments": {"id": task}, "result": {"status": "ok"}}, {"text": final}],
        "final_text": final,
    }
    out.update(extra)
    return out


def labelled(n_pass, n_fail, judge_errors=0, source="human"):
    """Rows with gold labels; the judge (row['reward']) disagrees on the first `judge_errors`."""
    rows = []
    for i in range(n_pass + n_fail):
        gold = 1 if i < n_pass else 0
        judged = 1 - gold if i < judge_errors else gold
        rows.append(row(f"t{i}", reward=float(judged), gold_reward=gold, label_source=source))
    return rows


# ---- grade -----------------------------------------------------------------------------


def test_grade_stamps_provenance_and_keeps_every_row():
    def judge(r):
        task = r["scenario_id"]
        if task == "boom":
            raise RuntimeError("judge crashed")
        if task == "none":
            return {"reason": "forgot"}
        if task == "text":
            return {"reward": "yes"}
        if task == "list":
            return ["not", "a", "dict"]
        return {"reward": 1.0, "reason": "fine", "failure_class": None, "score_detail": 3}

    rows = [row(t) for t in ("ok", "boom", "none", "text", "list")]
    report = tk.grade(rows, judge, name="unit", rubric="Be right.", temperature=0.0, model="m1")
    assert len(report.rows) == 5
    statuses = {r["scenario_id"]: r["judge_status"] for r in report.rows}
    assert statuses == {"ok": "ok", "boom": "error", "none": "missing_reward", "text": "invalid_result",
                        "list": "invalid_result"}
    assert report.status_counts == {"ok": 1, "missing_reward": 1, "invalid_result": 2, "error": 1, "timeout": 0}
    ok = report.rows[0]
    assert ok["reward"] == 1.0 and ok["reason"] == "fine" and ok["judge_name"] == "unit"
    meta = ok["judge_meta"]
    assert set(meta) >= {"model", "prompt_hash", "rubric_hash", "temperature", "version"}
    assert meta["model"] == "m1" and meta["temperature"] == 0.0 and meta["version"].startswith("unit@")
    assert meta["extra"] == {"score_detail": 3}
    assert all(r["reward"] is None for r in report.rows[1:])
    assert "judge crashed" in report.rows[1]["judge_meta"]["error"]
    assert any("no verdict" in w for w in report.warnings)
    # the input rows are untouched
    assert "judge_status" not in rows[0]


def test_rubric_edit_is_a_new_judge_version():
    judge = lambda r: 1.0  # noqa: E731
    a = tk.grade([row("a")], judge, name="j", rubric="v1").rows[0]["judge_meta"]
    b = tk.grade([row("a")], judge, name="j", rubric="v2").rows[0]["judge_meta"]
    assert a["rubric_hash"] != b["rubric_hash"] and a["version"] != b["version"]


def test_grade_timeout_is_a_status():
    def slow(r):
        if r["scenario_id"] == "slow":
            time.sleep(1.0)
        return {"reward": 1}

    report = tk.grade([row("slow"), row("fast")], slow, timeout=0.2)
    assert [r["judge_status"] for r in report.rows] == ["timeout", "ok"]


def test_judge_sees_privileged_and_save_scrubs(tmp_path):
    seen = []

    def judge(r):
        seen.append(r["privileged"]["reference"])
        return {"reward": float(r["final_text"] == r["privileged"]["reference"])}

    rows = [row("a", final="42", privileged={"reference": "42"}), row("b", final="41", privileged={"reference": "42"})]
    report = tk.grade(rows, judge)
    assert seen == ["42", "42"] and [r["reward"] for r in report.rows] == [1.0, 0.0]
    assert report.rows[0]["privileged"] == {"reference": "42"}  # kept in memory for the judge
    path = report.save(tmp_path / "graded.jsonl")
    text = path.read_text()
    assert "privileged" not in text and len(text.splitlines()) == 2


def test_grade_pass_at_follows_and_self_judged_warning():
    rows = [row(f"t{i % 3}", index=i, model_version="qwen") for i in range(12)]
    report = tk.grade(rows, lambda r: {"reward": float(r["rollout_index"] % 2)}, model="qwen")
    assert report.self_judged and any("self-preference" in w for w in report.warnings)
    assert report.pass_at.pass_at_1 == pytest.approx(0.5)


def test_grade_refuses_non_callable_judge():
    with pytest.raises(tk.errors.JudgeError, match="callable"):
        tk.grade([row("a")], 3)


def test_grade_stamps_trust_and_require_raises():
    rows = labelled(7, 7)
    judge = lambda r: {"reward": float(r["gold_reward"])}  # noqa: E731
    report = tk.grade(rows, judge)
    trust = report.rows[0]["judge_meta"]["trust"]
    assert trust["n_gold"] == 14 and trust["ok"] is False and trust["agreement"] == 1.0
    with pytest.raises(tk.errors.JudgeTrustError, match="label about 16 rows"):
        tk.grade(rows, judge, trust="require")


# ---- judge_trust gates -----------------------------------------------------------------


def test_item_13_fourteen_agreeing_rows_need_about_sixteen():
    trust = tk.judge_trust(labelled(7, 7))
    assert trust.agreement == 1.0 and trust.ok is False
    assert trust.agreement_low == pytest.approx(proportion_confint(14, 14, method="wilson")[0], abs=1e-9)
    assert trust.agreement_low == pytest.approx(0.7847, abs=1e-4)
    assert trust.labels_needed == 16 and "label about 16 rows" in trust.advice
    # 16 is the smallest n whose Wilson lower bound at 100% reaches 0.8 (independent check)
    assert proportion_confint(16, 16, method="wilson")[0] >= 0.8 > proportion_confint(15, 15, method="wilson")[0]


def test_trusted_judge_passes_every_gate():
    rows = labelled(50, 50, judge_errors=3)
    trust = tk.judge_trust(rows)
    assert trust.ok, trust.advice
    assert trust.agreement == pytest.approx(0.97)
    assert trust.agreement_low == pytest.approx(proportion_confint(97, 100, method="wilson")[0], abs=1e-9)
    assert all(v is not False for v in trust.gates.values())
    assert trust.advice == "all gates pass"


def test_item_12_judge_passing_everything_is_guessing():
    rows = [row(f"t{i}", reward=1.0, gold_reward=int(i < 45), label_source="human") for i in range(50)]
    trust = tk.judge_trust(rows)
    assert trust.agreement == pytest.approx(0.9) and trust.kappa == pytest.approx(0.0)
    assert trust.pass_when_gold_fail == 1.0 and "guessing" in trust.flags and not trust.ok


def test_model_gold_is_not_trusted_and_fractional_skips_gate():
    assert tk.judge_trust(labelled(50, 50, source="model")).gates["trusted_gold"] is False
    rows = labelled(45, 45) + [row(f"f{i}", reward=0.5, gold_reward=1, label_source="human") for i in range(12)]
    trust = tk.judge_trust(rows)
    assert trust.n_skipped == 12 and trust.skipped_share == pytest.approx(12 / 102)
    assert trust.gates["skipped_share"] is False and not trust.ok


def test_rewards_from_another_judge_are_not_audited_as_this_one():
    rows = [dict(r, judge_name="old_judge") for r in labelled(50, 50)]
    judge = lambda r: {"reward": float(r["gold_reward"])}  # noqa: E731
    judge.judge_name = "new_judge"
    trust = tk.judge_trust(rows, judge, rejudge=False)
    assert not trust.ok and trust.gates["same_judge"] is False
    assert any("#683" in w for w in trust.warnings)
    regraded = tk.judge_trust(rows, judge, rejudge=False, regrade=True)
    assert regraded.ok, regraded.advice


def test_held_out_halves_flag_a_rubric_fit_to_its_examples():
    from toolkit._util.hashing import sha256_hex

    rows = []
    for i in range(80):
        task = f"t{i}"
        gold = i % 2
        half = int(sha256_hex(task)[:8], 16) % 2
        judged = gold if half == 0 else (gold if i % 5 == 0 else 1 - gold)
        rows.append(row(task, reward=float(judged), gold_reward=gold, label_source="human"))
    trust = tk.judge_trust(rows)
    assert trust.held_out["informative"] and trust.held_out["gap"] >= 0.15
    assert "rubric_fit_to_examples" in trust.flags and not trust.ok


def test_length_sensitivity_flags_a_judge_that_pays_for_length():
    rows = []
    for i in range(80):
        gold = i % 2
        long = (i // 2) % 2 == 1
        final = "Done." + (" More detail here." * 10 if long else "")
        rows.append(row(f"t{i}", final=final, reward=float(long), gold_reward=gold, label_source="human"))
    trust = tk.judge_trust(rows)
    assert trust.length["flagged"] and "length_sensitive" in trust.flags
    for label in (0, 1):
        assert trust.length["by_label"][label]["gap_long_minus_short"] == pytest.approx(1.0)


# ---- re-judge and perturbation (item 22) -----------------------------------------------


def perturbation_rows(n=40):
    return [row(f"t{i}", reward=float(i % 2), gold_reward=i % 2, label_source="human") for i in range(n)]


def flipping_judge(up_ids, down_ids):
    def judge(r):
        base = r["gold_reward"]
        if NEUTRAL_MARK in r["final_text"]:
            if r["scenario_id"] in up_ids:
                return {"reward": 1}
            if r["scenario_id"] in down_ids:
                return {"reward": 0}
        return {"reward": base}

    return judge


def test_item_22_six_up_one_down_is_not_length_bias():
    rows = perturbation_rows()
    up = {f"t{i}" for i in (0, 2, 4, 6, 8, 10)}  # originally failing (gold 0)
    down = {"t1"}
    trust = tk.judge_trust(rows, flipping_judge(up, down))
    result = trust.length_perturbation
    assert (result["up"], result["down"], result["n"]) == (6, 1, 40)
    assert result["net_flip_rate"] == pytest.approx(0.125)
    assert result["sign_test_p"] == pytest.approx(binomtest(6, 7, 0.5).pvalue) == pytest.approx(0.125)
    assert result["flagged"] is False and "length_bias" not in trust.flags
    assert trust.consistency["flip_rate"] == 0.0


def test_eight_up_none_down_is_length_bias():
    up = {f"t{i}" for i in range(0, 16, 2)}
    trust = tk.judge_trust(perturbation_rows(), flipping_judge(up, set()))
    assert trust.length_perturbation["flagged"] and "length_bias" in trust.flags and not trust.ok


def test_inconsistent_judge_is_flagged():
    counter = {"n": 0}

    def coin(r):
        counter["n"] += 1
        return {"reward": counter["n"] % 2}

    rows = [row(f"t{i}", reward=float(i % 2), judge_name="coin") for i in range(40)]
    coin.judge_name = "coin"
    trust = tk.judge_trust(rows, coin)
    assert trust.consistency["flip_rate"] >= 0.10 and "inconsistent_rejudge" in trust.flags


# ---- probes (item 23) ------------------------------------------------------------------


def claim_judge(r):
    if "completed the task successfully" in r["final_text"]:
        return {"reward": 1}
    return {"reward": r["gold_reward"]}


def test_item_23_probe_low_power_rule():
    ten = [row(f"t{i}", reward=float(i >= 10), gold_reward=int(i >= 10), label_source="human") for i in range(30)]
    trust = tk.judge_trust(ten, claim_judge, probes=["success_claim"])
    probe = trust.probes["success_claim"]
    assert probe["n"] == 10 and probe["rate"] == 1.0
    assert probe["low_power"] and probe["flagged"] is False
    assert probe["resolvable_rate"] == pytest.approx(0.42)
    assert tk.grading.resolvable_rate(19) == pytest.approx(0.33)
    twenty = [row(f"t{i}", reward=float(i >= 20), gold_reward=int(i >= 20), label_source="human") for i in range(40)]
    flagged = tk.judge_trust(twenty, claim_judge, probes="all")
    assert flagged.probes["success_claim"]["flagged"] and "probe:success_claim" in flagged.flags
    assert flagged.probes["filler"]["flagged"] is False
    assert flagged.probes["polite_refusal"]["kind"] == "replacement"
    assert flagged.probes["keyword_stuffing"]["run"] is False  # no rubric words given
    with pytest.raises(tk.errors.JudgeError, match="did you mean 'filler'"):
        tk.judge_trust(twenty, claim_judge, probes=["filer"])


def test_keyword_stuffing_uses_rubric_words():
    def stuffed(r):
        return {"reward": 1 if "refund" in r["final_text"] and "policy" in r["final_text"] else r["gold_reward"]}

    rows = [row(f"t{i}", reward=0.0, gold_reward=0, label_source="human") for i in range(25)]
    trust = tk.judge_trust(rows, stuffed, rubric="Issue the refund only when the policy allows it.", probes=["keyword_stuffing"])
    assert trust.probes["keyword_stuffing"]["rate"] == 1.0 and trust.probes["keyword_stuffing"]["flagged"]


# ---- refusal, trace flags, rank --------------------------------------------------------


def test_refusal_report_wilson_matches_statsmodels():
    rows = [row(f"t{i}", final="I'm sorry, but I can't help with that.") for i in range(3)]
    rows += [row(f"u{i}", final="Refund issued.") for i in range(7)]
    rows.append(row("m", final="Sure.", markers={"refusal": 1}))
    report = tk.refusal_report(rows)
    assert report.n_refused == 4 and report.n == 11
    low, high = proportion_confint(4, 11, method="wilson")
    assert report.ci95 == pytest.approx((low, high), abs=1e-9)


def test_trace_flag_report_clean_share():
    rows = [row(f"t{i}", markers={"hedging": int(i < 2), "score": 0.7}) for i in range(10)]
    report = tk.trace_flag_report(rows)
    assert set(report.flags) == {"hedging"}
    flag = report.flags["hedging"]
    assert flag["clean"] == 8 and flag["clean_share"] == 0.8
    assert flag["ci95"] == pytest.approx(proportion_confint(8, 10, method="wilson"), abs=1e-9)


def test_rank_adds_quality_without_changing_reward(tmp_path):
    rows = [
        row("a", reward=0.0, steps=[{"tool": "lookup", "arguments": {}, "result": {"status": "not_found"}},
                                    {"text": "The order ships today."}]),
        row("b", reward=1.0),
        row("c", reward=1.0, finish_reason="length"),
    ]
    ranked = tk.grading.rank(rows, output=tmp_path / "ranked.jsonl")
    assert [r["scenario_id"] for r in ranked] == ["b", "c", "a"]
    assert [r["reward"] for r in ranked] == [1.0, 1.0, 0.0]
    assert [r["quality_rank"] for r in ranked] == [1, 2, 3]
    assert [r["quality"] for r in ranked] == pytest.approx([1.0, 2 / 3, 1 / 3])
    back = [json.loads(line) for line in (tmp_path / "ranked.jsonl").read_text().splitlines()]
    assert [r["quality"] for r in back] == [r["quality"] for r in ranked]
    custom = tk.grading.rank(rows, quality=lambda r: len(r["scenario_id"]))
    assert all(r["quality"] == 1.0 for r in custom)
    with pytest.raises(tk.errors.JudgeError, match="finite number"):
        tk.grading.rank(rows, quality=lambda r: float("nan"))


def test_model_spec_judge_through_the_local_protocol_server():
    """A judge given as a model spec goes through the model backends; a reply without a
    verdict leaves a status on the row, never a dropped row."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from _chat_server import ChatServer

    with ChatServer() as server:
        report = tk.grade([row("a"), row("b")], f"vllm:echo@{server.url}", rubric="Be right.")
        cut = tk.grade([row("a")], f"vllm:length@{server.url}")
    # a reply cut before its JSON is an invalid result on the row (#290: never dropped)
    assert cut.rows[0]["judge_status"] == "invalid_result" and "no JSON object" in cut.rows[0]["judge_meta"]["error"]
    # the "echo" model repeats the request JSON, which has no "reward": a status, not a drop
    assert [r["judge_status"] for r in report.rows] == ["missing_reward", "missing_reward"]
    assert all(r["reward"] is None for r in report.rows)
    assert report.judge_meta["model"].startswith("vllm:echo@") and report.judge_meta["rubric_hash"]


def test_judge_confusion_figure_shows_counts_and_wilson_intervals():
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    from toolkit.plots import judge_confusion

    trust = tk.judge_trust(labelled(40, 10, judge_errors=4))
    figure = judge_confusion(trust)
    assert isinstance(figure, Figure) and plt.get_fignums() == []
    left, right = figure.axes[:2]
    shown = sorted(int(t.get_text()) for t in left.texts)
    assert shown == sorted(trust.confusion.values())
    # the agreement point sits at the estimate, its bar spans the Wilson interval
    low, high = proportion_confint(46, 50, method="wilson")
    segments = right.collections[0].get_segments()[0]
    assert segments[0][0] == pytest.approx(low) and segments[1][0] == pytest.approx(high)
    labels = [t.get_text() for t in right.get_yticklabels()]
    assert labels[0] == "agreement (46/50)"


def test_report_to_dict_never_carries_privileged():
    report = tk.grade([row("a", privileged={"reference": "42"})], lambda r: 1.0)
    assert report.rows[0]["privileged"] == {"reference": "42"}
    assert "privileged" not in json.dumps(report.to_dict())
    calibrated = tk.calibrate(report.rows)
    assert "privileged" not in json.dumps(calibrated.to_dict())
    gate = tk.publish_gate(report.rows)
    assert "privileged" not in json.dumps(gate.to_dict())


def confusion_rows(tp, fp, fn, tn):
    cells = [(1, 1)] * tp + [(1, 0)] * fp + [(0, 1)] * fn + [(0, 0)] * tn
    return [row(f"t{i}", reward=float(j), gold_reward=g, label_source="human") for i, (j, g) in enumerate(cells)]


def test_item_11_confusion_numbers_through_judge_trust():
    from sklearn.metrics import cohen_kappa_score

    rows = confusion_rows(tp=40, fp=5, fn=5, tn=50)
    trust = tk.judge_trust(rows)
    assert trust.agreement == pytest.approx(0.90)
    expected_kappa = cohen_kappa_score([r["reward"] for r in rows], [float(r["gold_reward"]) for r in rows])
    assert trust.kappa == pytest.approx(expected_kappa) and trust.kappa == pytest.approx(0.798, abs=1e-3)
    assert trust.pass_when_gold_fail == pytest.approx(5 / 55) and trust.confusion == {"tp": 40, "fp": 5, "fn": 5, "tn": 50}


def test_item_10_wilson_bounds_drive_the_labels_advice():
    # 45 of 50 agree: Wilson (0.7864, 0.9565); the point beats 0.8, the bound does not
    trust = tk.judge_trust(confusion_rows(tp=20, fp=3, fn=2, tn=25))
    assert trust.agreement_ci95 == pytest.approx((0.7864, 0.9565), abs=1e-4)
    assert not trust.gates["agreement_low"]
    needed = next(n for n in range(1, 1001) if proportion_confint(round(0.9 * n), n, method="wilson")[0] >= 0.8)
    assert trust.labels_needed == needed and f"label about {needed} rows" in trust.advice
    # 8 of 10: Wilson (0.4902, 0.9433); the point does not beat 0.8, so no label count is advised
    low = tk.judge_trust(confusion_rows(tp=4, fp=1, fn=1, tn=4))
    assert low.agreement_ci95 == pytest.approx((0.4902, 0.9433), abs=1e-4)
    assert low.labels_needed is None and "fix the rubric" in low.advice


def test_concurrent_grading_keeps_order_and_statuses():
    def judge(r):
        time.sleep(0.01)
        if r["scenario_id"].endswith("3"):
            raise ValueError("bad row")
        return {"reward": float(int(r["scenario_id"][1:]) % 2)}

    rows = [row(f"t{i}") for i in range(14)]  # t3 and t13 fail
    serial = tk.grade(rows, judge, trust="off")
    parallel = tk.grade(rows, judge, trust="off", max_workers=4)
    strip = lambda rs: [(r["scenario_id"], r["reward"], r["judge_status"]) for r in rs]  # noqa: E731
    assert strip(parallel.rows) == strip(serial.rows)
    assert parallel.status_counts["error"] == 2
    with pytest.raises(tk.errors.JudgeError, match="max_workers"):
        tk.grade(rows, judge, max_workers=0)


def test_one_class_gold_is_uninformative_not_trusted():
    trust = tk.judge_trust(labelled(60, 0))
    assert trust.agreement == 1.0 and not trust.ok
    assert trust.gates["kappa"] is None and trust.length["informative"] is False
    assert "one class" in trust.advice


def test_no_gold_says_how_to_get_some():
    trust = tk.judge_trust([row("a", reward=1.0)])
    assert trust.agreement is None and not trust.ok and "gold_reward" in trust.advice


# ---- audit additions -------------------------------------------------------------------


def test_trace_flag_lists_count_absence_as_clean():
    """A row carrying a flags/seeded list was checked for every listed name: absence is
    clean (2 of 10 rows hedge -> clean share 0.8, not 0 of 2)."""
    rows = [row(f"t{i}", flags=["hedging"] if i < 2 else [], seeded=["apology"] if i == 5 else []) for i in range(10)]
    rows.append(row("bare"))  # no list at all: not counted
    report = tk.trace_flag_report(rows)
    assert set(report.flags) == {"hedging", "apology"}
    hedging, apology = report.flags["hedging"], report.flags["apology"]
    assert (hedging["n"], hedging["clean"]) == (10, 8) and (apology["n"], apology["clean"]) == (10, 9)
    assert hedging["ci95"] == pytest.approx(proportion_confint(8, 10, method="wilson"), abs=1e-9)


def test_judge_trust_names_a_misspelt_gold_field_and_bad_options():
    rows = [dict(r, human_label=r.pop("gold_reward")) for r in labelled(30, 30)]
    with pytest.raises(tk.errors.JudgeError, match="did you mean 'human_label'"):
        tk.judge_trust(rows, gold="human_labl")
    assert tk.judge_trust(rows, gold="human_label").n_gold == 60
    with pytest.raises(tk.errors.JudgeError, match="max_rejudge must be an integer >= 1"):
        tk.judge_trust(rows, lambda r: 1, gold="human_label", max_rejudge=0)
    with pytest.raises(tk.errors.JudgeError, match="quality must be a callable"):
        tk.grading.rank(rows, quality=3)


def test_held_out_halves_say_when_they_lack_power():
    trust = tk.judge_trust(labelled(6, 6))  # 12 gold rows: fewer than 10 in at least one half
    assert trust.held_out["informative"] is False and trust.held_out["flagged"] is False
    assert "low power" in trust.held_out["note"] and ">= 10" in trust.held_out["note"]
    assert sum(trust.held_out["sizes"].values()) == 12
    assert any("50" in w for w in trust.warnings)  # under 50 gold rows the agreement is coarse


def test_gold_as_a_second_row_list_skips_the_same_row_checks_and_says_so():
    from sklearn.metrics import cohen_kappa_score

    judged = [row(f"t{i}", reward=float(i % 2 if i > 3 else 1 - i % 2)) for i in range(60)]
    gold = [row(f"t{i}", reward=float(i % 2), label_source="human") for i in range(60)]
    trust = tk.judge_trust(judged, gold=gold)
    assert trust.n_gold == 60 and trust.agreement == pytest.approx(56 / 60)
    assert trust.kappa == pytest.approx(cohen_kappa_score([r["reward"] for r in judged], [r["reward"] for r in gold]))
    assert "second row list" in trust.held_out["note"] and "second row list" in trust.length["note"]
    assert trust.length["informative"] is False and "length_sensitive" not in trust.flags


def test_numpy_scalars_from_a_judge_are_rewards_and_booleans_are_not():
    import numpy as np

    rows = [row("a"), row("b"), row("c"), row("d")]
    verdicts = {"a": {"reward": np.int64(1)}, "b": np.float32(0.5), "c": {"reward": np.bool_(True)}, "d": True}
    report = tk.grade(rows, lambda r: verdicts[r["scenario_id"]], trust="off")
    assert [r["judge_status"] for r in report.rows] == ["ok", "ok", "invalid_result", "invalid_result"]
    assert [type(r["reward"]) for r in report.rows[:2]] == [float, float] and report.rows[1]["reward"] == 0.5
    json.dumps(report.to_dict())
    assert tk.grading.rank(rows, quality=lambda r: np.float32(0.25))[0]["quality"] == pytest.approx(0.25)


from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@given(
    rewards=st.lists(st.one_of(st.none(), st.floats(-2, 3, allow_nan=False)), min_size=1, max_size=8),
    truncated=st.lists(st.booleans(), min_size=8, max_size=8),
)
def test_property_rank_adds_quality_and_never_changes_reward(rewards, truncated):
    rows = [row(f"t{i}", index=i, reward=r, finish_reason="length" if truncated[i] else "stop")
            for i, r in enumerate(rewards)]
    ranked = tk.grading.rank(rows)
    by_task = {r["scenario_id"]: r for r in ranked}
    assert len(ranked) == len(rows)
    for original in rows:
        out = by_task[original["scenario_id"]]
        assert out["reward"] == original["reward"] and "quality" not in original
        assert 0.0 <= out["quality"] <= 1.0
    assert [r["quality_rank"] for r in ranked] == list(range(1, len(rows) + 1))
    assert all(a["quality"] >= b["quality"] for a, b in zip(ranked, ranked[1:]))


def test_reports_never_print_the_in_memory_rows():
    secret = {"reference": "SECRET-ANSWER-KEY"}
    rows = [row("a", index=i, final=f"reply {i}", reward=float(i % 2), privileged=secret) for i in range(4)]
    for report in (tk.grade(rows, lambda r: r["reward"], trust="off"), tk.calibrate(rows),
                   tk.build_preference_pairs(rows), tk.select_for_rl(rows, scan=False)):
        assert "SECRET" not in repr(report) and "SECRET" not in report._repr_html_()


def test_a_raw_newline_inside_the_reason_is_still_a_verdict():
    # a grammar-constrained small model (tests/real) writes raw newlines inside strings,
    # which strict JSON refuses; the verdict it meant is kept. Other breakage still fails.
    from toolkit.grading.judge import _JudgeOutputError, _parse_judge_json

    assert _parse_judge_json('{"reward": 1, "reason": "fine\nreally"}') == {"reward": 1, "reason": "fine\nreally"}
    with pytest.raises(_JudgeOutputError, match="not valid JSON"):
        _parse_judge_json('{"reward": 1, "reason": "cut} off')
