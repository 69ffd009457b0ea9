"""The public surface is pinned: ``sorted(tk.__all__)`` must equal ``tests/public_api.txt``.

A name can only appear in or vanish from ``tk.`` on purpose: change the list in the same
commit and say why.
"""

from pathlib import Path

import toolkit as tk

_PINNED = Path(__file__).with_name("public_api.txt")


def test_top_level_names_are_pinned() -> None:
    pinned = _PINNED.read_text(encoding="utf-8").split()
    current = sorted(tk.__all__)
    added, removed = sorted(set(current) - set(pinned)), sorted(set(pinned) - set(current))
    assert not added and not removed, f"tk.__all__ changed: added {added}, removed {removed}"
    assert current == pinned


def test_every_public_name_resolves() -> None:
    for name in tk.__all__:
        assert getattr(tk, name) is not None, name


def test_a_name_that_moved_says_where_it_lives() -> None:
    import pytest

    with pytest.raises(AttributeError, match=r"it is tk\.stats\.BootstrapResult"):
        tk.BootstrapResult  # noqa: B018
    with pytest.raises(AttributeError, match=r"no attribute 'no_such_name'$"):
        tk.no_such_name  # noqa: B018
    assert tk.stats.BootstrapResult is not None
