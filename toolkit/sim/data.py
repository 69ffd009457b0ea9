"""``SimulationData`` (what :func:`toolkit.simulate` returns) and :func:`toolkit.load`."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
import zlib
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from toolkit._util.datasets import dataset_path
from toolkit._util.keys import REWARD_FIELDS, numeric_reward
from toolkit._util.results import json_safe
from toolkit.errors import ConfigError
from toolkit.grading import conduct_grader
from toolkit.rows import read_rows, save_rows, scrub, to_pandas
from toolkit.rows._io import atomic_write_bytes
from toolkit.rows._schema import _Privileged
from toolkit.sim.knobs import RunKnobs
from toolkit.sim.search import ARMS
from toolkit.stats.passk import PassAt, pass_at
from toolkit.world import normalize_tools

__all__ = ["SimulationData", "RowList", "RowStore", "load"]


class RowList(list):
    """A list of rows that is also callable: ``data.rows`` and ``data.rows()`` are the same
    rows (docs/design/engine.md §9 item 15: users wrote both)."""

    def __call__(self) -> RowList:
        return self


class RowStore:
    """The rows of a run held compactly: each row is one zlib-compressed pickle, and its
    trajectory is kept only as the part that differs from the written row (``privileged``,
    scratch keys), rebuilt on access.

    Why: a row as Python dicts costs ~7.4 KB (measured on 2,000 streamed rows: 1.6 KB of JSON
    each), and ``rows`` + ``trajectories`` held every row twice, so 100,000 rows needed
    ~1.5 GB; compressed they take ~0.6 KB plus ~0.2 KB of trajectory delta. Decoding costs
    ~30 us per row, paid only when rows are read (``SimulationData.rows`` decodes all of them
    once, on first access).
    """

    __slots__ = ("_rows", "_deltas")

    def __init__(self) -> None:
        self._rows: list[bytes] = []
        self._deltas: list[bytes | None] = []

    @staticmethod
    def _pack(value: Any) -> bytes:
        # level 1: ~3x smaller at a few us per row; higher levels gain little on short rows
        return zlib.compress(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL), 1)

    @staticmethod
    def _unpack(blob: bytes) -> Any:
        return pickle.loads(zlib.decompress(blob))

    def append(self, row: Mapping[str, Any], trajectory: Mapping[str, Any] | None = None) -> None:
        """Store ``row`` (the written, scrubbed row) and ``trajectory`` (the same row before
        scrubbing; None when it is the row itself)."""
        self._rows.append(self._pack(dict(row)))
        self._deltas.append(None if trajectory is None else self._pack(_delta(row, trajectory)))

    def replace(self, index: int, row: Mapping[str, Any], trajectory: Mapping[str, Any] | None = None) -> None:
        self._rows[index] = self._pack(dict(row))
        self._deltas[index] = None if trajectory is None else self._pack(_delta(row, trajectory))

    def __len__(self) -> int:
        return len(self._rows)

    def __bool__(self) -> bool:
        return bool(self._rows)

    def row(self, index: int) -> dict:
        return self._unpack(self._rows[index])

    def trajectory(self, index: int) -> dict:
        row = self.row(index)
        delta = self._deltas[index]
        if delta is None:
            return row
        changed, dropped = self._unpack(delta)
        row.update(changed)
        for key in dropped:
            row.pop(key, None)
        if isinstance(row.get("privileged"), dict) and not isinstance(row["privileged"], _Privileged):
            row["privileged"] = _Privileged(row["privileged"])  # its repr hides the values (issue 21)
        return row

    def __iter__(self) -> Iterator[dict]:
        """The written rows, decoded one at a time (nothing is kept)."""
        for blob in self._rows:
            yield self._unpack(blob)

    def trajectories(self) -> Iterator[dict]:
        for index in range(len(self._rows)):
            yield self.trajectory(index)


def _delta(row: Mapping[str, Any], trajectory: Mapping[str, Any]) -> tuple[dict, list]:
    """What turns ``row`` back into ``trajectory``: top-level keys whose values differ or that
    the row lacks, and the keys the trajectory does not have."""
    changed = {key: value for key, value in trajectory.items() if key not in row or row[key] != value}
    dropped = [key for key in row if key not in trajectory]
    return changed, dropped


# What tk.pass_at reads of a row (toolkit/stats/passk.py): the rewards, the task key
# (scenario_id, task_id, prompt), rollout_id (duplicates), the judge's status and reason, and
# run_config's keys and shares (sampling's temperature / max_tokens, the versions, the
# prompt hash, the user and writer models, finish_reason, final_text, truncated steps).
# tests/sim/test_data.py checks pass_at on this view equals pass_at on the whole rows.
_STATISTICS_FIELDS = (*REWARD_FIELDS, "scenario_id", "task_id", "prompt", "rollout_id", "judge_status", "reason", "finish_reason",
                      "final_text", "policy_version", "model_version", "judge_version", "judge_name", "prompt_hash", "user_model",
                      "writer_model", "temperature", "max_tokens")  # fmt: skip
_STATISTICS_NESTED = {"sampling": ("temperature", "max_tokens"), "judge_meta": ("version",), "lineage": ("system_prompt_sha",)}


def _statistics_view(row: Mapping[str, Any], shared: dict | None = None) -> dict:
    """``row`` cut down to what :func:`toolkit.stats.pass_at` reads, each value as pass_at
    would judge it: ``final_text`` shortened when it has no tag (pass_at asks only whether it
    is blank then), ``prompt`` left out when ``scenario_id`` names the task, ``reason`` kept
    only on an ungraded row. ``shared`` pools equal nested dicts and strings across rows
    (100,000 rows repeat a handful of them)."""
    rollout_id = row.get("rollout_id")
    if not isinstance(rollout_id, (str, int)) or rollout_id == "":
        # pass_at tells id-less rows apart by their whole content: keep all of it
        return dict(row)
    pool = shared if shared is not None else {}
    view: dict[str, Any] = {}
    for key in _STATISTICS_FIELDS:
        if key in row:
            value = row[key]
            view[key] = pool.setdefault(("s", value), value) if isinstance(value, str) and len(value) < 200 else value
    text = view.get("final_text")
    if isinstance(text, str) and "<" not in text:
        view["final_text"] = "a" if text.strip() else ""  # answered or not: all pass_at reads of it
    scenario = view.get("scenario_id")
    if isinstance(scenario, str) and scenario:
        view.pop("prompt", None)  # the task key is the scenario id; the prompt is only its fallback
    if numeric_reward(view) is not None:
        view.pop("reason", None)  # read only to explain rows with no reward
    for key, inner in _STATISTICS_NESTED.items():
        value = row.get(key)
        if isinstance(value, Mapping):
            part = {name: value[name] for name in inner if name in value}
            view[key] = pool.setdefault(("d", key, repr(sorted(part.items()))), part)
        elif key in row:
            view[key] = value
    steps = row.get("steps")
    if isinstance(steps, list):
        view["steps"] = _TRUNCATED_STEPS if any(isinstance(s, Mapping) and s.get("truncated") is True for s in steps) else _NO_STEPS
    return view


_TRUNCATED_STEPS: list = [{"truncated": True}]
_NO_STEPS: list = []


class SimulationData:
    """The rows of one simulation and everything known about how they were made.

    ``rows`` (scrubbed, what ``output=`` and ``save()`` write; also callable),
    ``trajectories`` (the same rows with ``privileged``, memory only, for a judge),
    ``report()`` (a copy of the run record: parameters, every knob, coverage, losses),
    ``coverage``, ``search``, ``warnings`` (sentences naming the fix), ``degraded`` (machine
    flags), ``stopped_because``, ``metadata``, ``system_prompts``, ``knobs``, ``pass_at``,
    ``grade(judge=)``, ``to_pandas()``, ``save(path)``.

    Built by :func:`toolkit.simulate`, :func:`load` and :meth:`grade`; constructing one by
    hand wraps rows you already have. Nothing is validated or recomputed from the arguments.

    Parameters
    ----------
    rows : list[dict] or RowStore
        The scrubbed rows (``data.rows``). A :class:`RowStore` (what the engine passes) is
        kept compact and decoded on first access; any other iterable of rows is copied into
        a list at once.
    trajectories : list[dict] or None, default None
        The same rows with their ``privileged`` blocks (``data.trajectories``, what a judge
        sees). None uses ``rows``. Ignored when ``rows`` is a RowStore (which holds both).
    report : Mapping[str, Any] or None, default None
        Keyword-only. The run record ``report()`` returns copies of (``coverage`` is read
        from its ``"coverage"`` entry); None gives an empty record.
    search : Mapping[str, Any] or None, default None
        Keyword-only. The search record (arm weights and history, groups); None gives ``{}``.
    warnings, degraded : list[str] or None, default None
        Keyword-only. The run's warnings (sentences) and degraded flags; None gives ``[]``.
    stopped_because : str or None, default None
        Keyword-only. Why the run stopped (``"budget"``, ``"time_budget"``, ``"stopped"`` ...).
    metadata : Mapping[str, Any] or None, default None
        Keyword-only. Models, judge, seed and mode of the run; None gives ``{}``.
    system_prompts : list[dict] or None, default None
        Keyword-only. ``{"sha", "text"}`` entries; the first one's ``text`` is the policy
        :meth:`grade` hands the conduct grader when no judge is given. None gives ``[]``.
    knobs : RunKnobs or None, default None
        Keyword-only. The resolved knobs, kept as ``data.knobs`` (not read otherwise).
    seed : int, default 0
        Keyword-only. The bootstrap seed of ``pass_at``.
    """

    def __init__(
        self,
        rows: list[dict],
        trajectories: list[dict] | None = None,
        *,
        report: Mapping[str, Any] | None = None,
        search: Mapping[str, Any] | None = None,
        warnings: list[str] | None = None,
        degraded: list[str] | None = None,
        stopped_because: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        system_prompts: list[dict] | None = None,
        knobs: Any = None,
        seed: int = 0,
    ) -> None:
        if isinstance(rows, RowStore):
            # A run's rows stay compact until someone reads them (see RowStore).
            self._store: RowStore | None = rows
            self._rows: RowList | None = None
            self._trajectories: RowList | None = None
        else:
            self._store = None
            self._rows = RowList(rows)
            self._trajectories = RowList(trajectories if trajectories is not None else rows)
        self._report = dict(report or {})
        self.search = dict(search or {})
        self.warnings = list(warnings or [])
        self.degraded = list(degraded or [])
        self.stopped_because = stopped_because
        self.metadata = dict(metadata or {})
        self.system_prompts = list(system_prompts or [])
        self.knobs = knobs
        self._seed = seed

    # -- reading -----------------------------------------------------------------------

    @property
    def rows(self) -> RowList:
        """The scrubbed rows (a list, also callable). Decoded from the compact store on first
        access and kept from then on, so changes to them persist like on any list."""
        if self._rows is None:
            self._rows = RowList(self._store)
        return self._rows

    @rows.setter
    def rows(self, value: list[dict]) -> None:
        self._rows = RowList(value)

    @property
    def trajectories(self) -> RowList:
        """The rows with ``privileged`` (memory only, for a judge); decoded on first access."""
        if self._trajectories is None:
            self._trajectories = RowList(self._store.trajectories())
        return self._trajectories

    @trajectories.setter
    def trajectories(self, value: list[dict]) -> None:
        self._trajectories = RowList(value)

    def report(self) -> dict[str, Any]:
        """A deep copy of the run record (safe to mutate)."""
        return copy.deepcopy(self._report)

    @property
    def coverage(self) -> dict[str, Any]:
        return copy.deepcopy(self._report.get("coverage", {}))

    @property
    def pass_at(self) -> PassAt:
        """``tk.pass_at`` of the rows (pass@1, pass^k, pass@k with intervals), always a result.

        When no row has a usable reward every number is None and ``.note`` (which the printed
        line shows) says why: ungraded rows (grade first: ``data.grade(judge=...)``), grader
        errors counted with the first one, and for a run that landed no row at all, the
        rollouts it lost and the run's first warning."""
        # A run's rows are already written: a grader's bad reward (2.0, NaN) must not make the
        # property raise; it is skipped and counted in the printed line instead.
        result = pass_at(self._rows_for_statistics(), seed=self._seed, on_bad_reward="skip")
        if len(self):
            return result
        return dataclasses.replace(result, note=self._no_rows_note(result.note))

    def _rows_for_statistics(self) -> list[dict]:
        """The rows as ``pass_at`` reads them: the decoded rows when they are in memory already,
        else each stored row decoded in turn and projected onto the fields pass_at reads
        (:func:`_statistics_view`), so a first statistic does not decode every row in full
        (issue 21, row 4: 100,000 rows reached 1,182 MB that way)."""
        if self._rows is not None:
            return self._rows
        shared: dict = {}
        return [_statistics_view(row, shared) for row in self._store]

    def _no_rows_note(self, note: str | None) -> str:
        """pass_at's "no rows" note with what the run knows about why it has none."""
        r = self._report
        lost = r.get("rollouts_lost")
        parts = []
        if isinstance(lost, int) and lost:
            parts.append(f"{lost} rollout(s) lost{_lost_by_text(r.get('rollouts_lost_by'))}")
        if self.stopped_because:
            parts.append(f"stopped: {self.stopped_because}")
        if self.warnings:
            parts.append(f"first warning: {self.warnings[0]}")
        if not parts:
            return note or "no rows"
        return "no rows to score: " + "; ".join(parts)

    def __len__(self) -> int:
        return len(self._rows) if self._rows is not None else len(self._store)

    def __iter__(self) -> Iterator[dict]:
        return iter(self.rows)

    def __getitem__(self, index: int) -> dict:
        return self.rows[index]

    def __repr__(self) -> str:
        return f"SimulationData({len(self)} rows, stopped_because={self.stopped_because!r}, {len(self.warnings)} warnings)"

    def summary(self) -> str:
        """A few lines a person reads: size, why it stopped, coverage, losses, the search arms,
        the offline stand-ins, warnings.

        The arms line counts the rows each arm produced (it decodes the rows one at a time
        when they are still held compactly, ~30 us a row, keeping none).
        """
        r = self._report
        pairwise = r.get("pairwise") or {}
        lines = [
            # spelled out: "n" and "k" read as samples to anyone used to pass@k
            f"{len(self)} rows (budget {r.get('budget')}, mode {r.get('mode')}, phrasings {r.get('requests_per_situation')} "
            f"per situation, repeats {r.get('rollouts_per_request')} per phrasing, repeat policy {r.get('repeat_policy')}); "
            f"stopped: {self.stopped_because}",
            f"situations {r.get('n_situations')}, unique prompts {r.get('unique_prompts')}, behaviour signatures "
            f"{r.get('unique_signatures')}, pairwise coverage {pairwise.get('pairs_covered')}/{pairwise.get('pairs_planned')} "
            f"({pairwise.get('fraction')})",
            f"lost rollouts {r.get('rollouts_lost')}{_lost_by_text(r.get('rollouts_lost_by'))}, re-rolled {r.get('rollouts_rerolled')}, "
            f"fault share {_share_text((r.get('delivered') or {}).get('fault_share'))} (fault_rate {r.get('fault_rate')})",
        ]
        arms = self._arms_text()
        if arms:
            lines.append(arms)
        offline = r.get("offline_defaults")
        if offline:
            lines.append("offline stand-ins (what a run without that argument uses):")
            lines += [f"  {_offline_text(k, v)}" for k, v in offline.items()]
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def _arms_text(self) -> str | None:
        """The search arms' final split and the rows each ran. An arm that produced no row
        shows as not run, with why, and no weight: what its weight drew went to the others."""
        weights = self.search.get("arm_weights")
        if not isinstance(weights, Mapping) or not weights:
            return None
        ran = Counter(row.get("arm") for row in (self._rows if self._rows is not None else self._store or ()))
        template_writer = self._report.get("writer_model", "template") == "template"
        parts, not_run = [], {}
        for arm in ARMS:
            if not ran[arm]:
                not_run.setdefault(self._not_run_reason(arm), []).append(arm)
                continue
            what = ""
            if arm == "llm_guided":
                # the arm keeps its name from whileai-sdk (the engine this one follows), where a
                # model is told the coverage gaps; here it builds them from the least-seen values
                what = "; gap-guided from the least-seen axis values" + (", template writer, no model" if template_writer else "")
            parts.append(f"{arm} {float(weights.get(arm, 0.0)):.0%} ({_rows_text(ran[arm])}{what})")
        parts += [f"{_rows_text(n)} {arm}" for arm, n in sorted((str(a or "unlabelled"), n) for a, n in ran.items() if a not in ARMS)]
        text = "search arms, final split (rows run): " + (", ".join(parts) or "no row")
        if not_run:
            text += "; not run: " + ", ".join(f"{', '.join(arms)} ({why})" for why, arms in not_run.items())
        return text

    def _not_run_reason(self, arm: str) -> str:
        """Why ``arm`` produced no row, as far as the record tells."""
        pinned = (self._report.get("knobs") or {}).get("arm_weights")
        if isinstance(pinned, Mapping) and not pinned.get(arm):
            return "weight 0 in advanced['arm_weights']"
        if arm == "failure_mutation":
            if not self.search.get("mutation_aims"):
                return "no failing row to mutate"
            if self._report.get("unique_situations") and self._report.get("requests_per_situation") == 1:
                return "a mutation rewords a failing prompt in its situation, which unique situations never reopen"
        return "no slot drawn, or no candidate found"

    def _repr_html_(self) -> str:
        import html

        return "<pre>" + html.escape(self.summary()) + "</pre>"

    def to_pandas(self):
        return to_pandas(list(self.rows))

    # -- writing -----------------------------------------------------------------------

    def save(self, path: Any) -> Path:
        """Rows to JSONL (scrubbed, atomic) plus ``<name>.meta.json`` carrying the report."""
        return save_rows(list(self.rows), path, meta=self._meta())

    def _meta(self) -> dict[str, Any]:
        return {
            "simulation": json_safe(
                {
                    "report": self._report,
                    "search": self.search,
                    "warnings": self.warnings,
                    "degraded": self.degraded,
                    "stopped_because": self.stopped_because,
                    "metadata": self.metadata,
                    "system_prompts": self.system_prompts,
                }
            )
        }

    # -- grading -----------------------------------------------------------------------

    def grade(self, judge: Any = None, **options: Any) -> SimulationData:
        """Graded copies of the rows: ``judge`` is a callable row -> {"reward", ...} or a
        model spec (through ``tk.grade`` of toolkit/judge.py); None uses the deterministic
        conduct grader (:func:`toolkit.conduct_grader`). The judge sees ``privileged``."""
        if judge is None:
            system = self.system_prompts[0]["text"] if self.system_prompts else None
            judge = conduct_grader(system)
        try:
            from toolkit.grading import grade as _grade
        except ImportError:  # pragma: no cover - judge module is part of the toolkit
            _grade = None
        if _grade is not None:
            result = _grade(list(self.trajectories), judge, **options)
            graded = [dict(r) for r in result.rows]
            extra_warnings = list(getattr(result, "warnings", []) or [])
        else:  # pragma: no cover
            graded = []
            for row in self.trajectories:
                out = dict(row)
                verdict = judge(row)
                out.update(verdict if isinstance(verdict, Mapping) else {"reward": float(verdict)})
                graded.append(out)
            extra_warnings = []
        return SimulationData(
            [scrub(r) for r in graded],
            graded,
            report=self._report,
            search=self.search,
            warnings=self.warnings + [w for w in extra_warnings if w not in self.warnings],
            degraded=self.degraded,
            stopped_because=self.stopped_because,
            metadata=self.metadata,
            system_prompts=self.system_prompts,
            knobs=self.knobs,
            seed=self._seed,
        )


