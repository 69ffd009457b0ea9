"""The score cache: one JSON file per (scorer, rubric, judge, case) key, behind a lock file.

Modes (``scorer.cache_mode``), each with a distinct behaviour:

============ ============================= ==========================================
mode         reads stored scores            writes new scores
============ ============================= ==========================================
``on``       yes                            yes (takes the lock)
``off``      no                             no
``read_only``yes                            no (no lock: entries are replaced
                                            atomically, so a reader never sees half)
``refresh``  no (recomputes every case)     yes, overwriting (takes the lock)
``auto``     resolves to ``on`` when a CI variable is truthy (CI, GITHUB_ACTIONS,
             GITLAB_CI, BUILDKITE, JENKINS_URL; truthy = non-empty and not "false"/"0"),
             with an info finding ``cache_mode_inferred``; otherwise to ``off`` so that an
             interactive session always sees fresh scores.
============ ============================= ==========================================

Key: SHA-256 of the canonical JSON of the key components (cache key version, scorer
adapter, score-function reference and a hash of its source code, judge provider, model id
and snapshot, rubric id, a hash of the rubric text, a hash of the scoring parameters, and the
case: trace id, which output, a hash of the input, of the output text, of the recorded
tool calls and of the trace metadata the score function sees). Any change is a miss. File names hold hex only, never user text.

Lock: ``<root>/.lock`` held with ``fcntl.flock`` (exclusive, non-blocking) for a writing run;
its content records pid, host and start time. A lock held by another live process makes the
run Inconclusive with finding ``cache_lock_unavailable`` (the kernel drops a dead process's
flock, so there is no stale-lock takeover to get wrong). An entry that does not parse or lacks
its fields makes the run Inconclusive with ``cache_corruption_detected`` naming the file.
Writes go to a temp file and ``os.replace`` (the reference wrote in place).

Content hash: every entry (``whatif-cache-entry/2``) stores ``content_sha256``, the SHA-256 of
the canonical JSON of its key, score and rationale (:func:`entry_content_hash`). A read
recomputes it; a missing or different hash is corruption (reason "content hash mismatch"),
never a hit, so a score edited by hand in a well-formed file cannot reach a verdict. Entries
written before the hash existed (``whatif-cache-entry/1``) are corruption too, with a message
saying so; ``cache_mode: refresh`` never reads entries, so it rewrites them (with hashes)
instead of halting. The hash detects edits and bit rot, not an adversary: whoever can write
the cache directory can also recompute a plain SHA-256 (there is no secret to key an HMAC
with). The stored ``components`` are not covered: they are informational and never read back
(the file name is the key, and the key is checked).

Rationales: an entry stores the scorer's rationale only when the run's reporting profile
shows rationales (``review``, ``forensic``); under ``minimal`` and ``default`` it stores
``rationale: null`` with ``rationale_withheld: true``, which a run that shows rationales
treats as a miss (it rescores and rewrites the entry).

A cache directory that cannot be created or locked (a read-only or missing parent) is a
setup failure (:class:`toolkit.whatif.SetupError`, exit 2, no traceback) raised before any
replay. A single entry that cannot be written later (disk full) does not stop the run: the
score is kept, the failure is counted (``write_errors``) and disclosed as the finding
``cache_write_failed``.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
from pathlib import Path
from typing import Any

from toolkit._util.hashing import canonical_json, sha256_hex
from toolkit._util.lockfile import HeldLock, holder_record, release_lock, take_lock
from toolkit.whatif.sources import SetupError

__all__ = ["ScoreCache", "CacheLockUnavailable", "CacheCorruption", "resolve_cache_mode", "entry_content_hash",
           "CACHE_KEY_VERSION", "CACHE_SCHEMA_VERSION"]

CACHE_KEY_VERSION = "whatif-cache-key/1"
CACHE_SCHEMA_VERSION = "whatif-cache-entry/2"  # /2 added content_sha256
_OLDER_SCHEMA_VERSIONS = ("whatif-cache-entry/1",)
_HASH_MISMATCH = "content hash mismatch"
_REMEDY = "delete the cache dir or use cache_mode: refresh"
_CI_VARIABLES = ("CI", "GITHUB_ACTIONS", "GITLAB_CI", "BUILDKITE", "JENKINS_URL")


class CacheLockUnavailable(Exception):
    def __init__(self, lock_path: str, holder: dict):
        super().__init__(f"score cache lock {lock_path} is held by another run ({holder or 'unknown holder'})")
        self.lock_path, self.holder = lock_path, holder


class CacheCorruption(Exception):
    def __init__(self, entry_path: str, reason: str):
        super().__init__(f"score cache entry {entry_path} is corrupt: {reason}")
        self.entry_path, self.reason = entry_path, reason


def entry_content_hash(key: str, score: float, rationale: str | None) -> str:
    """SHA-256 of the canonical JSON of what a cache hit hands back: key, score, rationale.

    Parameters
    ----------
    key : str
        The entry's cache key (:meth:`ScoreCache.key`).
    score : float
        The stored score; taken as ``float`` so an integer 1 and 1.0 hash alike.
    rationale : str or None
        The stored rationale.

    Returns
    -------
    str
        64 hex characters.
    """
    payload = {"cache_schema_version": CACHE_SCHEMA_VERSION, "key": key, "score": float(score), "rationale": rationale}
    return sha256_hex(canonical_json(payload))


def resolve_cache_mode(mode: str, environ=None) -> tuple[str, str | None]:
    """``(resolved_mode, env_signal)``; env_signal names the CI variable that decided ``auto``."""
    if mode != "auto":
        return mode, None
    environ = os.environ if environ is None else environ
    for name in _CI_VARIABLES:
        value = str(environ.get(name, "")).strip().lower()
        if value and value not in ("false", "0"):
            return "on", name
    return "off", None


class ScoreCache:
    """The score cache of one run (see the module docstring).

    Parameters
    ----------
    root : str or Path
        The cache directory.
    mode : str
        The resolved cache mode: ``on``, ``off``, ``read_only`` or ``refresh``.
    keep_rationales : bool, default True
        Whether entries store the scorer's rationale. The pipeline passes True only for the
        profiles that show rationales (``review``, ``forensic``): a rationale quotes the user's
        content, and a cache directory outlives the report whose profile withheld it. An entry
        written without its rationale is a miss for a cache that keeps them, so a later
        ``review`` run rescores it instead of showing no rationale.
    """

    def __init__(self, root: str | Path, mode: str, *, keep_rationales: bool = True):
        self.root = Path(root)
        self.mode = mode
        self.keep_rationales = bool(keep_rationales)
        self.hits = self.misses = self.writes = self.write_errors = 0
        self.first_write_error: str | None = None
        self._lock_handle = None

    @property
    def reads(self) -> bool:
        return self.mode in ("on", "read_only")

    @property
    def writes_enabled(self) -> bool:
        return self.mode in ("on", "refresh")

    # -- lock ---------------------------------------------------------------------------------
    @property
    def lock_path(self) -> Path:
        return self.root / ".lock"

    def acquire(self) -> None:
        """Take the writer lock when this mode writes; raise CacheLockUnavailable if held."""
        if not self.writes_enabled:
            return
        try:
            # the cache's lock-file fields, which the report reads as holder_hostname / holder_started_at
            self._lock_handle = take_lock(self.lock_path, holder_record(host="hostname", started="started_at"))
        except HeldLock as held:
            raise CacheLockUnavailable(str(self.lock_path), held.holder) from None
        except OSError as error:
            raise SetupError(
                f"scorer.cache_dir {str(self.root)!r} cannot hold the score cache "
                f"({type(error).__name__}: {error}); point cache_dir at a writable directory "
                f"or use cache_mode: off"
            ) from None

    def release(self) -> None:
        handle, self._lock_handle = self._lock_handle, None
        release_lock(handle)

    # -- entries ------------------------------------------------------------------------------
    @staticmethod
    def key(components: dict[str, Any]) -> str:
        return sha256_hex(canonical_json({"key_version": CACHE_KEY_VERSION, **components}))

    def _path(self, key: str) -> Path:
        return self.root / "entries" / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        """The stored ``{"score", "rationale"}`` or None (a miss, or a mode that does not read).

        Parameters
        ----------
        key : str
            The cache key (:meth:`key`).

        Returns
        -------
        dict or None
            ``{"score": float, "rationale": str or None}`` on a hit.

        Raises
        ------
        CacheCorruption
            When the entry does not parse, lacks its fields, was written by an older toolkit
            (no content hash), or its content hash does not match its key, score and
            rationale (edited after writing).
        """
        if not self.reads:
            return None
        path = self._path(key)
        if not path.exists():
            self.misses += 1
            return None
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise CacheCorruption(str(path), f"{type(error).__name__}: {error}") from None
        if isinstance(entry, dict) and (entry.get("cache_schema_version") in _OLDER_SCHEMA_VERSIONS
                                        or (entry.get("cache_schema_version") == CACHE_SCHEMA_VERSION
                                            and "content_sha256" not in entry)):
            raise CacheCorruption(str(path), f"{_HASH_MISMATCH}: the entry has no content hash (written by an older "
                                             f"toolkit or edited); {_REMEDY}")
        score = entry.get("score") if isinstance(entry, dict) else None
        rationale = entry.get("rationale") if isinstance(entry, dict) else None
        valid = (
            isinstance(entry, dict)
            and entry.get("cache_schema_version") == CACHE_SCHEMA_VERSION
            and entry.get("key") == key
            and isinstance(score, (int, float))
            and not isinstance(score, bool)
            and math.isfinite(score)
            and 0.0 <= score <= 1.0
            and (rationale is None or isinstance(rationale, str))
        )
        if not valid:
            raise CacheCorruption(str(path), "missing or invalid fields (cache_schema_version, key, score, rationale)")
        # checked after the fields: the hash of a score that is not a number is not defined
        if entry.get("content_sha256") != entry_content_hash(key, score, rationale):
            raise CacheCorruption(str(path), f"{_HASH_MISMATCH}: the stored score or rationale differs from what "
                                             f"was written (edited by hand?); {_REMEDY}")
        if self.keep_rationales and entry.get("rationale_withheld") is True:
            # written under a profile that hides rationales: rescore, so this run can show one
            self.misses += 1
            return None
        self.hits += 1
        return {"score": float(score), "rationale": rationale}

    def put(self, key: str, components: dict[str, Any], score: float, rationale: str | None) -> None:
        """Store one score under ``key`` with its content hash (modes ``on`` and ``refresh`` only).

        Parameters
        ----------
        key : str
            The cache key (:meth:`key` of ``components``).
        components : dict
            The key components, stored for inspection (hashes and ids, no user text).
        score : float
            The score in [0, 1].
        rationale : str or None
            The scorer's rationale.
        """
        if not self.writes_enabled:
            return
        withheld = rationale is not None and not self.keep_rationales
        rationale = None if rationale is None or withheld else str(rationale)  # what get() accepts back
        path = self._path(key)
        entry = {
            "cache_schema_version": CACHE_SCHEMA_VERSION,
            "key": key,
            "components": components,
            "score": float(score),
            "rationale": rationale,
            "content_sha256": entry_content_hash(key, score, rationale),
            "rationale_withheld": withheld,
            "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        }
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary.write_text(json.dumps(entry, sort_keys=True), encoding="utf-8")
            os.replace(temporary, path)
        except OSError as error:
            # the score itself is good; losing its cache entry only costs a rescore later
            self.write_errors += 1
            if self.first_write_error is None:
                self.first_write_error = f"{path}: {type(error).__name__}: {error}"
            return
        self.writes += 1

    def summary(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "path": str(self.root),
            "key_version": CACHE_KEY_VERSION,
            "hits": self.hits,
            "misses": self.misses,
            "writes": self.writes,
            "write_errors": self.write_errors,
        }
