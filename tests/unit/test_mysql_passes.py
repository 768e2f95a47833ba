"""What a MysqlDatabase pass decides between its reads and writes, case by case."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import pytest

from tenantdb.core.events import Event, EventType
from tenantdb.core.mysqldatabase.apply import ApplyPlan, Observed
from tenantdb.core.mysqldatabase.gates import GateDecision, OwnerSecret
from tenantdb.core.mysqldatabase.passes import (
    INPUTS_MOVED,
    VERIFY,
    ApplyNote,
    ApplyStep,
    GateReads,
    PrimaryFailure,
    ServerFailure,
    StepEnd,
    Stop,
    check_apply_start,
    compute_apply_stamp,
    compute_end_wait,
    compute_stop_wait,
    decide_gate,
    deferral_message,
    finalizers_without,
    gate_stop,
    judge_after_drop,
    judge_applied,
    judge_batch_failure,
    judge_drop_failure,
    own_write,
    period_to_release,
    plan_apply_step,
    record_stop,
)
from tenantdb.core.mysqldatabase.reasons import Phase, Reason
from tenantdb.core.mysqldatabase.sql import Dialect, Statement
from tenantdb.core.mysqldatabase.teardown import TeardownPlan, TeardownStep
from tenantdb.core.mysqldatabase.validation import ValidSpec

NOW = datetime(2026, 1, 1, tzinfo=UTC)
ORDER: dict[str, Any] = {
    "metadata": {"name": "tenant-acme", "namespace": "bloodraven", "generation": 3},
    "spec": {
        "groupRef": {"name": "main"},
        "databaseName": "acme_wms",
        "owner": {"secretName": "acme-owner"},
    },
    "status": {"phase": "Ready", "ownerUser": "acme_app"},
}
GROUP: dict[str, Any] = {
    "metadata": {"name": "main", "uid": "g-1"},
    "spec": {"sites": [{"name": "dc1"}, {"name": "dc2", "role": "replica"}]},
    "status": {"activeSite": "dc1"},
}
SPEC = ValidSpec("acme_wms", "utf8mb4", "utf8mb4_unicode_ci", "acme_app", ("ALL PRIVILEGES",), ())
NOTE = ApplyNote(
    order=ORDER,
    spec=SPEC,
    applied_hash="h",
    group="main",
    group_uid="g-1",
    site="dc1",
    owner_secret="acme-owner",
    owner_version="41",
    reserved=(),
    siblings={},
    peers=("tenant-other",),
    repair=False,
)
REPAIR = replace(NOTE, repair=True)
EMPTY = Observed(read_only=False, schema=None, users=frozenset())
STATEMENTS = (
    Statement("CREATE DATABASE x", subject="`schema`"),
    Statement("CREATE USER y", subject="acme_app"),
)


@dataclass(frozen=True)
class Secret:
    """An owner Secret as read: only its version matters here."""

    resource_version: str


# -- stops ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stop", "counted", "warned"),
    [
        pytest.param(Stop(Phase.PENDING, Reason.GROUP_NOT_FOUND, "m"), False, False,
                     id="pending"),
        pytest.param(Stop(Phase.PENDING, Reason.PRIMARY_UNAVAILABLE, "m"), True, False,
                     id="unreachable-counts"),
        pytest.param(Stop(Phase.FAILED, Reason.INVALID_SPEC, "m"), True, True,
                     id="failed-counts-and-warns"),
    ],
)  # fmt: skip
def test_a_stop_is_counted_and_warned_of_by_its_phase_and_reason(
    stop: Stop, counted: bool, warned: bool
) -> None:
    record = record_stop(stop, ORDER, None, NOW)
    assert record.counted is counted
    assert record.warning == (Event(EventType.WARNING, str(stop.reason), "m") if warned else None)
    assert record.status["phase"] == str(stop.phase)
    assert record.status["observedGeneration"] == 3
    assert record.status["ownerUser"] == "acme_app"  # over the stored status


def test_a_stop_over_a_given_base_keeps_only_what_the_base_says() -> None:
    record = record_stop(Stop(Phase.PENDING, Reason.PRIMARY_UNAVAILABLE, "m"), ORDER, {}, NOW)
    assert "ownerUser" not in record.status


@pytest.mark.parametrize(
    ("phase", "spread", "wait"),
    [
        pytest.param(Phase.FAILED, 0.5, 60.0, id="failed-fixed"),
        pytest.param(Phase.PENDING, 0.0, 15.0, id="pending-base"),
        pytest.param(Phase.PENDING, 0.5, 30.0, id="pending-spread"),
    ],
)
def test_a_stopped_order_comes_back_after_its_phases_wait(
    phase: Phase, spread: float, wait: float
) -> None:
    assert compute_stop_wait(phase, spread) == wait


@pytest.mark.parametrize(
    ("decision", "stop"),
    [
        pytest.param(GateDecision(Phase.FAILED, Reason.INVALID_SPEC, "bad"),
                     Stop(Phase.FAILED, Reason.INVALID_SPEC, "bad"), id="as-decided"),
        pytest.param(GateDecision(), Stop(Phase.PENDING, Reason.GROUP_NOT_FOUND, ""),
                     id="defaults"),
    ],
)  # fmt: skip
def test_a_gate_stops_the_pass_as_it_decided(decision: GateDecision, stop: Stop) -> None:
    assert gate_stop(decision) == stop


# -- the gate ------------------------------------------------------------------------------------


OWNER = OwnerSecret("s-1", "41", "acme_app", password_set=True)


@pytest.mark.parametrize(
    ("reads", "reason", "reserved", "version"),
    [
        pytest.param(GateReads(ORDER, None, OWNER), Reason.GROUP_NOT_FOUND, frozenset(), "",
                     id="no-group-read-no-further"),
        pytest.param(GateReads(ORDER, GROUP, None), Reason.OWNER_SECRET_MISSING, frozenset(), "",
                     id="no-owner-read-no-further"),
        pytest.param(GateReads(ORDER, GROUP, OWNER, {"main-operator": None}),
                     Reason.GROUP_SECRET_MISSING, frozenset(), "41", id="group-secret-missing"),
    ],
)  # fmt: skip
def test_the_gate_decides_over_what_the_entry_read(
    reads: GateReads, reason: Reason, reserved: frozenset[str], version: str
) -> None:
    gate = decide_gate(reads)
    assert gate.decision.reason is reason
    assert gate.reserved == reserved
    assert gate.owner_version == version


def test_a_gate_past_every_check_carries_the_reserved_names_and_the_owner_version() -> None:
    group = {**GROUP, "spec": {**GROUP["spec"], "credentials": {"operatorSecret": "op"}}}
    gate = decide_gate(GateReads(ORDER, group, OWNER, {"op": {"username": "admin"}}))
    assert gate.decision.phase is None
    assert "admin" in gate.reserved
    assert gate.owner_version == "41"


# -- the apply step ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("owner", "group", "end"),
    [
        pytest.param(None, GROUP, INPUTS_MOVED, id="owner-gone"),
        pytest.param(Secret("42"), GROUP, INPUTS_MOVED, id="owner-changed"),
        pytest.param(Secret("41"), None, INPUTS_MOVED, id="group-gone"),
        pytest.param(Secret("41"), {**GROUP, "metadata": {"name": "main", "uid": "g-2"}},
                     INPUTS_MOVED, id="group-recreated"),
        pytest.param(Secret("41"), {**GROUP, "status": {"activeSite": "dc2"}}, INPUTS_MOVED,
                     id="primary-moved"),
        pytest.param(Secret("41"), {**GROUP, "spec": {"sites": [{"name": "dc1",
                     "role": "replica"}]}},
                     StepEnd("PrimaryUnavailable", Stop(Phase.PENDING,
                             Reason.PRIMARY_UNAVAILABLE, 'cannot reach the primary of group '
                             '"main": active site "dc1" is not a primary-candidate')),
                     id="site-not-a-candidate"),
        pytest.param(Secret("41"), GROUP, None, id="connect"),
    ],
)  # fmt: skip
def test_an_apply_starts_only_on_the_inputs_its_pass_planned_with(
    owner: Secret | None, group: dict[str, Any] | None, end: StepEnd | None
) -> None:
    assert check_apply_start(NOTE, owner, group) == end


@pytest.mark.parametrize(
    ("note", "observed", "reason", "sends"),
    [
        pytest.param(NOTE, EMPTY, None, True, id="apply"),
        pytest.param(NOTE, replace(EMPTY, schema=("utf8mb4", "utf8mb4_unicode_ci")),
                     "DatabasePreExists", False, id="refused"),
        pytest.param(NOTE, replace(EMPTY, read_only=True), "PrimaryUnavailable", False,
                     id="read-only"),
        pytest.param(REPAIR, EMPTY, None, True, id="drift-repaired"),
    ],
)  # fmt: skip
def test_an_apply_refuses_or_sends_what_the_primary_showed_it_needs(
    note: ApplyNote, observed: Observed, reason: str | None, sends: bool
) -> None:
    step = plan_apply_step(note, observed, Dialect.MARIADB)
    assert (step.end.reason if step.end else None) == reason
    assert bool(step.plan.statements) is sends


@pytest.mark.parametrize(
    ("waited", "end", "wait"),
    [
        pytest.param(12.0, StepEnd("Refused"), 12.0, id="the-stops-wait"),
        pytest.param(None, StepEnd("Verified", verified=True), 600.0, id="verified"),
        pytest.param(None, INPUTS_MOVED, None, id="at-once"),
    ],
)
def test_an_ended_step_comes_back_as_its_end_says(
    waited: float | None, end: StepEnd, wait: float | None
) -> None:
    assert compute_end_wait(waited, end, 600.0) == wait


@pytest.mark.parametrize(
    ("note", "phase"),
    [pytest.param(NOTE, "Creating", id="apply-stamps"), pytest.param(REPAIR, None, id="repair")],
)
def test_only_a_first_apply_writes_ahead(note: ApplyNote, phase: str | None) -> None:
    stamp = compute_apply_stamp(note, NOW)
    assert (stamp["phase"] if stamp else None) == phase


@pytest.mark.parametrize(
    ("failure", "phase", "reason", "message"),
    [
        pytest.param(ServerFailure("lost", 1, False, True), Phase.PENDING,
                     Reason.PRIMARY_UNAVAILABLE, 'transient MySQL error on group "main": lost',
                     id="transient"),
        pytest.param(ServerFailure("(1044) denied", 1, False, False), Phase.FAILED,
                     Reason.MYSQL_ERROR, "(1044) denied", id="refused"),
    ],
)  # fmt: skip
def test_a_failed_batch_waits_or_fails_by_its_failure(
    failure: ServerFailure, phase: Phase, reason: Reason, message: str
) -> None:
    step = ApplyStep(None, EMPTY, ApplyPlan(STATEMENTS))
    stamped = {"phase": "Creating", "databaseCreated": True, "ownerUser": "acme_app"}
    judged = judge_batch_failure(NOTE, step, stamped, failure)
    assert judged.stop == Stop(phase, reason, message)
    # The schema's statement ran, the owner's did not: only the schema stays claimed.
    assert judged.base.get("databaseCreated") is True


@pytest.mark.parametrize(
    ("note", "bypassed", "events", "wake", "reason"),
    [
        pytest.param(NOTE, False, [], ("tenant-other",), "Applied", id="applied-wakes-peers"),
        pytest.param(REPAIR, False, ["DriftRepaired"], (), "Repaired", id="repaired"),
        pytest.param(NOTE, True, ["ReadOnlyNotEnforced"], ("tenant-other",), "Applied",
                     id="admin-not-fenced"),
    ],
)  # fmt: skip
def test_an_apply_that_ran_says_what_it_did_and_wakes_its_peers(
    note: ApplyNote, bypassed: bool, events: list[str], wake: tuple[str, ...], reason: str
) -> None:
    applied = judge_applied(note, ApplyStep(None, EMPTY, ApplyPlan(STATEMENTS)),
                            read_only_bypassed=bypassed)  # fmt: skip
    assert [e.reason for e in applied.events] == events
    assert (applied.wake, applied.reason) == (wake, reason)


@pytest.mark.parametrize(
    ("note", "released"),
    [pytest.param(NOTE, None, id="apply"), pytest.param(REPAIR, VERIFY, id="repair")],
)
def test_only_a_drift_check_that_could_not_run_is_due_again(
    note: ApplyNote, released: str | None
) -> None:
    assert period_to_release(note) == released


@pytest.mark.parametrize(
    ("read", "written", "remembered"),
    [pytest.param(ORDER, ORDER, False, id="unchanged"),
     pytest.param(ORDER, {**ORDER}, True, id="written")],
)  # fmt: skip
def test_only_a_write_that_changed_the_order_is_remembered(
    read: dict[str, Any], written: dict[str, Any], remembered: bool
) -> None:
    assert (own_write(read, written) is not None) is remembered


# -- teardown ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("failure", "message", "events", "fatal"),
    [
        pytest.param(PrimaryFailure("refused", transient=True, closes_in=3.0),
                     'dropping database acme_wms: waiting for the primary of group "main"',
                     ["DatabaseDropDeferred"], False, id="transient"),
        pytest.param(PrimaryFailure("(1044) denied", transient=False, closes_in=0.0),
                     "dropping database acme_wms: (1044) denied", [], True, id="refused"),
    ],
)  # fmt: skip
def test_a_failed_drop_waits_or_fails_by_its_failure(
    failure: PrimaryFailure, message: str, events: list[str], fatal: bool
) -> None:
    judged = judge_drop_failure("acme_wms", "main", failure)
    assert (judged.message, [e.reason for e in judged.events], judged.fatal) == (
        message,
        events,
        fatal,
    )


DROP_PLAN = TeardownPlan(TeardownStep.DROP, database="acme_wms", drop_database=True)


@pytest.mark.parametrize(
    ("group", "release"),
    [
        pytest.param(GROUP, True, id="same-primary"),
        pytest.param({**GROUP, "status": {"activeSite": "dc2"}}, False, id="primary-moved"),
    ],
)
def test_a_drop_that_ran_releases_only_while_the_primary_stayed(
    group: dict[str, Any], release: bool
) -> None:
    assert judge_after_drop(DROP_PLAN, "dc1", group).release is release


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        pytest.param(TeardownPlan(TeardownStep.DEFER, (Event(EventType.WARNING, "D", "why"),)),
                     "why", id="with-event"),
        pytest.param(TeardownPlan(TeardownStep.DEFER), "", id="without"),
    ],
)  # fmt: skip
def test_a_deferred_drop_says_why_on_the_order(plan: TeardownPlan, message: str) -> None:
    assert deferral_message(plan) == message


@pytest.mark.parametrize(
    ("finalizers", "kept"),
    [
        pytest.param(["a", "mine"], ["a"], id="others-kept"),
        pytest.param(["mine"], [], id="last"),
        pytest.param(None, [], id="none"),
    ],
)
def test_a_release_keeps_every_other_finalizer(
    finalizers: list[str] | None, kept: list[str]
) -> None:
    order = {"metadata": {"finalizers": finalizers}}
    assert finalizers_without(order, "mine") == kept
