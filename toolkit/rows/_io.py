"""File plumbing behind ``RowWriter`` / ``save_rows`` / ``read_rows``: JSON-plain values,
durable appends, atomic replaces and torn-tail repair. Private; :mod:`toolkit.rows` is the API.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from toolkit.errors import RowError

__all__ = [
    "sidecar_path", "plain_json", "fsync_directory", "atomic_write_bytes", "repair_torn_tail", "write_all", "json_loads",
    "MAX_NESTING", "deeper_than",
]

# The deepest nesting the trace readers accept. Far deeper than any real trace: a Langfuse
# export reaches about a dozen levels before the user's own JSON (envelope, trace,
# observations, input, messages, content parts) and tool arguments add a few more. Low
# enough that each walk after reading (copy.deepcopy, plain_json, the OpenInference
# attribute nesting: one to three Python frames per level) stays far inside Python's
# default recursion limit of 1,000 from wherever the caller already is on the stack; a
# valid file of 900 levels reached those walks and raised a bare RecursionError.
MAX_NESTING = 100


def json_loads(text: str | bytes) -> Any:
    """``json.loads``, with nesting too deep for Python's decoder reported as the
    ``json.JSONDecodeError`` (a ``ValueError``) every reader already turns into a message
    naming the file and line, instead of a bare ``RecursionError`` (a hostile or broken
    file of 5,000 nested brackets raised one from every reader)."""
    try:
        return json.loads(text)
    except RecursionError:
        document = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
        raise json.JSONDecodeError("nested deeper than the JSON decoder allows (about 1,000 levels)", document, 0) from None


def deeper_than(value: Any, limit: int = MAX_NESTING) -> bool:
    """Whether ``value`` nests dicts / lists more than ``limit`` levels (a scalar is 0, ``[]``
    is 1). Walked with an explicit stack, so the check itself cannot overflow Python's."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _path_text(path: str, key: Any) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}"


def plain_json(value: Any, path: str = "row") -> Any:
    """``value`` as plain JSON types: numpy scalars and arrays become Python numbers and
    lists, tuples become lists, NaN and infinities become ``None`` (JSON has no NaN and
    strict loaders refuse it). Anything else that JSON cannot hold raises ``RowError``
    naming where it sits, rather than being written as its ``str()``.
    """
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                if isinstance(key, (int, float, bool)) or key is None:
                    key = json.dumps(key)  # what json.dumps itself would write as the key
                else:
                    raise RowError(f"{path}: key {key!r} is a {type(key).__name__}; JSON keys are strings")
            out[key] = plain_json(item, _path_text(path, key))
        return out
    if isinstance(value, (list, tuple)):
        return [plain_json(item, f"{path}[{index}]") for index, item in enumerate(value)]
    try:
        import numpy as np
    except ImportError:  # numpy is a dependency; only odd environments lack it
        np = None
    if np is not None:
        if isinstance(value, np.bool_):
            return bool(value)
        if isinstance(value, np.integer):
            return int(value)
        if isinstance(value, np.floating):
            number = float(value)
            return number if math.isfinite(number) else None
        if isinstance(value, np.ndarray):
            return plain_json(value.tolist(), path)
    raise RowError(
        f"{path}: a {type(value).__name__} is not JSON; convert it to a string, number, "
        "list or dict before writing the row"
    )


def fsync_directory(directory: Path) -> None:
    """Make a created or renamed directory entry durable (POSIX; a no-op where the OS
    cannot open directories)."""
    try:
        fd = os.open(str(directory), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """``os.write`` until every byte is out (a write may be partial)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _current_umask() -> int:
    """The process umask, read without changing it (os.umask sets as it reads, which races
    with other threads creating files); 0o022 where /proc is unavailable."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, fsync it, then ``os.replace``:
    a reader sees the old file or the whole new one, never a part."""
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    try:
        try:
            # mkstemp creates 0600; give the file the mode a plain open() would have (the old
            # file's mode when replacing one), so a saved run stays readable by its group.
            try:
                mode = os.stat(path).st_mode & 0o777
            except FileNotFoundError:
                mode = 0o666 & ~_current_umask()
            os.fchmod(fd, mode)
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise
    fsync_directory(directory)


# Reading backwards in blocks finds the last newline of a large file without loading it.
_TAIL_BLOCK = 1 << 16


def repair_torn_tail(path: Path) -> str | None:
    """Make an existing JSONL file end with a newline before appending to it.

    Returns ``None`` (nothing to do), ``"newline_added"`` (the last line is a complete JSON
    object that only lacked its newline, e.g. a hand-written file) or ``"truncated"`` (the
    last line is a torn fragment: a row whose ``write()`` never returned because the process
    died mid-write; it was never reported written, so cutting it loses nothing reported).
    """
    with open(path, "r+b") as handle:
        size = handle.seek(0, os.SEEK_END)
        if size == 0:
            return None
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return None
        # Find the start of the last line.
        position = size
        start = 0
        while position > 0:
            block_start = max(0, position - _TAIL_BLOCK)
            handle.seek(block_start)
            block = handle.read(position - block_start)
            newline = block.rfind(b"\n")
            if newline >= 0:
                start = block_start + newline + 1
                break
            position = block_start
        handle.seek(start)
        tail = handle.read(size - start)
        try:
            parsed = json.loads(tail.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            parsed = None
        if isinstance(parsed, dict):
            handle.seek(size)
            handle.write(b"\n")
            handle.flush()
            os.fsync(handle.fileno())
            return "newline_added"
        handle.truncate(start)
        handle.flush()
        os.fsync(handle.fileno())
    warnings.warn(
        f"RowWriter: removed a torn final line ({size - start} bytes) from {path}: a row "
        "whose write() never returned (the writing process stopped mid-line); every row "
        "before it is intact",
        UserWarning,
        stacklevel=3,
    )
    return "truncated"


def sidecar_path(path: Path) -> Path:
    """The metadata file beside a rows file: ``runs.jsonl`` -> ``runs.meta.json``."""
    name = path.name[: -len(".jsonl")] if path.name.endswith(".jsonl") else path.name
    return path.with_name(name + ".meta.json")
