""":func:`decontaminate`: remove rows that copy an evaluation set, listing every rule it could not run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolkit._util.keys import task_key
from toolkit._util.results import Result
from toolkit._util.validate import check_count
from toolkit.errors import ExportError
from toolkit.rows._read import as_row_list
from toolkit.training._common import _clean, _normalise_text, _Saveable, _words

__all__ = ["DecontaminationReport", "decontaminate"]

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
