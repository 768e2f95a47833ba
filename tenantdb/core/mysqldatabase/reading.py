"""What a MysqlDatabase pass reads off stored objects: its group's Secrets and sites, its peers.

Reduces the raw objects a pass fetched to what the gates, the conflict check and the teardown
plan compare: the names of the group's credential Secrets, whether the active site may take
writes, each peer order as a ``Claim`` and a ``Sibling``, and the status patch that turns one
stored status into another. Never a credential: a Secret reaches this module as the username
it names, if at all. Pure.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from tenantdb.core.mysqldatabase.conflicts import Claim
from tenantdb.core.mysqldatabase.gates import GateObservation, OwnerSecret
from tenantdb.core.mysqldatabase.group import compute_active_site, compute_fence
from tenantdb.core.mysqldatabase.models import read_order
from tenantdb.core.mysqldatabase.reasons import Reason
from tenantdb.core.mysqldatabase.teardown import Sibling, TeardownObservation
from tenantdb.core.mysqldatabase.validation import schema_key
from tenantdb.core.objects import decode_secret_value, generation_of
from tenantdb.core.readiness import compute_ready_state

PRIMARY_CANDIDATE = "primary-candidate"


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def group_name(order: Mapping[str, Any]) -> str:
    """The group an order names."""
    return _text(_map(_map(order.get("spec")).get("groupRef")).get("name"))


def owner_secret_name(order: Mapping[str, Any]) -> str:
    """The owner Secret an order names."""
    return _text(_map(_map(order.get("spec")).get("owner")).get("secretName"))


def operator_secret_name(group: Mapping[str, Any]) -> str:
    """The Secret the group's admin credential is in (credentials mode, else the DSN Secret)."""
    spec = _map(group.get("spec"))
    credentials = _map(spec.get("credentials"))
    return _text(credentials.get("operatorSecret")) or _text(spec.get("secretName"))


def group_secret_names(group: Mapping[str, Any]) -> tuple[str, ...]:
    """Every credential Secret the group names, the operator's first, each once."""
    credentials = _map(_map(group.get("spec")).get("credentials"))
    names = [operator_secret_name(group)]
    names += [
        _text(credentials.get(field))
        for field in ("appSecret", "readOnlySecret", "monitorSecret", "backupSecret")
    ]
    return tuple(dict.fromkeys(n for n in names if n))


def tls_secret_name(group: Mapping[str, Any]) -> str | None:
    """The Secret holding the group's server CA when the group asks for TLS, else None."""
    tls = _map(group.get("spec")).get("tls")
    if not isinstance(tls, Mapping):
        return None
    return _text(tls.get("secretName")) or f"{_text(_map(group.get('metadata')).get('name'))}-tls"


def session_view(group: Mapping[str, Any]) -> dict[str, Any]:
    """What of a group a session on its primary needs: its name and uid, the Secret names of
    its admin login and the TLS it asks for (``operator_secret_name``, ``tls_secret_name``)."""
    meta, spec = _map(group.get("metadata")), _map(group.get("spec"))
    return {
        "metadata": {k: meta[k] for k in ("name", "namespace", "uid") if k in meta},
        "spec": {k: spec[k] for k in ("credentials", "secretName", "tls") if k in spec},
    }


def check_active_site(group: Mapping[str, Any], site: str) -> str | None:
    """Why the active site cannot take the apply (not a primary candidate), or None."""
    for entry in _map(group.get("spec")).get("sites") or ():
        if isinstance(entry, Mapping) and entry.get("name") == site:
            role = _text(entry.get("role")) or PRIMARY_CANDIDATE
            return (
                None
                if role == PRIMARY_CANDIDATE
                else f'active site "{site}" is not a {PRIMARY_CANDIDATE}'
            )
    return f'active site "{site}" is not a {PRIMARY_CANDIDATE}'


def _created(meta: Mapping[str, Any]) -> datetime:
    text = _text(meta.get("creationTimestamp"))
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return datetime.max.replace(tzinfo=UTC)


def claim_of(order: Mapping[str, Any], secret_username: str | None) -> Claim:
    """An order as the conflict check sees it; ``secret_username`` is what its Secret names."""
    meta = _map(order.get("metadata"))
    recorded = _text(_map(order.get("status")).get("ownerUser"))
    return Claim(
        name=_text(meta.get("name")),
        created=_created(meta),
        group=group_name(order),
        database_name=_text(_map(order.get("spec")).get("databaseName")),
        owner_secret=owner_secret_name(order),
        owner_user=recorded or secret_username or None,
        deleting=bool(meta.get("deletionTimestamp")),
    )


