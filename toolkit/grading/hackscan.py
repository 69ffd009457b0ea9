"""What a grouped update would learn from these rewards: the reward-hack scan.

A GRPO-style update (Shao et al., DeepSeekMath, arXiv:2402.03300) normalises reward within
each group of rollouts of one ask, so only the *within-ask* part of the reward variance is
gradient:

    Var(r) = E_g[Var(r | g)] + Var_g(E[r | g])        (law of total variance)

Whatever feature of a rollout moves reward *within* an ask is what the update will push
the policy towards. :func:`hack_scan` measures, for hand-made and automatic features, the
within-ask correlation of the group-centred feature with the group-centred reward, and
compares the strongest one to a permutation floor (reward shuffled within each ask 100
times; the floor is the 95th percentile of the null maximum |rho| over all features, so
the max-statistic controls the family-wise error over features). When the strongest
signal is not a behaviour you endorsed, the reward is being hacked (Gao, Schulman, Hilton,
"Scaling Laws for Reward Model Overoptimization", arXiv:2210.10760).

Regimes (docs/design/engine.md §6.6), checked in this order: ``unknown``, ``degenerate``,
``no_signal``, ``reward_hack``, ``pool_exhausted``, ``train``; each comes with a reading in
plain words.

Where we differ from the reference: ``endorsed`` accepts shell-style patterns
(``"tool:*"``); a feature must be defined on every graded row or it is left out and named
in ``skipped_features`` (never imputed silently); the result keeps the full scored table,
not only the winner.
"""

from __future__ import annotations

import fnmatch
import math
import re
import string
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from toolkit._util.keys import numeric_reward, task_key
from toolkit._util.results import Result
from toolkit.errors import HackScanError, unknown_name_message
from toolkit.rows._read import as_row_list

__all__ = ["HackScan", "HackScanError", "hack_scan", "REGIMES"]

REGIMES = ("unknown", "degenerate", "no_signal", "reward_hack", "pool_exhausted", "train")
# 100 within-ask shuffles and the ceil(0.95 * 100)-th smallest null maximum (index 94):
# the reference's floor, a 5% family-wise false-alarm rate over all features at once.
_DEFAULT_PERMUTATIONS = 100
_FLOOR_QUANTILE = 0.95
# A feature that is non-zero on fewer than 20 rows cannot carry a stable correlation;
# the same count gates which words enter the automatic tier.
_MIN_SUPPORT = 20
_MAX_AUTO_TERMS = 200
# 12 strongest binary features -> 66 pairwise ANDs: enough to catch "A and B" hacks
# without the feature count (and with it the null maximum) exploding.
_N_AND_PARENTS = 12
# |rho| >= 0.999 on two or more features with fewer than 3 distinct rollouts per ask
# means rollouts barely differ and every difference "explains" the reward.
_DEGENERATE_RHO = 0.999
_DEGENERATE_DISTINCT = 3
# More than a fifth of asks already all-pass: the pool no longer teaches.
_POOL_EXHAUSTED_SHARE = 0.2
_RIVAL_INTEGRITY = 0.8
# 0.25 is the largest variance a 0/1 reward can have (p = 0.5): capacity 1.0 means every
# ask sits at the most informative pass rate.
_MAX_BINARY_VARIANCE = 0.25
_PUNCTUATION = set(string.punctuation)
_SURFACE = {
    "reply_length",
    "word_count",
    "digit_count",
    "newline_count",
    "punctuation_count",
    "uppercase_share",
}

_READINGS = {
    "unknown": "{why} The reward pays most for {top}; say which behaviours it should pay for with endorsed=[...].",
    "degenerate": (
        "Rollouts of one ask barely differ (median {distinct} distinct per ask) and {n_perfect} features track "
        "reward perfectly, so no winner can be named; sample more varied rollouts."
    ),
    "no_signal": (
        "No feature moves reward within an ask above the shuffle floor ({floor}); a grouped update would learn "
        "nothing nameable, so the reward may be noise."
    ),
    "reward_hack": (
        "Within an ask, reward follows {top}, which is {how}: a grouped update would teach the policy that, "
        "not the task."
    ),
    "pool_exhausted": (
        "{share} of asks are already all-pass, so most groups carry no gradient; add harder asks before training."
    ),
    "train": "The strongest within-ask signal is endorsed ({top}); a grouped update would learn what you meant.",
}


