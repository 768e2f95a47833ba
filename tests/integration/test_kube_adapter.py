"""tenantdb's Kubernetes adapter against real API servers, through the official client.

The adapter is tenantdb's only way into a cluster, so these tests pin what the engine relies
on: server-side apply owns exactly the fields tenantdb sends, the status goes through its own
subresource, finalizer changes fail on a stale read instead of losing an update, lists page,
errors come out typed, and clusters resolve by name from one kubeconfig.
"""

from __future__ import annotations

import base64
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tenantdb.adapters.clusters import (
    ClusterRegistry,
    ClusterUnavailableError,
    load_cluster_config,
)
from tenantdb.adapters.kube import (
    NAMESPACE,
    SECRET,
    ConflictError,
    InvalidError,
    KindNotServedError,
    KubeClient,
    NotFoundError,
    UnavailableError,
    client_from_kubeconfig,
)
from tenantdb.adapters.mariadbdatabase import MARIADB_DATABASE
from tenantdb.logs import configure_logging
from tenantdb.settings import Settings
from tests.realclusters import ApiServer, kubeconfig, start_servers
from tests.support import wait_for

CRD = Path(__file__).resolve().parents[2] / "charts/tenantdb/crds/mariadbdatabases.c5c3.io.yaml"


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[dict[str, ApiServer]]:
    with start_servers(tmp_path / "kube", ("management", "edge-1")) as started:
        yield started


@pytest.fixture
def kubeconfig_file(servers: dict[str, ApiServer], tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig(servers, current="management")))
    return path


@pytest.fixture
def kube(kubeconfig_file: Path) -> KubeClient:
    client = client_from_kubeconfig(str(kubeconfig_file), "management", "")
    client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tenant-a"}})
    return client


def _secret(**data: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "app-credentials", "namespace": "tenant-a"},
        "type": "Opaque",
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


def _data(obj: dict[str, object]) -> dict[str, str]:
    data = obj.get("data") or {}
    assert isinstance(data, dict)
    return {k: base64.b64decode(v).decode() for k, v in data.items()}


def test_apply_rewrites_edits_keeps_foreign_keys_and_drops_what_it_stops_applying(
    kube: KubeClient,
) -> None:
    kube.apply(_secret(host="db", password="p1", **{"ca.crt": "CA"}))
    # Somebody else edits one of tenantdb's keys and adds one of their own.
    kube.patch(
        SECRET, "tenant-a", "app-credentials", {"data": {"host": "ZXZpbA==", "extra": "eA=="}}
    )
    applied = kube.apply(_secret(host="db", password="p1"))
    assert _data(applied) == {"host": "db", "password": "p1", "extra": "x"}


def test_status_goes_through_the_subresource_only(kube: KubeClient) -> None:
    _install_crd(kube)
    order = {
        "apiVersion": "c5c3.io/v1alpha1",
        "kind": "MariaDBDatabase",
        "metadata": {"name": "app-db", "namespace": "tenant-a"},
        "spec": {"controlPlaneRef": {"name": "cp", "namespace": "openstack"}},
    }
    kube.create(order)
    written = kube.patch(
        MARIADB_DATABASE,
        "tenant-a",
        "app-db",
        {"status": {"databaseName": "app_db"}},
        status=True,
    )
    assert written["status"]["databaseName"] == "app_db"
    ignored = kube.patch(MARIADB_DATABASE, "tenant-a", "app-db", {"status": {"databaseName": "x"}})
    assert ignored["status"]["databaseName"] == "app_db"
    assert ignored["metadata"]["generation"] == 1


def _install_crd(kube: KubeClient) -> None:
    """Install the MariaDBDatabase CRD and wait until the server serves it."""
    kube.apply(yaml.safe_load(CRD.read_text()))
    wait_for(lambda: _served(kube), 20, "the MariaDBDatabase CRD to be served")


def _served(kube: KubeClient) -> bool:
    try:
        kube.list_objects(MARIADB_DATABASE, "tenant-a")
    except KindNotServedError:
        return False
    return True


def _order(kube: KubeClient) -> dict[str, object]:
    _install_crd(kube)
    return kube.create(
        {
            "apiVersion": "c5c3.io/v1alpha1",
            "kind": "MariaDBDatabase",
            "metadata": {"name": "app-db", "namespace": "tenant-a"},
            "spec": {"controlPlaneRef": {"name": "cp", "namespace": "openstack"}},
        }
    )


def _lease_lost() -> None:
    raise RuntimeError("lease lost")


def test_a_status_write_after_a_newer_pass_wrote_never_overwrites_it(kube: KubeClient) -> None:
    read = _order(kube)
    # A newer pass wrote its status after this pass read the order and lost its lease.
    kube.patch(
        MARIADB_DATABASE, "tenant-a", "app-db", {"status": {"databaseName": "newer"}}, status=True
    )

    with pytest.raises(RuntimeError, match="lease lost"):
        kube.write_status(MARIADB_DATABASE, read, lambda _: {"databaseName": "stale"}, _lease_lost)

    assert kube.get(MARIADB_DATABASE, "tenant-a", "app-db")["status"] == {"databaseName": "newer"}


