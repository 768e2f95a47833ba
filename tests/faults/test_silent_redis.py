"""Redis gone silent without a RST: for every process at once, and for one worker while the
rest keep it.

A ``SilentProxy`` stands between the processes and Redis and stops forwarding, leaving every
connection open: nothing is refused and nothing is closed, so only the clients' own timeouts,
keepalives and health checks can tell. A Redis that was stopped or restarted closes its
connections; this is the fault that does not.
"""

from __future__ import annotations

import time

import pytest

from tests.faults.conftest import Faults, hold
from tests.support import wait_for

pytestmark = [pytest.mark.slow]

ORDERS = 8
SILENT_SECONDS = 15.0
"""Longer than the stack's 10 s lease and the Redis clients' socket timeouts."""

EVERYONE = ("watcher", "worker-1", "worker-2", "beat")


def _leader(faults: Faults, name: str, role: str) -> float:
    return faults.stack.counter(name, "tenantdb_leader", role=role)


@pytest.mark.parametrize("faults", [{"proxied": EVERYONE}], indirect=True)
@pytest.mark.timeout(180)
def test_redis_gone_silent_for_every_process_loses_no_order(faults: Faults) -> None:
    assert faults.proxy is not None
    for n in range(ORDERS):
        faults.create(f"silent{n}")
    wait_for(faults.in_flight, 30, "passes in flight")
    ready_before = sum(faults.ready(n) for n in faults.live)
    faults.proxy.silence()
    try:
        hold(SILENT_SECONDS)
        # Made while Redis answers nobody: the watcher must still hand it over afterwards.
        late = faults.create("silent-late")
    finally:
        faults.proxy.speak()
    ended = time.monotonic()
    faults.settle(
        f"redis silent {SILENT_SECONDS:.0f} s (no RST) for every process",
        ended,
        90,
        note=f"{ready_before}/{ORDERS} Ready when it fell silent",
    )
    alive = faults.alive()
    assert alive == dict.fromkeys(alive, True), f"a process died with Redis silent: {alive}"
    wait_for(lambda: _leader(faults, "beat", "beat") == 1, 30, "beat to lead again")
    assert faults.ready(late)


@pytest.mark.parametrize("faults", [{"proxied": ("worker-1",)}], indirect=True)
@pytest.mark.timeout(180)
def test_a_worker_cut_from_redis_while_the_rest_keep_it_loses_no_order(faults: Faults) -> None:
    assert faults.proxy is not None
    for n in range(ORDERS):
        faults.create(f"cut{n}")
    wait_for(lambda: faults.running_chain_steps("worker-1"), 30, "worker-1 in a chain step")
    faults.proxy.silence()
    cut_at = time.monotonic()
    try:
        # The rest of the stack goes on without worker-1: orders made now are served by
        # worker-2, and the passes worker-1 held are taken over once their leases run out.
        during = [faults.create(f"cut-during{n}") for n in range(3)]
        wait_for(
            lambda: all(faults.ready(n) for n in during),
            SILENT_SECONDS + 30,
            "orders made during the cut to become Ready without worker-1",
        )
        served_while_cut = time.monotonic()
        hold(max(0.0, SILENT_SECONDS - 5))
    finally:
        faults.proxy.speak()
    ended = time.monotonic()
    figures = faults.settle(
        "one worker cut from redis (no RST), the rest keep it",
        ended,
        90,
        note=f"orders made during the cut Ready {served_while_cut - cut_at:.1f} s into it",
    )
    assert figures.concurrent == 0
    alive = faults.alive()
    assert alive == dict.fromkeys(alive, True), f"a process died cut from Redis: {alive}"
