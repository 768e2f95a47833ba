"""A relist wakes the orders of what changed in the gap, and only those.

The decision is ``should_wake_on_relist``; the dispatcher of a watch keeps what it handed on
and compares each relist with it. A hand-on that failed is not remembered, so the relist that
follows it hands the change on again.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tenantdb.adapters.kube import WatchEvent
from tenantdb.core.keys import OrderKey
from tenantdb.core.mariadbdatabase.naming import IDENTITY
from tenantdb.core.watching import (
    compute_order_fingerprint,
    should_enqueue_order_update,
    should_wake_on_relist,
)
from watcher.index import SharedIndex
from watcher.routes import Dispatcher, order_route


def _order(name: str, uid: str = "u1", generation: int = 1, **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": uid,
            "generation": generation,
            "resourceVersion": "7",
            "annotations": annotations,
        },
        "spec": {"database": name},
    }


def _seen(obj: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return obj["metadata"]["uid"], compute_order_fingerprint(obj)


@pytest.mark.parametrize(
    ("before", "now", "wakes"),
    [
        (None, _order("a"), True),
        (_order("a"), _order("a"), False),
        (_order("a"), {**_order("a"), "status": {"phase": "Ready"}}, False),
        (_order("a"), _order("a", generation=2), True),
        (_order("a"), _order("a", note="edited"), True),
        (_order("a"), _order("a", uid="u2"), True),
    ],
    ids=["never-handed-on", "unchanged", "status-only", "spec", "annotation", "recreated"],
)
def test_a_relisted_object_wakes_its_orders_only_when_new_or_changed(
    before: dict[str, Any] | None, now: dict[str, Any], wakes: bool
) -> None:
    was = None if before is None else _seen(before)
    assert should_wake_on_relist(was, _seen(now), should_enqueue_order_update) is wakes


class _Queue:
    """The keys handed on; fails while ``failing`` is set, as an unreachable Redis would."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.failing = False

    def __call__(self, key: OrderKey) -> None:
        if self.failing:
            raise ConnectionError("redis is away")
        self.keys.append(key.name)


def _dispatcher(queue: _Queue) -> Dispatcher:
    return Dispatcher(order_route(IDENTITY), "", SharedIndex(), queue, threading.Event())


def test_a_relist_hands_on_the_new_the_changed_and_the_vanished_but_not_the_unchanged() -> None:
    queue = _Queue()
    dispatcher = _dispatcher(queue)
    dispatcher.relisted([_order("kept"), _order("edited"), _order("deleted"), _order("again")])
    assert sorted(queue.keys) == ["again", "deleted", "edited", "kept"], "a first list wakes all"
    queue.keys.clear()

    dispatcher.relisted(
        [_order("kept"), _order("edited", note="x"), _order("again", uid="u2"), _order("new")]
    )
    assert sorted(queue.keys) == ["again", "deleted", "edited", "new"]


def test_an_event_whose_hand_on_failed_is_handed_on_by_the_next_relist() -> None:
    queue = _Queue()
    dispatcher = _dispatcher(queue)
    dispatcher.relisted([_order("app"), _order("gone")])
    queue.keys.clear()

    queue.failing = True
    with pytest.raises(ConnectionError):
        dispatcher.handle(WatchEvent("MODIFIED", _order("app", note="edited"), "8"))
    with pytest.raises(ConnectionError):
        dispatcher.handle(WatchEvent("DELETED", _order("gone"), "9"))
    queue.failing = False

    dispatcher.relisted([_order("app", note="edited")])
    assert sorted(queue.keys) == ["app", "gone"]


def test_an_update_the_predicate_ignores_is_remembered_and_a_relist_of_it_wakes_nobody() -> None:
    queue = _Queue()
    dispatcher = _dispatcher(queue)
    dispatcher.relisted([_order("app")])
    queue.keys.clear()

    written = {**_order("app"), "status": {"phase": "Ready"}}
    dispatcher.handle(WatchEvent("MODIFIED", written, "8"))
    dispatcher.relisted([written])
    assert queue.keys == []
