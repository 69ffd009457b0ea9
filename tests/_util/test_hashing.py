"""canonical_json's fast paths against the plain json.dumps call they stand in for."""

from __future__ import annotations

import hashlib
import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit._util import hashing as _hashing
from toolkit._util.hashing import canonical_json, stable_hash, stable_uniform
from toolkit.world._ids import uniform_stream


def reference_json(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


leaves = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text()
values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=5) | st.tuples(inner, inner) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=25,
)


@settings(max_examples=400, deadline=None)
@given(values)
def test_canonical_json_equals_json_dumps(value):
    assert canonical_json(value) == reference_json(value)


def test_canonical_json_edge_values():
    class Unserialisable:
        def __str__(self) -> str:
            return "custom"

    for value in ['quote " backslash \\ newline \n \u2028 é', -0.0, 1e300, math.inf, -math.inf, math.nan, 10**40,
                  True, None, {"b": [1, {"z": 2, "a": (3, 4)}]}, Unserialisable(), [Unserialisable()]]:  # fmt: skip
        assert canonical_json(value) == reference_json(value)


def test_without_the_c_encoder_the_text_is_the_same(monkeypatch):
    value = {"seed": 3, "prompt": "Change my flight", "items": [1.5, None, True]}
    fast = canonical_json(value)
    monkeypatch.setattr(_hashing, "_C_ENCODER", None)
    assert canonical_json(value) == fast == reference_json(value)


@settings(max_examples=200, deadline=None)
@given(st.lists(leaves, max_size=4), leaves)
def test_uniform_stream_equals_stable_uniform(prefix, label):
    draw = uniform_stream(*prefix)
    assert draw(label) == stable_uniform(*prefix, label)


def test_stable_uniform_is_the_documented_sha256_draw():
    digest = hashlib.sha256(b'[7,"reservoir",2]').digest()
    expected = (int.from_bytes(digest[:8], "big") >> 11) / float(1 << 53)
    assert stable_uniform(7, "reservoir", 2) == expected
    assert 0.0 <= expected < 1.0
    assert stable_hash({"b": 1, "a": 2}) == hashlib.sha256(b'{"a":2,"b":1}').hexdigest()[:16]
