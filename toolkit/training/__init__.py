"""Cut graded rows into training sets a trainer can use, and refuse the ones it cannot.

Four cuts off the same graded rows (docs/design/engine.md §7):

* **SFT** -- :func:`training_rows` turns rows into chat samples (system prompt and tool
  schemas included, tool calls in the OpenAI wire shape, a 0/1 ``loss_mask`` per message);
  :func:`select_for_sft` picks which rows go in and says when the "selection" was only a
  pass filter.
* **DPO** -- :func:`build_preference_pairs` pairs a better and a worse rollout of the same
  task with a score margin; :func:`export_preference` writes them for OpenAI or TRL.
* **GRPO** -- :func:`select_for_rl` keeps whole mixed groups whose pass rate sits in a band
  (DeepSeekMath, arXiv:2402.03300; DAPO's dynamic sampling, arXiv:2503.14476: a group whose
  rollouts all score the same has zero advantage and contributes no gradient).
* **Reward model** -- :func:`reward_model_set`: every graded row with its reward.

:func:`publish_gate` refuses RL-shaped data that cannot train (no rewards, no mixed group)
and :func:`decontaminate` removes rows that copy an evaluation set, listing every rule it
could not run.

Where we differ from the reference system:

* TRL gets no ``loss_mask`` at all (TRL ignores the column and trains on every token,
  #507/#508): a full-conversation cut is a ``messages`` row meant for
  ``SFTConfig(assistant_only_loss=True)``, and "final"/"unroll" become conversational
  ``prompt``/``completion`` rows, which TRL masks by construction.
* Every export scrubs through :func:`toolkit.rows.scrub` (a block list, so markers,
  lineage and seed ride along) and raises :class:`ExportError` on an empty result instead
  of writing a 0-byte file a loader would crash on.
* ``select_for_rl`` returns what it dropped *by group and reason*, not only a count.
* ``decontaminate`` treats a rule that could not run as a result (``rules_skipped``), never
  as a silent pass (#488), and names a rule that ran on only part of the rows
  (``rules_partial``); an empty text never counts as an exact match.
* TRL preference rows: the shared ``prompt`` ends where both completions start with an
  assistant turn (never an empty completion); a pair whose rollouts opened with different
  prompts has no shared prompt and is left out of a TRL export (``same_prompt`` says so).
* ``select_for_sft`` applies the privileged-leak gate itself: the rows it returns are
  scrubbed, so a later ``training_rows`` could no longer see the leak.
* The privileged-leak gate (every cut, not only SFT) counts a quote as 8 consecutive words
  or a whole privileged string of >= 12 characters that the agent was not itself shown,
  instead of any 12-character window (see ``_LeakCheck``; measured on tau-bench rows).
"""


from toolkit.errors import ExportError, PublishGateError
from toolkit.training._common import write_jsonl
from toolkit.training.decontamination import DecontaminationReport, decontaminate
from toolkit.training.dpo import PreferencePairs, build_preference_pairs, export_preference
from toolkit.training.grpo import RLSelection, select_for_rl
from toolkit.training.publish import PublishGateReport, publish_gate
from toolkit.training.reward import RewardModelSet, reward_model_set
from toolkit.training.sft import SFTSelection, TrainingSet, select_for_sft, training_rows

__all__ = [
    "ExportError",
    "PublishGateError",
    "write_jsonl",
    "TrainingSet",
    "SFTSelection",
    "training_rows",
    "select_for_sft",
    "PreferencePairs",
    "build_preference_pairs",
    "export_preference",
    "RLSelection",
    "select_for_rl",
    "RewardModelSet",
    "reward_model_set",
    "PublishGateReport",
    "publish_gate",
    "DecontaminationReport",
    "decontaminate",
]
