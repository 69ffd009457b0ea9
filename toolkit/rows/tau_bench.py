"""Read tau-bench results files as toolkit rows, so tau-bench users get our intervals and
paired deltas on their own runs.

A tau-bench results file (sierra-research/tau-bench, ``run.py`` output; Yao et al. 2024,
arXiv 2406.12045) is a JSON list of ``{"task_id": int, "reward": float, "trial": int,
"info": {...}, "traj": [OpenAI chat messages, the first the system policy]}``.

Mapping to rows v1, and the choices made:

- ``scenario_id = f"tau-{task_id}"`` (a string key that cannot collide with our own
  scenario ids), ``task_id`` kept as given, ``rollout_index = trial``,
  ``rollout_id = f"tau-{task_id}-{trial}"``.
- ``reward`` is binary the way tau-bench's ``display_metrics`` counts a pass: within 1e-6 of 1
  is 1.0, anything else 0.0. The number the file held stays in ``raw_reward``.
  ``judge_name = "tau-bench"``, ``judge_status = "ok"``.
- ``messages`` = ``traj`` without its system message (as the file has it); ``prompt`` = the
  first user message; assistant messages before it go to ``prefix``.
- ``steps``: each assistant tool call becomes ``{"tool", "arguments", "call_id"}`` with the
  arguments JSON-decoded (a string that is not a JSON object is kept in ``raw_arguments`` with
  ``arguments = {}``), paired with its tool message by ``tool_call_id`` into ``result``. A
  result that is a JSON object or array is decoded (so ``scrub`` can see inside it); any other
  text (``"Error: ..."``, a bare number) stays the string the agent read. Assistant text that
  came with tool calls rides on the first call as ``text``; user turns after the prompt are
  ``{"user": ...}`` steps; plain assistant text is a ``{"text": ...}`` step.
- ``final_text`` = the last assistant message with text ("" when there is none).
- ``lineage``: ``system_prompt_sha`` (sha256 of the system message, first 16 hex),
  ``system_prompt_head`` (first 120 chars), ``system_prompt_chars``, ``source: "tau-bench"``.
- ``ended_by`` = ``info["source"]`` (who ended the episode: ``"user"`` or a tool name) and
  ``user_cost`` when the file has them.
- ``info`` holds the task's answer key (the expected actions and the user's instruction), so it
  goes under ``privileged`` as ``{"tau_bench_info": info}``: available in memory, removed by
  ``scrub`` on every write.

Where we differ from tau-bench: it computes pass^k with the *global* trial count; the rows
carry each trial individually, so ``tk.pass_at`` counts trials per task (tau2 semantics).
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
from toolkit.rows._io import json_loads
from toolkit.rows._read import Rows
from toolkit.rows._schema import _Privileged, validate_row

__all__ = ["read_tau_bench", "tau_bench_row"]

# tau-bench's own pass test (run.py display_metrics): reward in [1 - 1e-6, 1 + 1e-6].
_PASS_TOLERANCE = 1e-6
# The row schema's lineage head length (docs/design/engine.md §8).
_HEAD_CHARS = 120


def _decode_result(content: Any) -> Any:
    if not isinstance(content, str):
        return content
    stripped = content.strip()
    if stripped[:1] in ("{", "["):
        try:
            return json_loads(stripped)
        except ValueError:
            return content
    return content


class _CallPairing:
    """Tool calls waiting for their result message, matched by call id, else (no id) to the
    oldest call still waiting, as the chat APIs order results. Shared by the readers that
    turn an OpenAI-shaped conversation into steps (tau-bench, inspect_ai)."""

    def __init__(self) -> None:
        self.by_id: dict[str, dict[str, Any]] = {}
        self.waiting: list[dict[str, Any]] = []

    def called(self, step: dict[str, Any]) -> None:
        self.waiting.append(step)
        if "call_id" in step:
            self.by_id[step["call_id"]] = step

    def answered(self, call_id: Any, name: Any, steps: list[dict[str, Any]]) -> dict[str, Any]:
        """The step a tool result belongs to; a result with no call to pair becomes its own
        step, marked ``orphan_result``."""
        step = self.by_id.pop(call_id, None) if call_id else None
        if step is None and self.waiting:
            step = self.waiting[0]
            if step.get("call_id"):
                self.by_id.pop(step["call_id"], None)
        if step is None:
            step = {"tool": name or "unknown_tool", "arguments": {}, "orphan_result": True}
            steps.append(step)
        else:
            self.waiting.remove(step)
        return step


def _text(content: Any) -> str | None:
    """Message content as text: a string, or the text parts of a content-part list."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, Mapping) and p.get("type") == "text"]
        return "".join(parts)
    return str(content)


