"""A MysqlDatabase pass end to end over fake I/O: what a caller would see of each outcome.

Each test runs the real entry and the real apply or drop step (``tests.unit.mysql_pass``) and
asserts what the order shows (phase, Ready condition), the Events, the SQL the primary received
and when the order comes back. The slow twins of these cases are the e2e tests of the kind.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import REGISTRY

from tenantdb.adapters.mysqladmin import AdminError, GroupBusyError, TLSRequiredError
from tenantdb.adapters.mysqldatabase import CredentialError
from tenantdb.adapters.workqueue import LeaseLostError
from tenantdb.core.events import EventType
from tenantdb.core.mysqldatabase.apply import OWNER_PASSWORD
from tenantdb.core.mysqldatabase.models import MysqlDatabaseStatus
from tenantdb.core.mysqldatabase.naming import IDENTITY
from tenantdb.core.mysqldatabase.sql import SCHEMA_PRIVILEGES, Dialect
from tenantdb.settings import load_settings
from tests.unit.mysql_pass import (
    DATABASE,
    KEY,
    NAMESPACE,
    OWNER_SECRET,
    OWNER_USER,
    PASSWORD,
    PassRun,
    World,
    make_group,
    make_order,
    make_runtime,
    run_pass,
)
from tests.unit.tamper import rewrite_note

VERIFY = load_settings().mysql_verify_seconds
APPLIED: dict[str, Any] = {
    "phase": "Ready",
    "databaseCreated": True,
    "ownerUser": OWNER_USER,
    "appliedGrants": [OWNER_USER],
    "activeSite": "dc1",
    "lastAppliedHash": "0f94bf2ae42379c3",
}
"""The status of an order its last apply made Ready."""
APPLIED_ROWS: list[tuple[Any, ...]] = [
    ("read_only", 0, ""),
    ("schema", "utf8mb4", "utf8mb4_unicode_ci"),
    ("user", OWNER_USER, ""),
    *(("privilege", f"'{OWNER_USER}'@'%'", p) for p in SCHEMA_PRIVILEGES[Dialect.MARIADB]),
]
"""What the primary answers once the order's apply ran."""


def _errors(sub_reconciler: str = "MysqlDatabaseApply") -> float:
    """What the error metric counted of the chain so far."""
    labels = {"sub_reconciler": sub_reconciler, "condition_type": "Ready"}
    return REGISTRY.get_sample_value("c5c3_operator_reconcile_errors_total", labels) or 0.0


def _verbs(run: PassRun) -> list[str]:
    """The first two words of each statement the primary received."""
    return [" ".join(s.template.split(" ", 2)[:2]) for s in run.io.sent]


# -- apply ---------------------------------------------------------------------------------------


def test_a_new_order_gets_its_database_owner_and_grant_and_a_ready_status() -> None:
    run = run_pass(World())
    assert run.steps == ("apply",)
    assert run.reason == "Applied"
    assert run.result.requeue_after == VERIFY
    assert run.io.log == ["status:Creating", "status:Ready"]
    assert run.io.condition()[:2] == ("True", "DatabaseReconciled")
    assert {k: run.io.status[k] for k in APPLIED if k != "lastAppliedHash"} == {
        k: v for k, v in APPLIED.items() if k != "lastAppliedHash"
    }
    assert _verbs(run) == ["CREATE DATABASE", "CREATE USER", "GRANT ALL"]
    (session,) = run.io.sessions
    assert len(session.queries) == 1  # one look before the batch
    assert session.bound == [{OWNER_PASSWORD: PASSWORD}]
    assert PASSWORD not in str(run.io.statuses) + str(run.io.events) + str(run.entry)


