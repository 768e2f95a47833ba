"""The bases of quiet refreshes: what a converged pass leaves so a later refresh may trust the
watches (``tenantdb.core.quiet`` decides when).

Per key, one string: the basis (the key's touch count when the pass began, the watcher's
leader token then, when the pass ended) and the kind's quiet note, as JSON, kept for the
full-refresh period. The note is what the kind's quiet check needs and never a credential. A
basis is sealed like a pass's note (``tenantdb.core.seal``): one whose seal does not open is no
basis, and the refresh reads in full.
"""

from __future__ import annotations

import json
import time

from tenantdb.adapters.redisclient import reply_text
from tenantdb.adapters.workqueue.base import QueueBase
from tenantdb.adapters.workqueue.notes import check_seal, refused
from tenantdb.core.keys import OrderKey
from tenantdb.core.quiet import QuietBasis, QuietLook


class Quieting(QueueBase):
    """Look, leave and forget the basis of a key's quiet refreshes."""

    def look_quiet(self, key: OrderKey) -> tuple[QuietLook, str | None]:
        """In one round trip: the key's touch count and the watcher's leader token now, and the
        basis with its quiet note (the note None when there is no basis or it is unreadable)."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.hget(self.keys.sequence(key), "touched")
        pipe.get(self.keys.watcher_leader)
        pipe.get(self.keys.quiet(key))
        touched, leader, stored = pipe.execute()
        basis, note = self._open(key, stored)
        look = QuietLook(int(touched or 0), reply_text(leader) if leader else None, basis)
        return look, note

    def record_quiet(self, key: OrderKey, basis: QuietBasis, note: str, ttl_ms: int) -> None:
        """Leave the basis a converged pass vouches for, with the kind's quiet note, sealed."""
        if self.seal_keys is None:
            return  # no key, no basis: every refresh reads in full
        expires = str(int(time.time() * 1000) + ttl_ms)
        parts = _parts(key, basis, note, expires)
        value = {
            "touched": basis.touched,
            "leader": basis.leader,
            "at": basis.at,
            "note": note,
            "expires": expires,
            "seal": self.seal_keys.seal(*parts),
        }
        self.redis.set(self.keys.quiet(key), json.dumps(value, separators=(",", ":")), px=ttl_ms)

    def forget_quiet(self, key: OrderKey) -> None:
        """Drop the key's basis: its next refresh reads in full."""
        self.redis.delete(self.keys.quiet(key))

    def _open(self, key: OrderKey, stored: object) -> tuple[QuietBasis | None, str | None]:
        if stored is None:
            return None, None
        try:
            value = json.loads(reply_text(stored))
            basis = QuietBasis(int(value["touched"]), str(value["leader"]), float(value["at"]))
            note, expires = value["note"], str(value.get("expires", ""))
        except (ValueError, KeyError, TypeError):
            return None, None  # a basis that does not read is no basis: the refresh reads in full
        if not isinstance(note, str):
            return None, None
        reason = check_seal(
            self.seal_keys, value.get("seal"), _parts(key, basis, note, expires), expires
        )
        if reason is not None:
            refused("quiet", reason, str(key))
            return None, None
        return basis, note


def _parts(key: OrderKey, basis: QuietBasis, note: str, expires: str) -> tuple[str, ...]:
    return ("quiet", str(key), str(basis.touched), basis.leader, repr(basis.at), note, expires)
