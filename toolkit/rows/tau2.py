"""Read tau2-bench results as toolkit rows, so tau2 users get a noise floor between two runs
(``tk.compare_runs`` / ``tk.delta_report``) and pass^k with intervals on the files they have.

The format is tau2-bench's own data model (sierra-research/tau2-bench at commit
``a2c024725189473d2d7cea3a5cfdbcc67478e41f``): ``Results`` and ``SimulationRun`` in
``src/tau2/data_model/simulation.py``, ``RewardInfo`` / ``RewardType`` in the same file and
``src/tau2/data_model/tasks.py``, messages and tool calls in ``src/tau2/data_model/message.py``
(docs/design/readers.md restates it). A results file is ``Results.model_dump_json()``::

    {"timestamp", "info": {"git_commit", "num_trials", "seed", "agent_info": {"implementation",
     "llm"}, "user_info": {...}, "environment_info": {"domain_name", "policy"}},
     "tasks": [Task], "simulations": [SimulationRun]}

or, in tau2's "dir" format, that object without ``simulations`` in ``results.json`` and one
``SimulationRun`` per file in a sibling ``simulations/`` directory; both are read. A directory
is "dir"; a file is read with its own ``simulations`` when it has any, and from the
``simulations/`` directory beside it only when it has none. tau2's ``Results._detect_format``
prefers the directory whenever one is beside the file; we do not, because a directory beside
a file that states its own simulations is as likely another run saved in the same folder.
When both hold simulations a warning names the file and the directory and which was read.

Mapping to rows v1, one row per simulation, and the choices made:

- ``scenario_id = f"tau2-{task_id}"`` (cannot collide with our own ids; two runs of the same
  task set pair by it), ``task_id`` as given, ``rollout_index = trial`` (trials become ``k``);
  a simulation without a trial number gets the smallest number that no simulation of its task
  states and none before it took. ``rollout_id = f"tau2-{task_id}-{trial}"``; tau2's
  simulation id is in lineage. Two simulations of one (task, trial) would share that id and
  count twice in pass^k, so the second is malformed (named with the first's position).
- ``reward`` is binary the way tau2's ``metrics/agent_metrics.py:is_successful`` counts a pass:
  within 1e-6 of 1 is 1.0, else 0.0; ``reward_info.reward`` as written is ``raw_reward``; a
  reward that is not a finite number (JSON's NaN / Infinity included) is malformed.
  ``reward_source`` states this. No ``reward_info`` gives ``reward = None`` with
  ``judge_status = "missing_reward"``. A simulation that ended with
  ``termination_reason = "infrastructure_error"`` (it never really ran; tau2 leaves it out of
  its metrics) is kept with ``reward = None`` and ``judge_status = "error"``, counted in one
  warning.
- ``markers``: each component of ``reward_info.reward_breakdown`` (``DB``, ``COMMUNICATE``,
  ``ENV_ASSERTION``, ``NL_ASSERTION``, ``ACTION``: tau2's reward is their product over the
  task's ``reward_basis``) as ``markers["tau2_<component lowercased>"]``, and, when the file
  has ``action_checks``, the share of expected actions the agent matched as
  ``markers["tau2_action_match_share"]``.
- ``steps`` from ``messages``: each assistant tool call ``{id, name, arguments}`` is
  ``{"tool", "arguments", "call_id"}``, paired with its ``ToolMessage`` by id into ``result``
  (a JSON object or array decoded, other text kept; ``error: true`` kept as ``tool_error``);
  a ``MultiToolMessage`` is read as its tool messages in order. User turns after the first are
  ``{"user": ...}`` steps; a user's own tool calls (tau2's telecom user acts on the phone) ride
  on the user step as ``user_tool_calls`` with their results, since they are not agent
  actions. ``prompt`` = the first user message; assistant messages before it (the greeting)
  are the ``prefix``. ``final_text`` = the last assistant text.
- ``lineage``: ``source: "tau2-bench"``, ``eval_run`` (the run's ``timestamp``), ``model``
  (``agent_info.llm``), ``user_model``, ``agent_implementation``, ``domain``,
  ``tau2_git_commit``, ``tau2_simulation_id``, ``seed``, ``results_file``, and the agent's
  policy (the system prompt: ``SimulationRun.policy`` when set, else
  ``environment_info.policy``) as ``system_prompt_sha`` / ``_head`` / ``_chars``.
  ``ended_by`` = ``termination_reason``; ``agent_cost`` / ``user_cost`` when present;
  ``usage`` sums the assistant messages' ``prompt_tokens`` / ``completion_tokens``.
- The task (its ``evaluation_criteria``: the expected actions, assertions and strings to
  communicate, and the user's scenario) and the ``reward_info`` checks (which echo the
  expected actions) are the answer key, so they go under ``privileged`` as ``tau2_task`` and
  ``tau2_reward_info``: in memory, removed by ``scrub`` on every write.
"""

