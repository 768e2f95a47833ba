"""A worker process's copies of the objects every order of a ControlPlane shares, against the
real watcher on a devstack cluster: served while the watch saw no newer version, read again from
the API server as soon as it sees one, and never trusted once the watcher stops."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis

from tenantdb.adapters.kube import (
    SECRET,
    SERVICE_ACCOUNT,
    KubeClient,
    Resource,
    client_from_kubeconfig,
)
from tenantdb.adapters.mariadbdatabase import CLIENT_CERTIFICATE_WATCH, CONTROL_PLANE
from tenantdb.adapters.versionindex import SharedObjects, SharedRef
from tenantdb.core.mariadbdatabase.naming import CLIENT_CERTIFICATE, SHARED_SERVICE_ACCOUNT
from tests.integration.watcher.conftest import Published, StartWatcher, watching
from tests.realclusters import ApiServer
from tests.support import wait_for

CONTROL_PLANES = "controlplanes.c5c3.io"


def _control_plane() -> dict[str, Any]:
    return {
        "apiVersion": "c5c3.io/v1alpha1",
        "kind": "ControlPlane",
        "metadata": {"name": "cp", "namespace": "cp-ns", "labels": {"edition": "1"}},
        "spec": {"services": {"keystone": {"namespace": {"name": "keystone"}}}},
    }


def _service_account() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {
            "name": SHARED_SERVICE_ACCOUNT,
            "namespace": "cp-ns",
            "labels": {"edition": "1"},
        },
    }


def _client_certificate() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": CLIENT_CERTIFICATE, "namespace": "cp-ns", "labels": {"edition": "1"}},
        "data": {"tls.crt": "bm90LWEtY2VydA=="},
    }


# (the kind's plural on the server, the resource, the watch that keeps its versions, a body)
SHARED = [
    pytest.param(CONTROL_PLANES, CONTROL_PLANE, CONTROL_PLANE.kind, _control_plane, id="cp"),
    pytest.param(
        "serviceaccounts",
        SERVICE_ACCOUNT,
        SERVICE_ACCOUNT.kind,
        _service_account,
        id="service-account",
    ),
    pytest.param(
        "secrets", SECRET, CLIENT_CERTIFICATE_WATCH, _client_certificate, id="client-certificate"
    ),
]


class _Versions:
    """What a worker process reads of one watch's versions, one object at a time."""

    def __init__(self, client: redis.Redis, prefix: str, watch: str) -> None:
        self.shared, self.watch = SharedObjects(client, prefix), watch

    def version(self, cluster: str, namespace: str, name: str) -> str | None:
        ref = SharedRef(cluster, self.watch, namespace, name)
        return self.shared.versions([ref])[ref]


def _gets(server: ApiServer, plural: str) -> int:
    return server.requests("get", plural)


def _client(kubeconfig_file: Path) -> KubeClient:
    return client_from_kubeconfig(str(kubeconfig_file), "management", "")


@pytest.mark.parametrize(("plural", "resource", "watch", "body"), SHARED)
def test_a_copy_is_served_while_current_and_read_again_once_the_watch_sees_a_change(
    servers: dict[str, ApiServer],
    start_watcher: StartWatcher,
    real_redis: redis.Redis,
    key_prefix: str,
    kubeconfig_file: Path,
    plural: str,
    resource: Resource,
    watch: str,
    body: Any,
) -> None:
    management = servers["management"]
    created = management.cluster.create(plural, body(), "cp-ns")
    start_watcher()
    index = _Versions(real_redis, key_prefix, watch)
    name = created["metadata"]["name"]
    wait_for(
        lambda: index.version("", "cp-ns", name) == created["metadata"]["resourceVersion"],
        10.0,
        f"the watch of {watch} never published the object's version",
    )
    client, shared = _client(kubeconfig_file), SharedObjects(real_redis, key_prefix)

    before = _gets(management, plural)
    first = shared.get(client, "", resource, watch, "cp-ns", name)
    assert first is not None
    first["metadata"]["labels"]["scribbled"] = "by-the-caller"
    again = shared.get(client, "", resource, watch, "cp-ns", name)
    assert again is not None
    assert _gets(management, plural) == before + 1, "the current copy was read again"
    assert "scribbled" not in again["metadata"]["labels"], "a caller's change leaked into the copy"

    changed = management.cluster.patch(
        plural, name, {"metadata": {"labels": {"edition": "2"}}}, "cp-ns"
    )
    wait_for(
        lambda: index.version("", "cp-ns", name) == changed["metadata"]["resourceVersion"],
        10.0,
        "the watch never published the change",
    )
    fresh = shared.get(client, "", resource, watch, "cp-ns", name)
    assert fresh is not None
    assert fresh["metadata"]["labels"]["edition"] == "2"
    assert _gets(management, plural) == before + 2

    management.cluster.delete(plural, name, "cp-ns")
    wait_for(lambda: index.version("", "cp-ns", name) is None, 10.0, "the deletion")
    assert shared.get(client, "", resource, watch, "cp-ns", name) is None


