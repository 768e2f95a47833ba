"""What the orders gauges count an order as: its Ready status, a bounded reason, since when."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from prometheus_client import REGISTRY

from tenantdb.adapters.kube import WatchEvent
from tenantdb.core.keys import OrderKey
from tenantdb.core.readiness import (
    OTHER_REASON,
    ReadyState,
    compute_ready_state,
    decode_state,
    encode_state,
)
from tenantdb.core.served import route_modules
from tests.unit.mdb_builders import World, make_mariadb
from tests.unit.mdb_pass import run_pass
from watcher.index import SharedIndex
from watcher.routes import Dispatcher, load_routes, routes_for

SINCE = "2030-01-02T03:04:05Z"
SINCE_EPOCH = 1893553445.0


def _order(*conditions: dict[str, Any], created: str = "2030-01-01T00:00:00Z") -> dict[str, Any]:
    return {
        "metadata": {"name": "app-db", "namespace": "team-a", "creationTimestamp": created},
        "status": {"conditions": list(conditions)},
    }


def _ready(status: str, reason: str, since: str = SINCE) -> dict[str, Any]:
    return {"type": "Ready", "status": status, "reason": reason, "lastTransitionTime": since}


def test_a_ready_order_counts_with_its_ready_reason_and_transition_time() -> None:
    state = compute_ready_state(_order(_ready("True", "AllReady")))
    assert state == ReadyState("True", "AllReady", SINCE_EPOCH)
    assert state.ready


def test_a_not_ready_order_counts_with_the_reason_of_what_blocks_it() -> None:
    order = _order(
        _ready("False", "NotAllReady"),
        {"type": "DatabaseReady", "status": "True", "reason": "DatabaseReady"},
        {"type": "DeliveryReady", "status": "False", "reason": "WaitingForCredentials"},
    )
    assert compute_ready_state(order) == ReadyState("False", "WaitingForCredentials", SINCE_EPOCH)


def test_an_order_with_only_a_ready_condition_counts_with_its_reason() -> None:
    order = _order(_ready("False", "PrimaryUnavailable"))
    assert compute_ready_state(order).reason == "PrimaryUnavailable"


def test_an_order_without_status_is_unknown_since_its_creation() -> None:
    order = {"metadata": {"name": "x", "creationTimestamp": SINCE}}
    assert compute_ready_state(order) == ReadyState("Unknown", "NoReadyCondition", SINCE_EPOCH)
    assert compute_ready_state({}) == ReadyState("Unknown", "NoReadyCondition", None)


@pytest.mark.parametrize(
    "reason",
    ["", "has space", "with/slash", "x" * 65, "9Leading", "tenant-a/app-db", None],
)
def test_a_reason_outside_the_grammar_is_counted_as_other(reason: object) -> None:
    condition = {"type": "Ready", "status": "False", "reason": reason}
    assert compute_ready_state(_order(condition)).reason == OTHER_REASON


def test_a_status_outside_true_false_unknown_is_unknown() -> None:
    assert compute_ready_state(_order(_ready("Maybe", "AllReady"))).status == "Unknown"


def test_the_stored_text_reads_back_and_rejects_what_is_not_a_state() -> None:
    for state in (ReadyState("True", "AllReady", SINCE_EPOCH), ReadyState("False", "X", None)):
        assert decode_state(encode_state(state)) == state
    assert encode_state(ReadyState("False", "GroupNotFound", 12.7)) == "False/GroupNotFound/12"
    assert decode_state("True/AllReady") == ReadyState("True", "AllReady", None)
    for text in ("", "Yes/AllReady/1", "True/a b/1", "True/AllReady/soon"):
        assert decode_state(text) is None


# ---------------------------------------------------------------- what a pass records


def test_a_pass_records_the_order_it_read_and_the_status_it_wrote() -> None:
    sim = run_pass(World(mariadb=make_mariadb(ready=False)))
    keys = {key for key, _ in sim.io.ready}
    assert keys == {OrderKey("mariadbdatabase", "tenant-a", "app-db")}
    states = [compute_ready_state(order) for _, order in sim.io.ready]
    assert len(states) >= 2, "the order as read at the start, then as its status write left it"
    assert (states[-1].status, states[-1].reason) == ("False", "ClusterNotReady")


def test_a_pass_that_converges_records_the_order_ready() -> None:
    sim = run_pass(World())
    last = compute_ready_state(sim.io.ready[-1][1])
    assert (last.status, last.reason) == ("True", "AllReady")


# ---------------------------------------------------------------- watch staleness


def _last_heard(cluster: str, kind: str) -> float | None:
    return REGISTRY.get_sample_value(
        "tenantdb_watch_last_event_timestamp_seconds", {"cluster": cluster, "kind": kind}
    )


def test_every_event_bookmark_and_relist_marks_the_watch_as_heard_from() -> None:
    load_routes(route_modules())
    route = next(r for r in routes_for("edge-7") if r.kind == "MariaDBDatabase")
    dispatcher = Dispatcher(route, "edge-7", SharedIndex(), lambda key: None, threading.Event())
    assert _last_heard("edge-7", "MariaDBDatabase") is None

    before = time.time()
    dispatcher.relisted([])
    listed = _last_heard("edge-7", "MariaDBDatabase")
    assert listed is not None
    assert before <= listed <= time.time(), "an empty relist is news too"

    time.sleep(0.01)
    dispatcher.handle(WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": "9"}}, "9"))
    bookmarked = _last_heard("edge-7", "MariaDBDatabase")
    assert bookmarked is not None
    assert bookmarked > listed

    time.sleep(0.01)
    order = {"metadata": {"name": "app-db", "namespace": "tenant-a", "resourceVersion": "10"}}
    dispatcher.handle(WatchEvent("ADDED", order, "10"))
    heard = _last_heard("edge-7", "MariaDBDatabase")
    assert heard is not None
    assert heard > bookmarked


def test_a_mysqldatabase_status_write_records_the_state_it_left() -> None:
    import tasks.mysqldatabase as mysql_kind

    key = OrderKey("mysqldatabase", "team-c", "shop")
    written = _order(_ready("False", "PrimaryUnavailable"))
    recorded: list[tuple[OrderKey, dict[str, Any]]] = []

    class Orders:
        def write_status(self, *args: Any) -> dict[str, Any]:
            return written

    class Runtime:
        def note_ready(self, key: OrderKey, order: dict[str, Any]) -> None:
            recorded.append((key, order))

        def remember_write(self, cluster: str, answer: Any) -> None:
            """The watcher's echo record; nothing here reads it."""

    class Context:
        def __init__(self) -> None:
            self.key = key
            self.guard = self
            self.io = Orders()
            self.runtime = Runtime()

        def check(self) -> None:
            """The lease holds."""

    mysql_kind._write(Context(), _order(), written["status"])  # type: ignore[arg-type]
    assert recorded == [(key, written)]
    assert compute_ready_state(recorded[0][1]).reason == "PrimaryUnavailable"