from __future__ import annotations

import copy
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from toolkit._util.hashing import sha256_hex
from toolkit.errors import RowError
from toolkit.rows._io import MAX_NESTING, deeper_than, json_loads
from toolkit.rows._read import Rows
from toolkit.rows._schema import _Privileged, validate_row
from toolkit.rows._traces import _number
from toolkit.rows._views import messages_from_steps
from toolkit.rows.tau_bench import _CallPairing, _decode_result

__all__ = ["read_tau2"]

# tau2's own pass test (src/tau2/metrics/agent_metrics.py, is_successful): |reward - 1| <= 1e-6.
_PASS_TOLERANCE = 1e-6
# The row schema's lineage head length (docs/design/engine.md §8).
_HEAD_CHARS = 120
_MAPPING = "tau2-bench is_successful: reward_info.reward within 1e-6 of 1 -> 1.0, else 0.0"
_INFRA = "infrastructure_error"
# tau2 stores the dir format's simulations here (simulation.py, SIMULATIONS_DIR).
_SIMULATIONS_DIR = "simulations"


def _load_json(path: Path, what: str) -> Any:
    try:
        return json_loads(path.read_text(encoding="utf-8-sig"))
    except ValueError as error:
        raise RowError(f"{path}: not valid JSON ({error}); expected {what}") from None


def _load(path: Path) -> tuple[Path, dict[str, Any], list[tuple[str, Any]]]:
    """(metadata file, metadata, [(where, simulation)]) in either of tau2's formats."""
    sims_dir = path / _SIMULATIONS_DIR if path.is_dir() else path.parent / _SIMULATIONS_DIR
    meta_path = path / "results.json" if path.is_dir() else path
    if not meta_path.exists():
        raise FileNotFoundError(f"read_tau2: no such file: {meta_path}")
    meta = _load_json(meta_path, "a tau2-bench Results object")
    if not isinstance(meta, Mapping):
        raise RowError(f"{meta_path}: expected a tau2-bench Results object, got {type(meta).__name__}")
    for name in ("info", "tasks"):
        if name not in meta:
            raise RowError(f"{meta_path}.{name}: required tau2-bench Results field is missing")
    listed = meta.get("simulations")
    if listed is not None and not isinstance(listed, list):
        raise RowError(f"{meta_path.name}.simulations: expected a list of tau2-bench simulations, got {type(listed).__name__}")
    files = sorted(sims_dir.glob("*.json")) if sims_dir.is_dir() else []
    inline = [(f"{meta_path.name}.simulations[{i}]", s) for i, s in enumerate(listed or [])]
    # A directory given is tau2's "dir" format by request: its simulations/ is read. A file is
    # read with its own simulations when it has any: tau2's loader would take a simulations/
    # directory beside it instead, but that directory is as likely another run saved in the
    # same folder (a file stating tasks 1 and 2 read back as the neighbour's task 99).
    from_dir = sims_dir.is_dir() and (not inline or (path.is_dir() and bool(files)))
    if inline and files:
        read, other = (sims_dir, meta_path.name) if from_dir else (meta_path.name, sims_dir)
        hint = f"pass {meta_path} to read the file's" if from_dir else f"pass the directory {path.parent} to read the directory's"
        warnings.warn(
            f"read_tau2: both {meta_path.name} ({len(inline)} simulation(s) of its own) and {sims_dir} "
            f"({len(files)} file(s)) hold simulations; read {read}'s and not {other}'s ({hint})",
            UserWarning,
            stacklevel=3,
        )
    if from_dir:
        return meta_path, dict(meta), [(f"{_SIMULATIONS_DIR}/{f.name}", _load_json(f, "a tau2-bench SimulationRun")) for f in files]
    if listed is None:
        raise RowError(f"{meta_path.name}.simulations: expected a list of tau2-bench simulations")
    return meta_path, dict(meta), inline


