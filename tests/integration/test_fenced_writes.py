"""A write from a pass that lost its lease is refused where it lands, on either API server.

A pass reads a child, plans its apply and sends it with the resourceVersion it read (or, for a
child it read absent, one no stored object carries). These tests play the stale pass and the
newer one by hand against the devstack and a real kube-apiserver: the write of the pass that
read first must not land over what the newer pass wrote, and a pass whose lease still holds
gets past a change someone else made (an operator's status write) by reading again once.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devstack import realkube
from tenantdb.adapters.clusters import MANAGEMENT, ClusterRegistry
from tenantdb.adapters.kube import SECRET, KubeClient, client_from_kubeconfig
from tenantdb.adapters.mariadbdatabase import MariaDBOrders
from tenantdb.adapters.workqueue import LeaseLostError
from tenantdb.core.actions import ApplyObject, read_version
from tenantdb.core.keys import OrderKey
from tenantdb.settings import Settings

NS = "tenant-a"


@pytest.fixture(scope="module")
def kubeconfig_path(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A kubeconfig whose `management` context is a real kube-apiserver."""
    missing = realkube.missing_binaries()
    if missing:
        pytest.fail(f"{', '.join(missing)} not built in tools/kube/bin; run `make kube`")
    started = realkube.start_real_clusters(tmp_path_factory.mktemp("fenced"), ["management"])
    try:
        yield started.kubeconfigs["management"]
    finally:
        started.stop()


@pytest.fixture(scope="module")
def kube(kubeconfig_path: Path) -> KubeClient:
    client = client_from_kubeconfig(str(kubeconfig_path), "management", "")
    client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    return client


@pytest.fixture
def io(kube: KubeClient) -> MariaDBOrders:
    return MariaDBOrders(ClusterRegistry({MANAGEMENT: lambda: kube}), Settings())


_names = iter(range(10_000))


@pytest.fixture
def name() -> str:
    return f"delivered-{next(_names)}"


def _secret(name: str, password: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": NS},
        "type": "Opaque",
        "data": {"password": base64.b64encode(password.encode()).decode()},
    }


def _password(kube: KubeClient, name: str) -> str:
    stored = kube.get(SECRET, NS, name)
    return base64.b64decode(stored["data"]["password"]).decode()


def _lost() -> None:
    raise LeaseLostError(OrderKey.parse("management/tenant-a/app"))


def test_a_stale_create_never_replaces_what_a_newer_pass_created(
    kube: KubeClient, io: MariaDBOrders, name: str
) -> None:
    stale = ApplyObject(MANAGEMENT, _secret(name, "old"), read_version=read_version(None))
    newer = ApplyObject(MANAGEMENT, _secret(name, "new"), read_version=read_version(None))
    io.run(newer, _lost)
    with pytest.raises(LeaseLostError):
        io.run(stale, _lost)
    assert _password(kube, name) == "new"


def test_a_stale_apply_never_replaces_what_a_newer_pass_wrote_since_its_read(
    kube: KubeClient, io: MariaDBOrders, name: str
) -> None:
    first = kube.apply(_secret(name, "first"))
    read_by_both = read_version(first)
    io.run(ApplyObject(MANAGEMENT, _secret(name, "new"), read_version=read_by_both), _lost)
    with pytest.raises(LeaseLostError):
        io.run(ApplyObject(MANAGEMENT, _secret(name, "old"), read_version=read_by_both), _lost)
    assert _password(kube, name) == "new"


def test_a_pass_that_holds_its_lease_writes_over_a_change_someone_else_made(
    kube: KubeClient, io: MariaDBOrders, name: str
) -> None:
    read = kube.apply(_secret(name, "first"))
    checks: list[str] = []
    # Someone else (another field manager) changes the object after the pass read it.
    kube.patch(SECRET, NS, name, {"metadata": {"labels": {"by": "someone"}}})
    answer = io.run(
        ApplyObject(MANAGEMENT, _secret(name, "mine"), read_version=read_version(read)),
        lambda: checks.append("checked"),
    )
    assert checks == ["checked"], "the lease is confirmed before the apply is sent again"
    assert answer is not None
    assert _password(kube, name) == "mine"
    assert kube.get(SECRET, NS, name)["metadata"]["labels"] == {"by": "someone"}
