"""MysqlDatabase drift: what is changed by hand on the server comes back within one refresh.

The refresh (the drift check of a Ready order) runs every few seconds here, instead of every ten
minutes.
"""

from __future__ import annotations

import pytest

from tests.e2e.mysql_tenants import (
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


@pytest.fixture
def stack_env() -> dict[str, str]:
    return {"TENANTDB_MYSQL_VERIFY_SECONDS": "4"}


def test_a_schema_or_grant_dropped_by_hand_comes_back_within_one_refresh(
    tenants: Tenants,
) -> None:
    name, db, _, grantee = order_with_grant(tenants, "drift")
    hash_before = tenants.status(name)["lastAppliedHash"]
    tenants.sql(f"DROP DATABASE `{db}`")
    tenants.sql(f"REVOKE ALL PRIVILEGES ON `{literal(db)}`.* FROM '{grantee}'@'%'")
    wait_for(lambda: tenants.schema_exists(db), 20, "the schema to come back")
    wait_for(lambda: tenants.grants(grantee), 20, "the grant to come back")
    assert tenants.grants(grantee) == {
        f"GRANT SELECT, DELETE ON `{literal(db)}`.* TO `{grantee}`@`%`"
    }
    assert tenants.status(name)["lastAppliedHash"] == hash_before
    assert "DriftRepaired" in tenants.events(name)
    assert tenants.status(name)["phase"] == "Ready"
