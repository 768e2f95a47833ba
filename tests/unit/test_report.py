"""What ``tenantdb status`` says: state, why an order is not Ready, and what happens next."""

from __future__ import annotations

from typing import Any

import pytest

from tenantdb.core.keys import OrderKey
from tenantdb.core.report import QueueView, build_report, compute_next

NOW = 1_800_000_000.0
KEY = OrderKey.parse("mariadbdatabase/tenant-a/app-db")


@pytest.mark.parametrize(
    ("view", "expected"),
    [
        pytest.param(QueueView(locked=True, pending=True), "a pass is running now", id="running"),
        pytest.param(QueueView(pending=True), "a pass is queued", id="queued"),
        pytest.param(
            QueueView(due_at=NOW + 10, refresh_at=NOW + 600),
            "comes back at 2027-01-15T08:00:10Z (in 10 s)",
            id="short-wait",
        ),
        pytest.param(
            QueueView(refresh_at=NOW + 600),
            "is refreshed at 2027-01-15T08:10:00Z (in 600 s)",
            id="refresh",
        ),
        pytest.param(
            QueueView(due_at=NOW - 1),
            "a pass is due now and is picked up within a second",
            id="due",
        ),
        pytest.param(QueueView(), "waits for an event", id="idle"),
    ],
)
def test_what_happens_next(view: QueueView, expected: str) -> None:
    assert compute_next(view, NOW).startswith(expected)


def _order(*conditions: tuple[str, str, str, str], deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "app-db", "namespace": "tenant-a"}
    if deleting:
        meta["deletionTimestamp"] = "2027-01-15T08:00:00Z"
    return {
        "metadata": meta,
        "status": {
            "databaseName": "app_db",
            "conditions": [
                {"type": t, "status": s, "reason": r, "message": m} for t, s, r, m in conditions
            ],
        },
    }


@pytest.mark.parametrize(
    ("order", "ready", "reason", "why"),
    [
        pytest.param(None, "", "NotFound", "the order does not exist on its cluster", id="gone"),
        pytest.param(
            _order(
                ("DatabaseReady", "True", "DatabaseProvisioned", "ok"),
                ("DeliveryReady", "False", "DeliveryRefused", "Secret tenant-a/x exists"),
                ("Ready", "False", "NotAllReady", "no"),
            ),
            "False",
            "DeliveryRefused",
            "DeliveryReady: Secret tenant-a/x exists",
            id="refused",
        ),
        pytest.param(
            _order(
                ("DatabaseReady", "True", "DatabaseProvisioned", "ok"),
                ("DeliveryReady", "True", "Delivered", "ok"),
                ("Ready", "True", "AllReady", "all"),
            ),
            "True",
            "AllReady",
            "",
            id="ready",
        ),
        pytest.param(_order(), "", "", "no pass has written a status yet", id="fresh"),
        pytest.param(
            _order(("Ready", "True", "AllReady", "all"), deleting=True),
            "True",
            "AllReady",
            "the order is being deleted; its children are being torn down",
            id="deleting",
        ),
    ],
)
def test_the_report_says_why(
    order: dict[str, Any] | None, ready: str, reason: str, why: str
) -> None:
    report = build_report(KEY, order, QueueView(refresh_at=NOW + 60, last_pass_at=NOW), NOW)
    assert (report.ready, report.reason, report.why) == (ready, reason, why)
    assert report.key == "mariadbdatabase/tenant-a/app-db"
    if order is not None:
        assert report.database == "app_db"
        assert report.last_pass == "2027-01-15T08:00:00Z"
        assert report.next_due == "2027-01-15T08:01:00Z"
