"""What a MysqlDatabase pass reads off stored objects, and which watch events wake an order."""

from __future__ import annotations

import base64
import itertools
from typing import Any

from tenantdb.core.mysqldatabase.conflicts import find_conflict
from tenantdb.core.mysqldatabase.mappers import (
    compute_group_fingerprint,
    compute_group_secrets,
    compute_secret_fingerprint,
    should_enqueue_digest_update,
)
from tenantdb.core.mysqldatabase.reading import (
    PEER_READ_LIMIT,
    awaits_peer_owner,
    check_active_site,
    claim_of,
    compute_claim_slots,
    compute_named_by,
    compute_owner_name_slots,
    compute_peer_reads,
    compute_peer_slots,
    compute_status_patch,
    deferred_slot,
    group_moved,
    group_secret_names,
    needs_secret_username,
    needs_sibling_username,
    peers_on_group,
    peers_to_wake,
    peers_to_wake_indexed,
    sibling_claims,
    sibling_of,
    tls_secret_name,
    username_slot,
)


def group(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "main", "namespace": "bloodraven", "uid": "u-1"},
        "spec": {
            "sites": [{"name": "dc1"}, {"name": "dc2"}, {"name": "dr", "role": "dr-only"}],
            "credentials": {
                "operatorSecret": "main-operator",
                "appSecret": "main-app",
                "backupSecret": "main-operator",
            },
        },
        "status": {"activeSite": "dc1", **status},
    }


def order(name: str, created: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "bloodraven", "creationTimestamp": created},
        "spec": {
            "groupRef": {"name": "main"},
            "databaseName": f"{name}_db",
            "owner": {"secretName": f"{name}-owner"},
            **spec,
        },
    }


def test_the_group_secrets_are_named_once_operator_first() -> None:
    assert group_secret_names(group()) == ("main-operator", "main-app")
    legacy = {"metadata": {"name": "old"}, "spec": {"secretName": "old-dsn"}}
    assert group_secret_names(legacy) == ("old-dsn",)


def test_tls_is_asked_for_only_by_spec_tls() -> None:
    assert tls_secret_name(group()) is None
    with_tls = group()
    with_tls["spec"]["tls"] = {"issuerRef": {"name": "ca"}, "secretName": "main-tls"}
    assert tls_secret_name(with_tls) == "main-tls"


def test_only_a_primary_candidate_site_takes_the_apply() -> None:
    assert check_active_site(group(), "dc2") is None
    assert check_active_site(group(), "dr") == 'active site "dr" is not a primary-candidate'
    assert check_active_site(group(), "nowhere") is not None


def test_a_peer_is_claimed_by_its_recorded_owner_before_its_secret() -> None:
    peer = order("a", "2026-01-01T00:00:00Z")
    assert claim_of(peer, "from_secret").owner_user == "from_secret"
    peer["status"] = {"ownerUser": "recorded"}
    assert claim_of(peer, "from_secret").owner_user == "recorded"
    assert claim_of(order("b", "2026-01-01T00:00:00Z"), None).owner_user is None


def test_only_an_older_peer_with_no_known_owner_needs_its_secret_read() -> None:
    me = claim_of(order("b", "2026-01-01T00:00:05Z"), "mine")
    older = claim_of(order("a", "2026-01-01T00:00:00Z"), None)
    younger = claim_of(order("c", "2026-01-01T00:00:09Z"), None)
    assert needs_secret_username(me, older)
    assert not needs_secret_username(me, younger)


def test_peers_are_the_other_orders_on_the_same_group() -> None:
    mine = order("a", "2026-01-01T00:00:00Z")
    other_group = order("b", "2026-01-01T00:00:00Z", groupRef={"name": "other"})
    same = order("c", "2026-01-01T00:00:00Z")
    assert peers_on_group([mine, other_group, same], mine) == [same]


def _with_ready(o: dict[str, Any], status: str, reason: str) -> dict[str, Any]:
    o["status"] = {"conditions": [{"type": "Ready", "status": status, "reason": reason}]}
    return o


