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
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

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
]

CACHE_MODES = ("auto", "on", "off", "read_only", "refresh")
PROFILES = ("default", "review", "minimal", "forensic")
SOURCE_ADAPTERS = ("stub", "jsonl", "phoenix", "langfuse")
SCORER_ADAPTERS = ("stub", "python", "inspect_ai")
FILTER_CLAUSES = ("score-below", "score-above", "since", "label", "has-tool", "task")

_PYTHON_REFERENCE = re.compile(r"^python:[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
# ISO 8601 date or date-time as the reference accepts it (docs/design/whatif.md §6): YYYY-MM-DD, optional
# 'T' or space and HH:MM[:SS[.frac]], optional 'Z' or +-HH[:]MM.
_ISO_DATE = re.compile(
    r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$"
)
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


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
            close = did_you_mean(name, FILTER_CLAUSES)
            hint = f"; did you mean {close[0]!r}?" if close else f"; valid clauses: {', '.join(FILTER_CLAUSES)}"
            raise ValueError(f"unknown filter clause {name!r}{hint}")
        if not sep or not value:
            raise ValueError(f"filter clause {name!r} needs a value, e.g. '{name}:...'")
        number = None
        if name in ("score-below", "score-above"):
            try:
                number = float(value)
            except ValueError:
                raise ValueError(f"filter clause {name!r} needs a number, got {value!r}") from None
        elif name == "since":
            match = _DURATION.match(value)
            if not match:
                raise ValueError(f"filter clause 'since' needs a duration like 24h, 30m, 7d; got {value!r}")
            seconds = float(match.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]
            number = seconds
        clauses.append(FilterClause(name=name, value=value, number=number))
    return tuple(clauses)


# --- sections -------------------------------------------------------------------------------


class CohortSelection(_Strict):
    limit: int = Field(ge=1, description="Most traces taken into the cohort.")
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
}
_SOURCE_REQUIRED = {"jsonl": ("path",), "phoenix": ("spans_provider",), "langfuse": ("host",)}
_SOURCE_DEFAULTS = {
    "synthetic_traces": 20, "seed": 0, "format": "auto", "failure_below": 0.5,
    "public_key_env": "LANGFUSE_PUBLIC_KEY", "secret_key_env": "LANGFUSE_SECRET_KEY",
    "page_size": 50, "failure_tag": "failure",
}


