"""Every public function documents every parameter (a numpydoc ``Parameters`` section).

Public = listed in a sub-namespace's ``__all__`` (``tk.stats``, ``tk.world`` ...): its
functions and the classes a user constructs (result dataclasses and exceptions are built by
the toolkit, not by users, and are left out). A parameter counts as documented when its name
starts an entry of the section (``name : type``; several names may share one entry,
``a, b : int``; ``**options`` for keyword catch-alls).
"""

from __future__ import annotations

import importlib
import inspect
import re

import pytest

import toolkit as tk
from toolkit._util.results import Result


def _public_callables() -> list[tuple[str, object]]:
    found: dict[int, tuple[str, object]] = {}
    for package in tk.SUBPACKAGES:
        module = importlib.import_module(f"toolkit.{package}")
        for name in module.__all__:
            obj = getattr(module, name)
            constructed = inspect.isclass(obj) and not issubclass(obj, (BaseException, Result)) and not hasattr(obj, "__dataclass_fields__")
            if inspect.isfunction(obj) or constructed:
                found.setdefault(id(obj), (f"tk.{package}.{name}", obj))
    return sorted(found.values(), key=lambda item: item[0])


def undocumented(obj: object) -> list[str]:
    """The parameters of ``obj`` its docstring's Parameters section does not name."""
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return []
    names = [p for p in signature.parameters.values() if p.name not in ("self", "cls") and p.kind is not p.VAR_POSITIONAL]
    if not names:
        return []
    doc = inspect.getdoc(obj) or ""
    section = re.search(r"^Parameters\n-{3,}\n(.*?)(?=^\S[^\n]*\n-{3,}\n|\Z)", doc, re.S | re.M)
    if section is None:
        return [p.name for p in names]
    entries = [line for line in section.group(1).splitlines() if line and not line.startswith(" ")]
    given = {part.strip().lstrip("*") for entry in entries for part in entry.split(":", 1)[0].split(",")}
    return [p.name for p in names if p.name not in given]


PUBLIC = _public_callables()


def test_the_walk_found_the_public_surface() -> None:
    assert len(PUBLIC) > 100
    assert "tk.sim.simulate" in {name for name, _ in PUBLIC}


def test_the_checker_sees_a_missing_parameter() -> None:
    def documented(a, b=1, **options):
        """Do a thing.

        Parameters
        ----------
        a, b : int
            Numbers.
        **options
            Passed on.
        """

    def half(a, b):
        """Parameters
        ----------
        a : int
        """

    assert undocumented(documented) == []
    assert undocumented(half) == ["b"]


@pytest.mark.parametrize("name, obj", PUBLIC, ids=[name for name, _ in PUBLIC])
def test_every_parameter_is_documented(name: str, obj: object) -> None:
    assert undocumented(obj) == [], f"{name}: document these parameters in a numpydoc Parameters section"
