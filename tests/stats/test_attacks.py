"""tk.attack_report (toolkit/stats/attacks.py): calibrated by simulation against known true
rates, and each knob at two values with its effect."""

import numpy as np
import pytest

import toolkit as tk


def synthetic(rng, n_tasks, p_clean, p_attacked, p_success, repeats=1, mode="prompt_injection"):
    """Rows with known true rates: task t has its own utility rates drawn around the targets
    (so tasks differ, as real ones do), one clean and one attacked side of the same tasks."""
    rows = []
    for task in range(n_tasks):
        shift = rng.normal(0, 0.8)
        clean_p = 1 / (1 + np.exp(-(np.log(p_clean / (1 - p_clean)) + shift)))
        attacked_p = 1 / (1 + np.exp(-(np.log(p_attacked / (1 - p_attacked)) + shift)))
        for _ in range(repeats):
            rows.append({"scenario_id": f"t{task}", "prompt": f"p{task}", "reward": float(rng.random() < clean_p), "faults": []})
            rows.append(
                {
                    "scenario_id": f"t{task}",
                    "prompt": f"p{task}",
                    "reward": float(rng.random() < attacked_p),
                    "faults": [{"mode": mode, "attack": True}],
                    "markers": {"attack_success": float(rng.random() < p_success)},
                }
            )
    return rows


def _truth(p_clean, p_attacked, n=400_000, seed=99):
    """The population means of the synthetic design (logit-normal), by a large Monte Carlo."""
    shift = np.random.default_rng(seed).normal(0, 0.8, n)
    clean = 1 / (1 + np.exp(-(np.log(p_clean / (1 - p_clean)) + shift)))
    attacked = 1 / (1 + np.exp(-(np.log(p_attacked / (1 - p_attacked)) + shift)))
    return clean.mean(), attacked.mean()


def test_intervals_cover_the_true_rates():
    # 300 simulated suites of 60 tasks: each 95% interval should cover its truth ~95% of the
    # time; with 300 suites the Monte Carlo sd of a coverage is 0.0126, so [0.91, 0.99] is a
    # 3-sd band that still fails an interval that covers 0.85 or 0.999.
    rng = np.random.default_rng(0)
    true_clean, true_attacked = _truth(0.7, 0.45)
    truth = {
        "utility_clean": true_clean,
        "utility_attacked": true_attacked,
        "attack_success": 0.3,
        "difference": true_attacked - true_clean,
    }
    hits = {name: 0 for name in truth}
    suites = 300
    for suite in range(suites):
        report = tk.attack_report(synthetic(rng, 60, 0.7, 0.45, 0.3), n_resamples=1000, seed=suite)
        for name, value in truth.items():
            rate = getattr(report, name)
            hits[name] += rate.low <= value <= rate.high
    coverage = {name: hits[name] / suites for name in hits}
    assert all(0.91 <= c <= 0.99 for c in coverage.values()), coverage


def test_report_fields_pairing_and_modes():
    rng = np.random.default_rng(1)
    rows = synthetic(rng, 40, 0.8, 0.4, 0.5) + synthetic(rng, 10, 0.8, 0.4, 0.9, mode="wrong_data")
    report = tk.attack_report(rows)
    assert report.utility_clean.n_tasks == 40 and report.utility_attacked.n_tasks == 40
    assert report.difference.n_tasks == 40  # the 10 wrong_data tasks share ids t0..t9 with the others
    assert set(report.by_mode) == {"prompt_injection", "wrong_data"}
    assert report.by_mode["wrong_data"]["attack_success"].estimate > report.by_mode["prompt_injection"]["attack_success"].estimate
    assert "utility under attack" in str(report)
    # a separate clean run pairs by task key
    clean = [r for r in rows if not r["faults"]]
    attacked = [r for r in rows if r["faults"]]
    split = tk.attack_report(attacked, clean=clean)
    assert split.difference.estimate == pytest.approx(report.difference.estimate)
    # rows with ordinary faults only are on neither side, and the notes say so
    ordinary = rows + [{"scenario_id": "t0", "prompt": "p0", "reward": 0.0, "faults": [{"mode": "timeout"}]}]
    assert "1 rows met an ordinary fault (a timeout, ...) and are in neither side" in tk.attack_report(ordinary).notes