def needs_secret_username(me: Claim, peer: Claim) -> bool:
    """Whether the conflict check needs the username a peer's Secret names (it outranks me,
    shares neither schema nor Secret, and has recorded no owner)."""
    return (
        peer.name != me.name
        and not peer.deleting
        and peer.group == me.group
        and peer.owner_user is None
        and (peer.created, peer.name) < (me.created, me.name)
    )


def needs_sibling_username(peer: Mapping[str, Any]) -> bool:
    """Whether a drop must know the username a live peer's owner Secret names: the peer has
    recorded no owner yet, so that account is one it is about to create or take."""
    meta, status = _map(peer.get("metadata")), _map(peer.get("status"))
    return not meta.get("deletionTimestamp") and not _text(status.get("ownerUser"))


def sibling_of(order: Mapping[str, Any], secret_username: str | None = None) -> Sibling:
    """An order as a drop must respect it (``secret_username``: what its owner Secret names,
    when ``needs_sibling_username`` asked for it)."""
    meta = _map(order.get("metadata"))
    status = _map(order.get("status"))
    grants = frozenset(
        _text(_map(g).get("username")) for g in _map(order.get("spec")).get("grants") or ()
    )
    return Sibling(
        name=_text(meta.get("name")),
        database_name=_text(_map(order.get("spec")).get("databaseName")),
        owner_secret=owner_secret_name(order),
        owner_user=_text(status.get("ownerUser")) or None,
        grants=grants,
        deleting=bool(meta.get("deletionTimestamp")),
        pending_owner_user=_text(status.get("pendingOwnerUser")) or None,
        secret_user=secret_username or None,
    )


