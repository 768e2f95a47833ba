"""MysqlDatabases created at the same moment for one database on one group: exactly one gets it.

Each pass of a MysqlDatabase checks the live orders of its namespace on the same group, and the
older order (then the smaller name, within one second) wins; the others are refused with
DatabaseNameConflict before any statement that creates. Created from several threads at once,
the passes run side by side on both worker processes.
"""

from __future__ import annotations

from functools import partial

import pytest

from tests.e2e.conftest import at_once, wait_settled
from tests.e2e.mysql_tenants import Tenants, platform_options, tenants

# The failover group is moved, stopped and failed over: a platform of its own.
pytestmark = [pytest.mark.slow, pytest.mark.private_platform]

__all__ = ["platform_options", "tenants"]

ORDERS = 3


def _reason(tenants: Tenants, name: str) -> str:
    conditions = tenants.status(name).get("conditions") or ()
    return next((str(c.get("reason", "")) for c in conditions if c["type"] == "Ready"), "")


def test_of_orders_created_at_once_for_one_database_exactly_one_gets_it(
    tenants: Tenants,
) -> None:
    database = tenants.name("raced")
    names = [f"race-{n}" for n in range(ORDERS)]
    for n in range(ORDERS):
        tenants.owner_secret(f"race-owner-{n}", tenants.name(f"racer{n}"), "pw")
    at_once([partial(tenants.order, names[n], database, f"race-owner-{n}") for n in range(ORDERS)])
    reasons = wait_settled(
        lambda name: _reason(tenants, name),
        names,
        ("DatabaseReconciled", "DatabaseNameConflict"),
        60,
    )
    winners = [name for name, reason in reasons.items() if reason == "DatabaseReconciled"]
    assert len(winners) == 1, reasons
    assert tenants.schema_exists(database)
    for n, name in enumerate(names):
        owns = name in winners
        assert tenants.user_exists(tenants.name(f"racer{n}")) is owns, (name, reasons)
        assert (tenants.status(name).get("databaseCreated") is True) is owns, name
