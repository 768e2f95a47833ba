"""The I/O sequences of a MariaDBDatabase pass, as the adapter carries them out: which writes run,
in what order, what a failure stops, and what is counted before the status shows it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pytest
from prometheus_client import REGISTRY
from pydantic import ValidationError

from tenantdb.adapters.mariadbdatabase import (
    ActionError,
    FailedActionError,
    FetchedOrder,
    MariaDBOrders,
    UnreadableError,
    WriteError,
)
from tenantdb.core.actions import ApplyObject, DeleteObject, ObjectRef
from tenantdb.core.events import Event, EventType
from tenantdb.core.keys import OrderKey
from tenantdb.core.mariadbdatabase.actions import Action
from tenantdb.core.mariadbdatabase.gates import ControlPlaneRead
from tenantdb.core.mariadbdatabase.models import (
    ControlPlane,
    MariaDBDatabase,
    MariaDBDatabaseStatus,
)
from tenantdb.core.mariadbdatabase.naming import IDENTITY
from tenantdb.core.mariadbdatabase.passes import Leg, LegFailure, PassRecord
from tenantdb.core.mariadbdatabase.results import PassResult, Unreadable
from tests.unit.mdb_builders import make_order

KEY = IDENTITY.key("tenant-a", "app-db", "")


def _apply(name: str) -> ApplyObject:
    meta = {"name": name, "namespace": "tenant-a"}
    return ApplyObject("", {"apiVersion": "v1", "kind": "Secret", "metadata": meta})


def _delete(name: str) -> DeleteObject:
    return DeleteObject(ObjectRef("", "v1", "Secret", "tenant-a", name))


ACTIONS: tuple[tuple[int, Action], ...] = ((3, _delete("a")), (5, _apply("b")))


class RecordingOrders(MariaDBOrders):
    """The adapter with its single reads and writes replaced by a log of what was asked."""

    def __init__(self, failing: Iterable[str] = ()) -> None:
        """Fail the actions on objects named in ``failing`` with a 409."""
        self.failing = set(failing)
        self.log: list[str] = []

    def run(self, action: Action, check: Callable[[], None]) -> dict[str, Any] | None:
        ref = action.ref if isinstance(action, ApplyObject | DeleteObject) else None
        name = "" if ref is None else ref.name
        self.log.append(f"run {name}")
        if name in self.failing:
            raise ActionError("conflict", 409)
        return action.manifest if isinstance(action, ApplyObject) else None

    def write_status(
        self,
        key: OrderKey,
        fetched: FetchedOrder,
        status: MariaDBDatabaseStatus,
        check: Callable[[], None],
    ) -> dict[str, Any]:
        self.log.append(f"status errors={_errors()}")
        return fetched.raw

    def record_events(
        self, key: OrderKey, order: Mapping[str, Any], events: Iterable[Event]
    ) -> None:
        self.log.append(f"events {len(list(events))}")


def _errors() -> float:
    value = REGISTRY.get_sample_value(
        "c5c3_operator_reconcile_errors_total",
        {"sub_reconciler": Leg.DELIVERY.value, "condition_type": "DeliveryReady"},
    )
    return value or 0.0


@pytest.mark.parametrize(
    ("failing", "keep_going", "ran", "failures"),
    [
        pytest.param((), False, ["run a", "run b"], (), id="all-written"),
        pytest.param(
            ("a",),
            True,
            ["run a", "failed conflict", "run b"],
            ((3, "conflict"),),
            id="fail-open-hears-each-failure-as-it-happens-and-runs-all",
        ),
    ],
)
def test_a_steps_actions_run_in_order_and_fail_open_collects_failures(
    failing: tuple[str, ...],
    keep_going: bool,
    ran: list[str],
    failures: tuple[tuple[int, str], ...],
) -> None:
    io, checks, remembered = RecordingOrders(failing), [], []
    got = io.run_each(
        ACTIONS,
        lambda: checks.append(1),
        lambda cluster, answer: remembered.append(answer),
        keep_going=keep_going,
        failed=lambda action, error: io.log.append(f"failed {error}"),
    )
    assert got == failures
    assert io.log == ran
    assert len(checks) == len(ACTIONS), "the lease is checked before each write"
    assert remembered == [_apply("b").manifest], "only an applied object is remembered"


def test_the_first_failed_action_stops_the_rest() -> None:
    io = RecordingOrders(("a",))
    with pytest.raises(FailedActionError, match="conflict") as raised:
        io.run_each(ACTIONS, lambda: None, lambda cluster, answer: None)
    assert (raised.value.index, raised.value.status, raised.value.action) == (3, 409, ACTIONS[0][1])
    assert io.log == ["run a"]


@pytest.mark.parametrize(
    ("apply", "applied"),
    [
        pytest.param(None, False, id="nothing-to-apply-writes-nothing"),
        pytest.param(_apply("app-db-credentials"), True, id="applied-and-remembered"),
    ],
)
def test_the_delivered_secret_is_applied_only_when_planned(
    apply: ApplyObject | None, applied: bool
) -> None:
    io, remembered = RecordingOrders(), []
    got = io.apply_delivery(apply, lambda: None, lambda c, a: remembered.append(a))
    assert (got is not None, len(remembered), len(io.log)) == (applied, applied, applied)


def test_a_failed_delivery_names_the_secret() -> None:
    io = RecordingOrders(("app-db-credentials",))
    with pytest.raises(WriteError) as raised:
        io.apply_delivery(_apply("app-db-credentials"), lambda: None, lambda c, a: None)
    assert raised.value.context == "delivering Secret tenant-a/app-db-credentials"
    assert raised.value.message == "conflict"


ORDER = make_order()
FETCHED = FetchedOrder(ORDER.model_dump(mode="json", by_alias=True), ORDER)
EVENT = Event(EventType.WARNING, "DeliveryError", "x")


@pytest.mark.parametrize(
    ("rec", "log"),
    [
        pytest.param(
            PassRecord(MariaDBDatabaseStatus(), False, PassResult()), [], id="unchanged-writes-none"
        ),
        pytest.param(
            PassRecord(MariaDBDatabaseStatus(), True, PassResult(), events=(EVENT,)),
            ["status", "noted", "events 1", "kept"],
            id="changed-status-then-ready-then-events",
        ),
        pytest.param(
            PassRecord(
                MariaDBDatabaseStatus(),
                True,
                PassResult(error="x"),
                failure=LegFailure(Leg.DELIVERY, "x"),
            ),
            ["status counted", "noted", "events 0", "kept"],
            id="error-counted-before-the-status-shows-it",
        ),
    ],
)
def test_a_pass_record_is_written_in_order(rec: PassRecord, log: list[str]) -> None:
    io, before = RecordingOrders(), _errors()
    io.write_record(
        KEY,
        FETCHED,
        rec,
        lambda: None,
        lambda key, order: io.log.append("noted"),
        lambda stored: io.log.append("kept"),
    )
    counted = f"status errors={before + 1}"
    got = ["status counted" if line == counted else line.split(" errors=")[0] for line in io.log]
    assert got == log


def test_a_control_plane_that_does_not_parse_is_read_as_unreadable() -> None:
    class Unparsed(RecordingOrders):
        def fetch_control_plane(
            self, order: MariaDBDatabase, *, live: bool = True
        ) -> ControlPlane | None:
            try:
                return ControlPlane.model_validate({"metadata": {"name": "cp"}, "spec": 1})
            except ValidationError as exc:
                raise UnreadableError("ControlPlane default/cp", exc) from None

    seen = Unparsed().read_control_plane(ORDER)
    assert seen.control_plane is None
    assert isinstance(seen.unreadable, Unreadable)
    assert seen.unreadable.what == "ControlPlane default/cp"
    assert seen != ControlPlaneRead()
