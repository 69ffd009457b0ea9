"""Read inspect_ai eval logs (``.eval`` and ``.json``) as toolkit rows, so inspect users get
our intervals and paired deltas (``tk.pass_at``, ``tk.compare_runs``, ``tk.delta_report``)
on the logs they already have (issue 20).

The log is read with inspect_ai's own :func:`inspect_ai.log.read_eval_log` (the ``inspect``
extra), never by parsing its files ourselves, so both formats and every log version inspect
can read are read the way inspect reads them.

Mapping to rows v1, one row per sample x epoch, and the choices made:

- ``scenario_id = str(sample.id)`` and ``task_id = sample.id`` as given, so two logs of the
  same dataset pair task by task; ``rollout_index = epoch - 1`` (inspect counts epochs from 1),
  ``rollout_id = f"{sample.id}-{epoch - 1}"``. Epochs therefore become ``k`` in ``tk.pass_at``.
- ``reward``: the chosen scorer's value through inspect's own ``value_to_float()`` (``C`` = 1,
  ``I`` = 0, ``P`` = 0.5, ``N`` = 0, yes/true = 1, no/false = 0, numbers and numeric strings as
  they are), the same mapping inspect's ``accuracy()`` / ``mean()`` metrics use. A value that
  does not map (a list, a dict, other text) or maps outside [0, 1] raises :class:`RowError`
  naming the sample and epoch: inspect itself would count it as 0 with a log line, which
  would bias pass@1 silently. The scorer and the value as logged are kept in
  ``reward_source`` (``{"scorer", "value", "mapping"}``), a number also in ``raw_reward``;
  ``judge_name = "inspect:<scorer>"``, ``reason`` = the score's explanation.
- Scorer choice: ``scorer=`` names it; by default the first scorer of the log (the order of
  ``eval.scorers``, the order the task declared them), with a warning when there are several.
  Every other scorer becomes a marker of the same name (``markers[name]``, the value through
  the same mapping, ``None`` when it does not map); a dict-valued score becomes one marker per
  key, ``"<scorer>.<key>"``.
- A sample that errored (``sample.error``, e.g. ``fail_on_error=False``) is kept as a row with
  ``reward = None``, ``judge_status = "error"`` and the error message in ``reason``, and is
  counted in one warning: dropping it would make the run look better than it was. A sample
  with no score from the chosen scorer gets ``judge_status = "missing_reward"``.
- ``prompt`` = the sample's input text (the input string, or the first user message of an input
  given as messages); ``steps`` from ``sample.messages`` after the first user message, mapped
  as :mod:`toolkit.rows.tau_bench` maps a trajectory: each assistant tool call is
  ``{"tool", "arguments", "call_id"}`` (arguments as inspect parsed them; a parse error kept in
  ``parse_error``) paired with its tool message by id into ``result`` (a JSON object or array
  decoded, other text kept; a tool error's message in ``tool_error``), assistant text that came
  with calls rides on the first call as ``text``, later user turns are ``{"user": ...}`` steps,
  plain assistant text is a ``{"text": ...}`` step. ``final_text`` = ``sample.output.completion``
  (the last assistant text when the output is empty, e.g. an errored sample).
- ``lineage``: ``source: "inspect_ai"``, ``eval_run`` (the run id), ``inspect_eval_id``,
  ``inspect_task``, ``inspect_task_id``, ``model``, ``log`` (the file name) and, when the
  conversation starts with a system message, ``system_prompt_sha`` / ``_head`` / ``_chars``.
  ``usage`` sums the sample's token usage over its models.
- ``sample.target`` and ``sample.metadata`` may hold the answer key, so they go under
  ``privileged`` (``inspect_target``, ``inspect_metadata``): in memory, removed by ``scrub`` on
  every write.
- A log whose ``status`` is not ``"success"`` (``"error"``, ``"cancelled"``, ``"started"``)
  warns naming the status: its samples may be a subset of the task.
"""

from __future__ import annotations

import copy
import math
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from toolkit._util.hashing import sha256_hex
from toolkit.errors import ConfigError, RowError, unknown_name_message
from toolkit.rows._io import plain_json
from toolkit.rows._read import Rows
from toolkit.rows._schema import _Privileged, validate_row
from toolkit.rows._views import messages_from_steps
from toolkit.rows.tau_bench import _CallPairing, _decode_result

