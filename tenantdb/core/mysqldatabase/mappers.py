"""Which watch events concern which MysqlDatabases, decided without the watch. Pure.

A MysqlFailoverGroup event concerns every order of its namespace naming the group; an update
passes only when the group was recreated, starts being deleted, changes its spec (the Secrets
it names among it), moves its active site or enters, leaves or changes its fence (heartbeat
churn of its status passes nothing). A Secret event concerns every order naming it as owner
Secret and every order on a group naming it (``compute_group_secrets``); an update passes only
when its data changed, so a no-op re-apply by the Secret's writer wakes nothing. Fingerprints
are digests: a Secret's values never stay in the watcher's memory.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tenantdb.core.mysqldatabase.group import compute_active_site, compute_fence
from tenantdb.core.mysqldatabase.reading import (
    group_name,
    group_secret_names,
    needs_sibling_username,
    owner_secret_name,
    tls_secret_name,
)
from tenantdb.core.objects import metadata_of
from tenantdb.core.watching import Fingerprint


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def compute_group_fingerprint(group: Mapping[str, Any]) -> Fingerprint:
    """What of a group its orders depend on: identity, deletion, spec, active site, fence."""
    meta = metadata_of(group)
    fence = compute_fence(group)
    return {
        "metadata": {},
        "sha256": _digest(
            [
                meta.get("uid"),
                meta.get("deletionTimestamp"),
                group.get("spec"),
                compute_active_site(group),
                None if fence is None else [fence.reason, fence.message],
            ]
        ),
    }


def compute_secret_fingerprint(secret: Mapping[str, Any]) -> Fingerprint:
    """A digest of a Secret's data (and its identity), never the data itself."""
    return {
        "metadata": {},
        "sha256": _digest(
            [metadata_of(secret).get("uid"), secret.get("data"), secret.get("stringData")]
        ),
    }


def should_enqueue_digest_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """An update passes when the digest moved."""
    return old.get("sha256") != new.get("sha256")


def compute_group_secrets(group: Mapping[str, Any]) -> tuple[str, ...]:
    """Every Secret a pass on the group reads besides the owner's: its credential Secrets and
    the Secret holding its server CA, when it asks for TLS."""
    tls = tls_secret_name(group)
    return tuple(dict.fromkeys((*group_secret_names(group), *((tls,) if tls else ()))))


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """What the watcher keeps of an order."""

    group: str
    owner_secret: str
    awaits_owner: bool
    """Live and no owner recorded yet: it claims the user its owner Secret names, and while
    that Secret names none (or is missing) an older order defers newer ones on the group
    (``PeerOwnerSecretMissing``)."""


def compute_index_entry(order: Mapping[str, Any]) -> IndexEntry:
    """What the watcher keeps of an order: the group and the owner Secret it names, and
    whether it still awaits an owner."""
    return IndexEntry(group_name(order), owner_secret_name(order), needs_sibling_username(order))
