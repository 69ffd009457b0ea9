"""Our situations as an inspect_ai dataset, so an inspect user can run the covering grid with
their own solver and scorer, then read the log back with :func:`toolkit.read_inspect_log`
(issue 20, "the other direction").

It lives in the situations layer, not in rows, because a situation has no user message of
its own: one is written for it by :func:`toolkit.write_prompts`, a situations function.

What a sample holds (inspect_ai's ``Sample``: ``input``, ``target``, ``id``, ``metadata``):

- from a :class:`~toolkit.situations.Situation` (or a whole ``SituationGrid``):
  ``prompts_per_situation`` prompts written by ``write_prompts`` (seeded, no model);
  ``id`` = ``"<situation id>-p<variant>"`` (``"sc-...-p0"``), so
  :func:`toolkit.read_inspect_log` gives rows whose ``scenario_id`` is that id; ``metadata`` =
  ``{"situation_id", "layer", "tier", "axes": {axis: value}, "variant", "persona"}``;
  ``target`` = ``""`` (a situation states no expected answer; the user's scorer decides what
  passing means).
- from a :class:`~toolkit.situations.Prompt` (``write_prompts`` output): its text, the id as
  above from its ``situation_id`` and ``variant``, and ``metadata`` ``{"situation_id",
  "variant", "persona"}`` (a prompt carries no axes; pass the situation for them).
- from a row (a dict with ``prompt``, e.g. ``tk.simulate(...).rows``): one sample per
  distinct (``scenario_id``, prompt); a scenario's further rollouts of the same prompt are
  inspect's epochs, not extra samples. The id is the ``scenario_id`` when the scenario has one
  prompt among the rows given, else ``"<scenario_id>-<8 hex of sha256 of the prompt>"`` for
  each of its prompts (``tk.simulate`` writes several phrasings per scenario; a hash keeps
  the id the same whatever the rows' order). ``input`` = the prompt, or ``[system, user]``
  chat messages when the row's messages open with a system message; ``metadata`` =
  ``{"scenario_id", "task_id", "tier", "layer", "axes"}`` as far as the scenario's first row
  has them (``axes`` from its ``scenario_dimensions``), shared by every sample of the
  scenario. Nothing under ``privileged`` (the answer key) is read.

What the agent may see. inspect hands a sample's ``metadata`` to the solver and the scorer
alike (``TaskState.metadata``), so anything in it is readable by the agent under test. The
engine keeps the ``world_state`` and ``tool_condition`` axes (whether the named record exists,
which fault the tool will raise) and the prompt's named reference as the judge's hidden
state (``privileged``: ``hidden_state``, ``named_reference``; toolkit/sim/engine.py), so by
default they are left out: ``axes`` holds the other four, and no ``reference`` key is written.
``hidden_axes=True`` puts them in (``axes`` with all six, ``reference`` on situation and
prompt samples) for a user whose tools must enact the world state and the fault or whose
scorer grades against them; the solver must then be kept from reading them.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from toolkit._util.hashing import sha256_hex
from toolkit._util.results import json_safe
from toolkit.errors import ConfigError
from toolkit.situations.grid import Situation, SituationGrid
from toolkit.situations.writer import Prompt, write_prompts

__all__ = ["to_inspect_dataset"]

_INSTALL_HINT = 'to_inspect_dataset needs inspect_ai: pip install "toolkit[inspect]"'
# The row fields copied into a sample's metadata: identity only (the axes are added from
# scenario_dimensions); the rest of a row (rewards, steps, privileged) is an outcome, not
# part of the question.
_ROW_FIELDS = ("scenario_id", "task_id", "tier", "layer")
# The axes the engine keeps as the judge's hidden state (privileged "hidden_state" in
# toolkit/sim/engine.py): the agent must discover them, not read them (module docstring).
_HIDDEN_AXES = ("world_state", "tool_condition")
# Hex digits of sha256 that tell one scenario's prompts apart in their sample ids: a scenario
# has a handful of phrasings, so 32 bits make a clash negligible, and one would still be
# refused as a repeated sample id, never merged.
_PROMPT_ID_HEX = 8


def _inspect_dataset_api() -> tuple[Any, Any, Any, Any]:
    try:
        from inspect_ai.dataset import MemoryDataset, Sample
        from inspect_ai.model import ChatMessageSystem, ChatMessageUser
    except ImportError as error:
        raise ImportError(f"{_INSTALL_HINT} (import failed: {error})") from error
    return MemoryDataset, Sample, ChatMessageSystem, ChatMessageUser


def _sample_id(situation_id: str, variant: int) -> str:
    # always suffixed, so one situation's prompts never collide whichever n wrote them
    return f"{situation_id}-p{variant}"


def _prompt_metadata(prompt: Prompt, hidden_axes: bool) -> dict[str, Any]:
    metadata = {"situation_id": prompt.situation_id, "variant": prompt.variant, "persona": dict(prompt.persona)}
    if hidden_axes:
        metadata["reference"] = prompt.reference
    return metadata


def _axes(dimensions: Mapping[str, Any], hidden_axes: bool) -> dict[str, Any]:
    return {axis: json_safe(value) for axis, value in dimensions.items() if hidden_axes or axis not in _HIDDEN_AXES}


def _row_system(row: Mapping[str, Any]) -> str | None:
    messages = row.get("messages")
    if isinstance(messages, list) and messages and isinstance(messages[0], Mapping):
        first = messages[0]
        if first.get("role") == "system" and isinstance(first.get("content"), str):
            return first["content"]
    return None


def to_inspect_dataset(
    situations_or_rows: Any,
    *,
    prompts_per_situation: int = 1,
    seed: int = 0,
    tools: Any = None,
    name: str | None = None,
    hidden_axes: bool = False,
) -> Any:
    """An inspect_ai ``MemoryDataset`` of situations, written prompts or rows.

    ``eval(Task(dataset=tk.to_inspect_dataset(grid), solver=..., scorer=...), model=...)``
    runs the grid in inspect; ``tk.read_inspect_log`` reads the log back with each sample's
    id as ``scenario_id`` and its axes in the row's privileged ``inspect_metadata``. The
    sample layout is the module docstring's.

    Parameters
    ----------
    situations_or_rows : SituationGrid, Situation, Prompt, row dict, or an iterable of them
        What to turn into samples. Items of different kinds may be mixed.
    prompts_per_situation : int, optional
        How many prompts :func:`toolkit.write_prompts` writes per situation (default 1); each
        is one sample. Prompts and rows given directly are taken as they are.
    seed : int, optional
        ``write_prompts``' seed (default 0): the same seed gives the same dataset.
    tools : any, optional
        The agent's tools, passed to ``write_prompts`` so prompts name ids in the shapes the
        tools document (default None).
    name : str, optional
        The dataset's name (default ``"toolkit-situations"``).
    hidden_axes : bool, optional
        Default False: the ``world_state`` and ``tool_condition`` axes and the prompt's named
        ``reference`` (the engine's hidden state, for the judge) are left out of the metadata,
        because inspect shows metadata to the solver as well as the scorer. True: they are
        included, for tools that must enact them or a scorer that grades against them; keep
        the solver from reading them. Module docstring.

    Returns
    -------
    inspect_ai.dataset.MemoryDataset
        One sample per prompt (situations, prompts) or per distinct (scenario, prompt)
        (rows), in input order.

    Raises
    ------
    ImportError
        When inspect_ai is not installed (the ``inspect`` extra).
    ConfigError
        When an item is of another type, a row has no string ``prompt`` or ``scenario_id``,
        two samples would share an id, ``hidden_axes`` is not a bool, or
        ``prompts_per_situation`` is not an integer >= 1 (the message names the item).

    References
    ----------
    .. [1] UK AI Security Institute, "Inspect AI: Framework for Large Language Model
       Evaluations", https://inspect.aisi.org.uk/datasets.html (``Sample``, ``MemoryDataset``).
    """
    MemoryDataset, Sample, ChatMessageSystem, ChatMessageUser = _inspect_dataset_api()
    if isinstance(prompts_per_situation, bool) or not isinstance(prompts_per_situation, int) or prompts_per_situation < 1:
        raise ConfigError(f"to_inspect_dataset: prompts_per_situation must be an integer >= 1, got {prompts_per_situation!r}")
    if not isinstance(hidden_axes, bool):
        raise ConfigError(f"to_inspect_dataset: hidden_axes must be True or False, got {hidden_axes!r}")
    if isinstance(situations_or_rows, (SituationGrid, Situation, Prompt, Mapping)):
        items: Iterable[Any] = [situations_or_rows]
    elif isinstance(situations_or_rows, Iterable) and not isinstance(situations_or_rows, (str, bytes)):
        items = situations_or_rows
    else:
        raise ConfigError(f"to_inspect_dataset: expected situations, prompts or rows, got {type(situations_or_rows).__name__}")
    flat: list[tuple[str, Any]] = []
    for index, item in enumerate(items):
        if isinstance(item, SituationGrid):
            flat.extend((f"item {index} situation {j}", s) for j, s in enumerate(item))
        else:
            flat.append((f"item {index}", item))
    # every row's scenario and prompt first, so a scenario's sample ids do not depend on
    # whether its second phrasing comes before or after its first rollout
    prompts_of: dict[str, list[str]] = {}
    for where, item in flat:
        if isinstance(item, Mapping):
            prompt = item.get("prompt")
            scenario = item.get("scenario_id")
            if not isinstance(prompt, str):
                raise ConfigError(f"to_inspect_dataset: {where}.prompt: expected a string, got {type(prompt).__name__}")
            if isinstance(scenario, bool) or not isinstance(scenario, (str, int)):
                raise ConfigError(f"to_inspect_dataset: {where}.scenario_id: expected a string or integer, got {scenario!r}")
            known = prompts_of.setdefault(str(scenario), [])
            if prompt not in known:
                known.append(prompt)
    samples: list[Any] = []
    seen: dict[str, str] = {}
    scenario_metadata: dict[str, dict[str, Any]] = {}
    row_samples: set[tuple[str, str]] = set()

    def add(sample_id: str, where: str, **fields: Any) -> None:
        if sample_id in seen:
            raise ConfigError(f"to_inspect_dataset: {where} has sample id {sample_id!r}, already used by {seen[sample_id]}")
        seen[sample_id] = where
        samples.append(Sample(id=sample_id, **fields))

    for where, item in flat:
        if isinstance(item, Situation):
            axes = _axes(item.dimensions, hidden_axes)
            for prompt in write_prompts(item, prompts_per_situation, seed=seed, tools=tools):
                metadata = {"situation_id": item.id, "layer": item.layer, "tier": item.tier, "axes": axes}
                metadata.update(_prompt_metadata(prompt, hidden_axes))
                add(_sample_id(item.id, prompt.variant), where, input=prompt.text, target="", metadata=metadata)
        elif isinstance(item, Prompt):
            if not item.situation_id:
                raise ConfigError(f"to_inspect_dataset: {where}: the prompt has no situation_id to name its sample")
            add(
                _sample_id(item.situation_id, item.variant), where, input=item.text, target="", metadata=_prompt_metadata(item, hidden_axes)
            )
        elif isinstance(item, Mapping):
            prompt = item["prompt"]
            key = str(item["scenario_id"])
            several = len(prompts_of[key]) > 1
            sample_id = f"{key}-{sha256_hex(prompt)[:_PROMPT_ID_HEX]}" if several else key
            if (key, prompt) in row_samples:
                continue  # another rollout of the same prompt: inspect's epochs repeat it
            row_samples.add((key, prompt))
            if key not in scenario_metadata:
                metadata = {field: json_safe(copy.deepcopy(item[field])) for field in _ROW_FIELDS if field in item}
                dimensions = item.get("scenario_dimensions")
                if isinstance(dimensions, Mapping):
                    metadata["axes"] = _axes(dimensions, hidden_axes)
                scenario_metadata[key] = metadata
            system = _row_system(item)
            sample_input: Any = prompt if system is None else [ChatMessageSystem(content=system), ChatMessageUser(content=prompt)]
            add(sample_id, where, input=sample_input, target="", metadata=copy.deepcopy(scenario_metadata[key]))
        else:
            raise ConfigError(
                f"to_inspect_dataset: {where}: expected a Situation, SituationGrid, Prompt or row dict, " f"got {type(item).__name__}"
            )
    return MemoryDataset(samples, name=name or "toolkit-situations")
