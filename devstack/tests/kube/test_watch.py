"""Watch semantics through the official client: events, selectors, bookmarks, timeouts, 410."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from devstack.kube.server import ClusterServer


def _cm(name: str, **labels: str) -> client.V1ConfigMap:
    return client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name, labels=labels or None))


def test_watch_added_modified_deleted(core: client.CoreV1Api, namespace: str) -> None:
    rv = core.list_namespaced_config_map(namespace).metadata.resource_version
    core.create_namespaced_config_map(namespace, _cm("w"))
    core.patch_namespaced_config_map("w", namespace, {"data": {"a": "1"}})
    core.delete_namespaced_config_map("w", namespace)
    w = watch.Watch()
    seen = [
        (e["type"], e["object"].metadata.name)
        for e in w.stream(
            core.list_namespaced_config_map, namespace, resource_version=rv, timeout_seconds=1
        )
    ]
    assert seen == [("ADDED", "w"), ("MODIFIED", "w"), ("DELETED", "w")]


def test_watch_without_resource_version_replays_current_state(
    core: client.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_config_map(namespace, _cm("there"))
    w = watch.Watch()
    for event in w.stream(core.list_namespaced_config_map, namespace, timeout_seconds=5):
        assert (event["type"], event["object"].metadata.name) == ("ADDED", "there")
        w.stop()


def test_watch_with_label_selector_sees_objects_leave_and_enter(
    core: client.CoreV1Api, namespace: str
) -> None:
    rv = core.list_namespaced_config_map(namespace).metadata.resource_version
    core.create_namespaced_config_map(namespace, _cm("x", app="db"))
    core.patch_namespaced_config_map("x", namespace, {"metadata": {"labels": {"app": "web"}}})
    core.patch_namespaced_config_map("x", namespace, {"metadata": {"labels": {"app": "db"}}})
    core.create_namespaced_config_map(namespace, _cm("other", app="web"))
    w = watch.Watch()
    events = list(
        w.stream(
            core.list_namespaced_config_map,
            namespace,
            resource_version=rv,
            label_selector="app=db",
            timeout_seconds=1,
        )
    )
    assert [e["type"] for e in events] == ["ADDED", "DELETED", "ADDED"]
    # As the real watch cache: the object as it was selected, at the version of its change.
    left = events[1]["object"].metadata
    assert left.labels == {"app": "db"}
    assert int(left.resource_version) > int(events[0]["object"].metadata.resource_version)
    assert int(left.resource_version) < int(events[2]["object"].metadata.resource_version)


def test_bookmarks_come_once_the_kind_moves_on(core: client.CoreV1Api, namespace: str) -> None:
    # As the real watch cache: a watch that has been shown everything of its kind gets no
    # bookmark; a write of the same kind it does not select moves the kind on, and the bookmark
    # carries that write's resourceVersion.
    rv = core.list_namespaced_config_map(namespace).metadata.resource_version

    def stream() -> tuple[watch.Watch, list[Any]]:
        w = watch.Watch()
        events = w.stream(
            core.list_namespaced_config_map,
            namespace,
            resource_version=rv,
            allow_watch_bookmarks=True,
            timeout_seconds=3,
            _preload_content=False,
        )
        return w, list(events)

    assert stream()[1] == []
    elsewhere: list[str] = []

    def write_elsewhere() -> None:
        time.sleep(0.5)
        made = core.create_namespaced_config_map("default", _cm(f"elsewhere-{namespace}"))
        elsewhere.append(made.metadata.resource_version)

    writer = threading.Thread(target=write_elsewhere)
    writer.start()
    w, events = stream()
    writer.join()
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert [e["type"] for e in events] == ["BOOKMARK"] * len(bookmarks)
    assert bookmarks
    assert bookmarks[-1]["raw_object"]["metadata"]["resourceVersion"] == elsewhere[0]
    assert w.resource_version == elsewhere[0]


def test_too_old_resource_version_is_410_then_relist(
    server: ClusterServer, core: client.CoreV1Api, namespace: str
) -> None:
    old_rv = core.list_namespaced_config_map(namespace).metadata.resource_version
    server.cluster.set_history(2)
    for i in range(4):
        core.create_namespaced_config_map(namespace, _cm(f"c{i}"))
    w = watch.Watch()
    with pytest.raises(ApiException) as err:
        for _ in w.stream(
            core.list_namespaced_config_map, namespace, resource_version=old_rv, timeout_seconds=2
        ):
            pass
    assert err.value.status == 410
    assert "too old resource version" in str(err.value.reason)
    relisted = core.list_namespaced_config_map(namespace)
    assert len(relisted.items) == 4
    fresh = list(
        w.stream(
            core.list_namespaced_config_map,
            namespace,
            resource_version=relisted.metadata.resource_version,
            timeout_seconds=1,
        )
    )
    assert fresh == []


def test_a_quiet_kind_resumes_however_busy_the_other_kinds_were(
    server: ClusterServer, core: client.CoreV1Api, namespace: str
) -> None:
    # The real API server keeps a watch cache per resource: writes to other kinds never make
    # a watch of a kind nobody wrote to too old, only that kind's own evicted events do.
    quiet = core.create_namespaced_secret(
        namespace, client.V1Secret(metadata=client.V1ObjectMeta(name="quiet"))
    ).metadata.resource_version
    server.cluster.set_history(3)
    for i in range(6):
        core.create_namespaced_config_map(namespace, _cm(f"busy{i}"))
    core.patch_namespaced_secret("quiet", namespace, {"metadata": {"labels": {"later": "yes"}}})
    w = watch.Watch()
    seen = [
        (e["type"], e["object"].metadata.labels)
        for e in w.stream(
            core.list_namespaced_secret, namespace, resource_version=quiet, timeout_seconds=1
        )
    ]
    assert seen == [("MODIFIED", {"later": "yes"})]
    with pytest.raises(ApiException) as err:
        for _ in w.stream(
            core.list_namespaced_config_map, namespace, resource_version=quiet, timeout_seconds=1
        ):
            pass
    assert err.value.status == 410


def test_killed_watch_is_resumed_by_the_client(
    server: ClusterServer, core: client.CoreV1Api, namespace: str
) -> None:
    rv = core.list_namespaced_config_map(namespace).metadata.resource_version
    seen: list[str] = []
    got_first = threading.Event()
    done = threading.Event()

    def consume() -> None:
        w = watch.Watch()
        for event in w.stream(
            core.list_namespaced_config_map, namespace, resource_version=rv, _request_timeout=10
        ):
            seen.append(event["object"].metadata.name)
            got_first.set()
            if len(seen) == 2:
                w.stop()
        done.set()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    core.create_namespaced_config_map(namespace, _cm("before"))
    assert got_first.wait(5)
    server.cluster.kill_watches()
    core.create_namespaced_config_map(namespace, _cm("after"))
    assert done.wait(10)
    assert seen == ["before", "after"]


def test_watch_one_object_by_name(core: client.CoreV1Api, namespace: str) -> None:
    rv = core.list_namespaced_config_map(namespace).metadata.resource_version
    core.create_namespaced_config_map(namespace, _cm("a"))
    core.create_namespaced_config_map(namespace, _cm("b"))
    w = watch.Watch()
    names = [
        e["object"].metadata.name
        for e in w.stream(
            core.list_namespaced_config_map,
            namespace,
            resource_version=rv,
            field_selector="metadata.name=b",
            timeout_seconds=1,
        )
    ]
    assert names == ["b"]


def test_python_api_watch(server: ClusterServer, core: client.CoreV1Api, namespace: str) -> None:
    rv = str(server.cluster.store.rv)
    core.create_namespaced_config_map(namespace, _cm("py"))
    events: list[tuple[str, Any]] = list(
        server.cluster.watch("configmaps", namespace, resource_version=rv, timeout=0.3)
    )
    assert [(t, o["metadata"]["name"]) for t, o in events] == [("ADDED", "py")]