def _tool_step(call: Mapping[str, Any], where: str) -> dict[str, Any]:
    function = call.get("function") or {}
    name = function.get("name") or call.get("name")
    if not isinstance(name, str) or not name:
        raise RowError(f"{where}.function.name: expected a tool name, got {name!r}")
    raw = function.get("arguments", call.get("arguments"))
    step: dict[str, Any] = {"tool": name}
    if isinstance(raw, Mapping):
        step["arguments"] = dict(raw)
    else:
        try:
            decoded = json_loads(raw) if isinstance(raw, str) and raw.strip() else {}
        except ValueError:
            decoded = None
        if isinstance(decoded, dict):
            step["arguments"] = decoded
        else:
            step["arguments"] = {}
            step["raw_arguments"] = raw
    if call.get("id"):
        step["call_id"] = str(call["id"])
    return step


def tau_bench_row(entry: Mapping[str, Any], where: str = "entry") -> dict[str, Any]:
    """One tau-bench result ``{task_id, reward, trial, info, traj}`` as a row v1 (see module).

    Parameters
    ----------
    entry : mapping
        One element of a tau-bench results list. Required: ``task_id`` (int or str),
        ``reward`` (a number, not a bool) and ``traj`` (a list of chat messages with at least
        one user message); ``trial`` (int >= 0) defaults to 0; ``info`` is optional and used
        only when it is a mapping. It is not changed.
    where : str, optional
        How error messages name the entry (``"<where>.traj: ..."``); default ``"entry"``.
        :func:`read_tau_bench` passes ``"<file name>[<index>]"``.

    Returns
    -------
    dict
        The validated row.

    Raises
    ------
    RowError
        When a required field is missing or mistyped, ``traj`` has no user message, a tool
        call has no name, or the built row fails :func:`validate_row`.
    """
    if not isinstance(entry, Mapping):
        raise RowError(f"{where}: expected an object, got {type(entry).__name__}")
    for name in ("task_id", "reward", "traj"):
        if name not in entry:
            raise RowError(f"{where}.{name}: required tau-bench field is missing")
    task_id = entry["task_id"]
    if isinstance(task_id, bool) or not isinstance(task_id, (int, str)):
        raise RowError(f"{where}.task_id: expected an integer or string, got {type(task_id).__name__}")
    raw_reward = entry["reward"]
    if isinstance(raw_reward, bool) or not isinstance(raw_reward, (int, float)):
        raise RowError(f"{where}.reward: expected a number, got {type(raw_reward).__name__}")
    trial = entry.get("trial", 0)
    if isinstance(trial, bool) or not isinstance(trial, int) or trial < 0:
        raise RowError(f"{where}.trial: expected an integer >= 0, got {trial!r}")
    traj = entry["traj"]
    if not isinstance(traj, list) or not all(isinstance(m, Mapping) for m in traj):
        raise RowError(f"{where}.traj: expected a list of chat messages (objects)")

    system = None
    messages = [copy.deepcopy(dict(m)) for m in traj]
    if messages and messages[0].get("role") == "system":
        system = _text(messages[0].get("content")) or ""
        messages = messages[1:]

    prefix: list[dict[str, Any]] = []
    prompt = None
    position = 0
    for position, message in enumerate(messages):
        if message.get("role") == "user":
            prompt = _text(message.get("content")) or ""
            break
        prefix.append(message)
    if prompt is None:
        raise RowError(f"{where}.traj: no user message, so the conversation has no prompt")

    steps: list[dict[str, Any]] = []
    pairing = _CallPairing()
    final_text = ""
    for offset, message in enumerate(messages[position + 1 :], start=position + 1):
        role = message.get("role")
        at = f"{where}.traj[{offset + (1 if system is not None else 0)}]"
        content = _text(message.get("content"))
        if role == "user":
            steps.append({"user": content or ""})
        elif role == "assistant":
            calls = message.get("tool_calls") or []
            if calls:
                for number, call in enumerate(calls):
                    step = _tool_step(call, f"{at}.tool_calls[{number}]")
                    if number == 0 and content:
                        step["text"] = content
                    steps.append(step)
                    pairing.called(step)
            else:
                steps.append({"text": content or ""})
            if content:
                final_text = content
        elif role == "tool":
            step = pairing.answered(message.get("tool_call_id"), message.get("name"), steps)
            step["result"] = _decode_result(content if content is not None else "")
        # other roles (a second system message) carry no agent action; they stay in messages

    row: dict[str, Any] = {
        "schema_version": "1",
        "scenario_id": f"tau-{task_id}",
        "task_id": task_id,
        "rollout_index": trial,
        "rollout_id": f"tau-{task_id}-{trial}",
        "prompt": prompt,
        "steps": steps,
        "final_text": final_text,
        "messages": messages,
        "reward": 1.0 if abs(float(raw_reward) - 1.0) <= _PASS_TOLERANCE else 0.0,
        "raw_reward": float(raw_reward),
        "judge_name": "tau-bench",
        "judge_status": "ok",
    }
    if prefix:
        row["prefix"] = prefix
    lineage: dict[str, Any] = {"source": "tau-bench"}
    if system is not None:
        lineage.update(
            system_prompt_sha=sha256_hex(system)[:16],
            system_prompt_head=system[:_HEAD_CHARS],
            system_prompt_chars=len(system),
        )
    row["lineage"] = lineage
    info = entry.get("info")
    if isinstance(info, Mapping):
        if isinstance(info.get("source"), str):
            row["ended_by"] = info["source"]
        if isinstance(info.get("user_cost"), (int, float)) and not isinstance(info.get("user_cost"), bool):
            row["user_cost"] = float(info["user_cost"])
        row["privileged"] = _Privileged(tau_bench_info=copy.deepcopy(dict(info)))
    try:
        validate_row(row)
    except RowError as error:
        raise RowError(f"{where}: {error}") from None
    return row