__all__ = ["read_inspect_log"]

# The row schema's lineage head length (docs/design/engine.md §8), as tau_bench uses it.
_HEAD_CHARS = 120
# How the reward was made from the value, stated in every row (the mapping inspect's own
# accuracy()/mean() metrics apply through value_to_float()).
_MAPPING = "inspect_ai value_to_float: C=1, I=0, P=0.5, N=0, yes/true=1, no/false=0, numbers as they are"
_WORDS = {"c", "i", "p", "n", "yes", "true", "no", "false"}

_INSTALL_HINT = 'read_inspect_log needs inspect_ai: pip install "toolkit[inspect]"'


def _inspect_api() -> tuple[Any, Any]:
    """(read_eval_log, EvalLog), imported here so ``import toolkit`` never needs inspect_ai."""
    try:
        from inspect_ai.log import EvalLog, read_eval_log
    except ImportError as error:
        raise ImportError(f"{_INSTALL_HINT} (import failed: {error})") from error
    return read_eval_log, EvalLog


def _maps(value: Any) -> bool:
    """Whether value_to_float gives a real answer for ``value`` (it returns 0.0 with only a
    log line for anything it cannot read, which must not become a silent fail)."""
    if isinstance(value, (bool, int, float)):
        return True
    if isinstance(value, str):
        if value.strip().lower() in _WORDS:
            return True
        try:
            return math.isfinite(float(value))
        except ValueError:
            return False
    return False


def _to_float(value: Any) -> float | None:
    from inspect_ai.scorer import value_to_float

    if not _maps(value):
        return None
    number = float(value_to_float()(value.strip() if isinstance(value, str) else value))
    return number if math.isfinite(number) else None


def _text(message: Any) -> str:
    text = getattr(message, "text", None)
    if isinstance(text, str):
        return text
    content = getattr(message, "content", "")
    return content if isinstance(content, str) else ""


def _input_text(sample: Any) -> str | None:
    if isinstance(sample.input, str):
        return sample.input
    for message in sample.input or []:
        if getattr(message, "role", None) == "user":
            return _text(message)
    return None


def _steps(messages: list[Any], where: str) -> tuple[str | None, str | None, list[dict[str, Any]], list[dict[str, Any]], str]:
    """(system text, first user text, prefix, steps, last assistant text) of a conversation."""
    system = None
    prefix: list[dict[str, Any]] = []
    position = None
    first_user = None
    for index, message in enumerate(messages):
        if message.role == "user":
            position, first_user = index, _text(message)
            break
        if message.role == "system":
            system = _text(message) if system is None else f"{system}\n\n{_text(message)}"
        elif message.role == "assistant":
            prefix.append({"role": "assistant", "content": _text(message)})
    steps: list[dict[str, Any]] = []
    pairing = _CallPairing()
    last_text = ""
    rest = messages[position + 1 :] if position is not None else []
    for message in rest:
        role = message.role
        content = _text(message)
        if role == "user":
            steps.append({"user": content})
        elif role == "assistant":
            calls = message.tool_calls or []
            for number, call in enumerate(calls):
                if not call.function:
                    raise RowError(f"{where}: an assistant tool call has no function name")
                step: dict[str, Any] = {"tool": call.function, "arguments": plain_json(dict(call.arguments or {}))}
                if call.id:
                    step["call_id"] = str(call.id)
                if call.parse_error:
                    step["parse_error"] = str(call.parse_error)
                if number == 0 and content:
                    step["text"] = content
                steps.append(step)
                pairing.called(step)
            if not calls:
                steps.append({"text": content})
            if content:
                last_text = content
        elif role == "tool":
            step = pairing.answered(message.tool_call_id, message.function, steps)
            step["result"] = _decode_result(content)
            if message.error is not None:
                step["tool_error"] = str(message.error.message)
        # a later system message carries no agent action
    return system, first_user, prefix, steps, last_text


def _markers(scores: Mapping[str, Any], chosen: str) -> dict[str, float | None]:
    markers: dict[str, float | None] = {}
    for name, score in scores.items():
        if name == chosen:
            continue
        value = score.value
        if isinstance(value, Mapping):
            for key, item in value.items():
                markers[f"{name}.{key}"] = _to_float(item)
        else:
            markers[name] = _to_float(value)
    return markers