class SourceConfig(_Strict):
    """Where traces come from. Fields other than ``adapter`` belong to one adapter each.

    A relative ``path`` resolves against the current directory (as ``python:`` references do).
    """

    adapter: Literal["stub", "jsonl", "phoenix", "langfuse"]
    # stub: synthetic, seeded traces per cohort (support-ticket lookups; see sources.py)
    synthetic_traces: int | None = Field(default=None, ge=0, le=100_000)
    seed: int | None = None
    # jsonl: rows v1 or tau-bench results; cohort by label field or by original reward
    path: str | None = None
    format: Literal["auto", "rows", "tau_bench"] | None = None
    label_field: str | None = None
    failure_below: float | None = Field(default=None, ge=0.0, le=1.0)
    # phoenix: python:<module>:<attr> returning OpenInference span dicts
    spans_provider: str | None = None
    # langfuse public API
    host: str | None = None
    public_key_env: str | None = None
    secret_key_env: str | None = None
    page_size: int | None = Field(default=None, ge=1, le=100)
    score_name: str | None = None
    failure_tag: str | None = None

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
            owners = {n: a for a, names in _SOURCE_FIELDS.items() for n in names}
            detail = ", ".join(f"{n} (adapter {owners[n]})" for n in sorted(set(stray)))
            raise ValueError(
                f"field(s) {detail} do not apply to adapter {self.adapter!r}; "
                f"remove them (a setting that would be ignored is refused)"
            )
        missing = [n for n in _SOURCE_REQUIRED.get(self.adapter, ()) if getattr(self, n) in (None, "")]
        if missing:
            raise ValueError(f"adapter {self.adapter!r} requires: {', '.join(missing)}")
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
            raise ValueError(f"unsupported runner scheme {scheme!r}; expected 'python:<module.path>:<attr>'")
        if not _PYTHON_REFERENCE.match(value):
            raise ValueError(
                f"runner {value!r} must be exactly 'python:<module.path>:<attr>' "
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

    @field_validator("scoring_parameters")
    @classmethod
    def _primitive_values(cls, value: dict[str, Any]) -> dict[str, Any]:
        nested = sorted(k for k, v in value.items() if not (v is None or isinstance(v, (str, bool, int, float))))
        if nested:
            raise ValueError(
                f"values must be str, int, float, bool or null; nested value(s) at key(s): {', '.join(nested)}"
            )
        return value

    @model_validator(mode="after")
    def _adapter_fields(self) -> "ScorerConfig":
        if self.score_fn is not None and not _PYTHON_REFERENCE.match(self.score_fn):
            raise ValueError("score_fn must look like 'python:<module.path>:<attr>'")
        if self.adapter == "python" and not self.score_fn:
            raise ValueError("adapter 'python' requires score_fn")
        if self.adapter == "inspect_ai":
            required = ("score_fn", "judge_provider", "judge_model_id", "rubric_id", "rubric_text")
            missing = [n for n in required if not getattr(self, n)]
            if missing:
                raise ValueError(f"adapter 'inspect_ai' requires: {', '.join(missing)}")
        return self

    def judge_fields_set(self) -> list[str]:
        names = ("judge_provider", "judge_model_id", "judge_model_snapshot", "rubric_id", "rubric_text")
        return [n for n in names if getattr(self, n) is not None]


class DecisionConfig(_Strict):
    require_baseline: bool = True
    max_baseline_regression_ratio: float = Field(default=0.10, ge=0.0, le=1.0)
    min_failure_improvement_ratio: float = Field(default=0.50, ge=0.0, le=1.0)
    practical_delta_epsilon: float = Field(default=0.05, ge=0.0)
    max_ci_width: float | None = Field(default=None, ge=0.0)
    # The design reference's statistical defaults (docs/design/whatif.md §5): B = 5000, seed 42, 0.95.
    bootstrap_resamples: int = Field(default=5000, ge=100, le=1_000_000)
    # Below 0.9 an interval is narrow enough to pass a width guard on noise (issue 15: 0.6
    # passed max_ci_width 0.2 where 0.95 did not), so the config cannot go lower.
    ci_level: float = Field(default=0.95, ge=0.9, lt=1.0)
    seed: int = 42
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
        raise ValueError(f"cluster_by must be 'task_id' or 'metadata.<key>'; got {value!r}")


class ForensicAcknowledgment(_Strict):
    accepted_by: str = Field(min_length=1)
    accepted_at: str = Field(min_length=1)
    reason: str = Field(min_length=1)

    @field_validator("accepted_at")
    @classmethod
    def _iso(cls, value: str) -> str:
        if not _ISO_DATE.match(value):
            raise ValueError("accepted_at must be an ISO 8601 date or date-time, e.g. 2026-11-30 or 2026-11-30T10:00Z")
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
    replay_seconds: float = Field(default=60.0, gt=0.0)
    score_seconds: float = Field(default=30.0, gt=0.0)


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
        Where traces come from: ``adapter`` (stub, jsonl, phoenix, langfuse) and only that
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
    path = ".".join(str(p) for p in loc) or "(root)"
    kind = error.get("type", "")
    if kind == "extra_forbidden":
        owner = _model_at(loc[:-1])
        siblings = list(owner.model_fields) if owner is not None else []
        close = did_you_mean(str(loc[-1]), siblings) if loc else []
        line = f"{path}: unknown field"
        if close:
            line += f"; did you mean {close[0]!r}?"
        elif siblings:
            line += f"; valid fields here: {', '.join(siblings)}"
        return line
    message = error.get("msg", "invalid value")
    if message.startswith("Value error, "):
        message = message[len("Value error, "):]
    if kind == "missing":
        message = "field required"
    line = f"{path}: {message}"
    if "input" in error and kind not in ("missing", "model_type") and not isinstance(error["input"], dict):
        line += f" (got {error['input']!r})"
    ctx = error.get("ctx") or {}
    hint = None
    if loc and loc[-1] in _FRACTION_FIELDS and kind in _HINTS:
        hint = "a fraction in [0, 1]"
    elif kind in _HINTS:
        hint = _HINTS[kind].format(**{k: ctx.get(k) for k in ("ge", "gt", "le", "lt")})
    elif kind == "literal_error" and loc:
        expected = ctx.get("expected", "")
        options = re.findall(r"'([^']*)'", str(expected))
        got = error.get("input")
        close = did_you_mean(str(got), options) if isinstance(got, str) else []
        if close:
            hint = f"did you mean {close[0]!r}?"
    if hint:
        line += f"\n    hint: {hint}"
    return line


def _raise_validation(error: ValidationError, origin: str) -> None:
    problems = [_render_error(e) for e in error.errors()]
    header = f"what-if config {origin} is invalid ({len(problems)} problem{'s' if len(problems) != 1 else ''}):"
    raise WhatIfConfigError(header + "\n  " + "\n  ".join(problems), problems) from None


def _read_file(path: Path) -> dict:
    if not path.exists():
        raise WhatIfConfigError(f"config file not found: {path}")
    suffix = path.suffix.lower()
    if suffix not in (".yaml", ".yml", ".json"):
        raise WhatIfConfigError(
            f"unsupported config extension {suffix or '(none)'!r} for {path}; use .yaml, .yml or .json"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise WhatIfConfigError(f"cannot read config file {path}: {type(error).__name__}: {error}") from None
    try:
        data = json.loads(text) if suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as error:
        raise WhatIfConfigError(f"config file {path} does not parse: {error}") from None
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
    try:
        return WhatIfConfig.model_validate(data)
    except ValidationError as error:
        _raise_validation(error, origin)
    raise AssertionError("unreachable")  # pragma: no cover