def _refused(reason: str) -> float:
    labels = {"note": "pass", "reason": reason}
    return REGISTRY.get_sample_value("tenantdb_notes_refused_total", labels) or 0.0


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(note: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        for name in parents:
            note = note.setdefault(name, {})
        note[last] = value

    return change


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(_set("spec.owner_username", "root"), id="owner-is-root"),
        pytest.param(_set("order.status.ownerUser", "replicator"), id="record-names-reserved"),
        pytest.param(_set("order.status.pendingOwnerUser", "x'@'%"), id="record-malformed"),
        pytest.param(_set("reserved", []), id="no-reserved-accounts"),
        pytest.param(_set("spec.database_name", "mysql"), id="system-schema"),
        pytest.param(_set("spec.database_name", "other_db"), id="another-schema"),
        pytest.param(
            _set("spec.grants", [{"username": "attacker", "privileges": ["ALL PRIVILEGES"]}]),
            id="grantee-not-ordered",
        ),
        pytest.param(_set("spec.owner_privileges", ["GRANT OPTION"]), id="privilege-not-allowed"),
        pytest.param(_set("order.metadata.name", "other-order"), id="another-order"),
    ],
)
def test_an_apply_note_that_says_more_than_the_order_sends_nothing(
    tamper: Callable[[dict[str, Any]], None],
) -> None:
    # The note is sealed; should one be rewritten all the same (a leaked key), the apply step
    # checks it again against the order it serves before a statement is sent.
    world = World()
    runtime = make_runtime(world)

    def rewrite(_: World) -> None:
        rewrite_note(runtime, tamper)

    before = _refused("Mismatch")
    run = run_pass(world, runtime=runtime, before_steps=rewrite)
    assert run.steps == ("apply",)
    assert run.reason == "NoteRefused"
    assert run.result.again  # the order is planned afresh
    assert run.io.sessions == []  # not even a connection
    assert _refused("Mismatch") == before + 1


def test_an_order_without_the_finalizer_gets_it_before_anything_else() -> None:
    run = run_pass(World(order=make_order(finalizers=())))
    assert run.io.log[0] == "finalizers"
    assert run.io.finalizers == [[IDENTITY.finalizer]]
    assert run.reason == "Applied"


def test_an_unchanged_order_is_verified_once_a_period_and_otherwise_opens_no_connection() -> None:
    world = World()
    first = run_pass(world)
    second = run_pass(world, runtime=first.runtime)
    assert second.entry.reason == "UpToDate"
    assert second.entry.requeue_after == VERIFY
    assert len(second.io.sessions) == 1  # only the first pass's
    first.runtime.queue.release_period("mysql-verify", KEY)
    world.rows = APPLIED_ROWS
    third = run_pass(world, runtime=first.runtime)
    assert third.steps == (), "a check that finds nothing chains no step"
    assert third.reason == "Verified"
    assert third.entry.requeue_after == VERIFY
    assert len(third.io.sessions) == 2
    assert third.io.reused == [False, False], "a full pass reads the admin login afresh"
    assert len(third.io.sent) == 3  # the first pass's: the check sent nothing


def _with_watcher(run: PassRun) -> None:
    """A watcher leads: converged passes leave a basis that refreshes may trust."""
    queue = run.runtime.queue
    queue.redis.set(queue.keys.watcher_leader, "term-1")


def test_a_refresh_the_watches_vouch_for_looks_only_at_the_primary_and_only_when_due() -> None:
    world = World()
    first = run_pass(world)
    _with_watcher(first)
    converged = run_pass(world, runtime=first.runtime)
    assert converged.entry.reason == "UpToDate"
    _, note = first.runtime.queue.look_quiet(KEY)
    assert note is not None
    assert len(note) < 1500, "every Ready order keeps one in Redis"
    assert "conditions" not in note
    assert PASSWORD not in note
    quiet = run_pass(world, runtime=first.runtime)
    assert quiet.entry.reason == "Quiet"
    assert quiet.entry.requeue_after == VERIFY
    assert len(quiet.io.sessions) == 1, "no look while the drift check is not due"

    first.runtime.queue.release_period("mysql-verify", KEY)
    world.rows = APPLIED_ROWS
    checked = run_pass(world, runtime=first.runtime)
    assert checked.entry.reason == "Quiet"
    assert checked.io.reused == [False, True], "the quiet check looks on a login read lately"
    assert len(checked.io.sent) == 3  # the first pass's: the check sent nothing
    assert not first.runtime.queue.claim_period("mysql-verify", KEY, 1000), "checked: claimed"


