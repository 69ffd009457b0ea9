"""Situations: the axes an agent definition varies on, difficulty tiers, and the grid.

An agent is its tools plus its system prompt. From them come six axes (docs/design/engine.md
§3.1): ``tool`` (each tool, ``unrelated``, ``multi_tool``), ``rule`` (the policy clauses of
the prompt), ``stance`` (10 ways a person can come at the agent), ``world_state`` (6, when a
tool takes a reference), ``tool_condition`` (success and every fault mode, built-in and
user-added) and ``history`` (5). A situation is one point of that space, not a prompt; the
template writer (:mod:`toolkit.situations.writer`) or a model turns it into words.

``tk.situation_grid(tools, system_prompt)`` covers the space with a t-wise covering array
built by :mod:`toolkit.situations.covering` (no second algorithm here), in layers:

* a **base block**: the strength-t array over the five non-rule axes, with rule
  "unspecified" -- it does not depend on the prompt at all;
* one **rule block** per policy clause: a strength-(t-1) array over the other five axes with
  the rule fixed, seeded by a hash of the clause text. Every t-tuple that involves a rule is
  therefore covered inside that rule's own block.

So editing one clause removes that clause's rows and adds the new clause's rows, and every
other situation keeps its id -- results measured on them stay comparable across the edit.

``tk.situations.mix_tiers(situations, n, hard_share)`` draws a difficulty mix (docs/design/engine.md §3.2 and docs/design/engine.md §10
item 27): first an ordinary item, then one hard item (adversarial, else boundary, else
ambiguous); from 8 picks on, one of every tier; then hard items to ``round(n * hard_share)``,
round-robin across the hard tiers; the rest ordinary.

Where we differ from the reference design, and why:

* The base block is the covering module's array (IPOG-F plus repair, with constraints and
  any strength) instead of the reference's AETG-like greedy, and rule blocks are
  strength-(t-1) arrays instead of a 1-wise "diagonal walk", so strength 3 also layers.
* Coverage excludes constant axes and the placeholder rule "unspecified" (docs/design/engine.md §11:
  the constant pairs inflated "pairs planned").
* No "success flip": the reference turns ~90% of fault cells into success cells and then
  thins the remaining faults again with ``fault_rate``, so ``fault_rate=0.5`` gave 29% faulted
  rows (docs/design/engine.md §9 item 10). Here every fault cell keeps its condition and ``fault_rate``
  alone decides, per prompt, whether it fires (:func:`toolkit.situations.fault_plan_for`).
* ``multi_tool`` is on the tool axis only when the agent has two or more tools (with one
  tool there is no second tool to combine), and human tools (answered by the person) are
  not tool-axis values.
* Condition values are the fault-mode names (``malformed``, ``stale``, ...); the reference's
  ``malformed_result`` / ``stale_result`` are accepted as aliases by the world.
* Rounding half up in the tier mixer (``floor(x + 0.5)``), not Python's banker's rounding,
  so 10 x 0.25 gives 3 hard items, not 2.
"""

from toolkit.situations._worlds import attacked_tasks, fault_plan_for, goal_for, kept_fault_plan, world_for
from toolkit.situations.axes import (
    AXES,
    HARD_TIERS,
    HISTORIES,
    RULE_CAP,
    STANCES,
    TIERS,
    SituationAxes,
    situation_axes,
    split_policy,
    tier_of,
)
from toolkit.situations.covering import (
    ArrayExtension,
    CoverageCurve,
    CoverageReport,
    CoveringArray,
    coverage,
    coverage_curve,
    covering_array,
    extend_array,
    random_design_curve,
)
from toolkit.situations.grid import Situation, SituationGrid, situation_grid
from toolkit.situations.inspect_dataset import to_inspect_dataset
from toolkit.situations.tiers import TierMix, mix_tiers
from toolkit.situations.writer import (
    PERSONA_LENGTHS,
    PERSONA_MOODS,
    PERSONA_TEXTURES,
    Prompt,
    reference_shapes,
    write_prompts,
)

__all__ = [
    "CoveringArray",
    "CoverageReport",
    "ArrayExtension",
    "CoverageCurve",
    "covering_array",
    "coverage",
    "coverage_curve",
    "random_design_curve",
    "extend_array",
    "AXES",
    "STANCES",
    "HISTORIES",
    "TIERS",
    "HARD_TIERS",
    "RULE_CAP",
    "SituationAxes",
    "split_policy",
    "situation_axes",
    "tier_of",
    "Situation",
    "SituationGrid",
    "situation_grid",
    "TierMix",
    "mix_tiers",
    "fault_plan_for",
    "kept_fault_plan",
    "world_for",
    "goal_for",
    "attacked_tasks",
    "Prompt",
    "write_prompts",
    "reference_shapes",
    "PERSONA_LENGTHS",
    "PERSONA_MOODS",
    "PERSONA_TEXTURES",
    "to_inspect_dataset",
]
