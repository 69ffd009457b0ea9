"""Our situations as an inspect_ai dataset, so an inspect user can run the covering grid with
their own solver and scorer, then read the log back with :func:`toolkit.read_inspect_log`
(issue 20, "the other direction").

It lives in the situations layer, not in rows, because a situation has no user message of
its own: one is written for it by :func:`toolkit.write_prompts`, a situations function.

What a sample holds (inspect_ai's ``Sample``: ``input``, ``target``, ``id``, ``metadata``):

- from a :class:`~toolkit.situations.Situation` (or a whole ``SituationGrid``):
  ``prompts_per_situation`` prompts written by ``write_prompts`` (seeded, no model);
  ``id`` = ``"<situation id>-p<variant>"`` (``"sc-...-p0"``), so
  :func:`toolkit.read_inspect_log` gives rows whose ``scenario_id`` is that id; ``metadata`` = ``{"situation_id", "layer", "tier", "axes":
  {axis: value}, "variant", "persona", "reference"}``; ``target`` = ``""`` (a situation states
  no expected answer; the user's scorer decides what passing means).
- from a :class:`~toolkit.situations.Prompt` (``write_prompts`` output): its text, the id as
  above from its ``situation_id`` and ``variant``, and ``metadata`` ``{"situation_id",
  "variant", "persona", "reference"}`` (a prompt carries no axes; pass the situation for them).
- from a row (a dict with ``prompt``): one sample per ``scenario_id`` (its rollouts are
  inspect's epochs, not extra samples); ``input`` = the prompt, or ``[system, user]`` chat
  messages when the row's messages open with a system message; ``metadata`` =
  ``{"scenario_id", "task_id", "tier", "layer", "dimensions"}`` as far as the row has them.
  Nothing under ``privileged`` (the answer key) is read, so it cannot reach an inspect log.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from toolkit._util.results import json_safe
from toolkit.errors import ConfigError
from toolkit.situations.grid import Situation, SituationGrid
from toolkit.situations.writer import Prompt, write_prompts

__all__ = ["to_inspect_dataset"]

_INSTALL_HINT = 'to_inspect_dataset needs inspect_ai: pip install "toolkit[inspect]"'
# The row fields copied into a sample's metadata: identity and situation axes only; the
# rest of a row (rewards, steps, privileged) is an outcome, not part of the question.
_ROW_FIELDS = ("scenario_id", "task_id", "tier", "layer", "dimensions")


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


def _prompt_metadata(prompt: Prompt) -> dict[str, Any]:
    return {
        "situation_id": prompt.situation_id,
        "variant": prompt.variant,
        "persona": dict(prompt.persona),
        "reference": prompt.reference,
    }


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

    Returns
    -------
    inspect_ai.dataset.MemoryDataset
        One sample per prompt (situations, prompts) or per scenario (rows), in input order.

    Raises
    ------
    ImportError
        When inspect_ai is not installed (the ``inspect`` extra).
    ConfigError
        When an item is of another type, a row has no string ``prompt`` or ``scenario_id``,
        two rows of one scenario have different prompts, two samples would share an id, or
        ``prompts_per_situation`` is not an integer >= 1 (the message names the item).

    References
    ----------
    .. [1] UK AI Security Institute, "Inspect AI: Framework for Large Language Model
       Evaluations", https://inspect.aisi.org.uk/datasets.html (``Sample``, ``MemoryDataset``).
    """
    MemoryDataset, Sample, ChatMessageSystem, ChatMessageUser = _inspect_dataset_api()
    if isinstance(prompts_per_situation, bool) or not isinstance(prompts_per_situation, int) or prompts_per_situation < 1:
        raise ConfigError(f"to_inspect_dataset: prompts_per_situation must be an integer >= 1, got {prompts_per_situation!r}")
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
    samples: list[Any] = []
    seen: dict[str, str] = {}
    row_prompts: dict[str, str] = {}

    def add(sample_id: str, where: str, **fields: Any) -> None:
        if sample_id in seen:
            raise ConfigError(f"to_inspect_dataset: {where} has sample id {sample_id!r}, already used by {seen[sample_id]}")
        seen[sample_id] = where
        samples.append(Sample(id=sample_id, **fields))

    for where, item in flat:
        if isinstance(item, Situation):
            axes = {axis: json_safe(value) for axis, value in item.dimensions.items()}
            for prompt in write_prompts(item, prompts_per_situation, seed=seed, tools=tools):
                metadata = {"situation_id": item.id, "layer": item.layer, "tier": item.tier, "axes": axes}
                metadata.update(_prompt_metadata(prompt))
                add(_sample_id(item.id, prompt.variant), where, input=prompt.text, target="", metadata=metadata)
        elif isinstance(item, Prompt):
            if not item.situation_id:
                raise ConfigError(f"to_inspect_dataset: {where}: the prompt has no situation_id to name its sample")
            add(_sample_id(item.situation_id, item.variant), where, input=item.text, target="", metadata=_prompt_metadata(item))
        elif isinstance(item, Mapping):
            prompt = item.get("prompt")
            scenario = item.get("scenario_id")
            if not isinstance(prompt, str):
                raise ConfigError(f"to_inspect_dataset: {where}.prompt: expected a string, got {type(prompt).__name__}")
            if isinstance(scenario, bool) or not isinstance(scenario, (str, int)):
                raise ConfigError(f"to_inspect_dataset: {where}.scenario_id: expected a string or integer, got {scenario!r}")
            key = str(scenario)
            if key in row_prompts:
                if row_prompts[key] != prompt:
                    raise ConfigError(
                        f"to_inspect_dataset: {where}: scenario {key!r} has two different prompts; "
                        "a sample has one input (give each prompt its own scenario_id)"
                    )
                continue  # another rollout of the same scenario: inspect's epochs repeat it
            row_prompts[key] = prompt
            metadata = {field: json_safe(copy.deepcopy(item[field])) for field in _ROW_FIELDS if field in item}
            system = _row_system(item)
            sample_input: Any = prompt if system is None else [ChatMessageSystem(content=system), ChatMessageUser(content=prompt)]
            add(key, where, input=sample_input, target="", metadata=metadata)
        else:
            raise ConfigError(
                f"to_inspect_dataset: {where}: expected a Situation, SituationGrid, Prompt or row dict, " f"got {type(item).__name__}"
            )
    return MemoryDataset(samples, name=name or "toolkit-situations")
