"""How knob bounds read where people see them: a ceiling of 2**62 ("no practical ceiling")
prints as "no ceiling" in the notebook table, the spec's str and HTML, and refusal messages,
never as 4.611686e+18 or 4611686018427387904."""

from __future__ import annotations

import pytest

import toolkit as tk

HUGE = ("4.611686e+18", "4611686018427387904", "e+18")
UNBOUNDED = [s.name for s in tk.RunKnobs.describe() if s.hi is not None and s.hi >= 2**62]


def test_some_knobs_have_no_practical_ceiling():
    # the cases below would check nothing without them
    assert {"seed", "tier_mix_min_rows", "hard_row_cap"} <= set(UNBOUNDED)


def test_knob_table_shows_no_ceiling_as_text():
    table = tk.RunKnobs.table()
    assert list(table["name"]) == list(tk.RunKnobs.names())
    bounds = dict(zip(table["name"], table["bounds"]))
    for name in UNBOUNDED:
        assert bounds[name] == f"{tk.RunKnobs.spec(name).lo!r} .. no ceiling"
    assert bounds["concurrency"] == "1 .. 4096"
    assert bounds["patience"] == "normal / short / endless"
    assert bounds["world"] == "table"
    shown = table.to_string() + table.to_html()
    assert not any(text in shown for text in HUGE), [t for t in HUGE if t in shown]
    experiment = tk.RunKnobs.table("experiment")
    assert list(experiment["name"]) == [s.name for s in tk.RunKnobs.describe("experiment")]
    with pytest.raises(tk.ConfigError, match="experiment"):
        tk.RunKnobs.table("experimnt")


@pytest.mark.parametrize("name", UNBOUNDED)
def test_spec_text_and_html_say_no_ceiling(name):
    spec = tk.RunKnobs.spec(name)
    for text in (str(spec), spec._repr_html_()):
        assert "no ceiling" in text
        assert not any(huge in text for huge in HUGE), text
    assert spec.hi == 2**62  # the bound itself is kept


def test_the_floor_message_says_no_ceiling_and_the_ceiling_message_names_the_bound():
    with pytest.raises(tk.KnobError) as floor:
        tk.RunKnobs.validate("seed", -1)
    assert "allowed 0..no ceiling" in str(floor.value) and "4611686018427387904" not in str(floor.value)
    # past "no ceiling" the message states where the bound really is
    with pytest.raises(tk.KnobError, match="above its ceiling 4611686018427387904"):
        tk.RunKnobs.validate("seed", 2**63)


def test_markdown_table_bounds_are_the_specs():
    markdown = tk.knob_table_markdown("experiment")
    for spec in tk.RunKnobs.describe("experiment"):
        line = next(row for row in markdown.splitlines() if row.startswith(f"| `{spec.name}` |"))
        assert f"| {spec.bounds.replace('|', chr(92) + '|')} |" in line
