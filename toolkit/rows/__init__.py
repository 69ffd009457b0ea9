"""The row: toolkit's record of one rollout, and everything that reads or writes it.

A row is a plain ``dict`` that JSON can hold. Schema version 1 (``toolkit/schemas/row-v1.json``,
JSON Schema draft 2020-12) requires ``schema_version: "1"``, ``prompt`` (str), ``steps`` (list)
and ``final_text`` (str); it types the optional fields of the reference row (docs/design/engine.md §8) and
lets any other field ride along (``additionalProperties: true``). A step is one of::

    {"user": "<text>"}                                   # a simulated-user turn
    {"tool": name, "arguments": {...}, "result": <json>, # a tool call and the world's answer
     "text"?, "call_id"?, "logprob"?, "n_tokens"?, "truncated"?, "input_tokens"?, "output_tokens"?}
    {"text": "<assistant text>", "logprob"?, "n_tokens"?, "truncated"?}

The final answer is itself a text step; ``final_text`` is its copy. ``messages`` (OpenAI chat
format) is derived from ``prompt`` + ``steps`` by :func:`messages_from_steps` and rebuilt on every
write, so it can never disagree with the steps that were scrubbed.

Writing. Only :class:`RowWriter` (streaming, fsync per row) and :func:`save_rows` (whole file,
atomic) write rows, and both call :func:`scrub` first, so the teacher-only ``privileged`` block and
its parts never reach a file.

Reading. :func:`read_rows` reads JSONL; stamped rows are validated, unstamped (version 0) rows
load as they are and their legacy shape is reported (``Rows.shapes``).

Where we differ from the reference engine (docs/design/engine.md §8, docs/design/engine.md §9.12), and why:

- ``save_rows`` refuses an empty list: a 0-byte JSONL crashed downstream loaders.
- A tool step's ``arguments`` must be an object. A JSON *string* there is the double-encoding
  bug of docs/design/engine.md §9.12; :func:`validate_row` names it instead of writing it.
- NaN and infinities are written as ``null`` (JSON has none; strict loaders refuse them), and
  numpy numbers as plain numbers; a value JSON cannot hold raises instead of being ``str()``-ed.
- ``RowWriter`` repairs a torn final line on open (see its docstring) and ``read_rows`` skips
  one at the end of a file even in strict mode, so a process killed mid-write never makes the
  file unreadable, and every row a ``write()`` call returned for stays readable.
- ``_``-prefixed keys are dropped at the row's top level and in each step (engine scratch), but
  not inside tool arguments or results, where a key such as ``_id`` is the world's real data.
"""

from toolkit.rows._read import Rows, read_rows, to_pandas
from toolkit.rows._schema import SCHEMA_VERSION, SCRUBBED_KEYS, row_schema, validate_row
from toolkit.rows._scrub import scrub
from toolkit.rows._views import Judgment, Marker, Rollout, Task, from_row, messages_from_steps, to_row
from toolkit.rows._write import RowWriter, save_rows
from toolkit.rows.inspect_log import read_inspect_log
from toolkit.rows.langfuse import read_langfuse
from toolkit.rows.openinference import read_openinference
from toolkit.rows.tau2 import read_tau2
from toolkit.rows.tau_bench import read_tau_bench, tau_bench_row

__all__ = [
    "SCHEMA_VERSION",
    "SCRUBBED_KEYS",
    "row_schema",
    "validate_row",
    "scrub",
    "Task",
    "Rollout",
    "Judgment",
    "Marker",
    "messages_from_steps",
    "from_row",
    "to_row",
    "RowWriter",
    "save_rows",
    "Rows",
    "read_rows",
    "to_pandas",
    "read_tau_bench",
    "tau_bench_row",
    "read_inspect_log",
    "read_tau2",
    "read_openinference",
    "read_langfuse",
]