def test_drift_a_quiet_check_finds_is_repaired_by_the_full_pass_it_falls_back_to() -> None:
    world = World()
    first = run_pass(world)
    _with_watcher(first)
    run_pass(world, runtime=first.runtime)  # converged: leaves the basis
    first.runtime.queue.release_period("mysql-verify", KEY)
    world.rows = [row for row in APPLIED_ROWS if row[0] != "user"]
    again = run_pass(world, runtime=first.runtime)
    assert again.reason == "Repaired"
    assert again.io.reused == [False, True, False, False], "quiet look, full look, repair"
    assert _verbs(again)[3:] == ["CREATE USER"]


def test_a_password_to_set_again_is_never_left_to_a_quiet_refresh() -> None:
    world = World()
    first = run_pass(world)
    _with_watcher(first)
    run_pass(world, runtime=first.runtime)  # converged: leaves the basis
    queue = first.runtime.queue
    queue.claim_period("mysql-reassert", KEY, 60_000)
    queue.release_period("mysql-verify", KEY)
    world.rows = APPLIED_ROWS
    again = run_pass(world, runtime=first.runtime)
    assert again.steps == ("apply",)
    assert again.io.reused == [False, False], "no quiet look: the full pass sets the password"
    assert _verbs(again)[3:] == ["ALTER USER"]
    assert not queue.holds_period("mysql-reassert", KEY)


def test_a_ready_order_whose_account_went_missing_is_repaired_with_an_event() -> None:
    world = World()
    first = run_pass(world)
    first.runtime.queue.release_period("mysql-verify", KEY)
    world.rows = [row for row in APPLIED_ROWS if row[0] != "user"]
    again = run_pass(world, runtime=first.runtime)
    assert again.reason == "Repaired"
    assert _verbs(again)[3:] == ["CREATE USER"]
    assert [e.reason for e in again.io.events] == ["DriftRepaired"]
    assert again.io.log[2:] == ["status:Ready", "event:DriftRepaired"]


def _unowned_peer(name: str, user: str, world: World) -> dict[str, Any]:
    """A peer on the group that has recorded no owner yet; its Secret names ``user``."""
    world.secrets[f"{name}-owner"] = {"username": user, "password": "peer-pw"}
    return make_order(
        name=name, database=f"{name.replace('-', '_')}_db", owner_secret=f"{name}-owner"
    )


def test_a_new_order_reads_the_owner_secrets_of_older_unowned_peers_only() -> None:
    world = World()
    world.peers = tuple(
        _unowned_peer(name, f"{name.replace('-', '_')}_app", world)
        for name in ("tenant-aaa", "tenant-zzz-1", "tenant-zzz-2")
    )
    run = run_pass(world)
    assert run.reason == "Applied"
    read = set(run.io.secret_reads)
    assert "tenant-aaa-owner" in read, "an older peer may own the same user: the check reads it"
    assert not read & {"tenant-zzz-1-owner", "tenant-zzz-2-owner"}, "newer peers yield to it"


def test_a_rotation_leaves_the_old_owner_to_a_newer_peer_whose_secret_names_it() -> None:
    world = World()
    first = run_pass(world)
    assert first.reason == "Applied"
    world.secrets[OWNER_SECRET] = {"username": "acme_next", "password": PASSWORD}
    world.rows = APPLIED_ROWS
    world.peers = (_unowned_peer("tenant-zzz", OWNER_USER, world),)
    rotated = run_pass(world, runtime=first.runtime)
    assert "tenant-zzz-owner" in rotated.io.secret_reads
    assert rotated.reason == "Applied"
    assert "OwnerUserDropSkipped" in [e.reason for e in rotated.io.events]
    assert "DROP USER" not in _verbs(rotated)


