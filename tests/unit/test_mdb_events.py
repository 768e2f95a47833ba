"""The Events a MariaDBDatabase status write records: a Warning for each refusal or failure a
sub-condition moves to, a Normal when one turns True, nothing for a wait or an unchanged one."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tenantdb.core.events import Event, EventType
from tenantdb.core.mariadbdatabase.models import MariaDBDatabaseStatus
from tenantdb.core.mariadbdatabase.passes import compute_pass_events
from tenantdb.core.objects import Condition

THEN = datetime(2026, 1, 1, tzinfo=UTC)


def _status(*conditions: tuple[str, str, str, str]) -> MariaDBDatabaseStatus:
    return MariaDBDatabaseStatus(
        conditions=tuple(
            Condition(type=t, status=s, reason=r, message=m, last_transition_time=THEN)
            for t, s, r, m in conditions
        )
    )


REFUSED = ("DatabaseReady", "False", "DatabaseCollision", "schema taken")
WAITING = ("DatabaseReady", "False", "WaitingForDatabase", "the Database CR is not ready")
PROVISIONED = ("DatabaseReady", "True", "DatabaseProvisioned", "provisioned")
DELIVERED = ("DeliveryReady", "True", "Delivered", "delivered")
NOT_PUBLISHED = ("DeliveryReady", "False", "DatabaseNotPublished", "not provisioned yet")
READY = ("Ready", "True", "AllReady", "All sub-conditions are ready")


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(
            (), (REFUSED, NOT_PUBLISHED),
            (Event(EventType.WARNING, "DatabaseCollision", "schema taken"),),
            id="a-refusal-warns",
        ),
        pytest.param((REFUSED,), (REFUSED,), (), id="a-refusal-that-stays-records-nothing-again"),
        pytest.param(
            (REFUSED,), (("DatabaseReady", "False", "DatabaseCollision", "another"),),
            (Event(EventType.WARNING, "DatabaseCollision", "another"),),
            id="a-new-message-warns-again",
        ),
        pytest.param((), (WAITING, NOT_PUBLISHED), (), id="a-wait-records-nothing"),
        pytest.param(
            (WAITING, NOT_PUBLISHED), (PROVISIONED, DELIVERED, READY),
            (Event(EventType.NORMAL, "DatabaseProvisioned", "provisioned"),
             Event(EventType.NORMAL, "Delivered", "delivered")),
            id="provisioned-and-delivered",
        ),
        pytest.param(
            (PROVISIONED, DELIVERED, READY), (PROVISIONED, DELIVERED, READY), (),
            id="converged-records-nothing",
        ),
    ],
)  # fmt: skip
def test_the_events_of_a_status_write(
    old: tuple[tuple[str, str, str, str], ...],
    new: tuple[tuple[str, str, str, str], ...],
    expected: tuple[Event, ...],
) -> None:
    assert compute_pass_events(_status(*old), _status(*new)) == expected