def test_only_peers_that_are_not_ready_are_woken_by_an_apply_or_a_release() -> None:
    mine = order("a", "2026-01-01T00:00:00Z")
    ready = _with_ready(order("b", "2026-01-01T00:00:00Z"), "True", "DatabaseReconciled")
    refused = _with_ready(order("c", "2026-01-02T00:00:00Z"), "False", "DatabaseNameConflict")
    fresh = order("d", "2026-01-03T00:00:00Z")  # no status yet: its first pass is under way
    elsewhere = _with_ready(
        order("e", "2026-01-02T00:00:00Z", groupRef={"name": "other"}), "False", "OwnerConflict"
    )
    assert peers_to_wake([mine, ready, refused, fresh, elsewhere], mine) == ("c", "d")


def test_sibling_claims_name_owners_and_grants_of_live_siblings() -> None:
    live = order("a", "2026-01-01T00:00:00Z", grants=[{"username": "maester"}])
    live["status"] = {"ownerUser": "a_app"}
    deleting = order("b", "2026-01-01T00:00:00Z", grants=[{"username": "other"}])
    deleting["metadata"]["deletionTimestamp"] = "2026-01-02T00:00:00Z"
    rotating = order("c", "2026-01-01T00:00:00Z")
    rotating["status"] = {"ownerUser": "c_app", "pendingOwnerUser": "c_app2"}
    unreconciled = order("d", "2026-01-03T00:00:00Z")
    assert needs_sibling_username(unreconciled)
    assert not needs_sibling_username(live)
    assert not needs_sibling_username(deleting)
    claims = sibling_claims(
        [
            sibling_of(live),
            sibling_of(deleting),
            sibling_of(rotating),
            sibling_of(unreconciled, "d_app"),
        ]
    )
    assert claims == {"a_app": "a", "maester": "a", "c_app": "c", "c_app2": "c", "d_app": "d"}


def test_a_status_patch_nulls_what_the_new_status_drops() -> None:
    old = {"phase": "Creating", "pendingOwnerUser": "b", "ownerUser": "a"}
    new = {"phase": "Ready", "ownerUser": "b"}
    assert compute_status_patch(old, new) == {
        "phase": "Ready",
        "ownerUser": "b",
        "pendingOwnerUser": None,
    }
    assert compute_status_patch(new, new) == {}


def test_a_group_update_passes_on_site_fence_and_identity_only() -> None:
    base = compute_group_fingerprint(group())
    churn = compute_group_fingerprint(group(lastFailoverTarget="dc2"))
    assert not should_enqueue_digest_update(base, churn)
    moved = compute_group_fingerprint(group(activeSite="dc2"))
    fenced = compute_group_fingerprint(group(plannedFailover={"phase": "Draining"}))
    settled = compute_group_fingerprint(group(plannedFailover={"phase": "Succeeded"}))
    assert should_enqueue_digest_update(base, moved)
    assert should_enqueue_digest_update(base, fenced)
    assert not should_enqueue_digest_update(base, settled)


def test_a_group_spec_change_passes_so_its_orders_read_what_it_now_names() -> None:
    base = compute_group_fingerprint(group())
    rotated = group()
    rotated["spec"]["credentials"]["operatorSecret"] = "main-operator-2"
    assert should_enqueue_digest_update(base, compute_group_fingerprint(rotated))


def test_a_group_depends_on_each_credential_secret_once_and_its_ca_when_it_asks_for_tls() -> None:
    plain = group()
    assert compute_group_secrets(plain) == ("main-operator", "main-app")
    tls = group()
    tls["spec"]["tls"] = {"required": True}
    assert compute_group_secrets(tls) == ("main-operator", "main-app", "main-tls")


def test_a_secret_update_passes_on_a_data_change_only() -> None:
    secret = {"metadata": {"uid": "s", "resourceVersion": "1"}, "data": {"password": "eA=="}}
    reapplied = {**secret, "metadata": {"uid": "s", "resourceVersion": "2"}}
    rotated = {**secret, "data": {"password": "eQ=="}}
    base = compute_secret_fingerprint(secret)
    assert not should_enqueue_digest_update(base, compute_secret_fingerprint(reapplied))
    assert should_enqueue_digest_update(base, compute_secret_fingerprint(rotated))
    assert "eA==" not in str(base)


