"""The what-if experiment config: one strict pydantic v2 model, loaded from YAML, JSON or a dict.

Every model forbids unknown keys (``extra="forbid"``) and runs in strict mode (a YAML ``"yes"``
is not a bool, ``"5"`` is not an int; an int still loads as a float, so ``replay_seconds: 60``
is ``60.0``). Validation errors are gathered into one :class:`WhatIfConfigError` with one
block per problem: the dotted path, what was expected, a hint for range errors, and for an
unknown key the nearest valid sibling name (``toolkit.errors.did_you_mean``).

Sections ``source``, ``target``, ``selection``, ``change``, ``scorer`` are required;
``decision``, ``reporting``, ``timeouts`` are required as keys but every field in them has a
default (``decision: {}`` is enough), as in the user's spec.

Where we differ from the reference loader (docs/design/whatif.md §6):
- an unknown ``source.adapter`` is a load-time error with a suggestion, not a late setup error;
- a source field that belongs to another adapter (``path`` with ``adapter: stub``) is rejected,
  because a field that is accepted and then ignored is a silent no-op;
- cohort ``filter`` strings are parsed at load time, so a typo in a clause name fails early;
- the scorer adapter ``python`` (any ``python:`` callable) exists besides ``stub`` and
  ``inspect_ai`` (its five required fields validated here; the adapter, which needs the
  optional ``inspect_ai`` package, is ``toolkit.whatif._inspect_ai``);
- the stub scorer tolerates the judge fields as the spec asks (so a block can be retargeted),
  but the run discloses them as unused (finding ``settings_unused``) instead of staying silent.

A config file is untrusted input, so :func:`load_config` refuses, each with one
:class:`WhatIfConfigError` naming the file and the place, before anything is validated:
a file over :data:`MAX_CONFIG_BYTES` or not a regular file; bytes that are not UTF-8 (the byte
offset is named); nesting deeper than :data:`MAX_DEPTH`; more than :data:`MAX_NODES` values; YAML aliases that expand past
:data:`MAX_EXPANDED_SIZE` or refer to themselves; a key given twice in one mapping (YAML or
JSON; the YAML message names both lines); NaN and Infinity (every number must be finite).
Numeric fields all have finite bounds. Error messages quote at most 200 characters of a
value (``…(N chars)`` marks the cut) and list at most 20 problems.
"""

from __future__ import annotations

import datetime as _dt
import io
import json
import math
import re
import reprlib
import stat
from pathlib import Path
from typing import Any, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, ScalarNode, SequenceNode
from yaml.resolver import Resolver

from toolkit._util.hashing import canonical_json, sha256_hex
from toolkit.errors import ForensicAffirmationError, WhatIfConfigError, did_you_mean

__all__ = [
    "WhatIfConfig",
    "WhatIfConfigError",
    "ForensicAffirmationError",
    "CohortSelection",
    "load_config",
    "parse_filter",
    "FilterClause",
    "CACHE_MODES",
    "PROFILES",
    "SOURCE_ADAPTERS",
    "MAX_CONFIG_BYTES",
    "MAX_DEPTH",
    "MAX_NODES",
    "MAX_EXPANDED_SIZE",
]

CACHE_MODES = ("auto", "on", "off", "read_only", "refresh")
PROFILES = ("default", "review", "minimal", "forensic")
SOURCE_ADAPTERS = ("stub", "jsonl", "phoenix", "langfuse", "inspect_log", "tau2")
SCORER_ADAPTERS = ("stub", "python", "inspect_ai")
FILTER_CLAUSES = ("score-below", "score-above", "since", "label", "has-tool", "task")