class _RoundTrips:
    """Counts the round trips a Redis client makes: single commands and pipelines."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        single, batch = redis.Redis.execute_command, redis.client.Pipeline.execute

        def counted_single(client: redis.Redis, *args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return single(client, *args, **kwargs)  # type: ignore[no-untyped-call]

        def counted_batch(pipe: redis.client.Pipeline, *args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return batch(pipe, *args, **kwargs)

        monkeypatch.setattr(redis.Redis, "execute_command", counted_single)
        monkeypatch.setattr(redis.client.Pipeline, "execute", counted_batch)


def test_a_pass_looks_up_the_versions_of_all_its_shared_objects_in_one_round_trip(
    servers: dict[str, ApiServer],
    start_watcher: StartWatcher,
    real_redis: redis.Redis,
    key_prefix: str,
    kubeconfig_file: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    management = servers["management"]
    cp = management.cluster.create(CONTROL_PLANES, _control_plane(), "cp-ns")
    sa = management.cluster.create("serviceaccounts", _service_account(), "cp-ns")
    start_watcher()
    cp_index = _Versions(real_redis, key_prefix, CONTROL_PLANE.kind)
    sa_index = _Versions(real_redis, key_prefix, SERVICE_ACCOUNT.kind)
    sa_name = sa["metadata"]["name"]
    wait_for(
        lambda: cp_index.version("", "cp-ns", "cp") and sa_index.version("", "cp-ns", sa_name),
        10.0,
        "the watcher never published the versions",
    )
    refs = [
        SharedRef("", CONTROL_PLANE.kind, "cp-ns", "cp"),
        SharedRef("", SERVICE_ACCOUNT.kind, "cp-ns", sa_name),
        SharedRef("", SERVICE_ACCOUNT.kind, "cp-ns", "absent"),
        # A watch nobody keeps: never trusted, so its object is read live.
        SharedRef("", "NotWatched", "cp-ns", "cp"),
    ]
    client, shared = _client(kubeconfig_file), SharedObjects(real_redis, key_prefix)
    trips = _RoundTrips(monkeypatch)
    found = shared.versions(refs)
    assert trips.count == 1
    assert found == {
        refs[0]: cp["metadata"]["resourceVersion"],
        refs[1]: sa["metadata"]["resourceVersion"],
        refs[2]: None,
        refs[3]: None,
    }
    # The same answers as each index gives alone.
    assert [found[r] for r in refs[:3]] == [
        cp_index.version("", "cp-ns", "cp"),
        sa_index.version("", "cp-ns", sa_name),
        sa_index.version("", "cp-ns", "absent"),
    ]

    for _ in range(2):  # the first fills the copies, the second is served from them
        shared.get(client, "", CONTROL_PLANE, CONTROL_PLANE.kind, "cp-ns", "cp", versions=found)
        shared.get(
            client, "", SERVICE_ACCOUNT, SERVICE_ACCOUNT.kind, "cp-ns", sa_name, versions=found
        )
    before, trips.count = _gets(management, CONTROL_PLANES), 0
    cp_copy = shared.get(
        client, "", CONTROL_PLANE, CONTROL_PLANE.kind, "cp-ns", "cp", versions=found
    )
    assert cp_copy is not None
    assert cp_copy["metadata"]["name"] == "cp"
    assert trips.count == 0, "a version looked up with the others was looked up again"
    assert _gets(management, CONTROL_PLANES) == before


def test_once_the_watcher_stops_every_read_goes_to_the_api_server(
    servers: dict[str, ApiServer],
    real_redis: redis.Redis,
    key_prefix: str,
    kubeconfig_file: Path,
    published: Published,
) -> None:
    management = servers["management"]
    management.cluster.create(CONTROL_PLANES, _control_plane(), "cp-ns")
    client, shared = _client(kubeconfig_file), SharedObjects(real_redis, key_prefix)
    index = _Versions(real_redis, key_prefix, CONTROL_PLANE.kind)
    with watching(kubeconfig_file, real_redis, key_prefix, published):
        wait_for(lambda: index.version("", "cp-ns", "cp") is not None, 10.0, "the version")
        shared.get(client, "", CONTROL_PLANE, CONTROL_PLANE.kind, "cp-ns", "cp")
        before = _gets(management, CONTROL_PLANES)
        shared.get(client, "", CONTROL_PLANE, CONTROL_PLANE.kind, "cp-ns", "cp")
        assert _gets(management, CONTROL_PLANES) == before
    # The version field outlives the watch; the mark that made it trusted does not.
    assert index.version("", "cp-ns", "cp") is None
    for _ in range(2):
        assert shared.get(client, "", CONTROL_PLANE, CONTROL_PLANE.kind, "cp-ns", "cp")
    assert _gets(management, CONTROL_PLANES) == before + 2


def test_a_process_keeps_only_so_many_copies(
    servers: dict[str, ApiServer],
    start_watcher: StartWatcher,
    real_redis: redis.Redis,
    key_prefix: str,
    kubeconfig_file: Path,
) -> None:
    management = servers["management"]
    for namespace in ("tenant-a", "cp-ns", "keystone"):
        management.cluster.create(
            "serviceaccounts",
            {"metadata": {"name": SHARED_SERVICE_ACCOUNT, "namespace": namespace}},
            namespace,
        )
    start_watcher()
    index = _Versions(real_redis, key_prefix, SERVICE_ACCOUNT.kind)
    wait_for(
        lambda: index.version("", "keystone", SHARED_SERVICE_ACCOUNT) is not None, 10.0, "versions"
    )
    client, shared = _client(kubeconfig_file), SharedObjects(real_redis, key_prefix, kept=2)
    for namespace in ("tenant-a", "cp-ns", "keystone"):
        shared.get(
            client, "", SERVICE_ACCOUNT, SERVICE_ACCOUNT.kind, namespace, SHARED_SERVICE_ACCOUNT
        )
    before = _gets(management, "serviceaccounts")
    # The two read last are served; the first was let go, and is read again.
    for namespace in ("cp-ns", "keystone"):
        shared.get(
            client, "", SERVICE_ACCOUNT, SERVICE_ACCOUNT.kind, namespace, SHARED_SERVICE_ACCOUNT
        )
    assert _gets(management, "serviceaccounts") == before
    shared.get(
        client, "", SERVICE_ACCOUNT, SERVICE_ACCOUNT.kind, "tenant-a", SHARED_SERVICE_ACCOUNT
    )
    assert _gets(management, "serviceaccounts") == before + 1
