"""Canonical JSON and hashes that do not depend on dict order, threads or Python version."""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["canonical_json", "sha256_hex", "stable_hash", "stable_uniform"]


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and compact separators; the one form every hash reads."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def sha256_hex(text: str | bytes) -> str:
    data = text.encode("utf-8") if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()


def stable_hash(value: Any, length: int = 16) -> str:
    """Hex digest prefix of the canonical JSON of ``value``."""
    return sha256_hex(canonical_json(value))[:length]


def stable_uniform(*parts: Any) -> float:
    """A uniform draw in [0, 1) fixed by ``parts`` (sha256 of their canonical JSON).

    53 bits keep the draw exactly representable as a float.
    """
    digest = hashlib.sha256(canonical_json(list(parts)).encode("utf-8")).digest()
    return (int.from_bytes(digest[:8], "big") >> 11) / float(1 << 53)
