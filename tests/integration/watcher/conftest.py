"""Fixtures for the watcher against real API servers and the real Redis.

Two clusters (``management`` and ``edge-1``, real kube-apiservers of the test's own, see
``tests.realclusters``) with the CRDs the watcher reads, a kubeconfig naming both, a recording
publisher behind a real ``WorkQueue`` (so deduplication is Redis's own), and a factory that runs
a ``Watcher`` in a thread with timings short enough for tests.
"""

from __future__ import annotations

import base64
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml
from prometheus_client import REGISTRY

from devstack.crds.bloodraven import mysql_failover_group
from tenantdb.adapters.leader import LeaderLease
from tenantdb.adapters.workqueue import WorkQueue
from tenantdb.core.keys import OrderKey
from tenantdb.core.served import route_modules
from tenantdb.settings import Settings
from tests.conftest import REDIS_URL
from tests.realclusters import ApiServer, start_servers, write_kubeconfig
from tests.support import wait_for
from watcher.loop import LoopTiming
from watcher.process import Watcher, WatcherConfig

ORDER_CRD = (
    Path(__file__).resolve().parents[3] / "charts/tenantdb/crds/mariadbdatabases.c5c3.io.yaml"
)
MYSQL_ORDER_CRD = ORDER_CRD.parent / "mysqldatabases.shipstream.io.yaml"
ORDERS = "mariadbdatabases.c5c3.io"
NAMESPACES = ("tenant-a", "cp-ns", "keystone")
LABEL_NAME = "c5c3.io/mariadbdatabase-name"
LABEL_NAMESPACE = "c5c3.io/mariadbdatabase-namespace"
LABEL_CLUSTER = "c5c3.io/mariadbdatabase-cluster"

FAST = WatcherConfig(
    LoopTiming(
        server_timeout=30,
        read_timeout=5.0,
        connect_timeout=2.0,
        backoff_base=0.05,
        backoff_cap=0.5,
        unserved_retry=0.3,
    ),
    cluster_poll=0.2,
    sync_wait=5.0,
    join_timeout=5.0,
)


def open_crd(
    group: str, plural: str, kind: str, version: str, *, status: bool, namespaced: bool = True
) -> dict[str, Any]:
    """A minimal CRD whose spec and status take any fields."""
    open_object = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    served: dict[str, Any] = {
        "name": version,
        "served": True,
        "storage": True,
        "schema": {
            "openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": open_object, "status": open_object},
            }
        },
    }
    if status:
        served["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced" if namespaced else "Cluster",
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
            "versions": [served],
        },
    }


CONTROL_PLANE_CRD = open_crd("c5c3.io", "controlplanes", "ControlPlane", "v1alpha1", status=True)
DATABASE_CRD = open_crd("k8s.mariadb.com", "databases", "Database", "v1alpha1", status=True)
EXTERNAL_SECRET_CRD = open_crd(
    "external-secrets.io", "externalsecrets", "ExternalSecret", "v1", status=True
)
VDS_CRD = open_crd(
    "generators.external-secrets.io",
    "vaultdynamicsecrets",
    "VaultDynamicSecret",
    "v1alpha1",
    status=False,
)

MARIADB_CRD = open_crd("k8s.mariadb.com", "mariadbs", "MariaDB", "v1alpha1", status=True)
SECRET_STORE_CRD = open_crd("external-secrets.io", "secretstores", "SecretStore", "v1", status=True)
CLUSTER_SECRET_STORE_CRD = open_crd(
    "external-secrets.io",
    "clustersecretstores",
    "ClusterSecretStore",
    "v1",
    status=True,
    namespaced=False,
)
CERTIFICATE_CRD = open_crd("cert-manager.io", "certificates", "Certificate", "v1", status=True)


def install(server: ApiServer, *crds: dict[str, Any]) -> None:
    """Install CRDs on a cluster and wait until it serves them."""
    server.install(*crds)


def order_crd() -> dict[str, Any]:
    """The MariaDBDatabase CRD as the chart ships it."""
    loaded = yaml.safe_load(ORDER_CRD.read_text())
    assert isinstance(loaded, dict)
    return loaded


@pytest.fixture
def mysql_kinds(servers: dict[str, ApiServer]) -> None:
    """The MysqlDatabase CRD as the chart ships it, and the MysqlFailoverGroup CRD, on the
    management cluster."""
    crd = yaml.safe_load(MYSQL_ORDER_CRD.read_text())
    install(servers["management"], crd, mysql_failover_group())


def prepare(server: ApiServer, *, orders: bool = True) -> ApiServer:
    """Give a cluster the test namespaces, and (by default) the order CRD."""
    for namespace in NAMESPACES:
        server.cluster.create("namespaces", {"metadata": {"name": namespace}})
    if orders:
        install(server, order_crd())
    return server


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[dict[str, ApiServer]]:
    """``management`` with every watched kind, ``edge-1`` with orders and Database CRs."""
    with start_servers(tmp_path / "kube", ("management", "edge-1")) as started:
        prepare_clusters(started)
        yield started


def prepare_clusters(servers: dict[str, ApiServer]) -> None:
    """Give ``management`` every watched kind and ``edge-1`` orders and Database CRs, both
    the test namespaces; side by side, as each waits for its CRDs to be served."""
    wanted = {
        "management": (order_crd(), CONTROL_PLANE_CRD, DATABASE_CRD, EXTERNAL_SECRET_CRD, VDS_CRD),
        "edge-1": (order_crd(), DATABASE_CRD),
    }
    with ThreadPoolExecutor(max_workers=len(wanted)) as pool:
        for done in [
            pool.submit(_prepare_all, servers[name], crds) for name, crds in wanted.items()
        ]:
            done.result()


