"""``tenantdb status`` from an operator's shell: the clusters found as kubectl finds them, and an
outage said as one line and its own exit code, never shown as orders that do not exist."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from tenantdb.cli import EXIT_OK, EXIT_UNREADABLE, EXIT_USAGE
from tests.conftest import REDIS_URL
from tests.integration.watcher.conftest import ORDERS, order, prepare
from tests.realclusters import ApiServer, start_servers, write_kubeconfig

REPO = Path(__file__).resolve().parents[2]
KEY = "mariadbdatabase/tenant-a/app"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ApiServer]:
    with start_servers(tmp_path / "kube", ("management",)) as started:
        management = prepare(started["management"])
        management.cluster.create(ORDERS, order("app"), "tenant-a")
        yield management


def _status(
    home: Path, key_prefix: str, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TENANTDB_") and k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")
    }
    return subprocess.run(
        [sys.executable, "-m", "tenantdb.cli", "status", *args],
        cwd=REPO,
        env={
            **clean,
            "HOME": str(home),
            "PYTHONPATH": str(REPO),
            "TENANTDB_REDIS_URL": REDIS_URL,
            "TENANTDB_KEY_PREFIX": key_prefix,
            **env,
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_with_no_cluster_configured_status_says_so_in_one_line(
    tmp_path: Path, key_prefix: str, real_redis: redis.Redis
) -> None:
    done = _status(tmp_path, key_prefix)
    assert done.returncode == EXIT_USAGE, done.stderr
    assert done.stderr.startswith("tenantdb: no cluster configured: set TENANTDB_KUBECONFIG")
    assert done.stderr.count("\n") == 1, "one line, no traceback"


def test_status_reads_the_kubeconfig_kubectl_would(
    tmp_path: Path, key_prefix: str, real_redis: redis.Redis, server: ApiServer
) -> None:
    # ~/.kube/config, as kubectl reads it by default.
    (tmp_path / ".kube").mkdir()
    write_kubeconfig(tmp_path / ".kube" / "config", {"management": server})
    done = _status(tmp_path, key_prefix)
    assert done.returncode == EXIT_OK, done.stderr
    assert KEY in done.stdout

    # $KUBECONFIG wins over ~/.kube/config, and TENANTDB_KUBECONFIG over both.
    elsewhere = tmp_path / "elsewhere.yaml"
    broken = tmp_path / "broken.yaml"
    write_kubeconfig(elsewhere, {"management": server})
    _unreachable(broken)
    done = _status(tmp_path, key_prefix, KUBECONFIG=f"{tmp_path / 'missing'}:{elsewhere}")
    assert done.returncode == EXIT_OK, done.stderr
    done = _status(tmp_path, key_prefix, KUBECONFIG=str(broken))
    assert done.returncode == EXIT_UNREADABLE, done.stderr
    done = _status(tmp_path, key_prefix, KUBECONFIG=str(broken), TENANTDB_KUBECONFIG=str(elsewhere))
    assert done.returncode == EXIT_OK, done.stderr
    assert KEY in done.stdout


def _unreachable(path: Path) -> None:
    """A kubeconfig whose management cluster listens nowhere (a port nothing binds)."""
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "gone", "cluster": {"server": "http://127.0.0.1:9"}}],
                "users": [{"name": "u", "user": {"token": "not-a-real-token"}}],
                "contexts": [{"name": "management", "context": {"cluster": "gone", "user": "u"}}],
                "current-context": "management",
            }
        )
    )


def test_a_cluster_that_cannot_be_read_is_one_line_and_exit_4_never_not_found(
    tmp_path: Path, key_prefix: str, real_redis: redis.Redis
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    _unreachable(kubeconfig)
    listed = _status(tmp_path, key_prefix, TENANTDB_KUBECONFIG=str(kubeconfig))
    assert listed.returncode == EXIT_UNREADABLE, listed.stderr
    assert listed.stderr.startswith("tenantdb: cluster management cannot be read: ")
    assert listed.stderr.count("\n") == 1, listed.stderr
    assert "not-a-real-token" not in listed.stdout + listed.stderr

    one = _status(tmp_path, key_prefix, KEY, TENANTDB_KUBECONFIG=str(kubeconfig))
    assert one.returncode == EXIT_UNREADABLE, one.stderr
    assert "ClusterUnreadable" in one.stdout
    assert "NotFound" not in one.stdout
    assert "its cluster cannot be read" in one.stdout


def test_status_filters_and_its_json_document(
    tmp_path: Path, key_prefix: str, real_redis: redis.Redis, server: ApiServer
) -> None:
    server.cluster.create("namespaces", {"metadata": {"name": "tenant-b"}})
    server.cluster.create(ORDERS, order("other", namespace="tenant-b"), "tenant-b")
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "AllReady",
        "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    server.cluster.patch(
        ORDERS, "app", {"status": {"conditions": [ready]}}, "tenant-a", subresource="status"
    )
    kubeconfig = tmp_path / "kubeconfig"
    write_kubeconfig(kubeconfig, {"management": server})
    env = {"TENANTDB_KUBECONFIG": str(kubeconfig)}

    def listed(*args: str) -> dict[str, Any]:
        done = _status(tmp_path, key_prefix, "--json", *args, **env)
        assert done.returncode == EXIT_OK, done.stderr
        document: dict[str, Any] = json.loads(done.stdout)
        return document

    everything = listed()
    assert everything["schemaVersion"] == 1
    assert everything["unreadable"] == {}
    assert [o["key"] for o in everything["orders"]] == [KEY, "mariadbdatabase/tenant-b/other"]
    first = everything["orders"][0]
    assert (first["kind"], first["namespace"], first["name"], first["cluster"]) == (
        "mariadbdatabase",
        "tenant-a",
        "app",
        "management",
    )
    assert first["ready"] == "True"
    assert [o["name"] for o in listed("--namespace", "tenant-b")["orders"]] == ["other"]
    assert [o["name"] for o in listed("--not-ready")["orders"]] == ["other"]
    assert listed("--kind", "mysqldatabase")["orders"] == []
    assert listed("--cluster", "edge-1")["orders"] == []
    assert len(listed("--cluster", "management")["orders"]) == 2