def test_an_apply_beside_ten_thousand_ready_peers_carries_only_the_claims_it_may_need() -> None:
    # After a gap in the watches a pass lists its namespace, and every order on the group is a
    # peer. The apply step needs what peers claim only of the users it may drop: its note must
    # not grow with the group (a note past the limit fails the pass).
    world = World()
    world.rows = APPLIED_ROWS
    world.order = make_order(status=APPLIED, generation=2)
    world.secrets[OWNER_SECRET] = {"username": "acme_next", "password": PASSWORD}
    world.peers = tuple(
        make_order(
            name=f"peer-{i}",
            database=f"peer_{i}_db",
            owner_secret=f"peer-{i}-owner",
            status={**APPLIED, "ownerUser": f"peer_{i}_app", "appliedGrants": [f"peer_{i}_app"]},
        )
        for i in range(10_000)
    )
    run = run_pass(world)
    assert run.reason == "Applied"
    assert run.runtime.note is not None
    assert len(run.runtime.note) < 8192
    assert "DROP USER" in _verbs(run), "no peer claims the previous owner: it is dropped"


def test_an_apply_wakes_the_peers_that_wait_on_the_group() -> None:
    run = run_pass(World(waiting=("tenant-other",)))
    assert run.reason == "Applied"
    assert run.runtime.published == [IDENTITY.key(NAMESPACE, "tenant-other")]


@pytest.mark.parametrize(
    ("secrets", "reason", "message"),
    [
        pytest.param({}, "OwnerSecretMissing",
                     f'Secret "{OWNER_SECRET}" not found in namespace {NAMESPACE}', id="missing"),
        pytest.param({OWNER_SECRET: {"username": OWNER_USER, "password": ""}},
                     "OwnerSecretIncomplete",
                     f'Secret "{OWNER_SECRET}" must carry non-empty username and password keys',
                     id="no-password"),
    ],
)  # fmt: skip
def test_an_owner_secret_that_cannot_be_used_stops_the_pass_pending_without_sql(
    secrets: dict[str, dict[str, str]], reason: str, message: str
) -> None:
    world = World()
    world.secrets = {
        **{k: v for k, v in world.secrets.items() if k != OWNER_SECRET},
        **secrets,
    }
    run = run_pass(world)
    assert run.steps == ()
    assert run.entry.reason == reason
    assert run.io.status["phase"] == "Pending"
    assert run.io.condition() == ("False", reason, message)
    assert run.io.sessions == []
    assert run.io.events == []


@pytest.mark.parametrize(
    ("error", "problem"),
    [
        pytest.param(AdminError("connection refused", code=2003, transient=True),
                     "connection refused", id="unreachable"),
        pytest.param(TLSRequiredError("the group asks for no TLS; plaintext refused"),
                     "the group asks for no TLS; plaintext refused", id="tls-required"),
        pytest.param(CredentialError('operator Secret "main-operator" not found'),
                     'operator Secret "main-operator" not found', id="no-admin-credential"),
    ],
)  # fmt: skip
def test_a_primary_that_cannot_be_reached_leaves_the_order_pending_and_counted(
    error: BaseException, problem: str
) -> None:
    before = _errors()
    run = run_pass(World(open_error=error, probe=_errors))
    assert run.io.probed == [before + 1]  # counted before the order shows it
    assert run.reason == "PrimaryUnavailable"
    assert run.io.log == ["status:Pending"]
    assert run.io.condition() == (
        "False",
        "PrimaryUnavailable",
        f'cannot reach the primary of group "main": {problem}',
    )
    assert _errors() == before + 1
    assert run.io.sent == []
    assert run.result.requeue_after is not None
    assert run.result.requeue_after > 0


def test_an_active_site_that_is_no_primary_candidate_leaves_the_order_pending() -> None:
    run = run_pass(World(group=make_group(dc1_role="replica")))
    assert run.reason == "PrimaryUnavailable"
    assert run.io.condition()[2] == (
        'cannot reach the primary of group "main": active site "dc1" is not a primary-candidate'
    )
    assert run.io.sessions == []


def test_a_busy_group_brings_the_order_back_shortly_without_a_status_write() -> None:
    run = run_pass(World(open_error=GroupBusyError("2 passes already work on the group")))
    assert run.reason == "GroupBusy"
    assert run.result.completed is False
    assert run.result.requeue_after is not None
    assert 1.0 <= run.result.requeue_after < 2.0
    assert run.io.statuses == []


