"""The schema index as the real watcher keeps it: every Database CR where Keystone is placed,
tenantdb's and anyone else's, under its (MariaDB, schema); and not to be trusted once the
watcher that keeps it stops."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import redis

from tenantdb.adapters.schemaindex import SchemaIndex
from tests.integration.watcher.conftest import (
    Published,
    StartWatcher,
    labels_of,
    watching,
)
from tests.realclusters import ApiServer
from tests.support import wait_for

DATABASES = "databases.k8s.mariadb.com"
CONTROL_PLANES = "controlplanes.c5c3.io"


def _database(
    name: str, schema: str | None, labels: dict[str, str] | None = None, mariadb: str = "mariadb"
) -> dict[str, Any]:
    spec: dict[str, Any] = {"mariaDbRef": {"name": mariadb}}
    if schema is not None:
        spec["name"] = schema
    return {
        "apiVersion": "k8s.mariadb.com/v1alpha1",
        "kind": "Database",
        "metadata": {"name": name, "namespace": "keystone", "labels": labels or {}},
        "spec": spec,
    }


def _placing(name: str, target: str | None = None) -> dict[str, Any]:
    keystone: dict[str, Any] = {"namespace": {"name": "keystone"}}
    if target:
        keystone["targetClusterRef"] = {"name": target}
    return {
        "apiVersion": "c5c3.io/v1alpha1",
        "kind": "ControlPlane",
        "metadata": {"name": name, "namespace": "cp-ns"},
        "spec": {"services": {"keystone": keystone}},
    }


def _holds(index: SchemaIndex, cluster: str, schema: str, expected: list[str]) -> None:
    wait_for(
        lambda: index.holders(cluster, "keystone", ("mariadb", schema)) == expected,
        10.0,
        f"the index never showed {expected} for {schema} on {cluster or 'management'}",
    )


def test_every_database_cr_is_indexed_under_its_schema_as_it_changes(
    servers: dict[str, ApiServer],
    start_watcher: StartWatcher,
    real_redis: redis.Redis,
    key_prefix: str,
) -> None:
    management, edge = servers["management"].cluster, servers["edge-1"].cluster
    management.create(CONTROL_PLANES, _placing("cp"), "cp-ns")
    management.create(CONTROL_PLANES, _placing("cp-edge", "edge-1"), "cp-ns")
    # One CR before the watcher starts: the first list carries it.
    management.create(DATABASES, _database("foreign", "app_db"), "keystone")
    start_watcher()
    index = SchemaIndex(real_redis, key_prefix)
    _holds(index, "", "app_db", ["foreign"])

    # tenantdb's own CR (labelled) and another without spec.name (its own name is the schema).
    management.create(DATABASES, _database("ours", "app_db", labels_of("app")), "keystone")
    management.create(DATABASES, _database("nameddb", None), "keystone")
    _holds(index, "", "app_db", ["foreign", "ours"])
    _holds(index, "", "nameddb", ["nameddb"])

    # A CR moved to another schema leaves the old field; a deleted one leaves its field.
    management.patch(DATABASES, "foreign", {"spec": {"name": "moved_db"}}, "keystone")
    _holds(index, "", "app_db", ["ours"])
    _holds(index, "", "moved_db", ["foreign"])
    management.delete(DATABASES, "ours", "keystone")
    _holds(index, "", "app_db", [])
    assert index.holders("", "keystone", ("another-mariadb", "moved_db")) == []

    # On a target cluster, in the namespace a ControlPlane places Keystone in there.
    edge.create(DATABASES, _database("edge-db", "app_db"), "keystone")
    _holds(index, "edge-1", "app_db", ["edge-db"])


def test_a_stopped_watcher_leaves_an_index_no_pass_trusts(
    servers: dict[str, ApiServer],
    real_redis: redis.Redis,
    key_prefix: str,
    kubeconfig_file: Path,
    published: Published,
) -> None:
    management = servers["management"].cluster
    management.create(CONTROL_PLANES, _placing("cp"), "cp-ns")
    management.create(DATABASES, _database("foreign", "app_db"), "keystone")
    index = SchemaIndex(real_redis, key_prefix)
    with watching(kubeconfig_file, real_redis, key_prefix, published):
        _holds(index, "", "app_db", ["foreign"])
    # The loops were told to stop: their marks are gone, and so is the leader's lease.
    assert index.holders("", "keystone", ("mariadb", "app_db")) is None