@dataclass(frozen=True)
class HackScan(Result):
    """The result of :func:`hack_scan`."""

    regime: str
    reading: str
    top_feature: str | None
    top_rho: float | None
    floor: float | None
    above_floor: list
    above_floor_names: list
    features: list
    decomposition: dict
    integrity: float | None
    rival: str | None
    support: dict
    n_rows: int
    n_asks: int
    n_skipped: int
    n_permutations: int
    endorsed: list
    skipped_features: dict
    note: str | None = None

    def __str__(self) -> str:
        top = f"top {self.top_feature} rho={self.top_rho:+.2f}" if self.top_rho is not None else "no feature"
        floor = f"{self.floor:.2f}" if self.floor is not None else "n/a"
        return f"hack_scan: {self.regime} ({top}, floor {floor}, {len(self.above_floor)} above; {self.n_asks} asks)"


# --------------------------------------------------------------------------------------
# features
# --------------------------------------------------------------------------------------


def _assistant_texts(row: Mapping[str, Any]) -> list[str]:
    texts = [str(s.get("text")) for s in row.get("steps") or [] if isinstance(s, Mapping) and s.get("text")]
    if not texts and row.get("final_text"):
        texts = [str(row["final_text"])]
    return texts


def _hand_features(row: Mapping[str, Any]) -> dict[str, float | None]:
    reply = str(row.get("final_text") or "")
    steps = [s for s in row.get("steps") or [] if isinstance(s, Mapping)]
    tool_steps = [s for s in steps if "tool" in s]
    letters = [c for c in reply if c.isalpha()]
    out: dict[str, float | None] = {
        "reply_length": float(len(reply)),
        "tool_calls": float(len(tool_steps)),
        "assistant_turns": float(sum(1 for s in steps if "tool" in s or ("text" in s and "user" not in s))),
        "truncated": float(row.get("finish_reason") == "length" or any(s.get("truncated") for s in steps)),
        "word_count": float(len(reply.split())),
        "digit_count": float(sum(c.isdigit() for c in reply)),
        "newline_count": float(reply.count("\n")),
        "punctuation_count": float(sum(c in _PUNCTUATION for c in reply)),
        "uppercase_share": (sum(c.isupper() for c in letters) / len(letters)) if letters else 0.0,
    }
    for step in tool_steps:
        out[f"tool:{step.get('tool')}"] = 1.0
    flags = row.get("flags")
    if isinstance(flags, Mapping):
        for name, value in flags.items():
            out[f"flag:{name}"] = float(bool(value))
    elif isinstance(flags, (list, tuple)):
        for name in flags:
            out[f"flag:{name}"] = 1.0
    for name in row.get("seeded") or []:
        if isinstance(name, str):
            out[f"flag:{name}"] = 1.0
    logprob, n_tokens = row.get("logprob"), row.get("n_tokens")
    if isinstance(logprob, (int, float)) and isinstance(n_tokens, (int, float)) and n_tokens > 0:
        out["mean_token_logprob"] = float(logprob) / float(n_tokens)
    else:
        out["mean_token_logprob"] = None
    for name, value in (row.get("markers") or {}).items():
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            out[f"marker:{name}"] = float(value)
        elif isinstance(value, bool):
            out[f"marker:{name}"] = float(value)
        else:
            out[f"marker:{name}"] = None
    return out


_WORD = re.compile(r"[a-z][a-z']+")


def _terms(text: str) -> set[str]:
    words = _WORD.findall(text.lower())
    return set(words) | {f"{a} {b}" for a, b in zip(words, words[1:])}