def test_a_database_that_exists_already_is_refused_failed_without_sql() -> None:
    world = World(rows=[("read_only", 0, ""), ("schema", "utf8mb4", "utf8mb4_unicode_ci")])
    world.probe = _errors
    before = _errors()
    run = run_pass(world)
    assert run.io.probed == [before + 1]
    assert run.reason == "DatabasePreExists"
    assert run.io.log == ["status:Failed", "event:DatabasePreExists"]
    assert run.io.events[0].type is EventType.WARNING
    assert run.io.sent == []
    assert _errors() == before + 1


def test_a_read_only_primary_waits_pending_without_sql() -> None:
    run = run_pass(World(rows=[("read_only", 1, "")]))
    assert run.io.status["phase"] == "Pending"
    assert run.io.sent == []


def test_a_statement_the_server_refuses_fails_the_order_with_only_what_ran_recorded() -> None:
    refused = AdminError("exec GRANT ...: (1044) access denied", code=1044, transient=False)
    run = run_pass(World(execute_error=(2, refused)))
    assert run.reason == "MySQLError"
    assert run.io.log == ["status:Creating", "status:Failed", "event:MySQLError"]
    assert run.io.status["ownerUser"] == OWNER_USER
    assert "appliedGrants" not in run.io.status or run.io.status["appliedGrants"] == []
    assert len(run.io.sent) == 2


def test_a_connection_lost_mid_batch_waits_pending_and_withdraws_what_cannot_have_run() -> None:
    lost = AdminError("connection lost", code=2013, transient=True, may_have_run=False)
    run = run_pass(World(execute_error=(0, lost)))
    assert run.reason == "PrimaryUnavailable"
    assert run.io.log == ["status:Creating", "status:Pending"]
    assert run.io.condition()[2].startswith('transient MySQL error on group "main"')
    assert run.io.status.get("databaseCreated") is not True


def test_an_apply_that_lost_its_lease_sends_nothing_more_and_reasserts_the_password_later() -> None:
    world = World()
    runtime = make_runtime(world)

    def lose_lease(world: World) -> None:
        runtime.queue.redis.flushall()

    run = run_pass(world, runtime=runtime, before_steps=lose_lease)
    assert isinstance(run.raised, LeaseLostError)
    assert run.io.sent == []
    assert runtime.queue.take_period("mysql-reassert", KEY)


def test_a_step_retried_after_the_order_was_deleted_gives_way_to_the_teardown() -> None:
    def delete(world: World) -> None:
        world.order = make_order(deleting=True)

    run = run_pass(World(), attempt=1, before_steps=delete)
    assert run.reason == "DeletedMeanwhile"
    assert run.result.again is True
    assert run.io.sessions == []
    assert run.io.statuses == []


def test_a_refused_order_revokes_the_pattern_grants_its_records_say_it_made() -> None:
    # Made before names were checked as patterns: `mysq_` reads as `mysql` in a grant, and
    # its owner held ALL on it. Refused now, it still revokes what reaches other schemas.
    rows = [
        ("read_only", 0, ""),
        ("schema", "utf8mb4", "utf8mb4_unicode_ci"),
        ("unescaped", f"'{OWNER_USER}'@'%'", "SELECT,INSERT"),
    ]
    order = make_order(database="mysq_", status=APPLIED)
    run = run_pass(World(order=order, rows=rows))
    assert run.steps == ()
    assert run.io.condition()[:2] == ("False", "InvalidSpec")
    assert [s.shown for s in run.io.sent] == [
        f"REVOKE ALL PRIVILEGES ON `mysq_`.* FROM '{OWNER_USER}'@'%'"
    ]
    # Once none is left, a pass looks and sends nothing.
    again = run_pass(World(order=order, rows=rows[:2]))
    assert again.io.sent == []


def test_a_refused_order_that_never_ran_sql_opens_no_connection() -> None:
    run = run_pass(World(order=make_order(database="mysq_")))
    assert run.io.condition()[:2] == ("False", "InvalidSpec")
    assert run.io.sessions == []


# -- teardown ------------------------------------------------------------------------------------


def _deleting(policy: str = "Delete", **status: Any) -> dict[str, Any]:
    return make_order(deleting=True, deletion_policy=policy, status={**APPLIED, **status})


