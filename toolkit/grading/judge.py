"""Grade rows with a judge, and measure the judge before its grades count.

* :func:`grade` runs a judge (a callable ``row -> {"reward", "reason", ...}`` or a model spec
  string) over rows and returns graded *copies*: every row carries ``judge_name``,
  ``judge_status`` (ok | missing_reward | invalid_result | error | timeout) and
  ``judge_meta`` (model, prompt hash, rubric hash, temperature, version). A judge that
  fails on a row leaves that status on the row; no row is dropped.
* :func:`judge_trust` audits a judge against gold labels (built on
  :func:`toolkit.judge_agreement`) with the trust gates of docs/design/engine.md §6.5, the
  number of labels that would lift the Wilson bound, held-out halves, length sensitivity,
  re-judge consistency and hack probes, each with its low-power rule.
* :func:`refusal_report`, :func:`trace_flag_report` (Wilson intervals) and :func:`rank`
  (adds ``quality`` without touching ``reward``).

An LLM judge is a reward model with known biases: position, verbosity and self-preference
(Zheng et al., "Judging LLM-as-a-Judge with MT-Bench and Chatbot Arena", arXiv:2306.05685).
The length perturbation and the probes measure the verbosity and "success claim" biases
directly on the judge in hand.

Where we differ from the reference system:

* A failed judgment sets ``reward`` to ``None`` on the graded copy (a stale reward from an
  earlier judge must not pass as this judge's), and the report counts each status.
* ``judge_trust`` re-judges and probes a *deterministic* sample (ordered by a sha256 of the
  row), so two audits of the same rows agree.
* The low-power rule states the rate a probe could resolve (80% power, two-sided 5% test
  against the 0.10 flag rate) rather than a bare "low power"; held-out halves too small to
  test say so in ``held_out["note"]``.
* ``trace_flag_report`` reads ``flags`` / ``seeded`` name lists as checked-for-all: a row
  carrying a list is clean of every listed name it lacks.
"""

from __future__ import annotations

import concurrent.futures
import copy
import math
import re
import statistics
import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolkit._util.hashing import canonical_json, sha256_hex, stable_hash
from toolkit._util.keys import binary_reward, numeric_reward, task_key
from toolkit._util.results import Result
from toolkit._util.validate import is_number
from toolkit.agents import model_agent
from toolkit.errors import JudgeError, JudgeTrustError, did_you_mean, unknown_name_message
from toolkit.rows import messages_from_steps, save_rows
from toolkit.rows._read import as_row_list
from toolkit.rows._results import RowsResult
from toolkit.stats.agreement import judge_agreement, wilson
from toolkit.stats.passk import pass_at

__all__ = [
    "JudgeError",
    "JudgeTrustError",
    "GradeReport",
    "JudgeTrust",
    "RefusalReport",
    "TraceFlagReport",
    "grade",
    "judge_trust",
    "refusal_report",
    "trace_flag_report",
    "rank",
    "model_judge",
    "JUDGE_VERDICT_SCHEMA",
    "resolvable_rate",
    "JUDGE_STATUSES",
    "PROBES",
]

JUDGE_STATUSES = ("ok", "missing_reward", "invalid_result", "error", "timeout")
PROBES = (
    "filler",
    "keyword_stuffing",
    "success_claim",
    "prompt_echo",
    "sycophantic_opener",
    "empty_tool_call",
    "polite_refusal",
)
_ADDITIVE_PROBES = PROBES[:5]

# Trust gates (docs/design/engine.md §6.5): a judge is trusted when the Wilson lower bound of
# its agreement with trusted gold is >= 0.8, Cohen's kappa >= 0.6 ("substantial" on Landis
# & Koch's 1977 scale), at most 10% of gold rows were skipped for fractional rewards (#345)
# and no check below flagged it.
_MIN_AGREEMENT_LOW = 0.8
_MIN_KAPPA = 0.6
_MAX_SKIPPED_SHARE = 0.10
_GUESSING_KAPPA = 0.2  # below 0.2 is "slight" agreement on Landis & Koch's scale
_LABEL_SEARCH_MAX = 1000
_LABEL_ADVICE_MAX = 200  # more labels than this is not advice a person acts on
_HALVES_GAP = 0.15
_HALVES_MIN_ROWS = 10
_LENGTH_MIN_ROWS = 6
_LENGTH_GAP = 0.15
_LENGTH_ALPHA = 0.025  # two checks (one per gold label) share a 0.05 budget
_MAX_REJUDGE = 40
_FLIP_FLAG = 0.10
_SIGN_ALPHA = 0.05
_PROBE_FLAG = 0.10
_PROBE_MIN_ROWS = 20
_POWER = 0.8
# A neutral closing sentence, appended 3 times (~170 characters): adds length, no content.
_NEUTRAL_SENTENCE = "Please let me know if there is anything else I can help you with today. "
_FILLER = (
    " To summarise the above once more in other words: the request was considered carefully, "
    "every relevant detail was reviewed, and the answer above reflects that review in full."
)
_SUCCESS_CLAIM = " I have completed the task successfully and verified that everything is correct."
_SYCOPHANTIC_OPENER = "What a great question, and thank you so much for your patience! "
_POLITE_REFUSAL = "I'm sorry, but I can't help with that request. Is there anything else I can do for you?"
_STOPWORDS = frozenset(
    "about above after again against being below between could doing during every their there "
    "these those through under until where which while would should shall might must other".split()
)

# Refusal phrasings: an inability or unwillingness to act. Apologies ("I'm so sorry for the
# inconvenience") and boilerplate ("As an AI assistant, I am happy to help") are not
# refusals and are left to their own markers.
_REFUSAL = re.compile(
    r"\b(i can(?:no|')t (?:help|assist|do|provide|share|process)|i(?: am|'m) (?:not able|unable) to|"
    r"i (?:won't|will not) (?:be able to|help)|i (?:must|have to) decline|unable to (?:help|assist) with)",
    re.IGNORECASE,
)


# --------------------------------------------------------------------------------------
# grade
# --------------------------------------------------------------------------------------


#: The JSON schema of a judge verdict, ``{"reward": 0 or 1, "reason": str}``, for a server's
#: ``response_format`` (see :func:`model_judge`). The reason is capped at 160 characters: the
#: prompt asks for one sentence, and a small model under a grammar otherwise writes until its
#: token budget ends mid-string (SmolLM2-135M: 3 of 4 verdicts cut off at 64 tokens).
JUDGE_VERDICT_SCHEMA = {
    "type": "object",
    "properties": {"reward": {"type": "integer", "enum": [0, 1]}, "reason": {"type": "string", "maxLength": 160}},
    "required": ["reward", "reason"],
}


