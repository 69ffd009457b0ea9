"""Where the example data shipped in the checkout's ``datasets/`` folder lives.

The demo, the notebooks and the benchmarks read example tool sets and runs from there;
nothing in the library itself depends on them.
"""

from __future__ import annotations

from pathlib import Path

from toolkit.errors import ConfigError, unknown_name_message

__all__ = ["dataset_path", "list_datasets"]


def _root() -> Path:
    return Path(__file__).resolve().parents[2] / "datasets"


def list_datasets() -> list[str]:
    """Relative paths of every file under ``datasets/`` (empty outside a checkout)."""
    root = _root()
    if not root.is_dir():
        return []
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.suffix != ".py")


def dataset_path(name: str) -> Path:
    """The path of ``datasets/<name>``; a clear error (with the nearest name) when missing."""
    path = _root() / name
    if path.is_file():
        return path
    available = list_datasets()
    if not available:
        raise ConfigError(
            f"no datasets/ folder next to the installed package ({_root()}); "
            "install the project from a checkout (pip install -e .) to use the shipped examples"
        )
    raise ConfigError(unknown_name_message("dataset", name, available))
