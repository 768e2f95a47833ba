"""The gates of a live MysqlDatabase, in the reference order: the first that stops decides."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tenantdb.core.mysqldatabase.conflicts import Claim
from tenantdb.core.mysqldatabase.gates import (
    GateObservation,
    OwnerSecret,
    compute_comeback_behind_circuit,
    plan_gates,
)
from tenantdb.core.mysqldatabase.reasons import Phase, Reason

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SPEC: dict[str, Any] = {
    "groupRef": {"name": "main"},
    "databaseName": "acme_wms",
    "owner": {"secretName": "acme-owner", "privileges": ["ALL PRIVILEGES"]},
    "grants": [{"username": "maester", "privileges": ["SELECT", "DELETE"]}],
    "deletionPolicy": "Retain",
}
GROUP: dict[str, Any] = {
    "metadata": {"name": "main", "uid": "g-1"},
    "spec": {},
    "status": {"activeSite": "dc1"},
}
OBS = GateObservation(
    name="tenant-acme",
    namespace="bloodraven",
    generation=3,
    spec=SPEC,
    status={},
    group=GROUP,
    owner_secret=OwnerSecret("s-1", "41", "acme_app", password_set=True),
    group_secrets={"main-operator": {"username": "bloodraven", "password": "x"}},
    me=Claim("tenant-acme", T0, "main", "acme_wms", "acme-owner", "acme_app"),
)


def _group(**status: Any) -> dict[str, Any]:
    return {**GROUP, "status": {**GROUP["status"], **status}}


@pytest.mark.parametrize(
    ("obs", "phase", "reason", "message"),
    [
        pytest.param(replace(OBS, group=None), Phase.PENDING, Reason.GROUP_NOT_FOUND,
                     'MysqlFailoverGroup "main" not found in namespace bloodraven', id="no-group"),
        pytest.param(
            replace(OBS, group={**GROUP, "metadata": {"name": "main", "deletionTimestamp": "t"}}),
            Phase.PENDING, Reason.GROUP_TERMINATING,
            'MysqlFailoverGroup "main" is being deleted; not applying new tenant DDL',
            id="group-terminating"),
        pytest.param(replace(OBS, group=_group(activeSite="")), Phase.PENDING,
                     Reason.NO_ACTIVE_SITE, 'MysqlFailoverGroup "main" has no active site yet',
                     id="no-active-site"),
        pytest.param(replace(OBS, group=_group(plannedFailover={"phase": "Draining"})),
                     Phase.PENDING, Reason.PLANNED_FAILOVER_IN_PROGRESS,
                     'group "main" is mid planned failover (phase Draining)', id="fenced"),
        pytest.param(replace(OBS, owner_secret=None), Phase.PENDING, Reason.OWNER_SECRET_MISSING,
                     'Secret "acme-owner" not found in namespace bloodraven', id="no-secret"),
        pytest.param(
            replace(OBS, owner_secret=OwnerSecret("s", "1", "acme_app", password_set=False)),
            Phase.PENDING, Reason.OWNER_SECRET_INCOMPLETE,
            'Secret "acme-owner" must carry non-empty username and password keys',
            id="no-password"),
        pytest.param(replace(OBS, spec={**SPEC, "databaseName": "Sys"}), Phase.FAILED,
                     Reason.INVALID_SPEC,
                     'spec.databaseName "Sys" is a MySQL system schema; tenant databases must'
                     " use their own schema name", id="invalid-spec"),
        pytest.param(replace(OBS, spec={**SPEC, "owner": "acme-owner"}, owner_secret=None),
                     Phase.PENDING,
                     Reason.OWNER_SECRET_MISSING, None, id="owner-not-an-object-no-secret"),
        pytest.param(replace(OBS, spec={**SPEC, "owner": "acme-owner"}), Phase.FAILED,
                     Reason.INVALID_SPEC, "spec.owner must be an object",
                     id="owner-not-an-object"),
        pytest.param(replace(OBS, spec={**SPEC, "owner": {"secretName": "acme-owner",
                                                         "privileges": "SELECT"}}),
                     Phase.FAILED, Reason.INVALID_SPEC,
                     "spec.owner.privileges must be a list of strings",
                     id="owner-privileges-a-string"),
        pytest.param(replace(OBS, spec={**SPEC, "grants": "maester"}), Phase.FAILED,
                     Reason.INVALID_SPEC, "spec.grants must be a list", id="grants-a-string"),
        pytest.param(replace(OBS, spec={**SPEC, "grants": ["maester"]}), Phase.FAILED,
                     Reason.INVALID_SPEC, "spec.grants[0] must be an object",
                     id="grant-not-an-object"),
        pytest.param(replace(OBS, spec={**SPEC, "grants": [{"username": 7,
                                                           "privileges": ["SELECT"]}]}),
                     Phase.FAILED, Reason.INVALID_SPEC, "spec.grants[0].username must be a string",
                     id="grant-username-a-number"),
        pytest.param(replace(OBS, spec={**SPEC, "grants": [{"username": "maester",
                                                           "privileges": ["SELECT", 1]}]}),
                     Phase.FAILED, Reason.INVALID_SPEC,
                     "spec.grants[0].privileges must be a list of strings",
                     id="grant-privilege-a-number"),
        pytest.param(replace(OBS, spec={**SPEC, "groupRef": "main"}, group=None), Phase.PENDING,
                     Reason.GROUP_NOT_FOUND, None, id="group-ref-not-an-object"),
        pytest.param(
            replace(OBS, group_secrets={"main-operator": None}), Phase.PENDING,
            Reason.GROUP_SECRET_MISSING,
            "cannot resolve group \"main\"'s reserved usernames: group credential Secret"
            " 'main-operator' cannot be read", id="group-secret-unreadable"),
        pytest.param(
            replace(OBS, owner_secret=OwnerSecret("s", "1", "root", password_set=True)),
            Phase.FAILED, Reason.OWNER_USER_RESERVED,
            'Secret "acme-owner" names owner user "root", which is a credential of'
            ' MysqlFailoverGroup "main"; a MysqlDatabase owns only its own tenant user and'
            " must not set the password of a group-level principal", id="owner-is-root"),
        pytest.param(
            replace(OBS, owner_secret=OwnerSecret("s", "1", "bloodraven", password_set=True)),
            Phase.FAILED, Reason.OWNER_USER_RESERVED, None, id="owner-is-the-operator"),
        pytest.param(
            replace(OBS, peers=(Claim("older", T0 - timedelta(days=1), "main", "acme_wms", "o",
                                      "o"),)),
            Phase.FAILED, Reason.DATABASE_NAME_CONFLICT, None, id="older-peer"),
    ],
)  # fmt: skip
def test_a_gate_stops_the_pass(
    obs: GateObservation, phase: Phase, reason: Reason, message: str | None
) -> None:
    decision = plan_gates(obs)
    assert (decision.phase, decision.reason) == (phase, reason)
    if message is not None:
        assert decision.message == message
    assert decision.spec is None


def test_an_order_past_every_gate_goes_on_to_apply_with_its_fingerprint() -> None:
    decision = plan_gates(OBS)
    assert decision.phase is None
    assert decision.spec is not None
    assert decision.spec.owner_username == "acme_app"
    assert len(decision.applied_hash) == 16
    assert not decision.up_to_date
    assert decision.requeue_after is None


def test_a_ready_order_with_the_same_inputs_skips_its_apply_and_a_rotation_does_not() -> None:
    applied = plan_gates(OBS).applied_hash
    ready = {"phase": "Ready", "lastAppliedHash": applied, "observedGeneration": 3}
    assert plan_gates(replace(OBS, status=ready)).up_to_date
    rotated = replace(OBS, status=ready, owner_secret=OwnerSecret("s-1", "42", "acme_app", True))
    assert not plan_gates(rotated).up_to_date
    failed_over = replace(OBS, status=ready, group=_group(activeSite="dc2"))
    assert not plan_gates(failed_over).up_to_date


def test_the_checks_before_the_skip_run_on_a_ready_order_too() -> None:
    applied = plan_gates(OBS).applied_hash
    ready = {"phase": "Ready", "lastAppliedHash": applied, "observedGeneration": 3}
    older = Claim("older", T0 - timedelta(days=1), "main", "other", "acme-owner", "x")
    decision = plan_gates(replace(OBS, status=ready, peers=(older,)))
    assert decision.reason is Reason.OWNER_CONFLICT
    assert not decision.up_to_date


def test_pending_waits_briefly_and_failed_is_rechecked_every_minute() -> None:
    assert plan_gates(replace(OBS, group=None)).requeue_after == timedelta(seconds=15)
    invalid = replace(OBS, spec={**SPEC, "databaseName": "x-y"})
    assert plan_gates(invalid).requeue_after == timedelta(seconds=60)


@pytest.mark.parametrize(
    ("pending", "closes_in", "spread", "wait"),
    [
        pytest.param(20.0, 0.0, 0.5, 20.0, id="no-circuit-the-usual-wait"),
        pytest.param(20.0, 50.0, 0.0, 50.0, id="not-before-the-circuit-closes"),
        pytest.param(20.0, 50.0, 0.5, 57.5, id="spread-past-the-close"),
        pytest.param(40.0, 10.0, 0.0, 40.0, id="a-circuit-closing-sooner-changes-nothing"),
    ],
)
def test_an_order_behind_an_open_circuit_comes_back_once_it_closes(
    pending: float, closes_in: float, spread: float, wait: float
) -> None:
    assert compute_comeback_behind_circuit(pending, closes_in, spread) == pytest.approx(wait)
