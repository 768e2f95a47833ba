"""Helpers of the quiet-refresh tests: tenantdb's requests to the API servers, and refreshes
made due at once and waited for."""

from __future__ import annotations

import time
from collections import Counter

from tenantdb.adapters.workqueue import WorkQueue
from tenantdb.core.keys import OrderKey
from tenantdb.core.schedule import Timetable
from tests.e2e.conftest import Stack, order_quiet
from tests.support import wait_for


def kube_requests(stack: Stack) -> Counter[str]:
    """tenantdb's requests to every cluster so far, watches apart, by verb and resource
    (`get secrets`, `patch mariadbdatabases.c5c3.io/status`), from the API servers' audit logs
    since the test got the platform."""
    out: Counter[str] = Counter()
    users = set(stack.platform.operator_users)
    for name, cluster in stack.platform.real.clusters.items():
        for event in cluster.audit_events(stack.audit_marks.get(name, 0)):
            if event.get("stage") != "ResponseComplete" or event.get("verb") == "watch":
                continue
            if (event.get("user") or {}).get("username") not in users:
                continue
            ref = event.get("objectRef") or {}
            group = f".{ref['apiGroup']}" if ref.get("apiGroup") else ""
            sub = f"/{ref['subresource']}" if ref.get("subresource") else ""
            out[f"{event['verb']} {ref.get('resource', '')}{group}{sub}"] += 1
    return out


def refresh(stack: Stack, queue: WorkQueue, key: OrderKey) -> str:
    """Once no pass of the order is pending or running, make its refresh due now, let beat
    sweep it, and return how its pass ended."""
    wait_for(lambda: order_quiet(stack, queue.redis, key), 30, f"no pass of {key} in flight")
    last = queue.last_pass(key)
    queue.schedule(key, time.time(), Timetable.REFRESH)
    ended: tuple[float, str] = wait_for(
        lambda: (found := queue.last_pass(key)) != last and found, 30, f"a refresh of {key}"
    )
    return ended[1]


def until_quiet(stack: Stack, queue: WorkQueue, key: OrderKey) -> None:
    """Refresh the order until a refresh is quiet: once the events of its own provisioning are
    served, a refresh reads in full, converges and leaves the basis the next one is quiet on."""
    reasons = [refresh(stack, queue, key) for _ in range(2)]
    while reasons[-1] != "Quiet":
        assert len(reasons) < 6, f"no refresh of the converged order was quiet: {reasons}"
        reasons.append(refresh(stack, queue, key))


def touched(queue: WorkQueue, key: OrderKey) -> int:
    """How many events the watcher has counted for the order."""
    look, _ = queue.look_quiet(key)
    return look.touched
