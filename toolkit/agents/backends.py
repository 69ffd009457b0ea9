"""Model backends: ``openai:``, ``vllm:``, ``ollama:``, ``anthropic:`` specs and bare server URLs through the official SDKs.

``tk.model_agent("openai:gpt-4o-mini")`` returns a chat-shaped agent
``agent(messages, tools) -> assistant message`` that rollouts drive. Specs:

* ``openai:<model>``: the OpenAI API (key ``OPENAI_API_KEY``; ``OPENAI_BASE_URL`` or
  ``base_url=`` for any compatible server);
* ``vllm:<model>@<base_url>``: a vLLM OpenAI-compatible server (key ``VLLM_API_KEY`` if set,
  else the placeholder vLLM ignores);
* ``ollama:<model>[@<url>]``: Ollama's OpenAI-compatible endpoint (default
  ``http://localhost:11434/v1``);
* ``anthropic:<model>``: the Anthropic Messages API (key ``ANTHROPIC_API_KEY``);
* a bare ``http(s)://`` URL such as ``http://127.0.0.1:8000/v1``: any OpenAI-compatible server
  (vLLM, llama.cpp's ``llama-server``, ...) at that base URL, serving the first model id it
  lists at ``GET <url>/models``. The listing is asked on first use (a completion or
  ``prompt_logprobs``), once per agent, and an empty listing or an unreachable server raises
  :class:`BackendError` naming the URL. Key: ``api_key=``, else ``OPENAI_API_KEY`` if set, else
  the placeholder ``"EMPTY"`` (the SDK refuses an empty key; servers started without an API key
  ignore it). ``ModelAgent.resolved_spec()`` gives the pinned equivalent
  ``vllm:<model>@<url>``. To choose among several served models, write that ``vllm:`` spec:
  we found no documented convention for naming a model inside a bare URL (such as a
  ``#model`` fragment), so a URL carrying a fragment is refused rather than guessed at.

Each reply carries what the row needs: ``usage`` (input/output tokens), ``finish_reason`` and
``truncated`` (cut at ``max_tokens``), ``sampling`` as resolved (temperature, max_tokens,
model as the server named it, top_p and seed when sent), ``model``, and with logprobs
(``logprobs=True`` here or ``run_rollout(logprobs=...)``) the summed ``logprob`` of the
generated tokens the server scored, their count ``n_tokens`` and the per-token ``tokens`` list.
The Anthropic API returns no log-probabilities; rows then say so (``logprob_note``).

Retries. The SDKs' own retries are switched off (``max_retries=0``) and replaced by ours, so
that the schedule is bounded, seeded and recorded: on HTTP 429, 5xx or a dropped connection we
wait ``min(cap, base * 2**attempt)`` scaled by a jitter factor in [0.5, 1) drawn from
``stable_uniform(seed, spec, attempt)``, or the server's ``Retry-After`` when it is longer (up
to the cap), at most ``max_retries`` times, then raise :class:`BackendError` with the status and
the number of retries. A completion that exceeds ``timeout`` is not retried: a slow reply
retried at a flat timeout is how the reference (whileai-sdk's engine, docs/design/engine.md) "re-rolled forever" (pain list #470); the
rollout records it as lost (``timeout``) and the engine decides.

First contact. Until the server has sent this backend any HTTP response (a reply, or an
error status such as 429 or 500), a failed connection is not retried either: a refused
connection or a server that accepts and never replies raises :class:`BackendError` at once
(status ``"connection"`` or ``"timeout"``, ``first_contact=True``, the message naming the
server URL and the reason: ``connection refused``, ``no reply within 3 s``), so a run pointed
at a dead or wrong address fails within one request's timeout (at most 2 x ``timeout``: a
request's connect and read phases each get ``timeout``) instead of after a schedule of
backoffs. The rollout records it as lost ``server_unreachable``. Once the server has answered,
dropped connections are transient errors of a live server and are retried as above.

Where we differ from the reference: a misspelled prefix fails at construction with the
nearest valid prefix (the reference failed on the first call, docs/design/engine.md §9 item 15), URL
schemes included (``htp://...`` -> did you mean 'http'), and a missing key names its
environment variable before any request is made.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import socket
import threading
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from toolkit._util.hashing import stable_uniform
from toolkit._util.results import Result
from toolkit.agents._protocol import current_turn
from toolkit.errors import BackendError, ConfigError, unknown_name_message

__all__ = ["MODEL_SPEC_PREFIXES", "ModelSpec", "parse_model_spec", "BackendError", "ModelAgent", "PromptLogprobs", "model_agent", "default_timeout"]


def _sdk(name: str) -> Any:
    """The provider SDK module, or an error that says which extra installs it (the SDKs
    are the ``models`` extra: an offline install has neither)."""
    try:
        return importlib.import_module(name)
    except ImportError as error:
        raise ConfigError(
            f"model specs need the {name!r} package, which is not installed: pip install 'toolkit[models]' "
            f"(or pip install {name})"
        ) from error

MODEL_SPEC_PREFIXES = ("openai", "vllm", "ollama", "anthropic")
# A bare URL is a spec too; its schemes join the did-you-mean pool so "htp://..." is caught.
_URL_SCHEMES = ("http", "https")
# The provider a bare URL parses to (ModelSpec.provider); not a prefix a spec may start with.
_URL_PROVIDER = "url"
# The SDK refuses an empty key; vLLM's docs use this placeholder for servers without --api-key.
_PLACEHOLDER_KEY = "EMPTY"
_OLLAMA_URL = "http://localhost:11434/v1"
# The reply budget per agent turn. GPT-4o's 2,454 assistant turns in tau-bench's published
# airline trajectories (docs/design/real_servers.md; tokens estimated as characters / 4) have a
# median of 51 tokens, a 99th percentile of 222 and a longest of 314: 512 never cuts a turn
# like those, and a rambling model costs at most 512 tokens a turn (the reference engine's
# 768, docs/design/engine.md §10 item 30, is half as much again with no turn that needs it).
DEFAULT_MAX_TOKENS = 512
# How llama-cpp-python's server names itself (FastAPI's openapi.json info.title), for the
# behaviours of that server the backend has to work around.
_LLAMA_CPP_PYTHON = "llama.cpp Python API"
# Seconds to wait for a self-hosted server's version endpoint: it is asked once per agent,
# after the first completion, and a server without one must not slow the run down.
_VERSION_PROBE_SECONDS = 2.0
# The whole probe (every endpoint, every read) ends by this many seconds: it runs under the
# agent's model lock, so a server that trickles its answer a byte at a time would otherwise
# hold every rollout thread of the agent for as long as it likes.
_VERSION_PROBE_TOTAL_SECONDS = 3.0
# The most of a version answer read: a version or an OpenAPI document, never more.
_VERSION_PROBE_BYTES = 1_000_000
# OpenAI's documented default temperature; sent explicitly so the row records it (Anthropic:
# sent only when given, since the current SDK takes no sampling keywords).
DEFAULT_TEMPERATURE = 1.0


def default_timeout(max_tokens: int) -> float:
    """Seconds per completion for a reply budget: max(300, max_tokens / 4).

    Fitted to the two points whileai-sdk's engine states (docs/design/engine.md §10 item 30: 300 s
    at 768 tokens, 1024 s at 4096): a quarter second per token of budget, never under 300 s. A long reply budget needs
    more time, and a flat 300 s re-rolled long replies forever (pain list #470).

    Parameters
    ----------
    max_tokens : int
        The reply budget in tokens (no default). It is not validated here; :class:`ModelAgent`
        checks it before calling this.

    Returns
    -------
    float
        ``max(300.0, max_tokens / 4)`` seconds.
    """
    return max(300.0, max_tokens / 4)


@dataclass(frozen=True)
class ModelSpec(Result):
    """A parsed model spec. A bare URL parses to provider ``"url"``, ``model=None`` (the
    server's first listed model, asked on first use) and ``base_url`` the URL."""

    provider: str
    model: str | None
    base_url: str | None = None

    def __str__(self) -> str:
        if self.provider == _URL_PROVIDER:
            return str(self.base_url)  # the spec as written: it parses back to this
        return f"{self.provider}:{self.model}" + (f"@{self.base_url}" if self.base_url else "")


def _parse_url_spec(spec: str) -> ModelSpec:
    parts = urlsplit(spec)
    if not parts.netloc:
        raise ConfigError(f"model spec {spec!r}: a bare URL needs a host, like 'http://127.0.0.1:8000/v1'")
    if parts.fragment or spec.endswith("#"):
        raise ConfigError(
            f"model spec {spec!r}: a bare URL names a server, not a model (no documented convention puts a model "
            f"after '#'); to pick a model write 'vllm:<model>@{spec.split('#', 1)[0].rstrip('/')}'"
        )
    # "…/v1/" and "…/v1" are one server; one spelling keeps records comparable
    return ModelSpec(_URL_PROVIDER, None, spec.rstrip("/"))


def parse_model_spec(spec: str) -> ModelSpec:
    """Split ``"<provider>:<model>[@<base_url>]"``, or take a bare ``http(s)://`` URL as an
    OpenAI-compatible server (provider ``"url"``, model ``None`` until the server is asked);
    an unknown provider or URL scheme raises with did-you-mean.

    Parameters
    ----------
    spec : str
        The model spec: ``openai:<model>``, ``vllm:<model>@<base_url>`` (the server is
        required), ``ollama:<model>[@<url>]`` (default ``http://localhost:11434/v1``),
        ``anthropic:<model>``, or a bare ``http(s)://`` server URL (trailing ``/`` dropped; a
        ``#fragment`` is refused). Only ``vllm:`` and ``ollama:`` take an ``@<url>`` part,
        which must be an http(s) URL.

    Returns
    -------
    ModelSpec
        ``provider``, ``model`` (None for a bare URL) and ``base_url`` (None for
        ``openai:``/``anthropic:``).

    Raises
    ------
    ConfigError
        For a non-string or colon-less spec, an unknown prefix (with the nearest valid one), a
        URL scheme written without ``//``, no model after the prefix, a ``vllm:`` spec without
        a server, a non-http(s) ``@`` part, or a bare URL without a host or with a fragment.
    """
    if isinstance(spec, str) and spec.lower().startswith(("http://", "https://")):  # schemes are case-insensitive (RFC 3986 §3.1)
        return _parse_url_spec(spec)
    if not isinstance(spec, str) or ":" not in spec:
        raise ConfigError(
            "a model spec looks like 'openai:<model>', 'vllm:<model>@<base_url>', 'ollama:<model>[@<url>]', "
            f"'anthropic:<model>' or a server URL 'http://host:8000/v1'; got {spec!r}"
        )
    provider, rest = spec.split(":", 1)
    if provider.lower() in _URL_SCHEMES:
        raise ConfigError(f"model spec {spec!r}: a server URL starts with '{provider.lower()}://', like 'http://127.0.0.1:8000/v1'")
    if provider not in MODEL_SPEC_PREFIXES:
        message = unknown_name_message("model spec prefix", provider, MODEL_SPEC_PREFIXES + _URL_SCHEMES)
        if rest[:1].isdigit():  # "localhost:8000/v1": a server missing its scheme
            message += f"; for a server write 'http://{spec}'"
        raise ConfigError(message)
    base_url = None
    if provider in ("vllm", "ollama") and "@" in rest:
        rest, base_url = rest.rsplit("@", 1)
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"{provider} spec {spec!r}: the part after '@' must be an http(s) URL; got {base_url!r}")
    if not rest:
        raise ConfigError(f"model spec {spec!r} names no model after '{provider}:'")
    if provider == "vllm" and base_url is None:
        raise ConfigError(f"vllm spec {spec!r} needs the server: 'vllm:<model>@http://host:8000/v1'")
    if provider == "ollama" and base_url is None:
        base_url = _OLLAMA_URL
    return ModelSpec(provider, rest, base_url)


@dataclass(frozen=True)
class PromptLogprobs(Result):
    """Log-probability of an existing completion under a model (prompt logprobs)."""

    logprob: float
    n_tokens: int
    tokens: list
    model: str

    def __str__(self) -> str:
        return f"logprob {self.logprob:.4f} over {self.n_tokens} tokens under {self.model}"


def _status_of(error: Exception) -> Any:
    return getattr(error, "status_code", None) or getattr(getattr(error, "response", None), "status_code", None)


# The tail of a first-contact BackendError: why it was not retried, and what to check.
_NEVER_ANSWERED = "the server has never answered this backend, so it is not retried: is it up and serving at this address?"


def _connection_reason(error: BaseException) -> str:
    """Why a connection failed, in a few words, from the OS error under the SDK's wrappers
    (the SDK itself only says "Connection error.")."""
    seen: BaseException | None = error
    for _ in range(10):  # the chain is SDK -> httpx -> httpcore -> OSError; bounded, never a cycle
        if seen is None:
            break
        if isinstance(seen, ConnectionRefusedError):
            return "connection refused"
        if isinstance(seen, socket.gaierror):
            return f"host name not found ({seen.strerror or seen})"
        if isinstance(seen, (ConnectionResetError, ConnectionAbortedError)):
            return "connection closed by the server before it replied"
        if isinstance(seen, OSError) and seen.strerror:
            return f"cannot connect ({seen.strerror})"
        seen = seen.__cause__ or seen.__context__
    return f"cannot connect ({error})"


def _retry_after(error: Exception) -> float | None:
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None) or {}
    value = headers.get("retry-after") if hasattr(headers, "get") else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class ModelAgent:
    """A chat-shaped agent backed by a model API. Build with :func:`model_agent`.

    Parameters
    ----------
    spec : str
        A model spec or bare server URL, parsed by :func:`parse_model_spec`.
    temperature : float or None, optional
        Sampling temperature in [0, 2]. Default None sends 1.0 (OpenAI's documented default)
        to OpenAI-compatible servers; for ``anthropic:`` None sends nothing (the provider's
        default applies and the row records None). A per-call ``temperature=`` overrides it.
    max_tokens : int, optional
        Reply budget per completion, a positive integer; default 512 (1.6 x the longest
        GPT-4o turn in tau-bench's airline trajectories). Replies that stop at it, and servers
        that ignore it, are counted on the row and warned about by the run. A per-call
        ``max_tokens=`` overrides it.
    top_p : float or None, optional
        Nucleus-sampling ``top_p``, sent (and recorded in ``sampling``) only when given;
        default None. Not range-checked here.
    timeout : float or None, optional
        Seconds per completion, > 0; default None uses :func:`default_timeout` of
        ``max_tokens``. A completion that exceeds it raises :class:`BackendError` with status
        ``"timeout"`` and is not retried.
    max_retries : int, optional
        Retries on HTTP 429, 5xx or a dropped connection, an integer in [0, 10]; default 3
        (the SDK's own retries are switched off).
    backoff : tuple of (float, float), optional
        ``(base_seconds, cap_seconds)`` with 0 <= base <= cap; default ``(0.5, 8.0)``. Retry
        ``attempt`` waits ``min(cap, base * 2**attempt)`` times a seeded jitter in [0.5, 1), or
        the server's ``Retry-After`` when longer (up to the cap).
    seed : int, optional
        Default 0. Sent as the request ``seed`` to OpenAI-compatible servers (not to
        Anthropic) and seeds the retry jitter.
    api_key : str or None, optional
        The API key; default None reads ``ANTHROPIC_API_KEY`` (``anthropic:``) or
        ``OPENAI_API_KEY`` (``openai:``), either missing raising :class:`ConfigError`;
        ``vllm:`` falls back to ``VLLM_API_KEY`` then the placeholder ``"EMPTY"``, a bare URL to
        ``OPENAI_API_KEY`` then ``"EMPTY"``, ``ollama:`` to ``"ollama"``.
    base_url : str or None, optional
        Server base URL overriding the spec's (``vllm:``/``ollama:``), ``OPENAI_BASE_URL``
        (``openai:``) or ``ANTHROPIC_BASE_URL`` (``anthropic:``); default None. For a bare-URL
        spec it must name the same server (trailing ``/`` aside), else :class:`ConfigError`.
    tool_choice : {"auto", "required", "none"} or None, optional
        Sent with every request that carries tools; default ``"auto"`` (OpenAI's documented
        default when tools are given, sent explicitly because llama-cpp-python's server
        treats a missing ``tool_choice`` as ``"none"`` and never calls a tool). vLLM answers
        ``"auto"`` with HTTP 400 unless started with ``--enable-auto-tool-choice`` (without it
        no tool call is parsed either). None sends nothing: the server's own default applies.
        Ignored for ``anthropic:``.
    prompt_template : {"chatml"} or None, optional
        How :meth:`prompt_logprobs` scores a chat when the server's chat endpoint returns no
        prompt log-probabilities (llama-cpp-python's does not): ``"chatml"`` renders the chat
        in ChatML (each message ``<|im_start|>`` role, newline, content, ``<|im_end|>``,
        newline: the template of SmolLM2, Qwen and others) and scores it through the completions endpoint with ``echo``. Default
        None refuses, naming the server's behaviour; the template must be the model's own or
        the scores are of a different prompt.
    response_format : {"json_object"}, mapping or None, optional
        Constrains the reply's shape on servers that support it. ``"json_object"`` sends
        ``{"type": "json_object"}`` (any JSON object; OpenAI, vLLM, llama.cpp). A mapping is
        sent as given, in the server's own dialect: OpenAI and vLLM take
        ``{"type": "json_schema", "json_schema": {"name": ..., "schema": ...}}``;
        llama-cpp-python 0.3 answers that with HTTP 500 and takes
        ``{"type": "json_object", "schema": ...}`` instead (both read off the servers' docs and,
        for llama.cpp, tests/real). Default None sends nothing. Refused for ``anthropic:`` (the
        Messages API has no such field).
    logprobs : bool or {"tokens"}, optional
        Default False. True or ``"tokens"`` (the two behave alike here) asks the server for
        log-probabilities on every completion and puts ``logprob``, ``n_tokens`` and
        ``tokens`` on the reply; when False, the rollout's turn context decides. Refused for
        ``anthropic:`` (the API returns none).

    Raises
    ------
    ConfigError
        For a bad spec, an out-of-range option, ``logprobs`` with ``anthropic:``, a missing
        OpenAI/Anthropic key, or a missing SDK package.
    """

    agent_shape = "chat"
    accepts_sampling = True  # __call__ takes temperature= / max_tokens= overrides (the user model uses them)

    def __init__(
        self,
        spec: str,
        *,
        temperature: float | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        top_p: float | None = None,
        timeout: float | None = None,
        max_retries: int = 3,
        backoff: tuple[float, float] = (0.5, 8.0),
        seed: int = 0,
        api_key: str | None = None,
        base_url: str | None = None,
        tool_choice: str | None = "auto",
        prompt_template: str | None = None,
        response_format: str | Mapping[str, Any] | None = None,
        logprobs: bool | str = False,
    ) -> None:
        self.spec = parse_model_spec(spec)
        self._model = self.spec.model  # None for a bare URL until resolve_model() asks the server
        self._model_lock = threading.Lock()
        self._temperature_given = temperature is not None
        self.temperature = DEFAULT_TEMPERATURE if temperature is None else temperature
        if isinstance(self.temperature, bool) or not isinstance(self.temperature, (int, float)) or not 0 <= self.temperature <= 2:
            raise ConfigError(f"temperature must be a number in [0, 2]; got {temperature!r}")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ConfigError(f"max_tokens must be a positive integer; got {max_tokens!r}")
        if timeout is None:
            timeout = default_timeout(max_tokens if isinstance(max_tokens, int) else DEFAULT_MAX_TOKENS)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ConfigError(f"timeout must be a number of seconds > 0; got {timeout!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or not 0 <= max_retries <= 10:
            raise ConfigError(f"max_retries must be an integer in [0, 10]; got {max_retries!r}")
        if len(backoff) != 2 or not 0 <= backoff[0] <= backoff[1]:
            raise ConfigError(f"backoff must be (base_seconds, cap_seconds) with 0 <= base <= cap; got {backoff!r}")
        if tool_choice not in ("auto", "required", "none", None):
            raise ConfigError(f"tool_choice must be 'auto', 'required', 'none' or None (send nothing); got {tool_choice!r}")
        if prompt_template not in (None, "chatml"):
            raise ConfigError(f"prompt_template must be None or 'chatml'; got {prompt_template!r}")
        if isinstance(response_format, Mapping):
            if not isinstance(response_format.get("type"), str):
                raise ConfigError(f"response_format: a mapping needs a 'type' string (the server's dialect); got {response_format!r:.120}")
            try:
                response_format = json.loads(json.dumps(response_format))  # a plain, private copy
            except (TypeError, ValueError) as error:
                raise ConfigError(f"response_format must be JSON (it is sent to the server): {error}") from None
        elif response_format not in (None, "json_object"):
            raise ConfigError(f"response_format must be None, 'json_object' or a mapping in the server's dialect; got {response_format!r}")
        if response_format is not None and self.spec.provider == "anthropic":
            raise ConfigError("response_format: the Anthropic Messages API has no response_format; use an openai:/vllm: spec or none")
        self.tool_choice = tool_choice
        self.prompt_template = prompt_template
        self.response_format = response_format
        if logprobs not in (False, True, "tokens"):
            raise ConfigError(f"logprobs must be False, True or 'tokens'; got {logprobs!r}")
        if logprobs and self.spec.provider == "anthropic":
            raise ConfigError("logprobs: the Anthropic Messages API returns no log-probabilities; use an openai:/vllm: spec")
        self.max_tokens = max_tokens
        self.top_p = top_p
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.backoff = (float(backoff[0]), float(backoff[1]))
        self.seed = seed
        self.logprobs = logprobs
        self.retries_made = 0
        # Set by the first HTTP response of any status: until then a connection failure means
        # the server is not there (not retried); after it, a live server's transient error.
        self.server_answered = False
        self._server_identity: dict | None = None  # software / version, asked once (server_info)
        self._client = self._make_client(api_key, base_url)

    def _make_client(self, api_key: str | None, base_url: str | None) -> Any:
        provider = self.spec.provider
        if provider == "anthropic":
            anthropic = _sdk("anthropic")
            key = api_key or os.environ.get("ANTHROPIC_API_KEY")
            if not key:
                raise ConfigError("anthropic: no API key; set the ANTHROPIC_API_KEY environment variable or pass api_key=")
            return anthropic.Anthropic(api_key=key, base_url=base_url or os.environ.get("ANTHROPIC_BASE_URL") or None, max_retries=0, timeout=self.timeout)
        openai = _sdk("openai")
        url = base_url or self.spec.base_url
        if provider == "openai":
            key = api_key or os.environ.get("OPENAI_API_KEY")
            if not key:
                raise ConfigError("openai: no API key; set the OPENAI_API_KEY environment variable or pass api_key=")
            url = url or os.environ.get("OPENAI_BASE_URL") or None
        elif provider == "vllm":
            key = api_key or os.environ.get("VLLM_API_KEY") or _PLACEHOLDER_KEY  # vLLM ignores it unless started with --api-key
        elif provider == _URL_PROVIDER:
            if base_url is not None and base_url.rstrip("/") != self.spec.base_url:
                raise ConfigError(f"base_url={base_url!r} contradicts the server the spec names ({self.spec.base_url}); pass one")
            key = api_key or os.environ.get("OPENAI_API_KEY") or _PLACEHOLDER_KEY
        else:
            key = api_key or "ollama"  # Ollama ignores the key; the SDK needs one
        return openai.OpenAI(api_key=key, base_url=url, max_retries=0, timeout=self.timeout)

    def __repr__(self) -> str:
        return f"model_agent({str(self.spec)!r}, temperature={self.temperature:g}, max_tokens={self.max_tokens})"

    # -- the model -----------------------------------------------------------------------

    @property
    def model(self) -> str:
        """The model id requests name. For a bare-URL spec: the server's first listed id once
        :meth:`resolve_model` has run (the first call runs it), the URL before that, so a row
        lost before any reply still names the server; reading it never makes a request."""
        return self._model if self._model is not None else str(self.spec.base_url)

    def resolve_model(self) -> str:
        """The model id, asking a bare-URL server ``GET <url>/models`` the first time (once per
        agent, thread-safe) and taking the first id listed. Raises :class:`BackendError`
        naming the URL when the server cannot be reached or lists no model; a failed attempt
        is not remembered, so a server still loading its weights is asked again next call."""
        if self._model is None:
            with self._model_lock:
                if self._model is None:
                    self._model = self._first_listed_model()
        return self._model

    def resolved_spec(self) -> str:
        """The spec with its model pinned: ``vllm:<model>@<url>`` for a bare URL (resolving it
        if needed; the same server and model, keyed by ``VLLM_API_KEY`` instead of
        ``OPENAI_API_KEY``), the spec itself otherwise."""
        if self.spec.provider == _URL_PROVIDER:
            return str(ModelSpec("vllm", self.resolve_model(), self.spec.base_url))
        return str(self.spec)

    def _first_listed_model(self) -> str:
        url = self.spec.base_url
        try:
            listing = self._with_retries(lambda: self._client.models.list())
        except BackendError as error:
            # our own first-contact message says why in words; the SDK's cause only "Connection error."
            why: Any = error.__cause__ or error
            if error.first_contact:
                why = str(error).removeprefix(f"{self._where()}: ").removesuffix(f"; {_NEVER_ANSWERED}")
            raise BackendError(
                f"{url}: cannot list the served models at GET {url}/models ({error.status} after {error.retries} retries: "
                f"{why}); {'the server has never answered: ' if error.first_contact else ''}is an OpenAI-compatible server "
                f"running there? To skip the listing name the model: 'vllm:<model>@{url}'",
                error.status, error.retries, first_contact=error.first_contact,
            ) from error
        ids = [item.id for item in (getattr(listing, "data", None) or []) if getattr(item, "id", None)]
        if not ids:
            raise BackendError(
                f"{url}: the server lists no models at GET {url}/models, so a bare-URL spec has no model to use; "
                f"name one with 'vllm:<model>@{url}'",
                "no_models",
            )
        return str(ids[0])

    @property
    def sampling(self) -> dict:
        temperature = self.temperature
        if self.spec.provider == "anthropic" and not self._temperature_given:
            temperature = None  # not sent: the provider's default applies
        out = {"temperature": temperature, "max_tokens": self.max_tokens, "model": self.model}
        if self.top_p is not None:
            out["top_p"] = self.top_p
        return out

    # -- the server ------------------------------------------------------------------------

    def server_info(self, response: Any = None) -> dict:
        """What the row records about the server: ``url`` (credentials and query removed),
        ``model`` (as the reply named it), and for a self-hosted server (``vllm:``,
        ``ollama:``, a bare URL) ``software`` and ``version`` as it states them, asked once per
        agent after its first completion: vLLM's ``GET /version``, Ollama's ``GET
        /api/version``, else the ``info`` of the FastAPI ``GET /openapi.json`` that
        llama-cpp-python's server publishes (title "llama.cpp Python API", version the
        package's). A server that states none records ``version: None``. The OpenAI API's
        ``system_fingerprint`` is recorded as ``fingerprint`` when a reply carries one."""
        model = getattr(response, "model", None) or self.model
        info: dict[str, Any] = {"url": _public_url(self.server_url), "model": model}
        if self.spec.provider in ("vllm", "ollama", _URL_PROVIDER):
            with self._model_lock:
                if self._server_identity is None:
                    self._server_identity = _probe_identity(self.server_url, self.spec.provider, getattr(self._client, "api_key", None))
            info.update(self._server_identity)
        fingerprint = getattr(response, "system_fingerprint", None)
        if isinstance(fingerprint, str) and fingerprint:
            info["fingerprint"] = fingerprint
        return info

    # -- retries -------------------------------------------------------------------------

    @property
    def server_url(self) -> str:
        """The base URL requests go to (the spec's, ``base_url=``, or the SDK's default)."""
        return str(getattr(self._client, "base_url", None) or self.spec.base_url or "").rstrip("/")

    def _where(self) -> str:
        """The spec and, when the spec does not show it, the server URL: errors name both."""
        url = self.server_url
        return str(self.spec) if not url or url in str(self.spec) else f"{self.spec} at {url}"

    def _with_retries(self, send: Any) -> Any:
        sdk = _sdk("anthropic" if self.spec.provider == "anthropic" else "openai")
        attempt = 0
        while True:
            try:
                result = send()
            except sdk.APITimeoutError as error:
                if not self.server_answered:
                    raise BackendError(
                        f"{self._where()}: no reply within {self.timeout:g} s; {_NEVER_ANSWERED}", "timeout", attempt, first_contact=True,
                    ) from error
                raise BackendError(f"{self._where()}: no reply within {self.timeout:g} s (not retried)", "timeout", attempt) from error
            except (sdk.APIConnectionError, sdk.RateLimitError, sdk.InternalServerError, sdk.APIStatusError) as error:
                status = _status_of(error)
                if status is not None:
                    self.server_answered = True  # an error status is still an answer: the server is there
                elif not self.server_answered:
                    raise BackendError(
                        f"{self._where()}: {_connection_reason(error)}; {_NEVER_ANSWERED}", "connection", attempt, first_contact=True,
                    ) from error
                retryable = isinstance(error, sdk.APIConnectionError) or status == 429 or (isinstance(status, int) and status >= 500)
                if not retryable or attempt >= self.max_retries:
                    label = status if status is not None else "connection"
                    raise BackendError(f"{self.spec}: request failed with {label} after {attempt} retries: {error}", label, attempt) from error
                base, cap = self.backoff
                delay = min(cap, base * 2**attempt) * (0.5 + 0.5 * stable_uniform(self.seed, str(self.spec), attempt, "backoff"))
                hinted = _retry_after(error)
                if hinted is not None:
                    delay = min(cap, max(delay, hinted))
                time.sleep(delay)
                attempt += 1
                self.retries_made += 1
            else:
                self.server_answered = True
                return result

    # -- one completion ------------------------------------------------------------------

    def __call__(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None, *, temperature: float | None = None, max_tokens: int | None = None) -> dict:
        self.resolve_model()  # a bare URL learns its model here, before the first completion
        context = current_turn()
        logprobs = self.logprobs or (context.logprobs if context else False)
        temperature = self.temperature if temperature is None else temperature
        max_tokens = self.max_tokens if max_tokens is None else max_tokens
        if self.spec.provider == "anthropic":
            return self._call_anthropic(messages, tools, temperature, max_tokens)
        return self._call_openai(messages, tools, temperature, max_tokens, logprobs)

    def _call_openai(self, messages: Any, tools: Any, temperature: float, max_tokens: int, logprobs: Any) -> dict:
        request: dict[str, Any] = {
            "model": self.model,
            "messages": [_openai_message(m) for m in messages],
            "temperature": temperature,
            "max_tokens": max_tokens,
            "seed": self.seed,
        }
        if self.top_p is not None:
            request["top_p"] = self.top_p
        if tools:
            request["tools"] = [_openai_tool(t) for t in tools]
            if self.tool_choice is not None:
                request["tool_choice"] = self.tool_choice
        if self.response_format is not None:
            shape = self.response_format
            request["response_format"] = {"type": shape} if isinstance(shape, str) else json.loads(json.dumps(shape))
        if logprobs:
            request["logprobs"] = True
            # OpenAI and vLLM return the sampled tokens' logprobs for logprobs=True alone;
            # llama.cpp's server (llama-cpp-python 0.3) returns "logprobs": null unless
            # top_logprobs is sent too. 0 asks for no alternatives: only the sampled token.
            request["top_logprobs"] = 0
        response = self._with_retries(lambda: self._client.chat.completions.create(**request))
        if not response.choices:
            raise BackendError(f"{self.spec}: the server returned no choices")
        choice = response.choices[0]
        message = choice.message
        reply: dict[str, Any] = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            reply["tool_calls"] = [
                {"id": call.id, "type": "function", "function": {"name": call.function.name, "arguments": call.function.arguments}}
                for call in message.tool_calls
            ]
        reply["finish_reason"] = choice.finish_reason
        reply["truncated"] = choice.finish_reason == "length"
        reply["model"] = response.model or self.model
        reply["sampling"] = dict(self.sampling, temperature=temperature, max_tokens=max_tokens, model=reply["model"], seed=self.seed)
        if response.usage is not None:
            reply["usage"] = {"input_tokens": response.usage.prompt_tokens, "output_tokens": response.usage.completion_tokens}
            output = response.usage.completion_tokens
            if isinstance(output, int) and output > max_tokens:
                # the server did not apply the budget (llama-cpp-python's function-calling
                # chat handler generates tool arguments and text after a tool choice with no
                # limit); the rollout counts these turns and the run warns
                reply["over_budget"] = True
        content_logprobs = getattr(getattr(choice, "logprobs", None), "content", None)
        tokens = [{"token": t.token, "logprob": float(t.logprob)} for t in content_logprobs or []]
        if tokens and isinstance(message.content, str) and not message.tool_calls:
            # the bytes of each token (OpenAI and vLLM send them): a character split across
            # tokens is spelled by their bytes, not by their strings
            raw = [getattr(t, "bytes", None) for t in content_logprobs]
            tokens = _spelling(tokens, message.content, raw if all(isinstance(b, list) for b in raw) else None)
            if tokens is None:
                spelled = "".join(t.token for t in content_logprobs)
                at = _first_difference(spelled, message.content)
                reply["logprob_missing"] = (
                    f"the server's log-probabilities spell {spelled[at:at + 40]!r} where the reply text has "
                    f"{message.content[at:at + 40]!r} (character {at}), so no sum of them is the reply's log-probability "
                    "(llama-cpp-python, for one, scores a stop string it then removes from the reply)"
                )
        if logprobs and tokens:
            reply["tokens"] = tokens
            reply["logprob"] = math.fsum(t["logprob"] for t in tokens)
            reply["n_tokens"] = len(tokens)
        elif logprobs and "logprob_missing" not in reply:
            reply["logprob_missing"] = (
                "the server sent no log-probabilities on a turn that called a tool" if message.tool_calls
                else "the server sent no log-probabilities (logprobs: null)"
            )  # fmt: skip
        reply["server"] = self.server_info(response)
        return reply

    def _call_anthropic(self, messages: Any, tools: Any, temperature: float, max_tokens: int) -> dict:
        system, converted = _anthropic_messages(messages)
        request: dict[str, Any] = {"model": self.model, "messages": converted, "max_tokens": max_tokens}
        # This SDK line (anthropic 2.x) no longer takes sampling keywords; an explicit choice
        # travels in the body, and when none was made the row records None (provider default).
        extra = {}
        if self._temperature_given or temperature != self.temperature:
            extra["temperature"] = temperature
        if self.top_p is not None:
            extra["top_p"] = self.top_p
        if extra:
            request["extra_body"] = extra
        if system:
            request["system"] = system
        if tools:
            request["tools"] = [_anthropic_tool(t) for t in tools]
        response = self._with_retries(lambda: self._client.messages.create(**request))
        texts = []
        calls = []
        for block in response.content:
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "tool_use":
                calls.append({"id": block.id, "type": "function", "function": {"name": block.name, "arguments": json.dumps(block.input)}})
        reply: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
        if calls:
            reply["tool_calls"] = calls
        reply["finish_reason"] = response.stop_reason
        reply["truncated"] = response.stop_reason == "max_tokens"
        reply["model"] = response.model or self.model
        reply["sampling"] = dict(self.sampling, temperature=extra.get("temperature"), max_tokens=max_tokens, model=reply["model"])
        if response.usage is not None:
            reply["usage"] = {"input_tokens": response.usage.input_tokens, "output_tokens": response.usage.output_tokens}
        reply["server"] = self.server_info(response)
        return reply

    # -- scoring existing text -------------------------------------------------------------

    def _echo_logprobs(self, prompt: str, completion: str) -> PromptLogprobs:
        """Score ``completion`` after ``prompt`` through the completions endpoint with echo.

        The completion's tokens are found from the end of the echoed token list, not by
        ``text_offset``: llama-cpp-python echoes special tokens (``<|im_start|>``) as empty
        strings or not at all, counts offsets without them, and lists the one generated token
        only sometimes, so offsets into our prompt do not line up there. Tokens that spell the
        generated text are dropped from the end, then tokens are taken back to front until
        they spell the completion exactly; a token that straddles the prompt / completion
        boundary is refused, naming the fix."""
        text = prompt + completion
        response = self._with_retries(
            lambda: self._client.completions.create(model=self.model, prompt=text, max_tokens=1, echo=True, logprobs=0, temperature=0)
        )
        scored = response.choices[0].logprobs
        if scored is None or not scored.tokens:
            raise BackendError(f"{self.spec}: the server returned no prompt logprobs for echo=True")
        tokens, values = list(scored.tokens), list(scored.token_logprobs)
        if _LLAMA_CPP_PYTHON in str(self.server_info(response).get("software") or "") and tokens[0] and text.startswith(tokens[0]):
            # Measured against the model's own logits (docs/design/real_servers.md): this
            # server's echo treats the first prompt token as a BOS it skips, so when the
            # prompt does not start with one every value belongs to the next position.
            raise BackendError(
                f"{self.spec}: llama-cpp-python's echo logprobs are shifted by one token unless the prompt starts with the "
                "model's BOS token (for SmolLM2 and other ChatML models whose BOS is <|im_start|>, a ChatML prompt does: "
                "prompt_template='chatml'); these would not be the completion's log-probabilities"
            )
        echoed = response.choices[0].text or ""
        generated = echoed[len(text) :] if echoed.startswith(text) else ""
        tail = ""
        while generated and tokens and len(tail) < len(generated) and generated.endswith(tokens[-1] + tail):
            tail = tokens.pop() + tail
            values.pop()
        picked: list[tuple[str, Any]] = []
        spelled = ""
        while tokens and len(spelled) < len(completion):
            token = tokens.pop()
            picked.insert(0, (token, values.pop()))
            spelled = token + spelled
        if spelled != completion:
            if completion.endswith(spelled[len(spelled) - len(completion) :]) and len(spelled) > len(completion):
                raise BackendError(
                    f"{self.spec}: the completion's first token merges with the prompt's last one when tokenized together "
                    f"(token {picked[0][0]!r}); score it from a token boundary (end the prompt with a newline or a space)"
                )
            at = _first_difference(spelled[::-1], completion[::-1])
            raise BackendError(
                f"{self.spec}: the echoed tokens do not spell the completion: {at} characters from its end they read "
                f"{spelled[::-1][at:at + 40][::-1]!r} where it has {completion[::-1][at:at + 40][::-1]!r}"
            )
        out = []
        for token, logprob in picked:
            if logprob is None:
                raise BackendError(f"{self.spec}: token {token!r} of the completion has no logprob")
            out.append({"token": token, "logprob": float(logprob)})
        return PromptLogprobs(math.fsum(t["logprob"] for t in out), len(out), out, response.model or self.model)

    def prompt_logprobs(self, messages: str | Sequence[Mapping[str, Any]], completion: str) -> PromptLogprobs:
        """log P(completion | messages) under this model, from the server's prompt logprobs.

        ``messages`` a string: the completions endpoint with ``echo=True`` and ``logprobs``
        (tokens whose ``text_offset`` falls inside the completion). ``messages`` a chat list:
        vLLM's chat endpoint with ``prompt_logprobs`` and ``continue_final_message`` on the
        conversation plus the completion as the final assistant message; the completion's
        tokens are those after the prefix (the prefix length comes from a second request
        without the completion). OpenAI's hosted API returns no prompt logprobs; the error
        says so.
        """
        if self.spec.provider == "anthropic":
            raise ConfigError("prompt_logprobs: the Anthropic API returns no log-probabilities; use a vllm: spec")
        if not isinstance(completion, str) or not completion:
            raise ConfigError("prompt_logprobs: completion must be a non-empty string")
        self.resolve_model()
        if isinstance(messages, str):
            return self._echo_logprobs(messages, completion)
        chat = [_openai_message(m) for m in messages]
        if self.prompt_template == "chatml":
            # ChatML: each message "<|im_start|>{role}\n{content}<|im_end|>\n"; the assistant
            # turn opens with "<|im_start|>assistant\n" and the completion is its content
            prefix_text = "".join(f"<|im_start|>{m.get('role')}\n{_chatml_content(m)}<|im_end|>\n" for m in chat)
            return self.prompt_logprobs(prefix_text + "<|im_start|>assistant\n", completion)
        full = chat + [{"role": "assistant", "content": completion}]
        scored = self._with_retries(
            lambda: self._client.chat.completions.create(
                model=self.model, messages=full, max_tokens=1, temperature=0,
                extra_body={"prompt_logprobs": 0, "add_generation_prompt": False, "continue_final_message": True, "echo": False},
            )
        )  # fmt: skip
        prefix = self._with_retries(
            lambda: self._client.chat.completions.create(
                model=self.model, messages=chat, max_tokens=1, temperature=0, extra_body={"add_generation_prompt": True}
            )
        )
        entries = (scored.model_extra or {}).get("prompt_logprobs")
        if not entries:
            raise BackendError(
                f"{self.spec}: the server returned no prompt_logprobs for a chat (vLLM's OpenAI-compatible server does; OpenAI's "
                "hosted API and llama-cpp-python's server do not). For a server whose completions endpoint takes echo (llama.cpp) "
                "and a ChatML model, pass prompt_template='chatml'; or score a rendered prompt string: prompt_logprobs(text, completion)"
            )
        n_prefix = prefix.usage.prompt_tokens if prefix.usage is not None else None
        if n_prefix is None or n_prefix > len(entries):
            raise BackendError(f"{self.spec}: cannot locate the completion among the prompt tokens (prefix {n_prefix}, total {len(entries)})")
        tokens = []
        for entry in entries[n_prefix:]:
            if not entry:
                continue
            info = next(iter(entry.values()))
            tokens.append({"token": info.get("decoded_token"), "logprob": float(info["logprob"])})
        return PromptLogprobs(math.fsum(t["logprob"] for t in tokens), len(tokens), tokens, scored.model or self.model)


def _public_url(url: str) -> str:
    """``url`` without user info, query or fragment: a row may be shared, a key in a URL not."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return f"{parts.scheme}://{host}{parts.path}".rstrip("/") if parts.scheme else url


def _get_json(url: str, key: str | None, deadline: float) -> Any:
    """GET ``url`` as JSON, giving up (TimeoutError) at ``deadline`` (time.monotonic)."""
    # the key the API calls carry (a server started with one may guard every route)
    headers = {"accept": "application/json", **({"authorization": f"Bearer {key}"} if key else {})}
    request = urllib.request.Request(url, headers=headers)
    timeout = min(_VERSION_PROBE_SECONDS, deadline - time.monotonic())
    if timeout <= 0:
        raise TimeoutError(f"no time left to ask {url}")
    with urllib.request.urlopen(request, timeout=timeout) as reply:  # noqa: S310 -- the user's own server
        body = b""
        # chunk by chunk, so a slow trickle meets the deadline instead of the socket timeout
        # resetting on every byte
        while len(body) < _VERSION_PROBE_BYTES:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} answered too slowly")
            chunk = reply.read1(65536)
            if not chunk:
                break
            body += chunk
        return json.loads(body[:_VERSION_PROBE_BYTES] or b"null")


def _probe_identity(base_url: str, provider: str, key: str | None) -> dict:
    """``{"software", "version"}`` as a self-hosted server states them; None where it states
    none or cannot be asked within :data:`_VERSION_PROBE_TOTAL_SECONDS`. Never raises: the run
    must not depend on it."""
    deadline = time.monotonic() + _VERSION_PROBE_TOTAL_SECONDS
    parts = urlsplit(base_url)
    origin = f"{parts.scheme}://{parts.netloc}"
    root = base_url[: -len("/v1")] if base_url.endswith("/v1") else base_url
    attempts = [("Ollama", f"{origin}/api/version")] if provider == "ollama" else [("vLLM", f"{origin}/version")]
    for software, url in attempts:
        try:
            body = _get_json(url, key, deadline)
        except (OSError, ValueError):
            continue
        if isinstance(body, Mapping) and isinstance(body.get("version"), str):
            return {"software": software, "version": body["version"]}
    try:
        body = _get_json(f"{root}/openapi.json", key, deadline)
    except (OSError, ValueError):
        body = None
    info = body.get("info") if isinstance(body, Mapping) else None
    if isinstance(info, Mapping) and isinstance(info.get("version"), str):
        return {"software": str(info.get("title") or "unknown"), "version": info["version"]}
    return {"software": None, "version": None}


def _first_difference(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def _spelling(tokens: list[dict], text: str, raw: list[list[int]] | None = None) -> list[dict] | None:
    """The leading tokens that spell ``text`` exactly: all of them when they do, fewer when
    the server scored more than it returned (a stop string it cut off), None when no prefix
    of them spells it (the logprobs are of some other text, and no sum of them is the
    reply's). With ``raw`` (each token's bytes, as OpenAI and vLLM send them) the tokens are
    also matched byte by byte, so a character split across two tokens (their strings are
    each a replacement character) still spells the text."""
    spelled = ""
    for position, token in enumerate(tokens):
        if spelled == text:
            return tokens[:position] or None
        spelled += token["token"]
        if len(spelled) > len(text):
            break
    else:
        if spelled == text:
            return tokens
    if raw is None:
        return None
    want, have = text.encode("utf-8"), b""
    for position, piece in enumerate(raw):
        if have == want:
            return tokens[:position] or None
        have += bytes(piece)
        if len(have) > len(want):
            return None
    return tokens if have == want else None


def _chatml_content(message: Mapping[str, Any]) -> str:
    """A message's text for ChatML: its content, then its tool calls as a JSON list of their
    ``function`` objects, the rendering :func:`toolkit.reference_logprobs` scores an
    assistant turn in (so a context turn and a scored turn read alike)."""
    text = message.get("content") or ""
    if not isinstance(text, str):
        text = json.dumps(text, ensure_ascii=False)
    calls = message.get("tool_calls") or []
    if calls:
        text += json.dumps([dict(c.get("function", c)) for c in calls], ensure_ascii=False)
    return text


def _openai_message(message: Mapping[str, Any]) -> dict:
    out = {key: value for key, value in message.items() if key in ("role", "content", "tool_calls", "tool_call_id", "name")}
    if out.get("role") == "assistant" and not out.get("tool_calls"):
        out.pop("tool_calls", None)
    if out.get("role") == "assistant" and out.get("content") is None:
        # OpenAI takes null content beside tool calls; llama-cpp-python's server refuses it
        # (a 500 from its request validation: "Input should be a valid string"). "" means
        # the same to both.
        out["content"] = ""
    return out


def _openai_tool(tool: Mapping[str, Any]) -> dict:
    if tool.get("type") == "function" and "function" in tool:
        function = {k: v for k, v in tool["function"].items() if k in ("name", "description", "parameters")}
    else:
        function = {"name": tool["name"], "description": tool.get("description", ""), "parameters": tool.get("parameters") or tool.get("input_schema") or {"type": "object", "properties": {}}}
    return {"type": "function", "function": function}


def _anthropic_tool(tool: Mapping[str, Any]) -> dict:
    function = _openai_tool(tool)["function"]
    return {"name": function["name"], "description": function.get("description", ""), "input_schema": function.get("parameters") or {"type": "object", "properties": {}}}


def _anthropic_messages(messages: Sequence[Mapping[str, Any]]) -> tuple[str, list[dict]]:
    """OpenAI-style messages -> (system text, Anthropic messages); tool results ride as user turns."""
    system = []
    out: list[dict] = []
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        if role == "system":
            system.append(content or "")
        elif role == "user":
            out.append({"role": "user", "content": [{"type": "text", "text": content or ""}]})
        elif role == "assistant":
            blocks: list[dict] = []
            if content:
                blocks.append({"type": "text", "text": content})
            for call in message.get("tool_calls") or []:
                arguments = call["function"].get("arguments") or "{}"
                blocks.append({"type": "tool_use", "id": call["id"], "name": call["function"]["name"], "input": json.loads(arguments) if isinstance(arguments, str) else arguments})
            out.append({"role": "assistant", "content": blocks or [{"type": "text", "text": ""}]})
        elif role == "tool":
            block = {"type": "tool_result", "tool_use_id": message.get("tool_call_id"), "content": content if isinstance(content, str) else json.dumps(content)}
            if out and out[-1]["role"] == "user" and all(b.get("type") == "tool_result" for b in out[-1]["content"]):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
    return "\n\n".join(system), out


def model_agent(spec: str, **options: Any) -> ModelAgent:
    """A chat-shaped agent for a model spec or a bare OpenAI-compatible server URL. See the module docstring.

    Parameters
    ----------
    spec : str
        A model spec (``openai:``, ``vllm:``, ``ollama:``, ``anthropic:``) or a bare
        ``http(s)://`` server URL; see :func:`parse_model_spec`.
    **options
        Keyword options of :class:`ModelAgent`, where each is described: temperature (default
        None, which sends 1.0 except to Anthropic), max_tokens (512), top_p (None), timeout
        (seconds per completion; default :func:`default_timeout`), max_retries (3), backoff
        ((0.5, 8.0) s), seed (0), api_key, base_url, tool_choice ("auto"), prompt_template (None),
        response_format (None | "json_object" | a mapping), logprobs (False | True | "tokens"). An unknown
        name raises TypeError.

    Returns
    -------
    ModelAgent
        The chat-shaped agent ``agent(messages, tools) -> assistant message``.
    """
    return ModelAgent(spec, **options)
