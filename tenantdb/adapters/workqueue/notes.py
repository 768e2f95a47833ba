"""Notes: what a pass leaves for its chain's steps, and the versions of tenantdb's own writes.

A note lives under the pass's token and ends with the pass; it never holds a credential. A
remembered write lets the watcher tell the event of tenantdb's own write from someone else's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from tenantdb.adapters.errors import SafeError
from tenantdb.adapters.metrics import NOTES_REFUSED
from tenantdb.adapters.redisclient import reply_text
from tenantdb.adapters.workqueue.base import QueueBase
from tenantdb.adapters.workqueue.leasing import Lease
from tenantdb.core.seal import SealKeys

log = logging.getLogger(__name__)


class NoteKeysMissingError(SafeError, RuntimeError):
    """A worker was asked to seal or open a note without a note key file."""

    def __init__(self) -> None:
        super().__init__(
            "no note key: TENANTDB_NOTE_KEYS_FILE must name a file of keys (a mounted Secret)"
            " that the workers seal the notes they leave in Redis with"
        )


class NoteRefusedError(SafeError, ValueError):
    """A note in Redis that no worker sealed, or whose seal is past its time: nothing of it is
    used. ``reason`` is ``Unsealed``, ``Forged`` or ``Expired``."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"the pass's note in Redis was refused ({reason})")
        self.reason = reason


def refused(note: str, reason: str, key: str) -> None:
    """Count and log a refused note; the log line names the order and the reason only."""
    NOTES_REFUSED.labels(note=note, reason=reason).inc()
    log.warning(
        "a %s note in Redis was refused (%s); it is not used", note, reason, extra={"order": key}
    )


class Notes(QueueBase):
    """Leave and read a pass's note; remember and recognise tenantdb's own writes.

    A note is stored as ``<token>\n<expires ms>\n<seal>\n<note>``: the pass's token, when its
    seal ends, and the seal (``tenantdb.core.seal``) over the order key, token, expiry and note.
    """

    def _keys(self) -> SealKeys:
        if self.seal_keys is None:
            raise NoteKeysMissingError
        return self.seal_keys

    def save_note(self, lease: Lease, note: str, ttl_ms: int) -> None:
        """Leave ``note`` (never a credential), sealed, for the chain steps of the pass
        ``lease`` holds."""
        expires = str(int(time.time() * 1000) + ttl_ms)
        seal = self._keys().seal("note", str(lease.key), lease.token, expires, note)
        self.redis.set(
            self.keys.note(lease.key), f"{lease.token}\n{expires}\n{seal}\n{note}", px=ttl_ms
        )

    def load_note(self, lease: Lease) -> str | None:
        """The note the pass ``lease`` belongs to left; None when it is gone or another pass's.

        Raises ``NoteRefusedError`` (counted and logged) for a note under the pass's token that
        no worker sealed or whose seal has ended.
        """
        value = self.redis.get(self.keys.note(lease.key))
        if value is None:
            return None
        token, expires, seal, note = [*reply_text(value).split("\n", 3), "", "", ""][:4]
        if token != lease.token:
            return None
        reason = _refusal(
            self._keys(), seal, ("note", str(lease.key), token, expires, note), expires
        )
        if reason is not None:
            refused("pass", reason, str(lease.key))
            raise NoteRefusedError(reason)
        return note

    def note_written(self, cluster: str, obj: Mapping[str, Any], ttl_ms: int) -> None:
        """Remember the resourceVersion a write of tenantdb's left an object at, for a while.

        The watch event that write causes then names no order (``is_own_write``): a pass's own
        writes do not wake its order again.
        """
        meta = obj.get("metadata") or {}
        version = meta.get("resourceVersion")
        if not version:
            return
        key = self.keys.written(
            cluster, str(obj.get("kind", "")), str(meta.get("namespace", "")), str(meta["name"])
        )
        self.redis.set(key, str(version), px=ttl_ms)

    def is_own_write(self, cluster: str, obj: Mapping[str, Any]) -> bool:
        """Whether an object is exactly as tenantdb's own last write of it left it."""
        meta = obj.get("metadata") or {}
        version = meta.get("resourceVersion")
        if not version:
            return False
        key = self.keys.written(
            cluster, str(obj.get("kind", "")), str(meta.get("namespace", "")), str(meta.get("name"))
        )
        return reply_text(self.redis.get(key)) == str(version)


def _refusal(keys: SealKeys, seal: str, parts: tuple[str, ...], expires: str) -> str | None:
    """Why a stored note is refused (``Unsealed``, ``Forged``, ``Expired``); None: it opens."""
    if not seal:
        return "Unsealed"
    if not keys.opens(seal, *parts):
        return "Forged"
    if not expires.isdigit() or int(expires) < time.time() * 1000:
        return "Expired"
    return None


def check_seal(
    keys: SealKeys | None, seal: Any, parts: tuple[str, ...], expires: str
) -> str | None:
    """``_refusal`` for the other notes of the queue (quiet bases); no keys refuses them all."""
    if keys is None:
        return "Unsealed"
    return _refusal(keys, seal if isinstance(seal, str) else "", parts, expires)
