"""Watch streams that break, go silent or expire lose no event, and every restart is counted.

The watcher reaches the management cluster through a TCP proxy (``tests.faults.proxy``) that
can hold new connections and cut the open ones; the API servers serve watches from etcd, without
their watch cache, so that a watch resumed from a version etcd has compacted gets a 410, as it
does once an outage outlasts a real cluster's history.
"""

from __future__ import annotations

import dataclasses
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from devstack.kubeclient import ApiError
from tests.faults.proxy import SilentProxy
from tests.integration.watcher.conftest import (
    FAST,
    ORDERS,
    Published,
    StartWatcher,
    key,
    metric,
    order,
    prepare_clusters,
)
from tests.realclusters import ApiServer, kubeconfig, start_servers
from tests.support import wait_for

RESTARTS = "tenantdb_watch_restarts_total"


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[dict[str, ApiServer]]:
    """The watcher's two clusters, serving watches from etcd (no watch cache)."""
    names = ("management", "edge-1")
    with start_servers(tmp_path / "kube", names, ("--watch-cache=false",)) as started:
        prepare_clusters(started)
        yield started


@pytest.fixture
def proxy(servers: dict[str, ApiServer]) -> Iterator[SilentProxy]:
    """The proxy between the watcher and the management cluster's API server."""
    port = urllib.parse.urlsplit(servers["management"].url).port
    assert port is not None
    with SilentProxy(port) as running:
        yield running


