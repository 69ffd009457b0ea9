"""tk.attacked_tasks (toolkit/situations/_worlds.py): a run's tasks replayed under attack, the
paired design of tk.attack_report (docs/design/outcomes_and_attacks.md)."""

import pytest

import toolkit as tk


@pytest.fixture(scope="module")
def clean():
    return tk.simulate(mode="sft", budget=80, seed=0, fault_rate=0.0, grader=tk.state_grader(), progress=False)


def test_each_prompt_gets_one_mode_in_turn_and_the_rest_of_the_row_is_kept(clean):
    tasks = tk.attacked_tasks(clean.trajectories)
    assert len(tasks) == len(clean.trajectories)
    by_prompt = {}
    for original, task in zip(clean.trajectories, tasks):
        assert {k: v for k, v in task.items() if k != "faults"} == {k: v for k, v in original.items() if k != "faults"}
        (entry,) = task["faults"]
        by_prompt.setdefault(task["prompt"], set()).add(entry["mode"])
    assert all(len(modes) == 1 for modes in by_prompt.values())  # one mode per prompt, all its rows
    order = list(dict.fromkeys(t["prompt"] for t in tasks))
    assert [by_prompt[p].pop() for p in order] == [tk.ATTACK_MODES[i % 2] for i in range(len(order))]
    only = tk.attacked_tasks(clean.rows, modes=["wrong_data"])
    assert {t["faults"][0]["mode"] for t in only} == {"wrong_data"}


def test_the_replay_is_attacked_and_pairs_with_the_clean_run(clean):
    attacked = tk.simulate(tasks=tk.attacked_tasks(clean.trajectories), seed=0, grader=tk.state_grader(), progress=False)
    modes = {f["mode"] for row in attacked.rows for f in row["faults"] if f.get("attack")}
    assert modes == set(tk.ATTACK_MODES)
    report = tk.attack_report(attacked, clean=clean)
    assert report.difference.n_tasks >= 3  # the same scenario ids seen both ways
    # without the replay, a clean run alone has nothing attacked
    with pytest.raises(tk.ConfigError, match="no row was attacked"):
        tk.attack_report(clean)


def test_bad_modes_and_rows_are_named(clean):
    with pytest.raises(tk.ConfigError, match="attack mode.*'timeout'"):
        tk.attacked_tasks(clean.rows, modes=["timeout"])
    with pytest.raises(tk.ConfigError, match="modes is empty"):
        tk.attacked_tasks(clean.rows, modes=[])
    with pytest.raises(tk.ConfigError, match=r"rows\[1\] has no string 'prompt'"):
        tk.attacked_tasks([clean.rows[0], {"steps": []}])


def _goals(rows):
    return {row["prompt"]: (row.get("privileged") or {}).get("goal") for row in rows}


def test_a_simulation_data_replays_with_each_rows_goal_and_its_named_record(clean):
    named = {p: g for p, g in _goals(clean.trajectories).items() if g and any(w.get("record") for w in g["writes"])}
    assert named  # the test can fail: some asks name the record their goal writes
    tasks = tk.attacked_tasks(clean)
    assert {p: g for p, g in _goals(tasks).items() if p in named} == named
    replay = tk.simulate(tasks=tasks, seed=0, grader=tk.state_grader(), progress=False)
    assert {p: g for p, g in _goals(replay.trajectories).items() if p in named} == named
    assert not any("carry no goal" in w for w in replay.warnings)


def test_replaying_written_rows_warns_once_with_the_count(clean):
    # written rows drop privileged: the replay re-derives goals with no record (any record meets them)
    replay = tk.simulate(tasks=tk.attacked_tasks(clean.rows), seed=0, grader=tk.state_grader(), progress=False)
    warned = [w for w in replay.warnings if "carry no goal" in w]
    assert len(warned) == 1
    lost = {p for p, g in _goals(clean.trajectories).items() if g and any(w.get("record") for w in g["writes"])}
    expected = sum(1 for row in clean.rows if row["prompt"] in lost)
    assert warned[0].startswith(f"{expected} tasks= rows carry no goal")
    assert all(
        w.get("record") is None for g in _goals(replay.trajectories).values() if g for w in g["writes"]
    )
    # a run graded otherwise reads no goal: the same replay under the conduct grader says nothing
    conduct = tk.simulate(tasks=tk.attacked_tasks(clean.rows), seed=0, grade=True, progress=False)
    assert not any("carry no goal" in w for w in conduct.warnings)