def test_a_deleted_order_drops_its_database_and_owner_then_releases() -> None:
    run = run_pass(World(order=_deleting()))
    assert run.steps == ("drop",)
    assert run.reason == "FinalizerReleased"
    assert run.io.log[0] == "status:Deleting"
    assert run.io.log[-1] == "finalizers"
    assert run.io.finalizers == [[]]
    sent = [s.template for s in run.io.sent]
    assert any(t.startswith("DROP DATABASE") for t in sent)
    assert any(t.startswith("DROP USER") for t in sent)


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(_set("plan.drop_users", ["root"]), id="drop-root"),
        pytest.param(_set("plan.revoke", ["mysql.sys"]), id="revoke-built-in"),
        pytest.param(_set("plan.drop_users", ["x'@'%"]), id="malformed-user"),
        pytest.param(_set("plan.database", "mysql"), id="drop-system-schema"),
        pytest.param(_set("plan.database", "other_db"), id="drop-another-schema"),
        pytest.param(_set("order.metadata.name", "other-order"), id="another-order"),
    ],
)
def test_a_drop_note_that_says_more_than_the_order_drops_nothing(
    tamper: Callable[[dict[str, Any]], None],
) -> None:
    world = World(order=_deleting())
    runtime = make_runtime(world)

    def rewrite(_: World) -> None:
        rewrite_note(runtime, tamper)

    before = _refused("Mismatch")
    run = run_pass(world, runtime=runtime, before_steps=rewrite)
    assert run.steps == ("drop",)
    assert run.reason == "NoteRefused"
    assert run.io.sessions == []
    assert run.io.finalizers == []  # the finalizer stays until a pass drops for real
    assert _refused("Mismatch") == before + 1


def test_a_retained_order_without_a_pattern_in_its_name_releases_at_once_without_a_connection() -> (
    None
):
    order = make_order(database="acmewms", deleting=True, deletion_policy="Retain", status=APPLIED)
    run = run_pass(World(order=order))
    assert run.steps == ()
    assert run.entry.reason == "FinalizerReleased"
    assert [e.reason for e in run.io.events] == ["DatabaseRetained"]
    assert run.io.sessions == []


def test_a_retained_order_revokes_only_its_grants_under_its_name_read_as_a_pattern() -> None:
    # An earlier version granted on `acme_wms`.*, which also matches acme1wms, acme2wms, ...:
    # the schema stays with its exact grants, the pattern goes with the order.
    rows = [
        ("read_only", 0, ""),
        ("schema", "utf8mb4", "utf8mb4_unicode_ci"),
        ("privilege", f"'{OWNER_USER}'@'%'", "SELECT"),
        ("unescaped", f"'{OWNER_USER}'@'%'", "SELECT"),
    ]
    run = run_pass(World(order=_deleting("Retain"), rows=rows))
    assert run.steps == ("drop",)
    assert run.reason == "FinalizerReleased"
    assert [s.shown for s in run.io.sent] == [
        f"REVOKE ALL PRIVILEGES ON `{DATABASE}`.* FROM '{OWNER_USER}'@'%'"
    ]
    assert [e.reason for e in run.io.events] == ["DatabaseRetained"]
    assert run.io.finalizers == [[]]


def test_a_drop_on_a_fenced_group_is_deferred_with_the_order_saying_why() -> None:
    group = make_group(plannedFailover={"phase": "Draining"})
    run = run_pass(World(order=_deleting(), group=group))
    assert run.entry.reason == "DropDeferred"
    assert run.io.log == ["status:Deleting", "event:DatabaseDropDeferred"]
    assert run.io.finalizers == []
    assert run.io.sessions == []
    assert "deferring DROP" in run.io.status["message"]


def test_a_drop_whose_primary_is_unreachable_is_deferred_and_counted() -> None:
    drop = "MysqlDatabaseDrop"
    before = _errors(drop)
    error = AdminError("connection refused", code=2003, transient=True)
    run = run_pass(World(order=_deleting(), open_error=error, probe=lambda: _errors(drop)))
    assert run.io.probed == [before, before + 1]  # counted before the deferral shows
    assert run.reason == "DropDeferred"
    assert run.io.log == ["status:Deleting", "status:Deleting", "event:DatabaseDropDeferred"]
    assert run.io.status["message"] == (
        f'dropping database {DATABASE}: waiting for the primary of group "main"'
    )
    assert run.io.events[-1].type is EventType.WARNING
    assert run.io.finalizers == []
    assert _errors(drop) == before + 1


