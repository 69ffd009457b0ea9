"""hack_scan (docs/design/engine.md §6.6): variance decomposition, within-ask features against a
permutation floor, and the six regimes."""

import numpy as np
import pytest

import toolkit as tk

WORDS = "the order was refunded and we checked your account status today".split()


def rollouts(n_asks=30, k=8, seed=1):
    """Asks with k rollouts each: a random reply length and a random correct/incorrect tool."""
    rng = np.random.default_rng(seed)
    rows = []
    for a in range(n_asks):
        for i in range(k):
            n_words = int(rng.integers(5, 60))
            text = " ".join(rng.choice(WORDS, n_words))
            correct = bool(rng.random() < 0.5)
            rows.append({
                "schema_version": "1",
                "prompt": f"Please help with ask number {a}",
                "rollout_index": i,
                "steps": [{"tool": "lookup" if correct else "search", "arguments": {"q": a}, "result": {}},
                          {"text": text}],
                "final_text": text,
                "correct": correct,
            })
    return rows


def length_judge(row):
    return {"reward": float(len(row["final_text"].split()) > 32), "reason": "long answers look thorough"}


def honest_judge(row):
    return {"reward": float(row["correct"]), "reason": "used the right tool"}


def test_planted_length_hack_is_flagged_and_honest_judge_is_not():
    rows = rollouts()
    hacked = tk.grade(rows, length_judge, trust="off").rows
    scan = tk.hack_scan(hacked, endorsed=["tool:lookup"])
    assert scan.regime == "reward_hack"
    assert scan.top_feature in ("word_count", "reply_length")
    assert scan.top_rho > scan.floor
    assert "not an endorsed behaviour" in scan.reading
    honest = tk.hack_scan(tk.grade(rows, honest_judge, trust="off").rows, endorsed=["tool:lookup"])
    assert honest.regime == "train" and "endorsed (tool:lookup (within-ask rho +1.00))" in honest.reading
    assert honest.top_feature == "tool:lookup" and honest.top_rho == pytest.approx(1.0)
    assert "not tool:search" in honest.features[0]["aliases"]  # the complement collapses into it
    assert honest.integrity == pytest.approx(1.0) and honest.rival is None
    # to_dict lists the features above the floor by name
    payload = honest.to_dict()
    assert payload["above_floor_names"][0] == "tool:lookup"
    assert "word_count" not in payload["above_floor_names"]


def test_decomposition_is_the_law_of_total_variance():
    rows = tk.grade(rollouts(n_asks=12, k=5, seed=3), honest_judge, trust="off").rows
    scan = tk.hack_scan(rows, endorsed=["tool:lookup"])
    r = np.array([row["reward"] for row in rows])
    groups = np.array([row["prompt"] for row in rows])
    within = np.mean([((r[groups == g] - r[groups == g].mean()) ** 2).sum() for g in set(groups)]) * len(set(groups)) / len(r)
    d = scan.decomposition
    assert d["total_variance"] == pytest.approx(np.var(r))
    assert d["within_ask_variance"] == pytest.approx(within)
    assert d["within_ask_variance"] + d["between_ask_variance"] == pytest.approx(np.var(r))


def test_within_ask_correlation_matches_demeaned_pearson():
    rows = tk.grade(rollouts(n_asks=10, k=6, seed=4), length_judge, trust="off").rows
    scan = tk.hack_scan(rows, endorsed=["tool:lookup"], auto=False)
    words = np.array([len(r["final_text"].split()) for r in rows], dtype=float)
    reward = np.array([r["reward"] for r in rows])
    prompts = np.array([r["prompt"] for r in rows])
    for p in set(prompts):
        words[prompts == p] -= words[prompts == p].mean()
        reward[prompts == p] -= reward[prompts == p].mean()
    expected = np.corrcoef(words, reward)[0, 1]
    by_name = {f["name"]: f for f in scan.features}
    assert by_name["word_count"]["rho"] == pytest.approx(expected)


def test_floor_is_the_95th_null_maximum_and_seeded():
    rows = tk.grade(rollouts(n_asks=10, k=6, seed=5), honest_judge, trust="off").rows
    a = tk.hack_scan(rows, endorsed=["tool:lookup"], seed=7)
    b = tk.hack_scan(rows, endorsed=["tool:lookup"], seed=7)
    c = tk.hack_scan(rows, endorsed=["tool:lookup"], seed=8)
    assert a.floor == b.floor and a.n_permutations == 100
    assert 0 < a.floor < 1 and a.floor != c.floor


def test_random_rewards_have_no_signal():
    rows = rollouts(n_asks=20, k=6, seed=6)
    rng = np.random.default_rng(0)
    for row in rows:
        row["reward"] = float(rng.random() < 0.5)
    scan = tk.hack_scan(rows, endorsed=["tool:lookup"], seed=1)
    assert scan.regime == "no_signal" and "shuffle floor" in scan.reading


def test_unknown_when_nothing_endorsed_or_pattern_matches_nothing():
    rows = tk.grade(rollouts(), honest_judge, trust="off").rows
    assert tk.hack_scan(rows).regime == "unknown"
    missing = tk.hack_scan(rows, endorsed=["tool:refund"])
    assert missing.regime == "unknown" and "tool:refund" in missing.reading


