"""A real Sentinel failover under load: the master killed, its replica promoted, every process
following the Sentinel to the new master."""

from __future__ import annotations

import time

import pytest
import redis

from tests.faults.conftest import Faults
from tests.support import wait_for

pytestmark = [pytest.mark.slow]

ORDERS = 10


def _answers(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


@pytest.mark.parametrize("faults", [{"sentinel": True}], indirect=True)
@pytest.mark.timeout(200)
def test_a_sentinel_failover_under_load_loses_no_order(faults: Faults) -> None:
    sentinel, replica = faults.sentinel, faults.replica
    assert sentinel is not None
    assert replica is not None
    assert sentinel.master_port() == faults.redis_server.port
    for n in range(ORDERS):
        faults.create(f"failover{n}")
    wait_for(faults.in_flight, 30, "passes in flight")
    ready_before = sum(faults.ready(n) for n in faults.live)
    # The master dies with whatever it had not replicated yet (replication is asynchronous):
    # leases, marks and messages of the last moment may be gone, or be there on the replica.
    faults.redis_server.kill()
    killed = time.monotonic()
    wait_for(lambda: sentinel.master_port() == replica.port, 30, "the Sentinel to fail over")
    promoted_after = time.monotonic() - killed
    wait_for(lambda: _answers(faults.client), 30, "the new master to answer through the Sentinel")
    late = faults.create("failover-late")
    faults.settle(
        "sentinel failover under load (master killed)",
        killed,
        90,
        note=f"{ready_before}/{ORDERS} Ready at the kill, promoted in {promoted_after:.1f} s",
    )
    alive = faults.alive()
    assert alive == dict.fromkeys(alive, True), f"a process died in the failover: {alive}"
    assert faults.ready(late)
