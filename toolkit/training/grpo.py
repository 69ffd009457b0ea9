"""GRPO: :func:`select_for_rl` keeps whole mixed groups whose pass rate sits in a band.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolkit._util.hashing import canonical_json, stable_uniform
from toolkit._util.keys import binary_reward, numeric_reward, task_key
from toolkit._util.results import Result
from toolkit._util.validate import check_count
from toolkit.errors import ExportError
from toolkit.grading import hack_scan
from toolkit.logprobs import calibrate
from toolkit.rows._read import as_row_list
from toolkit.training._common import _PASS_THRESHOLD, _check_band, _check_format, _clean, _row_quotes_privileged, _Saveable

__all__ = ["RLSelection", "select_for_rl"]

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