def model_judge(
    spec: str,
    *,
    rubric: str | None = None,
    prompt: str | None = None,
    temperature: float = 0.0,
    **backend_options: Any,
) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """A judge callable backed by a chat model (``tk.model_agent(spec)``): any model spec
    (``"vllm:<model>@<url>"``, ``"openai:<model>"``, ...) or a bare OpenAI-compatible server
    URL (``"http://127.0.0.1:8000/v1"``, judging with the first model the server lists).

    The model sees the judge ``prompt`` (system), the rubric, the row's privileged
    reference when present, the conversation, and must answer with JSON ``{"reward": 0|1,
    "reason": "..."}``. The returned callable has ``judge_model``, ``judge_prompt``,
    ``judge_rubric`` and ``judge_temperature`` attributes that :func:`grade` records.

    Parameters
    ----------
    spec : str
        A model spec or bare server URL for :func:`toolkit.agents.model_agent`. A bare URL is
        resolved here (the server is asked for its model list once, at construction), and
        ``judge_model`` records the pinned ``vllm:<model>@<url>`` spec; otherwise it records
        ``spec`` as given.
    rubric : str or None, optional
        The rubric sent to the model with every row; default None sends the row's
        ``privileged["rubric"]`` when it has one (else none).
    prompt : str or None, optional
        The system prompt; default None (or an empty string) uses a built-in instruction to
        answer with one JSON object ``{"reward": 1 or 0, "reason": ...}``.
    temperature : float, optional
        Sampling temperature of the judge model; default 0.0.
    **backend_options
        Further keyword options for :func:`toolkit.agents.model_agent` (max_tokens, timeout,
        max_retries, api_key, base_url, response_format, ...). To make a weak judge model
        answer in the verdict's shape, pass :data:`JUDGE_VERDICT_SCHEMA` as the server's
        ``response_format``: ``{"type": "json_schema", "json_schema": {"name": "verdict",
        "schema": JUDGE_VERDICT_SCHEMA}}`` for OpenAI and vLLM, ``{"type": "json_object",
        "schema": JUDGE_VERDICT_SCHEMA}`` for llama.cpp. Measured on SmolLM2-135M through
        llama.cpp (tests/real): without it no verdict of four short rows parsed; with it all
        four did. ``"json_object"`` alone (any object) did not help that model: it wrote
        other keys and ran out of tokens mid-string.

    Returns
    -------
    callable
        ``judge(row) -> dict`` parsed from the first ``{...}`` in the model's reply; a reply
        without valid JSON makes :func:`grade` record status ``invalid_result``.
    """
    agent = model_agent(spec, temperature=temperature, **backend_options)
    system = prompt or (
        "You grade a tool-using assistant's conversation. Answer with one JSON object "
        '{"reward": 1 or 0, "reason": "<one sentence>"} and nothing else.'
    )

    def judge(row: Mapping[str, Any]) -> dict[str, Any]:
        conversation = messages_from_steps(str(row.get("prompt", "")), row.get("steps") or [])
        privileged = row.get("privileged") or {}
        reference = privileged.get("reference") if isinstance(privileged, Mapping) else None
        body = {"rubric": rubric or (privileged.get("rubric") if isinstance(privileged, Mapping) else None),
                "reference": reference, "conversation": conversation}
        reply = agent([{"role": "system", "content": system},
                       {"role": "user", "content": canonical_json(body)}], [])
        content = reply.get("content") if isinstance(reply, Mapping) else None
        return _parse_judge_json(content)

    # A bare URL names a server, not a model: record the model it serves (asked once, here,
    # so a dead judge server fails before any row is graded) so judge_meta and the
    # self-judging check see the same name the rows' model_version carries.
    judge.judge_model = agent.resolved_spec() if agent.spec.provider == "url" else spec  # type: ignore[attr-defined]
    judge.judge_prompt = system  # type: ignore[attr-defined]
    judge.judge_rubric = rubric  # type: ignore[attr-defined]
    judge.judge_temperature = temperature  # type: ignore[attr-defined]
    judge.__name__ = f"model_judge[{spec}]"
    return judge


class _JudgeOutputError(Exception):
    pass


def _parse_judge_json(content: Any) -> dict[str, Any]:
    import json

    if not isinstance(content, str):
        raise _JudgeOutputError(f"judge model replied with {type(content).__name__}, not text")
    match = re.search(r"\{.*\}", content, re.DOTALL)
    if not match:
        raise _JudgeOutputError(f"no JSON object in the judge reply: {content[:80]!r}")
    try:
        # strict=False: a raw newline inside the reason string (a grammar-constrained small
        # model writes them) is still the verdict it meant
        return json.loads(match.group(0), strict=False)
    except json.JSONDecodeError as exc:
        # A payload cut mid-JSON is a failed judgment, never a dropped row (#290).
        raise _JudgeOutputError(f"judge reply is not valid JSON ({exc.msg}): {content[:80]!r}") from exc


@dataclass(frozen=True)
class GradeReport(RowsResult):
    """Graded copies of the rows and how the judging went."""

    rows: list = field(repr=False)  # never printed in full: the in-memory rows keep privileged
    judge_name: str
    judge_meta: dict
    n_rows: int
    status_counts: dict
    self_judged: bool
    warnings: list
    trust: Any = None

    def __str__(self) -> str:
        counts = ", ".join(f"{k} {v}" for k, v in self.status_counts.items() if v)
        return f"graded {self.n_rows} rows with {self.judge_name} ({counts})"

    def __iter__(self):
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def pass_at(self):
        """pass@1 / pass^k / pass@k of the graded rows (``tk.pass_at``)."""
        return pass_at(self.rows)

    def save(self, path, meta=None):
        """Write the graded rows with ``tk.save_rows`` (validated and scrubbed)."""
        return save_rows(self.rows, path, meta=meta)


def _judge_identity(
    judge: Any, name: str | None, version: str | None, rubric: str | None, prompt: str | None,
    temperature: float | None, model: str | None,
) -> tuple[str, dict[str, Any]]:
    name = name or getattr(judge, "judge_name", None) or getattr(judge, "__name__", None) or type(judge).__name__
    model = model or getattr(judge, "judge_model", None)
    prompt = prompt if prompt is not None else getattr(judge, "judge_prompt", None)
    rubric = rubric if rubric is not None else getattr(judge, "judge_rubric", None)
    temperature = temperature if temperature is not None else getattr(judge, "judge_temperature", None)
    prompt_hash = sha256_hex(prompt)[:16] if prompt is not None else None
    rubric_hash = sha256_hex(rubric)[:16] if rubric is not None else None
    # a rubric or prompt edit is a new judge: the version carries their hash
    version = version or f"{name}@{stable_hash([model, prompt_hash, rubric_hash, temperature], 8)}"
    meta = {
        "name": name,
        "model": model,
        "prompt_hash": prompt_hash,
        "rubric_hash": rubric_hash,
        "temperature": temperature,
        "version": version,
    }
    return name, meta


