"""The watcher's join of the order and Secret watches: which orders on a group await an owner
their owner Secret does not name, which a pass reads besides the peers the owner names lead
to (an older one defers the order, ``PeerOwnerSecretMissing``)."""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from typing import Any

from tenantdb.core.mysqldatabase.reading import Slot, unresolved_slot
from watcher.mysqldatabase import MysqlIndex

NS = "tenant-a"


class Recorded:
    """What the index wrote, as the Redis hash would hold it."""

    def __init__(self) -> None:
        self.fields: dict[tuple[str, Slot], list[str]] = {}

    def write_unresolved(self, namespace: str, slots: Mapping[Slot, Iterable[str]]) -> None:
        for slot, names in slots.items():
            if names:
                self.fields[(namespace, slot)] = sorted(names)
            else:
                self.fields.pop((namespace, slot), None)

    def on(self, group: str) -> list[str]:
        return self.fields.get((NS, unresolved_slot(group)), [])


def _order(name: str, group: str = "main", owner: str = "") -> dict[str, Any]:
    order: dict[str, Any] = {
        "metadata": {"name": name, "namespace": NS},
        "spec": {"groupRef": {"name": group}, "owner": {"secretName": f"{name}-owner"}},
    }
    if owner:
        order["status"] = {"ownerUser": owner}
    return order


def _secret(name: str, username: str) -> dict[str, Any]:
    data = {"username": username, "password": "pw"}
    return {
        "metadata": {"name": name, "namespace": NS},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items() if v},
    }


def test_an_order_is_unresolved_while_its_secret_names_no_user_and_it_has_no_owner() -> None:
    index, written = MysqlIndex(), Recorded()
    index.attach(written)
    index.put(_order("a"))
    index.put(_order("b"))
    assert written.on("main") == ["a", "b"], "no Secret seen yet: both unresolved"
    index.put_secret(_secret("a-owner", "a_app"))
    assert written.on("main") == ["b"]
    index.put_secret(_secret("a-owner", ""))
    assert written.on("main") == ["a", "b"], "a Secret naming no user resolves nothing"
    index.replace_secrets([_secret("a-owner", "a_app"), _secret("b-owner", "b_app")])
    assert written.on("main") == []
    index.drop_secret(("tenant-a", "b-owner"))
    assert written.on("main") == ["b"]
    index.put(_order("b", group="other"))
    assert written.on("main") == []
    assert written.on("other") == ["b"], "it moved with its group"
    index.put(_order("b", group="other", owner="b_app"))
    assert written.on("other") == [], "an order that recorded an owner claims it in the order"
    index.put(_order("c"))
    index.drop(("tenant-a", "c"))
    assert written.on("main") == []
    deleting = _order("d")
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    index.put(deleting)
    assert written.on("main") == [], "a deleting order claims nothing"


def test_a_relist_of_the_orders_rewrites_what_changed_and_a_full_write_sees_it_all() -> None:
    index, written = MysqlIndex(), Recorded()
    index.put(_order("a"))
    index.attach(written)
    index.replace([_order("b"), _order("c", owner="c_app")])
    assert written.on("main") == ["b"], "a vanished, b unresolved, c owns"
    seen: dict[str, dict[Slot, set[str]]] = {}
    index.with_unresolved(seen.update)
    assert seen == {NS: {unresolved_slot("main"): {"b"}}}