def _lost_by_text(lost_by: Any) -> str:
    """The losses by reason for the summary line, e.g. `` (agent_error 2, empty_reply 1)``;
    empty when nothing was lost."""
    if not isinstance(lost_by, Mapping) or not lost_by:
        return ""
    return " (" + ", ".join(f"{reason} {count}" for reason, count in sorted(lost_by.items())) + ")"


def _rows_text(n: int) -> str:
    return f"{n} row" if n == 1 else f"{n} rows"


def _offline_text(role: str, recorded: Any) -> str:
    """What the offline stand-in of ``report()["offline_defaults"]`` entry ``role`` is and how
    to replace it. The recorded entry compares with whileai-sdk's hosted defaults (the engine
    this one follows, docs/design/engine.md), which a newcomer cannot know; a role not listed
    here (a run of another version) shows its recorded text."""
    if role == "tools":
        return f"tools: {_shipped_tools_text()} (pass tools= for yours)"
    return _OFFLINE_TEXT.get(role, f"{role}: {recorded}")


_OFFLINE_TEXT = {
    "agent": "agent: tk.seeded_agent, an offline policy with planted mistakes (pass agent=: your callable, "
             "or a model spec such as 'openai:gpt-4o-mini')",
    "simulator": "writer: the template writer (simulator='<model spec>' phrases the situations with a model)",
    "user_model": "simulated person: the template user (user_model='<model spec>' lets a model speak for the person)",
}  # fmt: skip