_PYTHON_REFERENCE = re.compile(r"^python:[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
# ISO 8601 date or date-time as the reference accepts it (docs/design/whatif.md §6): YYYY-MM-DD, optional
# 'T' or space and HH:MM[:SS[.frac]], optional 'Z' or +-HH[:]MM.
_ISO_DATE = re.compile(
    r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$"
)
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")

# A config is a few kilobytes. 1 MiB leaves room for long system prompts and rubric texts
# (1 MiB of text is ~250k tokens, past any model's context window) and refuses, before any
# parsing, a file whose only effect would be a slow parser and huge error messages.
MAX_CONFIG_BYTES = 1 << 20
# The deepest valid config path is three mappings (reporting.forensic_acknowledgment.reason).
# 64 is far above that and far below Python's recursion limit (1000), which the YAML
# composer, json and pydantic all recurse against; a deeper file is refused by name.
MAX_DEPTH = 64
# A valid config has under 100 YAML nodes (sections, fields, a few scoring parameters);
# 100,000 is a thousand times that. Composing costs ~12 us a node in Python, so the bound
# refuses a 1 MiB file of half a million one-character values in about a second instead of
# spending ~12 s building nodes that validation would refuse anyway.
MAX_NODES = 100_000
# Aliases stay allowed (one anchored filter or rubric text reused is a fair use), but the
# document they expand to is bounded: its expanded size (one per node plus the characters of
# every scalar, counted once per place an alias puts it) may be at most 4x the file cap. An
# alias-free file under the caps stays below that (at most MAX_NODES nodes, and its scalars'
# characters are the file's own), so only alias expansion can reach it: a "billion
# laughs" file (~1 KB that expands to 10^9 nodes) is refused from its node graph, in time and
# memory proportional to the file, before a single Python object is built from it.
MAX_EXPANDED_SIZE = 4 * MAX_CONFIG_BYTES
# The most characters of one value an error message quotes, and the most problems it lists
# (a screenful; the first problems usually explain the rest).
_QUOTE_CHARS = 200
_MAX_PROBLEMS = 20
# Bounds of integer seeds: numpy's generators refuse negative seeds, and 2**63 - 1 is the
# largest a signed 64-bit integer holds (numpy, pandas columns, most JSON readers).
_MAX_SEED = 2**63 - 1
# Timeouts are per call; a day is far beyond any replay or scoring call, and a bound keeps an
# infinite or 1e300 timeout from reaching the thread waits (which overflow on such values).
_MAX_TIMEOUT_SECONDS = 86_400.0

_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = _QUOTE_CHARS
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = _REPR.maxfrozenset = 20
_REPR.maxlevel = 3


def _quote(value: Any, limit: int = _QUOTE_CHARS) -> str:
    """``repr(value)`` cut to ``limit`` characters; a cut quote ends with ``…(N chars)``.

    Containers are shown with :mod:`reprlib` (bounded work whatever their size) and a cut one
    ends with ``…(N items)``; a value whose repr fails (an int past Python's digit limit)
    shows as ``<type>``.
    """
    if isinstance(value, str):
        size, unit, text = len(value), "chars", repr(value[: limit + 1])
        cut = len(value) > limit or len(text) > limit
    elif isinstance(value, (bytes, bytearray)):
        size, unit, text = len(value), "bytes", repr(bytes(value[: limit + 1]))
        cut = len(value) > limit or len(text) > limit
    else:
        try:
            text = _REPR.repr(value)
        except Exception:  # a repr that fails must not hide the real error
            return f"<{type(value).__name__}>"
        size = len(value) if isinstance(value, (list, tuple, dict, set, frozenset)) else None
        unit = "items"
        cut = len(text) > limit or (size is not None and size > _REPR.maxlist)
        if size is None:
            return text if len(text) <= limit else text[:limit] + "…"
    return text[:limit] + f"…({size} {unit})" if cut else text


def _cut(text: str, limit: int = _QUOTE_CHARS) -> str:
    """``text`` itself when short, else its first ``limit`` characters and ``…(N chars)``."""
    return text if len(text) <= limit else text[:limit] + f"…({len(text)} chars)"


def _join_capped(names: list[str], most: int = 10) -> str:
    """``a, b, c`` of at most ``most`` names (each cut), then ``… and N more``."""
    shown = ", ".join(_cut(str(n), 60) for n in names[:most])
    return shown + (f", … and {len(names) - most} more" if len(names) > most else "")


def _no_nul(value: str | None) -> str | None:
    """A file path may hold any character but NUL, which no operating system takes in a path."""
    if value is not None and "\x00" in value:
        raise ValueError("a path cannot contain a NUL character (\\x00)")
    return value


class _Strict(BaseModel):
    # allow_inf_nan=False: NaN compares false with every threshold, so a NaN bound would
    # silently disable its guard; infinity would do the same for an upper bound.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


# --- filter grammar -----------------------------------------------------------------------


class FilterClause(_Strict):
    """One parsed clause of a cohort filter such as ``score-below:0.6``."""

    name: str
    value: str
    number: float | None = None


def parse_filter(text: str | None) -> tuple[FilterClause, ...]:
    """Parse ``"score-below:0.6,since:24h"`` into clauses; raise ValueError naming a bad one.

    Clauses (comma separated, all must hold):
    ``score-below:X`` original score < X; ``score-above:X`` original score > X;
    ``since:N[s|m|h|d]`` trace timestamp within the last N units (traces without a timestamp
    fail the clause); ``label:V`` the trace's label equals V; ``has-tool:NAME`` the trace
    recorded a call to tool NAME; ``task:ID`` the trace's task id equals ID.
    """
    if text is None:
        return ()
    clauses = []
    for raw in str(text).split(","):
        part = raw.strip()
        if not part:
            continue
        name, sep, value = part.partition(":")
        name, value = name.strip(), value.strip()
        if name not in FILTER_CLAUSES:
            close = did_you_mean(name[:_QUOTE_CHARS], FILTER_CLAUSES)
            hint = f"; did you mean {close[0]!r}?" if close else f"; valid clauses: {', '.join(FILTER_CLAUSES)}"
            raise ValueError(f"unknown filter clause {_quote(name)}{hint}")
        if not sep or not value:
            raise ValueError(f"filter clause {name!r} needs a value, e.g. '{name}:...'")
        number = None
        if name in ("score-below", "score-above"):
            try:
                number = float(value)
            except ValueError:
                raise ValueError(f"filter clause {name!r} needs a number, got {_quote(value)}") from None
            if not math.isfinite(number):
                # NaN fails every comparison: score-below:nan would silently select nothing
                raise ValueError(f"filter clause {name!r} needs a finite number, got {_quote(value)}")
        elif name == "since":
            match = _DURATION.match(value)
            if not match:
                raise ValueError(f"filter clause 'since' needs a duration like 24h, 30m, 7d; got {_quote(value)}")
            seconds = float(match.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]
            if not math.isfinite(seconds):
                raise ValueError(f"filter clause 'since' needs a finite duration, got {_quote(value)}")
            number = seconds
        clauses.append(FilterClause(name=name, value=value, number=number))
    return tuple(clauses)


# --- sections -------------------------------------------------------------------------------


class CohortSelection(_Strict):
    # A million traces is past any replay budget (each is one runner and two scorer calls);
    # the bound turns a typo such as 10**20 into a config error instead of a long run.
    limit: int = Field(ge=1, le=1_000_000, description="Most traces taken into the cohort.")
    filter: str | None = Field(default=None, description="Clauses, e.g. 'score-below:0.6,since:24h'.")

    @field_validator("filter")
    @classmethod
    def _filter_parses(cls, value: str | None) -> str | None:
        parse_filter(value)
        return value

    @property
    def clauses(self) -> tuple[FilterClause, ...]:
        return parse_filter(self.filter)


_SOURCE_FIELDS = {
    "stub": ("synthetic_traces", "seed"),
    "jsonl": ("path", "format", "label_field", "failure_below"),
    "phoenix": ("spans_provider", "label_field"),
    "langfuse": ("host", "public_key_env", "secret_key_env", "page_size", "score_name", "failure_tag"),
    # the readers' own outputs (tk.read_inspect_log, tk.read_tau2), cohort as for jsonl
    "inspect_log": ("path", "inspect_scorer", "label_field", "failure_below"),
    "tau2": ("path", "label_field", "failure_below"),
}
_SOURCE_REQUIRED = {
    "jsonl": ("path",), "phoenix": ("spans_provider",), "langfuse": ("host",), "inspect_log": ("path",), "tau2": ("path",),
}
# Why each adapter needs its required field, and a value to copy: "requires: host" alone
# leaves a user of the reference's example (which has no host) guessing what to write.
_REQUIRED_WHY = {
    ("source", "path"): (
        "the recorded traces are read from this file: toolkit rows (.jsonl, one JSON object per line) "
        "or a tau-bench results file (.json); a relative path resolves against the current directory",
        "path: traces.jsonl",
    ),
    ("source", "path", "inspect_log"): (
        "the inspect_ai eval log (.eval or .json, as eval() wrote it) is read with tk.read_inspect_log; "
        "a relative path resolves against the current directory",
        "path: logs/2026-01-01T00-00-00_task_abc.eval",
    ),
    ("source", "path", "tau2"): (
        "the tau2-bench results (results.json, or the directory of a dir-format run) are read with "
        "tk.read_tau2; a relative path resolves against the current directory",
        "path: data/simulations/my_run.json",
    ),
    ("source", "spans_provider"): (
        "the adapter calls this python:<module>:<attr> function to get the OpenInference span dicts "
        "(it can wrap the Phoenix client, read a dump or query any OTLP store)",
        'spans_provider: "python:my_pkg.phoenix_wiring:get_spans"',
    ),
    ("source", "host"): (
        "the base URL of your Langfuse server: traces are read from <host>/api/public/traces with the keys "
        "in $LANGFUSE_PUBLIC_KEY and $LANGFUSE_SECRET_KEY (Langfuse Cloud or your own deployment)",
        'host: "https://cloud.langfuse.com"',
    ),
    ("scorer", "score_fn"): (
        "the function that scores one output, as python:<module>:<attr> (for inspect_ai: an Inspect AI "
        "scorer such as match(), includes() or model_graded_qa(), or a custom @scorer)",
        'score_fn: "python:my_agent.judge:score"',
    ),
    ("scorer", "judge_provider"): (
        "the provider of the judge model, recorded in the report and hashed into the score-cache key",
        "judge_provider: anthropic",
    ),
    ("scorer", "judge_model_id"): (
        "the judge model; recorded and hashed into the cache key, so a new judge never reuses old scores",
        "judge_model_id: claude-haiku-4-5",
    ),
    ("scorer", "rubric_id"): (
        "a human name of the rubric, shown in the report's methodology and part of the score-cache key",
        "rubric_id: faithfulness-v2",
    ),
    ("scorer", "rubric_text"): (
        "the rubric itself; hashed into the cache key so an edited rubric is scored afresh",
        'rubric_text: "Score 1 if the answer states every looked-up fact, else 0."',
    ),
}


def _required_message(section: str, adapter: str, missing: list[str], sep: str = ": ") -> str:
    """``adapter 'x' requires: a, b`` and one line per field: why it is needed, a value to copy."""
    lines = [f"adapter {adapter!r} requires{sep}{', '.join(missing)}"]
    for name in missing:
        why, example = _REQUIRED_WHY.get((section, name, adapter)) or _REQUIRED_WHY[(section, name)]
        lines.append(f"    {section}.{name}: {why}; e.g. {example}")
    return "\n".join(lines)
_SOURCE_DEFAULTS = {
    "synthetic_traces": 20, "seed": 0, "format": "auto", "failure_below": 0.5,
    "public_key_env": "LANGFUSE_PUBLIC_KEY", "secret_key_env": "LANGFUSE_SECRET_KEY",
    "page_size": 50, "failure_tag": "failure",
}


class SourceConfig(_Strict):
    """Where traces come from. Fields other than ``adapter`` belong to one adapter each.

    A relative ``path`` resolves against the current directory (as ``python:`` references do).
    """

    adapter: Literal["stub", "jsonl", "phoenix", "langfuse", "inspect_log", "tau2"]
    # stub: synthetic, seeded traces per cohort (support-ticket lookups; see sources.py)
    synthetic_traces: int | None = Field(default=None, ge=0, le=100_000)
    seed: int | None = Field(default=None, ge=0, le=_MAX_SEED)
    # jsonl: rows v1 or tau-bench results; cohort by label field or by original reward
    path: str | None = None
    format: Literal["auto", "rows", "tau_bench"] | None = None
    label_field: str | None = None
    failure_below: float | None = Field(default=None, ge=0.0, le=1.0)
    # inspect_log: the scorer whose value is the reward (default: the log's first scorer)
    inspect_scorer: str | None = None
    # phoenix: python:<module>:<attr> returning OpenInference span dicts
    spans_provider: str | None = None
    # langfuse public API
    host: str | None = None
    public_key_env: str | None = None
    secret_key_env: str | None = None
    page_size: int | None = Field(default=None, ge=1, le=100)
    score_name: str | None = None
    failure_tag: str | None = None

    @field_validator("path")
    @classmethod
    def _usable_path(cls, value: str | None) -> str | None:
        return _no_nul(value)

    @model_validator(mode="after")
    def _fields_match_adapter(self) -> "SourceConfig":
        allowed = set(_SOURCE_FIELDS[self.adapter])
        stray = [
            name
            for names in _SOURCE_FIELDS.values()
            for name in names
            if name not in allowed and getattr(self, name) is not None
        ]
        if stray:
            # a field shared by several adapters (path) is named with the first that owns it
            owners: dict[str, str] = {}
            for a, names in _SOURCE_FIELDS.items():
                for n in names:
                    owners.setdefault(n, a)
            detail = ", ".join(f"{n} (adapter {owners[n]})" for n in sorted(set(stray)))
            raise ValueError(
                f"field(s) {detail} do not apply to adapter {self.adapter!r}; "
                f"remove them (a setting that would be ignored is refused)"
            )
        missing = [n for n in _SOURCE_REQUIRED.get(self.adapter, ()) if getattr(self, n) in (None, "")]
        if missing:
            raise ValueError(_required_message("source", self.adapter, missing))
        if self.spans_provider is not None and not _PYTHON_REFERENCE.match(self.spans_provider):
            raise ValueError("spans_provider must look like 'python:<module.path>:<attr>'")
        return self

    def option(self, name: str) -> Any:
        """The value of an adapter field, or its documented default when unset."""
        value = getattr(self, name)
        return _SOURCE_DEFAULTS.get(name) if value is None else value


class TargetConfig(_Strict):
    runner: str = Field(description="python:<module.path>:<attr>; sync or async callable.")
    max_workers: int = Field(default=4, ge=1, le=256, description="Traces replayed at once.")
    # One replay per trace cannot tell the change from the agent's own randomness; N replays
    # make the statistics resample traces (cluster = trace). 20 bounds the cost (20x the calls).
    replays: int = Field(default=1, ge=1, le=20, description="Replays of each trace under the change.")

    @field_validator("runner")
    @classmethod
    def _runner_reference(cls, value: str) -> str:
        if not value.startswith("python:"):
            scheme = value.split(":", 1)[0] if ":" in value else value
            raise ValueError(f"unsupported runner scheme {_quote(scheme)}; expected 'python:<module.path>:<attr>'")
        if not _PYTHON_REFERENCE.match(value):
            raise ValueError(
                f"runner {_quote(value)} must be exactly 'python:<module.path>:<attr>' "
                "(one ':' between module and attribute)"
            )
        return value


class SelectionConfig(_Strict):
    failure_cohort: CohortSelection | None = None
    baseline_cohort: CohortSelection


class ChangeConfig(_Strict):
    system_prompt: str | None = None
    model: str | None = None


Primitive = Union[str, bool, int, float, None]


class ScorerConfig(_Strict):
    adapter: Literal["stub", "python", "inspect_ai"]
    score_fn: str | None = None
    judge_provider: str | None = None
    judge_model_id: str | None = None
    judge_model_snapshot: str | None = None
    rubric_id: str | None = None
    rubric_text: str | None = None
    scoring_parameters: dict[str, Any] = Field(default_factory=dict)
    cache_mode: Literal["auto", "on", "off", "read_only", "refresh"] = "auto"
    cache_dir: str = ".toolkit-whatif/cache"
    max_workers: int = Field(default=4, ge=1, le=256, description="Cases scored at once.")

    @field_validator("cache_dir")
    @classmethod
    def _usable_dir(cls, value: str) -> str:
        return _no_nul(value)

    @field_validator("scoring_parameters")
    @classmethod
    def _primitive_values(cls, value: dict[str, Any]) -> dict[str, Any]:
        nested = sorted(k for k, v in value.items() if not (v is None or isinstance(v, (str, bool, int, float))))
        if nested:
            raise ValueError(
                f"values must be str, int, float, bool or null; nested or other value(s) at key(s): {_join_capped(nested)}"
            )
        # A scorer backend takes 64-bit integers at most; a larger one is a typo, and past
        # 4300 digits Python cannot even write it into the cache key.
        huge = sorted(k for k, v in value.items() if isinstance(v, int) and not isinstance(v, bool) and abs(v) > _MAX_SEED)
        if huge:
            raise ValueError(f"integer values must be within +-(2**63 - 1); too large at key(s): {_join_capped(huge)}")
        # Any-typed values escape allow_inf_nan; a NaN temperature would reach the scorer
        # and be hashed into the cache key as "NaN", which no JSON reader takes back.
        infinite = sorted(k for k, v in value.items() if isinstance(v, float) and not math.isfinite(v))
        if infinite:
            raise ValueError(f"values must be finite numbers; NaN or infinity at key(s): {_join_capped(infinite)}")
        return value

    @model_validator(mode="after")
    def _adapter_fields(self) -> "ScorerConfig":
        if self.score_fn is not None and not _PYTHON_REFERENCE.match(self.score_fn):
            raise ValueError("score_fn must look like 'python:<module.path>:<attr>'")
        if self.adapter == "python" and not self.score_fn:
            raise ValueError(_required_message("scorer", "python", ["score_fn"], sep=" "))
        if self.adapter == "inspect_ai":
            required = ("score_fn", "judge_provider", "judge_model_id", "rubric_id", "rubric_text")
            missing = [n for n in required if not getattr(self, n)]
            if missing:
                raise ValueError(_required_message("scorer", "inspect_ai", missing))
        return self

    def judge_fields_set(self) -> list[str]:
        names = ("judge_provider", "judge_model_id", "judge_model_snapshot", "rubric_id", "rubric_text")
        return [n for n in names if getattr(self, n) is not None]


class DecisionConfig(_Strict):
    require_baseline: bool = True
    max_baseline_regression_ratio: float = Field(default=0.10, ge=0.0, le=1.0)
    min_failure_improvement_ratio: float = Field(default=0.50, ge=0.0, le=1.0)
    # Scores are on [0, 1], so deltas are on [-1, 1]: an epsilon or a CI width above 1 could
    # never be reached and would silently switch its rule off.
    practical_delta_epsilon: float = Field(default=0.05, ge=0.0, le=1.0)
    max_ci_width: float | None = Field(default=None, ge=0.0, le=1.0)
    # The design reference's statistical defaults (docs/design/whatif.md §5): B = 5000, seed 42, 0.95.
    bootstrap_resamples: int = Field(default=5000, ge=100, le=1_000_000)
    # Below 0.9 an interval is narrow enough to pass a width guard on noise (issue 15: 0.6
    # passed max_ci_width 0.2 where 0.95 did not), so the config cannot go lower.
    ci_level: float = Field(default=0.95, ge=0.9, lt=1.0)
    seed: int = Field(default=42, ge=0, le=_MAX_SEED)
    # A trace that falls by more than max_trace_drop (half the [0, 1] scale by default) is a
    # severe drop; more than max_severe_drops of them block Ship whatever the averages say.
    max_trace_drop: float = Field(default=0.5, gt=0.0, le=1.0)
    max_severe_drops: int = Field(default=0, ge=0, le=1_000_000)
    # Replay the unchanged configuration first; a delta inside the A/A spread cannot Ship.
    aa_check: bool = False
    # Traces of one task (or one user, one ticket family) are not independent; naming the
    # key makes the CI a cluster bootstrap and the sign flips act on whole clusters.
    cluster_by: str | None = Field(default=None, min_length=1)

    @field_validator("cluster_by")
    @classmethod
    def _cluster_key(cls, value: str | None) -> str | None:
        if value is None or value == "task_id" or (value.startswith("metadata.") and len(value) > len("metadata.")):
            return value
        raise ValueError(f"cluster_by must be 'task_id' or 'metadata.<key>'; got {_quote(value)}")


class ForensicAcknowledgment(_Strict):
    accepted_by: str = Field(min_length=1)
    accepted_at: str = Field(min_length=1)
    reason: str = Field(min_length=1)

    @field_validator("accepted_at", mode="before")
    @classmethod
    def _date_as_text(cls, value: Any) -> Any:
        # YAML reads an unquoted 2026-11-30 as a date (and 2026-11-30 10:00:00 as a datetime);
        # both are what the field asks for, so they are taken as their ISO text.
        if isinstance(value, (_dt.date, _dt.datetime)):
            return value.isoformat()
        return value

    @field_validator("accepted_at")
    @classmethod
    def _iso(cls, value: str) -> str:
        if not _ISO_DATE.match(value):
            raise ValueError("accepted_at must be an ISO 8601 date or date-time, e.g. 2026-11-30 or 2026-11-30T10:00Z")
        try:
            # the pattern admits 2026-13-45 and 2026-02-30; the calendar does not
            _dt.datetime.fromisoformat(value)
        except ValueError as error:
            raise ValueError(f"accepted_at {_quote(value)} is not a real date or time ({error})") from None
        return value


class ReportingConfig(_Strict):
    profile: Literal["default", "review", "minimal", "forensic"] = "default"
    forensic_acknowledgment: ForensicAcknowledgment | None = None

    @model_validator(mode="after")
    def _forensic_block(self) -> "ReportingConfig":
        if self.profile == "forensic" and self.forensic_acknowledgment is None:
            raise ValueError(
                "profile 'forensic' requires a forensic_acknowledgment block "
                "(accepted_by, accepted_at, reason) AND the CLI flag --profile forensic"
            )
        return self


class TimeoutsConfig(_Strict):
    replay_seconds: float = Field(default=60.0, gt=0.0, le=_MAX_TIMEOUT_SECONDS)
    score_seconds: float = Field(default=30.0, gt=0.0, le=_MAX_TIMEOUT_SECONDS)


class WhatIfConfig(_Strict):
    """A complete what-if experiment (see the module docstring for the rules).

    Keyword-only; each section may be given as its model or as a mapping. Unknown keys are
    refused and values are strict (no ``"5"`` for 5).

    Parameters
    ----------
    experiment_shape : {"failure_rescue", "regression_check"}, optional
        Default ``"failure_rescue"``, which needs ``selection.failure_cohort``;
        ``"regression_check"`` tests the baseline cohort only and refuses a failure cohort.
    source : SourceConfig or mapping
        Where traces come from: ``adapter`` (stub, jsonl, phoenix, langfuse, inspect_log, tau2) and only that
        adapter's fields.
    target : TargetConfig or mapping
        ``runner`` (``python:<module.path>:<attr>``) and ``max_workers`` (default 4).
    selection : SelectionConfig or mapping
        ``baseline_cohort`` (required) and ``failure_cohort``, each with ``limit`` and an
        optional ``filter``.
    change : ChangeConfig or mapping
        The change under test: ``system_prompt`` and/or ``model`` (None keeps the runner's
        default).
    scorer : ScorerConfig or mapping
        ``adapter`` (stub, python, inspect_ai), ``score_fn``, judge and rubric fields,
        ``scoring_parameters``, ``cache_mode`` (default ``"auto"``), ``cache_dir`` and
        ``max_workers``.
    decision : DecisionConfig or mapping
        Required as a key; every field has a default (``{}`` is enough): require_baseline,
        max_baseline_regression_ratio 0.10, min_failure_improvement_ratio 0.50,
        practical_delta_epsilon 0.05, max_ci_width None, bootstrap_resamples 5000, ci_level
        0.95, seed 42.
    reporting : ReportingConfig or mapping
        Required as a key: ``profile`` (default ``"default"``) and, for ``"forensic"``, a
        ``forensic_acknowledgment`` block.
    timeouts : TimeoutsConfig or mapping
        Required as a key: ``replay_seconds`` (default 60) and ``score_seconds`` (default 30).

    Raises
    ------
    pydantic.ValidationError
        For an invalid config; :func:`load_config` renders the same errors as one
        :class:`WhatIfConfigError`.
    """

    experiment_shape: Literal["failure_rescue", "regression_check"] = "failure_rescue"
    source: SourceConfig
    target: TargetConfig
    selection: SelectionConfig
    change: ChangeConfig
    scorer: ScorerConfig
    decision: DecisionConfig
    reporting: ReportingConfig
    timeouts: TimeoutsConfig

    @model_validator(mode="after")
    def _shape_matches_selection(self) -> "WhatIfConfig":
        has_failure = self.selection.failure_cohort is not None
        if self.experiment_shape == "failure_rescue" and not has_failure:
            raise ValueError(
                "selection.failure_cohort is required for experiment_shape 'failure_rescue' "
                "(or set experiment_shape: regression_check)"
            )
        if self.experiment_shape == "regression_check" and has_failure:
            raise ValueError(
                "selection.failure_cohort must be removed for experiment_shape 'regression_check' "
                "(that shape tests the baseline cohort only)"
            )
        return self

    def config_hash(self) -> str:
        """SHA-256 of the canonical JSON of the validated config."""
        return sha256_hex(canonical_json(self.model_dump(mode="json")))


# --- error rendering -------------------------------------------------------------------------

_HINTS = {
    "greater_than_equal": "must be >= {ge}",
    "greater_than": "must be > {gt}",
    "less_than_equal": "must be <= {le}",
    "less_than": "must be < {lt}",
}
_FRACTION_FIELDS = {"max_baseline_regression_ratio", "min_failure_improvement_ratio", "failure_below"}


def _model_at(loc: tuple) -> type[BaseModel] | None:
    """The model class that owns the field at ``loc[:-1]`` (for sibling-name suggestions)."""
    model: Any = WhatIfConfig
    for part in loc:
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return None
        field = model.model_fields.get(str(part))
        if field is None:
            return None
        annotation = field.annotation
        candidates = getattr(annotation, "__args__", None) or (annotation,)
        model = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _render_error(error: dict) -> str:
    loc = tuple(p for p in error.get("loc", ()) if not (isinstance(p, str) and p.startswith("function-")))
    # pydantic appends the union member / literal tag to the path in a few cases; drop them
    loc = tuple(p for p in loc if p not in ("str", "int", "float", "bool", "none"))
    # a path part can be a user's key (an unknown field): cut like any other quoted value
    path = ".".join(_cut(str(p)) for p in loc) or "(root)"
    kind = error.get("type", "")
    if kind == "extra_forbidden":
        owner = _model_at(loc[:-1])
        siblings = list(owner.model_fields) if owner is not None else []
        close = did_you_mean(str(loc[-1])[:_QUOTE_CHARS], siblings) if loc else []
        line = f"{path}: unknown field"
        if close:
            line += f"; did you mean {close[0]!r}?"
        elif siblings:
            line += f"; valid fields here: {', '.join(siblings)}"
        return line
    message = str(error.get("msg", "invalid value"))
    if message.startswith("Value error, "):
        message = message[len("Value error, "):]
    if kind == "missing":
        message = "field required"
    # our own messages quote values already cut; this bounds any other (pydantic's own):
    # at most 12 lines (a required-field list with one explanation a field) of 800 characters
    message = "\n".join(_cut(part, 4 * _QUOTE_CHARS) for part in message.splitlines()[:12])
    line = f"{path}: {message}"
    value = error.get("input")
    if "input" in error and kind not in ("missing", "model_type"):
        if not isinstance(value, dict):
            line += f" (got {_quote(value)})"
        elif kind.endswith("_type"):
            # a mapping where a value belongs; a model-level error's input is the whole
            # section, which is why mappings are otherwise not quoted
            line += f" (got a mapping with {len(value)} key{'s' if len(value) != 1 else ''})"
    ctx = error.get("ctx") or {}
    hint = None
    if loc and loc[-1] in _FRACTION_FIELDS and kind in _HINTS:
        hint = "a fraction in [0, 1]"
    elif kind in _HINTS:
        hint = _HINTS[kind].format(**{k: ctx.get(k) for k in ("ge", "gt", "le", "lt")})
    elif kind == "finite_number":
        hint = "NaN and infinity are refused: every number in a config must be finite"
    elif kind == "literal_error" and loc:
        expected = ctx.get("expected", "")
        options = re.findall(r"'([^']*)'", str(expected))
        got = error.get("input")
        close = did_you_mean(got[:_QUOTE_CHARS], options) if isinstance(got, str) else []
        if close:
            hint = f"did you mean {close[0]!r}?"
    if hint:
        line += f"\n    hint: {hint}"
    return line


def _raise_validation(error: ValidationError, origin: str) -> None:
    errors = error.errors()
    problems = [_render_error(e) for e in errors[:_MAX_PROBLEMS]]
    if len(errors) > _MAX_PROBLEMS:
        problems.append(f"… and {len(errors) - _MAX_PROBLEMS} more problems (fix the ones above first)")
    count = len(errors)
    header = f"what-if config {origin} is invalid ({count} problem{'s' if count != 1 else ''}):"
    raise WhatIfConfigError(header + "\n  " + "\n  ".join(problems), problems) from None


# --- reading a file --------------------------------------------------------------------------

_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Refusals:
    """The refusals a hostile config file needs, mixed into a YAML loader class.

    The composer (events to nodes) is always PyYAML's Python one: libyaml's own composes
    nested nodes by C recursion with no depth limit, which a 1 MiB file of ``[`` can
    overflow. Nesting is counted while composing and refused past :data:`MAX_DEPTH`; the
    composed node graph is then checked once (:func:`_check_nodes`) for alias expansion,
    recursive aliases and duplicate keys before any Python object is built; a scalar that
    cannot be built (``2026-02-30``, an integer past Python's 4300-digit limit) is refused
    with its line.
    """

    _depth = 0
    _nodes = 0

    def compose_node(self, parent, index):
        self._depth += 1
        self._nodes += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise yaml.composer.ComposerError(
                    None, None,
                    f"the document is nested more than {MAX_DEPTH} levels deep (a what-if config needs 3); "
                    "refused before parsing further", mark)
            if self._nodes > MAX_NODES:
                mark = self.peek_event().start_mark
                raise yaml.composer.ComposerError(
                    None, None,
                    f"the document holds more than {MAX_NODES:,} values (a what-if config holds under 100); "
                    "refused before parsing further", mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def get_single_node(self):
        node = super().get_single_node()
        if node is not None:
            _check_nodes(self, node)
        return node

    def construct_object(self, node, deep=False):
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, OverflowError) as error:
            tag = node.tag.rsplit(":", 1)[-1]
            shown = _quote(node.value) if isinstance(node, ScalarNode) else "this value"
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read {shown} as {tag}: {_cut(str(error))}", node.start_mark) from None


class _PythonLoader(_Refusals, yaml.SafeLoader):
    """Pure-Python scanner and parser (used when PyYAML was built without libyaml)."""


try:
    from yaml._yaml import CParser as _LibyamlParser
except ImportError:  # PyYAML without libyaml
    _ConfigLoader: type = _PythonLoader
else:

    class _LibyamlLoader(_Refusals, Composer, _LibyamlParser, SafeConstructor, Resolver):
        """libyaml's scanner and parser (events only, ~8x faster on a long file) + the Python composer."""

        def __init__(self, stream) -> None:
            _LibyamlParser.__init__(self, stream)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            Composer.__init__(self)

    _ConfigLoader = _LibyamlLoader


def _parse_yaml(text: str, name: str, loader_class: type | None = None) -> Any:
    """The one document of ``text`` through :class:`_Refusals` (``name`` appears in marks)."""
    stream = io.StringIO(text)
    stream.name = name  # marks (line, column) name the file, not "<file>"
    loader = (loader_class or _ConfigLoader)(stream)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def _node_children(node: Any) -> list:
    if isinstance(node, MappingNode):
        return [child for pair in node.value for child in pair]
    if isinstance(node, SequenceNode):
        return list(node.value)
    return []


def _check_nodes(loader: Any, root: Any) -> None:
    """Refuse alias bombs, recursive aliases, over-deep expansion and duplicate keys.

    One iterative depth-first pass over the composed node graph. An alias is the same node
    object as its anchor, so sizes are memoised per node: the pass costs time proportional
    to the file while computing the size the document *would* expand to.
    """
    size: dict[int, int] = {}  # id(node) -> expanded size (nodes + scalar characters)
    depth: dict[int, int] = {}  # id(node) -> expanded nesting depth
    open_nodes: set[int] = set()  # nodes on the current path (a child among them is a cycle)
    stack: list[tuple[Any, str, bool]] = [(root, "", False)]
    while stack:
        node, path, finished = stack.pop()
        key = id(node)
        if finished:
            open_nodes.discard(key)
            children = _node_children(node)
            own = len(node.value) if isinstance(node, ScalarNode) else 0
            size[key] = 1 + own + sum(size[id(c)] for c in children)
            depth[key] = (0 if isinstance(node, ScalarNode) else 1) + max((depth[id(c)] for c in children), default=0)
            where = f"{path or '(root)'} (line {node.start_mark.line + 1})"
            if size[key] > MAX_EXPANDED_SIZE:
                raise yaml.composer.ComposerError(
                    None, None,
                    f"{where}: YAML aliases expand this document past {MAX_EXPANDED_SIZE:,} nodes and characters "
                    f"(an alias bomb?); a config's aliases may at most repeat a few values", node.start_mark)
            if depth[key] > MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"{where}: aliases nest this document more than {MAX_DEPTH} levels deep",
                    node.start_mark)
            continue
        if key in size:
            continue
        open_nodes.add(key)
        stack.append((node, path, True))
        if isinstance(node, MappingNode):
            seen: dict[Any, int] = {}
            for key_node, value_node in node.value:
                name = None
                if isinstance(key_node, ScalarNode) and key_node.tag != _MERGE_TAG:
                    name = loader.construct_object(key_node)
                    try:
                        hash(name)
                    except TypeError:
                        name = key_node.value
                    line = key_node.start_mark.line + 1
                    dotted = f"{path}.{_cut(str(name), 60)}" if path else _cut(str(name), 60)
                    if name in seen:
                        raise yaml.composer.ComposerError(
                            None, None,
                            f"duplicate key {_quote(name)} ({dotted}) at line {line}, first at line {seen[name]}: "
                            "YAML keeps only the last one, which would silently drop the first; keep one of them",
                            key_node.start_mark)
                    seen[name] = line
                children = [(key_node, path), (value_node, dotted if name is not None else path)]
                for child, child_path in children:
                    _push_child(stack, open_nodes, size, child, child_path)
        elif isinstance(node, SequenceNode):
            for index, child in enumerate(node.value):
                _push_child(stack, open_nodes, size, child, f"{path}[{index}]")


