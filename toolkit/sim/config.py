"""``SimulateConfig``: every ``simulate()`` argument resolved and checked once.

:func:`toolkit.simulate` hands its keywords to :meth:`SimulateConfig.build`, which resolves
every alias (``phrasings`` / ``n`` / ``requests_per_situation`` ...), applies the mode's
presets, reads ``spec=`` folders, builds the agent, the writer and the grader, and checks
every value with the message the user sees. The engine then reads typed attributes of the
frozen result; nothing downstream validates a ``simulate()`` argument again. The dashboard
checks its controls through the same :meth:`SimulateConfig.build`.

Mode presets (``MODES``: n phrasings, k repeats, repeat policy, fault rate, unique
situations) follow docs/design/engine.md §2.2.
"""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit._util.datasets import dataset_path
from toolkit._util.validate import check_count, check_share, pick_alias
from toolkit.agents import ModelAgent, SeededAgent, agent_shape, model_agent, resolve_agent, seeded_agent
from toolkit.errors import ConfigError, unknown_name_message
from toolkit.grading import conduct_grader
from toolkit.grading.judge import _judge_identity
from toolkit.rows._read import as_row_list
from toolkit.sim.knobs import RunKnobs
from toolkit.sim.search import make_embedder
from toolkit.situations.model_writer import ModelWriter
from toolkit.world import ToolSpec, WorldOptions, normalize_tools

__all__ = ["SimulateConfig", "MODES", "REPEAT_POLICIES", "SIMULATE_PARAMETERS", "SIMULATE_DEFAULTS"]

#: mode -> (n phrasings, k repeats, repeat policy, fault_rate, unique situations) (docs/design/engine.md §2.2)
MODES = {
    "explore": (1, 1, "none", 0.5, True),
    "sft": (3, 4, "fixed", 0.5, False),
    "rl": (1, 8, "successive", 0.8, False),
    "adaptive": (3, 2, "adaptive", 0.5, False),
}
REPEAT_POLICIES = ("none", "adaptive", "successive", "fixed", "unique")
_UNTIL = {"compute": "compute", "budget_only": "compute", "budget": "compute", "time": "compute", "saturation": "saturation", "first": "saturation",
          "decided": "decided"}
# docs/design/engine.md §3.2: the behaviour gap leads under rl
_REGION_COEFFICIENTS = {"rl": (0.25, 0.25, 0.15, 0.35)}
_DEFAULT_REGION_COEFFICIENTS = (0.35, 0.35, 0.20, 0.10)
# When no hard_share is named: the engine's default difficulty mix (docs/design/engine.md §3.2).
_DEFAULT_HARD_SHARE = 0.40

#: Every keyword simulate() takes, in signature order (the did-you-mean pool for typos).
SIMULATE_PARAMETERS = (
    "agent", "spec", "tools", "system_prompt", "policy", "situations", "traces", "tasks", "runs", "grader", "execute",
    "requests_per_situation", "phrasings", "n", "rollouts_per_request", "repeats", "rollouts_per_prompt", "repeat_policy",
    "unique_situations", "unique", "mode", "fault_rate", "risk", "hard_share", "reproducible", "budget", "time_budget",
    "until", "logprobs", "sampling", "simulator", "user_model", "timeout", "grade", "llm_grade", "output", "overwrite", "advanced",
    "seed", "concurrency", "patience", "avg_turns", "max_turns", "executor", "checkpoint", "on_row", "on_progress",
    "progress", "stop",
)  # fmt: skip
#: simulate()'s default for every keyword (tests/sim/test_config.py checks them against the signature).
SIMULATE_DEFAULTS: dict[str, Any] = {name: None for name in SIMULATE_PARAMETERS} | {
    "runs": 1, "mode": "explore", "reproducible": False, "budget": 1000, "until": "compute", "timeout": 300,
    "grade": False, "llm_grade": False, "overwrite": False, "progress": True,
}  # fmt: skip


