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
