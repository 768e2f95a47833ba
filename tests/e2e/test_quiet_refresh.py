"""Quiet refreshes on the devstack, driven by tenantdb's real processes: a refresh of a converged
order that nothing touched asks the API servers nothing (but the OpenBao client certificate, once
per pool process), yet still finds a missing OpenBao role;
an edit the watches see makes the next pass read in full, even when it is the refresh."""

from __future__ import annotations

import time
from collections import Counter

import hvac
import redis

from tenantdb.adapters.kube import SECRET
from tenantdb.adapters.workqueue import WorkQueue
from tenantdb.core.keys import OrderKey
from tenantdb.core.mariadbdatabase.naming import IDENTITY
from tenantdb.core.schedule import Timetable
from tests.e2e.conftest import Stack, order_quiet
from tests.support import wait_for


def _kube_requests(stack: Stack) -> Counter[str]:
    """tenantdb's requests to every cluster so far, watches apart, by verb and resource."""
    out: Counter[str] = Counter()
    for server in stack.platform.servers.values():
        for row in server.cluster.requests.snapshot()["requests"]:
            if row["client"] == "tenantdb" and row["verb"] != "watch":
                out[f"{row['verb']} {row['resource']}"] += row["count"]
    return out


def _refresh(stack: Stack, queue: WorkQueue, key: OrderKey) -> str:
    """Once no pass of the order is pending or running, make its refresh due now, let beat
    sweep it, and return how its pass ended."""
    wait_for(lambda: order_quiet(stack, queue.redis, key), 30, f"no pass of {key} in flight")
    last = queue.last_pass(key)
    queue.schedule(key, time.time(), Timetable.REFRESH)
    ended: tuple[float, str] = wait_for(
        lambda: (found := queue.last_pass(key)) != last and found, 30, f"a refresh of {key}"
    )
    return ended[1]


def _until_quiet(stack: Stack, queue: WorkQueue, key: OrderKey) -> None:
    """Refresh the order until a refresh is quiet: once the events of its own provisioning are
    served, a refresh reads in full, converges and leaves the basis the next one is quiet on."""
    reasons = [_refresh(stack, queue, key) for _ in range(2)]
    while reasons[-1] != "Quiet":
        assert len(reasons) < 6, f"no refresh of the converged order was quiet: {reasons}"
        reasons.append(_refresh(stack, queue, key))


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
    _until_quiet(stack, queue, key)

    # A pool process reads the OpenBao client certificate for its first quiet refresh and
    # keeps it for five minutes: past that, a quiet refresh asks Kubernetes nothing.
    before = _kube_requests(stack)
    pools = stack.pool_processes()
    reasons = [_refresh(stack, queue, key) for _ in range(pools + 2)]
    assert reasons == ["Quiet"] * len(reasons)
    asked = _kube_requests(stack) - before
    assert set(asked) <= {"get secrets"}, f"a quiet refresh read Kubernetes: {asked}"
    assert asked["get secrets"] <= pools, f"{asked['get secrets']} certificate reads"

    role = order["status"]["roleName"]
    _delete_role(stack, role)
    assert _refresh(stack, queue, key) != "Quiet", "the quiet check missed the deleted role"
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
    _until_quiet(stack, queue, key)
    wait_for(lambda: order_quiet(stack, real_redis, key), 30, "the quiet refresh to end")
    last = queue.last_pass(key)
    touched = _touched(queue, key)

    # Someone deletes the delivered Secret, and the order's refresh falls due before any pass
    # could run: the refresh must not trust the basis the last quiet pass stood on.
    before = _kube_requests(stack)
    with stack.workers_held():
        stack.kube().delete(SECRET, "tenant-a", f"{name}-credentials")
        wait_for(lambda: _touched(queue, key) > touched, 30, "the watch to count the deletion")
        queue.schedule(key, time.time(), Timetable.REFRESH)
    ended = wait_for(lambda: (found := queue.last_pass(key)) != last and found, 30, "a pass")
    assert ended[1] != "Quiet", "a refresh after an edit trusted the watches"
    assert _kube_requests(stack) - before, "a refresh after an edit read nothing"
    wait_for(lambda: stack.secret(f"{name}-credentials"), 30, "the delivered Secret back")


def _touched(queue: WorkQueue, key: OrderKey) -> int:
    """How many events the watcher has counted for the order."""
    look, _ = queue.look_quiet(key)
    return look.touched
