"""SFT: :func:`training_rows` (chat samples with loss masks) and :func:`select_for_sft` (which rows go in).
"""

from __future__ import annotations

import copy
import statistics
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolkit._util.hashing import canonical_json, stable_uniform
from toolkit._util.keys import numeric_reward, task_key
from toolkit._util.results import Result
from toolkit._util.validate import check_count
from toolkit.errors import ExportError
from toolkit.rows._read import as_row_list
from toolkit.training._common import (
    _CONVERSATION_FIELDS,
    _FORMATS,
    _MASK_MODES,
    _PASS_THRESHOLD,
    _check_format,
    _check_system_prompt,
    _check_tools,
    _clean,
    _deep_scrub,
    _group_fields,
    _loss_mask,
    _row_messages,
    _row_quotes_privileged,
    _Saveable,
    _system_prompt_of,
    _wire_messages,
)

__all__ = ["TrainingSet", "SFTSelection", "training_rows", "select_for_sft"]

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