def test_a_plan_is_stale_once_its_group_is_gone_recreated_moved_or_fenced() -> None:
    assert not group_moved(group(), "u-1", "dc1")
    assert group_moved(None, "u-1", "dc1")
    assert group_moved(group(), "u-0", "dc1")
    assert group_moved(group(activeSite="dc2"), "u-1", "dc1")
    assert group_moved(group(plannedFailover={"phase": "Promoting"}), "u-1", "dc1")


def _variant(name: str, created: str, db: str, secret: str, owner: str, pending: str,
             grant: str, ready: bool, deleting: bool) -> dict[str, Any]:  # fmt: skip
    o = order(name, created, databaseName=db, owner={"secretName": secret})
    if grant:
        o["spec"]["grants"] = [{"username": grant, "privileges": ["SELECT"]}]
    status: dict[str, Any] = {"ownerUser": owner, "pendingOwnerUser": pending}
    state = "True" if ready else "False"
    status["conditions"] = [{"type": "Ready", "status": state, "reason": "X"}]
    o["status"] = {k: v for k, v in status.items() if v}
    if deleting:
        o["metadata"]["deletionTimestamp"] = "2026-02-01T00:00:00Z"
    return o


def test_every_peer_a_decision_rests_on_is_named_by_the_index_fields_the_pass_reads() -> None:
    """Over every combination of shared and distinct names: when the conflict check, a drop or
    the retirement of an owner would look at a peer, a field the pass reads names that peer."""
    me = _variant("me", "2026-01-02T00:00:00Z", "app", "s1", "u1", "u2", "", True, False)
    my_slots = set(compute_peer_slots(me, "u1"))
    choices = itertools.product(
        ("2026-01-01T00:00:00Z", "2026-01-03T00:00:00Z"), ("app", "App", "other"), ("s1", "s9"),
        ("u1", "u2", "u9", ""), ("u1", "u2", ""), ("u1", "u2", "g9", ""), (True, False),
    )  # fmt: skip
    checked = 0
    for created, db, secret, owner, pending, grant, ready in choices:
        peer = _variant("peer", created, db, secret, owner, pending, grant, ready, False)
        named = my_slots & set(compute_claim_slots(peer))
        sibling = sibling_of(peer, "u9" if not owner else None)
        relevant = (
            find_conflict(claim_of(me, "u1"), [claim_of(peer, None)]) is not None
            or db.lower() == "app"  # one schema on a case-folding server
            or secret == "s1"
            or bool({"u1", "u2"} & set(sibling_claims([sibling])))
        )
        if relevant:
            checked += 1
            assert named, (created, db, secret, owner, pending, grant)
            # Read, a peer that is not Ready is woken by the order's apply or release.
            assert peers_to_wake_indexed(me, [peer], ()) == (() if ready else ("peer",))
    assert checked > 100


def test_peers_without_an_owner_are_found_through_the_secrets_naming_the_orders_users() -> None:
    """The same property through the owner-name index: a peer that recorded no owner is read
    when its Secret names one of the order's users, and no other unowned peer is."""
    me = _variant("me", "2026-01-02T00:00:00Z", "app", "s1", "u1", "u2", "", True, False)
    naming = {"s1": "u1", "s7": "u2", "s9": "u9"}
    index: dict[tuple[str, ...], list[str]] = {}
    for secret, user in naming.items():
        index.setdefault(username_slot(user), []).append(secret)
    named_by = compute_named_by(me, "u1", index)
    assert named_by == ("s1", "s7")
    my_slots = set(compute_peer_slots(me, "u1", named_by))
    assert ("unowned", "main") not in my_slots
    choices = itertools.product(
        ("2026-01-01T00:00:00Z", "2026-01-03T00:00:00Z"), ("app", "other"), ("s1", "s7", "s9"),
        ("u1", "u2", "u9", ""), ("u1", "u2", ""), ("u1", "u2", "g9", ""), (True, False),
    )  # fmt: skip
    checked = skipped = 0
    for created, db, secret, owner, pending, grant, ready in choices:
        peer = _variant("peer", created, db, secret, owner, pending, grant, ready, False)
        named = my_slots & set(compute_claim_slots(peer))
        secret_user = naming[secret] if not owner else None
        relevant = (
            find_conflict(claim_of(me, "u1"), [claim_of(peer, secret_user)]) is not None
            or db.lower() == "app"  # one schema on a case-folding server
            or secret == "s1"
            or bool({"u1", "u2"} & set(sibling_claims([sibling_of(peer, secret_user)])))
        )
        if relevant:
            checked += 1
            assert named, (created, db, secret, owner, pending, grant)
        elif not owner and secret == "s9":
            skipped += 1
            assert not named, "an unowned peer claiming none of the order's users is not read"
    assert checked > 100
    assert skipped > 0