def test_a_status_write_over_someone_elses_edit_goes_through_while_the_lease_holds(
    kube: KubeClient,
) -> None:
    read = _order(kube)
    kube.patch(MARIADB_DATABASE, "tenant-a", "app-db", {"metadata": {"labels": {"team": "a"}}})
    seen: list[object] = []

    def compute(stored: object) -> dict[str, str]:
        seen.append(stored)
        return {"databaseName": "mine"}

    written = kube.write_status(MARIADB_DATABASE, read, compute, lambda: None)

    assert written["status"] == {"databaseName": "mine"}
    assert written["metadata"]["labels"] == {"team": "a"}
    assert len(seen) == 2, "the patch is computed again over the status read again"


def test_a_status_with_nothing_to_write_sends_nothing(kube: KubeClient) -> None:
    read = _order(kube)
    assert kube.write_status(MARIADB_DATABASE, read, lambda _: {}, _lease_lost) is read
    assert (
        kube.get(MARIADB_DATABASE, "tenant-a", "app-db")["metadata"]["resourceVersion"]
        == (
            read["metadata"]["resourceVersion"]  # type: ignore[index]
        )
    )


def test_finalizer_change_on_a_stale_read_is_a_conflict(kube: KubeClient) -> None:
    kube.apply(_secret(host="db"))
    read = kube.get(SECRET, "tenant-a", "app-credentials")
    kube.set_finalizers(read, ["example.com/hold"])
    with pytest.raises(ConflictError, match="on cluster management"):
        kube.set_finalizers(read, [])
    fresh = kube.get(SECRET, "tenant-a", "app-credentials")
    kube.set_finalizers(fresh, [])
    assert "finalizers" not in kube.get(SECRET, "tenant-a", "app-credentials")["metadata"]


def test_lists_page_through_every_object(kube: KubeClient) -> None:
    for i in range(7):
        kube.apply({**_secret(n=str(i)), "metadata": {"name": f"s-{i}", "namespace": "tenant-a"}})
    names = {o["metadata"]["name"] for o in kube.list_objects(SECRET, "tenant-a", page=3)}
    assert {f"s-{i}" for i in range(7)} <= names


def test_errors_come_out_typed(kube: KubeClient, servers: dict[str, ApiServer]) -> None:
    with pytest.raises(NotFoundError, match='secrets "absent" not found'):
        kube.get(SECRET, "tenant-a", "absent")
    assert kube.get_or_none(SECRET, "tenant-a", "absent") is None
    assert kube.delete(SECRET, "tenant-a", "absent") is False
    with pytest.raises(KindNotServedError):
        kube.list_objects(MARIADB_DATABASE, "tenant-a")
    with pytest.raises(InvalidError):
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "Not_Valid"}})
    servers["management"].real.stop()
    with pytest.raises(UnavailableError, match="no answer"):
        kube.get(NAMESPACE, None, "tenant-a")


def test_clusters_resolve_by_name_from_one_kubeconfig(kubeconfig_file: Path) -> None:
    registry = ClusterRegistry.from_settings(
        Settings(kubeconfig=str(kubeconfig_file), management_context="management")
    )
    assert registry.names() == ["", "edge-1"]
    registry.get("edge-1").apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "only-on-edge"}}
    )
    assert registry.get("").get_or_none(NAMESPACE, None, "only-on-edge") is None
    with pytest.raises(ClusterUnavailableError, match='cluster "edge-9" is not registered'):
        registry.get("edge-9")


def test_a_context_an_order_key_cannot_name_is_skipped_and_said_and_a_file_can_rename_it(
    servers: dict[str, ApiServer], tmp_path: Path
) -> None:
    gke = "gke_project_europe-west1_edge-2"  # underscores: no order key carries them
    config = kubeconfig(servers, current="management")
    edge = next(c for c in config["contexts"] if c["name"] == "edge-1")
    config["contexts"].append({**edge, "name": gke})
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    settings = Settings(kubeconfig=str(path), management_context="management")

    registry = ClusterRegistry.from_settings(settings)
    assert registry.names() == ["", "edge-1"]
    assert registry.skipped == {
        gke: f"context {gke!r} cannot name a cluster in order keys: use lower-case letters,"
        " digits, '-' and '.', starting and ending with a letter or digit"
    }

    # The same cluster served under a name of its own: a file of the kubeconfig directory.
    directory = tmp_path / "clusters"
    directory.mkdir()
    (directory / "edge-2").write_text(yaml.safe_dump({**config, "current-context": gke}))
    (directory / "arn:aws:eks:eu-1:1:cluster/x".replace("/", "_")).write_text(path.read_text())
    loaded = load_cluster_config(settings.model_copy(update={"kubeconfig_dir": str(directory)}))
    assert loaded.registry.names() == ["", "edge-1", "edge-2"]
    assert sorted(loaded.registry.skipped) == ["arn:aws:eks:eu-1:1:cluster_x", gke]
    loaded.registry.get("edge-2").apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "via-the-file"}}
    )
    assert registry.get("edge-1").get_or_none(NAMESPACE, None, "via-the-file") is not None


