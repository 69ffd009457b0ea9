"""Cut graded rows into training sets a trainer can use, and refuse the ones it cannot.

Four cuts off the same graded rows (docs/design/engine.md §7):

* **SFT** -- :func:`training_rows` turns rows into chat samples (system prompt and tool
  schemas included, tool calls in the OpenAI wire shape, a 0/1 ``loss_mask`` per message);
  :func:`select_for_sft` picks which rows go in and says when the "selection" was only a
  pass filter.
* **DPO** -- :func:`build_preference_pairs` pairs a better and a worse rollout of the same
  task with a score margin; :func:`export_preference` writes them for OpenAI or TRL.
* **GRPO** -- :func:`select_for_rl` keeps whole mixed groups whose pass rate sits in a band
  (DeepSeekMath, arXiv:2402.03300; DAPO's dynamic sampling, arXiv:2503.14476: a group whose
  rollouts all score the same has zero advantage and contributes no gradient).
* **Reward model** -- :func:`reward_model_set`: every graded row with its reward.

:func:`publish_gate` refuses RL-shaped data that cannot train (no rewards, no mixed group)
and :func:`decontaminate` removes rows that copy an evaluation set, listing every rule it
could not run.

Where we differ from the reference system:

* TRL gets no ``loss_mask`` at all (TRL ignores the column and trains on every token,
  #507/#508): a full-conversation cut is a ``messages`` row meant for
  ``SFTConfig(assistant_only_loss=True)``, and "final"/"unroll" become conversational
  ``prompt``/``completion`` rows, which TRL masks by construction.
* Every export scrubs through :func:`toolkit.rows.scrub` (a block list, so markers,
  lineage and seed ride along) and raises :class:`ExportError` on an empty result instead
  of writing a 0-byte file a loader would crash on.
* ``select_for_rl`` returns what it dropped *by group and reason*, not only a count.
* ``decontaminate`` treats a rule that could not run as a result (``rules_skipped``), never
  as a silent pass (#488), and names a rule that ran on only part of the rows
  (``rules_partial``); an empty text never counts as an exact match.
* TRL preference rows: the shared ``prompt`` ends where both completions start with an
  assistant turn (never an empty completion); a pair whose rollouts opened with different
  prompts has no shared prompt and is left out of a TRL export (``same_prompt`` says so).
* ``select_for_sft`` applies the privileged-leak gate itself: the rows it returns are
  scrubbed, so a later ``training_rows`` could no longer see the leak.
* The privileged-leak gate (every cut, not only SFT) counts a quote as 8 consecutive words
  or a whole privileged string of >= 12 characters that the agent was not itself shown,
  instead of any 12-character window (see ``_LeakCheck``; measured on tau-bench rows).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit._util.hashing import canonical_json, stable_uniform
from toolkit._util.keys import binary_reward, numeric_reward, task_key
from toolkit._util.results import Result
from toolkit._util.validate import check_count
from toolkit.errors import ExportError, PublishGateError, ToolkitError, unknown_name_message
from toolkit.grading import hack_scan
from toolkit.logprobs import calibrate
from toolkit.rows import messages_from_steps, scrub
from toolkit.rows._read import as_row_list
from toolkit.rows._results import RowsResult

__all__ = [
    "ExportError",
    "PublishGateError",
    "TrainingSet",
    "SFTSelection",
    "PreferencePairs",
    "RLSelection",
    "RewardModelSet",
    "PublishGateReport",
    "DecontaminationReport",
    "training_rows",
    "select_for_sft",
    "build_preference_pairs",
    "export_preference",
    "select_for_rl",
    "reward_model_set",
    "publish_gate",
    "decontaminate",
    "write_jsonl",
]

# Fields that are the conversation itself; a training row rebuilds them as `messages`.
_CONVERSATION_FIELDS = ("steps", "final_text", "messages", "prompt")
# The teacher-only keys docs/design/engine.md §8 strips at any depth.
_PRIVILEGED_KEYS = ("privileged", "principle", "hidden_state", "reference", "rubric", "vector")
# A whole privileged string of >= 12 characters (an id, a short answer) or a run of >= 8
# consecutive words of a longer one counts as quoted (see _LeakCheck for why not 12 chars).
_LEAK_QUOTE_CHARS = 12
_LEAK_QUOTE_WORDS = 8
_THINK_BLOCK = re.compile(r"<think>.*?</think>\s*", re.DOTALL | re.IGNORECASE)
_TRUNCATION_MARKER = "\n[... tool output cut at {n} characters by toolkit.training.export ...]"
# A reward at or above 0.5 counts as a pass in warnings, the midpoint of a 0/1 scale.
_PASS_THRESHOLD = 0.5
_FORMATS = ("openai", "trl")
_MASK_MODES = ("assistant", "final")


# --------------------------------------------------------------------------------------
# shared helpers
# --------------------------------------------------------------------------------------


def _scrub(value: Any) -> Any:
    return scrub(value)


def _deep_scrub(value: Any) -> Any:
    """Remove privileged keys at any depth of a built export record (messages and pair
    wrappers are not rollout rows, so the rows helper's scrub does not see their shape)."""
    if isinstance(value, Mapping):
        return {k: _deep_scrub(v) for k, v in value.items() if k not in _PRIVILEGED_KEYS}
    if isinstance(value, list):
        return [_deep_scrub(v) for v in value]
    return value


def _clean(row: Mapping[str, Any]) -> dict[str, Any]:
    """Scrub a row for export: the rows helper's scrub, then any privileged key left at any
    depth (a tool result or message list built after scrubbing must not reopen the leak)."""
    out = _deep_scrub(_scrub(dict(row)))
    # a row-shaped export (SFT/RL selection, decontaminated rows) that has the v1 fields
    # says so; a legacy row without them keeps its shape rather than a false stamp
    if isinstance(out.get("prompt"), str) and isinstance(out.get("steps"), list) and isinstance(out.get("final_text"), str):
        out["schema_version"] = "1"
    return out


def _check_format(name: str, value: str, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise ExportError(unknown_name_message(name, value, allowed))


def _check_band(band: Any) -> tuple[float, float]:
    """``band`` as (lo, hi) with 0 <= lo <= hi <= 1, or an ExportError naming the field."""
    try:
        lo, hi = band
        lo, hi = float(lo), float(hi)
    except (TypeError, ValueError):
        raise ExportError(f"band must be a pair (lo, hi) of pass rates in [0, 1], got {band!r}") from None
    if not (0.0 <= lo <= hi <= 1.0):
        raise ExportError(f"band must satisfy 0 <= lo <= hi <= 1, got {band}")
    return lo, hi


def _check_tools(tools: Any) -> None:
    if tools is None:
        return
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence) or not all(
        isinstance(t, Mapping) for t in tools
    ):
        raise ExportError(
            "tools must be a list of tool schemas (dicts such as {'type': 'function', 'function': {...}}), "
            f"got {type(tools).__name__}"
        )


def _check_score_field(rows: Sequence[Mapping[str, Any]], field_name: str) -> None:
    """A score field that no row carries is a typo until shown otherwise: name the nearest."""
    if field_name == "reward" or not rows or any(field_name in r for r in rows):
        return
    keys = sorted({k for r in rows for k in r if isinstance(k, str)})
    raise ExportError(unknown_name_message("score field", field_name, keys))


def _strings_in(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _strings_in(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings_in(v)


def _normalise_text(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def _word_grams(text: str, n: int) -> set[tuple[str, ...]]:
    words = _words(text)
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


class _LeakCheck:
    """What of a row's privileged block the agent could not have read.

    A leak is a run of >= 8 consecutive words of a privileged string, or a whole
    privileged string of >= 12 characters (an id, a short answer), appearing in the
    agent's output while absent from what the agent was shown (system prompt, prefix,
    prompt, user turns, tool results). Where we differ from the reference engine, which
    flagged any 12-character quote: a privileged block often holds the user's own
    instruction, and in a manual check on the tau-bench airline anchor (200 rows) 12-character
    windows of ordinary words ("direct flights") refused 200 of 200 rows and 5-word runs
    ("you are a silver member") 49; 8-word runs, the n-gram length of the decontamination
    rule, are rare by chance and are what a copied answer key looks like.
    """

    def __init__(self, row: Mapping[str, Any], system_prompt: str | None = None) -> None:
        block = {k: row[k] for k in _PRIVILEGED_KEYS if k in row and k != "vector"}
        strings = [t for t in _strings_in(block) if t.strip()]
        shown = [str(row.get("prompt", "")), str(row.get("system_prompt") or ""), str(system_prompt or "")]
        shown += [canonical_json(m) for m in row.get("prefix") or []]
        for step in row.get("steps") or []:
            if not isinstance(step, Mapping):
                continue
            if "user" in step:
                shown.append(str(step["user"]))
            if "result" in step:
                shown.extend(_strings_in(step["result"]))
                if not isinstance(step["result"], str):
                    shown.append(canonical_json(step["result"]))
        for message in row.get("messages") or []:
            if isinstance(message, Mapping) and message.get("role") in ("system", "user", "tool"):
                shown.extend(_strings_in(message.get("content")))
        shown_words = " " + " ".join(_words(" ".join(shown))) + " "
        shown_grams = _word_grams(shown_words, _LEAK_QUOTE_WORDS)
        self.grams = set()
        self.whole = set()
        for text in strings:
            self.grams |= _word_grams(text, _LEAK_QUOTE_WORDS) - shown_grams
            joined = " ".join(_words(text))
            if len(joined) >= _LEAK_QUOTE_CHARS and f" {joined} " not in shown_words:
                self.whole.add(joined)

    def __bool__(self) -> bool:
        return bool(self.grams or self.whole)

    def quoted_in(self, text: str) -> bool:
        if not text or not self:
            return False
        padded = " " + " ".join(_words(text)) + " "
        return any(f" {w} " in padded for w in self.whole) or bool(_word_grams(padded, _LEAK_QUOTE_WORDS) & self.grams)


def _row_quotes_privileged(row: Mapping[str, Any], system_prompt: str | None = None) -> bool:
    """Does any assistant text or tool argument of the row leak its privileged block?"""
    check = _LeakCheck(row, system_prompt)
    if not check:
        return False
    texts = [row.get("final_text") or ""] + [
        str(s.get("text") or "") for s in row.get("steps") or [] if isinstance(s, Mapping) and "user" not in s
    ]
    texts += [
        " ".join(_strings_in(s.get("arguments"))) for s in row.get("steps") or [] if isinstance(s, Mapping) and "tool" in s
    ]
    texts += [
        str(m.get("content") or "") for m in row.get("messages") or [] if isinstance(m, Mapping) and m.get("role") == "assistant"
    ]
    return any(check.quoted_in(t) for t in texts)


def _unwrap_arguments(arguments: Any) -> tuple[dict[str, Any] | None, str | None]:
    """Decode arguments that may be JSON encoded once or several times; return (dict, error)."""
    value = arguments
    for _ in range(5):  # double- and triple-encoded arguments occur in the wild (pain 12)
        if isinstance(value, Mapping):
            return dict(value), None
        if value is None or value == "":
            return {}, None
        if not isinstance(value, str):
            return None, f"arguments are a {type(value).__name__}, not an object"
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            return None, f"arguments are not valid JSON ({exc.msg})"
    return None, "arguments stay a string after 5 rounds of JSON decoding"


def _row_messages(row: Mapping[str, Any], system_prompt: str | None) -> list[dict[str, Any]]:
    # Build from the scrubbed row: a privileged block nested in a tool result would
    # otherwise be serialised into a tool message string where no key-based scrub sees it.
    row = _scrub(dict(row))
    if "steps" in row and "prompt" in row:
        messages = messages_from_steps(
            row.get("prompt", ""), row.get("steps") or [], system_prompt=system_prompt, prefix=row.get("prefix") or ()
        )
        messages = [dict(m) for m in messages]
        final_text = row.get("final_text")
        if final_text and not any(
            m.get("role") == "assistant" and (m.get("content") or "") == final_text for m in messages
        ):
            messages.append({"role": "assistant", "content": final_text})
        return messages
    if isinstance(row.get("messages"), list):
        messages = [dict(m) for m in row["messages"]]
        if system_prompt and not (messages and messages[0].get("role") == "system"):
            messages.insert(0, {"role": "system", "content": system_prompt})
        return messages
    raise ExportError("a row has neither prompt+steps nor messages; cannot build a conversation")


def _system_prompt_of(row: Mapping[str, Any], system_prompt: str | Mapping[str, str] | None) -> str | None:
    if system_prompt is None:
        if isinstance(row.get("system_prompt"), str):
            return row["system_prompt"]
        old = row.get("messages")
        if isinstance(old, list) and old and isinstance(old[0], Mapping) and old[0].get("role") == "system":
            return old[0].get("content")
        return None
    if isinstance(system_prompt, str):
        return system_prompt
    # {sha: text}, or SimulationData.system_prompts: a list of {"sha", "text"} records
    by_sha = _system_prompt_map(system_prompt)
    sha = (row.get("lineage") or {}).get("system_prompt_sha")
    return by_sha.get(sha) if sha else None


def _check_system_prompt(system_prompt: Any) -> None:
    if system_prompt is not None and not isinstance(system_prompt, str):
        _system_prompt_map(system_prompt)


def _system_prompt_map(system_prompt: Any) -> dict[str, str]:
    if isinstance(system_prompt, Mapping):
        return {str(k): v for k, v in system_prompt.items() if isinstance(v, str)}
    if isinstance(system_prompt, (list, tuple)) and all(
        isinstance(p, Mapping) and "sha" in p and "text" in p for p in system_prompt
    ):
        return {str(p["sha"]): p["text"] for p in system_prompt}
    raise ExportError(
        "system_prompt must be a string, {sha: text}, or data.system_prompts (a list of {'sha', 'text'}); "
        f"got {type(system_prompt).__name__}"
    )


def _wire_messages(
    messages: list[dict[str, Any]],
    *,
    arguments_as: str,
    strip_think: bool,
    max_tool_output_chars: int | None,
    row_index: int,
) -> tuple[list[dict[str, Any]], list[str]]:
    """OpenAI wire shape: tool calls {id, type, function{name, arguments}}, tool results
    linked by tool_call_id. Returns (messages, problems) -- problems refuse the row."""
    out: list[dict[str, Any]] = []
    problems: list[str] = []
    pending_ids: list[str] = []
    call_counter = 0
    for message in messages:
        role = message.get("role")
        if role not in ("system", "user", "assistant", "tool"):
            problems.append(f"message role {role!r} is not system/user/assistant/tool")
            continue
        new: dict[str, Any] = {"role": role}
        content = message.get("content")
        if isinstance(content, str) and strip_think and role == "assistant":
            content = _THINK_BLOCK.sub("", content)
        if role == "tool":
            if not isinstance(content, str):
                content = canonical_json(content)
            if max_tool_output_chars is not None and len(content) > max_tool_output_chars:
                content = content[:max_tool_output_chars] + _TRUNCATION_MARKER.format(n=max_tool_output_chars)
            call_id = message.get("tool_call_id") or (pending_ids.pop(0) if pending_ids else None)
            if call_id is None:
                problems.append("a tool result follows no tool call")
            elif call_id in pending_ids:
                pending_ids.remove(call_id)
            new["tool_call_id"] = call_id
            if message.get("name"):
                new["name"] = message["name"]
            new["content"] = content
            out.append(new)
            continue
        new["content"] = content if content is not None else ("" if role != "assistant" else None)
        calls = message.get("tool_calls")
        if role == "assistant" and calls:
            wire_calls = []
            for call in calls:
                function = call.get("function") if isinstance(call.get("function"), Mapping) else call
                name = function.get("name")
                arguments, error = _unwrap_arguments(function.get("arguments"))
                if error:
                    problems.append(f"tool call {name!r}: {error}")
                    continue
                call_counter += 1
                call_id = call.get("id") or call.get("call_id") or f"call_{row_index}_{call_counter}"
                pending_ids.append(call_id)
                wire_calls.append(
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {
                            "name": name,
                            # key order kept as the model wrote it: it is the target
                            "arguments": arguments if arguments_as == "dict" else json.dumps(arguments, ensure_ascii=False),
                        },
                    }
                )
            new["tool_calls"] = wire_calls
        out.append(new)
    return out, problems


def _loss_mask(messages: Sequence[Mapping[str, Any]], mode: str) -> list[int]:
    assistant = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    if mode == "assistant":
        keep = set(assistant)
    else:
        keep = {assistant[-1]} if assistant else set()
    return [1 if i in keep else 0 for i in range(len(messages))]


def _group_fields(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per task: group_id = sha1(task key)[:12], k, n0 (< 0.5), n1 (> 0.5; exactly 0.5 is
    neither), reward_mean, reward_std (population)."""
    by_task: dict[str, list[float | None]] = defaultdict(list)
    for row in rows:
        by_task[task_key(row)].append(numeric_reward(row))
    out = {}
    for key, rewards in by_task.items():
        scored = [r for r in rewards if r is not None]
        mean = math.fsum(scored) / len(scored) if scored else None
        std = math.sqrt(math.fsum((r - mean) ** 2 for r in scored) / len(scored)) if scored else None
        out[key] = {
            "group_id": hashlib.sha1(key.encode("utf-8")).hexdigest()[:12],
            "k": len(rewards),
            "n0": sum(1 for r in scored if r < _PASS_THRESHOLD),
            "n1": sum(1 for r in scored if r > _PASS_THRESHOLD),
            "reward_mean": mean,
            "reward_std": std,
        }
    return out


def write_jsonl(records: Sequence[Mapping[str, Any]], path: str | Path) -> Path:
    """Write export records as JSONL atomically (temp file + fsync + replace), scrubbed.

    Export records are training/preference samples, not rollout rows, so they do not go
    through ``save_rows`` (which validates the rollout schema); they are scrubbed here the
    same way, and an empty list is refused rather than written as a 0-byte file.

    Parameters
    ----------
    records : sequence of mapping
        The records, one JSON line each (privileged keys removed at any depth; values JSON
        cannot encode are written with ``str``).
    path : str or path
        The file to write; missing parent directories are created and an existing file is
        replaced.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    ExportError
        When ``records`` is empty.
    """
    import os
    import tempfile

    records = [_deep_scrub(dict(r)) for r in records]
    if not records:
        raise ExportError(f"refusing to write an empty export to {path}; a 0-byte JSONL crashes loaders")
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=target.parent, prefix=target.name, suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            for record in records:
                stream.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return target


class _Saveable:
    def save(self, path: str | Path) -> Path:
        """Write ``.rows`` as JSONL (scrubbed, atomic); an empty set raises ExportError."""
        return write_jsonl(self.rows, path)  # type: ignore[attr-defined]


# --------------------------------------------------------------------------------------
# SFT
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainingSet(Result, _Saveable):
    """Chat samples for supervised fine-tuning."""

    rows: list = field(repr=False)  # never printed in full; scrubbed when the cut was made
    format: str
    mask_mode: str
    unroll: bool
    n_source: int
    n_refused: int
    refused: dict
    warnings: list
    note: str | None = None

    def __str__(self) -> str:
        return (
            f"{len(self.rows)} {self.format} training samples from {self.n_source} rows "
            f"(mask={self.mask_mode}{', unrolled' if self.unroll else ''}; {self.n_refused} refused)"
        )

    def __len__(self) -> int:
        return len(self.rows)


def training_rows(
    rows: Any,
    *,
    system_prompt: str | Mapping[str, str] | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
    mask_mode: str = "assistant",
    unroll: bool = False,
    format: str = "openai",
    strip_think: bool = True,
    max_tool_output_chars: int | None = None,
    validate: bool = True,
) -> TrainingSet:
    """Build SFT samples: system prompt, tool schemas, OpenAI-shaped tool calls, a loss mask.

    ``loss_mask`` has one 0/1 per message; system, user and tool messages are always 0. The
    row's prompt string is kept as ``prompt_text``. Failing rows (reward < 0.5) and turns cut
    at the token cap are kept with a warning. Group fields (group_id, k, n0, n1,
    reward_mean, reward_std) are stamped when any task repeats. A row with no conversation
    or no assistant turn is always refused.

    Parameters
    ----------
    rows : list of dict, SimulationData, DataFrame, str or path
        Graded rows: a list of row dicts, anything with ``.rows``, a pandas DataFrame, or a
        path to a JSONL file.
    system_prompt : str, mapping, list of dict or None, optional
        The system prompt to put first: a string for every row; ``{sha: text}`` or
        ``data.system_prompts`` (a list of ``{"sha", "text"}``), looked up by each row's
        ``lineage.system_prompt_sha``. Default None uses the row's ``system_prompt`` field,
        else the first system message of its ``messages``.
    tools : list of dict or None, optional
        Tool schemas (dicts such as ``{"type": "function", "function": {...}}``) attached to
        every record; default None attaches each row's own ``tools`` field when it has one.
        With no schema attached a warning says so.
    mask_mode : {"assistant", "final"}, optional
        ``"assistant"`` (default) puts loss 1 on every assistant message, ``"final"`` only on
        the last.
    unroll : bool, optional
        Default False. True makes one sample per assistant turn (the conversation up to it)
        whose loss falls on that turn only, with ``turn_index``.
    format : {"openai", "trl"}, optional
        ``"openai"`` (default) writes ``messages`` with ``loss_mask``. ``"trl"`` writes TRL's
        conversational shapes and no mask: ``messages`` rows (train with
        ``assistant_only_loss=True``) for the assistant mode, ``prompt``/``completion`` rows
        for "final" and for ``unroll``; tool-call arguments become dicts (chat templates
        expect them), and the prompt string stays in ``prompt_text`` so TRL does not read
        the row as prompt-completion.
    strip_think : bool, optional
        Remove ``<think>...</think>`` blocks from assistant messages; default True.
    max_tool_output_chars : int or None, optional
        Cut tool messages longer than this many characters (an integer >= 1), appending a
        marker that says so; default None keeps them whole.
    validate : bool, optional
        Default True: refuse a row whose tool arguments do not decode to an object, or whose
        assistant turns or tool arguments quote its privileged block (8 consecutive words,
        or a whole privileged string of >= 12 characters, that the agent was not itself
        shown in the system prompt, prompt, user turns or tool results). False turns both
        gates off: an undecodable tool call is left out of the sample and a leaking row is
        kept.

    Returns
    -------
    TrainingSet
        The samples (scrubbed), the refusal counts by reason and the warnings.

    Raises
    ------
    ExportError
        For an unknown ``format`` or ``mask_mode``, a bad ``max_tool_output_chars``,
        ``tools`` or ``system_prompt``, or when nothing survives.
    """
    _check_format("format", format, _FORMATS)
    _check_format("mask_mode", mask_mode, _MASK_MODES)
    if max_tool_output_chars is not None:
        check_count("max_tool_output_chars (or None)", max_tool_output_chars, error=ExportError)
    _check_tools(tools)
    _check_system_prompt(system_prompt)
    source = as_row_list(rows)
    groups = _group_fields(source)
    repeated = any(g["k"] > 1 for g in groups.values())
    refused: dict[str, int] = Counter()
    warnings: list[str] = []
    out: list[dict[str, Any]] = []
    n_failing = n_truncated = n_lost_system = 0
    for index, row in enumerate(source):
        sp = _system_prompt_of(row, system_prompt)
        lineage = row.get("lineage") if isinstance(row.get("lineage"), Mapping) else {}
        # the row ran under a deploy prompt whose text we cannot recover (#592)
        lost_system = sp is None and bool(lineage.get("system_prompt_sha")) and bool(lineage.get("system_prompt_chars", 1))
        try:
            raw_messages = _row_messages(row, sp)
        except ExportError:
            refused["no_conversation"] += 1
            continue
        messages, problems = _wire_messages(
            raw_messages,
            arguments_as="dict" if format == "trl" else "string",
            strip_think=strip_think,
            max_tool_output_chars=max_tool_output_chars,
            row_index=index,
        )
        if validate and problems:
            refused["tool_arguments_not_an_object"] += 1
            continue
        if not any(m["role"] == "assistant" for m in messages):
            refused["no_assistant_turn"] += 1
            continue
        if validate and _row_quotes_privileged(row, sp):
            refused["privileged_quote"] += 1
            continue
        reward = numeric_reward(row)
        if reward is not None and reward < _PASS_THRESHOLD:
            n_failing += 1
        if any(step.get("truncated") for step in row.get("steps") or [] if isinstance(step, Mapping)):
            n_truncated += 1
        n_lost_system += int(lost_system and not any(m["role"] == "system" for m in messages))
        meta = _clean({k: v for k, v in row.items() if k not in _CONVERSATION_FIELDS})
        meta["schema_version"] = "1"
        if isinstance(row.get("prompt"), str):
            meta["prompt_text"] = row["prompt"]
        if repeated:
            meta.update(groups[task_key(row)])
        row_tools = tools if tools is not None else row.get("tools")
        samples = _cut_samples(messages, mask_mode=mask_mode, unroll=unroll, format=format)
        for turn, sample in enumerate(samples):
            record = dict(meta)
            record.update(sample)
            if row_tools:
                record["tools"] = _deep_scrub(list(row_tools))
            if unroll:
                record["turn_index"] = turn
            out.append(_deep_scrub(record))
    if n_failing:
        warnings.append(f"{n_failing} exported row(s) have reward < 0.5; SFT teaches whatever it is shown")
    if n_truncated:
        warnings.append(f"{n_truncated} exported row(s) contain turns cut at the token cap, exported as targets")
    if n_lost_system:
        warnings.append(
            f"{n_lost_system} row(s) ran under a system prompt (lineage.system_prompt_sha) whose text they do not "
            "carry, and were exported without it; pass system_prompt= (a string, or data.system_prompts as "
            "{sha: text}) so the model trains on the prompt it will be deployed with"
        )
    if tools is None and not any("tools" in r for r in out):
        warnings.append("no tool schemas attached (pass tools=); a model trained without them sees calls to unknown tools")
    if not out:
        reasons = ", ".join(f"{k}: {v}" for k, v in refused.items()) or "no rows given"
        raise ExportError(f"training_rows produced no samples ({reasons})")
    return TrainingSet(
        rows=out,
        format=format,
        mask_mode=mask_mode,
        unroll=unroll,
        n_source=len(source),
        n_refused=sum(refused.values()),
        refused=dict(refused),
        warnings=warnings,
        note=(
            "TRL rows carry no loss_mask: train messages rows with SFTConfig(assistant_only_loss=True)"
            if format == "trl" and mask_mode == "assistant" and not unroll
            else None
        ),
    )


def _cut_samples(messages: list[dict[str, Any]], *, mask_mode: str, unroll: bool, format: str) -> list[dict[str, Any]]:
    assistant = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    if unroll:
        cuts = [(messages[: i + 1], i) for i in assistant]
    else:
        cuts = [(messages, None)]
    samples = []
    for msgs, target in cuts:
        if format == "openai":
            if target is None:
                mask = _loss_mask(msgs, mask_mode)
            else:
                mask = [1 if j == target else 0 for j in range(len(msgs))]
            samples.append({"messages": copy.deepcopy(msgs), "loss_mask": mask})
        elif target is None and mask_mode == "assistant":
            samples.append({"messages": copy.deepcopy(msgs)})
        else:
            last = target if target is not None else assistant[-1]
            samples.append({"prompt": copy.deepcopy(msgs[:last]), "completion": [copy.deepcopy(msgs[last])]})
    return samples


@dataclass(frozen=True)
class SFTSelection(Result, _Saveable):
    """Which rows go into SFT, and whether that was a real selection."""

    rows: list = field(repr=False)  # never printed in full; scrubbed when the cut was made
    strategy: str
    selection_effective: str
    n_eligible: int
    n_prompts: int
    mean_completions_per_prompt: float | None
    dropped: dict
    notes: list

    def __str__(self) -> str:
        return (
            f"{len(self.rows)} SFT rows from {self.n_eligible} eligible over {self.n_prompts} prompts "
            f"(selection: {self.selection_effective})"
        )


_SFT_STRATEGIES = ("top_per_prompt", "random_per_prompt", "top_k_overall", "random_k_overall")


def _is_junk(row: Mapping[str, Any]) -> str | None:
    status = row.get("judge_status")
    if status is not None and status != "ok":
        return "judge_status_not_ok"
    if row.get("finish_reason") == "error":
        return "finish_reason_error"
    text = row.get("final_text") or ""
    steps = row.get("steps") or []
    if not text.strip() and not any(isinstance(s, Mapping) and "tool" in s for s in steps):
        return "empty_reply"
    return None


def _signature(row: Mapping[str, Any]) -> str:
    if row.get("behavior_signature"):
        return str(row["behavior_signature"])
    tools = [str(s.get("tool")) for s in row.get("steps") or [] if isinstance(s, Mapping) and "tool" in s]
    return ">".join(tools) or "no_tools"


def select_for_sft(
    rows: Any,
    *,
    target: int = 1000,
    min_reward: float = 1.0,
    strategy: str = "top_per_prompt",
    seed: int = 0,
) -> SFTSelection:
    """Pick SFT rows: reward >= ``min_reward``, not junk, not quoting their own privileged
    block (``dropped["privileged_quote"]``; the rows come back scrubbed, so this is the
    last point the leak can be seen), then per ``strategy``.

    Junk is a non-ok ``judge_status``, ``finish_reason == "error"``, or an empty reply with
    no tool call; ungraded rows are dropped too. ``selection_effective`` is
    ``"pass_filter"`` when the median prompt has one eligible completion or every eligible
    reward is equal: then "best" chose nothing and the set is the pass filter (#747).

    Parameters
    ----------
    rows : list of dict, SimulationData, DataFrame, str or path
        Graded rows: a list of row dicts, anything with ``.rows``, a pandas DataFrame, or a
        path to a JSONL file.
    target : int, optional
        The most rows to return, an integer >= 1; default 1000.
    min_reward : float, optional
        The lowest reward a row may have; default 1.0.
    strategy : {"top_per_prompt", "random_per_prompt", "top_k_overall", "random_k_overall"}, optional
        ``top_per_prompt`` (default) keeps the best row of each prompt, ordered round-robin
        over behaviour signatures (largest bucket first) so the cut at ``target`` keeps the
        variety; ``random_per_prompt`` keeps a seeded random passing row per prompt (same
        ordering); ``top_k_overall`` (best reward first) and ``random_k_overall`` ignore
        prompts.
    seed : int, optional
        Seed of the random picks and of the tie-breaking order; default 0.

    Returns
    -------
    SFTSelection
        The selected rows (scrubbed), the strategy and the effective selection, and the
        counts dropped by reason.

    Raises
    ------
    ExportError
        For an unknown strategy, a bad ``target``, or when no row is selected.
    """
    _check_format("strategy", strategy, _SFT_STRATEGIES)
    check_count("target", target, error=ExportError)
    source = as_row_list(rows)
    dropped: Counter = Counter()
    eligible: list[dict[str, Any]] = []
    for row in source:
        reward = numeric_reward(row)
        if reward is None:
            dropped["ungraded"] += 1
            continue
        if reward < min_reward:
            dropped["below_min_reward"] += 1
            continue
        junk = _is_junk(row)
        if junk:
            dropped[junk] += 1
            continue
        if _row_quotes_privileged(row):
            # the selected rows leave scrubbed, so training_rows could no longer see the leak
            dropped["privileged_quote"] += 1
            continue
        eligible.append(row)
    by_prompt: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in eligible:
        by_prompt[str(row.get("prompt", task_key(row)))].append(row)
    counts = [len(v) for v in by_prompt.values()]
    notes: list[str] = []
    rewards = {numeric_reward(r) for r in eligible}
    pass_filter = bool(counts) and (statistics.median(counts) <= 1 or len(rewards) <= 1)
    mean_per_prompt = (sum(counts) / len(counts)) if counts else None
    if mean_per_prompt is not None and mean_per_prompt < 10:
        notes.append(
            f"{mean_per_prompt:.1f} eligible completions per prompt on average; best-of selection needs ~10"
        )

    def draw(row: Mapping[str, Any]) -> float:
        return stable_uniform("select_for_sft", seed, canonical_json(row.get("prompt")), row.get("rollout_index"), row.get("final_text"))

    if strategy in ("top_per_prompt", "random_per_prompt"):
        picked = []
        for prompt_rows in by_prompt.values():
            if strategy == "top_per_prompt":
                picked.append(max(prompt_rows, key=lambda r: (numeric_reward(r), -draw(r))))
            else:
                picked.append(min(prompt_rows, key=draw))
        buckets: dict[str, list] = defaultdict(list)
        for row in sorted(picked, key=draw):
            buckets[_signature(row)].append(row)
        order = sorted(buckets.values(), key=lambda b: -len(b))
        selected = []
        while any(order) and len(selected) < target:
            for bucket in order:
                if bucket and len(selected) < target:
                    selected.append(bucket.pop(0))
    elif strategy == "top_k_overall":
        selected = sorted(eligible, key=lambda r: (-numeric_reward(r), draw(r)))[:target]
    else:
        selected = sorted(eligible, key=draw)[:target]
    if not selected:
        raise ExportError(
            "select_for_sft selected no rows ("
            + (", ".join(f"{k}: {v}" for k, v in dropped.items()) or "no rows given")
            + f"); min_reward={min_reward}"
        )
    effective = "pass_filter" if pass_filter else strategy
    if pass_filter:
        notes.append(
            "selection was only a pass filter: "
            + ("the median prompt has one eligible completion" if counts and statistics.median(counts) <= 1 else "every eligible reward is equal")
        )
    return SFTSelection(
        rows=[_clean(r) for r in selected],
        strategy=strategy,
        selection_effective=effective,
        n_eligible=len(eligible),
        n_prompts=len(by_prompt),
        mean_completions_per_prompt=mean_per_prompt,
        dropped=dict(dropped),
        notes=notes,
    )


# --------------------------------------------------------------------------------------
# DPO
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PreferencePairs(Result):
    """Chosen/rejected pairs of the same task with a score margin."""

    pairs: list = field(repr=False)  # never printed in full: the in-memory rows keep privileged
    n_tasks: int
    n_tasks_paired: int
    min_margin: float
    length_match: bool
    warnings: list
    dropped: dict

    def to_dict(self) -> dict:
        """JSON-safe, with the chosen/rejected rows scrubbed: the in-memory pairs keep the
        whole rows (``privileged`` included) for :func:`export_preference`, a serialised
        report must not carry the answer key."""
        out = super().to_dict()
        out["pairs"] = [_deep_scrub(_scrub_pair(pair)) for pair in out["pairs"]]
        return out

    def __str__(self) -> str:
        return f"{len(self.pairs)} preference pairs from {self.n_tasks_paired} of {self.n_tasks} tasks (min_margin {self.min_margin})"

    def __len__(self) -> int:
        return len(self.pairs)


def _scrub_pair(pair: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(pair)
    for side in ("chosen", "rejected"):
        if isinstance(out.get(side), Mapping):
            out[side] = _scrub(out[side])
    return out


def _reply_length(row: Mapping[str, Any]) -> int:
    return len(row.get("final_text") or "")


def _first_turn(row: Mapping[str, Any]) -> str:
    for step in row.get("steps") or []:
        if isinstance(step, Mapping) and "user" not in step:
            if "tool" in step:
                return canonical_json({"tool": step.get("tool"), "arguments": step.get("arguments")})
            return str(step.get("text", ""))
    return str(row.get("final_text", ""))


def build_preference_pairs(
    rows: Any,
    *,
    min_margin: float = 1.0,
    length_match: bool = False,
    max_pairs_per_prompt: int = 1,
    score: str = "reward",
) -> PreferencePairs:
    """Pair rollouts of one task: chosen scores at least ``min_margin`` above rejected.

    Rows with a non-ok ``judge_status``, no score, or a reply quoting their own privileged
    block (>= 12 characters) never pair. Within a task rows are
    ranked by score; each chosen row takes the first lower candidate with margin >=
    ``min_margin`` (with ``length_match=True``, the one closest in reply length, so the
    pair does not teach "longer is better"); each row is used once. ``same_prompt`` on a
    pair says whether both rollouts opened with the same prompt (a TRL export needs it; the
    report warns otherwise).

    Parameters
    ----------
    rows : list of dict, SimulationData, DataFrame, str or path
        Graded rows: a list of row dicts, anything with ``.rows``, a pandas DataFrame, or a
        path to a JSONL file.
    min_margin : float, optional
        The least score difference between chosen and rejected. The default 1.0 admits only
        1-vs-0 pairs; 0.5 admits partial credit; a margin <= 0 would pair ties and raises
        ValueError (:class:`ExportError`).
    length_match : bool, optional
        Default False takes the highest-scoring lower candidate with the margin; True takes
        the one closest in reply length, so the pair does not teach "longer is better".
    max_pairs_per_prompt : int, optional
        The most pairs made per task (rows grouped by task key), an integer >= 1; default 1.
    score : str, optional
        The row field holding the score; default ``"reward"``. Another name that no row
        carries raises :class:`ExportError`.

    Returns
    -------
    PreferencePairs
        The pairs (whole in-memory rows, for :func:`export_preference`), the tasks seen and
        paired, warnings and the rows dropped by reason.
    """
    if not isinstance(min_margin, (int, float)) or isinstance(min_margin, bool) or min_margin <= 0:
        raise ExportError(f"min_margin must be > 0 (a margin of 0 pairs ties), got {min_margin!r}")
    check_count("max_pairs_per_prompt", max_pairs_per_prompt, error=ExportError)
    source = as_row_list(rows)
    _check_score_field(source, score)
    dropped: Counter = Counter()
    by_task: dict[str, list[tuple[float, int, dict]]] = defaultdict(list)
    for index, row in enumerate(source):
        status = row.get("judge_status")
        if status is not None and status != "ok":
            dropped["judge_status_not_ok"] += 1
            continue
        value = numeric_reward(row, score)
        if value is None:
            dropped["no_score"] += 1
            continue
        if _row_quotes_privileged(row):
            # a reply quoting the answer key must not reach a preference file, chosen or rejected
            dropped["privileged_quote"] += 1
            continue
        by_task[task_key(row)].append((value, index, row))
    pairs = []
    for key, candidates in by_task.items():
        ranked = sorted(candidates, key=lambda c: (-c[0], c[1]))
        used: set[int] = set()
        made = 0
        for chosen_score, chosen_index, chosen in ranked:
            if made >= max_pairs_per_prompt:
                break
            if chosen_index in used:
                continue
            lower = [
                c for c in ranked if c[1] not in used and c[1] != chosen_index and chosen_score - c[0] >= min_margin - 1e-12
            ]
            if not lower:
                continue
            if length_match:
                rejected_score, rejected_index, rejected = min(
                    lower, key=lambda c: (abs(_reply_length(c[2]) - _reply_length(chosen)), c[1])
                )
            else:
                rejected_score, rejected_index, rejected = lower[0]
            used.update((chosen_index, rejected_index))
            made += 1
            pairs.append(
                {
                    "task": key,
                    "chosen": chosen,
                    "rejected": rejected,
                    "chosen_score": chosen_score,
                    "rejected_score": rejected_score,
                    "margin": chosen_score - rejected_score,
                    "chosen_model": chosen.get("model_version"),
                    "rejected_model": rejected.get("model_version"),
                    "same_policy": (chosen.get("policy_version"), chosen.get("model_version"))
                    == (rejected.get("policy_version"), rejected.get("model_version")),
                    "length_delta": _reply_length(chosen) - _reply_length(rejected),
                    "first_turn_differs": _first_turn(chosen) != _first_turn(rejected),
                    # simulated users and rephrasings open one task differently; such a pair
                    # has no shared prompt for TRL's prompt/chosen/rejected rows
                    "same_prompt": (chosen.get("prompt"), chosen.get("prefix")) == (rejected.get("prompt"), rejected.get("prefix")),
                    "reasons": {"chosen": chosen.get("reason"), "rejected": rejected.get("reason")},
                    "rejected_failure_class": rejected.get("failure_class"),
                    "lineage": {"chosen": chosen.get("lineage"), "rejected": rejected.get("lineage")},
                }
            )
    warnings = []
    if pairs:
        longer = sum(1 for p in pairs if p["length_delta"] > 0)
        # Two in three is where "chosen is longer" stops looking like chance on a few pairs
        # and starts being a length preference the model will learn.
        if longer / len(pairs) >= 2 / 3 and len(pairs) >= 3:
            warnings.append(
                f"chosen is longer in {longer} of {len(pairs)} pairs; DPO will learn length (try length_match=True)"
            )
        differing = sum(1 for p in pairs if p["first_turn_differs"])
        if differing < len(pairs):
            warnings.append(f"{len(pairs) - differing} pair(s) have identical first turns")
        if differing < 8:
            warnings.append(
                f"{differing} pair(s) differ on the first turn; hosted DPO compares first turns and needs >= 8"
            )
        other_prompt = sum(1 for p in pairs if not p["same_prompt"])
        if other_prompt:
            warnings.append(
                f"{other_prompt} of {len(pairs)} pair(s) join rollouts that opened with different prompts; "
                "export_preference(format='trl') needs a shared prompt and drops them"
            )
        if not all(p["same_policy"] for p in pairs):
            warnings.append("some pairs mix policies (chosen and rejected sampled by different models/prompts)")
        if any((p["chosen"].get("lineage") or {}).get("eval_run") for p in pairs):
            warnings.append("some rewards come from an eval run; training on eval-graded rows leaks the eval")
    return PreferencePairs(
        pairs=pairs,
        n_tasks=len(by_task),
        n_tasks_paired=len({p["task"] for p in pairs}),
        min_margin=float(min_margin),
        length_match=length_match,
        warnings=warnings,
        dropped=dict(dropped),
    )


def _common_prefix(a: list[dict], b: list[dict]) -> int:
    n = 0
    for x, y in zip(a, b):
        if canonical_json(x) != canonical_json(y):
            break
        n += 1
    return n


def _preference_cut(chosen: list[dict], rejected: list[dict]) -> int | None:
    """Where TRL's shared ``prompt`` ends: the longest common prefix, moved back until both
    completions start with an assistant turn. TRL's DPO scores the completions after the
    chat-templated prompt, so a completion must be a non-empty run of turns the model
    generates: an empty one (one conversation a prefix of the other) or one opening on a
    tool result would be scored as if the policy wrote it. None when no such cut exists
    (the two conversations differ before the first assistant turn: different prompts)."""
    cut = _common_prefix(chosen, rejected)
    while cut > 0:
        if (
            cut < len(chosen)
            and cut < len(rejected)
            and chosen[cut].get("role") == "assistant"
            and rejected[cut].get("role") == "assistant"
        ):
            return cut
        cut -= 1
    return None


def export_preference(
    pairs: PreferencePairs | Sequence[Mapping[str, Any]],
    path: str | Path | None = None,
    *,
    format: str = "openai",
    system_prompt: str | Mapping[str, str] | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Write preference pairs: full conversations (``openai``: ``chosen``/``rejected``
    message lists) or TRL's conversational triples (``trl``: shared ``prompt`` prefix,
    ``chosen`` and ``rejected`` completions, each starting with an assistant turn). Ties
    (equal scores or identical conversations) are dropped, and in TRL format so is a pair
    whose conversations differ before the first assistant turn (no shared prompt); an
    empty result raises :class:`ExportError`. Returns the records; writes JSONL when
    ``path`` is given.

    Parameters
    ----------
    pairs : PreferencePairs or sequence of dict
        From :func:`build_preference_pairs`, or pair dicts with ``chosen`` and ``rejected``
        rows and ``chosen_score`` / ``rejected_score``; the other keys of a pair ride along
        on its record.
    path : str, path or None, optional
        Where to write the records with :func:`write_jsonl`; default None writes nothing.
    format : {"openai", "trl"}, optional
        ``"openai"`` (default): full ``chosen``/``rejected`` conversations with tool-call
        arguments as JSON strings. ``"trl"``: shared ``prompt`` and the two completions, with
        arguments as dicts.
    system_prompt : str, mapping, list of dict or None, optional
        The system prompt to put first: a string for every row; ``{sha: text}`` or
        ``data.system_prompts`` (a list of ``{"sha", "text"}``), looked up by each row's
        ``lineage.system_prompt_sha``. Default None uses the row's ``system_prompt`` field,
        else the first system message of its ``messages``.
    tools : list of dict or None, optional
        Tool schemas attached to every record; default None attaches the chosen row's own
        ``tools`` field when it has one.

    Returns
    -------
    list of dict
        The records, scrubbed (``<think>`` blocks removed from assistant turns).

    Raises
    ------
    ExportError
        For an unknown ``format``, bad ``tools`` or ``system_prompt``, a side whose tool
        arguments do not decode to an object, or when nothing is left to write.
    """
    _check_format("format", format, _FORMATS)
    _check_tools(tools)
    _check_system_prompt(system_prompt)
    items = pairs.pairs if isinstance(pairs, PreferencePairs) else list(pairs)
    records = []
    n_ties = n_no_shared_prompt = 0
    for index, pair in enumerate(items):
        if pair["chosen_score"] <= pair["rejected_score"]:
            n_ties += 1
            continue
        built = []
        for side in ("chosen", "rejected"):
            row = pair[side]
            messages, problems = _wire_messages(
                _row_messages(row, _system_prompt_of(row, system_prompt)),
                arguments_as="dict" if format == "trl" else "string",
                strip_think=True,
                max_tool_output_chars=None,
                row_index=index,
            )
            if problems:
                raise ExportError(f"pair {index} {side}: " + "; ".join(problems))
            built.append(messages)
        chosen, rejected = built
        if canonical_json(chosen) == canonical_json(rejected):
            n_ties += 1
            continue
        meta = {
            k: v for k, v in pair.items() if k not in ("chosen", "rejected")
        }
        meta["schema_version"] = "1"
        if format == "openai":
            record = {"chosen": chosen, "rejected": rejected, **meta}
        else:
            cut = _preference_cut(chosen, rejected)
            if cut is None:
                n_no_shared_prompt += 1
                continue
            record = {"prompt": chosen[:cut], "chosen": chosen[cut:], "rejected": rejected[cut:], **meta}
        row_tools = tools if tools is not None else pair["chosen"].get("tools")
        if row_tools:
            record["tools"] = list(row_tools)
        records.append(_deep_scrub(_scrub(record)))
    if not records:
        raise ExportError(
            f"export_preference has nothing to write ({len(items)} pair(s), {n_ties} tie(s) dropped"
            + (
                f", {n_no_shared_prompt} without a shared prompt before the first assistant turn"
                if n_no_shared_prompt
                else ""
            )
            + ")"
        )
    if path is not None:
        write_jsonl(records, path)
    return records


# --------------------------------------------------------------------------------------
# GRPO
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RLSelection(Result, _Saveable):
    """Whole mixed groups in the pass-rate band, and what was dropped and why."""

    rows: list = field(repr=False)  # never printed in full; scrubbed when the cut was made
    groups: dict
    dropped_groups: dict
    dropped_rows: dict
    band: tuple
    n_source: int
    warnings: list
    hack_scan: Any = None
    group_pass_rates: dict = field(default_factory=dict)

    def __str__(self) -> str:
        return (
            f"{len(self.groups)} groups ({len(self.rows)} rows) kept in band {self.band[0]}-{self.band[1]} "
            f"from {self.n_source} rows; dropped groups: {dict(Counter(self.dropped_groups.values()))}"
        )


_TRUNCATED_MODES = ("drop", "keep", "penalize")
# simulate()'s modes (toolkit.sim.MODES); spelled out here so the export layer does not
# import the engine.
_RUN_MODES = ("explore", "sft", "rl", "adaptive")
_RL_ORDERS = ("spread", "middle")
# DAPO/TRL experience (#397): fewer than 32 mixed tasks gave grad_norm 0 in practice.
_MIN_MIXED_GROUPS = 32


def _truncated(row: Mapping[str, Any]) -> bool:
    return row.get("finish_reason") == "length" or any(
        isinstance(s, Mapping) and s.get("truncated") for s in row.get("steps") or []
    )


def _fault_kind(row: Mapping[str, Any]) -> str:
    faults = row.get("faults")
    if isinstance(faults, list):
        for fault in faults:
            if isinstance(fault, Mapping) and fault.get("mode"):
                return str(fault["mode"])
    if isinstance(faults, Mapping):
        for plan in faults.values():
            if isinstance(plan, Mapping) and plan.get("mode"):
                return str(plan["mode"])
    return "none"


def select_for_rl(
    rows: Any,
    *,
    band: tuple[float, float] = (0.2, 0.8),
    target: int = 1000,
    truncated: str = "drop",
    order: str = "spread",
    prior: Any = None,
    scan: bool = True,
    endorsed: Sequence[str] | None = None,
    seed: int = 0,
) -> RLSelection:
    """Keep whole mixed groups whose pass rate p lies in ``band`` (inclusive).

    A group is the rollouts of one task. Dropped, with the reason recorded per group:
    ``single`` (one rollout: no advantage to form), ``ungraded``, ``unanimous_pass`` /
    ``unanimous_fail`` (zero advantage, no gradient), ``too_easy`` (p > hi), ``too_hard``
    (p < lo), ``prior_solved`` / ``prior_unsolved`` (``prior=`` rows of the last round say
    the policy already solves the task > hi or never < lo). Rows are dropped first for a
    privileged leak, for truncation (``truncated="drop"``; ``"keep"`` marks them
    ``overlong``; ``"penalize"`` sets reward 0 and keeps ``reward_before_penalty``) and as
    exact duplicates within the group. Groups are ordered round-robin across fault kinds,
    then across pass rates (``spread``) or nearest 50% first (``middle``), and are never
    split: the last one may overshoot ``target``. Rows are stamped with ``calibration``
    from the pre-prune group, and :func:`toolkit.hack_scan` runs over the selection. A pass is
    a reward >= 0.5.

    Parameters
    ----------
    rows : list of dict, SimulationData, DataFrame, str or path
        Graded rows: a list of row dicts, anything with ``.rows``, a pandas DataFrame, or a
        path to a JSONL file.
    band : tuple of (float, float), optional
        ``(lo, hi)`` pass rates with 0 <= lo <= hi <= 1, both inclusive; default
        ``(0.2, 0.8)``. Also the thresholds of the ``prior`` rule.
    target : int, optional
        Rows to collect, an integer >= 1; default 1000. Groups are never split, so the last
        one may overshoot it; the groups after it are dropped as ``over_target``.
    truncated : {"drop", "keep", "penalize"}, optional
        What to do with a row cut at the token cap: ``"drop"`` (default) drops it,
        ``"keep"`` marks it ``overlong``, ``"penalize"`` sets its reward to 0 and keeps
        ``reward_before_penalty``.
    order : {"spread", "middle"}, optional
        Within each fault kind, ``"spread"`` (default) goes round-robin across pass rates,
        ``"middle"`` takes pass rates nearest 50% first.
    prior : rows or None, optional
        Rows of the last round (any form ``rows`` takes); a task whose 0/1 pass rate there
        is above ``hi`` or below ``lo`` is dropped as ``prior_solved`` / ``prior_unsolved``.
        Default None.
    scan : bool, optional
        Run :func:`toolkit.hack_scan` over the selection (grouped by task) and warn on a
        ``reward_hack`` regime; default True.
    endorsed : sequence of str or None, optional
        Passed to the scan: what the reward should pay for; without it the regime reads
        "unknown" whenever there is signal. Default None.
    seed : int, optional
        Breaks ties in the group order and seeds the scan's shuffles; default 0.

    Returns
    -------
    RLSelection
        The kept rows (scrubbed) and groups, the dropped groups and rows with reasons, the
        band, warnings and the scan.

    Raises
    ------
    ExportError
        For an unknown ``truncated`` or ``order``, a bad ``band`` or ``target``, or when no
        group is kept.
    """
    _check_format("truncated", truncated, _TRUNCATED_MODES)
    _check_format("order", order, _RL_ORDERS)
    lo, hi = _check_band(band)
    check_count("target", target, error=ExportError)
    source = as_row_list(rows)
    stamped = calibrate(source).rows
    dropped_rows: Counter = Counter()
    by_task: dict[str, list[dict]] = defaultdict(list)
    seen: dict[str, set[str]] = defaultdict(set)
    for row in stamped:
        key = task_key(row)
        if _row_quotes_privileged(row):
            dropped_rows["privileged_leak"] += 1
            continue
        row = dict(row)
        if _truncated(row):
            if truncated == "drop":
                dropped_rows["truncated"] += 1
                continue
            if truncated == "keep":
                row["overlong"] = True
            else:
                row["reward_before_penalty"] = row.get("reward")
                row["reward"] = 0.0
        fingerprint = canonical_json([row.get("steps"), row.get("final_text")])
        if fingerprint in seen[key]:
            dropped_rows["duplicate_in_group"] += 1
            continue
        seen[key].add(fingerprint)
        by_task[key].append(row)
    prior_rates: dict[str, float] = {}
    if prior is not None:
        prior_groups: dict[str, list[int]] = defaultdict(list)
        for row in as_row_list(prior, "prior"):
            b = binary_reward(row)
            if b is not None:
                prior_groups[task_key(row)].append(b)
        prior_rates = {k: sum(v) / len(v) for k, v in prior_groups.items() if v}
    dropped_groups: dict[str, str] = {}
    kept: dict[str, dict[str, Any]] = {}
    pass_rates: dict[str, float] = {}
    for key, group in by_task.items():
        rewards = [numeric_reward(r) for r in group]
        scored = [r for r in rewards if r is not None]
        if scored:
            pass_rates[key] = math.fsum(1.0 if r >= _PASS_THRESHOLD else 0.0 for r in scored) / len(scored)
        if len(group) < 2:
            dropped_groups[key] = "single"
            continue
        if any(r is None for r in rewards):
            dropped_groups[key] = "ungraded"
            continue
        if key in prior_rates and prior_rates[key] > hi:
            dropped_groups[key] = "prior_solved"
            continue
        if key in prior_rates and prior_rates[key] < lo:
            dropped_groups[key] = "prior_unsolved"
            continue
        if len(set(rewards)) == 1:
            dropped_groups[key] = "unanimous_pass" if rewards[0] >= _PASS_THRESHOLD else "unanimous_fail"
            continue
        p = math.fsum(1.0 if r >= _PASS_THRESHOLD else 0.0 for r in rewards) / len(rewards)
        if p > hi + 1e-12:
            dropped_groups[key] = "too_easy"
            continue
        if p < lo - 1e-12:
            dropped_groups[key] = "too_hard"
            continue
        kept[key] = {"rows": group, "pass_rate": p, "fault_kind": _fault_kind(group[0])}
    # order: round-robin across fault kinds, inside a kind by pass rate
    by_kind: dict[str, list[str]] = defaultdict(list)
    for key, info in kept.items():
        by_kind[info["fault_kind"]].append(key)
    for kind, keys in by_kind.items():
        tie = lambda k: stable_uniform("select_for_rl", seed, k)  # noqa: E731
        if order == "middle":
            keys.sort(key=lambda k: (abs(kept[k]["pass_rate"] - 0.5), tie(k)))
        else:
            rate_buckets: dict[float, list[str]] = defaultdict(list)
            for k in sorted(keys, key=tie):
                rate_buckets[kept[k]["pass_rate"]].append(k)
            spread = []
            queues = [rate_buckets[r] for r in sorted(rate_buckets)]
            while any(queues):
                for q in queues:
                    if q:
                        spread.append(q.pop(0))
            keys[:] = spread
    ordered: list[str] = []
    queues = [by_kind[k] for k in sorted(by_kind)]
    while any(queues):
        for q in queues:
            if q:
                ordered.append(q.pop(0))
    selected_rows: list[dict] = []
    groups_out: dict[str, dict[str, Any]] = {}
    for key in ordered:
        if len(selected_rows) >= target:
            dropped_groups[key] = "over_target"
            continue
        info = kept[key]
        selected_rows.extend(info["rows"])
        groups_out[key] = {"n": len(info["rows"]), "pass_rate": info["pass_rate"], "fault_kind": info["fault_kind"]}
    warnings = []
    if 0 < len(groups_out) < _MIN_MIXED_GROUPS:
        warnings.append(
            f"only {len(groups_out)} mixed group(s) in band; under {_MIN_MIXED_GROUPS} a GRPO step often has "
            "grad_norm 0 (#397)"
        )
    scan_result = None
    if scan and selected_rows:
        # the groups here are tasks (task_key), so the scan's asks are too: grouping by
        # prompt text would split a task whose rollouts open differently into singletons
        scan_result = hack_scan(selected_rows, endorsed=endorsed, group_by="task", seed=seed)
        if scan_result.regime == "reward_hack":
            warnings.append(f"hack_scan over the selection reads reward_hack: {scan_result.reading}")
    if not selected_rows:
        raise ExportError(
            "select_for_rl kept no group: "
            + (", ".join(f"{k}: {v}" for k, v in Counter(dropped_groups.values()).items()) or "no rows given")
            + (f"; rows dropped: {dict(dropped_rows)}" if dropped_rows else "")
        )
    return RLSelection(
        rows=[_clean(r) for r in selected_rows],
        groups=groups_out,
        dropped_groups=dropped_groups,
        dropped_rows=dict(dropped_rows),
        band=(lo, hi),
        n_source=len(source),
        warnings=warnings,
        hack_scan=scan_result,
        group_pass_rates=pass_rates,
    )


# --------------------------------------------------------------------------------------
# reward model
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RewardModelSet(Result, _Saveable):
    """Every graded row (passes and failures) with its reward, for a reward-model trainer."""

    rows: list = field(repr=False)  # never printed in full; scrubbed when the cut was made
    n_source: int
    n_ungraded: int
    n_pass: int
    n_fail: int
    warnings: list
    n_leaks: int = 0

    def __str__(self) -> str:
        return f"{len(self.rows)} reward-model rows ({self.n_pass} pass, {self.n_fail} fail; {self.n_ungraded} ungraded left out)"


def reward_model_set(
    rows: Any, *, system_prompt: str | Mapping[str, str] | None = None, tools: Sequence[Mapping[str, Any]] | None = None
) -> RewardModelSet:
    """All graded rows with a numeric reward and an ok judge status, as conversations
    (``messages`` in the OpenAI wire shape) plus ``reward``. Failures are the point of a
    reward model, so nothing is filtered on reward; a one-class set is warned about. A row
    whose reply quotes its own privileged block is left out (``n_leaks``): the answer key
    must not reach a training file in any cut. A row whose tool arguments do not decode to
    an object is left out and counted in ``n_ungraded``.

    Parameters
    ----------
    rows : list of dict, SimulationData, DataFrame, str or path
        Graded rows: a list of row dicts, anything with ``.rows``, a pandas DataFrame, or a
        path to a JSONL file.
    system_prompt : str, mapping, list of dict or None, optional
        The system prompt to put first: a string for every row; ``{sha: text}`` or
        ``data.system_prompts`` (a list of ``{"sha", "text"}``), looked up by each row's
        ``lineage.system_prompt_sha``. Default None uses the row's ``system_prompt`` field,
        else the first system message of its ``messages``.
    tools : list of dict or None, optional
        Tool schemas (dicts such as ``{"type": "function", "function": {...}}``) attached to
        every record; default None attaches each row's own ``tools`` field when it has one.

    Returns
    -------
    RewardModelSet
        The records (``messages``, ``reward`` and the row's other fields, scrubbed) and the
        pass, fail, ungraded and leak counts.

    Raises
    ------
    ExportError
        For bad ``tools`` or ``system_prompt``, or when no row qualifies.
    """
    _check_tools(tools)
    _check_system_prompt(system_prompt)
    source = as_row_list(rows)
    out = []
    n_ungraded = n_leaks = 0
    for index, row in enumerate(source):
        reward = numeric_reward(row)
        status = row.get("judge_status")
        if reward is None or (status is not None and status != "ok"):
            n_ungraded += 1
            continue
        if _row_quotes_privileged(row):
            n_leaks += 1
            continue
        messages, problems = _wire_messages(
            _row_messages(row, _system_prompt_of(row, system_prompt)),
            arguments_as="string",
            strip_think=True,
            max_tool_output_chars=None,
            row_index=index,
        )
        if problems:
            n_ungraded += 1
            continue
        meta = _clean({k: v for k, v in row.items() if k not in _CONVERSATION_FIELDS})
        meta.update({"schema_version": "1", "messages": messages, "reward": reward})
        row_tools = tools if tools is not None else row.get("tools")
        if row_tools:
            meta["tools"] = list(row_tools)
        out.append(_deep_scrub(meta))
    if not out:
        raise ExportError(f"reward_model_set has no graded rows ({n_ungraded} ungraded or not ok)")
    n_pass = sum(1 for r in out if r["reward"] >= _PASS_THRESHOLD)
    warnings = []
    if n_leaks:
        warnings.append(f"{n_leaks} row(s) left out: a reply quotes the row's privileged block (answer key)")
    if n_pass in (0, len(out)):
        warnings.append("every row is on one side of 0.5; a reward model cannot learn a boundary from one class")
    return RewardModelSet(
        rows=out, n_source=len(source), n_ungraded=n_ungraded, n_pass=n_pass, n_fail=len(out) - n_pass,
        warnings=warnings, n_leaks=n_leaks,
    )


# --------------------------------------------------------------------------------------
# publish gate
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PublishGateReport(RowsResult):
    ok: bool
    rl_shaped: bool
    refusals: list
    warnings: list
    n_rows: int
    n_graded: int
    signal: dict
    calibration: dict
    duplicates: int
    lengths: dict
    correlations: dict
    hack_scan: Any
    judge_trust: Any
    rows: list = field(repr=False, default_factory=list)

    def __str__(self) -> str:
        verdict = "ok" if self.ok else "refused: " + ", ".join(self.refusals)
        return f"publish gate {verdict} ({self.n_rows} rows, {'RL' if self.rl_shaped else 'explore'}-shaped, {len(self.warnings)} warnings)"


def publish_gate(
    rows: Any,
    *,
    strict: bool = True,
    strict_hacks: bool = False,
    band: tuple[float, float] = (0.2, 0.8),
    mode: str | None = None,
    scan: bool = True,
    endorsed: Sequence[str] | None = None,
    seed: int = 0,
) -> PublishGateReport:
    """Check rows before they are published as training data.

    RL-shaped means ``mode="rl"`` or any task repeated. Refusals (raise
    :class:`PublishGateError` when ``strict``): ``ungraded_rl_rows`` (no 0/1 reward at all),
    ``no_mixed_groups`` (every repeated task unanimous: zero advantage everywhere) and,
    with ``strict_hacks``, a ``reward_hack`` regime from :func:`toolkit.hack_scan`.
    Warnings never prune: mixed asks outside the band, unanimous asks, duplicates,
    carried calibrations, near-duplicate prompts, length-reward correlation. Every graded
    row is stamped with ``calibration`` (the returned ``.rows``). Explore-shaped data
    passes with the stamp. When any row carries ``gold_reward``, :func:`toolkit.judge_trust`
    runs as context (never a gate).

    Parameters
    ----------
    rows : list of dict, SimulationData, DataFrame, str or path
        Graded rows: a list of row dicts, anything with ``.rows``, a pandas DataFrame, or a
        path to a JSONL file.
    strict : bool, optional
        Raise :class:`PublishGateError` (carrying the report) on any refusal; default True.
        False returns the report with ``ok=False`` instead.
    strict_hacks : bool, optional
        Make a ``reward_hack`` regime of the scan a refusal rather than a warning; default
        False. Needs ``scan``.
    band : tuple of (float, float), optional
        ``(lo, hi)`` pass rates, 0 <= lo <= hi <= 1; default ``(0.2, 0.8)``. Only warns about
        mixed asks outside it; nothing is pruned.
    mode : {"explore", "sft", "rl", "adaptive"} or None, optional
        The run's mode; ``"rl"`` makes the data RL-shaped even without a repeated task. The
        other values are checked but have no further effect. Default None.
    scan : bool, optional
        Run :func:`toolkit.hack_scan` (grouped by task) over the graded rows of RL-shaped
        data; default True.
    endorsed : sequence of str or None, optional
        Passed to the scan: what the reward should pay for. Default None.
    seed : int, optional
        Seed of the scan's shuffles; default 0.

    Returns
    -------
    PublishGateReport
        ``ok``, refusals, warnings, group signal, calibration counts, duplicates, lengths,
        the length-reward correlation, the scan, the trust audit and the stamped rows.

    Raises
    ------
    PublishGateError
        With ``strict=True`` when a refusal applies.
    ExportError
        For an unknown ``mode``, a bad ``band``, or no rows.
    """
    if mode is not None:
        _check_format("mode", mode, _RUN_MODES)
    lo, hi = _check_band(band)
    source = as_row_list(rows)
    if not source:
        raise ExportError("publish_gate got no rows")
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in source:
        groups[task_key(row)].append(row)
    rl_shaped = mode == "rl" or any(len(g) > 1 for g in groups.values())
    graded = [r for r in source if binary_reward(r) is not None]
    calibration = calibrate(source)
    refusals: list[str] = []
    warnings: list[str] = []
    n_mixed = n_unanimous = n_out_of_band = 0
    for group in groups.values():
        values = [binary_reward(r) for r in group]
        values = [v for v in values if v is not None]
        if len(values) < 2:
            continue
        if len(set(values)) == 1:
            n_unanimous += 1
        else:
            n_mixed += 1
            p = sum(values) / len(values)
            if not lo <= p <= hi:
                n_out_of_band += 1
    signal = {"n_groups": len(groups), "n_mixed": n_mixed, "n_unanimous": n_unanimous, "n_out_of_band": n_out_of_band}
    if rl_shaped:
        if not graded:
            refusals.append("ungraded_rl_rows")
        elif n_mixed == 0:
            refusals.append("no_mixed_groups")
    if n_out_of_band:
        warnings.append(f"{n_out_of_band} mixed ask(s) outside the band {lo}-{hi}")
    if n_unanimous and rl_shaped:
        warnings.append(f"{n_unanimous} unanimous ask(s) present; they carry no GRPO gradient")
    fingerprints = Counter(canonical_json([r.get("prompt"), r.get("steps"), r.get("final_text")]) for r in source)
    duplicates = sum(c - 1 for c in fingerprints.values() if c > 1)
    if duplicates:
        warnings.append(f"{duplicates} duplicate row(s)")
    prompts = [_normalise_text(str(r.get("prompt", ""))) for r in source]
    distinct_prompts = set(prompts)
    near = len({p for p in distinct_prompts}) - len({re.sub(r"[^a-z ]", "", p) for p in distinct_prompts})
    if near > 0:
        warnings.append(f"{near} near-duplicate prompt(s) (differ only in digits/punctuation)")
    if calibration.n_ungraded and graded:
        warnings.append(
            f"{calibration.n_ungraded} row(s) have no 0/1 reward and carry no calibration stamp"
        )
    if calibration.n_carried:
        warnings.append(f"{calibration.n_carried} row(s) carry a calibration from a larger, pruned group")
    lengths = [len(r.get("final_text") or "") for r in graded]
    length_info = {
        "median_chars": statistics.median(lengths) if lengths else None,
        "max_chars": max(lengths) if lengths else None,
    }
    correlations: dict[str, float | None] = {"length_reward": None}
    if len(graded) >= 3 and len(set(lengths)) > 1 and len({binary_reward(r) for r in graded}) > 1:
        from scipy import stats as _st

        rho = float(_st.pearsonr(lengths, [binary_reward(r) for r in graded])[0])
        correlations["length_reward"] = rho
        # 0.3 is the reference's "judge pays for length/fluency" threshold (docs/design/engine.md §6.7).
        if abs(rho) >= 0.3:
            warnings.append(f"reply length correlates with reward (r = {rho:.2f}); check the judge for a length bias")
    scan_result = None
    if scan and graded and rl_shaped:
        scan_result = hack_scan(graded, endorsed=endorsed, group_by="task", seed=seed)  # asks = the gate's task groups
        if scan_result.regime == "reward_hack":
            if strict_hacks:
                refusals.append("reward_hack")
            else:
                warnings.append(f"hack_scan reads reward_hack: {scan_result.reading}")
    trust = None
    if any("gold_reward" in r for r in source):
        try:
            from toolkit.grading import judge_trust

            trust = judge_trust(source).to_dict()
        except ToolkitError as exc:  # judge trust is context here, not a gate
            warnings.append(f"judge_trust could not run: {exc}")
    report = PublishGateReport(
        ok=not refusals,
        rl_shaped=rl_shaped,
        refusals=refusals,
        warnings=warnings,
        n_rows=len(source),
        n_graded=len(graded),
        signal=signal,
        calibration={"n_stamped": calibration.n_stamped, "n_carried": calibration.n_carried},
        duplicates=duplicates,
        lengths=length_info,
        correlations=correlations,
        hack_scan=scan_result,
        judge_trust=trust,
        rows=calibration.rows,
    )
    if refusals and strict:
        raise PublishGateError(
            "publish gate refused: " + ", ".join(refusals) + (
                " (no 0/1 reward on any row; grade first)" if "ungraded_rl_rows" in refusals else ""
            ) + (
                " (every repeated task is unanimous: no GRPO gradient)" if "no_mixed_groups" in refusals else ""
            ),
            report,
        )
    return report


# --------------------------------------------------------------------------------------
# decontamination
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DecontaminationReport(Result, _Saveable):
    rows: list = field(repr=False)  # never printed in full; scrubbed when the cut was made
    flagged: list
    rules_run: list
    rules_skipped: dict
    n_source: int
    semantic_p99: float | None
    note: str | None = None
    rules_partial: dict = field(default_factory=dict)

    def __str__(self) -> str:
        skipped = f"; skipped: {', '.join(self.rules_skipped)}" if self.rules_skipped else ""
        if self.rules_partial:
            skipped += f"; partial: {', '.join(self.rules_partial)}"
        return f"{len(self.flagged)} of {self.n_source} rows flagged as contaminated, {len(self.rows)} kept{skipped}"


def _row_text(row: Mapping[str, Any]) -> str:
    """The ask a row poses: its ``prompt``, else the first user message of ``messages``
    (an eval set in chat form has no prompt field), else ""."""
    prompt = row.get("prompt")
    if isinstance(prompt, str) and prompt.strip():
        return prompt
    for message in row.get("messages") or []:
        if isinstance(message, Mapping) and message.get("role") == "user" and isinstance(message.get("content"), str):
            return message["content"]
    return ""


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def decontaminate(
    rows: Any,
    against: Any,
    *,
    n: int = 8,
    overlap: float = 0.8,
    embedder: Callable[[list[str]], Any] | None = None,
    similarity: float = 0.85,
) -> DecontaminationReport:
    """Drop rows that copy an evaluation set ``against``; report what could not be checked.

    Rules, in order: ``same_task`` (a shared scenario_id / task_id; skipped and named in
    ``rules_skipped`` when the ids are absent on either side), ``exact`` (normalised prompt
    text equal), ``near_copy`` (one eval text covers >= ``overlap`` of the row's words
    through shared ``n``-grams; rows shorter than ``n`` words get the exact rule only) and
    ``semantic`` (cosine >= ``similarity`` between embeddings of rows with different task
    ids, only with ``embedder``; otherwise skipped).
    ``semantic_p99`` is the 99th percentile of distinct-task similarity, to calibrate the
    threshold. A row's text is its ``prompt``, else its first user message; an empty text
    never matches.

    Nothing unchecked passes silently (#488): a rule that could not run at all is in
    ``rules_skipped`` (rule -> why), a rule that ran on only some rows is in
    ``rules_partial`` (rule -> how many rows it could not check), and ``note`` says both in
    words. No rows, an empty ``against`` or a result with no row left raise
    :class:`ExportError`.

    Parameters
    ----------
    rows : list of dict, SimulationData, DataFrame, str or path
        Graded rows: a list of row dicts, anything with ``.rows``, a pandas DataFrame, or a
        path to a JSONL file.
    against : list of dict, SimulationData, DataFrame, str or path
        The evaluation set, in the same forms.
    n : int, optional
        Word n-gram length of the ``near_copy`` rule, an integer >= 1; default 8.
    overlap : float, optional
        Share of a row's words, in (0, 1], that one eval text must cover for ``near_copy``;
        default 0.8.
    embedder : callable or None, optional
        ``list[str] -> array (n, d)``, called once on the row texts and once on the eval
        texts; enables the ``semantic`` rule. Default None skips it.
    similarity : float, optional
        Cosine threshold in [-1, 1] of the ``semantic`` rule; default 0.85.

    Returns
    -------
    DecontaminationReport
        The kept rows (scrubbed), the flagged rows with their rule, the rules run, skipped
        and partial, and ``semantic_p99``.

    Raises
    ------
    ExportError
        For a bad ``n``, ``overlap`` or ``similarity``, an embedder result of the wrong
        shape, and as above.
    """
    check_count("n", n, error=ExportError)
    if isinstance(overlap, bool) or not isinstance(overlap, (int, float)) or not 0 < overlap <= 1:
        raise ExportError(f"overlap must be in (0, 1], got {overlap!r}")
    if isinstance(similarity, bool) or not isinstance(similarity, (int, float)) or not -1 <= similarity <= 1:
        raise ExportError(f"similarity is a cosine threshold and must be in [-1, 1], got {similarity!r}")
    source = as_row_list(rows)
    evals = as_row_list(against, "against")
    if not source:
        raise ExportError("decontaminate got no rows")
    if not evals:
        # an empty eval set checks nothing; passing every row would read as "clean"
        raise ExportError("against is empty: there is no evaluation set to decontaminate against")
    rules_run: list[str] = []
    rules_skipped: dict[str, str] = {}
    partial: dict[str, str] = {}
    flags: dict[int, str] = {}

    def ids(row: Mapping[str, Any]) -> set[str]:
        return {str(row[f]) for f in ("scenario_id", "task_id") if row.get(f) not in (None, "")}

    eval_ids = set().union(*(ids(r) for r in evals))
    row_has_ids = any(ids(r) for r in source)
    if not eval_ids or not row_has_ids:
        side = "the eval set" if not eval_ids else "the rows"
        rules_skipped["same_task"] = f"no scenario_id/task_id on {side}"
    else:
        rules_run.append("same_task")
        n_without_ids = sum(1 for r in source if not ids(r))
        if n_without_ids:
            partial["same_task"] = f"{n_without_ids} row(s) without scenario_id/task_id not checked"
        for i, row in enumerate(source):
            if ids(row) & eval_ids:
                flags.setdefault(i, "same_task")
    # An empty text never matches: two rows without an ask are not copies of each other.
    row_texts = [_normalise_text(_row_text(r)) for r in source]
    eval_texts = [t for t in (_normalise_text(_row_text(r)) for r in evals) if t]
    n_no_text = sum(1 for t in row_texts if not t)
    if not eval_texts or n_no_text == len(source):
        reason = "no prompt or user message on " + ("the eval set" if not eval_texts else "the rows")
        rules_skipped["exact"] = reason
        rules_skipped["near_copy"] = reason
    else:
        if n_no_text:
            partial["exact"] = f"{n_no_text} row(s) without a prompt or user message not checked"
        exact = set(eval_texts)
        rules_run.append("exact")
        for i, text in enumerate(row_texts):
            if i not in flags and text and text in exact:
                flags[i] = "exact"
        eval_word_lists = [_words(t) for t in eval_texts]
        eval_grams = [g for g in ({tuple(w[j : j + n]) for j in range(len(w) - n + 1)} for w in eval_word_lists) if g]
        row_words = [_words(t) for t in row_texts]
        n_short = sum(1 for w in row_words if 0 < len(w) < n)
        if not eval_grams:
            rules_skipped["near_copy"] = f"every eval text is shorter than n={n} words"
        elif not any(len(w) >= n for w in row_words):
            rules_skipped["near_copy"] = f"every row is shorter than n={n} words (the exact rule still ran)"
        else:
            rules_run.append("near_copy")
            if n_short:
                partial["near_copy"] = f"{n_short} row(s) shorter than n={n} words got the exact rule only"
            if n_no_text:
                partial["near_copy"] = "; ".join(
                    p for p in (partial.get("near_copy"), f"{n_no_text} row(s) without text not checked") if p
                )
            for i, words in enumerate(row_words):
                if i in flags or len(words) < n:
                    continue
                grams = [tuple(words[j : j + n]) for j in range(len(words) - n + 1)]
                for eg in eval_grams:
                    covered = [False] * len(words)
                    for j, gram in enumerate(grams):
                        if gram in eg:
                            for t in range(j, j + n):
                                covered[t] = True
                    if sum(covered) / len(words) >= overlap:
                        flags[i] = "near_copy"
                        break
    p99 = None
    if embedder is None:
        rules_skipped["semantic"] = "no embedder= given"
    else:
        import numpy as np

        row_vectors = np.asarray(embedder([_row_text(r) for r in source]), dtype=float)
        eval_vectors = np.asarray(embedder([_row_text(r) for r in evals]), dtype=float)
        for label, vectors, expected in (("rows", row_vectors, len(source)), ("against", eval_vectors, len(evals))):
            if vectors.ndim != 2 or vectors.shape[0] != expected:
                raise ExportError(
                    f"embedder must return an array of shape (n_texts, dim); for {label} it returned shape "
                    f"{vectors.shape} for {expected} texts"
                )
        rules_run.append("semantic")

        def unit(m):
            norms = np.linalg.norm(m, axis=1, keepdims=True)
            return m / np.where(norms == 0, 1, norms)

        sims = unit(row_vectors) @ unit(eval_vectors).T
        distinct = []
        for i, row in enumerate(source):
            for j, ev in enumerate(evals):
                if ids(row) and ids(row) & ids(ev):
                    continue
                distinct.append(sims[i, j])
                if i not in flags and sims[i, j] >= similarity:
                    flags[i] = "semantic"
        p99 = float(np.percentile(distinct, 99)) if distinct else None
    kept = [_clean(r) for i, r in enumerate(source) if i not in flags]
    flagged = [
        {"index": i, "rule": rule, "task": task_key(source[i])} for i, rule in sorted(flags.items())
    ]
    if not kept:
        raise ExportError(f"decontaminate removed every row ({len(flagged)} flagged); nothing left to export")
    notes = []
    if rules_skipped:
        notes.append("rules that could not run: " + "; ".join(f"{k} ({v})" for k, v in rules_skipped.items()))
    if partial:
        notes.append("rules run on part of the rows: " + "; ".join(f"{k} ({v})" for k, v in partial.items()))
    return DecontaminationReport(
        rows=kept,
        flagged=flagged,
        rules_run=rules_run,
        rules_skipped=rules_skipped,
        n_source=len(source),
        semantic_p99=p99,
        note="; ".join(notes) if notes else None,
        rules_partial=partial,
    )
