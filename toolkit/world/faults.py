"""Built-in fault payloads of the sandbox world (private; the public names live in sandbox.py).

Each builder takes a :class:`FaultCall` and returns the result dict the agent sees. They
differ on purpose the way real APIs differ: a timeout carries no data, a rate limit says
when to retry, a server error carries a request id, a malformed answer is a truncated JSON
body under status "ok", a stale answer is the real record plus an ``as_of`` that says it is
old. Whatever the payload looks like, the world ledger records the fault, so detection never
reads these texts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolkit._util.hashing import canonical_json, stable_hash, stable_uniform

__all__ = ["FaultCall", "BUILTIN_BUILDERS", "FAULT_MODES"]


@dataclass(frozen=True)
class FaultCall:
    """What a fault builder is told about the call it breaks.

    ``payload`` is what the world would have answered without the fault (computed with no
    side effects: nothing is created, deleted or remembered), so a builder can degrade the
    real answer (``stale`` does) instead of inventing one.
    """

    tool: str
    arguments: dict[str, Any]
    call_index: int
    mode: str
    seed: int
    payload: dict[str, Any] = field(default_factory=dict)
    timeout_seconds: float = 30.0
    retry_after_seconds: float = 20.0
    stale_as_of: str = "3 days ago"
    # The version of the record before this world's last change to it (None if unchanged):
    # what a lagging replica would still serve.
    previous: dict[str, Any] | None = None


def _timeout(call: FaultCall) -> dict[str, Any]:
    return {
        "status": "timeout",
        "error": f"request to {call.tool} timed out after {call.timeout_seconds:g} s",
    }


def _malformed(call: FaultCall) -> dict[str, Any]:
    # A body cut mid-stream is the malformed answer seen most in practice (proxies and
    # streaming gateways truncate); the cut falls between 30% and 70% of the text so some
    # of the real content is visible and tempting to use.
    text = canonical_json(call.payload)
    share = 0.3 + 0.4 * stable_uniform("malformed-cut", call.seed, call.tool, call.arguments, call.call_index)
    cut = max(1, int(len(text) * share))
    return {"status": "ok", "data": text[:cut] + "\ufffd\ufffd"}


def _stale(call: FaultCall) -> dict[str, Any]:
    result = dict(call.payload) if call.payload else {"status": "ok"}
    if call.previous is not None and "record" in result:
        # A record this rollout already changed: the stale answer is the old version, the
        # case that matters (the agent "confirms" a change the answer does not show).
        result["record"] = dict(call.previous)
    result["stale"] = True
    result["as_of"] = call.stale_as_of
    return result


def _permission_denied(call: FaultCall) -> dict[str, Any]:
    return {
        "status": "permission_denied",
        "error": f"the service account is not allowed to call {call.tool}",
        "required_scope": f"{call.tool}:execute",
    }


def _rate_limited(call: FaultCall) -> dict[str, Any]:
    return {
        "status": "rate_limited",
        "error": "too many requests",
        "code": 429,
        "retry_after_seconds": call.retry_after_seconds,
    }


def _server_error(call: FaultCall) -> dict[str, Any]:
    return {
        "status": "error",
        "error": "internal server error",
        "code": 500,
        "request_id": "req_" + stable_hash(["request", call.seed, call.tool, call.arguments, call.call_index], 12),
    }


BUILTIN_BUILDERS = {
    "timeout": _timeout,
    "malformed": _malformed,
    "stale": _stale,
    "permission_denied": _permission_denied,
    "rate_limited": _rate_limited,
    "server_error": _server_error,
}

#: The built-in fault modes, in the order situation axes list them.
FAULT_MODES = tuple(BUILTIN_BUILDERS)
