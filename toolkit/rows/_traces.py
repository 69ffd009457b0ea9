"""What the trace readers share (OpenInference / Phoenix spans, Langfuse traces): one trace
becomes one row, and its named scores become the reward and markers the same way in both.

Each reader turns its format into a :class:`_Trace` (prompt, steps, scores by name, model,
metadata); :func:`_trace_rows` makes the rows, so the score mapping, the task key, the
rollout numbering and the warnings are stated once (docs/design/readers.md).
"""

from __future__ import annotations

import copy
import math
import warnings
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit._util.hashing import sha256_hex
from toolkit._util.validate import is_number
from toolkit.errors import ConfigError, RowError, unknown_name_message
from toolkit.rows._io import plain_json
from toolkit.rows._read import Rows
from toolkit.rows._schema import _Privileged, validate_row
from toolkit.rows._views import messages_from_steps

# The row schema's lineage head length (docs/design/engine.md §8).
_HEAD_CHARS = 120
# A scenario id taken from the prompt when the trace names no task: 12 hex of sha256 keeps
# ids short and, over the few thousand prompts of an eval, collision-free (2^-48 per pair).
_PROMPT_ID_HEX = 12


@dataclass
class _Score:
    """One named judgment of a trace: a number and/or a label, as the format stored it."""

    value: float | None
    label: str | None = None
    comment: str | None = None
    kind: str | None = None  # who judged (OpenInference annotator_kind, Langfuse source)
    data_type: str | None = None


@dataclass
class _Trace:
    where: str
    trace_id: str
    prompt: str
    steps: list[dict[str, Any]]
    final_text: str
    scores: dict[str, list[_Score]] = field(default_factory=dict)
    system: str | None = None
    model: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, int] | None = None
    status: str | None = None
    lineage: dict[str, Any] = field(default_factory=dict)


def _number(value: Any) -> bool:
    """A finite real number, never a bool: the one check every reader applies before a
    value becomes a reward, a marker, a cost or a token count (JSON allows NaN and
    Infinity, and an integer too large for a float)."""
    if not is_number(value):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _as_float(score: _Score, labels: Mapping[str, float] | None) -> float | None:
    """A score as a number: a label through ``labels`` when it is given and names the label,
    else the numeric value (None when there is none)."""
    if labels is not None and score.label is not None and score.label in labels:
        return float(labels[score.label])
    if score.data_type == "CATEGORICAL":
        # Langfuse stores 0 as the value of a category with no linked config, so the number
        # is not a reading of the label; without ``labels`` it must not become a reward.
        return None
    return float(score.value) if score.value is not None else None


def _score_names(score_maps: Iterable[Mapping[str, Any]]) -> list[str]:
    """Every score name of an export, in the order first seen."""
    return list(dict.fromkeys(name for scores in score_maps for name in scores))


def _reward_name(names: list[str], reward: str | None, who: str, label: str, choose: str = "Pass reward=... to choose") -> str | None:
    """The score that is the reward: ``reward`` when given, else the first name seen, with a
    warning naming the others when there are several. The what-if sources choose by the same
    rule, so one export gives the same rewards in ``compare_runs`` and in ``whatif``."""
    if reward is not None:
        if reward not in names:
            raise ConfigError(f"{who}: {unknown_name_message('score', reward, names)}")
        return reward
    chosen = names[0] if names else None
    if len(names) > 1:
        warnings.warn(
            f"{who}: {label} has {len(names)} score names ({', '.join(names)}); the reward is "
            f"{chosen!r}, the first seen; the others are markers. {choose}",
            UserWarning,
            stacklevel=4,
        )
    return chosen


def _latest_number(values: list[_Score], labels: Mapping[str, float] | None) -> float | None:
    """The number of a name's latest score (the readers order scores oldest first)."""
    return _as_float(values[-1], labels) if values else None


def _check_labels(labels: Any, source: str) -> dict[str, float] | None:
    if labels is None:
        return None
    if not isinstance(labels, Mapping) or not labels:
        raise ConfigError(f"{source}: labels must be a non-empty mapping label -> number, got {labels!r}")
    out: dict[str, float] = {}
    for key, value in labels.items():
        if not isinstance(key, str) or not _number(value):
            raise ConfigError(f"{source}: labels[{key!r}] must map a string label to a number, got {value!r}")
        out[key] = float(value)
    return out