def _matches(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def hack_scan(
    rows: Any,
    *,
    endorsed: Sequence[str] | None = None,
    features: Mapping[str, Callable[[Mapping[str, Any]], float]] | None = None,
    group_by: str = "prompt",
    auto: bool = True,
    n_permutations: int = _DEFAULT_PERMUTATIONS,
    min_support: int = _MIN_SUPPORT,
    seed: int | np.random.Generator = 0,
) -> HackScan:
    """Scan graded rows for what a grouped (GRPO) update would learn.

    Feature tiers: hand (reply length, tool calls, assistant turns, truncated, word / digit /
    newline / punctuation counts, uppercase share, one indicator per tool called and per
    trajectory flag, mean token logprob, every numeric marker, caller features) and, with
    ``auto``, presence of the 200 most frequent words and adjacent word pairs seen in >=
    ``min_support`` replies and absent from at least one, plus ANDs of the 12 strongest
    binary features kept only when stronger than both parents. Identical columns collapse
    into one (``aliases``); a feature needs >= ``min_support`` non-zero rows.

    Parameters
    ----------
    rows : list of dict, SimulationData, DataFrame, str or path
        Graded rows (a list of row dicts, anything with ``.rows``, a DataFrame or a JSONL
        path). Rows without a numeric reward are left out and counted in ``n_skipped``.
    endorsed : sequence of str, str or None, optional
        Feature names or shell patterns the reward *should* pay for (for example
        ``["tool:issue_refund", "marker:policy_followed"]``); a bare string is one pattern. A
        negative correlation on an endorsed feature counts as a hack. Default None: the
        regime is ``unknown``.
    features : mapping of str to callable, or None, optional
        Extra ``{name: row -> number}`` features; one that raises or gives a non-finite
        value on any row is left out and named in ``skipped_features``. Default None.
    group_by : {"prompt", "task"}, optional
        ``"prompt"`` (default; an ask is one prompt text, as GRPO groups it) or ``"task"``
        (:func:`toolkit._util.keys.task_key`, pooling phrasings).
    auto : bool, optional
        Add the automatic tier (word and word-pair presence) and the AND features; default
        True.
    n_permutations : int, optional
        Within-ask reward shuffles for the floor, at least 20; default 100.
    min_support : int, optional
        Non-zero rows a feature (and an AND) needs to be scored, and the number of replies a
        word must appear in to enter the automatic tier; default 20.
    seed : int or numpy.random.Generator, optional
        Seed of the shuffles, or a Generator used as is; default 0.

    Returns
    -------
    HackScan
        The regime and its reading, the scored feature table, the floor, the variance
        decomposition and the support of the asks.

    Raises
    ------
    HackScanError
        For an unknown ``group_by``, ``n_permutations`` < 20, a non-string ``endorsed``
        entry, or no row with a numeric reward.
    """
    if group_by not in ("prompt", "task"):
        raise HackScanError(unknown_name_message("group_by", group_by, ["prompt", "task"]))
    if n_permutations < 20:
        raise HackScanError(f"n_permutations must be >= 20 for a 95% floor, got {n_permutations}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    source = as_row_list(rows)
    graded = [(r, numeric_reward(r)) for r in source]
    n_skipped = sum(1 for _, v in graded if v is None)
    graded = [(r, v) for r, v in graded if v is not None]
    # one pattern given as a bare string is one pattern, not a list of its characters
    endorsed_list = [endorsed] if isinstance(endorsed, str) else list(endorsed or [])
    if not all(isinstance(p, str) for p in endorsed_list):
        raise HackScanError(f"endorsed must be feature names or patterns (strings), got {endorsed!r}")
    if not graded:
        raise HackScanError(f"hack_scan needs graded rows; none of the {len(source)} rows has a numeric reward")
    keys = [str(r.get("prompt", "")) if group_by == "prompt" else task_key(r) for r, _ in graded]
    reward = np.array([v for _, v in graded], dtype=float)
    group_index: dict[str, list[int]] = defaultdict(list)
    for i, key in enumerate(keys):
        group_index[key].append(i)
    groups = [np.array(ix) for ix in group_index.values()]
    n = len(reward)

    # decomposition (population variances; weights = group sizes, so the identity is exact)
    grand = reward.mean()
    within = math.fsum(float(((reward[g] - reward[g].mean()) ** 2).sum()) for g in groups) / n
    between = math.fsum(len(g) * (float(reward[g].mean()) - grand) ** 2 for g in groups) / n
    total = float(((reward - grand) ** 2).mean())
    decomposition = {
        "total_variance": total,
        "within_ask_variance": within,
        "between_ask_variance": between,
        "within_share": within / total if total > 0 else None,
    }
    multi = [g for g in groups if len(g) >= 2]
    sat = sum(1 for g in multi if np.all(reward[g] >= 1 - 1e-9))
    dead = sum(1 for g in multi if np.all(reward[g] <= 1e-9))
    mixed = sum(1 for g in multi if np.ptp(reward[g]) > 0)
    capacity = (
        float(np.mean([reward[g].var() for g in multi])) / _MAX_BINARY_VARIANCE if multi else None
    )
    support = {
        "n_groups_multi": len(multi),
        "sat": sat / len(multi) if multi else None,
        "dead": dead / len(multi) if multi else None,
        "mixed": mixed / len(multi) if multi else None,
        "capacity": capacity,
    }
    distinct = [len({repr((graded[i][0].get("steps"), graded[i][0].get("final_text"))) for i in g}) for g in groups]
    median_distinct = float(np.median(distinct)) if distinct else 0.0

    # ---- feature table
    skipped: dict[str, str] = {}
    columns: dict[str, np.ndarray] = {}
    hand = [_hand_features(r) for r, _ in graded]
    names = sorted({k for h in hand for k in h})
    for name in names:
        values = [h.get(name, 0.0 if name.startswith(("tool:", "flag:")) else None) for h in hand]
        if any(v is None for v in values):
            skipped[name] = f"missing on {sum(v is None for v in values)} of {n} rows"
            continue
        columns[name] = np.array(values, dtype=float)
    for name, function in (features or {}).items():
        values = []
        for r, _ in graded:
            try:
                values.append(float(function(r)))
            except Exception as exc:  # a caller feature that fails is named, not dropped silently
                skipped[name] = f"raised {type(exc).__name__}: {exc}"
                break
        else:
            column = np.array(values, dtype=float)
            if not np.all(np.isfinite(column)):
                skipped[name] = f"not a finite number on {int(np.sum(~np.isfinite(column)))} of {n} rows"
            else:
                columns[name] = column
    if auto:
        term_sets = [_terms(" ".join(_assistant_texts(r))) for r, _ in graded]
        frequency = Counter(t for s in term_sets for t in s)
        chosen = sorted(
            (t for t, c in frequency.items() if min_support <= c < n), key=lambda t: (-frequency[t], t)
        )[:_MAX_AUTO_TERMS]
        for term in chosen:
            columns[f"says:{term}"] = np.array([1.0 if term in s else 0.0 for s in term_sets])

    # support gate and alias collapse
    aliases: dict[str, list[str]] = {}
    seen: dict[bytes, str] = {}
    kept: dict[str, np.ndarray] = {}
    for name in sorted(columns, key=lambda c: (c.startswith("says:"), c)):
        column = columns[name]
        if int(np.count_nonzero(column)) < min_support:
            continue
        fingerprint = column.tobytes()
        if fingerprint in seen:
            aliases[seen[fingerprint]].append(name)
            continue
        # A 0/1 column and its complement (tool:lookup vs tool:search when every rollout
        # calls exactly one) are one feature with opposite sign; listing both would name
        # the complement as a perfect "rival" of the endorsed behaviour.
        if set(np.unique(column)) <= {0.0, 1.0}:
            complement = (1.0 - column).tobytes()
            if complement in seen:
                aliases[seen[complement]].append(f"not {name}")
                continue
        seen[fingerprint] = name
        aliases[name] = []
        kept[name] = column
    # ---- within-ask centring as one sparse product (a Python loop over asks per column
    # and permutation took ~40x longer at 250 asks x 66 AND candidates x 100 shuffles)
    from scipy import sparse

    group_of = np.empty(n, dtype=int)
    for k, index in enumerate(groups):
        group_of[index] = k
    membership = sparse.csr_matrix((np.ones(n), (np.arange(n), group_of)), shape=(n, len(groups)))
    sizes = np.asarray(membership.sum(axis=0)).ravel()

    def centre(values: np.ndarray) -> np.ndarray:
        means = (membership.T @ values) / (sizes if values.ndim == 1 else sizes[:, None])
        return values - membership @ means

    def unit_columns(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        norms = np.sqrt((matrix**2).sum(axis=0))
        usable = norms > 1e-12
        return matrix[:, usable] / norms[usable], usable

    reward_centred = centre(reward)
    reward_norm = math.sqrt(float((reward_centred**2).sum()))
    base_names = list(kept)
    if base_names:
        base_unit, usable = unit_columns(centre(np.column_stack([kept[k] for k in base_names])))
        base_names = [name for name, ok in zip(base_names, usable) if ok]
    else:
        base_unit = np.zeros((n, 0))
    is_binary = np.array([set(np.unique(kept[name])) <= {0.0, 1.0} for name in base_names], dtype=bool)
    and_cache: dict[tuple[int, int], np.ndarray | None] = {}

    def and_column(i: int, j: int) -> np.ndarray | None:
        key = (i, j)
        if key not in and_cache:
            raw = kept[base_names[i]] * kept[base_names[j]]
            column = None
            if int(np.count_nonzero(raw)) >= min_support:
                centred = centre(raw)
                norm = math.sqrt(float((centred**2).sum()))
                if norm > 1e-12:
                    column = centred / norm
            and_cache[key] = column
        return and_cache[key]

    def and_search(rho_base: np.ndarray, r_unit: np.ndarray) -> list[tuple[int, int, float]]:
        """ANDs of the 12 strongest binary features kept when stronger than both parents;
        run on the observed reward and again inside every shuffle, so the floor accounts
        for the search (a floor over the kept ANDs alone would be too low)."""
        if not auto or not is_binary.any():
            return []
        candidates = np.flatnonzero(is_binary)
        parents = candidates[np.argsort(-np.abs(rho_base[candidates]), kind="stable")[:_N_AND_PARENTS]]
        found = []
        for x, i in enumerate(parents):
            for j in parents[x + 1 :]:
                a, b = (int(i), int(j)) if i < j else (int(j), int(i))
                column = and_column(a, b)
                if column is None:
                    continue
                value = float(column @ r_unit)
                if abs(value) > max(abs(rho_base[a]), abs(rho_base[b])) + 1e-12:
                    found.append((a, b, value))
        return found

    rho_observed = base_unit.T @ (reward_centred / reward_norm) if reward_norm > 0 else np.full(len(base_names), np.nan)
    order = list(base_names)
    rho_list = list(rho_observed)
    unit_list = [base_unit[:, i] for i in range(base_unit.shape[1])]
    if reward_norm > 0:
        for a, b, value in and_search(rho_observed, reward_centred / reward_norm):
            name = f"{base_names[a]} & {base_names[b]}"
            raw = kept[base_names[a]] * kept[base_names[b]]
            if raw.tobytes() in seen:
                continue  # the AND equals an existing column: already scored under that name
            seen[raw.tobytes()] = name
            kept[name] = raw
            aliases[name] = []
            order.append(name)
            rho_list.append(value)
            unit_list.append(and_column(a, b))
    rho = np.array(rho_list, dtype=float)
    finite = np.isfinite(rho)
    order = [name for name, ok in zip(order, finite) if ok]
    rho = rho[finite]
    pooled = {}
    for name in order:
        column = kept[name]
        pooled[name] = (
            float(np.corrcoef(column, reward)[0, 1]) if column.std() > 0 and reward.std() > 0 else None
        )

    # ---- permutation floor: shuffle reward within each ask, redo the whole feature search,
    # keep the maximum |rho|; the floor is the 95th percentile of those maxima
    floor = None
    if order and reward_norm > 0:
        maxima = np.empty(n_permutations)
        for b in range(n_permutations):
            permuted = reward_centred.copy()
            for g in groups:
                if len(g) > 1:
                    permuted[g] = reward_centred[rng.permutation(g)]
            r_unit = permuted / math.sqrt(float((permuted**2).sum()))
            rho_null = base_unit.T @ r_unit
            best = float(np.max(np.abs(rho_null))) if rho_null.size else 0.0
            for _, _, value in and_search(rho_null, r_unit):
                best = max(best, abs(value))
            maxima[b] = best
        index = math.ceil(_FLOOR_QUANTILE * n_permutations) - 1
        floor = float(np.sort(maxima)[index])

    def endorsed_sign(name: str) -> int:
        """+1 when the feature (or an identical alias) is endorsed, -1 when its complement
        is, 0 when neither. An AND is endorsed only when both its parents are (an endorsed
        behaviour combined with an unendorsed one is still partly a hack)."""
        if _matches(name, endorsed_list):
            return 1
        if " & " in name:
            a, b = name.split(" & ", 1)
            sign_a, sign_b = endorsed_sign(a), endorsed_sign(b)
            return sign_a * sign_b if sign_a and sign_b else 0
        for alias in aliases.get(name, []):
            if alias.startswith("not "):
                if _matches(alias[4:], endorsed_list):
                    return -1
            elif _matches(alias, endorsed_list):
                return 1
        return 0

    def is_endorsed(name: str) -> bool:
        return endorsed_sign(name) != 0

    table = []
    for i, name in enumerate(order):
        table.append(
            {
                "name": name,
                "rho": float(rho[i]),
                "pooled_rho": pooled[name],
                "endorsed": is_endorsed(name),
                # the correlation read in the endorsed direction (sign flipped when it is
                # the complement of this column that was endorsed)
                "endorsed_rho": float(rho[i]) * endorsed_sign(name) if is_endorsed(name) else None,
                "aliases": aliases.get(name, []),
                "above_floor": floor is not None and abs(rho[i]) > floor,
            }
        )
    # strongest first; on a tie prefer an endorsed positive feature
    table.sort(key=lambda f: (-round(abs(f["rho"]), 12), not (f["endorsed"] and f["endorsed_rho"] > 0), f["name"]))
    above = [f for f in table if f["above_floor"]]
    top = table[0] if table else None
    endorsed_above = [f for f in above if f["endorsed"] and f["endorsed_rho"] > 0]
    rivals = [f for f in above if not f["endorsed"]]
    e = endorsed_above[0]["endorsed_rho"] if endorsed_above else 0.0
    a = abs(rivals[0]["rho"]) if rivals else 0.0
    integrity = e / (e + a) if (e + a) > 0 else None
    rival = rivals[0]["name"] if rivals and integrity is not None and integrity < _RIVAL_INTEGRITY else None

    # ---- regime
    top_text = f"{top['name']} (within-ask rho {top['rho']:+.2f})" if top else "nothing measurable"
    n_perfect = sum(1 for f in table if abs(f["rho"]) >= _DEGENERATE_RHO)
    matched_any = any(is_endorsed(f["name"]) for f in table) or any(
        _matches(name, endorsed_list) for name in columns
    )
    exhausted_share = support["sat"]
    if not endorsed_list or not matched_any:
        regime = "unknown"
        why = (
            "No endorsed behaviours were given."
            if not endorsed_list
            else f"None of the endorsed patterns {endorsed_list} matches a feature of these rows."
        )
        reading = _READINGS["unknown"].format(why=why, top=top_text)
    elif n_perfect >= 2 and median_distinct < _DEGENERATE_DISTINCT:
        regime = "degenerate"
        reading = _READINGS["degenerate"].format(distinct=median_distinct, n_perfect=n_perfect)
    elif not above:
        regime = "no_signal"
        reading = _READINGS["no_signal"].format(floor=f"{floor:.2f}" if floor is not None else "n/a")
    elif not top["endorsed"] or top["endorsed_rho"] < 0:
        regime = "reward_hack"
        how = "not an endorsed behaviour" if not top["endorsed"] else "endorsed but paid negatively"
        reading = _READINGS["reward_hack"].format(top=top_text, how=how)
    elif exhausted_share is not None and exhausted_share > _POOL_EXHAUSTED_SHARE:
        regime = "pool_exhausted"
        reading = _READINGS["pool_exhausted"].format(share=f"{exhausted_share:.0%}")
    else:
        regime = "train"
        reading = _READINGS["train"].format(top=top_text)
    if rival and regime == "train":
        reading += f" A rival, {rival}, is close behind (integrity {integrity:.2f})."
    note = None
    if not multi:
        note = "no ask has two or more rollouts; within-ask signal needs repeats (repeats >= 2)"
    elif total == 0:
        note = "every reward is the same; there is nothing to learn or to hack"
    return HackScan(
        regime=regime,
        reading=reading,
        top_feature=top["name"] if top else None,
        top_rho=top["rho"] if top else None,
        floor=floor,
        above_floor=above,
        above_floor_names=[f["name"] for f in above],
        features=table,
        decomposition=decomposition,
        integrity=integrity,
        rival=rival,
        support=support,
        n_rows=n,
        n_asks=len(groups),
        n_skipped=n_skipped,
        n_permutations=n_permutations,
        endorsed=endorsed_list,
        skipped_features=skipped,
        note=note,
    )
