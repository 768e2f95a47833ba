"""MysqlDatabases created at the same moment for one database on one group: exactly one gets it.

Each pass of a MysqlDatabase checks the live orders of its namespace on the same group, and the
older order (then the smaller name, within one second) wins; the others are refused with
DatabaseNameConflict before any statement that creates. Created from several threads at once,
the passes run side by side on both worker processes.
"""

from __future__ import annotations

import threading

import pytest

from tests.e2e.conftest import wait_for
from tests.e2e.mysql_tenants import Tenants, platform_options, tenants

pytestmark = [pytest.mark.slow, pytest.mark.real_server]

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
    start = threading.Barrier(ORDERS)
    errors: list[BaseException] = []

    def create(n: int) -> None:
        start.wait()
        try:
            tenants.order(names[n], database, f"race-owner-{n}")
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=create, args=(n,)) for n in range(ORDERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors, errors

    def settled() -> dict[str, str] | None:
        reasons = {name: _reason(tenants, name) for name in names}
        done = all(r in ("DatabaseReconciled", "DatabaseNameConflict") for r in reasons.values())
        return reasons if done else None

    reasons: dict[str, str] = wait_for(settled, 60, "every order to get or be refused")
    winners = [name for name, reason in reasons.items() if reason == "DatabaseReconciled"]
    assert len(winners) == 1, reasons
    assert tenants.schema_exists(database)
    for n, name in enumerate(names):
        owns = name in winners
        assert tenants.user_exists(tenants.name(f"racer{n}")) is owns, (name, reasons)
        assert (tenants.status(name).get("databaseCreated") is True) is owns, name