def _explicit_trials(sims: list[tuple[str, Any]]) -> dict[str, set[int]]:
    """The trial numbers each task's simulations state, so a simulation without one takes a
    number no other simulation of its task states (else one without a trial before one with
    trial 0 would both be trial 0 and share a rollout_id)."""
    taken: dict[str, set[int]] = {}
    for _, sim in sims:
        if isinstance(sim, Mapping) and isinstance(sim.get("trial"), int) and not isinstance(sim.get("trial"), bool):
            taken.setdefault(str(sim.get("task_id")), set()).add(sim["trial"])
    return taken


def _tool_step(call: Any, where: str) -> dict[str, Any]:
    if not isinstance(call, Mapping) or not isinstance(call.get("name"), str) or not call["name"]:
        raise RowError(f"{where}.name: expected a tool name")
    arguments = call.get("arguments")
    if not isinstance(arguments, Mapping):
        raise RowError(f"{where}.arguments: expected an object, got {type(arguments).__name__}")
    step: dict[str, Any] = {"tool": call["name"], "arguments": copy.deepcopy(dict(arguments))}
    if call.get("id"):
        step["call_id"] = str(call["id"])
    return step


def _flatten(messages: list[Any], where: str) -> list[tuple[str, Mapping[str, Any]]]:
    out: list[tuple[str, Mapping[str, Any]]] = []
    for index, message in enumerate(messages):
        at = f"{where}.messages[{index}]"
        if not isinstance(message, Mapping) or "role" not in message:
            raise RowError(f"{at}: expected a message object with a role")
        if message.get("role") == "tool" and isinstance(message.get("tool_messages"), list):
            out.extend((f"{at}.tool_messages[{j}]", m) for j, m in enumerate(message["tool_messages"]))
        else:
            out.append((at, message))
    return out


def _conversation(messages: list[Any], where: str) -> dict[str, Any]:
    flat = _flatten(messages, where)
    prefix: list[dict[str, Any]] = []
    prompt = None
    position = len(flat)
    for position, (_, message) in enumerate(flat):
        if message.get("role") == "user":
            prompt = message.get("content") or ""
            break
        if message.get("role") == "assistant":
            prefix.append({"role": "assistant", "content": message.get("content") or ""})
    if prompt is None:
        raise RowError(f"{where}.messages: no user message, so the conversation has no prompt")
    steps: list[dict[str, Any]] = []
    agent = _CallPairing()
    user_calls: dict[str, dict[str, Any]] = {}
    usage = {"input_tokens": 0, "output_tokens": 0}
    counted = False
    final_text = ""
    first_user_calls = flat[position][1].get("tool_calls") or []
    first_holder: dict[str, Any] = {"user": prompt}
    for number, call in enumerate(first_user_calls):
        step = _tool_step(call, f"{flat[position][0]}.tool_calls[{number}]")
        first_holder.setdefault("user_tool_calls", []).append(step)
        user_calls[step.get("call_id", "")] = step
    for at, message in flat[position + 1 :]:
        role = message.get("role")
        content = message.get("content")
        if role == "user":
            step = {"user": content or ""}
            for number, call in enumerate(message.get("tool_calls") or []):
                made = _tool_step(call, f"{at}.tool_calls[{number}]")
                step.setdefault("user_tool_calls", []).append(made)
                user_calls[made.get("call_id", "")] = made
            steps.append(step)
        elif role == "assistant":
            calls = message.get("tool_calls") or []
            for number, call in enumerate(calls):
                made = _tool_step(call, f"{at}.tool_calls[{number}]")
                if number == 0 and content:
                    made["text"] = content
                steps.append(made)
                agent.called(made)
            if not calls:
                steps.append({"text": content or ""})
            if content:
                final_text = content
            spent = message.get("usage")
            if isinstance(spent, Mapping):
                for key, name in (("prompt_tokens", "input_tokens"), ("completion_tokens", "output_tokens")):
                    if _number(spent.get(key)):
                        usage[name] += int(spent[key])
                        counted = True
        elif role == "tool":
            if message.get("requestor") == "user":
                made = user_calls.get(str(message.get("id") or ""))
                if made is None:
                    raise RowError(f"{at}.id: a user tool result with no user tool call to pair")
            else:
                made = agent.answered(message.get("id") or None, None, steps)
            made["result"] = _decode_result(content if content is not None else "")
            if message.get("error") is True:
                made["tool_error"] = True
        # a system message carries no agent action
    out = {"prompt": prompt, "prefix": prefix, "steps": steps, "final_text": final_text, "usage": usage if counted else None}
    if "user_tool_calls" in first_holder:
        out["prompt_user_tool_calls"] = first_holder["user_tool_calls"]
    return out