def read_tau_bench(path: str | os.PathLike[str]) -> Rows:
    """Read a tau-bench results JSON file as :class:`~toolkit.rows.Rows` (one row per trial).

    ``tk.pass_at(tk.read_tau_bench("gpt-4o-airline.json"))`` gives pass@1, pass^k and pass@k
    with intervals; ``tk.delta_report`` pairs two such files by task. ``Rows.path`` is the file
    and ``Rows.shapes`` is ``{"v1": n}``. A malformed entry raises :class:`~toolkit.RowError`
    naming its index and field.

    Parameters
    ----------
    path : str or os.PathLike
        The results file (UTF-8 JSON holding one list, ``run.py``'s output).

    Returns
    -------
    Rows
        One row per entry, in file order (:func:`tau_bench_row`); ``shapes`` is ``{}`` for
        an empty list.

    Raises
    ------
    RowError
        When the file is not valid JSON, is not a JSON list, or holds a malformed entry.
    OSError
        When the file cannot be read (``FileNotFoundError`` for a missing one).
    """
    path = Path(path)
    try:
        data = json_loads(path.read_text(encoding="utf-8-sig"))
    except ValueError as error:
        raise RowError(f"{path}: not valid JSON ({error}); a tau-bench results file is one JSON list") from None
    if not isinstance(data, list):
        raise RowError(
            f"{path}: expected a JSON list of tau-bench results, got {type(data).__name__}"
        )
    rows = Rows(tau_bench_row(entry, f"{path.name}[{index}]") for index, entry in enumerate(data))
    if not rows:
        warnings.warn(f"read_tau_bench: {path.name} holds no result: 0 rows", UserWarning, stacklevel=2)
    rows.path = path
    rows.shapes = {"v1": len(rows)} if rows else {}
    return rows