def _prepare_all(server: ApiServer, crds: tuple[dict[str, Any], ...]) -> None:
    prepare(server, orders=False)
    install(server, *crds)


@pytest.fixture
def kubeconfig_file(servers: dict[str, ApiServer], tmp_path: Path) -> Path:
    """A kubeconfig with both clusters."""
    path = tmp_path / "kubeconfig"
    write_kubeconfig(path, servers)
    return path


class Published:
    """Keys the work queue published, and the pending marks a worker would clear."""

    def __init__(self, queue_of: Callable[[], WorkQueue]) -> None:
        self.keys: list[OrderKey] = []
        self._cond = threading.Condition()
        self._queue_of = queue_of

    def __call__(self, key: OrderKey) -> None:
        with self._cond:
            self.keys.append(key)
            self._cond.notify_all()

    def take(self, key: OrderKey, timeout: float = 10.0) -> None:
        """Wait until ``key`` was published, then consume it as a worker would."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while key not in self.keys:
                remaining = deadline - time.monotonic()
                assert remaining > 0, f"{key} was not enqueued; published: {self.keys}"
                self._cond.wait(remaining)
            self.keys = [k for k in self.keys if k != key]
        self._queue_of().clear_pending(key)

    def drain(self) -> None:
        """Consume every key published so far."""
        with self._cond:
            taken, self.keys = self.keys, []
        for key in set(taken):
            self._queue_of().clear_pending(key)

    def __contains__(self, key: object) -> bool:
        with self._cond:
            return key in self.keys


@pytest.fixture
def published(real_redis: redis.Redis, key_prefix: str) -> Published:
    """The recording publisher."""
    holder: list[WorkQueue] = []
    recorder = Published(lambda: holder[0])
    holder.append(WorkQueue(real_redis, recorder, prefix=key_prefix))
    return recorder


def settings_for(kubeconfig_path: Path, key_prefix: str) -> Settings:
    """Settings naming the kubeconfig, the real Redis and the test's key prefix."""
    return Settings(
        kubeconfig=str(kubeconfig_path),
        management_context="management",
        redis_url=REDIS_URL,
        key_prefix=key_prefix,
        # The admin token sees every namespace; test_namespaces.py watches as the chart grants.
        target_watch_scope="cluster",
    )


__all__ = ["ApiServer", "write_kubeconfig"]

StartWatcher = Callable[..., Watcher]


@pytest.fixture
def start_watcher(
    real_redis: redis.Redis, key_prefix: str, published: Published, kubeconfig_file: Path
) -> Iterator[StartWatcher]:
    """Run watchers in threads; each has a lease of its own. Waits until the first one synced."""
    running: list[tuple[threading.Event, threading.Thread]] = []

    def start(
        *, settings: Settings | None = None, config: WatcherConfig = FAST, wait: bool = True
    ) -> Watcher:
        queue = WorkQueue(real_redis, published, prefix=key_prefix)
        lease = LeaderLease(
            real_redis, "watcher", prefix=key_prefix, ttl=config.leader_ttl, retry=0.1
        )
        watcher = Watcher(
            settings or settings_for(kubeconfig_file, key_prefix),
            queue,
            lease,
            config,
            route_modules=route_modules(),
        )
        stop = threading.Event()
        thread = threading.Thread(target=watcher.run, args=(stop,), daemon=True)
        thread.start()
        running.append((stop, thread))
        if wait:
            wait_for(watcher.synced, 10.0, "the watcher never synced")
            published.drain()
        return watcher

    yield start
    for stop, _ in running:
        stop.set()
    for _, thread in running:
        thread.join(10)
        assert not thread.is_alive(), "a watcher did not stop"


@contextlib.contextmanager
def watching(
    kubeconfig_file: Path, real_redis: redis.Redis, key_prefix: str, published: Published
) -> Iterator[Watcher]:
    """Run one watcher in a thread for the block; at its end, stop it and check it stopped."""
    queue = WorkQueue(real_redis, published, prefix=key_prefix)
    lease = LeaderLease(real_redis, "watcher", prefix=key_prefix, ttl=10.0, retry=0.1)
    watcher = Watcher(
        settings_for(kubeconfig_file, key_prefix), queue, lease, FAST, route_modules=route_modules()
    )
    stop = threading.Event()
    thread = threading.Thread(target=watcher.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield watcher
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive(), "the watcher did not stop"


def metric(name: str, **labels: str) -> float:
    """A sample of this process's metrics, 0 when absent."""
    return REGISTRY.get_sample_value(name, labels) or 0.0


def order(name: str, namespace: str = "tenant-a", cp: str = "cp", **extra: Any) -> dict[str, Any]:
    """An order body."""
    spec: dict[str, Any] = {"controlPlaneRef": {"name": cp, "namespace": "cp-ns"}}
    spec.update(extra)
    return {
        "apiVersion": "c5c3.io/v1alpha1",
        "kind": "MariaDBDatabase",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def key(name: str, cluster: str = "", namespace: str = "tenant-a") -> OrderKey:
    """An order key."""
    return OrderKey("mariadbdatabase", namespace, name, cluster)


def secret(name: str, namespace: str, labels: dict[str, str], **extra: Any) -> dict[str, Any]:
    """A Secret body with labels and a throwaway value."""
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "data": {"password": base64.b64encode(b"not-a-real-secret").decode()},
    }
    body["metadata"].update(extra)
    return body


def labels_of(name: str, namespace: str = "tenant-a", cluster: str | None = "") -> dict[str, str]:
    """The three ownership labels (the cluster label left out when ``cluster`` is None)."""
    labels = {LABEL_NAME: name, LABEL_NAMESPACE: namespace}
    if cluster is not None:
        labels[LABEL_CLUSTER] = cluster
    return labels
