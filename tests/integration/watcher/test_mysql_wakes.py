"""Which MysqlDatabases the real watcher wakes for a change of what their passes read: the
orders on a group when the group's spec or one of its credential Secrets (or its CA Secret)
changes, the orders owning an owner Secret when it changes, and nobody for a Secret no order
depends on or for a re-apply that changes no data."""

from __future__ import annotations

import base64
import itertools
from typing import Any

import pytest

from tenantdb.core.keys import OrderKey
from tests.integration.watcher.conftest import Published, StartWatcher
from tests.realclusters import ApiServer

ORDERS = "mysqldatabases.shipstream.io"
GROUPS = "mysqlfailovergroups.shipstream.io"
NS = "tenant-a"


pytestmark = pytest.mark.usefixtures("mysql_kinds")


def _order(name: str, group: str) -> dict[str, Any]:
    return {
        "apiVersion": "shipstream.io/v1alpha1",
        "kind": "MysqlDatabase",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "groupRef": {"name": group},
            "databaseName": f"{name.replace('-', '_')}_db",
            "owner": {"secretName": f"{name}-owner"},
        },
    }


def _group(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "shipstream.io/v1alpha1",
        "kind": "MysqlFailoverGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "sites": [{"name": "dc1"}, {"name": "dc2"}],
            "credentials": {
                "operatorSecret": f"{name}-operator",
                "appSecret": f"{name}-app",
            },
            **spec,
        },
    }


def _secret(name: str, password: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": NS},
        "data": {"password": base64.b64encode(password.encode()).decode()},
    }


def _key(name: str) -> OrderKey:
    return OrderKey("mysqldatabase", NS, name)


def _woken(published: Published, change: Any) -> set[str]:
    """The orders woken by ``change``, once the watcher handed on the marker written after
    it (events of one watch arrive in order, so the marker comes last)."""
    published.drain()
    change()
    return {k.name for k in published.keys if k.kind == "mysqldatabase"}


def test_a_change_of_what_a_group_names_wakes_the_orders_on_the_group_only(
    servers: dict[str, ApiServer], start_watcher: StartWatcher, published: Published
) -> None:
    cluster = servers["management"].cluster
    for group in ("main", "other"):
        cluster.create(GROUPS, _group(group), NS)
        for secret in (f"{group}-operator", f"{group}-app"):
            cluster.create("secrets", _secret(secret, "one"), NS)
    cluster.create("secrets", _secret("main-tls", "ca"), NS)
    cluster.create("secrets", _secret("unrelated", "one"), NS)
    for name, group in (("alpha", "main"), ("beta", "main"), ("gamma", "other")):
        cluster.create(ORDERS, _order(name, group), NS)
        cluster.create("secrets", _secret(f"{name}-owner", "one"), NS)
    start_watcher()
    marks = itertools.count()

    def then_marker(write: Any) -> Any:
        # The owner Secret of gamma changes after each write: its wake tells that the Secret
        # watch has handed on everything before it.
        def run() -> None:
            write()
            cluster.patch("secrets", "gamma-owner", _secret("gamma-owner", f"m{next(marks)}"), NS)
            published.take(_key("gamma"))

        return run

    rotate = then_marker(
        lambda: cluster.patch("secrets", "main-operator", _secret("main-operator", "two"), NS)
    )
    assert _woken(published, rotate) == {"alpha", "beta"}, "the operator Secret rotated"

    app = then_marker(lambda: cluster.patch("secrets", "main-app", _secret("main-app", "two"), NS))
    assert _woken(published, app) == {"alpha", "beta"}, "the app Secret (a reserved user) changed"

    same = then_marker(lambda: cluster.patch("secrets", "main-app", _secret("main-app", "two"), NS))
    assert _woken(published, same) == set(), "a re-apply with the same data wakes nobody"

    other = then_marker(
        lambda: cluster.patch("secrets", "unrelated", _secret("unrelated", "two"), NS)
    )
    assert _woken(published, other) == set(), "no order depends on that Secret"

    owner = then_marker(
        lambda: cluster.patch("secrets", "alpha-owner", _secret("alpha-owner", "two"), NS)
    )
    assert _woken(published, owner) == {"alpha"}, "an owner Secret wakes its order only"

    # The CA Secret is a dependency only once the group asks for TLS, which is a spec change
    # that wakes the group's orders itself.
    ca = then_marker(lambda: cluster.patch("secrets", "main-tls", _secret("main-tls", "ca2"), NS))
    assert _woken(published, ca) == set(), "the group does not ask for TLS yet"
    published.drain()
    cluster.patch(GROUPS, "main", {"spec": {"tls": {"required": True}}}, NS)
    published.take(_key("alpha"))
    published.take(_key("beta"))
    ca = then_marker(lambda: cluster.patch("secrets", "main-tls", _secret("main-tls", "ca3"), NS))
    assert _woken(published, ca) == {"alpha", "beta"}, "the group's CA changed"

    # A group that names another operator Secret depends on it from then on, and no longer on
    # the old one.
    published.drain()
    cluster.patch(GROUPS, "main", {"spec": {"credentials": {"operatorSecret": "main-op2"}}}, NS)
    published.take(_key("alpha"))
    published.take(_key("beta"))
    cluster.create("secrets", _secret("main-op2", "one"), NS)
    published.take(_key("alpha"))
    published.take(_key("beta"))
    old = then_marker(
        lambda: cluster.patch("secrets", "main-operator", _secret("main-operator", "3"), NS)
    )
    assert _woken(published, old) == set(), "the group no longer names that Secret"