def peers_on_group(orders: Iterable[dict[str, Any]], me: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The other orders of the namespace on the same group."""
    name = _text(_map(me.get("metadata")).get("name"))
    group = group_name(me)
    return [
        o
        for o in orders
        if group_name(o) == group and _text(_map(o.get("metadata")).get("name")) != name
    ]


def peers_to_wake(orders: Iterable[dict[str, Any]], me: Mapping[str, Any]) -> tuple[str, ...]:
    """The peers on the order's group an apply or a release of it may unblock: those not Ready.

    A peer is refused or waiting because of what its peers claim or hold (a name or an owner it
    yielded to, an owner Secret it waits for, a grant user not yet created), and such a peer is
    not Ready. A Ready peer has nothing to gain from a pass: waking it too would cost each apply
    a pass of every order on the group.
    """
    return tuple(
        _text(_map(o.get("metadata")).get("name"))
        for o in peers_on_group(orders, me)
        if not compute_ready_state(o).ready
    )


Slot = tuple[str, ...]
"""A value an order carries on its group, as the watcher's claim index spells it."""

PEER_READ_LIMIT = 16
"""At most this many peers are read one by one from what the claim index names; a pass that
would read more (a group where many new orders wait at once) lists the namespace instead."""


def compute_claim_slots(order: Mapping[str, Any]) -> tuple[Slot, ...]:
    """What an order carries on its group, for the watcher's claim index: its schema, its owner
    Secret, the owner users it records (current and rotation target), its grants[] users,
    ``unowned`` until it records an owner (the one its Secret names must then be read), and
    ``deferred`` while it waits for an older peer's owner to be known (an apply or a release
    of any peer may unblock it)."""
    group = group_name(order)
    if not group:
        return ()
    status = _map(order.get("status"))
    slots: list[Slot] = [("database", group, _schema_slot(order))]
    slots.append(("secret", group, owner_secret_name(order)))
    owners = (_text(status.get("ownerUser")), _text(status.get("pendingOwnerUser")))
    slots += [("user", group, user) for user in owners if user]
    slots += [("grant", group, user) for user in sorted(_grant_users(order))]
    if not owners[0]:
        slots.append(("unowned", group))
    if awaits_peer_owner(order):
        slots.append(deferred_slot(order))
    return tuple(dict.fromkeys(slots))


def _schema_slot(order: Mapping[str, Any]) -> str:
    """The order's schema as the index keys it: names that differ only in case are one."""
    return schema_key(_text(_map(order.get("spec")).get("databaseName")))


def awaits_peer_owner(order: Mapping[str, Any]) -> bool:
    """Whether the order's last pass deferred it until an older peer's owner is known
    (``PeerOwnerSecretMissing``): any apply or release on its group may unblock it."""
    state = compute_ready_state(order)
    return not state.ready and state.reason == Reason.PEER_OWNER_SECRET_MISSING


def _grant_users(order: Mapping[str, Any]) -> set[str]:
    grants = _map(order.get("spec")).get("grants") or ()
    return {u for g in grants if (u := _text(_map(g).get("username")))}


def compute_peer_users(order: Mapping[str, Any], owner_username: str | None) -> tuple[str, ...]:
    """The owner users a pass of the order compares its peers against: the one its Secret
    names (``owner_username``), the one it recorded and its rotation target."""
    status = _map(order.get("status"))
    users = {owner_username or "", _text(status.get("ownerUser"))}
    users.add(_text(status.get("pendingOwnerUser")))
    return tuple(sorted(u for u in users if u))


def compute_peer_slots(
    order: Mapping[str, Any],
    owner_username: str | None,
    named_by: Iterable[str] | None = None,
) -> tuple[Slot, ...]:
    """The index fields that name every peer a pass of the order may be checked against.

    The conflict check compares the schema, the owner Secret and the owner user; an apply that
    retires a previous owner, and a drop, respect each peer that owns, rotates to or grants to
    one of the order's own owner users. A peer that has recorded no owner claims the user its
    Secret names: with ``named_by`` (the Secrets of the namespace that name one of the order's
    owner users, from the owner-name index) the peers using those Secrets are read, and those
    whose Secret names no user (``unresolved_slot``, an older one defers the order); without
    it every ``unowned`` peer on the group is.
    """
    group = group_name(order)
    slots: list[Slot] = [
        ("database", group, _schema_slot(order)),
        ("secret", group, owner_secret_name(order)),
    ]
    if named_by is None:
        slots.append(("unowned", group))
    else:
        slots += [("secret", group, name) for name in sorted(set(named_by)) if name]
        slots.append(unresolved_slot(group))
    for user in compute_peer_users(order, owner_username):
        slots += [("user", group, user), ("grant", group, user)]
    return tuple(dict.fromkeys(slots))


def unresolved_slot(group: str) -> Slot:
    """The owner-name index field of the orders on ``group`` that await an owner while their
    owner Secret names no username, or is missing, as the watch of Secrets last saw it."""
    return ("unresolved", group)


def username_slot(username: str) -> Slot:
    """The owner-name index field of the Secrets whose ``username`` is this one. A digest:
    the index holds no value of a Secret."""
    return ("named", hashlib.blake2b(username.encode("utf-8"), digest_size=16).hexdigest())


def compute_owner_name_slots(secret: Mapping[str, Any]) -> tuple[Slot, ...]:
    """What a Secret carries in the owner-name index: the username it names, decoded as a
    pass decodes it (``username_slot``); nothing when it names none."""
    username = decode_secret_value(_map(secret.get("data")).get("username"))
    return (username_slot(username),) if username else ()


def compute_named_by(
    order: Mapping[str, Any],
    owner_username: str | None,
    found: Mapping[Slot, Iterable[str]],
) -> tuple[str, ...] | None:
    """The Secrets that name one of the order's owner users (``compute_peer_users``), from
    what the owner-name index says of their ``username_slot``; None when it cannot be trusted
    to say: it does not yet list the order's own owner Secret under the username the pass
    read from it, so it may not have seen a Secret written before that one either."""
    users = compute_peer_users(order, owner_username)
    if owner_username and owner_secret_name(order) not in found.get(
        username_slot(owner_username), ()
    ):
        return None
    return tuple(sorted({name for user in users for name in found.get(username_slot(user), ())}))


def deferred_slot(order: Mapping[str, Any]) -> Slot:
    """The index field naming the orders on the order's group that wait for an older peer's
    owner to be known (``awaits_peer_owner``)."""
    return ("deferred", group_name(order))


def peers_to_wake_indexed(
    order: Mapping[str, Any], peers: Iterable[dict[str, Any]], deferred: Iterable[str]
) -> tuple[str, ...]:
    """The peers an apply or a release of the order may unblock, from what its pass read
    through the index: those not Ready among the peers sharing a name with it (a name or an
    owner they yielded to, a grant user not yet created), and those deferred until an older
    peer's owner is known. A peer not Ready for any other reason does not wait on this order:
    waking every one would cost each apply in a burst of new orders one enqueue per peer."""
    me = _text(_map(order.get("metadata")).get("name"))
    names = set(peers_to_wake(peers, order)) | set(deferred)
    names.discard(me)
    return tuple(sorted(names))


def compute_peer_reads(
    order: Mapping[str, Any], slots: Iterable[Slot], found: Mapping[Slot, Iterable[str]]
) -> tuple[str, ...] | None:
    """The peers to read one by one, by name, from what the index names in ``slots``; None
    when the index cannot answer: it has not yet seen the order itself (so it may not have
    seen a peer created before it either), or it names more than ``PEER_READ_LIMIT``."""
    me = _text(_map(order.get("metadata")).get("name"))
    own = compute_claim_slots(order)
    if not own or me not in found.get(own[0], ()):
        return None
    names = {name for slot in slots for name in found.get(slot, ()) if name != me}
    if len(names) > PEER_READ_LIMIT:
        return None
    return tuple(sorted(names))


def sibling_claims(siblings: Iterable[Sibling]) -> dict[str, str]:
    """Every username a live sibling claims (its owner, its rotation target, the owner its
    Secret names before it recorded one, its grants), to the sibling's name."""
    claims: dict[str, str] = {}
    for sibling in siblings:
        if sibling.deleting:
            continue
        owners = (sibling.owner_user, sibling.pending_owner_user, sibling.secret_user)
        for name in (*owners, *sorted(sibling.grants)):
            if name:
                claims.setdefault(name, sibling.name)
    return claims


def compute_status_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The merge patch that turns one stored status into another (a dropped field is nulled)."""
    patch: dict[str, Any] = {k: v for k, v in new.items() if old.get(k) != v}
    patch.update({k: None for k in old if k not in new})
    return patch


def compute_gate_observation(
    order: Mapping[str, Any],
    group: Mapping[str, Any] | None,
    owner: OwnerSecret | None,
    group_secrets: Mapping[str, Mapping[str, str] | None],
    peers: Iterable[Mapping[str, Any]] = (),
    peer_users: Mapping[str, str] | None = None,
) -> GateObservation:
    """What the gates look at, from what the entry read (``peer_users``: the usernames the
    owner Secrets of peers without a recorded owner name, by peer)."""
    meta = _map(order.get("metadata"))
    found = peer_users or {}
    return GateObservation(
        name=_text(meta.get("name")),
        namespace=_text(meta.get("namespace")),
        generation=generation_of(order),
        spec=_map(order.get("spec")),
        status=_map(order.get("status")),
        group=group,
        owner_secret=owner,
        group_secrets=group_secrets,
        me=claim_of(order, owner.username if owner is not None else None),
        peers=tuple(
            claim_of(p, found.get(_text(_map(p.get("metadata")).get("name")))) for p in peers
        ),
    )


def compute_teardown_observation(
    order: Mapping[str, Any],
    group: Mapping[str, Any] | None,
    reserved: frozenset[str] | None,
    peers: Iterable[Mapping[str, Any]] = (),
    peer_users: Mapping[str, str] | None = None,
) -> TeardownObservation:
    """What the teardown plan looks at. ``group`` is None when it is gone or was not read
    (a retained or never-applied order needs no group); ``peer_users`` is what the owner
    Secrets of peers without a recorded owner name, by peer."""
    found = peer_users or {}
    spec, status = _map(order.get("spec")), _map(order.get("status"))
    policy = _text(spec.get("deletionPolicy")) or "Retain"
    created = status.get("databaseCreated") is True
    owner = _text(status.get("ownerUser"))
    grants = [_text(_map(g).get("username")) for g in spec.get("grants") or ()]
    applied = [_text(g) for g in status.get("appliedGrants") or ()]
    return TeardownObservation(
        policy=policy,
        database_name=_text(spec.get("databaseName")),
        database_created=created,
        owner_user=owner,
        pending_owner_user=_text(status.get("pendingOwnerUser")),
        owner_secret=owner_secret_name(order),
        grants=tuple(dict.fromkeys(g for g in (*grants, *applied) if g and g != owner)),
        group_present=group is not None or not needs_group_for_teardown(order),
        group=group_name(order),
        active_site=compute_active_site(group or {}),
        fence=compute_fence(group) if group is not None else None,
        reserved=reserved,
        siblings=tuple(
            sibling_of(p, found.get(_text(_map(p.get("metadata")).get("name")))) for p in peers
        ),
    )


def needs_group_for_teardown(order: Mapping[str, Any]) -> bool:
    """Whether deleting the order may touch MySQL (``MysqlDatabase.may_touch_mysql``)."""
    return read_order(order).may_touch_mysql


def group_moved(group: Mapping[str, Any] | None, uid: str, site: str) -> bool:
    """Whether the group is no longer the one a plan was made on: gone, recreated, its active
    site moved, or fenced since."""
    if group is None:
        return True
    current = _text(_map(group.get("metadata")).get("uid"))
    return current != uid or compute_active_site(group) != site or compute_fence(group) is not None