def _shipped_tools_text() -> str:
    """The shipped example tool set, its human tools named (the simulated person answers those)."""
    try:
        specs = normalize_tools(dataset_path(_SHIPPED_TOOLS))
    except Exception:  # noqa: BLE001 -- a summary line must not fail on a damaged checkout
        return f"the shipped example {_SHIPPED_TOOLS} and its policy"
    human = [t.name for t in specs if t.is_human]
    said = f"the shipped example {_SHIPPED_TOOLS} and its policy: {len(specs) - len(human)} tools the mock world answers"
    if human:
        said += f", and {', '.join(human)}, {'human tools' if len(human) > 1 else 'a human tool'} the simulated person answers"
    return said


_SHIPPED_TOOLS = "tools/airline_support.json"


def _share_text(share: Any) -> str:
    """A share as a whole percent (the summary is read, not computed with); None says why."""
    if share is None:
        return "n/a (no tool call met a faulted situation)"
    return f"{float(share):.0%}"


def load(path: Any) -> SimulationData:
    """A saved or streamed run back as :class:`SimulationData`: the rows JSONL plus, when
    present, the ``.meta.json`` sidecar's report. ``trajectories`` are the rows (privileged
    blocks never reach disk).

    Parameters
    ----------
    path : str or os.PathLike
        The rows JSONL (``output=``, ``checkpoint=`` or ``data.save(path)``). Read with
        ``strict=False``: malformed lines are skipped with a warning. The report, search,
        warnings, stopped_because, metadata and system prompts come from the sidecar's
        ``"simulation"`` entry when there is one (empty otherwise); its knobs are rebuilt as
        :class:`toolkit.RunKnobs` when they still validate, else left in ``report()`` only.

    Returns
    -------
    SimulationData
        The rows, with ``seed`` from the report (0 when absent).

    Raises
    ------
    ConfigError
        ``path`` does not exist.
    """
    target = Path(path)
    if not target.exists():
        raise ConfigError(f"{target} does not exist")
    rows = read_rows(target, strict=False)
    meta = rows.meta or {}
    sim = meta.get("simulation") or {}
    report = sim.get("report") or {}
    knobs = None
    if isinstance(report.get("knobs"), Mapping):
        try:
            knobs = RunKnobs.from_advanced(report["knobs"])
        except (ConfigError, ValueError, TypeError):  # a sidecar from another version: keep the dict in report()
            knobs = None
    return SimulationData(
        list(rows),
        None,
        report=report,
        search=sim.get("search"),
        warnings=sim.get("warnings"),
        degraded=sim.get("degraded"),
        stopped_because=sim.get("stopped_because"),
        metadata=sim.get("metadata"),
        system_prompts=sim.get("system_prompts"),
        knobs=knobs,
        seed=int(report.get("seed") or 0),
    )


def write_json_atomic(path: Path, payload: Mapping[str, Any]) -> None:
    atomic_write_bytes(path, (json.dumps(json_safe(dict(payload)), indent=1, sort_keys=True) + "\n").encode("utf-8"))
