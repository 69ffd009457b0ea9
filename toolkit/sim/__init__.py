"""Simulation: ``simulate()`` and everything one run needs (knobs, the search, one rollout,
the simulated user, the run's data and progress, exact KL over rollouts).
"""

from toolkit.sim.knobs import KnobSpec, RunKnobs, KNOB_KINDS, KNOB_TABLES, knob_table_markdown
from toolkit.sim.search import (
    NoveltyIndex,
    ARMS,
    START_ARM_WEIGHTS,
    ARM_FLOORS,
    ARM_CAPS,
    ArmUpdate,
    update_arm_weights,
    arm_yields,
    behavior_signature,
    action_shape,
    HashEmbedder,
    make_embedder,
    novelty,
    mutate_prompt,
    failure_aim,
    SuccessiveAllocator,
    region_weight,
)
from toolkit.sim.user import (
    PATIENCE_LEVELS,
    resolve_patience,
    SimulatedUser,
    UserReply,
    UserState,
    simulated_user,
)
from toolkit.sim.rollout import run_rollout, LostRollout, LOST_REASONS, ENDED_BY
from toolkit.sim.kl import ExactKL, exact_kl
from toolkit.sim.data import SimulationData, load
from toolkit.sim.config import SimulateConfig, MODES, REPEAT_POLICIES, SIMULATE_PARAMETERS, SIMULATE_DEFAULTS
from toolkit.sim.engine import simulate, RolloutJob
from toolkit.sim.progress import ProgressPoint, RunProgress, ProgressTracker, run_progress

__all__ = [
    "KnobSpec",
    "RunKnobs",
    "KNOB_KINDS",
    "KNOB_TABLES",
    "knob_table_markdown",
    "NoveltyIndex",
    "ARMS",
    "START_ARM_WEIGHTS",
    "ARM_FLOORS",
    "ARM_CAPS",
    "ArmUpdate",
    "update_arm_weights",
    "arm_yields",
    "behavior_signature",
    "action_shape",
    "HashEmbedder",
    "make_embedder",
    "novelty",
    "mutate_prompt",
    "failure_aim",
    "SuccessiveAllocator",
    "region_weight",
    "PATIENCE_LEVELS",
    "resolve_patience",
    "SimulatedUser",
    "UserReply",
    "UserState",
    "simulated_user",
    "run_rollout",
    "LostRollout",
    "LOST_REASONS",
    "ENDED_BY",
    "ExactKL",
    "exact_kl",
    "SimulationData",
    "load",
    "simulate",
    "SimulateConfig",
    "SIMULATE_PARAMETERS",
    "SIMULATE_DEFAULTS",
    "RolloutJob",
    "MODES",
    "REPEAT_POLICIES",
    "ProgressPoint",
    "RunProgress",
    "ProgressTracker",
    "run_progress",
]
