"""The status a MysqlDatabase pass writes: stopped, write-ahead, Ready; never a credential."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tenantdb.core.mysqldatabase import sql
from tenantdb.core.mysqldatabase.apply import compute_ran_subjects
from tenantdb.core.mysqldatabase.conditions import (
    compute_creating_status,
    compute_ready_status,
    compute_stopped_status,
    compute_withdrawn_status,
    should_write_status,
)
from tenantdb.core.mysqldatabase.reasons import Phase, Reason
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


# -- records after a failed batch ---------------------------------------------------------------

_DB = sql.create_database("acme_wms", "utf8mb4", "utf8mb4_unicode_ci")
_NEW_OWNER = sql.create_user("acme_app", "pw")
_GRANT = sql.grant(["ALL PRIVILEGES"], "acme_wms", "acme_app", sql.Dialect.MARIADB)
_BATCH = (_DB, _NEW_OWNER, _GRANT)
_STAMPED_NEW = {"phase": "Creating", "databaseCreated": True, "ownerUser": "acme_app"}


@pytest.mark.parametrize(
    ("executed", "may_have_run", "subjects"),
    [
        pytest.param(0, False, set(), id="server-error-on-the-first"),
        pytest.param(0, True, {sql.SCHEMA_SUBJECT}, id="connection-lost-on-the-first"),
        pytest.param(1, False, {sql.SCHEMA_SUBJECT}, id="server-error-on-create-user"),
        pytest.param(
            1, True, {sql.SCHEMA_SUBJECT, "acme_app"}, id="connection-lost-on-create-user"
        ),
        pytest.param(3, False, {sql.SCHEMA_SUBJECT, "acme_app"}, id="all-ran"),
    ],
)
def test_what_a_failed_batch_may_have_written(
    executed: int, may_have_run: bool, subjects: set[str]
) -> None:
    assert compute_ran_subjects(_BATCH, executed, failing_may_have_run=may_have_run) == subjects


@pytest.mark.parametrize(
    ("prior", "ran", "schema_present", "present", "kept"),
    [
        pytest.param(
            {}, set(), False, set(), {"phase": "Creating"}, id="nothing-ran-nothing-recorded"
        ),
        pytest.param(
            {},
            {sql.SCHEMA_SUBJECT},
            False,
            set(),
            {"phase": "Creating", "databaseCreated": True},
            id="create-database-may-have-run-keeps-its-record",
        ),
        pytest.param(
            {},
            {sql.SCHEMA_SUBJECT, "acme_app"},
            False,
            set(),
            _STAMPED_NEW,
            id="create-user-may-have-run-keeps-its-record",
        ),
        pytest.param(
            {"databaseCreated": True, "ownerUser": "acme_app"},
            set(),
            True,
            {"acme_app"},
            {"phase": "Creating", "databaseCreated": True, "ownerUser": "acme_app"},
            id="the-prior-records-stay",
        ),
        pytest.param(
            {"databaseCreated": True, "ownerUser": "acme_app"},
            {sql.SCHEMA_SUBJECT},
            True,
            set(),
            {"phase": "Creating", "databaseCreated": True},
            id="a-recorded-owner-seen-absent-and-not-created-is-forgotten",
        ),
        pytest.param(
            {"databaseCreated": True},
            set(),
            False,
            set(),
            {"phase": "Creating"},
            id="a-schema-seen-absent-with-no-account-recorded-is-forgotten",
        ),
    ],
)
def test_a_failed_batch_keeps_only_the_records_of_what_may_have_run(
    prior: dict[str, object],
    ran: set[str],
    schema_present: bool,
    present: set[str],
    kept: dict[str, object],
) -> None:
    got = compute_withdrawn_status(
        prior,
        {**prior, **_STAMPED_NEW},
        ran=frozenset(ran),
        schema_present=schema_present,
        present=frozenset(present),
    )
    assert got == kept


def test_a_rotation_target_whose_create_user_was_refused_is_not_recorded() -> None:
    prior = {"databaseCreated": True, "ownerUser": "acme_old"}
    stamped = {**prior, "phase": "Creating", "pendingOwnerUser": "acme_new"}
    got = compute_withdrawn_status(
        prior,
        stamped,
        ran=frozenset({sql.SCHEMA_SUBJECT}),
        schema_present=True,
        present=frozenset({"acme_old"}),
    )
    assert got == {"databaseCreated": True, "ownerUser": "acme_old", "phase": "Creating"}
