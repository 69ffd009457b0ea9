"""The difficulty mixer: draw n situations with a share from the hard tiers.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolkit._util.hashing import stable_hash, stable_uniform
from toolkit._util.results import Result, json_safe
from toolkit.errors import ConfigError
from toolkit.situations.axes import HARD_TIERS, TIERS, tier_of

__all__ = ["TierMix", "mix_tiers"]

# ----------------------------------------------------------------------------------------
# Tier mixer
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TierMix(Result):
    """A difficulty-mixed draw: ``items`` (in pick order), ``counts`` (tier -> n),
    ``hard_share_requested``, ``hard_share_drawn``, ``n_requested``, ``note``."""

    items: tuple
    counts: Mapping[str, int]
    hard_share_requested: float
    hard_share_drawn: float | None
    n_requested: int
    note: str | None = None

    def __iter__(self) -> Iterator[Any]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __str__(self) -> str:
        counts = ", ".join(f"{tier} {self.counts.get(tier, 0)}" for tier in TIERS)
        drawn = "n/a" if self.hard_share_drawn is None else f"{self.hard_share_drawn:.2f}"
        return f"TierMix({len(self.items)} items: {counts}; hard share {drawn} for {self.hard_share_requested:.2f} asked)"


def _tier_of_item(item: Any) -> str:
    tier = getattr(item, "tier", None)
    if tier is None and isinstance(item, Mapping):
        tier = item.get("tier") or (tier_of(item["stance"]) if "stance" in item else None)
        if tier is None and isinstance(item.get("dimensions"), Mapping):
            tier = tier_of(item["dimensions"]["stance"])
    if tier not in TIERS:
        raise ConfigError(f"cannot tell the tier of {item!r}: give Situations, or dicts with 'tier' or 'stance'")
    return tier


def _item_key(item: Any) -> str:
    identity = getattr(item, "id", None)
    if identity is None and isinstance(item, Mapping):
        identity = item.get("id")
    return str(identity) if identity is not None else stable_hash(json_safe(item))


def mix_tiers(items: Sequence[Any], n: int, hard_share: float, seed: int = 0) -> TierMix:
    """Pick ``n`` items with the difficulty mix ``hard_share`` asks for.

    Rules (docs/design/engine.md §3.2, checked against docs/design/engine.md §10 item 27): the first pick is
    ordinary; the second is hard (adversarial, else boundary, else ambiguous); with 8 or more
    picks every tier appears once; hard picks then number ``max(those minimums,
    floor(n * hard_share + 0.5))``, served round-robin across the hard tiers, and the rest
    are ordinary. Hence ``hard_share`` 0 still yields a few hard items (breadth first: a
    suite with no hard case hides the failures that matter) and 1.0 keeps one ordinary item
    (the baseline every comparison needs). When a tier runs out, the others fill in and
    ``note`` says so. Within a tier the order is a seeded hash of each item's id.

    Parameters
    ----------
    items : sequence
        The pool: Situations, or dicts with ``tier``, ``stance`` or ``dimensions["stance"]``.
    n : int
        Number of items to pick (an integer >= 0). With fewer items in the pool every item is
        used and ``note`` says so.
    hard_share : float
        Share of hard picks asked for, in [0, 1], subject to the rules above.
    seed : int
        Seed of the order within each tier (a hash with each item's ``id``, else a hash of
        the item). Default 0.

    Returns
    -------
    TierMix
        The picks in pick order: one ordinary item first, then hard and ordinary items
        interleaved in proportion, so any prefix keeps roughly the planned mix.

    Raises
    ------
    ConfigError
        If ``n`` or ``hard_share`` is out of range, or an item's tier cannot be told.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ConfigError(f"n must be an integer >= 0, got {n!r}")
    if isinstance(hard_share, bool) or not isinstance(hard_share, (int, float)) or not 0.0 <= hard_share <= 1.0:
        raise ConfigError(f"hard_share must be a number in [0, 1], got {hard_share!r}")
    pools: dict[str, list[Any]] = {tier: [] for tier in TIERS}
    for item in items:
        pools[_tier_of_item(item)].append(item)
    for tier in TIERS:
        pools[tier].sort(key=lambda item: stable_uniform("tier-mix", seed, _item_key(item)))
    hard_available = [tier for tier in HARD_TIERS if pools[tier]]
    minimum = 0
    if n >= 2 and hard_available:
        minimum = 1
    if n >= 8:
        minimum = len(hard_available)
    target = math.floor(n * hard_share + 0.5)
    n_hard = max(minimum, target)
    if n >= 1 and pools["ordinary"]:
        n_hard = min(n_hard, n - 1)
    n_hard = min(n_hard, n)

    cursor = {tier: 0 for tier in TIERS}

    def take(tier: str) -> Any | None:
        if cursor[tier] < len(pools[tier]):
            cursor[tier] += 1
            return pools[tier][cursor[tier] - 1]
        return None

    hard: list[Any] = []
    rotation = 0
    while len(hard) < n_hard:
        picked = None
        for step in range(len(HARD_TIERS)):
            tier = HARD_TIERS[(rotation + step) % len(HARD_TIERS)]
            picked = take(tier)
            if picked is not None:
                rotation = (rotation + step + 1) % len(HARD_TIERS)
                break
        if picked is None:
            break
        hard.append(picked)
    ordinary: list[Any] = []
    while len(ordinary) + len(hard) < n:
        picked = take("ordinary")
        if picked is None:
            break
        ordinary.append(picked)
    short_note = None
    if len(ordinary) + len(hard) < n:
        # Ordinary items ran out: hard ones fill in (and the other way round above).
        while len(ordinary) + len(hard) < n:
            picked = None
            for tier in HARD_TIERS:
                picked = take(tier)
                if picked is not None:
                    hard.append(picked)
                    break
            if picked is None:
                break
    if len(ordinary) + len(hard) < n:
        short_note = f"only {len(ordinary) + len(hard)} items for n={n}; every item was used"
    elif len(hard) != n_hard:
        short_note = f"{len(hard)} hard items drawn for {n_hard} planned: a tier ran out"
    # Pick order: one ordinary item, then the two lists interleaved in proportion (hard
    # first on a tie), so any prefix of the draw keeps roughly the planned mix.
    order: list[Any] = ordinary[:1]
    rest = ordinary[1:]
    used_hard = used_rest = 0
    while used_hard < len(hard) or used_rest < len(rest):
        if used_rest >= len(rest) or (used_hard < len(hard) and used_hard * len(rest) <= used_rest * len(hard)):
            order.append(hard[used_hard])
            used_hard += 1
        else:
            order.append(rest[used_rest])
            used_rest += 1
    counts = {tier: 0 for tier in TIERS}
    for item in order:
        counts[_tier_of_item(item)] += 1
    drawn = None if not order else (len(order) - counts["ordinary"]) / len(order)
    return TierMix(
        items=tuple(order),
        counts=counts,
        hard_share_requested=float(hard_share),
        hard_share_drawn=drawn,
        n_requested=n,
        note=short_note,
    )
