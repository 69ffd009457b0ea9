"""The ``inspect_ai`` scorer adapter: an Inspect AI scorer scores each output on its own.

``inspect_ai`` is optional (``pip install "inspect_ai>=0.3.285"``). It is not a base dependency
of the toolkit because, as of 0.3.285, it requires ``fsspec<=2026.6.0`` and pulls ``s3fs`` ->
``aiobotocore``, which requires ``python-dateutil<3``; in an environment that already has
``fsspec`` 2026.9.0 and ``python-dateutil`` 4.0.0 pip must move both back (measured with
``pip install --dry-run``). No declared requirement of the toolkit (pandas needs
``python-dateutil>=2.9.0``, dask ``fsspec>=2021.09.0``) conflicts with those versions.

Config::

    scorer:
      adapter: inspect_ai
      score_fn: "python:inspect_ai.scorer:includes"   # a scorer factory, or a ready scorer
      judge_provider: anthropic
      judge_model_id: claude-haiku-4-5
      judge_model_snapshot: claude-haiku-4-5-20251001  # optional
      rubric_id: mentions-record-status
      rubric_text: "..."                               # the target when a trace has none
      scoring_parameters: {ignore_case: true}          # keyword arguments of the factory

How one output becomes an Inspect sample (each output is scored alone, original and replayed
separately; the toolkit computes ``delta = replayed - original``):

- ``TaskState``: ``input`` and a first user message = the trace's user message, then an
  assistant message and ``output`` = the output text; ``metadata`` = the trace metadata;
  ``sample_id`` = the trace id; ``epoch`` 1. The state's model is the neutral label
  ``toolkit/agent``, the same for both outputs, so a scorer cannot tell which one it sees.
- ``Target``: the trace metadata's ``target`` (a string or a list of strings) when present,
  i.e. a per-trace reference answer as in an Inspect dataset; otherwise ``rubric_text``, the
  grading criterion (``model_graded_qa`` reads its target that way).
- ``score_fn`` naming a factory (``match``, ``includes``, ``model_graded_qa``, your own
  ``@scorer``) is called once, with ``scoring_parameters`` as keyword arguments (an unknown
  keyword is a setup error with the nearest valid name). When the factory takes a ``model``
  argument and the parameters do not set it, it gets ``"<judge_provider>/<model>"`` with the
  snapshot when set, else the model id: the judge fields choose the judge. ``score_fn``
  naming a ready scorer (``async (state, target) -> Score``) is used as is, and then
  ``scoring_parameters`` are refused, since nothing could read them.
- ``Score.value`` becomes a number with Inspect's own ``value_to_float()`` (``C`` 1, ``I`` 0,
  ``P`` 0.5, ``N`` 0; numbers and bools as they are) and must lie in [0, 1]; a dict or list
  value (several metrics at once) is ``scorer_invalid_output``. ``Score.explanation`` is the
  rationale.
- Judge fields a scorer cannot take (``match`` and ``includes`` have no ``model``) are
  disclosed as ``settings_unused``, never silently dropped. The five required fields, the
  inspect_ai version and the factory's source are part of the score-cache key.

Tested offline with Inspect's own ``match()`` and ``includes()`` and a custom ``@scorer``;
model-graded scorers call a model API, which the test environment cannot reach, so their
model call is not exercised here (only the plumbing of the ``model`` argument is).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from toolkit._util.hashing import sha256_hex
from toolkit.errors import did_you_mean
from toolkit.whatif.sources import SetupError, resolve_reference

__all__ = ["INSTALL_HINT", "build_inspect_scorer"]

INSTALL_HINT = (
    'pip install "inspect_ai>=0.3.285" (an optional extra: it needs fsspec<=2026.6.0 and, through s3fs, '
    "python-dateutil<3, so pip may move those two packages back)"
)
_AGENT_MODEL = "toolkit/agent"


def _import_inspect():
    try:
        import inspect_ai
        from inspect_ai.model import ChatMessageAssistant, ChatMessageUser, ModelName, ModelOutput
        from inspect_ai.scorer import Target, value_to_float
        from inspect_ai.solver import TaskState
    except ImportError as error:
        raise SetupError(
            f"scorer.adapter 'inspect_ai' needs the inspect_ai package, which is not importable here "
            f"({type(error).__name__}: {error}); install it with {INSTALL_HINT}, or use adapter 'python' "
            "with a score_fn that calls your judge"
        ) from None
    return {
        "version": getattr(inspect_ai, "__version__", "unknown"),
        "ChatMessageAssistant": ChatMessageAssistant,
        "ChatMessageUser": ChatMessageUser,
        "ModelName": ModelName,
        "ModelOutput": ModelOutput,
        "Target": Target,
        "value_to_float": value_to_float,
        "TaskState": TaskState,
    }


def _target_text(case) -> Any:
    target = (case.metadata or {}).get("target")
    if isinstance(target, str) or (isinstance(target, list) and target and all(isinstance(t, str) for t in target)):
        return target
    return case.rubric_text or ""


def build_inspect_scorer(settings) -> tuple[Any, str, dict[str, Any], tuple[str, ...]]:
    """``(async score(case), source_hash, extra_key_components, unused_fields)`` for ``settings``.

    ``settings`` is ``WhatIfConfig.scorer`` with ``adapter == "inspect_ai"``. Raises SetupError
    when inspect_ai is missing, the reference does not resolve, or the factory refuses the
    ``scoring_parameters``.
    """
    api = _import_inspect()
    target_object = resolve_reference(settings.score_fn, "scorer.score_fn")
    parameters = dict(settings.scoring_parameters)
    judge = f"{settings.judge_provider}/{settings.judge_model_snapshot or settings.judge_model_id}"
    unused: list[str] = []
    if inspect.iscoroutinefunction(target_object):
        if parameters:
            raise SetupError(
                f"scorer.score_fn {settings.score_fn!r} is a ready scorer, so scorer.scoring_parameters "
                f"({', '.join(sorted(parameters))}) could not reach it; name its factory instead "
                "(e.g. 'python:inspect_ai.scorer:match') or remove the parameters"
            )
        scorer = target_object
        unused += ["judge_provider", "judge_model_id"] + (["judge_model_snapshot"] if settings.judge_model_snapshot else [])
    else:
        try:
            accepted = inspect.signature(target_object).parameters
        except (TypeError, ValueError):
            accepted = {}
        takes_keywords = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values())
        if accepted and not takes_keywords:
            for name in parameters:
                if name not in accepted:
                    close = did_you_mean(name, list(accepted))
                    hint = f"; did you mean {close[0]!r}?" if close else f"; it takes: {', '.join(accepted) or 'nothing'}"
                    raise SetupError(f"scorer.scoring_parameters.{name}: {settings.score_fn} takes no argument {name!r}{hint}")
        if "model" not in parameters and ("model" in accepted or takes_keywords):
            parameters["model"] = judge
        elif "model" not in parameters:
            unused += ["judge_provider", "judge_model_id"] + (["judge_model_snapshot"] if settings.judge_model_snapshot else [])
        try:
            scorer = target_object(**parameters)
        except Exception as error:  # the factory's own validation, named
            raise SetupError(f"scorer.score_fn {settings.score_fn!r} could not build a scorer: {type(error).__name__}: {error}") from None
        if not callable(scorer):
            raise SetupError(f"scorer.score_fn {settings.score_fn!r} returned {type(scorer).__name__}, not a scorer")
    try:
        source = inspect.getsource(target_object)
    except (OSError, TypeError):
        source = getattr(target_object, "__qualname__", repr(target_object))

    to_float = api["value_to_float"]()
    model_name = api["ModelName"](_AGENT_MODEL)

    async def score(case) -> dict[str, Any]:
        state = api["TaskState"](
            model=model_name,
            sample_id=case.trace_id,
            epoch=1,
            input=case.user_message,
            messages=[api["ChatMessageUser"](content=case.user_message),
                      api["ChatMessageAssistant"](content=case.output_text)],
            output=api["ModelOutput"].from_content(_AGENT_MODEL, case.output_text),
            metadata=dict(case.metadata or {}),
        )
        result = await scorer(state, api["Target"](_target_text(case)))
        if result is None:
            return {"score": None, "rationale": "the inspect_ai scorer returned no Score"}
        value = getattr(result, "value", None)
        if isinstance(value, (Mapping, list, tuple)):
            # several metrics in one Score: which one is "the" score is the user's choice
            return {"score": None, "rationale": f"Score.value is a {type(value).__name__}; expected one value"}
        return {"score": to_float(value), "rationale": getattr(result, "explanation", None)}

    extra_key = {"inspect_ai_version": api["version"], "scorer_parameters_used": sha256_hex(repr(sorted(parameters.items())))}
    return score, sha256_hex(source)[:16], extra_key, tuple(unused)
