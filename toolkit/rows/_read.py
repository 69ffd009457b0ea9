"""Reading rows: :func:`read_rows`, :func:`to_pandas`, and ``as_row_list`` (the containers a user holds rows in).
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from toolkit._util.keys import task_key
from toolkit.errors import RowError
from toolkit.rows._io import json_loads, sidecar_path
from toolkit.rows._schema import SCRUBBED_KEYS, _python_type_word, validate_row
from toolkit.rows._scrub import _strip_scrubbed

__all__ = ["Rows", "read_rows", "to_pandas", "as_row_list"]

# --------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------


class Rows(list):
    """A list of row dicts plus what the reader saw.

    ``skipped``: lines not loaded (malformed lines under ``strict=False``, and a torn final
    line); ``skipped_lines``: their 1-based line numbers; ``torn_tail``: the last line had no
    newline and did not parse (a writer killed mid-line; skipped with a warning even when
    strict); ``shapes``: ``{shape: count}`` over loaded rows, shape one of ``"v1"`` (stamped),
    ``"engine"`` (``scenario_id``), ``"training"`` (``messages`` without ``steps`` /
    ``final_text``), ``"platform"`` (``tool_trace``), ``"otel"`` (``conversation_id``),
    ``"hf_flat"`` (``*_json`` string columns) or ``"v0"`` (unstamped, none of those);
    ``path``: the file read (``None`` for a stream); ``meta``: its ``.meta.json`` sidecar, if
    any. Slicing returns a plain list.

    Parameters
    ----------
    rows : iterable of dict, optional
        The initial rows, taken as they are (neither validated nor copied one by one);
        default empty. The reader's attributes start at their empty values (``skipped`` 0,
        ``skipped_lines`` [], ``torn_tail`` False, ``shapes`` {}, ``path`` and ``meta``
        None) whatever the rows; :func:`read_rows` fills them in.
    """

    def __init__(self, rows: Iterable[dict[str, Any]] = ()) -> None:
        super().__init__(rows)
        self.skipped = 0
        self.skipped_lines: list[int] = []
        self.torn_tail = False
        self.shapes: dict[str, int] = {}
        self.path: Path | None = None
        self.meta: dict[str, Any] | None = None

    def __repr__(self) -> str:
        extra = f", skipped={self.skipped}" if self.skipped else ""
        return f"Rows(n={len(self)}, shapes={self.shapes}{extra})"


def _legacy_shape(row: Mapping[str, Any]) -> str:
    """The version-0 shape of an unstamped row, detected by key (docs/design/engine.md §8)."""
    if any(isinstance(k, str) and k.endswith("_json") and isinstance(v, str) for k, v in row.items()):
        return "hf_flat"
    if "conversation_id" in row:
        return "otel"
    if "tool_trace" in row:
        return "platform"
    if "messages" in row and "steps" not in row and "final_text" not in row:
        return "training"
    if "scenario_id" in row:
        return "engine"
    return "v0"


def _lines(source: Any) -> tuple[Iterator[bytes | str], str, Path | None, Any]:
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.exists():
            raise FileNotFoundError(f"read_rows: no such file {str(path)!r}")
        handle = open(path, "rb")  # noqa: SIM115 - closed by the caller
        return iter(handle), str(path), path, handle
    if hasattr(source, "read"):
        name = str(getattr(source, "name", "<stream>"))
        return iter(source.readline, source.read(0)), name, None, None
    raise TypeError(
        f"read_rows: expected a path or an open file, got {type(source).__name__}"
    )


def _unstamped_problem(row: Mapping[str, Any]) -> str | None:
    """Why an unstamped (version-0) row cannot be read as a row, or None. The schema checks
    stamped rows; these are the fields every reader of an unstamped one relies on."""
    for key in ("steps", "messages"):
        if key in row and row[key] is not None and not isinstance(row[key], list):
            return f"field {key!r} must be a list, got {_python_type_word(row[key])} (an unstamped row; no schema_version)"
    if isinstance(row.get("steps"), list):
        for position, step in enumerate(row["steps"]):
            if not isinstance(step, Mapping):
                return f"field 'steps[{position}]' must be an object, got {_python_type_word(step)} (an unstamped row)"
    for key in ("prompt", "final_text"):
        if key in row and row[key] is not None and not isinstance(row[key], str):
            return f"field {key!r} must be a string, got {_python_type_word(row[key])} (an unstamped row)"
    return None


def read_rows(path_or_file: Any, strict: bool = True) -> Rows:
    """Read a JSONL rows file (a path, or an open text or binary file).

    One JSON object per line; blank lines are ignored. Stamped rows are validated; unstamped
    (version 0) rows load as they are and their shape is counted in ``Rows.shapes``.

    A malformed line (not JSON, not an object, an empty object, or a stamped row that fails
    the schema) raises :class:`~toolkit.RowError` naming the file and line number; with
    ``strict=False`` it is skipped, counted in ``.skipped`` / ``.skipped_lines`` and one
    warning names them. A final line without a newline that does not parse is a torn write
    (a process killed mid-line): it is skipped with a warning even when ``strict``, and
    ``.torn_tail`` is set, because every row written before it is intact.

    Each mistaken file gets its own message naming it: an empty or blank file warns that
    it holds no rows; a pretty-printed JSON array or object (a first line of ``[`` or ``{``)
    raises RowError even when not ``strict`` (no line of it is a row); a UTF-8 byte-order
    mark is ignored with a warning; an unstamped row whose ``steps`` / ``messages`` is not a
    list, whose step is not an object or whose ``prompt`` / ``final_text`` is not a string
    is malformed like any other line.

    Parameters
    ----------
    path_or_file : str, os.PathLike or file
        A path to the JSONL file, or an open file (text or binary; anything with ``read``
        and ``readline``), read line by line from its current position. Bytes are decoded
        as UTF-8; a line that is not UTF-8 is malformed. A path is closed after reading; an
        open file is left open. Only a path gets its ``.meta.json`` sidecar read (a sidecar
        that is not valid JSON leaves ``.meta`` None with a warning).
    strict : bool, optional
        Default True: the first malformed line raises. False: malformed lines are skipped
        and counted, with one warning naming them. A torn final line is skipped either way.

    Returns
    -------
    Rows
        The loaded rows, with ``skipped``, ``skipped_lines``, ``torn_tail``, ``shapes``,
        ``path`` (None for an open file) and ``meta``.

    Raises
    ------
    FileNotFoundError
        When the path does not exist.
    TypeError
        When ``path_or_file`` is neither a path nor an open file.
    RowError
        Under ``strict`` for the first malformed line (not the torn final one).
    """
    lines, name, path, handle = _lines(path_or_file)
    rows = Rows()
    rows.path = path
    malformed: list[int] = []
    seen_text = False  # any non-blank line: a file without one gets its own warning
    number = 0
    try:
        for number, raw in enumerate(lines, start=1):
            unterminated = not (raw.endswith(b"\n") if isinstance(raw, bytes) else raw.endswith("\n"))
            problem = None
            try:
                text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
            except UnicodeDecodeError as error:
                text, problem = None, f"not UTF-8 ({error.reason} at byte {error.start})"
            if number == 1 and text is not None and text.startswith("\ufeff"):
                # a UTF-8 byte-order mark (Windows editors, Excel exports): not part of the JSON
                text = text[1:]
                warnings.warn(f"read_rows: {name} starts with a UTF-8 byte-order mark; it was ignored", UserWarning, stacklevel=2)
            if text is not None and not text.strip():
                continue
            if not seen_text and text is not None and text.strip() in ("[", "{"):
                # one pretty-printed JSON document, not JSON Lines: under strict=False every line
                # would be skipped and the last called torn, so this is refused either way
                kind = "array" if text.strip() == "[" else "object"
                raise RowError(
                    f"{name} line {number}: the file is one pretty-printed JSON {kind}, not JSON Lines (one row object per "
                    "line); rewrite it with tk.save_rows(json.load(open(path)), new_path)"
                    + (", or for tau-bench results use tk.read_tau_bench" if kind == "array" else "")
                )
            seen_text = seen_text or text is not None
            row = None
            parse_failed = text is None
            if text is not None:
                try:
                    row = json_loads(text)
                except ValueError as error:
                    parse_failed = True
                    problem = f"not valid JSON ({error.msg} at column {error.colno})"
            if row is not None and not isinstance(row, dict):
                problem = f"expected one JSON object per line, got {_python_type_word(row)}"
                if number == 1 and isinstance(row, list):
                    problem += " (a JSON list file? for tau-bench results use tk.read_tau_bench)"
            elif isinstance(row, dict):
                try:
                    validate_row(row)
                except RowError as error:
                    problem = str(error)
                if problem is None and "schema_version" not in row:
                    problem = _unstamped_problem(row)
            if problem is None:
                rows.append(row)
                shape = "v1" if "schema_version" in row else _legacy_shape(row)
                rows.shapes[shape] = rows.shapes.get(shape, 0) + 1
                continue
            if unterminated and parse_failed:
                rows.torn_tail = True
                rows.skipped += 1
                rows.skipped_lines.append(number)
                warnings.warn(
                    f"read_rows: skipped a torn final line {number} in {name} (no newline, "
                    "not complete JSON: a writer stopped mid-line); the rows before it are intact",
                    UserWarning,
                    stacklevel=2,
                )
                continue
            if strict:
                raise RowError(f"{name} line {number}: {problem}")
            malformed.append(number)
            rows.skipped += 1
            rows.skipped_lines.append(number)
    finally:
        if handle is not None:
            handle.close()
    if not seen_text:
        what = "empty (0 bytes)" if number == 0 else f"blank ({number} empty lines)"
        warnings.warn(f"read_rows: {name} is {what}: no rows to read", UserWarning, stacklevel=2)
    if malformed:
        shown = ", ".join(str(n) for n in malformed[:10]) + (", ..." if len(malformed) > 10 else "")
        warnings.warn(
            f"read_rows: skipped {len(malformed)} malformed line(s) in {name} (line {shown}); "
            "read with strict=True to see the first problem",
            UserWarning,
            stacklevel=2,
        )
    if path is not None:
        sidecar = sidecar_path(path)
        if sidecar.exists():
            try:
                rows.meta = json.loads(sidecar.read_text(encoding="utf-8"))
            except ValueError:
                warnings.warn(f"read_rows: sidecar {sidecar} is not valid JSON; .meta is None", UserWarning, stacklevel=2)
    return rows


# --------------------------------------------------------------------------------------
# pandas
# --------------------------------------------------------------------------------------


def _has_scrubbed(value: Any) -> bool:
    """Whether a teacher-only key sits in any dict of ``value`` at any depth."""
    if isinstance(value, Mapping):
        return any(key in SCRUBBED_KEYS or _has_scrubbed(item) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return any(_has_scrubbed(item) for item in value)
    return False


def to_pandas(rows: Any):
    """A DataFrame with one row per rollout.

    Scalar fields become columns as they are. Dict fields are flattened ONE level with a dot
    (``markers.hedging``, ``lineage.eval_run``, ``usage.input_tokens``); deeper dicts and every
    list (``steps``, ``messages``, ``faults``) stay as Python objects in their cell, since a
    table cannot hold a conversation. Derived columns: ``task`` (the task key: scenario_id,
    else task_id, else the prompt; first column), ``n_steps`` and ``n_tool_calls`` (steps with
    a ``tool``). A row field that is itself named ``task`` is kept as ``task (row field)``.
    Missing fields are pandas' NaN, as usual in a DataFrame. The teacher-only keys
    (:data:`SCRUBBED_KEYS`: ``privileged`` and its parts, at any depth) are left out, as every
    writer leaves them out: a frame is one ``to_csv`` away from a file.

    Parameters
    ----------
    rows : list of dict, SimulationData, DataFrame or path
        The rows: a list of row dicts, anything with ``.rows``, a pandas DataFrame or a path
        to a JSONL file (read with :func:`read_rows`). The rows are not changed.

    Returns
    -------
    pandas.DataFrame
        One row per rollout, in input order; no rows give a frame with only the derived
        columns.

    Raises
    ------
    TypeError
        When ``rows`` is not a row container.
    """
    import pandas as pd

    # Stripped like every writer strips them (issue 21, row 11): only the rows that hold a
    # teacher-only key are copied, so a frame of scrubbed rows costs no extra copy.
    row_list = [_strip_scrubbed(row) if _has_scrubbed(row) else row for row in as_row_list(rows)]
    frame = pd.json_normalize(row_list, max_level=1) if row_list else pd.DataFrame()
    if "task" in frame.columns:
        frame = frame.rename(columns={"task": "task (row field)"})
    steps = [row.get("steps") for row in row_list]
    frame.insert(0, "task", [task_key(row) for row in row_list])
    frame["n_steps"] = [len(s) if isinstance(s, list) else 0 for s in steps]
    frame["n_tool_calls"] = [
        sum(1 for step in s if isinstance(step, Mapping) and "tool" in step) if isinstance(s, list) else 0
        for s in steps
    ]
    return frame


_EXPECTED = (
    "a list of row dicts, a SimulationData (or anything with .rows), "
    "a pandas DataFrame, or a path to a JSONL file"
)


def as_row_list(rows: Any, name: str = "rows") -> list[dict[str, Any]]:
    """Return ``rows`` as a list of dicts; raise TypeError naming what was expected."""
    if rows is None:
        raise TypeError(f"{name} is None; expected {_EXPECTED}")
    if isinstance(rows, (str, os.PathLike)):
        return read_rows(rows)
    if hasattr(rows, "rows") and not isinstance(rows, Mapping):
        inner = rows.rows
        inner = inner() if callable(inner) and not isinstance(inner, list) else inner
        return as_row_list(inner, name)
    try:
        import pandas as pd

        if isinstance(rows, pd.DataFrame):
            return rows.to_dict(orient="records")
    except ImportError:  # pandas is a dependency; this only guards odd environments
        pass
    if isinstance(rows, Mapping):
        raise TypeError(f"{name} is a single dict; expected {_EXPECTED} (wrap one row in a list)")
    if isinstance(rows, (list, tuple)) or (hasattr(rows, "__iter__") and not isinstance(rows, (bytes, str))):
        out = list(rows)
        # The common case first: a type check per row is ~10x cheaper than the ABC check
        # (measured 0.25 s against 2.9 s on 2 million rows), and statistics on 10^6-row
        # runs spend their time here otherwise.
        if all(type(row) is dict for row in out):
            return out
        for position, row in enumerate(out):
            if not isinstance(row, Mapping):
                raise TypeError(
                    f"{name}[{position}] is a {type(row).__name__}; expected a dict per row ({_EXPECTED})"
                )
        return [row if isinstance(row, dict) else dict(row) for row in out]
    raise TypeError(f"{name} is a {type(rows).__name__}; expected {_EXPECTED}")
