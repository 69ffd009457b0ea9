"""An exclusive lock file that names its holder: ``fcntl.flock`` on a small JSON file.

Used by ``simulate(checkpoint=)`` and the what-if score cache. The kernel drops a dead
process's flock, so a lock left by a killed run is free again with no pid guessing. The
file is emptied, not deleted, on release: deleting it would let a waiting opener lock an
unlinked inode while a third process locks a new file of the same name.
"""

from __future__ import annotations

import json
import os
import socket
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

__all__ = ["HeldLock", "holder_record", "take_lock", "release_lock"]


class HeldLock(Exception):
    """The lock is held by another process; ``holder`` is what it recorded (pid, host, started)."""

    def __init__(self, path: Path, holder: dict[str, Any]):
        super().__init__(f"{path} is held by {holder or 'an unknown holder'}")
        self.path, self.holder = path, holder


def holder_record(pid: str = "pid", host: str = "host", started: str = "started") -> dict[str, Any]:
    """This process as a lock holder: pid, host name and start time (UTC, seconds), under
    the key names the caller's file format uses."""
    return {pid: os.getpid(), host: socket.gethostname(),
            started: datetime.now(timezone.utc).isoformat(timespec="seconds")}


def take_lock(path: Path, record: dict[str, Any] | None = None) -> IO[str]:
    """Open ``path`` (creating its folder), lock it without waiting, and write ``record``
    (default :func:`holder_record`) into it.

    Raises :class:`HeldLock` when another process holds it, and ``OSError`` when the file
    cannot be created; callers turn both into their own error naming what they lock."""
    import fcntl  # POSIX only; imported where a lock is taken

    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+", encoding="utf-8")
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        try:
            holder = json.loads(handle.read() or "{}")
        except ValueError:
            holder = {}
        handle.close()
        raise HeldLock(path, holder if isinstance(holder, dict) else {}) from None
    handle.seek(0)
    handle.truncate()
    handle.write(json.dumps(record if record is not None else holder_record()))
    handle.flush()
    return handle


def release_lock(handle: IO[str] | None) -> None:
    """Empty and unlock a handle from :func:`take_lock` (None: nothing to do)."""
    if handle is None:
        return
    import fcntl

    try:
        handle.seek(0)
        handle.truncate()
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    finally:
        handle.close()