def test_debug_logging_never_writes_a_secret_the_client_read(
    kube: KubeClient, capfd: pytest.CaptureFixture[str]
) -> None:
    kube.apply(_secret(password="delivered-pw-4711"))
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        configure_logging("DEBUG")
        kube.get(SECRET, "tenant-a", "app-credentials")
        logging.getLogger("tenantdb.test").debug("a debug line still gets through")
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    written = capfd.readouterr().err
    assert "a debug line still gets through" in written
    assert base64.b64encode(b"delivered-pw-4711").decode() not in written
    assert "delivered-pw-4711" not in written


_KILLED_CLIENT = """
import os, signal, sys
from tenantdb.adapters.kube import SECRET, client_from_kubeconfig
client = client_from_kubeconfig(sys.argv[1], "management", "")
conf = client.api.configuration
print(conf.key_file, conf.cert_file, conf.ssl_ca_cert, flush=True)
with open(conf.key_file, "rb") as key:
    assert key.read() == sys.argv[2].encode(), "the key reads back from its path"
client.get_or_none(SECRET, "tenant-a", "nothing-here")  # a request over TLS with the held CA
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_process_leaves_no_client_key_on_disk(
    servers: dict[str, ApiServer], tmp_path: Path
) -> None:
    # The admin's client certificate and key, inline in the kubeconfig as a mounted one has them.
    key = servers["management"].real.pki.admin_key.read_bytes()
    config = kubeconfig(servers, current="management")
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    scratch = tmp_path / "tmp"
    scratch.mkdir()

    done = subprocess.run(
        [sys.executable, "-c", _KILLED_CLIENT, str(path), key.decode()],
        env={**os.environ, "TMPDIR": str(scratch)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == -signal.SIGKILL, done.stderr
    held = done.stdout.split()
    assert held[:2] == [p for p in held[:2] if p.startswith("/proc/self/fd/")], held
    left = [p.read_bytes() for p in scratch.rglob("*") if p.is_file()]
    assert not any(b"PRIVATE KEY" in content for content in left), "a key outlived the process"


def test_status_names_a_skipped_context_on_one_line(
    servers: dict[str, ApiServer],
    tmp_path: Path,
    key_prefix: str,
    real_redis: object,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tenantdb.cli import EXIT_OK, main
    from tenantdb.settings import load_settings
    from tests.conftest import REDIS_URL

    config = kubeconfig(servers, current="management")
    edge = next(c for c in config["contexts"] if c["name"] == "edge-1")
    config["contexts"].append({**edge, "name": "gke_project_zone_edge"})
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    for name, value in {
        "TENANTDB_KUBECONFIG": str(path),
        "TENANTDB_MANAGEMENT_CONTEXT": "management",
        "TENANTDB_REDIS_URL": REDIS_URL,
        "TENANTDB_KEY_PREFIX": key_prefix,
    }.items():
        monkeypatch.setenv(name, value)
    load_settings.cache_clear()
    try:
        assert main(["status"]) == EXIT_OK
    finally:
        load_settings.cache_clear()
    err = capsys.readouterr().err
    assert err == (
        "tenantdb: skipped cluster context 'gke_project_zone_edge' cannot name a cluster in order"
        " keys: use lower-case letters, digits, '-' and '.', starting and ending with a letter or"
        " digit\n"
    )


def test_a_delete_for_an_object_replaced_since_leaves_the_new_one(kube: KubeClient) -> None:
    # A teardown planned over the Secret it read; the order was deleted and made again, and
    # with it the Secret, before the stale delete was sent.
    seen = kube.apply(_secret(password="old"))
    kube.delete(SECRET, "tenant-a", "app-credentials")
    remade = kube.apply(_secret(password="new"))
    old_uid, new_uid = seen["metadata"]["uid"], remade["metadata"]["uid"]
    assert old_uid != new_uid
    assert kube.delete(SECRET, "tenant-a", "app-credentials", uid=old_uid) is False
    kept = kube.get_or_none(SECRET, "tenant-a", "app-credentials")
    assert kept is not None
    assert _data(kept) == {"password": "new"}
    assert kube.delete(SECRET, "tenant-a", "app-credentials", uid=new_uid) is True
    assert kube.get_or_none(SECRET, "tenant-a", "app-credentials") is None
