"""Whether a desired child object is already in place, so its apply can be skipped.

A pass observes a child before it writes it; when every field tenantdb sets is already what it
would set, the apply would change nothing on the server and is not sent. Fields the server or
another manager added (defaults, status, other labels) do not count against the match, as a
server-side apply leaves them alone too. Pure.

Not covered, deliberately: a field that an older tenantdb set and this one no longer sets is
only removed by an apply, so it stays until the object next differs in a field tenantdb sets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Identity fields an apply never changes, and fields no apply of tenantdb's sets.
_IGNORED_TOP = frozenset({"apiVersion", "kind", "status"})
_IGNORED_META = frozenset({"name", "namespace"})


def is_contained(desired: Any, live: Any) -> bool:
    """Whether ``live`` holds ``desired``: every key of a map, and lists item by item."""
    if isinstance(desired, Mapping):
        if not isinstance(live, Mapping):
            return False
        return all(k in live and is_contained(v, live[k]) for k, v in desired.items())
    if isinstance(desired, list):
        if not isinstance(live, list) or len(live) != len(desired):
            return False
        return all(is_contained(d, w) for d, w in zip(desired, live, strict=True))
    return bool(desired == live)


def is_applied(desired: Mapping[str, Any], live: Mapping[str, Any] | None) -> bool:
    """Whether applying ``desired`` over ``live`` (None: absent) would change nothing."""
    if live is None:
        return False
    for key, value in desired.items():
        if key in _IGNORED_TOP:
            continue
        if key == "metadata":
            meta = {k: v for k, v in value.items() if k not in _IGNORED_META}
            if not is_contained(meta, live.get("metadata") or {}):
                return False
        elif not is_contained(value, live.get(key)):
            return False
    return True
