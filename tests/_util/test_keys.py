import numpy as np

from toolkit._util.keys import binary_reward, numeric_reward, task_key


def test_task_key_prefers_scenario_then_task_then_prompt():
    assert task_key({"scenario_id": "s", "task_id": 3, "prompt": "p"}) == "s"
    assert task_key({"task_id": 3, "prompt": "p"}) == "3"
    assert task_key({"prompt": "p"}) == "p"


def test_numpy_scalars_count_and_bools_do_not():
    assert binary_reward({"reward": np.int64(1)}) == 1
    assert binary_reward({"reward": np.float64(0.0)}) == 0
    assert numeric_reward({"reward": np.float32(0.5)}) == 0.5
    assert numeric_reward({"reward": True}) is None
    assert numeric_reward({"reward": np.bool_(True)}) is None
    assert numeric_reward({"reward": "1"}) is None
    assert numeric_reward({"reward": float("nan")}) is None


def test_tolerance_and_fallback_field():
    assert binary_reward({"reward": 0.9999999}) == 1
    assert binary_reward({"reward": 0.5}) is None
    assert binary_reward({"qwen_reward": 1}) == 1