@dataclass(frozen=True)
class SimulateConfig:
    """One simulate() call, every value resolved (aliases, presets, defaults) and checked.

    Built by :meth:`build` from simulate()'s keywords; read-only afterwards. Field names are
    the canonical spellings: ``n`` = phrasings per situation (``requests_per_situation``),
    ``k`` = rollouts per phrasing (``repeats``).
    """

    knobs: RunKnobs
    mode: str
    n: int
    k: int
    k_given: bool
    repeat_policy: str
    unique: bool
    fault_rate: float
    fault_rate_named: bool
    hard_share: float
    n_situations: int | None
    runs: int
    budget: int | None
    cap: int
    time_budget: float | None
    until: str
    reproducible: bool
    logprobs: bool | str
    sampling: dict | None
    timeout: float | None
    tools: tuple[ToolSpec, ...]
    system_prompt: str | None
    agent: Any
    agent_shape: str
    max_turns: int
    writer: Any
    writer_model: str
    user_model: Any
    execute: Callable | None
    world_options: WorldOptions
    grader: Callable | None
    grader_name: str | None
    grader_meta: Mapping[str, Any] | None
    grade: bool | str | None
    llm_grade: Any
    mutate_graded: bool
    traces: tuple[dict, ...]
    tasks: Any
    output: Path | None
    overwrite: bool
    checkpoint: Path | None
    executor: cf.Executor | None
    on_row: Callable | None
    on_progress: Callable | None
    progress: bool
    stop_event: Any
    named: frozenset[str]
    advanced_named: frozenset[str]
    warnings: tuple[str, ...] = ()
    offline_defaults: Mapping[str, str] = field(default_factory=dict)

    # ----------------------------------------------------------------- derived
    @property
    def seed(self) -> int:
        return self.knobs.seed

    @property
    def concurrency(self) -> int:
        return self.knobs.concurrency

    @property
    def avg_turns(self) -> int:
        return self.knobs.avg_turns

    @property
    def patience(self) -> Any:
        return self.knobs.patience

    @property
    def agent_is_seeded(self) -> bool:
        return isinstance(self.agent, SeededAgent)

    @property
    def rollout_timeout(self) -> float | None:
        # a seeded agent is in-process and cannot hang; a timeout thread per call would cost
        # 3x its run time (measured: 6 ms -> 17 ms per rollout), so it runs without one
        return None if self.agent_is_seeded else self.timeout

    @property
    def region_coefficients(self) -> tuple[float, float, float, float]:
        return _REGION_COEFFICIENTS.get(self.mode, _DEFAULT_REGION_COEFFICIENTS)

    def make_embedder(self) -> Any:
        return make_embedder(self.knobs.embedder)

    # ----------------------------------------------------------------- building
    @classmethod
    def check(cls, **given: Any) -> SimulateConfig:
        """:meth:`build` from ``given`` and simulate()'s defaults for the rest; how the
        dashboard checks a control's value with the engine's own rules and message."""
        return cls.build(**{**SIMULATE_DEFAULTS, **given})

    @classmethod
    def build(cls, **p: Any) -> SimulateConfig:
        """Resolve and check simulate()'s keywords (every one of :data:`SIMULATE_PARAMETERS`
        must be present; pass simulate()'s defaults for those the caller left out).

        Raises
        ------
        ConfigError
            A value out of range, an unknown name (with the nearest valid one), or
            aliases given different values.
        TypeError
            A callback that is not callable, or an executor that is not an Executor.
        """
        missing = [name for name in SIMULATE_PARAMETERS if name not in p]
        unknown = sorted(set(p) - set(SIMULATE_PARAMETERS))
        if unknown:
            raise TypeError("simulate() got an " + unknown_name_message("keyword argument", unknown[0], SIMULATE_PARAMETERS))
        if missing:
            raise TypeError(f"SimulateConfig.build needs every simulate() keyword; missing {missing}")
        warnings: list[str] = []
        offline_defaults: dict[str, str] = {}
        named = frozenset(k for k, v in p.items() if v is not None and v is not False)
        advanced = p["advanced"]
        if advanced is not None and not isinstance(advanced, Mapping):
            raise ConfigError(f"advanced must be a dict of knob values; got {type(advanced).__name__}")
        advanced = dict(advanced or {})
        for name in ("seed", "concurrency", "patience", "avg_turns"):
            if p[name] is not None:
                if name in advanced and repr(advanced[name]) != repr(p[name]):
                    raise ConfigError(f"{name}={p[name]!r} and advanced[{name!r}]={advanced[name]!r} disagree; pass one")
                advanced[name] = p[name]
        knobs = RunKnobs.from_advanced(advanced)
        # mode and its presets
        if p["mode"] not in MODES:
            raise ConfigError(unknown_name_message("mode", str(p["mode"]), MODES))
        mode = p["mode"]
        preset_n, preset_k, preset_policy, preset_fault, preset_unique = MODES[mode]
        n_name, n_given = pick_alias([("requests_per_situation", p["requests_per_situation"]), ("phrasings", p["phrasings"]), ("n", p["n"])])
        k_name, k_given = pick_alias([("rollouts_per_request", p["rollouts_per_request"]), ("repeats", p["repeats"]), ("rollouts_per_prompt", p["rollouts_per_prompt"])])
        n = check_count(n_name, n_given) if n_given is not None else preset_n
        k = check_count(k_name, k_given) if k_given is not None else preset_k
        if mode == "adaptive" and k_given is None:
            clock = p["time_budget"] or 600.0
            k = 3 if clock >= 90 or p["until"] in ("saturation", "first") else 2
        policy_given = p["repeat_policy"]
        if policy_given is not None and policy_given not in REPEAT_POLICIES:
            raise ConfigError(unknown_name_message("repeat_policy", str(policy_given), REPEAT_POLICIES))
        _, unique_given = pick_alias([("unique_situations", p["unique_situations"]), ("unique", p["unique"])])
        repeat_policy = policy_given or preset_policy
        unique = bool(unique_given) if unique_given is not None else (preset_unique and policy_given in (None, "none", "unique"))
        if repeat_policy == "unique":
            repeat_policy, unique = "none", True
        if repeat_policy == "none" and k_given is None:
            k = 1
        if repeat_policy == "none" and k > 1:
            if policy_given is not None:
                raise ConfigError(
                    f"repeat_policy={policy_given!r} runs one rollout per prompt but {k_name}={k} asks for {k}; "
                    f"drop one, or pass repeat_policy='fixed' for {k} rollouts each"
                )
            # A named k under a mode whose preset runs one rollout per prompt (explore): the
            # caller asked for k rollouts per prompt, so every prompt gets them.
            # report()["repeat_policy"] says "fixed".
            repeat_policy = "fixed"
        fault_name, fault = pick_alias([("fault_rate", p["fault_rate"]), ("risk", p["risk"])])
        fault_rate = check_share(fault_name, fault) if fault is not None else preset_fault
        hard_share = check_share("hard_share", p["hard_share"]) if p["hard_share"] is not None else _DEFAULT_HARD_SHARE
        situations = p["situations"]
        if situations is not None and (isinstance(situations, bool) or not isinstance(situations, int) or situations < 1):
            raise ConfigError(f"situations must be an integer >= 1 (bools are refused); got {situations!r}")
        output, checkpoint = _checked_output(p["output"], p["overwrite"], p["checkpoint"])
        runs = check_count("runs", p["runs"])
        if runs > 1 and p["checkpoint"] is not None:
            raise ConfigError("runs > 1 cannot resume from checkpoint=; run each eval run with its own checkpoint")
        budget = check_count("budget", p["budget"]) if p["budget"] is not None else None
        tb = p["time_budget"]
        if tb is not None and (isinstance(tb, bool) or not isinstance(tb, (int, float))):
            raise ConfigError(f"time_budget must be seconds (a number) or None; got {tb!r}")
        time_budget = float(tb) if tb and tb > 0 else None
        if p["until"] not in _UNTIL:
            raise ConfigError(unknown_name_message("until", str(p["until"]), _UNTIL))
        reproducible = bool(p["reproducible"]) or knobs.concurrency == 1
        if p["reproducible"] and time_budget:
            warnings.append("reproducible=True with a time_budget: which rows land before the clock depends on speed; drop time_budget for identical reruns.")
        if p["logprobs"] not in (None, False, True, "tokens"):
            raise ConfigError(f"logprobs must be None, True, False or 'tokens'; got {p['logprobs']!r}")
        if p["sampling"] is not None and not isinstance(p["sampling"], Mapping):
            raise ConfigError(f"sampling must be a dict like {{'temperature': 0.7}}; got {type(p['sampling']).__name__}")
        timeout = p["timeout"]
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
            raise ConfigError(f"timeout must be positive seconds or None; got {timeout!r}")
        for name in ("grader", "on_row", "on_progress", "execute"):
            if p[name] is not None and not callable(p[name]):
                raise TypeError(f"{name}= must be callable; got {type(p[name]).__name__}")
        if p["executor"] is not None and not isinstance(p["executor"], cf.Executor):
            raise TypeError(f"executor= must be a concurrent.futures.Executor; got {type(p['executor']).__name__}")
        if p["stop"] is not None and not callable(getattr(p["stop"], "is_set", None)):
            raise TypeError("stop= must be a threading.Event (anything with is_set())")
        # tools, policy, agent
        _, system = pick_alias([("system_prompt", p["system_prompt"]), ("policy", p["policy"])])
        tools = p["tools"]
        if p["spec"] is not None:
            tools, system = _read_spec(p["spec"], tools, system)
        agent = p["agent"]
        if tools is None and isinstance(agent, SeededAgent):
            tools = agent.tools
        if tools is None and agent is None:
            tools = dataset_path("tools/airline_support.json")
            if system is None:
                system = dataset_path("tools/airline_support_policy.md").read_text(encoding="utf-8")
            offline_defaults["tools"] = "the shipped airline_support example tool set and policy (no tools= given)"
        tool_specs = tuple(normalize_tools(tools))
        if agent is None:
            agent = seeded_agent(list(tool_specs), seed=knobs.seed)
            offline_defaults["agent"] = "seeded offline agent (tk.seeded_agent); to test a model, pass agent= a model spec such as 'openai:gpt-4o-mini'"
        elif isinstance(agent, str):
            agent = resolve_agent(agent, timeout=timeout or 300)
        elif not callable(agent):
            raise TypeError(f"agent must be a callable, a SeededAgent or a model spec string; got {type(agent).__name__}")
        else:
            resolve_agent(agent)
        shape = agent_shape(agent)
        max_turns = p["max_turns"]
        if max_turns is not None:
            check_count("max_turns", max_turns)
        # docs/design/engine.md §2.1: clamp((ctx - 2048 - min(1536, 64 n_tools)) // 128, 8, 40), ctx 4096
        max_turns = max_turns or max(8, min(40, (4096 - 2048 - min(1536, 64 * len(tool_specs))) // 128))
        # writer and user
        sim = p["simulator"]
        if sim in (None, False, "hosted", "template"):
            writer, writer_model = None, "template"
            if sim is None or sim == "hosted":
                offline_defaults["simulator"] = "template writer (offline); for prompts a model phrases, pass simulator= a model spec"
        elif isinstance(sim, (str, ModelAgent)):
            # a spec string, or tk.model_agent(spec, ...) to set the writer's retries, timeout
            # or endpoint; the reply budget is a one-card wave's (docs/design/engine.md §2.6)
            chat = model_agent(sim) if isinstance(sim, str) else sim
            reply_budget = max(knobs.wave_tokens_floor, min(knobs.wave_tokens_cap, knobs.tokens_per_card + knobs.wave_tokens_base))
            # a str: it is stamped on every row (a ModelSpec object is not JSON; issue 21, row 6)
            writer_model = sim if isinstance(sim, str) else str(chat.spec or chat.model)
            writer = ModelWriter(chat, writer_model, temperature=knobs.writer_temperature, max_tokens=reply_budget)
        elif callable(sim):
            writer, writer_model = sim, getattr(sim, "__name__", "callable")
        else:
            raise ConfigError(
                f"simulator must be False (template writer), a model spec string, tk.model_agent(...) or a callable "
                f"simulator(situation, n, seed) -> list[str]; got {type(sim).__name__}"
            )
        user_model = p["user_model"]
        if user_model is not None and not (isinstance(user_model, str) or callable(user_model)):
            raise ConfigError(f"user_model must be a model spec string or a chat callable; got {type(user_model).__name__}")
        if user_model is None and shape == "chat":
            offline_defaults["user_model"] = "template user (offline); for a user a model plays, pass user_model= a model spec (the agent's own, say)"
        world_options = WorldOptions.from_dict(dict(knobs.world)) if isinstance(knobs.world, Mapping) else knobs.world
        # grading
        grade = p["grade"]
        grader = p["grader"]
        grader_name = getattr(grader, "__name__", "grader") if grader is not None else None
        if grade not in (False, True, "conduct", None):
            raise ConfigError(f"grade must be False, True or 'conduct'; got {grade!r}")
        if grade:
            if grader is not None:
                raise ConfigError("grade=True and grader= both given; pass grader=tk.conduct_grader() alongside your grader by composing them, or one of the two")
            grader, grader_name = conduct_grader(system), "conduct"
        llm_grade = p["llm_grade"]
        if llm_grade is True:
            raise ConfigError("llm_grade=True needs a judge model: pass llm_grade='openai:<model>' (or a judge callable); offline, grade after with data.grade(judge=...)")
        if _UNTIL[p["until"]] == "decided":
            if knobs.decide is None:
                raise ConfigError("until='decided' needs the question: advanced={'decide': {'threshold': 0.7}} "
                                  "(stop once pass@1 is known to be above or below 0.7)")
            if grader is None:
                raise ConfigError("until='decided' decides about pass@1, so rows must be graded: pass grader= or grade=True")
        mgf = knobs.mutate_graded_failures
        if mgf is True and grader is None:
            raise ConfigError("advanced['mutate_graded_failures']=True needs grader= (there are no graded failures to mutate)")
        return cls(
            knobs=knobs, mode=mode, n=n, k=k, k_given=k_given is not None, repeat_policy=repeat_policy, unique=unique,
            fault_rate=fault_rate, fault_rate_named=fault is not None, hard_share=hard_share, n_situations=situations,
            runs=runs, budget=budget, cap=budget if budget is not None else knobs.hard_row_cap, time_budget=time_budget,
            until=_UNTIL[p["until"]], reproducible=reproducible, logprobs=p["logprobs"] or False,
            sampling=dict(p["sampling"]) if p["sampling"] else None, timeout=timeout, tools=tool_specs,
            system_prompt=system, agent=agent, agent_shape=shape, max_turns=max_turns, writer=writer,
            writer_model=writer_model, user_model=user_model, execute=p["execute"], world_options=world_options,
            grader=grader, grader_name=grader_name, grade=grade, llm_grade=llm_grade,
            grader_meta=_judge_identity(grader, grader_name, None, None, None, None, None)[1] if grader is not None else None,
            mutate_graded=(grader is not None) if mgf is None else mgf, traces=tuple(_load_rows(p["traces"], "traces")),
            tasks=p["tasks"], output=output, overwrite=bool(p["overwrite"]), checkpoint=checkpoint, executor=p["executor"],
            on_row=p["on_row"], on_progress=p["on_progress"], progress=bool(p["progress"]), stop_event=p["stop"],
            named=named, advanced_named=frozenset(advanced), warnings=tuple(warnings), offline_defaults=offline_defaults,
        )  # fmt: skip


def _checked_output(output: Any, overwrite: Any, checkpoint: Any) -> tuple[Path | None, Path | None]:
    """``(output, checkpoint)`` as paths; an ``output=`` file that already exists is refused
    unless ``overwrite=True`` or the call resumes a checkpoint.

    Why refuse: ``output=`` is rewritten from the first row, so a rerun of the same cell
    silently replaced the rows of the run before it. Resuming loses nothing: an ``output=``
    that is the ``checkpoint=`` path is appended to, and a separate one is rebuilt from the
    existing checkpoint's rows plus the new ones.
    """
    if not isinstance(overwrite, bool):
        raise ConfigError(f"overwrite must be True or False; got {overwrite!r}")
    output_path = Path(output) if output is not None else None
    checkpoint_path = Path(checkpoint) if checkpoint is not None else None
    if output_path is None or overwrite or not output_path.exists():
        return output_path, checkpoint_path
    if checkpoint_path is not None and checkpoint_path.exists():
        return output_path, checkpoint_path
    raise ConfigError(
        f"output={str(output)!r} already exists and would be rewritten; pass overwrite=True to replace it, "
        f"another output= path, or checkpoint={str(output)!r} (the same path) to resume that run"
    )


def _read_spec(spec: Any, tools: Any, system: Any) -> tuple[Any, Any]:
    if isinstance(spec, Mapping):
        return (tools if tools is not None else spec.get("tools")), (system if system is not None else spec.get("system_prompt") or spec.get("policy"))
    folder = Path(spec)
    if not folder.is_dir():
        raise ConfigError(f"spec={spec!r} must be a folder holding tools.json and system_prompt.md (or policy.md), or a dict")
    if tools is None:
        tools = folder / "tools.json"
    if system is None:
        for name in ("system_prompt.md", "policy.md", "system_prompt.txt"):
            if (folder / name).exists():
                system = (folder / name).read_text(encoding="utf-8")
                break
    return tools, system


def _load_rows(value: Any, name: str) -> list[dict]:
    if value is None:
        return []
    try:
        return [dict(r) for r in as_row_list(value)]
    except TypeError as error:
        raise TypeError(f"{name}=: {error}") from None
