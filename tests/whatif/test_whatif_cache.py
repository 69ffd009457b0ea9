"""Attacks on the score cache: scores edited by hand in well-formed entry files, and entries of
the format before the content hash (toolkit/whatif/cache.py, module docstring)."""

import json

import pytest
from test_whatif_walkthroughs import FIXTURE_MODULE, config_for, install_fixture, row, write_rows

import toolkit as tk
from toolkit.whatif.cache import CACHE_SCHEMA_VERSION, CacheCorruption, ScoreCache, entry_content_hash


@pytest.fixture
def fixture_dir(tmp_path, monkeypatch):
    install_fixture(tmp_path, monkeypatch)
    for name in ("CI", "GITHUB_ACTIONS", "GITLAB_CI", "BUILDKITE", "JENKINS_URL"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def six_entries(root):
    cache = ScoreCache(root, "on")
    keys = []
    for i in range(6):
        key = ScoreCache.key({"case": {"trace_id": f"t-{i}", "which": "original"}})
        cache.put(key, {"case": {"trace_id": f"t-{i}"}}, 0.25, f"rationale {i}")
        keys.append(key)
    assert cache.writes == 6
    return keys


def entry_path(root, key):
    return root / "entries" / key[:2] / f"{key}.json"


def edit(path, **changes):
    entry = json.loads(path.read_text())
    entry.update(changes)
    path.write_text(json.dumps(entry, sort_keys=True))  # still well-formed JSON with every field


def test_entries_carry_a_content_hash_and_read_back(tmp_path):
    keys = six_entries(tmp_path)
    entry = json.loads(entry_path(tmp_path, keys[0]).read_text())
    assert entry["cache_schema_version"] == CACHE_SCHEMA_VERSION == "whatif-cache-entry/2"
    assert entry["content_sha256"] == entry_content_hash(keys[0], 0.25, "rationale 0") and len(entry["content_sha256"]) == 64
    reader = ScoreCache(tmp_path, "read_only")
    assert [reader.get(k) for k in keys] == [{"score": 0.25, "rationale": f"rationale {i}"} for i in range(6)]
    assert reader.hits == 6


@pytest.mark.parametrize("field, value", [("score", 1.0), ("score", 0.2500001), ("rationale", "edited"),
                                          ("rationale", None), ("content_sha256", "0" * 64)])
def test_hand_edited_entries_are_corruption_not_hits(tmp_path, field, value):
    keys = six_entries(tmp_path)
    for key in keys:
        edit(entry_path(tmp_path, key), **{field: value})
    for mode in ("on", "read_only"):
        reader = ScoreCache(tmp_path, mode)
        for key in keys:
            with pytest.raises(CacheCorruption) as info:
                reader.get(key)
            assert info.value.reason.startswith("content hash mismatch")
            assert info.value.entry_path == str(entry_path(tmp_path, key))
            assert "cache_mode: refresh" in str(info.value)
        assert reader.hits == 0


def test_entries_without_a_hash_are_corruption_saying_why(tmp_path):
    keys = six_entries(tmp_path)
    old = entry_path(tmp_path, keys[0])  # as the toolkit wrote it before the hash existed
    entry = json.loads(old.read_text())
    entry.pop("content_sha256")
    entry["cache_schema_version"] = "whatif-cache-entry/1"
    old.write_text(json.dumps(entry))
    stripped = entry_path(tmp_path, keys[1])  # the current format with its hash deleted
    entry = json.loads(stripped.read_text())
    entry.pop("content_sha256")
    stripped.write_text(json.dumps(entry))
    reader = ScoreCache(tmp_path, "on")
    for key in keys[:2]:
        with pytest.raises(CacheCorruption, match="content hash mismatch") as info:
            reader.get(key)
        assert "written by an older toolkit or edited" in info.value.reason
        assert "delete the cache dir or use cache_mode: refresh" in info.value.reason
    assert reader.get(keys[2])["score"] == 0.25  # the untouched ones still hit


def test_other_malformed_entries_stay_corruption(tmp_path):
    keys = six_entries(tmp_path)
    edit(entry_path(tmp_path, keys[0]), score="0.25")
    edit(entry_path(tmp_path, keys[1]), rationale=["not", "text"])
    edit(entry_path(tmp_path, keys[2]), key="0" * 64)
    reader = ScoreCache(tmp_path, "on")
    for key in keys[:3]:
        with pytest.raises(CacheCorruption, match="missing or invalid fields"):
            reader.get(key)


def test_integer_scores_hash_like_floats(tmp_path):
    cache = ScoreCache(tmp_path, "on")
    key = ScoreCache.key({"case": "int"})
    cache.put(key, {}, 1, None)
    assert json.loads(entry_path(tmp_path, key).read_text())["score"] == 1.0
    assert cache.get(key) == {"score": 1.0, "rationale": None}


# --- through fork -----------------------------------------------------------------------------


def plain_rows():
    return [row(f"f-{i:02d}", "failure", 0.2) for i in range(6)] + [row(f"b-{i:02d}", "baseline", 0.0) for i in range(6)]


def run(fixture_dir, mode):
    import importlib

    module = importlib.import_module(FIXTURE_MODULE)  # the fixture scorer counts its calls
    before = module.CALLS["n"]
    path = write_rows(fixture_dir / "traces.jsonl", plain_rows())
    verdict = tk.whatif.fork(config_for(path, fixture_dir, scorer={"cache_mode": mode}))
    return verdict, module.CALLS["n"] - before


def test_fork_refuses_hand_edited_scores_and_refresh_repairs_them(fixture_dir):
    first, calls = run(fixture_dir, "on")
    assert first.state == "ship" and calls == 24 and first.cache["writes"] == 24
    entries = sorted((fixture_dir / "cache" / "entries").rglob("*.json"))
    replayed = [p for p in entries if json.loads(p.read_text())["components"]["case"]["which"] == "replayed"
                and json.loads(p.read_text())["components"]["case"]["trace_id"].startswith("b-")]
    assert len(replayed) == 6
    for path in replayed:
        # the attack: make every baseline trace look like it regressed (scores stay in [0, 1])
        edit(path, score=0.0)
    for mode in ("on", "read_only"):
        verdict, calls = run(fixture_dir, mode)
        assert verdict.state == "inconclusive", mode
        finding = verdict.findings[0]
        assert finding.code == "cache_corruption_detected" and finding.details["cache_path"] in {str(p) for p in replayed}
        record = next(r for r in verdict.failures if r.code == "cache_corruption_detected")
        assert record.details["reason"].startswith("content hash mismatch")
        assert all(c.scored == 0 for c in verdict.cohorts)  # no edited score reached a delta
        # the JSON report names the reason (the cache reason carries no user text)
        data = json.loads(verdict.to_json())
        assert data["failures"][0]["message"].endswith(record.details["reason"])
    # refresh never reads, so it rescores and rewrites the corrupt entries instead of halting
    refreshed, calls = run(fixture_dir, "refresh")
    assert refreshed.state == "ship" and calls == 24 and refreshed.cache["writes"] == 24
    for path in replayed:
        entry = json.loads(path.read_text())
        assert entry["score"] == 0.5 and entry["content_sha256"] == entry_content_hash(entry["key"], 0.5, entry["rationale"])
    again, calls = run(fixture_dir, "on")
    assert again.state == "ship" and calls == 0 and again.cache["hits"] == 24


def test_fork_treats_old_format_entries_as_corruption(fixture_dir):
    run(fixture_dir, "on")
    for path in (fixture_dir / "cache" / "entries").rglob("*.json"):
        entry = json.loads(path.read_text())
        entry.pop("content_sha256")
        entry["cache_schema_version"] = "whatif-cache-entry/1"
        path.write_text(json.dumps(entry))
    verdict, calls = run(fixture_dir, "on")
    assert verdict.state == "inconclusive" and verdict.findings[0].code == "cache_corruption_detected"
    assert "written by an older toolkit or edited" in verdict.failures[0].details["reason"]
    refreshed, calls = run(fixture_dir, "refresh")
    assert refreshed.state == "ship" and calls == 24


def run_profile(fixture_dir, profile):
    import importlib

    module = importlib.import_module(FIXTURE_MODULE)
    before = module.CALLS["n"]
    path = write_rows(fixture_dir / "traces.jsonl", plain_rows())
    config = config_for(path, fixture_dir, scorer={"cache_mode": "on"}, reporting={"profile": profile})
    return tk.whatif.fork(config), module.CALLS["n"] - before


def cache_text(fixture_dir):
    return "".join(p.read_text() for p in sorted((fixture_dir / "cache" / "entries").rglob("*.json")))


def test_the_cache_keeps_rationales_only_under_profiles_that_show_them(fixture_dir):
    # Issue 21 row 17, as the attack: read the cache directory a default-profile run left.
    verdict, calls = run_profile(fixture_dir, "default")
    assert calls == 24 and verdict.cache["writes"] == 24
    text = cache_text(fixture_dir)
    assert "read from the output" not in text and text.count('"rationale_withheld": true') == 24
    # a run that shows rationales does not take the withheld entries as hits: it rescores
    review, calls = run_profile(fixture_dir, "review")
    assert calls == 24 and review.cache["hits"] == 0
    assert review.trace_results[0].rationale_replayed == "read from the output"
    assert cache_text(fixture_dir).count("read from the output") == 24
    # ... and then hits, rationale included; a default run hits the same entries
    again, calls = run_profile(fixture_dir, "review")
    assert calls == 0 and again.cache["hits"] == 24 and again.trace_results[0].rationale_replayed == "read from the output"
    _, calls = run_profile(fixture_dir, "default")
    assert calls == 0
