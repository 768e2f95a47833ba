"""The status a MysqlDatabase pass writes: stopped, write-ahead, Ready; never a credential."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tenantdb.core.mysqldatabase.reasons import Phase, Reason
from tenantdb.core.mysqldatabase.status import (
    compute_creating_status,
    compute_ready_status,
    compute_stopped_status,
    should_write_status,
)
from tenantdb.core.mysqldatabase.validation import GrantSpec, ValidSpec

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
LATER = NOW + timedelta(minutes=5)
SPEC = ValidSpec(
    "acme_wms", "utf8mb4", "utf8mb4_unicode_ci", "acme_app", ("ALL PRIVILEGES",),
    (GrantSpec("maester", ("SELECT",)),),
)  # fmt: skip


def _ready(status: dict[str, Any]) -> dict[str, Any]:
    conditions: list[dict[str, Any]] = status["conditions"]
    assert len(conditions) == 1
    return conditions[0]


def test_a_first_apply_records_before_and_settles_after() -> None:
    creating = compute_creating_status({}, spec=SPEC, site="dc1", generation=1, now=NOW)
    assert creating["phase"] == "Creating"
    assert creating["databaseCreated"] is True
    assert creating["ownerUser"] == "acme_app"
    assert creating["message"] == "applying database acme_wms on site dc1"
    assert _ready(creating)["reason"] == "Applying"
    ready = compute_ready_status(
        creating, spec=SPEC, site="dc1", applied_hash="a" * 16, generation=1, now=LATER
    )
    assert ready["phase"] == "Ready"
    assert ready["appliedGrants"] == ["acme_app", "maester"]
    assert (ready["activeSite"], ready["lastAppliedHash"]) == ("dc1", "a" * 16)
    assert ready["message"] == "database acme_wms ready on site dc1"
    assert _ready(ready)["status"] == "True"
    assert _ready(ready)["lastTransitionTime"] == "2026-01-01T12:05:00Z"


def test_a_username_rotation_keeps_the_old_owner_recorded_until_ready() -> None:
    old = {"phase": "Ready", "ownerUser": "acme_old", "databaseCreated": True}
    creating = compute_creating_status(old, spec=SPEC, site="dc1", generation=2, now=NOW)
    assert (creating["ownerUser"], creating["pendingOwnerUser"]) == ("acme_old", "acme_app")
    ready = compute_ready_status(
        creating, spec=SPEC, site="dc1", applied_hash="b" * 16, generation=2, now=LATER
    )
    assert ready["ownerUser"] == "acme_app"
    assert "pendingOwnerUser" not in ready


def test_a_stopped_pass_keeps_the_last_applys_fingerprint_and_the_transition_time() -> None:
    ready = compute_ready_status(
        {}, spec=SPEC, site="dc1", applied_hash="c" * 16, generation=1, now=NOW
    )
    pending = compute_stopped_status(
        ready, phase=Phase.PENDING, reason=Reason.NO_ACTIVE_SITE, message="m", generation=1,
        now=LATER,
    )  # fmt: skip
    assert (pending["lastAppliedHash"], pending["activeSite"]) == ("c" * 16, "dc1")
    again = compute_stopped_status(
        pending, phase=Phase.FAILED, reason=Reason.INVALID_SPEC, message="n", generation=2,
        now=LATER + timedelta(minutes=1),
    )  # fmt: skip
    assert _ready(again)["lastTransitionTime"] == _ready(pending)["lastTransitionTime"]
    assert _ready(again)["reason"] == "InvalidSpec"
    assert should_write_status(pending, again)
    same = compute_stopped_status(
        again, phase=Phase.FAILED, reason=Reason.INVALID_SPEC, message="n", generation=2,
        now=LATER + timedelta(minutes=2),
    )  # fmt: skip
    assert not should_write_status(again, same), "a parked order writes nothing"
