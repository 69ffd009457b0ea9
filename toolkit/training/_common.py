"""Helpers every training cut shares: scrubbing and privileged-leak checks, argument checks, the chat message shape, JSONL writing.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from toolkit._util.hashing import canonical_json
from toolkit._util.keys import numeric_reward, task_key
from toolkit.errors import ExportError, unknown_name_message
from toolkit.rows import messages_from_steps, scrub

__all__ = ["write_jsonl"]

# Fields that are the conversation itself; a training row rebuilds them as `messages`.
_CONVERSATION_FIELDS = ("steps", "final_text", "messages", "prompt")
# The teacher-only keys docs/design/engine.md §8 strips at any depth.
_PRIVILEGED_KEYS = ("privileged", "principle", "hidden_state", "reference", "rubric", "vector")
# A whole privileged string of >= 12 characters (an id, a short answer) or a run of >= 8
# consecutive words of a longer one counts as quoted (see _LeakCheck for why not 12 chars).
_LEAK_QUOTE_CHARS = 12
_LEAK_QUOTE_WORDS = 8
_THINK_BLOCK = re.compile(r"<think>.*?</think>\s*", re.DOTALL | re.IGNORECASE)
_TRUNCATION_MARKER = "\n[... tool output cut at {n} characters by toolkit.training ...]"
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


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())