def _scorer_names(log: Any) -> list[str]:
    """The log's scorers in declared order, then any other name a sample's scores carry."""
    names: list[str] = [s.name for s in (log.eval.scorers or []) if getattr(s, "name", None)]
    for sample in log.samples or []:
        for name in sample.scores or {}:
            if name not in names:
                names.append(name)
    return names


def _row(sample: Any, log: Any, scorer: str | None, where: str, source_name: str | None) -> dict[str, Any]:
    epoch = int(sample.epoch)
    at = f"{where} sample {sample.id!r} epoch {epoch}"
    system, first_user, prefix, steps, last_text = _steps(list(sample.messages or []), at)
    prompt = _input_text(sample)
    if prompt is None:
        prompt = first_user or ""
    completion = sample.output.completion if sample.output is not None else ""
    row: dict[str, Any] = {
        "schema_version": "1",
        "scenario_id": str(sample.id),
        "task_id": sample.id,
        "rollout_index": epoch - 1,
        "rollout_id": f"{sample.id}-{epoch - 1}",
        "prompt": prompt,
        "steps": steps,
        "final_text": completion or last_text,
    }
    if prefix:
        row["prefix"] = prefix
    row["messages"] = messages_from_steps(prompt, steps, system, prefix=prefix)
    scores = sample.scores or {}
    score = scores.get(scorer) if scorer is not None else None
    row["reward"] = None
    row["judge_name"] = f"inspect:{scorer}" if scorer is not None else "inspect"
    if sample.error is not None:
        row["judge_status"] = "error"
        row["reason"] = f"inspect sample error: {sample.error.message}"
    elif score is None:
        row["judge_status"] = "missing_reward"
        row["reason"] = f"the sample has no score from scorer {scorer!r}"
    else:
        value = score.value
        reward = _to_float(value)
        if reward is None or not 0.0 <= reward <= 1.0:
            shown = "does not map to a number" if reward is None else f"maps to {reward}"
            raise RowError(
                f"{at}: scorer {scorer!r} value {value!r} {shown}; a reward must be in [0, 1] "
                f"({_MAPPING}); choose another scorer with scorer=..."
            )
        row["reward"] = reward
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            row["raw_reward"] = float(value)
        row["reward_source"] = {"scorer": scorer, "value": plain_json(value), "mapping": _MAPPING}
        row["judge_status"] = "ok"
        if isinstance(score.explanation, str):
            row["reason"] = score.explanation
    markers = _markers(scores, scorer) if scorer is not None else {}
    if markers:
        row["markers"] = markers
    lineage: dict[str, Any] = {
        "source": "inspect_ai",
        "eval_run": log.eval.run_id,
        "inspect_eval_id": log.eval.eval_id,
        "inspect_task": log.eval.task,
        "inspect_task_id": log.eval.task_id,
        "model": log.eval.model,
    }
    if source_name:
        lineage["log"] = source_name
    if system is not None:
        lineage.update(
            system_prompt_sha=sha256_hex(system)[:16],
            system_prompt_head=system[:_HEAD_CHARS],
            system_prompt_chars=len(system),
        )
    row["lineage"] = lineage
    usage = list((sample.model_usage or {}).values())
    if usage:
        row["usage"] = {
            "input_tokens": sum(int(u.input_tokens or 0) for u in usage),
            "output_tokens": sum(int(u.output_tokens or 0) for u in usage),
        }
    privileged: dict[str, Any] = {"inspect_target": plain_json(copy.deepcopy(sample.target))}
    if sample.metadata:
        privileged["inspect_metadata"] = plain_json(copy.deepcopy(dict(sample.metadata)))
    row["privileged"] = _Privileged(privileged)
    try:
        validate_row(row)
    except RowError as error:
        raise RowError(f"{at}: {error}") from None
    return row


