"""Quiet refreshes of MysqlDatabase on the devstack and the real MariaDB, driven by tenantdb's
real processes: a refresh of a Ready order that nothing touched asks the API servers for
nothing but the group's admin login (once per pool process), looks at the primary with one
read-only query when the drift check is due, and still finds and repairs drift."""

from __future__ import annotations

import pytest
import redis

from tenantdb.adapters.workqueue import WorkQueue
from tenantdb.core.mysqldatabase.naming import IDENTITY
from tenantdb.core.mysqldatabase.passes import VERIFY
from tests.conftest import REDIS_URL
from tests.e2e.mysql_tenants import NS, Tenants, order_with_grant, platform_options, tenants
from tests.e2e.quiet import kube_requests, refresh, until_quiet
from tests.support import wait_for

# The failover group is moved, stopped and failed over: a platform of its own.
pytestmark = [pytest.mark.slow, pytest.mark.private_platform]

__all__ = ["platform_options", "tenants"]


def test_a_ready_order_refreshes_quietly_looking_only_at_the_primary(tenants: Tenants) -> None:
    stack = tenants.stack
    name, db, _, _ = order_with_grant(tenants, "quiet")
    key = IDENTITY.key(NS, name)
    client = redis.Redis.from_url(REDIS_URL)
    queue = WorkQueue(client, lambda _: None, prefix=stack.prefix)
    try:
        until_quiet(stack, queue, key)

        # Every refresh finds the drift check due. A quiet one asks Kubernetes for nothing but
        # the group's admin login, read once per pool process and kept for five minutes; it
        # looks at the primary and writes nothing.
        before, looks, writes = kube_requests(stack), tenants.statements(), tenants.writes()
        pools = stack.pool_processes()
        reasons = []
        for _ in range(pools + 2):
            queue.release_period(VERIFY, key)
            reasons.append(refresh(stack, queue, key))
        assert reasons == ["Quiet"] * len(reasons)
        asked = kube_requests(stack) - before
        assert set(asked) <= {"get secrets"}, f"a quiet refresh read Kubernetes: {asked}"
        assert asked["get secrets"] <= pools, f"{asked['get secrets']} Secret reads"
        assert tenants.writes() == writes, "a quiet refresh wrote to the primary"
        assert tenants.statements() > looks, "no quiet refresh looked at the primary"

        # A refresh within the verify period does not even look.
        looks = tenants.statements()
        assert refresh(stack, queue, key) == "Quiet"
        assert tenants.statements() == looks

        # What the check finds drifted is repaired by the full pass it falls back to.
        tenants.sql(f"DROP DATABASE `{db}`")
        queue.release_period(VERIFY, key)
        assert refresh(stack, queue, key) != "Quiet", "the quiet check missed the dropped schema"
        wait_for(lambda: tenants.schema_exists(db), 20, "the schema to come back")
        assert "DriftRepaired" in tenants.events(name)
        assert tenants.status(name)["phase"] == "Ready"
    finally:
        client.close()