def _push_child(stack: list, open_nodes: set, size: dict, child: Any, path: str) -> None:
    if id(child) in open_nodes:
        raise yaml.composer.ComposerError(
            None, None, f"{path or '(root)'}: a YAML alias refers to a node that contains it (a recursive alias)",
            child.start_mark)
    if id(child) not in size:
        stack.append((child, path, False))


class _DuplicateJsonKey(ValueError):
    pass


def _json_object(pairs: list[tuple[str, Any]]) -> dict:
    mapping: dict = {}
    for key, value in pairs:
        if key in mapping:
            raise _DuplicateJsonKey(
                f"duplicate key {_quote(key)} in one JSON object: JSON readers keep only the last one, "
                "which would silently drop the first; keep one of them")
        mapping[key] = value
    return mapping


def _json_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a config can hold: every number must be finite")


def _json_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"number {_cut(text, 40)} is too large to be finite: every number must be finite")
    return number


def _decode(raw: bytes, path: Path) -> str:
    """UTF-8 text of ``raw`` (a leading byte-order mark dropped) or an error naming the offset."""
    offset = 3 if raw.startswith(b"\xef\xbb\xbf") else 0
    try:
        return raw[offset:].decode("utf-8")
    except UnicodeDecodeError as error:
        at = error.start + offset
        line = raw.count(b"\n", 0, at) + 1
        column = at - (raw.rfind(b"\n", 0, at) + 1) + 1
        utf16 = " (it starts with a UTF-16 byte-order mark)" if raw.startswith((b"\xff\xfe", b"\xfe\xff")) else ""
        raise WhatIfConfigError(
            f"config file {path} is not UTF-8 text{utf16}: byte 0x{raw[at]:02x} at byte offset {at} "
            f"(line {line}, column {column}) cannot be decoded ({error.reason}); save the file as UTF-8"
        ) from None


