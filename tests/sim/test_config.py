"""SimulateConfig: simulate()'s keywords resolved once, and the typed job a rollout runs from.

References: simulate()'s own signature (for the defaults table) and the fault plans the
engine hands its executor, read off the submitted RolloutJobs.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import inspect

import pytest

import toolkit as tk
from toolkit.sim import SIMULATE_DEFAULTS, SIMULATE_PARAMETERS, RolloutJob, SimulateConfig


class _RecordingExecutor(cf.ThreadPoolExecutor):
    """Runs jobs on one thread and keeps every RolloutJob it was given."""

    def __init__(self) -> None:
        super().__init__(max_workers=1)
        self.jobs: list[RolloutJob] = []

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[override]
        self.jobs.extend(a for a in args if isinstance(a, RolloutJob))
        return super().submit(fn, *args, **kwargs)


def test_defaults_table_is_simulates_signature() -> None:
    signature = inspect.signature(tk.simulate).parameters
    assert tuple(name for name in signature if name != "unknown") == SIMULATE_PARAMETERS
    assert {name: p.default for name, p in signature.items() if name != "unknown"} == SIMULATE_DEFAULTS


def test_aliases_and_presets_resolve_once_into_a_frozen_config() -> None:
    config = SimulateConfig.check(mode="sft", phrasings=2, repeats=3, risk=0.25)
    assert (config.n, config.k, config.fault_rate, config.repeat_policy) == (2, 3, 0.25, "fixed")
    preset = SimulateConfig.check(mode="rl")
    assert (preset.n, preset.k, preset.fault_rate, preset.repeat_policy) == (1, 8, 0.8, "successive")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.fault_rate = 0.9  # type: ignore[misc]
    with pytest.raises(tk.ConfigError, match="aliases disagree: fault_rate=0.2, risk=0.3"):
        SimulateConfig.check(fault_rate=0.2, risk=0.3)


def test_errors_name_the_spelling_the_user_typed() -> None:
    with pytest.raises(tk.ConfigError, match=r"^repeats must be an integer >= 1; got 0$"):
        tk.simulate(repeats=0, budget=1, progress=False)
    # every alias of one parameter is named as typed, never the canonical spelling
    for spelling in ("rollouts_per_request", "rollouts_per_prompt", "requests_per_situation", "phrasings", "n"):
        with pytest.raises(tk.ConfigError, match=rf"^{spelling} must be an integer >= 1; got 0$"):
            tk.simulate(**{spelling: 0}, budget=1, progress=False)
    with pytest.raises(tk.ConfigError, match=r"^risk must be a number in \[0, 1\]; got 1.5$"):
        tk.simulate(risk=1.5, budget=1, progress=False)


def test_unknown_keywords_get_the_nearest_name() -> None:
    with pytest.raises(TypeError, match="did you mean 'fault_rate'"):
        tk.simulate(fault_rat=0.5)


def test_a_rollout_job_carries_a_decided_fault_plan_and_no_fault_rate() -> None:
    assert not any("rate" in f.name for f in dataclasses.fields(RolloutJob))
    planned = {}
    for rate in (0.0, 1.0):
        executor = _RecordingExecutor()
        with executor:
            tk.simulate(budget=40, seed=5, fault_rate=rate, executor=executor, progress=False, reproducible=True)
        faulted = [j for j in executor.jobs if j.situation is not None and j.situation.dimensions["tool_condition"] != "success"]
        assert len(executor.jobs) == 40 and faulted
        planned[rate] = [bool(j.fault_plan) for j in faulted]
    assert not any(planned[0.0])  # fault_rate 0 keeps no fault
    assert all(planned[1.0])  # fault_rate 1 keeps every faulted situation's fault
