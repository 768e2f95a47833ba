"""Watch streams that break, go silent or expire lose no event, and every restart is counted."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager

from devstack.kube.cluster import Cluster
from devstack.kube.server import ClusterServer
from tests.integration.watcher.conftest import (
    FAST,
    ORDERS,
    Published,
    StartWatcher,
    key,
    metric,
    order,
)
from tests.support import wait_for

RESTARTS = "tenantdb_watch_restarts_total"


def _restarts(reason: str, cluster: str = "management", kind: str = "MariaDBDatabase") -> float:
    return metric(RESTARTS, cluster=cluster, kind=kind, reason=reason)


@contextmanager
def _beyond_the_history(kube: Cluster) -> Iterator[None]:
    """Writes made inside land at once while the server keeps one: every open stream is then
    behind the history and gets a 410 (a configmap written last makes sure of it)."""
    with kube.store.lock:
        kube.set_history(1)
        yield
        kube.create("configmaps", {"metadata": {"name": "noise"}}, "tenant-a")


def _relisted(kube: Cluster, before: float) -> None:
    """Wait until the 410 was counted, then give the server its history back."""
    wait_for(lambda: _restarts("gone") > before, 10.0, "the 410 was not counted")
    kube.set_history(10_000)


def test_a_change_made_while_the_streams_are_cut_is_enqueued_after_the_reconnect(
    servers: dict[str, ClusterServer], start_watcher: StartWatcher, published: Published
) -> None:
    kube = servers["management"].cluster
    kube.create(ORDERS, order("app"), "tenant-a")
    start_watcher()
    before = _restarts("unavailable")

    # Holding the store's lock, the cut streams cannot carry the change: only a watch resumed
    # from the last resourceVersion the watcher saw can.
    with kube.store.lock:
        kube.kill_watches(abrupt=True)
        kube.patch(ORDERS, "app", {"metadata": {"annotations": {"during": "outage"}}}, "tenant-a")
    published.take(key("app"))
    wait_for(lambda: _restarts("unavailable") > before, 10.0, "the broken stream was not counted")


def test_an_expired_resource_version_relists_and_loses_neither_a_change_nor_a_deletion(
    servers: dict[str, ClusterServer], start_watcher: StartWatcher, published: Published
) -> None:
    kube = servers["management"].cluster
    kube.create(ORDERS, order("changed"), "tenant-a")
    kube.create(ORDERS, order("deleted"), "tenant-a")
    start_watcher()
    before = _restarts("gone")

    with _beyond_the_history(kube):
        kube.patch(ORDERS, "changed", {"metadata": {"annotations": {"a": "1"}}}, "tenant-a")
        kube.delete(ORDERS, "deleted", "tenant-a")
    published.take(key("changed"))
    published.take(key("deleted"))
    _relisted(kube, before)

    # Watching resumes from the relist.
    kube.patch(ORDERS, "changed", {"metadata": {"annotations": {"a": "2"}}}, "tenant-a")
    published.take(key("changed"))


def test_a_relist_wakes_only_the_orders_whose_objects_changed_in_the_gap(
    servers: dict[str, ClusterServer], start_watcher: StartWatcher, published: Published
) -> None:
    kube = servers["management"].cluster
    for name in ("changed", "recreated", "status-only", "unchanged"):
        kube.create(ORDERS, order(name), "tenant-a")
    start_watcher()  # its first list is drained
    before = _restarts("gone")

    # The gap outlives the server's history, so the watch relists; in it one order changed, one
    # was deleted and created again with the same body, and one had only its status written.
    with _beyond_the_history(kube):
        kube.patch(ORDERS, "changed", {"metadata": {"annotations": {"a": "1"}}}, "tenant-a")
        kube.delete(ORDERS, "recreated", "tenant-a")
        kube.create(ORDERS, order("recreated"), "tenant-a")
        status = {"status": {"observedGeneration": 1}}
        kube.patch(ORDERS, "status-only", status, "tenant-a", subresource="status")
    published.take(key("changed"))
    published.take(key("recreated"))
    _relisted(kube, before)

    # The relist handed its orders on in one sweep; the two it found unchanged stay asleep
    # (a fleet would otherwise lose every quiet refresh to any watch's relist).
    kube.patch(ORDERS, "changed", {"metadata": {"annotations": {"a": "2"}}}, "tenant-a")
    published.take(key("changed"))
    assert key("unchanged") not in published
    assert key("status-only") not in published


def test_a_silent_stream_is_ended_by_the_inactivity_watchdog(
    servers: dict[str, ClusterServer], start_watcher: StartWatcher, published: Published
) -> None:
    kube = servers["management"].cluster
    kube.bookmark_interval = 600.0  # a stalled server: not even bookmarks
    config = dataclasses.replace(FAST, timing=dataclasses.replace(FAST.timing, read_timeout=0.5))
    start_watcher(config=config)
    before = _restarts("timeout")
    wait_for(lambda: _restarts("timeout") > before, 10.0, "the silent stream was never given up")

    kube.create(ORDERS, order("app"), "tenant-a")
    published.take(key("app"))


def test_a_quiet_stream_reconnects_at_once_each_time_the_watchdog_ends_it(
    servers: dict[str, ClusterServer], start_watcher: StartWatcher, published: Published
) -> None:
    # A kind nothing writes gets no bookmark; each stream ends at the read timeout. While no
    # stream is open, the kind's index is not trusted and passes list the namespace, so the
    # loop must not wait longer and longer between those streams as it does after failures.
    kube = servers["management"].cluster
    kube.bookmark_interval = 600.0
    timing = dataclasses.replace(FAST.timing, read_timeout=0.3, backoff_base=0.5, backoff_cap=30.0)
    start_watcher(config=dataclasses.replace(FAST, timing=timing))
    before = _restarts("timeout")
    wait_for(lambda: _restarts("timeout") > before, 10.0, "the silent stream was never given up")
    first = _restarts("timeout")
    # Growing waits (0.5, 1, 2, 4 s, half jittered) would allow about 5 restarts in 6 s.
    wait_for(
        lambda: _restarts("timeout") >= first + 10,
        6.0,
        "the quiet stream reconnected after growing waits",
    )

    kube.create(ORDERS, order("app"), "tenant-a")
    published.take(key("app"))


def test_a_kind_a_target_cluster_does_not_serve_is_watched_once_it_is_installed(
    servers: dict[str, ClusterServer], start_watcher: StartWatcher, published: Published
) -> None:
    edge = servers["edge-1"].cluster
    crd = edge.get("customresourcedefinitions", "mariadbdatabases.c5c3.io")
    edge.delete("customresourcedefinitions", "mariadbdatabases.c5c3.io")
    assert edge.wait_idle()
    before = _restarts("not_served", cluster="edge-1")
    watcher = start_watcher()
    assert "edge-1" in watcher.engaged()
    wait_for(
        lambda: _restarts("not_served", cluster="edge-1") > before,
        10.0,
        "not-served was not counted",
    )

    edge.create(
        "customresourcedefinitions",
        {k: v for k, v in crd.items() if k in ("apiVersion", "kind", "spec")}
        | {"metadata": {"name": "mariadbdatabases.c5c3.io"}},
    )
    edge.create(ORDERS, order("late"), "tenant-a")
    published.take(key("late", "edge-1"))


def test_a_burst_of_a_thousand_edits_publishes_once_and_deduplicates_the_rest(
    servers: dict[str, ClusterServer], start_watcher: StartWatcher, published: Published
) -> None:
    kube = servers["management"].cluster
    kube.create(ORDERS, order("busy"), "tenant-a")
    start_watcher()
    queued = metric("tenantdb_enqueue_total", result="queued")
    deduped = metric("tenantdb_enqueue_total", result="deduped")

    for i in range(1000):
        kube.patch(ORDERS, "busy", {"metadata": {"annotations": {"n": str(i)}}}, "tenant-a")
    wait_for(
        lambda: metric("tenantdb_enqueue_total", result="deduped") - deduped >= 999,
        30,
        "the burst was not handed on",
    )
    calls_queued = metric("tenantdb_enqueue_total", result="queued") - queued
    calls_deduped = metric("tenantdb_enqueue_total", result="deduped") - deduped
    assert calls_queued == 1
    assert calls_queued + calls_deduped <= 1000
    assert published.keys == [key("busy")]


def test_the_watcher_is_alive_while_its_watches_hear_and_says_which_does_not(
    servers: dict[str, ClusterServer], start_watcher: StartWatcher
) -> None:
    watcher = start_watcher()
    assert watcher.liveness(max_age=30) is None
    # A watch that has heard nothing for longer than the limit is named.
    [loop] = [w for i, w in watcher._loops.items() if i == ("", "MariaDBDatabase", "")]
    loop.dispatcher.heard_at -= 60
    why = watcher.liveness(max_age=30)
    assert why is not None
    assert why.startswith("watch of MariaDBDatabase on management has heard nothing for 60 s")
    # Its next event (or bookmark, or a stream opened again) brings it back.
    servers["management"].cluster.create(ORDERS, order("alive"), "tenant-a")
    wait_for(lambda: watcher.liveness(max_age=30) is None, 10, "the watch never heard again")