_SURROGATE = re.compile("[\ud800-\udfff]")


def _dotted(path: tuple) -> str:
    return ".".join(_cut(str(p), 60) for p in path[:8]) + (".…" if len(path) > 8 else "") or "(root)"


def _check_data(data: Any, origin: str) -> None:
    """Refuse data nested past :data:`MAX_DEPTH`, and text that is not valid Unicode.

    A self-containing mapping nests forever, so it is refused by depth. A lone surrogate
    (JSON ``"\\ud800"``) is a Python str that cannot be written as UTF-8: it would pass
    validation and crash the config hash and the report writer later. Iterative, so the check
    itself cannot hit the recursion limit; a budget of visited containers bounds its time on
    a mapping that shares sub-structures many times over.
    """
    budget = 1_000_000  # containers visited; far above any config, bounded on shared structures
    stack: list[tuple[Any, tuple, int]] = [(data, (), 1)]
    while stack:
        value, path, level = stack.pop()
        if level > MAX_DEPTH:
            raise WhatIfConfigError(
                f"config {origin} is nested more than {MAX_DEPTH} levels deep at {_dotted(path)} "
                "(a what-if config needs 3; a mapping that contains itself nests forever); refused before validation")
        budget -= 1
        if budget < 0:
            raise WhatIfConfigError(f"config {origin} holds more than 1,000,000 nested mappings and lists; refused")
        if isinstance(value, dict):
            items: Any = value.items()
        elif isinstance(value, (list, tuple)):
            items = enumerate(value)
        else:
            continue
        for key, child in items:
            for text, where in ((key, path), (child, path + (key,))):
                if isinstance(text, str) and _SURROGATE.search(text):
                    raise WhatIfConfigError(
                        f"config {origin}: {_dotted(where)} holds {_quote(text)}, which has a lone surrogate "
                        f"(\\u{ord(_SURROGATE.search(text).group()):04x}): not valid Unicode text, it cannot be written "
                        "to a report; remove it")
            if isinstance(child, (dict, list, tuple)):
                stack.append((child, path + (key,), level + 1))


