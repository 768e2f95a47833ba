"""The MysqlDatabase claim index as the real watcher keeps it, and the peers a pass reads from
it: only the orders on its group that share a name with it, each read live, while the index is
trusted; the namespace listed when it is not, or when it cannot answer."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import redis

from tenantdb.adapters.clusters import ClusterRegistry
from tenantdb.adapters.kube import client_from_kubeconfig
from tenantdb.adapters.mysqldatabase import MysqlOrders, Peers
from tenantdb.adapters.watchindex import WatchIndex
from tenantdb.core.keys import OrderKey
from tenantdb.core.mysqldatabase.naming import CLAIM_INDEX, OWNER_NAME_INDEX
from tenantdb.core.mysqldatabase.reading import PEER_READ_LIMIT, unresolved_slot, username_slot
from tests.integration.watcher.conftest import (
    Published,
    StartWatcher,
    watching,
)
from tests.realclusters import ApiServer
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


def _orders(
    kubeconfig_file: Path, index: WatchIndex | None, owner_names: WatchIndex | None = None
) -> MysqlOrders:
    kube = client_from_kubeconfig(str(kubeconfig_file), "management", "")
    return MysqlOrders(ClusterRegistry({"": lambda: kube}), claims=index, owner_names=owner_names)


def _owner_secret(name: str, username: str) -> dict[str, Any]:
    data = {"username": username, "password": "pw"}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": NS},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


def test_a_pass_reads_only_the_peers_that_share_a_name_with_it(
    servers: dict[str, ApiServer],
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

    # No owner recorded yet: the order is unowned on its group. Not passed yet, it waits on
    # no peer: it is not deferred.
    wait_for(
        lambda: index.holders("", NS, ("database", "main", "app_db")) == ["alpha"],
        10.0,
        "the order never reached the index",
    )
    assert index.holders("", NS, ("unowned", "main")) == ["alpha"]
    assert index.holders("", NS, ("deferred", "main")) == []

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
            index.holders("", NS, ("unowned", "main")) == []
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

    # A peer deferred until an older peer's owner is known is woken, whatever it names; one
    # not Ready for a reason of its own is not; one sharing a name that is not Ready is.
    stamp = {"message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    deferred = {"type": "Ready", "status": "False", "reason": "PeerOwnerSecretMissing", **stamp}
    busy = {"type": "Ready", "status": "False", "reason": "GroupNotFound", **stamp}
    cluster.patch(ORDERS, "delta", {"status": {"conditions": [deferred]}}, NS, subresource="status")
    cluster.patch(ORDERS, "beta", {"status": {"conditions": [busy]}}, NS, subresource="status")
    cluster.patch(ORDERS, "elsewhere", {"status": {"conditions": [busy]}}, NS, subresource="status")
    cluster.create(ORDERS, _order("epsilon", "epsilon_db"), NS)
    unrelated = {"status": {"ownerUser": "epsilon_app", "conditions": [busy]}}
    cluster.patch(ORDERS, "epsilon", unrelated, NS, subresource="status")
    wait_for(
        lambda: index.holders("", NS, ("deferred", "main")) == ["delta"],
        10.0,
        "the deferred peer never reached the index",
    )
    wait_for(
        lambda: index.holders("", NS, ("user", "main", "epsilon_app")) == ["epsilon"],
        10.0,
        "the unrelated peer never reached the index",
    )
    assert orders.peers(key, me(), "alpha_app").waiting == ("beta", "delta")
    index.write_many("", NS, {("database", "main", "app_db"): ["alpha", "beta", "ghost"]})
    assert _names(orders.peers(key, me(), "alpha_app")) == ["beta", "gamma"]

    # Without the index, the namespace is listed: every peer on the group comes back.
    assert _names(_orders(kubeconfig_file, None).peers(key, me(), "alpha_app")) == [
        "beta",
        "delta",
        "epsilon",
        "gamma",
    ]


def test_a_pass_lists_when_the_index_cannot_answer(
    servers: dict[str, ApiServer],
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


def test_of_many_peers_without_an_owner_a_pass_reads_those_whose_secret_names_its_user(
    servers: dict[str, ApiServer],
    start_watcher: StartWatcher,
    real_redis: redis.Redis,
    key_prefix: str,
    kubeconfig_file: Path,
) -> None:
    """A burst of new orders on one group: more peers without a recorded owner than a pass reads
    one by one. The owner-name index the watcher keeps from the Secret watch names the one
    whose Secret claims the order's user, and the pass reads it alone, without a LIST."""
    cluster = servers["management"].cluster
    crowd = [f"crowd-{i}" for i in range(PEER_READ_LIMIT + 4)]
    for name in crowd:
        cluster.create(
            "secrets", _owner_secret(f"{name}-owner", f"{name.replace('-', '_')}_app"), NS
        )
        cluster.create(ORDERS, _order(name, f"{name.replace('-', '_')}_db"), NS)
    cluster.create("secrets", _owner_secret("twin-owner", "alpha_app"), NS)
    cluster.create(ORDERS, _order("twin", "twin_db"), NS)
    # Its owner Secret not written yet: which user it will claim cannot be known.
    cluster.create(ORDERS, _order("orphan", "orphan_db"), NS)
    cluster.create("secrets", _owner_secret("alpha-owner", "alpha_app"), NS)
    cluster.create(ORDERS, _order("alpha", "app_db"), NS)
    start_watcher()
    claims = WatchIndex(real_redis, key_prefix, CLAIM_INDEX)
    names = WatchIndex(real_redis, key_prefix, OWNER_NAME_INDEX)
    wait_for(
        lambda: (
            names.holders("", NS, username_slot("alpha_app")) == ["alpha-owner", "twin-owner"]
            and names.holders("", NS, unresolved_slot("main")) == ["orphan"]
            and len(claims.holders("", NS, ("unowned", "main")) or ()) == len(crowd) + 3
        ),
        10.0,
        "the watcher never indexed the Secrets and the orders",
    )
    orders = _orders(kubeconfig_file, claims, names)
    kube = orders.client(OrderKey("mysqldatabase", NS, "alpha"))
    lists: list[str] = []
    list_objects = kube.list_objects

    def counted(*args: Any, **kwargs: Any) -> Any:
        lists.append(str(args[0]))
        return list_objects(*args, **kwargs)

    kube.list_objects = counted  # type: ignore[method-assign]
    key = OrderKey("mysqldatabase", NS, "alpha")

    def me() -> dict[str, Any]:
        return cluster.get(ORDERS, "alpha", NS)

    assert _names(orders.peers(key, me(), "alpha_app")) == ["orphan", "twin"]
    assert lists == [], "the crowd of unowned peers cost no LIST"

    # Once the orphan's Secret names a user (not alpha's), it is no longer read.
    cluster.create("secrets", _owner_secret("orphan-owner", "orphan_app"), NS)
    wait_for(
        lambda: names.holders("", NS, unresolved_slot("main")) == [],
        10.0,
        "the index never followed the orphan's Secret",
    )
    assert _names(orders.peers(key, me(), "alpha_app")) == ["twin"]

    # The twin's Secret now names another user: once the watch has it, the twin is not read.
    cluster.patch("secrets", "twin-owner", _owner_secret("twin-owner", "twin_app"), NS)
    wait_for(
        lambda: names.holders("", NS, username_slot("alpha_app")) == ["alpha-owner"],
        10.0,
        "the index never followed the Secret",
    )
    assert _names(orders.peers(key, me(), "alpha_app")) == []
    assert lists == []

    # An index that does not list the order's own Secret under the user it names may be behind
    # on other Secrets too: every unowned peer is considered, which here is a LIST.
    names.write_many("", NS, {username_slot("alpha_app"): []})
    everyone = sorted([*crowd, "orphan", "twin"])
    assert _names(orders.peers(key, me(), "alpha_app")) == everyone
    assert len(lists) == 1
    # Without the owner-name index at all, the same.
    assert _names(_orders(kubeconfig_file, claims).peers(key, me(), "alpha_app")) == everyone
