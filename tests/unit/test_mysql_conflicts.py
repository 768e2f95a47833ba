"""Older CR wins: exactly one of two MysqlDatabases sharing a schema or an owner refuses."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from tenantdb.core.mysqldatabase.conflicts import Claim, find_conflict, outranks
from tenantdb.core.mysqldatabase.reasons import Phase, Reason

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
ME = Claim("tenant-b", T0, "main", "acme_wms", "acme-owner", "acme_app")


def _older(**fields: object) -> Claim:
    base = Claim("tenant-a", T0 - timedelta(seconds=1), "main", "other_db", "other-owner", "other")
    return replace(base, **fields)  # type: ignore[arg-type]


def test_the_earlier_order_outranks_and_a_tie_goes_to_the_smaller_name() -> None:
    older, same_second = _older(), replace(ME, name="tenant-a")
    assert outranks(older, ME)
    assert not outranks(ME, older)
    assert outranks(same_second, ME)
    assert not outranks(ME, same_second)


@pytest.mark.parametrize(
    ("peer", "phase", "reason", "message"),
    [
        pytest.param(
            _older(database_name="acme_wms"),
            Phase.FAILED,
            Reason.DATABASE_NAME_CONFLICT,
            'MysqlDatabase "tenant-a" already declares database "acme_wms" on group "main"; two'
            " CRs must not manage one database (deletionPolicy: Delete on either would drop the"
            " other's data)",
            id="same-schema",
        ),
        pytest.param(
            _older(owner_secret="acme-owner"),
            Phase.FAILED,
            Reason.OWNER_CONFLICT,
            'MysqlDatabase "tenant-a" already shares owner Secret "acme-owner" on group "main";'
            " each MysqlDatabase must own a distinct user (deleting one CR would drop the other's"
            " credential)",
            id="same-secret",
        ),
        pytest.param(
            _older(owner_user="acme_app"),
            Phase.FAILED,
            Reason.OWNER_CONFLICT,
            'MysqlDatabase "tenant-a" already owns MySQL user "acme_app" on group "main"; each'
            " MysqlDatabase must own a distinct user (deleting one CR would drop the other's"
            " credential)",
            id="same-user",
        ),
        pytest.param(
            _older(owner_user=None),
            Phase.PENDING,
            Reason.PEER_OWNER_SECRET_MISSING,
            'higher-ranked MysqlDatabase "tenant-a"\'s owner Secret "other-owner" cannot be read;'
            " deferring until the ownership check against it can be complete",
            id="older-owner-unknown",
        ),
    ],
)
def test_the_younger_order_refuses(peer: Claim, phase: Phase, reason: Reason, message: str) -> None:
    conflict = find_conflict(ME, [peer])
    assert conflict is not None
    assert (conflict.phase, conflict.reason, conflict.message) == (phase, reason, message)
    assert find_conflict(peer, [ME]) is None, "the older order is not affected"


@pytest.mark.parametrize(
    "peer",
    [
        pytest.param(_older(database_name="acme_wms", deleting=True), id="deleting-peer"),
        pytest.param(_older(database_name="acme_wms", group="other"), id="other-group"),
        pytest.param(replace(ME, name="tenant-c"), id="younger-peer-same-everything"),
        pytest.param(ME, id="itself"),
        pytest.param(_older(), id="nothing-shared"),
    ],
)
def test_nothing_else_is_a_conflict(peer: Claim) -> None:
    assert find_conflict(ME, [peer]) is None


def test_the_first_older_peer_in_list_order_decides() -> None:
    first, second = _older(name="p1", owner_secret="acme-owner"), _older(database_name="acme_wms")
    conflict = find_conflict(ME, [first, second])
    assert conflict is not None
    assert conflict.reason is Reason.OWNER_CONFLICT


def test_schema_names_that_differ_only_in_case_are_one_schema() -> None:
    # A server with lower_case_table_names other than 0 would give both orders one schema.
    conflict = find_conflict(ME, [_older(database_name="ACME_wms")])
    assert conflict is not None
    assert conflict.reason == Reason.DATABASE_NAME_CONFLICT
    assert find_conflict(ME, [_older(database_name="acme_wmz")]) is None