def _read_file(path: Path) -> dict:
    try:
        found = path.exists()
    except OSError as error:  # a name too long for the file system, a loop of symlinks
        raise WhatIfConfigError(f"cannot read config file {_quote(str(path))}: {type(error).__name__}: {error.strerror}") from None
    if not found:
        raise WhatIfConfigError(f"config file not found: {_quote(str(path))}")
    suffix = path.suffix.lower()
    if suffix not in (".yaml", ".yml", ".json"):
        raise WhatIfConfigError(
            f"unsupported config extension {suffix or '(none)'!r} for {path}; use .yaml, .yml or .json"
        )
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            # a directory, a FIFO (open blocks until a writer comes) or a device (/dev/zero never ends)
            raise WhatIfConfigError(f"config file {path} is not a regular file")
        if info.st_size > MAX_CONFIG_BYTES:
            raise WhatIfConfigError(
                f"config file {path} is {info.st_size:,} bytes; the limit is {MAX_CONFIG_BYTES:,} (1 MiB), "
                "refused before parsing (a config is a few kilobytes; keep long texts in files your code reads)")
        with open(path, "rb") as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)  # bounded even if the file grows meanwhile
    except OSError as error:
        raise WhatIfConfigError(f"cannot read config file {path}: {type(error).__name__}: {error}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise WhatIfConfigError(f"config file {path} is over the {MAX_CONFIG_BYTES:,}-byte limit; refused before parsing")
    text = _decode(raw, path)
    try:
        if suffix == ".json":
            data = json.loads(text, object_pairs_hook=_json_object, parse_constant=_json_constant,
                              parse_float=_json_float)
        else:
            data = _parse_yaml(text, str(path))
    except (yaml.YAMLError, ValueError) as error:
        # json.JSONDecodeError and the hooks' refusals are ValueErrors; so is an integer
        # literal past Python's digit limit in JSON
        raise WhatIfConfigError(f"config file {path} does not parse: {_cut(str(error), 1000)}") from None
    except RecursionError:
        # json recurses once per level; _ConfigLoader stops at MAX_DEPTH before this
        raise WhatIfConfigError(
            f"config file {path} is nested too deeply to parse (more than {MAX_DEPTH} levels are refused)") from None
    if not isinstance(data, dict):
        raise WhatIfConfigError(
            f"config file {path} must parse to a mapping (got {type(data).__name__})"
        )
    return data


def load_config(config: "WhatIfConfig | dict | str | Path") -> WhatIfConfig:
    """Load and validate a config from a path (.yaml/.yml/.json), a mapping, or a model.

    Parameters
    ----------
    config : WhatIfConfig, dict, str or path
        A :class:`WhatIfConfig` (returned as it is), a dict, or the path of a ``.yaml``,
        ``.yml`` or ``.json`` file that parses to a mapping.

    Returns
    -------
    WhatIfConfig
        The validated config.

    Raises
    ------
    WhatIfConfigError
        Listing every problem at once; also for a missing, unreadable or unparsable file,
        another extension, or another type of ``config``.
    """
    if isinstance(config, WhatIfConfig):
        return config
    if isinstance(config, (str, Path)):
        path = Path(config)
        data, origin = _read_file(path), str(path)
    elif isinstance(config, dict):
        data, origin = config, "(mapping)"
    else:
        raise WhatIfConfigError(
            f"config must be a path, a dict or a WhatIfConfig, got {type(config).__name__}"
        )
    _check_data(data, origin)
    try:
        return WhatIfConfig.model_validate(data)
    except ValidationError as error:
        _raise_validation(error, origin)
    except RecursionError:
        # unreachable after _check_data, kept so no input can turn into an internal error here
        raise WhatIfConfigError(f"config {origin} is nested too deeply to validate") from None
    raise AssertionError("unreachable")  # pragma: no cover