def test_knobs_change_the_output():
    rng = np.random.default_rng(2)
    rows = synthetic(rng, 40, 0.8, 0.5, 0.3)
    for row in rows:
        row.setdefault("markers", {})["goal_met"] = 1.0  # the ask is always done; reward varies
    by_reward = tk.attack_report(rows, utility="reward")
    by_goal = tk.attack_report(rows, utility="goal_met")
    assert by_goal.utility_clean.estimate == 1.0 and by_reward.utility_clean.estimate < 0.95
    wide = tk.attack_report(rows, level=0.99).attack_success
    narrow = tk.attack_report(rows, level=0.8).attack_success
    assert (wide.high - wide.low) > (narrow.high - narrow.low)
    for i, row in enumerate(rows):
        row["family"] = f"f{int(row['scenario_id'][1:]) // 8}"
    clustered = tk.attack_report(rows, cluster="family")
    assert clustered.attack_success.method == "clustered t"
    assert tk.attack_report(rows).attack_success.method != "clustered t"



def test_seed_and_n_resamples_move_only_the_bootstrap_intervals():
    # above 30 tasks with several rows a task the intervals are percentile bootstraps: seed
    # and n_resamples change their ends (Monte Carlo error), the estimates never move
    rows = synthetic(np.random.default_rng(5), 60, 0.7, 0.45, 0.3, repeats=7)

    def ends(report):
        return [(r.low, r.high) for r in (report.utility_clean, report.utility_attacked, report.difference)]

    base = tk.attack_report(rows, seed=0, n_resamples=2000)
    assert base.utility_clean.method == "percentile bootstrap"
    for other in (tk.attack_report(rows, seed=1, n_resamples=2000), tk.attack_report(rows, seed=0, n_resamples=4000)):
        assert other.utility_clean.estimate == base.utility_clean.estimate
        assert ends(other) != ends(base)
    assert tk.attack_report(rows, seed=0, n_resamples=2000) == base  # the same seed, the same report


def test_refusals_are_loud():
    rng = np.random.default_rng(3)
    rows = synthetic(rng, 10, 0.8, 0.5, 0.3)
    with pytest.raises(tk.ConfigError, match="no row was attacked"):
        tk.attack_report([r for r in rows if not r["faults"]])
    with pytest.raises(tk.ConfigError, match="no attacked row has an attack_success marker"):
        tk.attack_report([{**r, "markers": {}} for r in rows])
    with pytest.raises(tk.ConfigError, match="unknown utility 'rewards'"):
        tk.attack_report(rows, utility="rewards")


def test_an_interval_without_spread_says_so_in_the_printed_report():
    # every attacked task succeeds half the time: the interval rule gives the point, and the
    # report must say why instead of printing [0.50, 0.50] as if it were certain
    rows = []
    for task in range(3):
        base = {"scenario_id": f"t{task}", "prompt": f"p{task}"}
        rows.append({**base, "reward": 1.0, "faults": []})
        for success in (0.0, 1.0):
            rows.append({**base, "reward": 1.0, "faults": [{"mode": "prompt_injection", "attack": True}],
                         "markers": {"attack_success": success}})
    report = tk.attack_report(rows)
    assert (report.attack_success.low, report.attack_success.high) == (0.5, 0.5)
    assert "no spread" in report.attack_success.note
    assert "note: attack success rate: all 3 values equal 0.5: no spread" in str(report)
    # a report whose rates all vary prints no such note
    varied = tk.attack_report(synthetic(np.random.default_rng(1), 40, 0.7, 0.45, 0.3))
    assert "no spread" not in str(varied)