def test_a_drop_on_a_read_only_primary_is_deferred_without_sql() -> None:
    run = run_pass(World(order=_deleting(), rows=[("read_only", 1, "")]))
    assert run.reason == "DropDeferred"
    assert run.io.sent == []
    assert run.io.finalizers == []


def test_a_drop_the_server_refuses_says_so_on_the_order_and_raises() -> None:
    refused = AdminError("exec DROP ...: (1044) access denied", code=1044, transient=False)
    run = run_pass(World(order=_deleting(), execute_error=(0, refused)))
    assert run.raised is refused
    assert run.io.status["message"].startswith(f"dropping database {DATABASE}: exec DROP")
    assert run.io.finalizers == []


# -- what the order's body says ------------------------------------------------------------------


def _spec(**changes: Any) -> dict[str, Any]:
    order = make_order()
    order["spec"] = {k: v for k, v in {**order["spec"], **changes}.items() if v is not None}
    return order


@pytest.mark.parametrize(
    ("order", "phase", "reason", "message"),
    [
        pytest.param(_spec(owner=None), "Pending", "OwnerSecretMissing",
                     f'Secret "" not found in namespace {NAMESPACE}', id="no-owner"),
        pytest.param(_spec(groupRef=None), "Pending", "GroupNotFound",
                     f'MysqlFailoverGroup "" not found in namespace {NAMESPACE}', id="no-group"),
        pytest.param(_spec(databaseName="Sys"), "Failed", "InvalidSpec",
                     'spec.databaseName "Sys" is a MySQL system schema; tenant databases must'
                     " use their own schema name", id="system-schema"),
        pytest.param(_spec(databaseName=5), "Failed", "InvalidSpec", None, id="not-a-string"),
        pytest.param(_spec(owner="acme-owner"), "Pending", "OwnerSecretMissing",
                     f'Secret "" not found in namespace {NAMESPACE}', id="owner-not-an-object"),
        pytest.param(_spec(grants="maester"), "Failed", "InvalidSpec",
                     "spec.grants must be a list", id="grants-not-a-list"),
        pytest.param(_spec(owner={"secretName": OWNER_SECRET, "privileges": "SELECT"}), "Failed",
                     "InvalidSpec", "spec.owner.privileges must be a list of strings",
                     id="privileges-not-a-list"),
    ],
)  # fmt: skip
def test_an_order_whose_spec_is_missing_or_invalid_says_so_without_sql(
    order: dict[str, Any], phase: str, reason: str, message: str | None
) -> None:
    run = run_pass(World(order=order))
    assert run.steps == ()
    assert run.io.status["phase"] == phase
    assert run.io.condition()[1] == reason
    if message is not None:
        assert run.io.condition()[2] == message
    assert run.io.sessions == []


def test_an_order_whose_database_name_is_not_a_string_reads_as_one_without_a_name() -> None:
    unnamed = run_pass(World(order=_spec(databaseName=""))).io.condition()
    assert run_pass(World(order=_spec(databaseName=5))).io.condition() == unnamed


@pytest.mark.parametrize(
    "world",
    [
        pytest.param(World(), id="applied"),
        pytest.param(World(open_error=GroupBusyError("busy")), id="busy"),
        pytest.param(World(execute_error=(1, AdminError("x", code=1, transient=False))),
                     id="failed"),
        pytest.param(World(order=_deleting()), id="dropped"),
        pytest.param(World(group=make_group(plannedFailover={"phase": "Draining"})),
                     id="fenced"),
    ],
)  # fmt: skip
def test_every_status_a_pass_writes_is_what_the_status_model_dumps(world: World) -> None:
    for status in run_pass(world).io.statuses:
        assert MysqlDatabaseStatus.model_validate(status).body() == status
