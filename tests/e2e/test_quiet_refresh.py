"""Quiet refreshes on the real platform, driven by tenantdb's real processes: a refresh of a
converged order that nothing touched asks the API servers nothing (but the OpenBao client
certificate, once per pool process), yet still finds a missing OpenBao role;
an edit the watches see makes the next pass read in full, even when it is the refresh."""

from __future__ import annotations

import time

import hvac
import pytest
import redis

from tenantdb.adapters.kube import SECRET
from tenantdb.adapters.workqueue import WorkQueue
from tenantdb.core.mariadbdatabase.naming import IDENTITY
from tenantdb.core.schedule import Timetable
from tests.e2e.conftest import Stack, order_quiet
from tests.e2e.quiet import kube_requests, refresh, touched, until_quiet
from tests.support import wait_for

pytestmark = [pytest.mark.slow]


def _delete_role(stack: Stack, role: str) -> None:
    client = stack.platform.root_client()
    try:
        client.secrets.database.delete_role(role, mount_point="database/mariadb")
    except hvac.exceptions.InvalidPath:
        pass
    finally:
        client.adapter.close()


def test_a_quiet_refresh_reads_only_the_certificate_once_per_process_and_restores_a_role(
    stack: Stack, real_redis: redis.Redis
) -> None:
    name = stack.name("quiet")
    stack.apply_order(name, databaseName="quiet_db")
    order = stack.wait_ready(name)
    key = IDENTITY.key("tenant-a", name)
    queue = WorkQueue(real_redis, lambda _: None, prefix=stack.prefix)
    until_quiet(stack, queue, key)

    # A pool process reads the OpenBao client certificate for its first quiet refresh and
    # keeps it for five minutes: past that, a quiet refresh asks Kubernetes nothing.
    before = kube_requests(stack)
    pools = stack.pool_processes()
    reasons = [refresh(stack, queue, key) for _ in range(pools + 2)]
    assert reasons == ["Quiet"] * len(reasons)
    asked = kube_requests(stack) - before
    assert set(asked) <= {"get secrets"}, f"a quiet refresh read Kubernetes: {asked}"
    assert asked["get secrets"] <= pools, f"{asked['get secrets']} certificate reads"

    role = order["status"]["roleName"]
    _delete_role(stack, role)
    assert refresh(stack, queue, key) != "Quiet", "the quiet check missed the deleted role"
    wait_for(lambda: stack.role_exists(role), 30, f"the role {role} to be written again")
    assert stack.condition(name, "Ready")["status"] == "True"


def test_an_edit_the_watches_see_makes_the_next_refresh_read_in_full(
    stack: Stack, real_redis: redis.Redis
) -> None:
    name = stack.name("edited")
    stack.apply_order(name, databaseName="edited_db")
    stack.wait_ready(name)
    key = IDENTITY.key("tenant-a", name)
    queue = WorkQueue(real_redis, lambda _: None, prefix=stack.prefix)
    until_quiet(stack, queue, key)
    wait_for(lambda: order_quiet(stack, real_redis, key), 30, "the quiet refresh to end")
    last = queue.last_pass(key)
    before_touch = touched(queue, key)

    # Someone deletes the delivered Secret, and the order's refresh falls due before any pass
    # could run: the refresh must not trust the basis the last quiet pass stood on.
    before = kube_requests(stack)
    with stack.workers_held():
        stack.kube().delete(SECRET, "tenant-a", f"{name}-credentials")
        wait_for(lambda: touched(queue, key) > before_touch, 30, "the watch to count the deletion")
        queue.schedule(key, time.time(), Timetable.REFRESH)
    ended = wait_for(lambda: (found := queue.last_pass(key)) != last and found, 30, "a pass")
    assert ended[1] != "Quiet", "a refresh after an edit trusted the watches"
    assert kube_requests(stack) - before, "a refresh after an edit read nothing"
    wait_for(lambda: stack.secret(f"{name}-credentials"), 30, "the delivered Secret back")
