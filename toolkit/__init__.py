"""toolkit: test tool-using LLM agents by simulation, and decide with honest statistics
whether a change helped.

``import toolkit as tk`` gives the names a notebook reader calls (``tk.simulate``,
``tk.pass_at``, ``tk.delta_report`` ...) and one sub-namespace per concept holding the rest,
lower layers first (``docs/design/layout.md`` draws the tree and the import rules):

==================  ======================================================================
``tk.errors``       the ``ToolkitError`` tree (the common classes are also top-level)
``tk.rows``         the row format: schema, scrub, views, read and write, tau-bench reader
``tk.stats``        pass@k, bootstrap and sign-flip tests, comparisons, power, studies
``tk.world``        tools, the sandbox ``World``, fault modes, the rollout context
``tk.agents``       the agent shapes, the seeded offline policy, model backends
``tk.situations``   axes, tiers, covering arrays, the situation grid, the writers
``tk.grading``      the conduct grader, model judges, judge trust, the hack scan
``tk.logprobs``     log-probabilities, calibration and KL to a reference model
``tk.sim``          ``simulate()`` and its parts: config, knobs, search, rollout, user
``tk.training``     SFT / DPO / GRPO cuts, reward-model sets, publish gate
``tk.plots``        figures for papers (matplotlib; never ``plt.show()``)
``tk.whatif``       the what-if fork (replay traces under a change, then decide)
``tk.live``         the live dashboard (ipywidgets)
==================  ======================================================================

Everything loads on first use (PEP 562 module ``__getattr__``), so ``import toolkit`` costs
only this file: matplotlib, ipywidgets and pydantic load when a figure, the dashboard or the
what-if fork is first touched (``benchmarks/bench_import.py`` measures it).
"""

from __future__ import annotations

import importlib as _importlib
from typing import Any as _Any

from toolkit._version import __version__
from toolkit.errors import ConfigError, KnobError, RowError, SchemaError, ToolkitError

#: The sub-namespaces, lower layers first.
SUBPACKAGES = ("errors", "rows", "stats", "world", "agents", "situations", "grading", "logprobs", "sim", "training",
               "plots", "whatif", "live")  # fmt: skip

# name -> the sub-namespace it comes from. What a notebook reader calls; everything else is
# reached through its sub-namespace (tk.stats.BootstrapResult, tk.world.WorldOptions, ...).
_LAZY = {
    # errors beyond the five imported above: the ones a run raises at a user's own code
    "AgentReplyError": "errors",
    # run
    "simulate": "sim", "load": "sim", "SimulationData": "sim", "run_rollout": "sim", "RunKnobs": "sim",
    "knob_table_markdown": "sim", "exact_kl": "sim", "run_progress": "sim", "ENDED_BY": "sim", "LOST_REASONS": "sim",
    # world, agents, situations
    "World": "world", "WorldOptions": "world", "FAULT_MODES": "world", "ATTACK_MODES": "world", "current_rollout": "world",
    "seeded_agent": "agents", "model_agent": "agents", "chat_agent": "agents", "message_agent": "agents",
    "situation_grid": "situations", "write_prompts": "situations", "covering_array": "situations", "coverage": "situations",
    "coverage_curve": "situations", "random_design_curve": "situations", "extend_array": "situations",
    # rows
    "read_rows": "rows", "save_rows": "rows", "RowWriter": "rows", "validate_row": "rows", "to_pandas": "rows",
    "read_tau_bench": "rows", "read_inspect_log": "rows", "read_tau2": "rows",
    "read_openinference": "rows", "read_langfuse": "rows",
    "to_inspect_dataset": "situations", "attacked_tasks": "situations",
    # statistics
    "attack_report": "stats", "pass_at": "stats", "bootstrap_ci": "stats", "clustered_mean": "stats", "sign_flip_test": "stats", "wilson": "stats", "compare_runs": "stats",
    "delta_report": "stats", "eval_variance": "stats", "group_signal": "stats", "holdout_size": "stats",
    "detectable_effect": "stats", "judge_agreement": "stats", "judge_corrected": "stats", "interval_coverage_study": "stats",
    "paired_power_study": "stats", "pass_at_k_bias_study": "stats",
    # grading and log-probabilities
    "grade": "grading", "conduct_grader": "grading", "state_grader": "grading", "state_grade": "grading", "judge_trust": "grading", "model_judge": "grading",
    "hack_scan": "grading", "refusal_report": "grading", "trace_flag_report": "grading",
    "calibrate": "logprobs", "logprob_report": "logprobs", "mean_kl": "logprobs", "reference_logprobs": "logprobs",
    "staleness_report": "logprobs",
    # training cuts
    "training_rows": "training", "select_for_sft": "training", "select_for_rl": "training",
    "build_preference_pairs": "training", "export_preference": "training", "reward_model_set": "training",
    "publish_gate": "training", "decontaminate": "training",
    # notebooks and the shipped examples
    "Dashboard": "live", "dataset_path": "_util.datasets", "list_datasets": "_util.datasets",
}  # fmt: skip

__all__ = sorted(
    [*_LAZY, *SUBPACKAGES, "ConfigError", "KnobError", "RowError", "SchemaError", "ToolkitError", "__version__"]
)


def __getattr__(name: str) -> _Any:
    if name in SUBPACKAGES:
        value = _importlib.import_module(f"toolkit.{name}")
    elif name in _LAZY:
        value = getattr(_importlib.import_module(f"toolkit.{_LAZY[name]}"), name)
    else:
        raise AttributeError(_where_is(name))
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def _where_is(name: str) -> str:
    message = f"module 'toolkit' has no attribute {name!r}"
    if name.startswith("_"):
        return message  # dunder probes (IPython's _repr_*_ ...) must stay cheap
    for package in SUBPACKAGES:
        module = _importlib.import_module(f"toolkit.{package}")
        if name in getattr(module, "__all__", ()):
            return f"{message}; it is tk.{package}.{name}"
    return message
