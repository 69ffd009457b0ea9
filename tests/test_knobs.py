"""RunKnobs: every advanced key of both seed tables, defaults, bounds, messages, docs table."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolkit as tk

ROOT = Path(__file__).resolve().parents[1]
SEED = Path("/work/shared/seeds/000_e51605354663f6a0.readable.md")


def _tables(text: str) -> dict[str, dict[str, str]]:
    """{section: {key: default text}} for the two knob sections of a markdown file."""
    out: dict[str, dict[str, str]] = {}
    section = None
    for line in text.splitlines():
        if line.startswith("## "):
            title = line[3:].strip().lower()
            section = "experiment" if title.startswith("experiment knobs") else "engine" if title.startswith("engine internals") else None
            continue
        if section and line.startswith("| `") and not line.startswith("| `advanced`"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            key = cells[0].strip("`")
            out.setdefault(section, {})[key] = cells[1].strip("`")
    return out


def _same_default(text: str, value) -> bool:
    if text in ("None",):
        return value is None
    if text == "{}":
        return value == {}
    if text.startswith("on with"):
        return value is None  # "decided by whether a grader exists"
    try:
        parsed = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        parsed = text.strip('"')
    if isinstance(parsed, (int, float)) and not isinstance(parsed, bool):
        return isinstance(value, (int, float)) and float(parsed) == float(value)
    return parsed == value


def test_seed_tables_match_code():
    source = SEED.read_text(encoding="utf-8") if SEED.exists() else (ROOT / "docs" / "knobs.md").read_text(encoding="utf-8")
    tables = _tables(source)
    assert set(tables) == {"experiment", "engine"}
    assert len(tables["experiment"]) >= 19 and len(tables["engine"]) >= 50
    defaults = tk.RunKnobs()
    for section, rows in tables.items():
        for key, default_text in rows.items():
            spec = tk.RunKnobs.spec(key)  # raises for a knob the code does not have
            assert spec.table == section, key
            assert _same_default(default_text, getattr(defaults, key)), (key, default_text, getattr(defaults, key))


def test_docs_file_is_generated_from_code():
    text = (ROOT / "docs" / "knobs.md").read_text(encoding="utf-8")
    assert tk.knob_table_markdown("experiment") in text
    assert tk.knob_table_markdown("engine") in text
    tables = _tables(text)
    assert set(tables["experiment"]) | set(tables["engine"]) == set(tk.RunKnobs.names())


def test_every_knob_has_reason_bounds_and_valid_default():
    for spec in tk.RunKnobs.describe():
        assert spec.reason and spec.meaning, spec.name
        assert spec.kind in tk.KNOB_KINDS
        assert spec.table in tk.KNOB_TABLES
        if spec.kind in ("int", "float"):
            assert spec.lo is not None and spec.hi is not None and spec.lo <= spec.hi
        # the default itself passes validation
        tk.RunKnobs.validate(spec.name, spec.default)
        if not spec.used:
            assert "compatib" in spec.reason.lower()


@pytest.mark.parametrize(
    "advanced, words",
    [
        ({"collect_wait_s": -1}, ["floor 0.0", "default 0.35"]),
        ({"concurrency": 5000}, ["ceiling 4096", "default 32"]),
        ({"empty_rounds_to_stop": 2.5}, ["integer"]),
        ({"empty_rounds_to_stop": True}, ["integer"]),
        ({"collect_wait_s": True}, ["number"]),
        ({"colect_wait_s": 1}, ["collect_wait_s"]),
        ({"patience": "lazy"}, ["patience"]),
        ({"world": {"exist_share": 0.5}}, ["exists_share"]),
        ({"embedder": "hsah"}, ["hash"]),
        ({"writer_temperature": (1.2, 0.4)}, ["lo > hi"]),
        ({"arm_weights": {"structurd": 1.0}}, ["structured"]),
        ({"stop_grace": float("nan")}, ["finite"]),
    ],
)
def test_bad_values_raise_knob_error(advanced, words):
    with pytest.raises(tk.KnobError) as info:
        tk.RunKnobs.from_advanced(advanced)
    assert isinstance(info.value, ValueError)
    for word in words:
        assert word in str(info.value)


def test_normalisation_and_changed():
    knobs = tk.RunKnobs.from_advanced({"collect_wait_s": 1, "patience": {"second": 0.1, "later": 0.2}, "writer_temperature": 0.7})
    assert knobs.collect_wait_s == 1.0 and isinstance(knobs.collect_wait_s, float)
    assert knobs.writer_temperature == 0.7
    assert set(knobs.changed()) == {"collect_wait_s", "patience", "writer_temperature"}
    record = knobs.to_dict()
    assert set(record) == set(tk.RunKnobs.names())
    assert knobs.replace(seed=3).seed == 3 and knobs.replace(seed=3).collect_wait_s == 1.0


@given(st.integers(min_value=-10, max_value=10_000))
def test_int_bounds_are_inclusive(value):
    spec = tk.RunKnobs.spec("concurrency")
    if spec.lo <= value <= spec.hi:
        assert tk.RunKnobs.validate("concurrency", value) == value
    else:
        with pytest.raises(tk.KnobError, match="floor|ceiling"):
            tk.RunKnobs.validate("concurrency", value)


def test_describe_tables_split():
    experiment = tk.RunKnobs.describe("experiment")
    engine = tk.RunKnobs.describe("engine")
    assert len(experiment) + len(engine) == len(tk.RunKnobs.describe())
    assert {s.name for s in experiment} >= {"seed", "concurrency", "patience", "world", "embedder", "stop_grace"}
    with pytest.raises(tk.ConfigError):
        tk.RunKnobs.describe("other")
