"""Training cuts from graded rows: SFT, preference pairs (DPO), RL groups (GRPO), reward-model
sets, the publish gate and decontamination.
"""

from toolkit.training.export import (
    ExportError,
    PublishGateError,
    TrainingSet,
    SFTSelection,
    PreferencePairs,
    RLSelection,
    RewardModelSet,
    PublishGateReport,
    DecontaminationReport,
    training_rows,
    select_for_sft,
    build_preference_pairs,
    export_preference,
    select_for_rl,
    reward_model_set,
    publish_gate,
    decontaminate,
    write_jsonl,
)

__all__ = [
    "ExportError",
    "PublishGateError",
    "TrainingSet",
    "SFTSelection",
    "PreferencePairs",
    "RLSelection",
    "RewardModelSet",
    "PublishGateReport",
    "DecontaminationReport",
    "training_rows",
    "select_for_sft",
    "build_preference_pairs",
    "export_preference",
    "select_for_rl",
    "reward_model_set",
    "publish_gate",
    "decontaminate",
    "write_jsonl",
]