def read_inspect_log(path_or_log: Any, *, scorer: str | None = None) -> Rows:
    """Read an inspect_ai eval log as :class:`~toolkit.rows.Rows`, one row per sample x epoch.

    ``tk.pass_at(tk.read_inspect_log("logs/x.eval"))`` gives pass@1, pass^k and pass@k with
    epochs as k; ``tk.compare_runs(rows_a, rows_b)`` pairs two logs of the same task by
    sample id. The mapping (sample id -> ``scenario_id``, epoch - 1 -> ``rollout_index``, the
    scorer's value through inspect's ``value_to_float`` -> ``reward``, other scorers ->
    ``markers``) is the module docstring's. ``Rows.path`` is the log file (None for an
    ``EvalLog`` object) and ``Rows.shapes`` is ``{"v1": n}``.

    Parameters
    ----------
    path_or_log : str, os.PathLike or inspect_ai.log.EvalLog
        A ``.eval`` or ``.json`` log (any location inspect's ``read_eval_log`` reads), or a log
        already read with its samples (not ``header_only``).
    scorer : str or None, optional
        The scorer whose value is the reward. Default None: the log's first scorer, with a
        warning when it has more than one. The others become markers.

    Returns
    -------
    Rows
        One validated row per sample x epoch, in the log's sample order; ``shapes`` is ``{}``
        for a log with no samples.

    Raises
    ------
    ImportError
        When inspect_ai is not installed (install the ``inspect`` extra:
        ``pip install "toolkit[inspect]"``).
    ConfigError
        When ``scorer`` is not one of the log's scorers (the message names the nearest).
    RowError
        When the file is not an inspect_ai eval log, the log was read without its samples,
        or the chosen scorer's value for a sample does not map to a reward in [0, 1] (the
        message names the sample and epoch).
    OSError
        When the file cannot be read (``FileNotFoundError`` for a missing one).

    Warns
    -----
    UserWarning
        When the log's status is not ``"success"``, when ``scorer`` is None and the log has
        several scorers (naming the one used), and when samples errored (counting them).
    """
    read_eval_log, EvalLog = _inspect_api()
    path: Path | None = None
    if isinstance(path_or_log, EvalLog):
        log = path_or_log
        if log.location:
            path = Path(str(log.location)) if "://" not in str(log.location) else None
    elif isinstance(path_or_log, (str, os.PathLike)):
        location = os.fspath(path_or_log)
        if "://" not in location:
            path = Path(location)
            if not path.exists():
                raise FileNotFoundError(f"read_inspect_log: no such file: {path}")
        try:
            log = read_eval_log(location)
        except ValueError as error:  # pydantic's ValidationError is a ValueError too
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise RowError(
                f"{location}: not an inspect_ai eval log ({first}); expected a .eval or .json "
                "log written by inspect_ai's eval()"
            ) from None
    else:
        raise TypeError(
            f"read_inspect_log: expected a log path or an inspect_ai EvalLog, got {type(path_or_log).__name__}"
        )
    label = path.name if path is not None else (str(log.location) if log.location else "EvalLog")
    if log.samples is None:
        raise RowError(
            f"{label}: the log holds no samples (read with header_only=True, or written without "
            "samples); read it with inspect_ai.log.read_eval_log(path) and pass that"
        )
    if log.status != "success":
        warnings.warn(
            f"read_inspect_log: {label} has status {log.status!r}, not 'success'; its samples "
            "may not cover the whole task",
            UserWarning,
            stacklevel=2,
        )
    names = _scorer_names(log)
    if scorer is not None:
        if scorer not in names:
            raise ConfigError(f"read_inspect_log: {unknown_name_message('scorer', scorer, names)}")
        chosen: str | None = scorer
    else:
        chosen = names[0] if names else None
        if len(names) > 1:
            warnings.warn(
                f"read_inspect_log: {label} has {len(names)} scorers ({', '.join(names)}); the reward "
                f"is {chosen!r}, the first; the others are markers. Pass scorer=... to choose",
                UserWarning,
                stacklevel=2,
            )
    rows = Rows(_row(sample, log, chosen, label, path.name if path is not None else None) for sample in log.samples)
    errored = [row for row in rows if row.get("judge_status") == "error"]
    if errored:
        shown = ", ".join(f"{row['scenario_id']} epoch {row['rollout_index'] + 1}" for row in errored[:5])
        more = f" and {len(errored) - 5} more" if len(errored) > 5 else ""
        warnings.warn(
            f"read_inspect_log: {len(errored)} of {len(rows)} samples in {label} errored ({shown}{more}); "
            "they are kept with reward None and judge_status 'error'",
            UserWarning,
            stacklevel=2,
        )
    rows.path = path
    rows.shapes = {"v1": len(rows)} if rows else {}
    return rows