def _trace_rows(
    traces: list[_Trace],
    *,
    source: str,
    label: str,
    path: Path | None,
    reward: str | None,
    labels: Any,
    task_key: str,
    run_id: Any,
    skipped: list[tuple[int, str]],
) -> Rows:
    """Rows from parsed traces (see the readers' module docstrings for the mapping)."""
    labels = _check_labels(labels, f"read_{source}")
    if not isinstance(task_key, str) or not task_key:
        raise ConfigError(f"read_{source}: task_key must be a metadata key (a non-empty string), got {task_key!r}")
    chosen = _reward_name(_score_names(trace.scores for trace in traces), reward, f"read_{source}", label)
    rows = Rows()
    seen: Counter[str] = Counter()
    for trace in traces:
        task = trace.metadata.get(task_key)
        if isinstance(task, bool) or not isinstance(task, (str, int)):
            scenario = f"{source}-{sha256_hex(trace.prompt)[:_PROMPT_ID_HEX]}"
            task_from = "prompt_sha256"
            task = scenario
        else:
            scenario = str(task)
            task_from = f"metadata.{task_key}"
        index = seen[scenario]
        seen[scenario] += 1
        row: dict[str, Any] = {
            "schema_version": "1",
            "scenario_id": scenario,
            "task_id": task,
            "task_id_from": task_from,
            "rollout_index": index,
            "rollout_id": f"{source}-{trace.trace_id}",
            "prompt": trace.prompt,
            "steps": trace.steps,
            "final_text": trace.final_text,
            "messages": messages_from_steps(trace.prompt, trace.steps, trace.system),
            "reward": None,
            "judge_name": f"{source}:{chosen}" if chosen else source,
        }
        values = trace.scores.get(chosen, []) if chosen else []
        if not values:
            row["judge_status"] = "missing_reward"
            row["reason"] = f"the trace has no {chosen!r} score" if chosen else "the trace has no score"
        else:
            score = values[-1]
            number = _latest_number(values, labels)
            if number is None or not 0.0 <= number <= 1.0:
                shown = f"label {score.label!r} with no number (pass labels={{...}} to map labels)" if number is None else f"value {number}"
                raise RowError(
                    f"{trace.where}: score {chosen!r} has {shown}; a reward must be a number in [0, 1]; "
                    "choose another score with reward=... or map labels with labels=..."
                )
            row["reward"] = number
            row["reward_source"] = plain_json(
                {
                    "score": chosen,
                    "value": score.value,
                    "label": score.label,
                    "mapping": "labels" if labels is not None and score.label in labels else "value as stored",
                    "n_values": len(values),
                    "judged_by": score.kind,
                }
            )
            if score.value is not None:
                row["raw_reward"] = float(score.value)
            row["judge_status"] = "ok"
            if score.comment:
                row["reason"] = score.comment
        markers = {name: _as_float(scores[-1], labels) for name, scores in trace.scores.items() if name != chosen and scores}
        markers = {k: (v if v is None or math.isfinite(v) else None) for k, v in markers.items()}
        if markers:
            row["markers"] = markers
        if trace.status is not None:
            row["trace_status"] = trace.status
        if trace.usage:
            row["usage"] = trace.usage
        run = run_id if run_id is not None else trace.metadata.get("run_id")
        if isinstance(run, bool) or not isinstance(run, (str, int)):
            run = path.stem if path is not None else None
        lineage: dict[str, Any] = {"source": source, "eval_run": run, "model": trace.model, "trace_id": trace.trace_id}
        if path is not None:
            lineage["export_file"] = path.name
        lineage.update(trace.lineage)
        if trace.system is not None:
            lineage.update(
                system_prompt_sha=sha256_hex(trace.system)[:16],
                system_prompt_head=trace.system[:_HEAD_CHARS],
                system_prompt_chars=len(trace.system),
            )
        row["lineage"] = lineage
        if trace.metadata:
            # trace metadata is where apps keep the expected answer, so it is teacher-only
            row["privileged"] = _Privileged({f"{source}_metadata": plain_json(copy.deepcopy(trace.metadata))})
        try:
            validate_row(row)
        except RowError as error:
            raise RowError(f"{trace.where}: {error}") from None
        rows.append(row)
    if skipped:
        rows.skipped = len(skipped)
        rows.skipped_lines = [number for number, _ in skipped]
        warnings.warn(
            f"read_{source}: skipped {len(skipped)} malformed record(s) in {label} "
            f"({', '.join(str(n) for n, _ in skipped[:5])}{' ...' if len(skipped) > 5 else ''}); first: {skipped[0][1]}",
            UserWarning,
            stacklevel=3,
        )
    missing = [row for row in rows if row.get("judge_status") == "missing_reward"]
    if missing and chosen is not None:
        warnings.warn(
            f"read_{source}: {len(missing)} of {len(rows)} traces in {label} have no {chosen!r} score; " "they are kept with reward None",
            UserWarning,
            stacklevel=3,
        )
    if not rows and not skipped:
        # an empty export (a 0-byte file, "[]", a filter that matched nothing) must not pass
        # for a run of zero traces in silence
        warnings.warn(f"read_{source}: {label} holds no trace: 0 rows", UserWarning, stacklevel=3)
    rows.path = path
    rows.shapes = {"v1": len(rows)} if rows else {}
    return rows