def test_endorsed_but_paid_negatively_is_a_hack():
    rows = tk.grade(rollouts(), lambda r: {"reward": float(not r["correct"])}, trust="off").rows
    scan = tk.hack_scan(rows, endorsed=["tool:lookup"])
    assert scan.regime == "reward_hack" and "paid negatively" in scan.reading


def test_pool_exhausted_when_many_asks_all_pass():
    rows = rollouts(n_asks=30, k=8, seed=2)
    for row in rows:
        ask = int(row["prompt"].rsplit(" ", 1)[1])
        row["reward"] = 1.0 if ask < 10 else float(row["correct"])
    scan = tk.hack_scan(rows, endorsed=["tool:lookup"])
    assert scan.support["sat"] == pytest.approx(10 / 30)
    assert scan.regime == "pool_exhausted"
    assert scan.reading.startswith("33% of asks are already all-pass") and "harder asks" in scan.reading


def test_degenerate_when_rollouts_barely_differ():
    rows = []
    for a in range(30):
        for i in range(4):
            good = i % 2 == 0
            text = "Refund issued for your order." if good else "Please wait."
            rows.append({"prompt": f"ask {a}", "steps": [{"text": text}], "final_text": text, "reward": float(good)})
    scan = tk.hack_scan(rows, endorsed=["says:refund"], auto=True)
    assert scan.regime == "degenerate"
    assert "median 2.0 distinct per ask" in scan.reading and "no winner can be named" in scan.reading


def test_caller_features_and_support_gate():
    rows = tk.grade(rollouts(), honest_judge, trust="off").rows
    scan = tk.hack_scan(rows, endorsed=["correct_flag"], features={"correct_flag": lambda r: float(r["correct"])})
    assert scan.regime == "train" and scan.top_feature == "correct_flag"
    broken = tk.hack_scan(rows, endorsed=["tool:lookup"], features={"nan": lambda r: float("nan"), "boom": lambda r: 1 / 0})
    assert set(broken.skipped_features) >= {"nan", "boom"} and "ZeroDivisionError" in broken.skipped_features["boom"]
    few = tk.hack_scan(rows[:15], endorsed=["tool:lookup"])
    assert few.features == []  # fewer than 20 non-zero rows: no feature qualifies


def test_ungraded_rows_refused_and_bad_options():
    with pytest.raises(tk.ToolkitError, match="graded rows"):
        tk.hack_scan([{"prompt": "p", "steps": [], "final_text": ""}])
    with pytest.raises(tk.ToolkitError, match="did you mean 'prompt'"):
        tk.hack_scan([{"prompt": "p", "reward": 1}], group_by="promt")
    with pytest.raises(tk.ToolkitError, match="endorsed must be"):
        tk.hack_scan([{"prompt": "p", "reward": 1}], endorsed=[3])


def test_a_bare_string_endorses_one_pattern():
    rows = tk.grade(rollouts(n_asks=12, k=6, seed=9), honest_judge, trust="off").rows
    one = tk.hack_scan(rows, endorsed="tool:lookup")
    assert one.endorsed == ["tool:lookup"] and one.regime == "train"


def test_floor_false_alarm_rate_is_near_five_percent_under_the_null():
    """With rewards independent of every feature, 'something above the floor' should happen
    in about 5% of scans, the floor's design rate, including the automatic word and AND
    search (a floor that ignored the AND search would alarm far more often)."""
    alarms = 0
    for trial in range(30):
        rows = rollouts(n_asks=25, k=6, seed=100 + trial)
        rng = np.random.default_rng(trial)
        for row in rows:
            row["reward"] = float(rng.random() < 0.5)
        scan = tk.hack_scan(rows, endorsed=["tool:lookup"], seed=trial)
        alarms += bool(scan.above_floor)
    # Binomial(30, 0.05): P(X >= 6) = 0.002
    assert alarms <= 5


def test_every_regime_has_a_plain_words_reading():
    """The six regimes of docs/design/engine.md §6.6, each reached by the tests above, read as a
    sentence: no unfilled template field, and the reading names its reason."""
    import re

    from toolkit.grading import hackscan

    assert tuple(hackscan._READINGS) == tk.grading.REGIMES
    base = rollouts(n_asks=12, k=6, seed=9)
    honest = tk.grade(base, honest_judge, trust="off").rows
    scans = {
        "unknown": tk.hack_scan(honest),
        "train": tk.hack_scan(honest, endorsed=["tool:lookup"]),
        "reward_hack": tk.hack_scan(tk.grade(base, length_judge, trust="off").rows, endorsed=["tool:lookup"]),
    }
    for regime, scan in scans.items():
        assert scan.regime == regime
        assert scan.reading.endswith(".") and not re.search(r"[{}]", scan.reading)
        assert str(scan).startswith(f"hack_scan: {regime}")
    assert "endorsed=[...]" in scans["unknown"].reading and "No endorsed behaviours" in scans["unknown"].reading
