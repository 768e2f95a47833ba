"""MysqlDatabase end to end: a caller's order on the devstack's failover group of two MariaDBs.

tenantdb's real watcher, workers and beat run as subprocesses on a fresh platform per test; the
group's two MariaDB servers are shared by the session and reset for each platform.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from kubernetes import client as k8s

from tests.e2e.mysql_tenants import (
    API,
    DENIED,
    GROUP,
    GROUPS,
    NS,
    Tenants,
    literal,
    order_with_grant,
    platform_options,
    tenants,
)
from tests.support import wait_for

# The failover group is moved, stopped and failed over: a platform of its own.
pytestmark = [pytest.mark.slow, pytest.mark.private_platform]

__all__ = ["platform_options", "tenants"]


# -- the caller's story ------------------------------------------------------------------------


def test_a_caller_with_only_the_example_role_gets_a_database_an_owner_and_a_grant(
    tenants: Tenants,
) -> None:
    name, db, owner, grantee = order_with_grant(tenants)
    status = tenants.status(name)
    assert status["phase"] == "Ready"
    assert status["ownerUser"] == owner
    assert status["appliedGrants"] == [owner, grantee]
    assert status["activeSite"] == "dc1"
    assert status["databaseCreated"] is True
    assert len(status["lastAppliedHash"]) == 16
    assert "first-pw" not in str(status)
    assert tenants.logs_in(owner, "first-pw")
    assert tenants.grants(owner) == {f"GRANT ALL PRIVILEGES ON `{literal(db)}`.* TO `{owner}`@`%`"}
    # What the caller's Role lacks is the point: no Secret, no group, no status write.
    denied: list[Callable[[], object]] = [
        lambda: k8s.CoreV1Api(tenants.api).read_namespaced_secret("acme-owner", NS),
        lambda: k8s.CoreV1Api(tenants.api).list_namespaced_secret(NS),
        lambda: tenants.caller.get_namespaced_custom_object(*GROUPS, GROUP),
        lambda: tenants.caller.patch_namespaced_custom_object_status(
            *API, name, {"status": {"phase": "Ready"}}
        ),
    ]
    for request in denied:
        with pytest.raises(k8s.ApiException) as refused:
            request()
        assert refused.value.status == 403
    assert tenants.grants(grantee) == {
        f"GRANT SELECT, DELETE ON `{literal(db)}`.* TO `{grantee}`@`%`"
    }
    # `_` in the schema name is a literal: the owner holds nothing on a schema it would match.
    twin = db.replace("_", "1")
    tenants.sql(f"CREATE DATABASE `{twin}`")
    assert tenants.as_user(owner, "first-pw", f"CREATE TABLE `{db}`.t (i INT)") is None
    assert tenants.as_user(owner, "first-pw", f"CREATE TABLE `{twin}`.t (i INT)") in DENIED
    assert tenants.as_user(owner, "first-pw", f"CREATE DATABASE `{db.replace('_', '2')}`") in DENIED
    # The grant replicated to the replica as well.
    assert wait_for(lambda: tenants.schema_exists(db, "dc2"), 10, "the schema on dc2")


def test_an_unchanged_reapply_issues_no_sql_and_rotations_are_secret_writes(
    tenants: Tenants,
) -> None:
    name, db, owner, _ = order_with_grant(tenants)
    time.sleep(1)
    before = tenants.statements()
    tenants.patch(name, {"metadata": {"annotations": {"touched": "1"}}})
    tenants.owner_secret("acme-owner", owner, "first-pw")  # an identical re-apply
    time.sleep(3)
    assert tenants.statements() == before, "an unchanged order sent statements"
    assert tenants.status(name)["phase"] == "Ready"

    tenants.owner_secret("acme-owner", owner, "second-pw")
    wait_for(lambda: tenants.logs_in(owner, "second-pw"), 30, "the rotated password to work")
    assert not tenants.logs_in(owner, "first-pw")

    rotated = tenants.name("acme_app2")
    failures: list[float] = []
    stop = threading.Event()

    def probe() -> None:
        while not stop.is_set():
            if not (tenants.logs_in(owner, "second-pw") or tenants.logs_in(rotated, "third-pw")):
                failures.append(time.monotonic())
            stop.wait(0.05)

    prober = threading.Thread(target=probe, daemon=True)
    prober.start()
    try:
        tenants.owner_secret("acme-owner", rotated, "third-pw")
        wait_for(lambda: tenants.status(name).get("ownerUser") == rotated, 30, "the new owner")
        wait_for(lambda: not tenants.logs_in(owner, "second-pw"), 10, "the old owner to go")
    finally:
        stop.set()
        prober.join()
    assert failures == [], "there was a moment in which neither owner could log in"
    assert not tenants.user_exists(owner)
    assert tenants.logs_in(rotated, "third-pw")
    assert "OwnerUserRotated" in tenants.events(name)
    assert tenants.grants(rotated) == {
        f"GRANT ALL PRIVILEGES ON `{literal(db)}`.* TO `{rotated}`@`%`"
    }


def test_a_missing_grant_user_fails_without_sql_and_heals_when_the_user_appears(
    tenants: Tenants,
) -> None:
    db, owner, ghost = tenants.name("heal_wms"), tenants.name("heal_app"), tenants.name("ghost")
    tenants.owner_secret("heal-owner", owner, "pw")
    before = tenants.writes()
    tenants.order("tenant-heal", db, "heal-owner", grants=((ghost, ["SELECT"]),))
    tenants.condition("tenant-heal", "GrantUserMissing")
    assert tenants.writes() == before
    assert not tenants.schema_exists(db)
    assert "GrantUserMissing" in tenants.events("tenant-heal")
    tenants.sql(f"CREATE USER '{ghost}'@'%' IDENTIFIED BY 'x'")
    # Nothing a watch sees changed: the order heals on the 60 s come-back its failure asked for.
    tenants.come_back_now("tenant-heal", within=(50, 60))
    tenants.condition("tenant-heal", "DatabaseReconciled", seconds=20)
    assert tenants.grants(ghost) == {f"GRANT SELECT ON `{literal(db)}`.* TO `{ghost}`@`%`"}

    # A verdict of the server itself is Failed MySQLError, worded without the password.
    tenants.owner_secret("odd-owner", tenants.name("odd_app"), "odd-secret-pw")
    tenants.order(
        "tenant-odd",
        tenants.name("odd_wms"),
        "odd-owner",
        characterSet="latin1",
        collation="utf8mb4_unicode_ci",
    )
    status = tenants.condition("tenant-odd", "MySQLError")
    assert status["phase"] == "Failed"
    assert status["message"].startswith("exec CREATE DATABASE")
    assert "odd-secret-pw" not in str(status)


def test_every_refusal_is_reachable_and_runs_no_sql(tenants: Tenants) -> None:
    taken = tenants.name("taken")
    foreign = tenants.name("foreign")
    tenants.sql(f"CREATE DATABASE `{taken}`")
    tenants.sql(f"CREATE USER '{foreign}'@'%' IDENTIFIED BY 'x'")
    tenants.owner_secret("reserved-owner", "root", "pw")
    tenants.owner_secret("invalid-owner", "bad name!", "pw")
    tenants.owner_secret("incomplete-owner", tenants.name("inc"), "")
    tenants.owner_secret("adopt-owner", tenants.name("adopt"), "pw")
    tenants.owner_secret("foreign-owner", foreign, "pw")
    tenants.owner_secret("first-owner", tenants.name("first"), "pw")
    tenants.owner_secret("second-owner", tenants.name("second"), "pw")
    tenants.owner_secret("pattern-owner", tenants.name("pattern"), "pw")
    time.sleep(1)
    before = tenants.writes()
    errors = tenants.errors("MysqlDatabaseApply")
    cases = {
        "tenant-incomplete": (tenants.name("i"), "incomplete-owner", "OwnerSecretIncomplete"),
        "tenant-invalid": (tenants.name("v"), "invalid-owner", "InvalidSpec"),
        "tenant-reserved": (tenants.name("r"), "reserved-owner", "OwnerUserReserved"),
        "tenant-adopt": (taken, "adopt-owner", "DatabasePreExists"),
        "tenant-foreign": (tenants.name("f"), "foreign-owner", "PreExistingOwnerUser"),
        # As a grant pattern `mysq_` would match `mysql`: every account on the server.
        "tenant-pattern": ("mysq_", "pattern-owner", "InvalidSpec"),
    }
    for name, (db, secret, _) in cases.items():
        tenants.order(name, db, secret)
    tenants.order("tenant-a-first", tenants.name("shared"), "first-owner")
    time.sleep(1.1)  # a younger order: creation timestamps have one-second resolution
    tenants.order("tenant-b-second", tenants.name("shared"), "second-owner")
    tenants.order("tenant-c-third", tenants.name("other"), "first-owner")
    # An order whose owner is unknown defers every younger one (PeerOwnerSecretMissing), so it
    # comes last, in a second of its own.
    time.sleep(1.1)
    tenants.order("tenant-missing-secret", tenants.name("m"), "no-such-secret")
    cases["tenant-missing-secret"] = (tenants.name("m"), "no-such-secret", "OwnerSecretMissing")
    for name, (_, _, reason) in cases.items():
        tenants.condition(name, reason)
    tenants.ready("tenant-a-first")
    tenants.condition("tenant-b-second", "DatabaseNameConflict")
    tenants.condition("tenant-c-third", "OwnerConflict")
    first_writes = tenants.writes() - before
    assert first_writes > 0  # the winner applied
    failed = [
        n
        for n in (*cases, "tenant-b-second", "tenant-c-third")
        if tenants.status(n).get("phase") == "Failed"
    ]
    assert len(failed) >= 6, failed
    assert tenants.errors("MysqlDatabaseApply") - errors >= len(failed), (
        "a refusal the error alert misses"
    )
    for name in (*cases, "tenant-b-second", "tenant-c-third"):
        assert tenants.status(name).get("databaseCreated") is not True, name
    assert not tenants.user_exists("bad name!")
    assert not tenants.user_exists(tenants.name("pattern"))
    refused = tenants.condition("tenant-pattern", "InvalidSpec")
    assert 'matches the MySQL system schema "mysql"' in refused["message"]

    # From here on no order applies: the winner goes (Retain: no connection), and a writing
    # statement could only come from a refused order. (Orders refused on what the server holds
    # look again with read-only queries; the gates before them open no connection.)
    tenants.delete("tenant-a-first")
    wait_for(lambda: tenants.get("tenant-a-first") is None, 30, "the winner to go")

    # The group fenced by a planned failover, then without an active site: Pending, no SQL.
    tenants.owner_secret("late-owner", tenants.name("late"), "pw")
    before = tenants.writes()
    tenants.set_group_status({"plannedFailover": {"phase": "Draining"}})
    tenants.order("tenant-late", tenants.name("late"), "late-owner")
    tenants.condition("tenant-late", "PlannedFailoverInProgress")
    tenants.set_group_status({"plannedFailover": {"phase": "Succeeded"}, "activeSite": None})
    tenants.condition("tenant-late", "NoActiveSite")
    assert tenants.writes() == before
    tenants.order("tenant-lost", tenants.name("lost"), "late-owner", groupRef={"name": "nope"})
    tenants.condition("tenant-lost", "GroupNotFound")
    assert tenants.writes() == before

    # The group's gates past its sites, each waiting without a connection.
    cluster = tenants.stack.platform.cluster()
    for gone in ("tenant-late", "tenant-lost"):  # they would apply once the group has a site
        tenants.delete(gone)
    wait_for(
        lambda: tenants.get("tenant-late") is None and tenants.get("tenant-lost") is None,
        30,
        "the parked orders to go",
    )
    tenants.set_group_status({"activeSite": "dc1"})
    tenants.owner_secret("younger-owner", tenants.name("younger"), "pw")
    # tenant-missing-secret is older (a second at least) and its owner is not known yet.
    time.sleep(1.1)
    tenants.order("tenant-younger", tenants.name("younger"), "younger-owner")
    tenants.condition("tenant-younger", "PeerOwnerSecretMissing")
    cluster.delete("secrets", "main-readonly", NS)
    # No watch reports the group's Secrets: the order sees it gone on its Pending come-back.
    tenants.come_back_now("tenant-younger", within=(10, 45))
    tenants.condition("tenant-younger", "GroupSecretMissing", seconds=20)
    groups = "mysqlfailovergroups.shipstream.io"
    cluster.patch(groups, GROUP, {"spec": {"restoreInPlace": {"confirm": "now"}}}, NS)
    tenants.condition("tenant-younger", "RestoreInProgress")
    cluster.patch(groups, GROUP, {"metadata": {"finalizers": ["test/hold"]}}, NS)
    cluster.delete(groups, GROUP, NS)
    tenants.condition("tenant-younger", "GroupTerminating")
    cluster.patch(groups, GROUP, {"metadata": {"finalizers": []}}, NS)
    assert tenants.writes() == before, tenants.sent_since(0)[-20:]


def test_retain_keeps_everything_and_delete_drops_only_what_the_order_created(
    tenants: Tenants,
) -> None:
    name, db, owner, grantee = order_with_grant(tenants, "keep")
    tenants.delete(name)
    wait_for(lambda: tenants.get(name) is None, 30, "the retained order to go")
    assert tenants.schema_exists(db)
    assert tenants.logs_in(owner, "first-pw")
    assert "DatabaseRetained" in tenants.events(name)

    bystander = tenants.name("bystander")
    tenants.sql(f"CREATE DATABASE `{bystander}`")
    db2, owner2 = tenants.name("gone_wms"), tenants.name("gone_app")
    tenants.owner_secret("gone-owner", owner2, "pw")
    tenants.order(
        "tenant-gone", db2, "gone-owner", grants=((grantee, ["SELECT"]),), deletionPolicy="Delete"
    )
    tenants.ready("tenant-gone")
    tenants.delete("tenant-gone")
    wait_for(lambda: tenants.get("tenant-gone") is None, 30, "the deleted order to go")
    assert not tenants.schema_exists(db2)
    assert not tenants.user_exists(owner2)
    assert tenants.user_exists(grantee), "a grants[] principal is never dropped"
    assert tenants.grants(grantee) == {
        f"GRANT SELECT, DELETE ON `{literal(db)}`.* TO `{grantee}`@`%`"
    }
    assert tenants.schema_exists(bystander)
    assert "DatabaseDropped" in tenants.events("tenant-gone")


def test_a_planned_failover_fences_and_the_promoted_site_gets_the_apply(tenants: Tenants) -> None:
    name, db, owner, _ = order_with_grant(tenants, "fo")
    cluster = tenants.stack.platform.cluster()
    doomed_db, doomed_owner = tenants.name("doomed_wms"), tenants.name("doomed_app")
    tenants.owner_secret("doomed-owner", doomed_owner, "pw")
    tenants.order("tenant-doomed", doomed_db, "doomed-owner", deletionPolicy="Delete")
    tenants.ready("tenant-doomed")
    cluster.patch(
        "mysqlfailovergroups.shipstream.io",
        GROUP,
        {"metadata": {"annotations": {"bloodraven.shipstream.io/planned-failover": "dc2"}}},
        NS,
        manager="test",
    )
    tenants.condition(name, "PlannedFailoverInProgress", seconds=20)
    tenants.delete("tenant-doomed")
    wait_for(
        lambda: "DatabaseDropDeferred" in tenants.events("tenant-doomed"), 20, "a deferred drop"
    )
    assert tenants.get("tenant-doomed") is not None
    status = tenants.condition(name, "DatabaseReconciled", seconds=60)
    assert status["activeSite"] == "dc2"
    assert tenants.group.primary == "dc2"
    assert tenants.logs_in(owner, "first-pw", "dc2")
    wait_for(lambda: tenants.get("tenant-doomed") is None, 60, "the deferred drop to run")
    assert not tenants.schema_exists(doomed_db, "dc2")
    assert tenants.schema_exists(db, "dc2")


def test_an_apply_against_a_read_only_replica_waits_instead_of_failing(tenants: Tenants) -> None:
    db, owner = tenants.name("ro_wms"), tenants.name("ro_app")
    tenants.owner_secret("ro-owner", owner, "pw")
    before, errors = tenants.writes("dc2"), tenants.errors("MysqlDatabaseApply")
    # An unplanned failover as a client sees it: activeSite moved, the site still read-only.
    tenants.set_group_status({"activeSite": "dc2"})
    tenants.order("tenant-ro", db, "ro-owner")
    status = tenants.condition("tenant-ro", "PrimaryUnavailable")
    assert status["phase"] == "Pending"
    assert tenants.errors("MysqlDatabaseApply") > errors, "an unreachable primary is an error"
    assert "read-only" in status["message"]
    assert tenants.writes("dc2") == before
    tenants.group.promote("dc2")
    tenants.group.repoint("dc1", "dc2")
    # A promotion no watch sees: the order tries again on its Pending come-back (15 to 45 s).
    tenants.come_back_now("tenant-ro", within=(10, 45))
    tenants.condition("tenant-ro", "DatabaseReconciled", seconds=20)
    assert tenants.schema_exists(db, "dc2")


def test_a_dead_group_is_pending_at_once_and_costs_a_healthy_group_nothing(
    tenants: Tenants,
) -> None:
    hole = tenants.stack.platform.dead_site
    assert hole is not None
    dead = [f"tenant-dead-{i}" for i in range(6)]
    for i, name in enumerate(dead):
        tenants.owner_secret(f"dead-owner-{i}", tenants.name(f"dead{i}"), "pw")
        tenants.order(name, tenants.name(f"dead_{i}"), f"dead-owner-{i}", groupRef={"name": "dead"})
    started = time.monotonic()
    name, _, owner, _ = order_with_grant(tenants)  # a healthy group's order meanwhile
    assert time.monotonic() - started < 20
    assert tenants.logs_in(owner, "first-pw")
    for order in dead:
        status = tenants.condition(order, "PrimaryUnavailable")
        assert 'cannot reach the primary of group "dead"' in status["message"]
        assert status.get("databaseCreated") is not True
    # One connect timeout opened the site's circuit for both workers: the orders behind it were
    # told at once. (At most one pass per slot of the group dialled before that.)
    assert 1 <= hole.accepted <= 2, hole.accepted
    assert tenants.status(name)["phase"] == "Ready"


def test_a_drop_behind_an_open_circuit_comes_back_once_the_circuit_closes(
    tenants: Tenants,
) -> None:
    db, owner = tenants.name("late_wms"), tenants.name("late_app")
    tenants.owner_secret("late-owner", owner, "pw")
    tenants.order("tenant-late", db, "late-owner", deletionPolicy="Delete")
    tenants.ready("tenant-late")
    primary = tenants.group.primary
    errors = tenants.errors("MysqlDatabaseDrop")
    tenants.group.stop_site(primary)
    try:
        tenants.delete("tenant-late")
        wait_for(
            lambda: "DatabaseDropDeferred" in tenants.events("tenant-late"), 20, "a deferred drop"
        )
        assert tenants.errors("MysqlDatabaseDrop") > errors, "a deferred drop is an error"
        # A pooled connection may fail first (its usual wait), then a connect opens the
        # site's circuit for 60 s: the drop comes back only once that closes.
        tenants.come_back_now("tenant-late", within=(15, 76))
        wait_for(
            lambda: tenants.events("tenant-late").count("DatabaseDropDeferred") >= 2,
            20,
            "a second deferred drop",
        )
        tenants.come_back_now("tenant-late", within=(50, 76))
    finally:
        tenants.group.start_site(primary)
    assert tenants.get("tenant-late") is not None  # still waiting, nothing half-done
