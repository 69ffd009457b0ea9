"""DPO: :func:`build_preference_pairs` (a better and a worse rollout of one task) and :func:`export_preference` (OpenAI or TRL files).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit._util.hashing import canonical_json
from toolkit._util.keys import numeric_reward, task_key
from toolkit._util.results import Result
from toolkit._util.validate import check_count
from toolkit.errors import ExportError
from toolkit.rows._read import as_row_list
from toolkit.training._common import (
    _FORMATS,
    _check_format,
    _check_score_field,
    _check_system_prompt,
    _check_tools,
    _deep_scrub,
    _row_messages,
    _row_quotes_privileged,
    _scrub,
    _system_prompt_of,
    _wire_messages,
    write_jsonl,
)

__all__ = ["PreferencePairs", "build_preference_pairs", "export_preference"]

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


