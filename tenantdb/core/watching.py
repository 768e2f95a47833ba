"""What the watcher remembers of an object between events, and how long it waits to reconnect.

Owns the fingerprints the kinds' update predicates (their ``mappers``) are fed in place of the
previous version of an object: each one is a small object of the same shape that the predicate
judges exactly as it judges the whole object (labels, annotations and child bodies are reduced to
digests, so a Secret's data never stays in memory), and the capped, jittered backoff of a watch
reconnect. What a kind remembers of its own objects lives with the kind (for MariaDBDatabase's
ControlPlanes: ``core/mariadbdatabase/watching.py``).
It must never list, watch, enqueue or read a clock; randomness comes in as an argument.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from tenantdb.core.objects import metadata_of

Fingerprint = dict[str, Any]
"""A reduced object that an update predicate judges like the object it was computed from."""

# Bookkeeping the server rewrites on every write; the child predicate ignores it too.
_VOLATILE_METADATA = frozenset({"resourceVersion", "managedFields"})


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _str_map(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): str(v) for k, v in value.items()}


def _str_map_digest(value: Any) -> dict[str, str]:
    # The predicates compare these maps as str -> str; an empty map stays empty so that an absent
    # and an empty map compare equal, as they do in the predicate.
    if not isinstance(value, Mapping) or not value:
        return {}
    return {"sha256": _digest({str(k): str(v) for k, v in value.items()})}


def compute_order_fingerprint(obj: Mapping[str, Any]) -> Fingerprint:
    """Reduce an order to what ``should_enqueue_order_update`` compares."""
    meta = metadata_of(obj)
    return {
        "metadata": {
            "generation": meta.get("generation"),
            "labels": _str_map_digest(meta.get("labels")),
            "annotations": _str_map_digest(meta.get("annotations")),
            "deletionTimestamp": meta.get("deletionTimestamp"),
        }
    }


def should_enqueue_order_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Pass an order update on a spec, label or annotation change, or on deletion starting.

    A status write and a finalizer change leave generation, labels and annotations alone, so
    tenantdb's own writes wake nothing.
    """
    old_meta, new_meta = metadata_of(old), metadata_of(new)
    if old_meta.get("generation") != new_meta.get("generation"):
        return True
    if _str_map(old_meta.get("labels")) != _str_map(new_meta.get("labels")):
        return True
    if _str_map(old_meta.get("annotations")) != _str_map(new_meta.get("annotations")):
        return True
    return (
        old_meta.get("deletionTimestamp") is None and new_meta.get("deletionTimestamp") is not None
    )


def compute_child_fingerprint(obj: Mapping[str, Any]) -> Fingerprint:
    """Reduce a child to a digest of everything ``should_enqueue_child_update`` compares."""
    body = {k: v for k, v in obj.items() if k != "metadata"}
    body["metadata"] = {k: v for k, v in metadata_of(obj).items() if k not in _VOLATILE_METADATA}
    return {"metadata": {}, "sha256": _digest(body)}


def compute_backoff(attempt: int, *, base: float, cap: float, jitter: float) -> float:
    """Return the wait before reconnect number ``attempt`` (1-based): capped, half jittered.

    The ceiling doubles from ``base`` up to ``cap``; the wait is between half the ceiling and
    the ceiling, so replicas that lost the same server spread out without ever retrying at once.

    Args:
        attempt: how many reconnects in a row failed, this one included; 0 waits nothing.
        base: the ceiling of the first wait, in seconds.
        cap: the largest ceiling, in seconds.
        jitter: a number in [0, 1).
    """
    if attempt <= 0:
        return 0.0
    ceiling = min(cap, base * 2.0 ** min(attempt - 1, 32))
    return ceiling / 2 + ceiling / 2 * min(max(jitter, 0.0), 1.0)


def should_wake_on_relist(
    before: tuple[str, Fingerprint] | None,
    now: tuple[str, Fingerprint],
    passes_update: Callable[[Fingerprint, Fingerprint], bool],
) -> bool:
    """Whether an object a relist shows wakes the orders it maps to, given the (uid,
    fingerprint) the watch last handed on of it (None: it never did) and what the relist shows.

    A relist follows a gap (an expired resourceVersion, a hand-on that failed), and an object
    that changed in it must wake its orders as its update would have. One the watch never
    handed on, or one deleted and created again meanwhile (another uid), wakes them as an
    ADDED would. One the update predicate finds unchanged wakes nobody: every order it maps to
    has had a pass since that version, and waking them all for nothing would cost a fleet a full
    pass per order (and their quiet refreshes) each time any watch relists.
    """
    if before is None:
        return True
    (old_uid, old_print), (uid, fingerprint) = before, now
    return old_uid != uid or passes_update(old_print, fingerprint)