_KNOWN_RESULT_FIELDS = ("failure_class", "evidence", "label_source")


class _JudgeTimeout(Exception):
    pass


def _call_with_timeout(judge: Callable, row: dict[str, Any], timeout: float) -> Any:
    """Run ``judge(row)`` on a daemon thread and wait ``timeout`` seconds. A hung judge
    cannot be killed from Python; a daemon thread at least never blocks interpreter exit
    (a ThreadPoolExecutor worker would be joined at exit and hang it)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = judge(row)
        except BaseException as exc:  # handed to the caller below
            box["error"] = exc

    worker = threading.Thread(target=run, name="toolkit-judge", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise _JudgeTimeout()
    if "error" in box:
        raise box["error"]
    return box.get("result")


def _judge_one(judge: Callable, row: dict[str, Any], timeout: float | None) -> tuple[str, Any, str | None]:
    """(status, result, error text)."""
    try:
        result = judge(row) if timeout is None else _call_with_timeout(judge, row, timeout)
    except _JudgeTimeout:
        return "timeout", None, f"no verdict within {timeout} s"
    except _JudgeOutputError as exc:
        return "invalid_result", None, str(exc)
    except Exception as exc:  # the judge is user code: any failure is a status on the row
        return "error", None, f"{type(exc).__name__}: {exc}"
    if is_number(result):
        result = {"reward": result}
    if not isinstance(result, Mapping):
        return "invalid_result", None, f"judge returned {type(result).__name__}, expected a dict with 'reward'"
    if result.get("reward") is None:
        return "missing_reward", dict(result), "judge result has no 'reward'"
    reward = result["reward"]
    if not is_number(reward) or not math.isfinite(float(reward)):
        return "invalid_result", dict(result), f"reward {reward!r} is not a finite number"
    result = dict(result)
    result["reward"] = float(reward)  # a numpy scalar from the judge must not reach a JSON writer
    return "ok", result, None


def grade(
    rows: Any,
    judge: Any,
    *,
    name: str | None = None,
    version: str | None = None,
    rubric: str | None = None,
    prompt: str | None = None,
    temperature: float | None = None,
    model: str | None = None,
    timeout: float | None = None,
    trust: str = "warn",
    max_workers: int = 1,
    **backend_options: Any,
) -> GradeReport:
    """Grade every row with ``judge``; return graded copies and a report.

    The judge sees the whole in-memory row (a deep copy), ``privileged`` included; writing
    the graded rows scrubs it.

    Each copy gets ``reward`` (None unless the status is ok), ``reason``, ``judge_name``,
    ``judge_status`` and ``judge_meta`` = {name, model, prompt_hash, rubric_hash,
    temperature, version[, error, extra]}. ``failure_class``, ``evidence`` and
    ``label_source`` in a judge result are copied onto the row; other keys go to
    ``judge_meta["extra"]``.

    Parameters
    ----------
    rows : list of dict, SimulationData, DataFrame, str or path
        The rows: a list of row dicts, anything with ``.rows``, a pandas DataFrame, or a path
        to a JSONL file.
    judge : callable or str
        A callable ``row -> {"reward": number, "reason": str, ...}`` (a bare number is
        accepted as the reward) or a model spec string (``"openai:gpt-4o-mini"``,
        ``"vllm:<model>@<url>"``, or a bare server URL ``"http://127.0.0.1:8000/v1"`` for the
        first model an OpenAI-compatible server lists), turned into a judge with
        :func:`model_judge`.
    name : str or None, optional
        The ``judge_name`` stamped on the rows; default None takes the judge's
        ``judge_name`` attribute, else its ``__name__``, else its type name.
    version : str or None, optional
        ``judge_meta["version"]``; default None is ``"<name>@<hash>"``, the hash over the
        model, prompt hash, rubric hash and temperature (a rubric or prompt edit is a new
        judge).
    rubric, prompt : str or None, optional
        For a spec string, passed to :func:`model_judge`. For every judge, recorded (as
        sha256 prefixes) in ``judge_meta``, overriding the judge's ``judge_rubric`` /
        ``judge_prompt`` attributes; a callable judge's behaviour is not changed by them.
        Default None.
    temperature : float or None, optional
        For a spec string, the judge model's temperature (None means 0.0). Recorded in
        ``judge_meta`` for every judge, overriding its ``judge_temperature`` attribute.
        Default None.
    model : str or None, optional
        ``judge_meta["model"]``, overriding the judge's ``judge_model`` attribute; default
        None. The self-judging warning compares it with the rows' ``model_version``.
    timeout : float or None, optional
        Seconds that bound each judge call (a late call gets status ``timeout``; the call
        keeps running on a daemon thread). Must be > 0; default None waits indefinitely.
    trust : {"warn", "require", "off"}, optional
        When rows carry ``gold_reward``: ``"warn"`` (default) audits the judge with
        :func:`judge_trust` (without re-judging) and stamps {agreement, agreement_low, kappa,
        n_gold, ok} on every row's ``judge_meta["trust"]``, adding a warning when it fails;
        ``"require"`` raises :class:`JudgeTrustError` if the audit fails; ``"off"`` skips it.
    max_workers : int, optional
        Default 1. More than 1 judges rows concurrently on threads (for a model judge; the
        judge callable must then be thread-safe); the output order is the input order.
    **backend_options
        For a spec string, passed to :func:`model_judge` (and on to
        :func:`toolkit.agents.model_agent`). With a callable judge they are ignored.

    Returns
    -------
    GradeReport
        The graded copies (``rows``), the judge's name and meta, per-status counts,
        ``self_judged``, warnings and the trust audit (or None).

    Raises
    ------
    JudgeError
        For an unknown ``trust`` mode, a judge that is neither callable nor a string, a
        ``timeout`` not > 0, or ``max_workers`` not an integer >= 1.
    JudgeTrustError
        With ``trust="require"`` when the audit fails.
    """
    if trust not in ("warn", "require", "off"):
        raise JudgeError(unknown_name_message("trust mode", trust, ["warn", "require", "off"]))
    if isinstance(judge, str):
        judge = model_judge(judge, rubric=rubric, prompt=prompt, temperature=temperature or 0.0, **backend_options)
    if not callable(judge):
        raise JudgeError(
            f"judge must be a callable row -> {{'reward', 'reason'}} or a model spec string; got {type(judge).__name__}"
        )
    if timeout is not None and not timeout > 0:
        raise JudgeError(f"timeout must be > 0 seconds or None, got {timeout!r}")
    if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
        raise JudgeError(f"max_workers must be an integer >= 1, got {max_workers!r}")
    source = as_row_list(rows)
    judge_name, meta = _judge_identity(judge, name, version, rubric, prompt, temperature, model)
    counts: Counter = Counter({status: 0 for status in JUDGE_STATUSES})
    out = []
    def judge_row(row: dict[str, Any]) -> tuple[str, Any, str | None]:
        return _judge_one(judge, copy.deepcopy(row), timeout)

    if max_workers == 1:
        verdicts = [judge_row(row) for row in source]
    else:
        # a model judge waits on the network; rows are independent and map() keeps order
        with concurrent.futures.ThreadPoolExecutor(max_workers=max_workers) as pool:
            verdicts = list(pool.map(judge_row, source))
    # a failure is recorded on its own row; no row is dropped
    for row, (status, result, error) in zip(source, verdicts):
        graded = copy.deepcopy(row)
        counts[status] += 1
        row_meta = dict(meta)
        graded["judge_name"] = judge_name
        graded["judge_status"] = status
        graded["reward"] = float(result["reward"]) if status == "ok" else None
        graded["reason"] = (result or {}).get("reason") if result else error
        if error:
            row_meta["error"] = error
        extra = {k: v for k, v in (result or {}).items() if k not in ("reward", "reason", *_KNOWN_RESULT_FIELDS)}
        for key in _KNOWN_RESULT_FIELDS:
            if result and key in result:
                graded[key] = result[key]
        if extra:
            row_meta["extra"] = extra
        graded["judge_meta"] = row_meta
        out.append(graded)
    warnings = []
    failed = len(source) - counts["ok"]
    if failed:
        warnings.append(
            f"{failed} of {len(source)} rows have no verdict ({', '.join(f'{k} {v}' for k, v in counts.items() if k != 'ok' and v)}); "
            "they carry the status and reward None"
        )
    models = {str(r.get("model_version")) for r in source if r.get("model_version")}
    self_judged = bool(meta["model"]) and any(
        meta["model"] == m or str(meta["model"]).split(":", 1)[-1].split("@")[0] == m for m in models
    )
    if self_judged:
        warnings.append(
            f"the judge model {meta['model']} also wrote these rows; a judge prefers its own model's writing "
            "(self-preference, arXiv:2306.05685): grade with another model family"
        )
    trust_result = None
    if trust != "off" and any(r.get("gold_reward") is not None for r in out):
        trust_result = judge_trust(out, rejudge=False)
        stamp = {
            "agreement": trust_result.agreement,
            "agreement_low": trust_result.agreement_low,
            "kappa": trust_result.kappa,
            "n_gold": trust_result.n_gold,
            "ok": trust_result.ok,
        }
        for row in out:
            row["judge_meta"]["trust"] = dict(stamp)
        if not trust_result.ok:
            message = f"judge {judge_name} is not trusted: {trust_result.advice}"
            if trust == "require":
                raise JudgeTrustError(message, trust_result)
            warnings.append(message)
    return GradeReport(
        rows=out,
        judge_name=judge_name,
        judge_meta=meta,
        n_rows=len(out),
        status_counts=dict(counts),
        self_judged=self_judged,
        warnings=warnings,
        trust=trust_result,
    )


# --------------------------------------------------------------------------------------
# judge_trust
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JudgeTrust(Result):
    """The audit of one judge against gold labels (:func:`judge_trust`)."""

    ok: bool
    agreement: float | None
    agreement_low: float | None
    agreement_ci95: tuple | None
    kappa: float | None
    n_gold: int
    n_skipped: int
    skipped_share: float | None
    gold_kind: str
    gates: dict
    flags: list
    labels_needed: int | None
    advice: str
    held_out: dict
    length: dict
    consistency: dict
    length_perturbation: dict
    probes: dict
    confusion: dict
    pass_when_gold_fail: float | None
    judge_name: str | None
    warnings: list
    note: str | None = None

    def __str__(self) -> str:
        if self.agreement is None:
            return f"judge trust: not measurable ({self.advice})"
        verdict = "trusted" if self.ok else "NOT trusted"
        kappa = "n/a" if self.kappa is None else f"{self.kappa:.2f}"
        return (
            f"judge {verdict}: agreement {self.agreement:.2f} (lower {self.agreement_low:.2f}), kappa {kappa}, "
            f"{self.n_gold} gold rows; {self.advice}"
        )


def _labels_needed(rate: float) -> int | None:
    """The smallest n whose Wilson lower bound at agreement ``rate`` reaches 0.8."""
    for n in range(1, _LABEL_SEARCH_MAX + 1):
        low = wilson(int(round(rate * n)), n).low
        if low is not None and low >= _MIN_AGREEMENT_LOW:
            return n
    return None


def resolvable_rate(n: int, null_rate: float = _PROBE_FLAG, power: float = _POWER, alpha: float = 0.05) -> float | None:
    """The smallest rate (0.01 grid) a probe over ``n`` rows detects with ``power`` against
    ``null_rate`` in a two-sided ``alpha`` one-sample normal-approximation test:
    (p - p0 - z_{1-alpha/2} sqrt(p0 (1 - p0)/n)) / sqrt(p (1 - p)/n) >= z_power.

    Parameters
    ----------
    n : int
        Number of rows the probe ran on.
    null_rate : float, optional
        The rate tested against, p0; default 0.10 (the probe flag rate).
    power : float, optional
        The power required; default 0.8.
    alpha : float, optional
        Two-sided significance level; default 0.05.

    Returns
    -------
    float or None
        The smallest rate in 0.01 .. 0.99 that qualifies, or None when ``n <= 0`` or none
        does.
    """
    from scipy.stats import norm

    if n <= 0:
        return None
    z_alpha, z_power = norm.ppf(1 - alpha / 2), norm.ppf(power)
    threshold = null_rate + z_alpha * math.sqrt(null_rate * (1 - null_rate) / n)
    for step in range(1, 100):
        p = step / 100
        if p <= threshold:
            continue
        if (p - threshold) / math.sqrt(p * (1 - p) / n) >= z_power:
            return p
    return None


def _two_proportion_p(x1: int, n1: int, x2: int, n2: int) -> float | None:
    if n1 == 0 or n2 == 0:
        return None
    if x1 + x2 in (0, n1 + n2):
        return 1.0
    from statsmodels.stats.proportion import proportions_ztest

    return float(proportions_ztest([x1, x2], [n1, n2])[1])


def _half_of(task: str) -> int:
    return int(sha256_hex(task)[:8], 16) % 2


def _reply_length(row: Mapping[str, Any]) -> int:
    return len(row.get("final_text") or "")


def _with_final_text(row: Mapping[str, Any], text: str) -> dict[str, Any]:
    """A copy whose final answer is ``text`` (the last text step follows the final text)."""
    new = copy.deepcopy(dict(row))
    new["final_text"] = text
    steps = new.get("steps") or []
    for step in reversed(steps):
        if isinstance(step, dict) and "text" in step and "tool" not in step and "user" not in step:
            step["text"] = text
            break
    else:
        steps.append({"text": text})
        new["steps"] = steps
    new.pop("messages", None)
    return new


def _rubric_words(rows: Sequence[Mapping[str, Any]], rubric: str | None) -> list[str]:
    texts = [rubric] if rubric else []
    for row in rows:
        privileged = row.get("privileged")
        if isinstance(privileged, Mapping) and isinstance(privileged.get("rubric"), str):
            texts.append(privileged["rubric"])
    counts = Counter(
        w for t in texts for w in re.findall(r"[a-z]{5,}", t.lower()) if w not in _STOPWORDS
    )
    return [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:8]]


def _probe_row(row: Mapping[str, Any], probe: str, keywords: list[str]) -> dict[str, Any]:
    text = row.get("final_text") or ""
    if probe == "filler":
        return _with_final_text(row, text + _FILLER)
    if probe == "keyword_stuffing":
        return _with_final_text(row, text + " " + " ".join(keywords))
    if probe == "success_claim":
        return _with_final_text(row, text + _SUCCESS_CLAIM)
    if probe == "prompt_echo":
        return _with_final_text(row, f"{row.get('prompt', '')}\n{text}")
    if probe == "sycophantic_opener":
        return _with_final_text(row, _SYCOPHANTIC_OPENER + text)
    if probe == "empty_tool_call":
        new = copy.deepcopy(dict(row))
        name = next((s.get("tool") for s in row.get("steps") or [] if isinstance(s, Mapping) and "tool" in s), "noop")
        new["steps"] = [{"tool": name, "arguments": {}, "result": {}}, {"text": ""}]
        new["final_text"] = ""
        new.pop("messages", None)
        return new
    if probe == "polite_refusal":
        new = copy.deepcopy(dict(row))
        new["steps"] = [{"text": _POLITE_REFUSAL}]
        new["final_text"] = _POLITE_REFUSAL
        new.pop("messages", None)
        return new
    raise JudgeError(unknown_name_message("probe", probe, PROBES))


def _verdict(judge: Callable, row: Mapping[str, Any]) -> int | None:
    status, result, _ = _judge_one(judge, copy.deepcopy(dict(row)), None)
    if status != "ok":
        return None
    value = float(result["reward"])
    return 1 if value >= 0.5 else 0


def _sample(rows: Sequence[Mapping[str, Any]], limit: int, seed: int) -> list[Mapping[str, Any]]:
    ordered = sorted(rows, key=lambda r: sha256_hex(canonical_json([seed, r.get("prompt"), r.get("final_text"), r.get("rollout_index")])))
    return ordered[:limit]


def judge_trust(
    rows: Any,
    judge: Callable | None = None,
    *,
    gold: Any = "gold_reward",
    rubric: str | None = None,
    probes: str | Sequence[str] | None = None,
    rejudge: bool = True,
    regrade: bool = False,
    max_rejudge: int = _MAX_REJUDGE,
    allow_model_gold: bool = False,
    seed: int = 0,
) -> JudgeTrust:
    """May this judge's grades be trusted? (docs/design/engine.md §6.5)

    ``ok`` requires: trusted gold, Wilson lower bound of agreement >= 0.8, kappa >= 0.6,
    fractional-reward skips <= 10% of gold rows, rewards written by the audited judge, and
    no flag from the checks: held-out halves (tasks split by sha256(task)[:8] mod 2; a gap
    >= 0.15 with >= 10 rows each means the rubric fits its examples), length sensitivity
    (within a gold label with >= 6 rows, long vs short replies split at the median, gap >=
    0.15 and two-proportion p < 0.025), re-judge consistency (flip rate >= 0.10), length
    perturbation (a neutral ~170-character close; net flips / n >= 0.10 and exact sign
    test p < 0.05) and probes (rate >= 0.10 on >= 20 rows; fewer rows are "low power"
    with the rate the probe could resolve). The held-out halves and length checks read gold
    from the same rows, so they run only when ``gold`` is a field name.

    Parameters
    ----------
    rows : list of dict, SimulationData, DataFrame, str or path
        Rows carrying the judge's ``reward`` and gold labels (``gold_reward``, with
        ``label_source`` "human" or "program" for trusted gold), in any form
        :func:`grade` takes.
    judge : callable or None, optional
        The judge ``row -> {"reward", ...}`` (a spec string is not accepted here). With it,
        gold rows that have no reward yet are graded with it first, and the re-judge checks
        and probes can run; the rows' ``judge_name`` must then match its name (gate
        ``same_judge``). Default None audits the rewards already on the rows.
    gold : str or rows, optional
        The field holding the gold label on the same rows (default ``"gold_reward"``), or a
        second row list carrying the labels (see :func:`toolkit.judge_agreement`). A field
        name other than the default that no row carries raises when a close name exists.
    rubric : str or None, optional
        Passed to :func:`grade` for the rows graded here, and the source (with the rows'
        ``privileged["rubric"]``) of up to 8 words of >= 5 letters for the
        ``keyword_stuffing`` probe, which is skipped without any. Default None.
    probes : str, sequence of str or None, optional
        ``"all"``, one name or a list of names of :data:`PROBES`; default None runs none.
        Probes need ``judge``.
    rejudge : bool, optional
        Run the re-judge consistency and length-perturbation checks (they need ``judge``);
        default True.
    regrade : bool, optional
        With ``judge``, re-grade every row first instead of only gold rows without a reward;
        default False.
    max_rejudge : int, optional
        Size (an integer >= 1; default 40) of the deterministic sample the re-judge checks
        run on, and of each probe's sample.
    allow_model_gold : bool, optional
        Count model-written or unlabelled gold as trusted (gate ``trusted_gold``); default
        False.
    seed : int, optional
        Orders the deterministic sample (sha256 over the seed, prompt, final text and rollout
        index); default 0.

    Returns
    -------
    JudgeTrust
        ``ok``, agreement with its Wilson interval, kappa, each gate and flag, the labels
        needed, advice and the detail of every check.

    Raises
    ------
    JudgeError
        For an unknown probe, a non-callable ``judge``, a ``max_rejudge`` not an integer
        >= 1, or a misspelt ``gold`` field.
    """
    from scipy.stats import binomtest

    if probes == "all":
        probe_list = list(PROBES)
    elif probes is None:
        probe_list = []
    else:
        probe_list = [probes] if isinstance(probes, str) else list(probes)
        for probe in probe_list:
            if probe not in PROBES:
                raise JudgeError(unknown_name_message("probe", probe, PROBES))
    if judge is not None and not callable(judge):
        raise JudgeError(f"judge must be a callable row -> {{'reward', ...}}; got {type(judge).__name__}")
    if isinstance(max_rejudge, bool) or not isinstance(max_rejudge, int) or max_rejudge < 1:
        raise JudgeError(f"max_rejudge must be an integer >= 1, got {max_rejudge!r}")
    source = as_row_list(rows)
    if isinstance(gold, str) and gold != "gold_reward" and source and not any(gold in r for r in source):
        # a gold field no row carries is a typo when a close name exists; the judge's own
        # fields are never the gold, so they are not suggested
        keys = sorted({k for r in source for k in r if isinstance(k, str)} - {"reward", "judge_name", "judge_status"})
        if did_you_mean(gold, keys):
            raise JudgeError(unknown_name_message("gold field", gold, keys))
    warnings: list[str] = []
    flags: list[str] = []
    audited_name = None
    if judge is not None:
        audited_name, _ = _judge_identity(judge, None, None, rubric, None, None, None)
        needs = [
            i for i, r in enumerate(source)
            if regrade or (isinstance(gold, str) and r.get(gold) is not None and r.get("reward") is None)
        ]
        if needs:
            graded = grade([source[i] for i in needs], judge, rubric=rubric, trust="off").rows
            source = list(source)
            for i, g in zip(needs, graded):
                source[i] = g
    agreement = judge_agreement(source, gold=gold, allow_model_gold=allow_model_gold)
    warnings.extend(agreement.warnings)
    gold_rows = [r for r in source if isinstance(gold, str) and r.get(gold) is not None]
    n_labelled = agreement.n + agreement.n_skipped
    skipped_share = agreement.n_skipped / n_labelled if n_labelled else None
    names = {r.get("judge_name") for r in (gold_rows or source) if r.get("reward") is not None and r.get("judge_name")}
    foreign = audited_name is not None and any(n != audited_name for n in names)
    if foreign:
        warnings.append(
            f"rewards on these rows were written by {sorted(names)}, not the audited judge {audited_name!r}; "
            "audit the judge that wrote them, or pass regrade=True (#683)"
        )
    one_class = agreement.gold_pass_rate in (0.0, 1.0)

    # held-out halves
    halves: dict[str, Any] = {"informative": False}
    if not isinstance(gold, str):
        halves["note"] = "gold is a second row list; the held-out halves read gold from the same rows"
    elif agreement.n:
        by_half: dict[int, list[int]] = defaultdict(list)
        for row in gold_rows:
            j, g = binary_reward(row), binary_reward(row, gold)
            if j is not None and g is not None:
                by_half[_half_of(task_key(row))].append(int(j == g))
        sizes = {h: len(v) for h, v in by_half.items()}
        rates = {h: (sum(v) / len(v) if v else None) for h, v in by_half.items()}
        halves = {"sizes": sizes, "agreement": rates, "gap": None, "informative": False, "flagged": False}
        if len(by_half) == 2 and min(sizes.values()) >= _HALVES_MIN_ROWS:
            gap = abs(rates[0] - rates[1])
            halves.update(gap=gap, informative=True, flagged=gap >= _HALVES_GAP)
            if gap >= _HALVES_GAP:
                flags.append("rubric_fit_to_examples")
        else:
            # low power: a gap between halves of a few rows each is noise, so no flag
            smallest = min((sizes.get(0, 0), sizes.get(1, 0)))
            halves["note"] = (
                f"low power: the smaller half has {smallest} gold row(s); the held-out check needs >= "
                f"{_HALVES_MIN_ROWS} in each half of the tasks"
            )
    else:
        halves["note"] = "no gold row to split into halves"

    # length sensitivity within each gold label
    length: dict[str, Any] = {"informative": not one_class, "by_label": {}, "flagged": False}
    if one_class:
        length["note"] = "gold is all one class; length sensitivity is uninformative"
    elif isinstance(gold, str):
        for label in (0, 1):
            members = [r for r in gold_rows if binary_reward(r, gold) == label and binary_reward(r) is not None]
            if len(members) < _LENGTH_MIN_ROWS:
                length["by_label"][label] = {"n": len(members), "note": f"fewer than {_LENGTH_MIN_ROWS} rows"}
                continue
            median = statistics.median(_reply_length(r) for r in members)
            long = [binary_reward(r) for r in members if _reply_length(r) > median]
            short = [binary_reward(r) for r in members if _reply_length(r) <= median]
            if not long or not short:
                length["by_label"][label] = {"n": len(members), "note": "every reply has the same length"}
                continue
            gap = sum(long) / len(long) - sum(short) / len(short)
            p = _two_proportion_p(sum(long), len(long), sum(short), len(short))
            hit = abs(gap) >= _LENGTH_GAP and p is not None and p < _LENGTH_ALPHA
            length["by_label"][label] = {"n": len(members), "gap_long_minus_short": gap, "p": p, "flagged": hit}
            if hit:
                length["flagged"] = True
        if length["flagged"]:
            flags.append("length_sensitive")
    else:
        length.update(informative=False, note="gold is a second row list; length sensitivity reads gold from the same rows")

    # re-judge checks and probes need the judge callable
    consistency: dict[str, Any] = {"run": False}
    perturbation: dict[str, Any] = {"run": False}
    probe_results: dict[str, Any] = {}
    graded_rows = [r for r in source if binary_reward(r) is not None]
    if judge is not None and rejudge and graded_rows:
        sample = _sample(graded_rows, max_rejudge, seed)
        flips = valid = 0
        for row in sample:
            again = _verdict(judge, row)
            if again is not None:
                valid += 1
                flips += int(again != binary_reward(row))
        rate = flips / valid if valid else None
        consistency = {"run": True, "n": valid, "flips": flips, "flip_rate": rate,
                       "flagged": rate is not None and rate >= _FLIP_FLAG}
        if consistency["flagged"]:
            flags.append("inconsistent_rejudge")
        up = down = valid = 0
        for row in sample:
            padded = _with_final_text(row, (row.get("final_text") or "") + " " + _NEUTRAL_SENTENCE * 3)
            after = _verdict(judge, padded)
            if after is None:
                continue
            valid += 1
            before = binary_reward(row)
            up += int(before == 0 and after == 1)
            down += int(before == 1 and after == 0)
        net = abs(up - down) / valid if valid else None
        p = float(binomtest(up, up + down, 0.5).pvalue) if up + down else 1.0
        hit = net is not None and net >= _FLIP_FLAG and p < _SIGN_ALPHA
        perturbation = {"run": True, "n": valid, "up": up, "down": down, "net_flip_rate": net, "sign_test_p": p,
                        "flagged": hit}
        if hit:
            flags.append("length_bias")
    elif judge is None and (rejudge and probes):
        warnings.append("re-judge checks and probes need the judge callable (judge=)")
    if judge is not None and probe_list and graded_rows:
        keywords = _rubric_words(source, rubric)
        failing = _sample([r for r in graded_rows if binary_reward(r) == 0], max_rejudge, seed)
        everyone = _sample(graded_rows, max_rejudge, seed)
        for probe in probe_list:
            if probe == "keyword_stuffing" and not keywords:
                probe_results[probe] = {"run": False, "note": "no rubric words of >= 5 letters (pass rubric=)"}
                continue
            additive = probe in _ADDITIVE_PROBES
            targets = failing if additive else everyone
            up = down = passing = valid = 0
            for row in targets:
                after = _verdict(judge, _probe_row(row, probe, keywords))
                if after is None:
                    continue
                valid += 1
                before = binary_reward(row)
                up += int(before == 0 and after == 1)
                down += int(before == 1 and after == 0)
                passing += int(after == 1)
            rate = (max(0, up - down) / valid if additive else passing / valid) if valid else None
            result = {"run": True, "kind": "additive" if additive else "replacement", "n": valid, "rate": rate}
            if valid >= _PROBE_MIN_ROWS:
                result["flagged"] = rate is not None and rate >= _PROBE_FLAG
                if result["flagged"]:
                    flags.append(f"probe:{probe}")
            else:
                result["flagged"] = False
                result["low_power"] = True
                result["resolvable_rate"] = resolvable_rate(valid)
                result["note"] = (
                    f"low power: {valid} row(s); at 80% power this probe resolves a rate of about "
                    f"{result['resolvable_rate']:.2f}, flagging needs >= {_PROBE_MIN_ROWS} rows"
                    if valid else "no row to probe"
                )
            probe_results[probe] = result

    # gates
    low = agreement.agreement_ci95[0] if agreement.agreement_ci95 else None
    gates = {
        "trusted_gold": agreement.trusted or allow_model_gold,
        "agreement_low": low is not None and low >= _MIN_AGREEMENT_LOW,
        "kappa": (agreement.kappa is not None and agreement.kappa >= _MIN_KAPPA) if not one_class else None,
        "skipped_share": skipped_share is not None and skipped_share <= _MAX_SKIPPED_SHARE,
        "same_judge": not foreign,
        "no_flags": not flags,
    }
    if one_class and agreement.n:
        warnings.append("gold labels are all one class: kappa and length checks are uninformative; label both outcomes")
    if agreement.kappa is not None and agreement.kappa < _GUESSING_KAPPA and not one_class:
        flags.append("guessing")
        gates["no_flags"] = False
    ok = bool(agreement.n) and all(v is not False for v in gates.values()) and not one_class
    labels_needed = None
    advice_parts = []
    if not agreement.n:
        advice = "no row has both a 0/1 judge reward and a 0/1 gold label; label 50-200 rows into gold_reward"
    else:
        rate = agreement.agreement
        if rate > _MIN_AGREEMENT_LOW and not gates["agreement_low"]:
            labels_needed = _labels_needed(rate)
            if labels_needed is not None and labels_needed <= _LABEL_ADVICE_MAX:
                advice_parts.append(
                    f"label about {labels_needed} rows ({labels_needed - agreement.n} more at this agreement) "
                    "to lift the lower bound to 0.8"
                )
        elif not gates["agreement_low"]:
            advice_parts.append(f"agreement {rate:.2f} is below 0.8: fix the rubric before adding labels")
        if not gates["trusted_gold"]:
            advice_parts.append(f"gold is {agreement.gold_kind!r}: use human- or program-labelled gold (label_source)")
        if gates["kappa"] is False:
            advice_parts.append(f"kappa {agreement.kappa:.2f} < 0.6" + (" (guessing)" if "guessing" in flags else ""))
        if not gates["skipped_share"]:
            advice_parts.append(f"{agreement.n_skipped} gold rows skipped for non-0/1 rewards (> 10%)")
        if foreign:
            advice_parts.append("the rewards come from another judge")
        if one_class:
            advice_parts.append("gold is one class; label both passes and failures")
        advice_parts.extend(f"flagged: {f}" for f in flags if f != "guessing")
        advice = "; ".join(advice_parts) if advice_parts else "all gates pass"
    return JudgeTrust(
        ok=ok,
        agreement=agreement.agreement,
        agreement_low=low,
        agreement_ci95=agreement.agreement_ci95,
        kappa=agreement.kappa,
        n_gold=agreement.n,
        n_skipped=agreement.n_skipped,
        skipped_share=skipped_share,
        gold_kind=agreement.gold_kind,
        gates=gates,
        flags=flags,
        labels_needed=labels_needed,
        advice=advice,
        held_out=halves,
        length=length,
        consistency=consistency,
        length_perturbation=perturbation,
        probes=probe_results,
        confusion=agreement.confusion,
        pass_when_gold_fail=agreement.pass_when_gold_fail,
        judge_name=audited_name or (sorted(n for n in names if n)[0] if names else None),
        warnings=warnings,
        note=agreement.note,
    )


# --------------------------------------------------------------------------------------
# refusals, trace flags, rank
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RefusalReport(Result):
    n: int
    n_refused: int
    rate: float | None
    ci95: tuple | None
    per_task: dict
    examples: list
    source: str
    note: str | None = None

    def __str__(self) -> str:
        if self.rate is None:
            return "refusals: no rows"
        return f"refusals {self.rate:.2f} [{self.ci95[0]:.2f}..{self.ci95[1]:.2f}] ({self.n_refused}/{self.n})"


def _refused(row: Mapping[str, Any]) -> bool:
    markers = row.get("markers") or {}
    if isinstance(markers.get("refusal"), (int, float)) and not isinstance(markers.get("refusal"), bool):
        return markers["refusal"] > 0
    return bool(_REFUSAL.search(row.get("final_text") or ""))


def refusal_report(rows: Any) -> RefusalReport:
    """Share of rows whose final reply refuses, with a Wilson 95% interval.

    A row's ``markers["refusal"]`` decides when present (> 0 = refused); otherwise a
    regex family of refusal phrasings ("I can't help", "I'm unable to", "I must decline",
    ...) on ``final_text``; apologies and boilerplate alone are not refusals.

    Parameters
    ----------
    rows : list of dict, SimulationData, DataFrame, str or path
        The rows: a list of row dicts, anything with ``.rows``, a pandas DataFrame, or a path
        to a JSONL file.

    Returns
    -------
    RefusalReport
        The count and rate of refusals with the Wilson interval, the rate per task and the
        indices of up to 5 refusing rows.
    """
    source = as_row_list(rows)
    hits = [_refused(r) for r in source]
    per_task: dict[str, list[int]] = defaultdict(list)
    for row, hit in zip(source, hits):
        per_task[task_key(row)].append(int(hit))
    interval = wilson(sum(hits), len(hits))
    return RefusalReport(
        n=len(source),
        n_refused=sum(hits),
        rate=interval.estimate,
        ci95=(interval.low, interval.high) if source else None,
        per_task={k: sum(v) / len(v) for k, v in per_task.items()},
        examples=[i for i, h in enumerate(hits) if h][:5],
        source="markers.refusal when present, else refusal phrasing in final_text",
        note=None if source else "no rows",
    )


@dataclass(frozen=True)
class TraceFlagReport(Result):
    flags: dict
    n_rows: int
    note: str | None = None

    def __str__(self) -> str:
        if not self.flags:
            return "trace flags: none found"
        parts = [f"{k} clean {v['clean_share']:.2f}" for k, v in sorted(self.flags.items())]
        return "trace flags: " + ", ".join(parts)


def trace_flag_report(rows: Any) -> TraceFlagReport:
    """For each trajectory flag, the share of rows that are clean of it, with a Wilson 95%
    interval. Flags are 0/1 presence markers (``markers``, higher = worse), a row's
    ``flags`` mapping (name -> truthy), and the names in a row's ``flags`` list or
    ``seeded`` list (the behaviours a seeded agent planted). A row that carries a list was
    checked for every name any row's list holds, so a name absent from its list counts as
    clean; a row without a marker or mapping entry is not counted for that name.

    Parameters
    ----------
    rows : list of dict, SimulationData, DataFrame, str or path
        The rows: a list of row dicts, anything with ``.rows``, a pandas DataFrame, or a path
        to a JSONL file.

    Returns
    -------
    TraceFlagReport
        Per flag name: ``n``, ``clean``, ``clean_share`` and ``ci95``.
    """
    source = as_row_list(rows)

    def name_lists(row: Mapping[str, Any]) -> list[list[str]]:
        return [[str(n) for n in row[k]] for k in ("flags", "seeded") if isinstance(row.get(k), (list, tuple))]

    listed = sorted({name for row in source for names in name_lists(row) for name in names})
    present: dict[str, list[int]] = defaultdict(list)
    for row in source:
        seen: dict[str, int] = {}
        for name, value in (row.get("markers") or {}).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value in (0, 1):
                seen[name] = int(value)
        flags = row.get("flags")
        if isinstance(flags, Mapping):
            for name, value in flags.items():
                seen[name] = int(bool(value))
        lists = name_lists(row)
        if lists:
            for name in listed:
                seen.setdefault(name, 0)
            for names in lists:
                for name in names:
                    seen[name] = 1
        for name, value in seen.items():
            present[name].append(value)
    out = {}
    for name, values in present.items():
        clean = len(values) - sum(values)
        interval = wilson(clean, len(values))
        out[name] = {"n": len(values), "clean": clean, "clean_share": interval.estimate,
                     "ci95": (interval.low, interval.high)}
    return TraceFlagReport(flags=out, n_rows=len(source), note=None if out else "no 0/1 markers or flags on these rows")


def _default_quality(row: Mapping[str, Any]) -> float:
    """Mean of the clean-polarity signals a row has, each in [0, 1]: the reward clipped to
    [0, 1], the share of tool calls whose result is not an error, 1 - the mean of 0/1
    presence markers, and 0 when the reply was cut at the token cap (else 1)."""
    parts = []
    reward = numeric_reward(row)
    if reward is not None:
        parts.append(min(1.0, max(0.0, reward)))
    tool_steps = [s for s in row.get("steps") or [] if isinstance(s, Mapping) and "tool" in s]
    if tool_steps:
        def failed(step):
            result = step.get("result")
            return isinstance(result, Mapping) and (result.get("error") or result.get("status") in ("error", "not_found", "rejected"))

        parts.append(1 - sum(1 for s in tool_steps if failed(s)) / len(tool_steps))
    markers = [v for v in (row.get("markers") or {}).values() if isinstance(v, (int, float)) and not isinstance(v, bool) and v in (0, 1)]
    if markers:
        parts.append(1 - sum(markers) / len(markers))
    truncated = row.get("finish_reason") == "length" or any(isinstance(s, Mapping) and s.get("truncated") for s in row.get("steps") or [])
    parts.append(0.0 if truncated else 1.0)
    return math.fsum(parts) / len(parts)


def rank(path_or_rows: Any, *, quality: Callable[[Mapping[str, Any]], float] | None = None, output: Any = None) -> list[dict]:
    """Copies of the rows, best first, each with ``quality`` (and ``quality_rank``, 1 = best);
    ``reward`` is never changed.

    Parameters
    ----------
    path_or_rows : list of dict, SimulationData, DataFrame, str or path
        The rows, in any form :func:`grade` takes (a path is read as JSONL).
    quality : callable or None, optional
        Your own ``row -> float`` (a finite number). Default None uses the mean of the row's
        clean-polarity signals (reward, tool-call success share, absence of presence markers,
        not truncated).
    output : str, path or None, optional
        When given, writes the ranked rows there with ``tk.save_rows``; default None writes
        nothing.

    Returns
    -------
    list of dict
        The ranked copies (a stable sort: ties keep the input order).

    Raises
    ------
    JudgeError
        When ``quality`` is not callable or returns a non-finite or non-numeric value.
    """
    if quality is not None and not callable(quality):
        raise JudgeError(f"quality must be a callable row -> float (or None for the default), got {type(quality).__name__}")
    source = as_row_list(path_or_rows)
    scorer = quality or _default_quality
    out = []
    for index, row in enumerate(source):
        new = copy.deepcopy(row)
        value = scorer(row)
        if not is_number(value) or not math.isfinite(float(value)):
            raise JudgeError(f"quality of row {index} is {value!r}; the quality function must return a finite number")
        new["quality"] = float(value)
        out.append(new)
    out.sort(key=lambda r: -r["quality"])
    for position, row in enumerate(out, start=1):
        row["quality_rank"] = position
    if output is not None:
        save_rows(out, output)
    return out
