"""The objects every order of a ControlPlane shares, on the real platform with tenantdb's real
processes: a worker process reads each of them once and serves its copy to every later pass
while the watch sees no newer version, yet a change to one reaches the very next pass. Its
OpenBao login is shared the same way, by the passes of its token's window."""

from __future__ import annotations

import pytest
import redis

from devstack.platform import WORKER_SERVICE_ACCOUNT
from devstack.upstream import RealOpenBao
from tenantdb.adapters.mariadbdatabase import CERTIFICATE, MARIADB_DATABASE
from tenantdb.adapters.workqueue import WorkQueue
from tenantdb.core.keys import OrderKey
from tenantdb.core.mariadbdatabase.naming import CLIENT_CERTIFICATE, IDENTITY
from tests.e2e.conftest import Stack, order_quiet
from tests.e2e.quiet import kube_requests
from tests.support import wait_for

pytestmark = [pytest.mark.slow]

SHARED_READS = (
    "get controlplanes.c5c3.io",
    "get mariadbs.k8s.mariadb.com",
    "get secretstores.external-secrets.io",
    "get clustersecretstores.external-secrets.io",
    "get serviceaccounts",
    "get certificates.cert-manager.io",
)


def _openbao_logins(stack: Stack) -> int:
    """tenantdb's OpenBao logins so far, from OpenBao's audit log."""
    openbao = stack.platform.openbao
    assert isinstance(openbao, RealOpenBao)
    return sum(
        1
        for event in openbao.audit_events()
        if event.get("type") == "response"
        and event["request"]["path"].endswith("/login")
        and ((event.get("auth") or {}).get("metadata") or {}).get("service_account_name")
        == WORKER_SERVICE_ACCOUNT
    )


def _full_pass(stack: Stack, queue: WorkQueue, key: OrderKey, name: str, poke: int) -> str:
    """Change an annotation of the order (which passes the watch's update predicate, so the
    pass reads in full) and return how the pass it brought ended."""
    wait_for(lambda: order_quiet(stack, queue.redis, key), 30, f"no pass of {key} in flight")
    last = queue.last_pass(key)
    annotations = {"example.com/poke": str(poke)}
    stack.kube().patch(
        MARIADB_DATABASE, "tenant-a", name, {"metadata": {"annotations": annotations}}
    )
    ended: tuple[float, str] = wait_for(
        lambda: (found := queue.last_pass(key)) != last and found, 30, f"a pass of {key}"
    )
    return ended[1]


def test_full_passes_read_each_shared_object_once_per_process_and_see_a_change_at_once(
    stack: Stack, real_redis: redis.Redis
) -> None:
    name = stack.name("shared")
    stack.apply_order(name, databaseName="shared_db")
    stack.wait_ready(name)
    key = IDENTITY.key("tenant-a", name)
    queue = WorkQueue(real_redis, lambda _: None, prefix=stack.prefix)

    pools = stack.pool_processes()
    before, logins = kube_requests(stack), _openbao_logins(stack)
    reasons = [_full_pass(stack, queue, key, name, poke) for poke in range(pools + 3)]
    assert "Quiet" not in reasons, f"an annotated order was only checked: {reasons}"
    asked = kube_requests(stack) - before
    for read in SHARED_READS:
        assert asked[read] <= pools, f"{asked[read]} x {read} over {len(reasons)} passes"
    # Each process logs in at most once more: when the window of its last login ends meanwhile.
    logged_in = _openbao_logins(stack) - logins
    assert logged_in <= pools, f"{logged_in} OpenBao logins over {len(reasons)} passes"
    full = asked["get externalsecrets.external-secrets.io"]
    assert full >= len(reasons), f"{len(reasons)} passes read in full, yet asked only {asked}"

    # Someone edits the shared Certificate: its watch publishes the new version before it wakes
    # the orders, so the pass it wakes reads the edit and puts the spec back.
    certificates = stack.kube()
    certificates.patch(CERTIFICATE, "openstack", CLIENT_CERTIFICATE, {"spec": {"duration": "1h"}})
    wait_for(
        lambda: (
            certificates.get(CERTIFICATE, "openstack", CLIENT_CERTIFICATE)["spec"]["duration"]
            == "8760h"
        ),
        20,
        "the shared Certificate to be put back",
    )
    stack.wait_ready(name)
