"""The typed view of a MysqlDatabase: the CRD's fields, read as the raw readers read them,
and statuses that dump to the very body tenantdb writes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from tenantdb.core.mysqldatabase.apply import Records
from tenantdb.core.mysqldatabase.conditions import (
    compute_creating_status,
    compute_deleting_status,
    compute_ready_status,
    compute_stopped_status,
)
from tenantdb.core.mysqldatabase.crd import build_crd
from tenantdb.core.mysqldatabase.models import MysqlDatabaseStatus, read_order
from tenantdb.core.mysqldatabase.reading import (
    group_name,
    needs_group_for_teardown,
    owner_secret_name,
)
from tenantdb.core.mysqldatabase.reasons import Phase, Reason
from tenantdb.core.mysqldatabase.validation import ValidSpec

NOW = datetime(2026, 1, 1, tzinfo=UTC)
SPEC = ValidSpec("acme_wms", "utf8mb4", "utf8mb4_unicode_ci", "acme_app", ("ALL PRIVILEGES",), ())


def _schema() -> dict[str, Any]:
    (version,) = build_crd()["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]["properties"]
    return schema


def _aliases(model: type[Any]) -> set[str]:
    return {field.alias or name for name, field in model.model_fields.items()}


def test_the_models_declare_every_field_of_the_crd_and_no_other() -> None:
    from tenantdb.core.mysqldatabase.models import (
        Grant,
        GroupRef,
        MysqlDatabaseSpec,
        Owner,
        StatusCondition,
    )

    spec, status = _schema()["spec"]["properties"], _schema()["status"]["properties"]
    assert _aliases(MysqlDatabaseSpec) == set(spec)
    assert _aliases(GroupRef) == set(spec["groupRef"]["properties"])
    assert _aliases(Owner) == set(spec["owner"]["properties"])
    assert _aliases(Grant) == set(spec["grants"]["items"]["properties"])
    assert _aliases(MysqlDatabaseStatus) == set(status)
    assert _aliases(StatusCondition) == set(status["conditions"]["items"]["properties"])


FULL: dict[str, Any] = {
    "metadata": {"name": "tenant-acme", "namespace": "bloodraven", "generation": 2},
    "spec": {
        "groupRef": {"name": "main"},
        "databaseName": "acme_wms",
        "characterSet": "utf8mb4",
        "owner": {"secretName": "acme-owner", "privileges": ["SELECT"]},
        "grants": [{"username": "maester", "privileges": ["SELECT", "DELETE"]}],
        "deletionPolicy": "Delete",
    },
    "status": {"databaseCreated": True, "ownerUser": "acme_app", "appliedGrants": ["acme_app"]},
}


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(FULL, id="as-admitted"),
        pytest.param({"metadata": {"name": "x"}}, id="no-spec-no-status"),
        pytest.param({"spec": None, "status": "?"}, id="spec-and-status-not-objects"),
        pytest.param({"spec": {"groupRef": "main", "owner": []}}, id="refs-not-objects"),
        pytest.param({"spec": {"groupRef": {"name": 5}, "owner": {"secretName": None},
                               "databaseName": ["x"], "deletionPolicy": 1}},
                     id="values-of-the-wrong-type"),
        pytest.param({"spec": {"deletionPolicy": "Delete"},
                      "status": {"databaseCreated": "true", "appliedGrants": "acme_app"}},
                     id="records-of-the-wrong-type"),
        pytest.param({"spec": {"grants": ["maester", {"username": "u"}]}}, id="grants-mixed"),
    ],
)  # fmt: skip
def test_an_order_reads_as_the_raw_readers_read_it(raw: dict[str, Any]) -> None:
    order = read_order(raw)
    spec = raw.get("spec") if isinstance(raw.get("spec"), dict) else {}
    assert order.spec.group_ref.name == group_name(raw)
    assert order.spec.owner.secret_name == owner_secret_name(raw)
    database = spec.get("databaseName") if isinstance(spec, dict) else None
    assert order.spec.database_name == (database if isinstance(database, str) else "")
    status = raw.get("status") if isinstance(raw.get("status"), dict) else {}
    records = Records.of(status or {})
    assert (order.spec.deletes and order.status.database_created is True) == (
        needs_group_for_teardown(raw)
    )
    assert (order.status.database_created is True) == records.database_created
    assert (order.status.owner_user or "") == records.owner_user
    assert (order.status.applied_grants or ()) == records.applied_grants
    assert [g.username for g in order.spec.grants] == [
        g.get("username") if isinstance(g.get("username"), str) else ""
        for g in (spec or {}).get("grants") or ()
        if isinstance(g, dict)
    ]


def test_a_spec_leaves_unset_what_the_crd_defaults() -> None:
    spec = read_order({"spec": {"owner": {"secretName": "s"}}}).spec
    assert (spec.character_set, spec.collation, spec.owner.privileges) == (None, None, None)
    assert not spec.deletes


def _statuses() -> list[dict[str, Any]]:
    creating = compute_creating_status({}, spec=SPEC, site="dc1", generation=2, now=NOW)
    ready = compute_ready_status(
        creating, spec=SPEC, site="dc1", applied_hash="h", generation=2, now=NOW
    )
    stopped = compute_stopped_status(
        ready,
        phase=Phase.PENDING,
        reason=Reason.PRIMARY_UNAVAILABLE,
        message="m",
        generation=3,
        now=NOW,
    )
    deleting = compute_deleting_status(stopped, database="acme_wms", generation=3, now=NOW)
    return [creating, ready, stopped, deleting]


@pytest.mark.parametrize("body", _statuses(), ids=["creating", "ready", "stopped", "deleting"])
def test_a_status_tenantdb_writes_dumps_to_the_same_body(body: dict[str, Any]) -> None:
    assert MysqlDatabaseStatus.model_validate(body).body() == body