@pytest.fixture
def kubeconfig_file(servers: dict[str, ApiServer], proxy: SilentProxy, tmp_path: Path) -> Path:
    """The watcher's kubeconfig: management through the proxy, edge-1 direct."""
    config = kubeconfig(servers, current="management")
    for entry in config["clusters"]:
        if entry["name"] == "management":
            entry["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def _restarts(reason: str, cluster: str = "management", kind: str = "MariaDBDatabase") -> float:
    return metric(RESTARTS, cluster=cluster, kind=kind, reason=reason)


@contextmanager
def _streams_cut(proxy: SilentProxy) -> Iterator[None]:
    """The watcher's connections cut (a RST) and new ones held for the block: what it writes
    can reach the watcher only through a watch resumed from the last version it saw."""
    proxy.silence()
    proxy.cut(abrupt=True)
    try:
        yield
    finally:
        proxy.speak()


@contextmanager
def _beyond_the_history(server: ApiServer, proxy: SilentProxy) -> Iterator[None]:
    """As ``_streams_cut``, and etcd's history compacted past the block's writes (a configmap
    written last makes sure of it): every watch resumed then gets a 410."""
    with _streams_cut(proxy):
        yield
        server.cluster.create("configmaps", {"metadata": {"name": "noise"}}, "tenant-a")
        server.real.compact()


def _relisted(before: float) -> None:
    """Wait until the 410 was counted."""
    wait_for(lambda: _restarts("gone") > before, 10.0, "the 410 was not counted")


def test_a_change_made_while_the_streams_are_cut_is_enqueued_after_the_reconnect(
    servers: dict[str, ApiServer],
    start_watcher: StartWatcher,
    published: Published,
    proxy: SilentProxy,
) -> None:
    kube = servers["management"].cluster
    kube.create(ORDERS, order("app"), "tenant-a")
    start_watcher()
    before = _restarts("unavailable")

    with _streams_cut(proxy):
        kube.patch(ORDERS, "app", {"metadata": {"annotations": {"during": "outage"}}}, "tenant-a")
    published.take(key("app"))
    wait_for(lambda: _restarts("unavailable") > before, 10.0, "the broken stream was not counted")


def test_an_expired_resource_version_relists_and_loses_neither_a_change_nor_a_deletion(
    servers: dict[str, ApiServer],
    start_watcher: StartWatcher,
    published: Published,
    proxy: SilentProxy,
) -> None:
    kube = servers["management"].cluster
    kube.create(ORDERS, order("changed"), "tenant-a")
    kube.create(ORDERS, order("deleted"), "tenant-a")
    start_watcher()
    before = _restarts("gone")

    with _beyond_the_history(servers["management"], proxy):
        kube.patch(ORDERS, "changed", {"metadata": {"annotations": {"a": "1"}}}, "tenant-a")
        kube.delete(ORDERS, "deleted", "tenant-a")
    published.take(key("changed"))
    published.take(key("deleted"))
    _relisted(before)

    # Watching resumes from the relist.
    kube.patch(ORDERS, "changed", {"metadata": {"annotations": {"a": "2"}}}, "tenant-a")
    published.take(key("changed"))


def test_a_relist_wakes_only_the_orders_whose_objects_changed_in_the_gap(
    servers: dict[str, ApiServer],
    start_watcher: StartWatcher,
    published: Published,
    proxy: SilentProxy,
) -> None:
    kube = servers["management"].cluster
    for name in ("changed", "recreated", "status-only", "unchanged"):
        kube.create(ORDERS, order(name), "tenant-a")
    start_watcher()  # its first list is drained
    before = _restarts("gone")

    # The gap outlives the server's history, so the watch relists; in it one order changed, one
    # was deleted and created again with the same body, and one had only its status written.
    with _beyond_the_history(servers["management"], proxy):
        kube.patch(ORDERS, "changed", {"metadata": {"annotations": {"a": "1"}}}, "tenant-a")
        kube.delete(ORDERS, "recreated", "tenant-a")
        kube.create(ORDERS, order("recreated"), "tenant-a")
        status = {"status": {"observedGeneration": 1}}
        kube.patch(ORDERS, "status-only", status, "tenant-a", subresource="status")
    published.take(key("changed"))
    published.take(key("recreated"))
    _relisted(before)

    # The relist handed its orders on in one sweep; the two it found unchanged stay asleep
    # (a fleet would otherwise lose every quiet refresh to any watch's relist).
    kube.patch(ORDERS, "changed", {"metadata": {"annotations": {"a": "2"}}}, "tenant-a")
    published.take(key("changed"))
    assert key("unchanged") not in published
    assert key("status-only") not in published


def test_a_silent_stream_is_ended_by_the_inactivity_watchdog(
    servers: dict[str, ApiServer], start_watcher: StartWatcher, published: Published
) -> None:
    # Nothing writes orders, and a server without a watch cache sends no bookmark: the stream
    # stays silent.
    kube = servers["management"].cluster
    config = dataclasses.replace(FAST, timing=dataclasses.replace(FAST.timing, read_timeout=0.5))
    start_watcher(config=config)
    before = _restarts("timeout")
    wait_for(lambda: _restarts("timeout") > before, 10.0, "the silent stream was never given up")

    kube.create(ORDERS, order("app"), "tenant-a")
    published.take(key("app"))


def test_a_quiet_stream_reconnects_at_once_each_time_the_watchdog_ends_it(
    servers: dict[str, ApiServer], start_watcher: StartWatcher, published: Published
) -> None:
    # A kind nothing writes gets no bookmark; each stream ends at the read timeout. While no
    # stream is open, the kind's index is not trusted and passes list the namespace, so the
    # loop must not wait longer and longer between those streams as it does after failures.
    kube = servers["management"].cluster
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
    servers: dict[str, ApiServer], start_watcher: StartWatcher, published: Published
) -> None:
    edge = servers["edge-1"].cluster
    crd = edge.get("customresourcedefinitions.apiextensions.k8s.io", "mariadbdatabases.c5c3.io")
    edge.delete("customresourcedefinitions.apiextensions.k8s.io", "mariadbdatabases.c5c3.io")
    wait_for(lambda: _gone(edge.get, "mariadbdatabases.c5c3.io"), 20, "the CRD to be deleted")
    before = _restarts("not_served", cluster="edge-1")
    watcher = start_watcher()
    assert "edge-1" in watcher.engaged()
    wait_for(
        lambda: _restarts("not_served", cluster="edge-1") > before,
        10.0,
        "not-served was not counted",
    )

    servers["edge-1"].install(
        {k: v for k, v in crd.items() if k in ("apiVersion", "kind", "spec")}
        | {"metadata": {"name": "mariadbdatabases.c5c3.io"}}
    )
    edge.create(ORDERS, order("late"), "tenant-a")
    published.take(key("late", "edge-1"))


def test_a_burst_of_a_thousand_edits_publishes_once_and_deduplicates_the_rest(
    servers: dict[str, ApiServer], start_watcher: StartWatcher, published: Published
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
    servers: dict[str, ApiServer], start_watcher: StartWatcher
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


def _gone(get: Callable[[str, str], object], name: str) -> bool:
    try:
        get("customresourcedefinitions.apiextensions.k8s.io", name)
    except ApiError as error:
        if error.code == 404:
            return True
        raise
    return False
