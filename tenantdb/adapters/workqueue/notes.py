"""Notes: what a pass leaves for its chain's steps, and the versions of tenantdb's own writes.

A note lives under the pass's token and ends with the pass; it never holds a credential. A
remembered write lets the watcher tell the event of tenantdb's own write from someone else's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tenantdb.adapters.redisclient import reply_text
from tenantdb.adapters.workqueue.base import QueueBase
from tenantdb.adapters.workqueue.leasing import Lease


class Notes(QueueBase):
    """Leave and read a pass's note; remember and recognise tenantdb's own writes."""

    def save_note(self, lease: Lease, note: str, ttl_ms: int) -> None:
        """Leave ``note`` (never a credential) for the chain steps of the pass ``lease`` holds."""
        self.redis.set(self.keys.note(lease.key), f"{lease.token}\n{note}", px=ttl_ms)

    def load_note(self, lease: Lease) -> str | None:
        """The note the pass ``lease`` belongs to left; None when it is gone or another's."""
        value = self.redis.get(self.keys.note(lease.key))
        token, _, note = reply_text(value or "").partition("\n")
        return note if value is not None and token == lease.token else None

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
