""":func:`publish_gate`: refuse RL-shaped data that cannot train (no rewards, no mixed group).
"""

from __future__ import annotations

import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from toolkit._util.hashing import canonical_json
from toolkit._util.keys import binary_reward, task_key
from toolkit.errors import ExportError, PublishGateError, ToolkitError
from toolkit.grading import hack_scan
from toolkit.logprobs import calibrate
from toolkit.rows._read import as_row_list
from toolkit.rows._results import RowsResult
from toolkit.training._common import _check_band, _check_format, _normalise_text
from toolkit.training.grpo import _RUN_MODES

__all__ = ["PublishGateReport", "publish_gate"]

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