def _markers(reward_info: Mapping[str, Any]) -> dict[str, float | None]:
    markers: dict[str, float | None] = {}
    breakdown = reward_info.get("reward_breakdown")
    if isinstance(breakdown, Mapping):
        for name, value in breakdown.items():
            markers[f"tau2_{str(name).lower()}"] = float(value) if _number(value) else None
    checks = reward_info.get("action_checks")
    if isinstance(checks, list) and checks:
        matched = sum(1 for c in checks if isinstance(c, Mapping) and c.get("action_match") is True)
        markers["tau2_action_match_share"] = matched / len(checks)
    return markers


def _row(
    sim: Any, where: str, meta: Mapping[str, Any], tasks: Mapping[str, Any], taken: dict[str, set[int]], file_name: str
) -> dict[str, Any]:
    if not isinstance(sim, Mapping):
        raise RowError(f"{where}: expected a tau2-bench SimulationRun object, got {type(sim).__name__}")
    if deeper_than(sim, MAX_NESTING):
        raise RowError(f"{where}: the simulation nests deeper than {MAX_NESTING} levels")
    for name in ("id", "task_id"):
        if name not in sim:
            raise RowError(f"{where}.{name}: required tau2-bench SimulationRun field is missing")
    task_id = sim["task_id"]
    if isinstance(task_id, bool) or not isinstance(task_id, (int, str)):
        raise RowError(f"{where}.task_id: expected a string or integer, got {type(task_id).__name__}")
    if deeper_than(tasks.get(str(task_id)), MAX_NESTING):
        raise RowError(f"{where}: its task {task_id!r} nests deeper than {MAX_NESTING} levels")
    trial = sim.get("trial")
    if trial is not None and (isinstance(trial, bool) or not isinstance(trial, int) or trial < 0):
        raise RowError(f"{where}.trial: expected an integer >= 0, got {trial!r}")
    messages = sim.get("messages")
    if not isinstance(messages, list):
        raise RowError(
            f"{where}.messages: expected a list of messages, got {type(messages).__name__} "
            "(a full-duplex voice run stores ticks; only half-duplex text runs are read)"
        )
    talk = _conversation(messages, where)
    if deeper_than(talk["steps"], MAX_NESTING):
        # a tool result string may decode to JSON deeper than the simulation itself
        raise RowError(f"{where}: a tool result nests deeper than {MAX_NESTING} levels")
    if trial is None:
        used = taken.setdefault(str(task_id), set())
        trial = next(n for n in range(len(used) + 1) if n not in used)
        used.add(trial)
    reward_info = sim.get("reward_info")
    termination = sim.get("termination_reason")
    row: dict[str, Any] = {
        "schema_version": "1",
        "scenario_id": f"tau2-{task_id}",
        "task_id": task_id,
        "rollout_index": trial,
        "rollout_id": f"tau2-{task_id}-{trial}",
        "prompt": talk["prompt"],
        "steps": talk["steps"],
        "final_text": talk["final_text"],
        "judge_name": "tau2-bench",
        "reward": None,
    }
    if talk["prefix"]:
        row["prefix"] = talk["prefix"]
    # messages are rebuilt from prompt + steps (OpenAI shape), as every reader does, so they
    # can never disagree with the steps; tau2's own messages are not OpenAI-shaped.
    policy_text = sim.get("policy") if isinstance(sim.get("policy"), str) else None
    env_info = (meta.get("info") or {}).get("environment_info") if isinstance(meta.get("info"), Mapping) else None
    if policy_text is None and isinstance(env_info, Mapping) and isinstance(env_info.get("policy"), str):
        policy_text = env_info["policy"]
    row["messages"] = messages_from_steps(talk["prompt"], talk["steps"], policy_text, prefix=talk["prefix"])
    if "prompt_user_tool_calls" in talk:
        row["prompt_user_tool_calls"] = talk["prompt_user_tool_calls"]
    if termination == _INFRA:
        row["judge_status"] = "error"
        row["reason"] = "tau2 termination_reason infrastructure_error: the simulation did not run"
    elif reward_info is None:
        row["judge_status"] = "missing_reward"
        row["reason"] = "the simulation has no reward_info"
    else:
        if not isinstance(reward_info, Mapping) or not _number(reward_info.get("reward")):
            shown = repr(reward_info.get("reward")) if isinstance(reward_info, Mapping) else type(reward_info).__name__
            raise RowError(f"{where}.reward_info.reward: expected a finite number, got {shown}")
        raw = float(reward_info["reward"])
        row["reward"] = 1.0 if abs(raw - 1.0) <= _PASS_TOLERANCE else 0.0
        row["raw_reward"] = raw
        row["reward_source"] = {"field": "reward_info.reward", "value": raw, "mapping": _MAPPING}
        row["judge_status"] = "ok"
        markers = _markers(reward_info)
        if markers:
            row["markers"] = markers
    if isinstance(termination, str):
        row["ended_by"] = termination
    for name in ("agent_cost", "user_cost"):
        if _number(sim.get(name)):
            row[name] = float(sim[name])
    if talk["usage"] is not None:
        row["usage"] = talk["usage"]
    info = meta.get("info") if isinstance(meta.get("info"), Mapping) else {}
    agent = info.get("agent_info") if isinstance(info.get("agent_info"), Mapping) else {}
    user = info.get("user_info") if isinstance(info.get("user_info"), Mapping) else {}
    env = info.get("environment_info") if isinstance(info.get("environment_info"), Mapping) else {}
    lineage: dict[str, Any] = {
        "source": "tau2-bench",
        "eval_run": meta.get("timestamp") if isinstance(meta.get("timestamp"), str) else None,
        "model": agent.get("llm"),
        "user_model": user.get("llm"),
        "agent_implementation": agent.get("implementation"),
        "domain": env.get("domain_name"),
        "tau2_git_commit": info.get("git_commit"),
        "tau2_simulation_id": str(sim["id"]),
        "seed": sim.get("seed", info.get("seed")),
        "results_file": file_name,
    }
    policy = policy_text
    if policy is not None:
        lineage.update(
            system_prompt_sha=sha256_hex(policy)[:16],
            system_prompt_head=policy[:_HEAD_CHARS],
            system_prompt_chars=len(policy),
        )
    row["lineage"] = lineage
    privileged: dict[str, Any] = {}
    task = tasks.get(str(task_id))
    if task is not None:
        privileged["tau2_task"] = copy.deepcopy(dict(task))
    if isinstance(reward_info, Mapping):
        privileged["tau2_reward_info"] = copy.deepcopy(dict(reward_info))
    row["privileged"] = _Privileged(privileged)
    try:
        validate_row(row)
    except RowError as error:
        raise RowError(f"{where}: {error}") from None
    return row


