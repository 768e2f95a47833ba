"""Watches cut during a storm of edits; the watcher leader killed."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tenantdb.adapters.mariadbdatabase import MARIADB_DATABASE
from tests.faults.conftest import NAMESPACE, Faults
from tests.support import wait_for

pytestmark = [pytest.mark.slow]

EDITS = 24


def _reflects_last_spec(faults: Faults, name: str, policy: str, storm: str) -> bool:
    order = faults.stack.order(name) or {}
    status = order.get("status") or {}
    generation = order.get("metadata", {}).get("generation")
    ready: dict[str, Any] = next(
        (c for c in status.get("conditions") or () if c["type"] == "Ready"), {}
    )
    return bool(
        order.get("spec", {}).get("deletionPolicy") == policy
        and order["metadata"].get("labels", {}).get("storm") == storm
        and status.get("observedGeneration") == generation
        and ready.get("status") == "True"
        and ready.get("observedGeneration") == generation
    )


@pytest.mark.parametrize("faults", [{"api_proxied": True}], indirect=True)
@pytest.mark.timeout(150)
def test_watches_cut_during_an_edit_storm(faults: Faults) -> None:
    names = [faults.create(f"storm{n}") for n in range(5)]
    faults.wait_all_ready(60)
    kube = faults.stack.kube()
    policy = "Retain"
    for i in range(EDITS):
        policy = "Delete" if i % 2 == 0 else "Retain"
        for name in names:
            kube.patch(
                MARIADB_DATABASE,
                NAMESPACE,
                name,
                {"metadata": {"labels": {"storm": str(i)}}, "spec": {"deletionPolicy": policy}},
            )
        if i % 3 == 2:
            # A RST or a FIN, between the watcher and every API server.
            faults.cut_watches(abrupt=i % 2 == 0)
    ended = time.monotonic()
    last = str(EDITS - 1)
    wait_for(
        lambda: all(_reflects_last_spec(faults, n, policy, last) for n in names),
        60,
        "every order Ready at its last generation",
    )
    restarts = faults.stack.counter("watcher", "tenantdb_watch_restarts_total")
    faults.settle("watches cut in an edit storm", ended, 30, note=f"restarts={restarts:.0f}")
    assert restarts >= EDITS // 3, "the watches were cut"


@pytest.mark.parametrize("faults", [{"watchers": 2}], indirect=True)
@pytest.mark.timeout(150)
def test_the_watcher_leader_killed_a_standby_serves_the_events(faults: Faults) -> None:
    first = faults.create("before-kill")
    faults.wait_all_ready(60)

    def leader() -> str:
        return next(
            (
                w
                for w in ("watcher-1", "watcher-2")
                if w in faults.stack.procs
                and faults.stack.counter(w, "tenantdb_leader", role="watcher") == 1
            ),
            "",
        )

    old: str = wait_for(leader, 30, "a watcher leader")
    faults.kill_tree(old)
    killed = time.monotonic()
    # Events while no watcher leads: an edit and a new order.
    faults.stack.kube().patch(
        MARIADB_DATABASE, NAMESPACE, first, {"spec": {"deletionPolicy": "Delete"}}
    )
    faults.create("during-gap")
    new: str = wait_for(leader, 30, "the standby watcher to lead")
    took_over = time.monotonic() - killed
    assert new != old
    wait_for(
        lambda: (
            (faults.stack.order(first) or {}).get("status", {}).get("observedGeneration")
            == (faults.stack.order(first) or {}).get("metadata", {}).get("generation")
        ),
        40,
        "the edit made during the gap to be served",
    )
    faults.create("after-takeover")
    faults.settle(
        "watcher leader killed, standby takes over",
        killed,
        60,
        note=f"takeover {took_over:.1f} s",
    )