def test_the_owner_name_index_holds_a_digest_and_is_trusted_once_it_lists_the_orders_secret() -> (
    None
):
    def secret(**data: str) -> dict[str, Any]:
        encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
        return {"metadata": {"name": "s", "namespace": "bloodraven"}, "data": encoded}

    slots = compute_owner_name_slots(secret(username="me_app", password="pw"))
    assert slots == (username_slot("me_app"),)
    assert "me_app" not in repr(slots)
    assert "pw" not in repr(slots)
    assert username_slot("me_app") != username_slot("me_app2")
    assert compute_owner_name_slots(secret(password="pw")) == ()
    assert compute_owner_name_slots({"data": {"username": "not base64!"}}) == ()

    me = order("me", "2026-01-02T00:00:00Z")
    mine = {username_slot("me_app"): ["me-owner", "other-owner"]}
    assert compute_named_by(me, "me_app", mine) == ("me-owner", "other-owner")
    # The index does not yet list the order's own Secret under the name the pass read: it may
    # be behind on other Secrets too.
    assert compute_named_by(me, "me_app", {username_slot("me_app"): ["other-owner"]}) is None
    assert compute_named_by(me, "me_app", {}) is None
    # Without an owner Secret, only the users the order recorded are looked up.
    recorded = {**me, "status": {"ownerUser": "old_app"}}
    assert compute_named_by(recorded, None, {username_slot("old_app"): ["x-owner"]}) == ("x-owner",)


def test_an_apply_wakes_the_peers_it_may_unblock_not_every_peer_that_is_not_ready() -> None:
    def with_ready(name: str, status: str, reason: str) -> dict[str, Any]:
        o = order(name, "2026-01-01T00:00:00Z")
        o["status"] = {"conditions": [{"type": "Ready", "status": status, "reason": reason}]}
        return o

    deferred = with_ready("d", "False", "PeerOwnerSecretMissing")
    assert awaits_peer_owner(deferred)
    assert deferred_slot(deferred) in compute_claim_slots(deferred)
    for other in (
        with_ready("r", "True", "DatabaseReconciled"),
        with_ready("c", "False", "DatabaseNameConflict"),
        order("n", "2026-01-01T00:00:00Z"),  # not passed yet: its own pass is queued
    ):
        assert not awaits_peer_owner(other)
        assert deferred_slot(other) not in compute_claim_slots(other)
    me = order("me", "2026-01-02T00:00:00Z")
    shared = with_ready("c", "False", "DatabaseNameConflict")
    ready = with_ready("r", "True", "DatabaseReconciled")
    woken = peers_to_wake_indexed(me, [shared, ready], ["d", "me"])
    assert woken == ("c", "d"), "the peer that yielded to it, and the deferred one"


def test_an_index_that_has_not_seen_the_order_or_names_many_peers_is_not_read() -> None:
    me = order("me", "2026-01-02T00:00:00Z")
    own = compute_claim_slots(me)[0]
    slots = compute_peer_slots(me, "me_app")
    assert own == ("database", "main", "me_db")
    assert compute_peer_reads(me, slots, {own: ["me", "b"], slots[2]: ["a", "me"]}) == ("a", "b")
    assert compute_peer_reads(me, slots, {own: ["b"]}) is None, "the order itself is not indexed"
    crowd = [f"p{i}" for i in range(PEER_READ_LIMIT + 1)]
    assert compute_peer_reads(me, slots, {own: ["me"], slots[2]: crowd}) is None
    assert compute_claim_slots({"spec": {}}) == (), "an order without a group claims nothing"