def read_tau2(path: str | os.PathLike[str], *, strict: bool = True) -> Rows:
    """Read a tau2-bench results file (or results directory) as :class:`~toolkit.rows.Rows`.

    One row per simulation: ``task_id`` -> ``scenario_id`` ``"tau2-<task_id>"``, ``trial`` ->
    ``rollout_index`` (so ``tk.pass_at`` reports pass^k over trials), ``reward_info.reward``
    through tau2's own pass test -> ``reward``, the reward breakdown -> ``markers``; the task's
    evaluation criteria are ``privileged`` (module docstring). ``tk.compare_runs(rows_a,
    rows_b)`` pairs two runs of the same tasks.

    Parameters
    ----------
    path : str or os.PathLike
        A ``results.json`` written by tau2 (``Results.save``, either format) or the directory
        holding ``results.json`` and ``simulations/``.
    strict : bool, optional
        Default True: the first malformed simulation raises, naming it. False: malformed
        simulations are skipped, counted in ``Rows.skipped``, their positions (0-based, in file
        order) in ``Rows.skipped_lines``, with one warning naming them; the rest are kept.

    Returns
    -------
    Rows
        The rows in file order; ``path`` is the metadata file, ``shapes`` ``{"v1": n}`` (``{}``
        when there are none).

    Raises
    ------
    RowError
        When the file is not JSON, not a tau2 ``Results`` object (``info`` / ``tasks``
        missing), or (under ``strict``) holds a malformed simulation (a missing field, a
        reward that is not a finite number, a second simulation of one task and trial, JSON
        nested deeper than ``toolkit.rows._io.MAX_NESTING`` levels); the message names the
        simulation and field.
    OSError
        When the file cannot be read (``FileNotFoundError`` for a missing one).

    Warns
    -----
    UserWarning
        When simulations are skipped (``strict=False``), when some ended with an
        infrastructure error (kept with reward None), when the file holds no simulation, and
        when a results file with simulations of its own has a ``simulations/`` directory
        beside it (the file's are read).

    References
    ----------
    .. [1] Barres et al., "tau^2-Bench: Evaluating Conversational Agents in a Dual-Control
       Environment", arXiv:2506.07982 (2025).
    """
    meta_path, meta, sims = _load(Path(path))
    tasks: dict[str, Any] = {}
    for task in meta.get("tasks") or []:
        if isinstance(task, Mapping) and "id" in task:
            tasks[str(task["id"])] = task
    rows = Rows()
    taken = _explicit_trials(sims)
    first_at: dict[tuple[str, int], str] = {}
    bad: list[tuple[int, str]] = []
    for position, (where, sim) in enumerate(sims):
        try:
            row = _row(sim, where, meta, tasks, taken, meta_path.name)
            key = (str(row["task_id"]), row["rollout_index"])
            if key in first_at:
                raise RowError(
                    f"{where}: task {row['task_id']!r} trial {row['rollout_index']} again (first at {first_at[key]}); "
                    f"the two would share rollout_id {row['rollout_id']!r} and count twice in pass^k"
                )
        except RowError as error:
            if strict:
                raise
            bad.append((position, str(error)))
            continue
        first_at[key] = where
        rows.append(row)
    if bad:
        rows.skipped = len(bad)
        rows.skipped_lines = [position for position, _ in bad]
        warnings.warn(
            f"read_tau2: skipped {len(bad)} malformed simulation(s) in {meta_path.name}; first: {bad[0][1]}",
            UserWarning,
            stacklevel=2,
        )
    infra = [row for row in rows if row.get("judge_status") == "error"]
    if infra:
        shown = ", ".join(f"{r['task_id']} trial {r['rollout_index']}" for r in infra[:5])
        warnings.warn(
            f"read_tau2: {len(infra)} of {len(rows)} simulations in {meta_path.name} ended with an "
            f"infrastructure error ({shown}); they are kept with reward None and judge_status 'error'",
            UserWarning,
            stacklevel=2,
        )
    if not rows and not bad:
        warnings.warn(f"read_tau2: {meta_path.name} holds no simulation: 0 rows", UserWarning, stacklevel=2)
    rows.path = meta_path
    rows.shapes = {"v1": len(rows)} if rows else {}
    return rows