@pytest.mark.parametrize(
    ("side", "change", "message"),
    [
        ("attacked", {"reward": 3.0}, r"rows\[1\] has reward 3.0, outside \[0, 1\]"),
        ("attacked", {"reward": float("nan")}, r"rows\[1\] has reward nan, outside \[0, 1\]"),
        ("clean", {"reward": -0.5}, r"clean\[0\] has reward -0.5, outside \[0, 1\]"),
        ("attacked", {"markers": {"attack_success": 2.0}}, r"rows\[1\] has markers\['attack_success'\] 2.0"),
        ("attacked", {"markers": {"attack_success": 1.0, "goal_met": float("inf")}}, r"rows\[1\] has markers\['goal_met'\] inf"),
    ],
)
def test_scores_outside_0_1_are_refused_naming_the_row(side, change, message):
    rows = synthetic(np.random.default_rng(4), 5, 0.7, 0.45, 0.3)
    clean = [dict(r) for r in rows if not r["faults"]]
    attacked = [dict(r) for r in rows if r["faults"]]
    (attacked if side == "attacked" else clean)[1 if side == "attacked" else 0].update(change)
    with pytest.raises(tk.ConfigError, match=message):
        tk.attack_report(attacked, clean=clean, utility="goal_met")


def test_every_dropped_row_is_counted_in_a_note():
    rows = synthetic(np.random.default_rng(5), 10, 0.7, 0.45, 0.3)
    timeout = {"scenario_id": "t0", "prompt": "p0", "reward": 0.0, "faults": [{"mode": "timeout"}]}
    found_nothing = {"scenario_id": "t1", "prompt": "p1", "reward": 1.0, "faults": [{"mode": "wrong_data", "attack": False}]}
    mixed = tk.attack_report(rows + [timeout, timeout, found_nothing])
    assert "2 rows met an ordinary fault (a timeout, ...) and are in neither side" in mixed.notes
    assert any(n.startswith("1 rows met only attacks that found nothing to alter") for n in mixed.notes)
    # paired: rows dropped from the attacked run, and from the clean run
    clean = [r for r in rows if not r["faults"]] + [timeout]
    attacked = [r for r in rows if r["faults"]] + [timeout, timeout, timeout]
    paired = tk.attack_report(attacked, clean=clean)
    assert "3 rows of the attacked run met an ordinary fault (a timeout, ...) and are left out of utility under attack" in paired.notes
    assert "1 rows of the clean run met a fault and are left out of utility clean" in paired.notes


def test_paired_design_keeps_unexposed_rows_on_the_attacked_side():
    # 20 tasks: 10 whose rollouts call a tool (attacked, utility 0 under attack, 1 clean) and
    # 10 that answer without a tool (never reached by an attack, utility 1 both ways). The
    # paired drop over the 20 tasks the design ran both ways is -0.5; leaving out the
    # unexposed rows on the attacked side only would report -1.0 on 10 tasks.
    clean, attacked = [], []
    for task in range(20):
        base = {"scenario_id": f"t{task}", "prompt": f"p{task}"}
        clean.append({**base, "reward": 1.0, "faults": []})
        if task < 10:
            mode = "prompt_injection" if task % 2 else "wrong_data"
            attacked.append({**base, "reward": 0.0, "faults": [{"mode": mode, "attack": True}], "markers": {"attack_success": 1.0}})
        elif task < 15:
            attacked.append({**base, "reward": 1.0, "faults": []})  # never called a tool
        else:
            # wrong_data on a refusal: unexposed, not an ordinary fault
            attacked.append({**base, "reward": 1.0, "faults": [{"mode": "wrong_data", "attack": False}]})
    report = tk.attack_report(attacked, clean=clean)
    assert report.utility_attacked.n_rows == 20 and report.utility_attacked.estimate == 0.5
    assert report.difference.n_tasks == 20 and report.difference.estimate == -0.5
    assert report.attack_success.n_rows == 10 and report.attack_success.estimate == 1.0
    assert any(n.startswith("10 rows of the attacked run were never reached by an attack") for n in report.notes)
    assert any(n.startswith("5 attacked-side rows name no attack mode") for n in report.notes)
    # by mode: utility over the rows whose ledger names the mode, success over the reached ones
    assert report.by_mode["wrong_data"]["utility"].n_rows == 10 and report.by_mode["wrong_data"]["attack_success"].n_rows == 5
    # one mixed run keeps the old split: attacked rows against fault-free ones
    mixed = tk.attack_report(attacked + clean)
    assert mixed.utility_attacked.n_rows == 10 and mixed.utility_clean.n_rows == 25
