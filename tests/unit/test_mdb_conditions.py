"""Condition arithmetic, the pinned messages of the catalogue, and the status-write test."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tenantdb.core.mariadbdatabase.conditions import (
    ConditionUpdate,
    DeliveredFields,
    build_status_body,
    compute_conditions,
    compute_status,
    should_write_status,
    truncate_message,
)
from tenantdb.core.mariadbdatabase.models import MariaDBDatabaseStatus
from tenantdb.core.mariadbdatabase.reasons import ConditionType, Reason
from tenantdb.core.mariadbdatabase.validation import CONDITION_MESSAGE_MAX_LENGTH
from tests.unit.mdb_builders import (
    LATER,
    NOW,
    World,
    make_control_plane,
    make_secret,
    target_world,
)
from tests.unit.mdb_pass import run_pass

DB = ConditionType.DATABASE_READY
DELIVERY = ConditionType.DELIVERY_READY


def _up(t: ConditionType, ok: bool, reason: Reason, message: str = "m") -> ConditionUpdate:
    return ConditionUpdate(t, ok, reason, message)


def test_transition_time_is_kept_while_the_status_holds() -> None:
    first = compute_conditions(
        (), [_up(DB, False, Reason.WAITING_FOR_DATABASE)], generation=1, now=NOW
    )
    second = compute_conditions(
        first, [_up(DB, False, Reason.WAITING_FOR_CREDENTIALS, "other")], generation=2, now=LATER
    )
    db = second[0]
    assert db.last_transition_time == NOW
    assert (db.reason, db.message, db.observed_generation) == ("WaitingForCredentials", "other", 2)


def test_transition_time_moves_on_a_flip_without_microseconds() -> None:
    first = compute_conditions(
        (), [_up(DB, False, Reason.WAITING_FOR_DATABASE)], generation=1, now=NOW
    )
    second = compute_conditions(
        first, [_up(DB, True, Reason.DATABASE_PROVISIONED)], generation=1, now=LATER
    )
    assert second[0].last_transition_time == LATER.replace(microsecond=0)


@pytest.mark.parametrize(
    ("updates", "ready"),
    [
        pytest.param([], ("False", "NotAllReady"), id="none"),
        pytest.param(
            [_up(DB, True, Reason.DATABASE_PROVISIONED)],
            ("False", "NotAllReady"),
            id="delivery-missing",
        ),
        pytest.param(
            [
                _up(DB, True, Reason.DATABASE_PROVISIONED),
                _up(DELIVERY, False, Reason.DELIVERY_REFUSED),
            ],
            ("False", "NotAllReady"),
            id="delivery-false",
        ),
        pytest.param(
            [_up(DB, True, Reason.DATABASE_PROVISIONED), _up(DELIVERY, True, Reason.DELIVERED)],
            ("True", "AllReady"),
            id="both-true",
        ),
    ],
)
def test_ready_aggregate(updates: list[ConditionUpdate], ready: tuple[str, str]) -> None:
    conditions = compute_conditions((), updates, generation=1, now=NOW)
    got = next(c for c in conditions if c.type == "Ready")
    assert (got.status, got.reason) == ready
    expected = (
        "All sub-conditions are ready"
        if ready[0] == "True"
        else ("One or more sub-conditions are not ready")
    )
    assert got.message == expected


@pytest.mark.parametrize(
    ("length", "kept"),
    [
        pytest.param(10, 10, id="short"),
        pytest.param(CONDITION_MESSAGE_MAX_LENGTH, CONDITION_MESSAGE_MAX_LENGTH, id="at-limit"),
        pytest.param(
            CONDITION_MESSAGE_MAX_LENGTH + 5, CONDITION_MESSAGE_MAX_LENGTH, id="over-limit"
        ),
    ],
)
def test_messages_are_truncated_to_the_crd_limit(length: int, kept: int) -> None:
    message = truncate_message("x" * length)
    assert len(message) == kept
    assert message.endswith("...") is (length > CONDITION_MESSAGE_MAX_LENGTH)


def test_refusals_keep_status_fields_and_delivery_sets_them() -> None:
    old = MariaDBDatabaseStatus(host="h", port=1, secret_name="s", role_name="r", database_name="d")
    refused = compute_status(old, [_up(DB, False, Reason.CLUSTER_NOT_READY)], generation=2, now=NOW)
    assert (refused.host, refused.port, refused.role_name, refused.database_name) == (
        "h",
        1,
        "r",
        "d",
    )
    assert refused.observed_generation == 2
    delivered = compute_status(
        old,
        [],
        generation=2,
        now=NOW,
        delivered=DeliveredFields("db", 3306, LATER, "app-db-credentials", ("host",)),
    )
    assert (delivered.host, delivered.port) == ("db", 3306)
    assert delivered.credentials_refreshed_at == LATER.replace(microsecond=0)


def test_unchanged_status_needs_no_write() -> None:
    old = compute_status(
        MariaDBDatabaseStatus(), [_up(DB, True, Reason.DATABASE_PROVISIONED)], generation=1, now=NOW
    )
    again = compute_status(
        old, [_up(DB, True, Reason.DATABASE_PROVISIONED)], generation=1, now=LATER
    )
    assert not should_write_status(old, again)
    bumped = compute_status(
        old, [_up(DB, True, Reason.DATABASE_PROVISIONED)], generation=2, now=LATER
    )
    assert should_write_status(old, bumped)


def test_round_trip_through_the_api_shape_is_stable() -> None:
    status = compute_status(
        MariaDBDatabaseStatus(),
        [_up(DB, True, Reason.DATABASE_PROVISIONED)],
        generation=1,
        now=LATER,
    )
    parsed = MariaDBDatabaseStatus.model_validate(build_status_body(status))
    assert not should_write_status(parsed, status)
    assert (
        build_status_body(status)["conditions"][0]["lastTransitionTime"] == "2026-03-01T12:05:00Z"
    )


# The message strings the reference unit tests pin, reproduced through whole passes.
TLS_DB = {
    "clusterRef": {"name": "openstack-db"},
    "tls": {"mode": "verify-full", "caBundleSecretRef": {"name": "db-ca"}},
}


@pytest.mark.parametrize(
    ("world", "condition", "message"),
    [
        pytest.param(
            World(mariadb=None),
            "DatabaseReady",
            'MariaDB cluster "openstack-db" in namespace "default" is not ready',
            id="ClusterNotReady",
        ),
        pytest.param(
            World(client_certificate=None),
            "DatabaseReady",
            "the OpenBao client certificate default/order-db-openbao-client is not issued yet",
            id="WaitingForClientCertificate",
        ),
        pytest.param(
            World(),
            "DeliveryReady",
            'credentials are delivered in Secret "app-db-credentials" (keys host, port, database, '
            'username, password) in namespace "tenant-a" on the management cluster',
            id="Delivered",
        ),
        pytest.param(
            World(cp=make_control_plane(database=TLS_DB)),
            "DeliveryReady",
            "the database CA bundle Secret default/db-ca does not carry ca.crt yet",
            id="WaitingForCABundle",
        ),
        pytest.param(
            target_world(published=""),
            "DeliveryReady",
            'the order lives on target cluster "edge-1", which cannot reach the in-cluster '
            "MariaDB Service openstack-db.default.svc:3306; set "
            "spec.infrastructure.publishedDatabaseEndpoint on ControlPlane default/cp",
            id="DatabaseNotPublished",
        ),
        pytest.param(
            target_world(published="db.example.test:99999"),
            "DeliveryReady",
            'spec.infrastructure.publishedDatabaseEndpoint "db.example.test:99999" is not '
            'host:port: port "99999" is not in 1-65535',
            id="DeliveryError-endpoint",
        ),
        pytest.param(
            World(delivered=make_secret("app-db-credentials", "tenant-a", {})),
            "DeliveryReady",
            "Secret tenant-a/app-db-credentials exists and is not owned by this order; delete "
            "it or rename the order",
            id="DeliveryRefused",
        ),
    ],
)
def test_pinned_messages(world: World, condition: str, message: str) -> None:
    got = run_pass(world).condition(condition)
    assert got is not None
    assert got[2] == message


def test_requeue_constants() -> None:
    from tenantdb.core.mariadbdatabase import results

    assert timedelta(seconds=1) == results.REQUEUE_NEXT_PASS
    assert timedelta(seconds=10) == results.REQUEUE_SHORT
    assert timedelta(minutes=1) == results.REQUEUE_ASSIGNMENT
    assert timedelta(minutes=10) == results.ORDER_REFRESH_AFTER
