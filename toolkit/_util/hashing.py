"""Canonical JSON and hashes that do not depend on dict order, threads or Python version."""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["canonical_json", "sha256_hex", "stable_hash", "stable_uniform"]


# One encoder for every call: ``json.dumps`` with keyword arguments builds a new JSONEncoder
# each time, and the seeded policy, world and writer hash ~150 values per row (measured on a
# four-item list: json.dumps 1.8 us, this encoder 1.2 us, the prebuilt C encoder below 0.43 us;
# hashing was ~9% of offline simulate CPU before). Output is identical.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
_encode_string = json.encoder.encode_basestring  # what the encoder above does for a str


def _make_c_encoder() -> Any:
    # JSONEncoder.encode builds a new C encoder on every call (c_make_encoder, ~0.6 us of a
    # ~1.1 us short-list encode); built once here with the exact arguments encode() passes,
    # minus the circular-reference check (hashed values are never circular). Falls back to
    # encode() where the C accelerator or this signature is missing; tests/_util/test_hashing.py
    # checks both give the same text.
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    try:
        encoder = make(None, _CANONICAL.default, _encode_string, None, ":", ",", True, False, True)
        encoder([1, "a", {"b": 1.5}], 0)
    except (TypeError, ValueError):
        return None
    return encoder


_C_ENCODER = _make_c_encoder()


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and compact separators; the one form every hash reads."""
    kind = type(value)
    if kind is str:
        return _encode_string(value)
    if kind is int:
        return int.__repr__(value)
    if _C_ENCODER is not None:
        return "".join(_C_ENCODER(value, 0))
    return _CANONICAL.encode(value)


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
