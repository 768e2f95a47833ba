"""The MysqlDatabase claim index as the real watcher keeps it, and the peers a pass reads from
it: only the orders on its group that share a name with it, each read live, while the index is
trusted; the namespace listed when it is not, or when it cannot answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis

from devstack.kube.server import ClusterServer
from tenantdb.adapters.clusters import ClusterRegistry
from tenantdb.adapters.kube import client_from_kubeconfig
from tenantdb.adapters.mysqldatabase import MysqlOrders, Peers
from tenantdb.adapters.watchindex import WatchIndex
from tenantdb.core.keys import OrderKey
from tenantdb.core.mysqldatabase.naming import CLAIM_INDEX
from tenantdb.core.mysqldatabase.reading import PEER_READ_LIMIT
from tests.integration.watcher.conftest import (
    Published,
    StartWatcher,
    watching,
)
from tests.support import wait_for

ORDERS = "mysqldatabases.shipstream.io"
NS = "tenant-a"


pytestmark = pytest.mark.usefixtures("mysql_kinds")


def _order(name: str, database: str, group: str = "main", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "shipstream.io/v1alpha1",
        "kind": "MysqlDatabase",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "groupRef": {"name": group},
            "databaseName": database,
            "owner": {"secretName": f"{name}-owner"},
            **spec,
        },
    }


def _ready(owner: str) -> dict[str, Any]:
    return {
        "status": {
            "ownerUser": owner,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "Applied",
                    "message": "",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
        }
    }


def _names(peers: Peers) -> list[str]:
    return [str(o["metadata"]["name"]) for o in peers.orders]


def _orders(kubeconfig_file: Path, index: WatchIndex | None) -> MysqlOrders:
    kube = client_from_kubeconfig(str(kubeconfig_file), "management", "")
    return MysqlOrders(ClusterRegistry({"": lambda: kube}), claims=index)


def test_a_pass_reads_only_the_peers_that_share_a_name_with_it(
    servers: dict[str, ClusterServer],
    start_watcher: StartWatcher,
    real_redis: redis.Redis,
    key_prefix: str,
    kubeconfig_file: Path,
) -> None:
    cluster = servers["management"].cluster
    cluster.create(ORDERS, _order("alpha", "app_db"), NS)
    start_watcher()
    index = WatchIndex(real_redis, key_prefix, CLAIM_INDEX)
    orders = _orders(kubeconfig_file, index)
    key = OrderKey("mysqldatabase", NS, "alpha")

    def me() -> dict[str, Any]:
        return cluster.get(ORDERS, "alpha", NS)

    # Not Ready and no owner recorded yet: the order is waiting and unowned on its group.
    wait_for(
        lambda: index.holders("", NS, ("database", "main", "app_db")) == ["alpha"],
        10.0,
        "the order never reached the index",
    )
    assert index.holders("", NS, ("unowned", "main")) == ["alpha"]
    assert index.holders("", NS, ("waiting", "main")) == ["alpha"]

    # Peers: one on the same schema, one that grants to alpha's owner, one unrelated, one on
    # another group with the same schema.
    cluster.create(ORDERS, _order("beta", "app_db"), NS)
    grants = [{"username": "alpha_app", "privileges": ["SELECT"]}]
    cluster.create(ORDERS, _order("gamma", "gamma_db", grants=grants), NS)
    cluster.create(ORDERS, _order("delta", "delta_db"), NS)
    cluster.create(ORDERS, _order("elsewhere", "app_db", group="other"), NS)
    for name, owner in (("beta", "beta_app"), ("gamma", "gamma_app"), ("delta", "delta_app")):
        cluster.patch(ORDERS, name, _ready(owner), NS, subresource="status")
    cluster.patch(ORDERS, "alpha", _ready("alpha_app"), NS, subresource="status")
    wait_for(
        lambda: (
            index.holders("", NS, ("waiting", "main")) == []
            and index.holders("", NS, ("user", "main", "delta_app")) == ["delta"]
        ),
        10.0,
        "the index never followed the status writes",
    )
    assert index.holders("", NS, ("unowned", "main")) == []
    assert index.holders("", NS, ("grant", "main", "alpha_app")) == ["gamma"]
    assert index.holders("", NS, ("database", "other", "app_db")) == ["elsewhere"]

    found = orders.peers(key, me(), "alpha_app")
    assert _names(found) == ["beta", "gamma"], "only the peers sharing a name, read live"
    assert found.waiting == ()

    # A peer that waits is woken; a deleted peer the index still names is read as gone.
    cluster.patch(ORDERS, "delta", {"status": {"conditions": []}}, NS, subresource="status")
    wait_for(
        lambda: index.holders("", NS, ("waiting", "main")) == ["delta"],
        10.0,
        "the waiting peer never reached the index",
    )
    assert orders.peers(key, me(), "alpha_app").waiting == ("delta",)
    index.write_many("", NS, {("database", "main", "app_db"): ["alpha", "beta", "ghost"]})
    assert _names(orders.peers(key, me(), "alpha_app")) == ["beta", "gamma"]

    # Without the index, the namespace is listed: every peer on the group comes back.
    assert _names(_orders(kubeconfig_file, None).peers(key, me(), "alpha_app")) == [
        "beta",
        "delta",
        "gamma",
    ]


def test_a_pass_lists_when_the_index_cannot_answer(
    servers: dict[str, ClusterServer],
    real_redis: redis.Redis,
    key_prefix: str,
    kubeconfig_file: Path,
    published: Published,
) -> None:
    cluster = servers["management"].cluster
    cluster.create(ORDERS, _order("alpha", "app_db"), NS)
    # A Ready peer on the group that shares no name with alpha: only a LIST returns it.
    cluster.create(ORDERS, _order("unrelated", "other_db"), NS)
    cluster.patch(ORDERS, "unrelated", _ready("other_app"), NS, subresource="status")
    index = WatchIndex(real_redis, key_prefix, CLAIM_INDEX)
    orders = _orders(kubeconfig_file, index)
    key = OrderKey("mysqldatabase", NS, "alpha")
    me = cluster.get(ORDERS, "alpha", NS)
    with watching(kubeconfig_file, real_redis, key_prefix, published):
        wait_for(
            lambda: (
                index.holders("", NS, ("database", "main", "app_db")) == ["alpha"]
                and index.holders("", NS, ("unowned", "main")) == ["alpha"]
            ),
            10.0,
            "the orders never reached the index",
        )
        assert _names(orders.peers(key, me, None)) == [], "the index names no peer"

        # An order the index has not seen yet may have older peers it has not seen either.
        index.write_many("", NS, {("database", "main", "app_db"): []})
        assert _names(orders.peers(key, me, None)) == ["unrelated"]

        # More peers than a pass reads one by one: one LIST instead.
        crowd = [f"new-{i}" for i in range(PEER_READ_LIMIT + 1)]
        index.write_many("", NS, {("database", "main", "app_db"): ["alpha"]})
        index.write_many("", NS, {("unowned", "main"): ["alpha", *crowd]})
        assert _names(orders.peers(key, me, None)) == ["unrelated"]
        index.write_many("", NS, {("unowned", "main"): ["alpha"]})
        assert _names(orders.peers(key, me, None)) == []
    # The watcher stopped: its marks are gone, and the pass lists.
    assert index.holders("", NS, ("database", "main", "app_db")) is None
    assert _names(orders.peers(key, me, None)) == ["unrelated"]
