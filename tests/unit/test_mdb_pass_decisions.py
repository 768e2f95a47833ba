"""The decisions a MariaDBDatabase pass conducts by: what it reads, how each step ends, what it
counts. Each row is a case a user would notice, inputs to decision."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tenantdb.core.actions import ApplyObject, DeleteObject, LogEvent, ObjectRef, PatchObject
from tenantdb.core.mariadbdatabase.actions import Action, ClientCertificateRef, EnsureRole
from tenantdb.core.mariadbdatabase.conditions import ConditionUpdate
from tenantdb.core.mariadbdatabase.delivery import (
    DeliveryObservation,
    DeliveryResult,
    plan_delivery_failure,
)
from tenantdb.core.mariadbdatabase.gates import (
    AdmissionDecision,
    ControlPlaneRead,
    Gate,
    known_control_plane,
    plan_gate,
    plan_unreadable_order,
)
from tenantdb.core.mariadbdatabase.models import ControlPlane, MariaDBDatabase
from tenantdb.core.mariadbdatabase.naming import FINALIZER
from tenantdb.core.mariadbdatabase.openbao import OpenBaoConnection, build_role
from tenantdb.core.mariadbdatabase.passes import (
    Leg,
    LegFailure,
    PassRecord,
    StepEnding,
    compute_pass_record,
    decide_chain_end,
    decide_retry,
)
from tenantdb.core.mariadbdatabase.provision import (
    LegResult,
    ProvisionPlan,
    find_role_to_observe,
)
from tenantdb.core.mariadbdatabase.reasons import ConditionType, Reason
from tenantdb.core.mariadbdatabase.results import (
    REQUEUE_SHORT,
    PassResult,
    StepOutcome,
    Unreadable,
)
from tenantdb.core.mariadbdatabase.steps import (
    DELIVERY_STEP,
    PROVISION_CHAIN,
    TEARDOWN_CHAIN,
    ChainStep,
    PassNote,
    ProvisionStep,
    ProvisionStepEnd,
    TeardownStep,
    decide_provision_step_end,
    delivers_from_entry,
    plan_entry_delivery,
    plan_teardown_chain,
    select_provision_actions,
    select_teardown_actions,
    select_teardown_logs,
)
from tenantdb.core.mariadbdatabase.teardown import (
    CHILD_LOG,
    DELIVERED_REMOVAL_LOG,
    TeardownMode,
    TeardownPlan,
    compute_released_finalizers,
    compute_teardown_result,
)
from tenantdb.core.objects import Secret
from tenantdb.core.tasknames import Queue
from tests.unit.mdb_builders import (
    NOW,
    make_control_plane,
    make_order,
    make_secret,
    materialised,
    scope_for,
)

LONG_CLUSTER = "c" * 64
CP = make_control_plane()
ADMITTED = plan_gate(make_order(), "", ControlPlaneRead(CP))


@pytest.mark.parametrize(
    ("cluster", "previous", "known"),
    [
        pytest.param("", None, None, id="first-gates-read-the-control-plane"),
        pytest.param("edge-1", None, None, id="target-cluster-reads-it-too"),
        pytest.param(LONG_CLUSTER, None, ControlPlaneRead(), id="too-long-cluster-reads-nothing"),
        pytest.param("", ADMITTED, ControlPlaneRead(CP), id="gates-again-reuse-their-read"),
    ],
)
def test_the_gates_read_the_control_plane_once_and_only_past_the_cluster_name(
    cluster: str, previous: Gate | None, known: ControlPlaneRead | None
) -> None:
    assert known_control_plane(cluster, previous) == known


@pytest.mark.parametrize(
    ("seen", "finalizers", "reason", "add_finalizer", "proceed"),
    [
        pytest.param(
            ControlPlaneRead(unreadable=Unreadable("ControlPlane default/cp", "spec: bad")),
            (FINALIZER,),
            "DependencyUnreadable",
            False,
            False,
            id="unreadable-control-plane-refuses",
        ),
        pytest.param(
            ControlPlaneRead(), (FINALIZER,), "ControlPlaneNotFound", False, False, id="absent"
        ),
        pytest.param(ControlPlaneRead(CP), (), None, True, False, id="new-order-gets-finalizer"),
        pytest.param(ControlPlaneRead(CP), (FINALIZER,), None, False, True, id="admitted"),
    ],
)
def test_the_gates_decide_over_the_control_plane_as_read(
    seen: ControlPlaneRead,
    finalizers: tuple[str, ...],
    reason: str | None,
    add_finalizer: bool,
    proceed: bool,
) -> None:
    gate = plan_gate(make_order(finalizers=finalizers), "", seen)
    assert gate.seen == seen
    assert (gate.verdict().add_finalizer, gate.verdict().proceed) == (add_finalizer, proceed)
    reasons = {c.reason for c in gate.decision.outcome.conditions}
    assert reasons == ({reason} if reason else set())


def test_a_pass_goes_on_only_with_the_control_plane_the_gates_admitted() -> None:
    assert ADMITTED.admitted_control_plane() == CP
    with pytest.raises(TypeError):
        plan_gate(make_order(), "", ControlPlaneRead()).admitted_control_plane()


PROCEEDS = AdmissionDecision(StepOutcome(proceed=True), None)
CONVERGED = LegResult(
    StepOutcome(
        conditions=(
            ConditionUpdate(ConditionType.DATABASE_READY, True, Reason.DATABASE_PROVISIONED, "ok"),
        ),
        proceed=True,
    ),
    database_name="app_db",
)
WAITING = LegResult(
    StepOutcome(
        conditions=(
            ConditionUpdate(
                ConditionType.DATABASE_READY, False, Reason.WAITING_FOR_CREDENTIALS, "not yet"
            ),
        ),
        requeue_after=REQUEUE_SHORT,
    )
)
REFUSED = LegResult(StepOutcome(error="ExternalSecret default/x was not created by tenantdb"))
DELIVERED = DeliveryResult(
    StepOutcome(
        conditions=(ConditionUpdate(ConditionType.DELIVERY_READY, True, Reason.DELIVERED, "ok"),),
        proceed=True,
    )
)
UNDELIVERABLE = plan_delivery_failure("reading Secret tenant-a/app-db-credentials", "timeout")


@pytest.mark.parametrize(
    ("admission", "provision", "delivery", "failure"),
    [
        pytest.param(
            AdmissionDecision(StepOutcome(), PassResult(requeue_after=REQUEUE_SHORT)),
            None,
            None,
            None,
            id="gate-stops-counts-nothing",
        ),
        pytest.param(PROCEEDS, WAITING, None, None, id="provision-waiting-counts-nothing"),
        pytest.param(
            PROCEEDS,
            REFUSED,
            None,
            LegFailure(Leg.PROVISION, str(REFUSED.outcome.error)),
            id="provision-refusal-is-a-provision-error",
        ),
        pytest.param(
            PROCEEDS,
            CONVERGED,
            UNDELIVERABLE,
            LegFailure(Leg.DELIVERY, str(UNDELIVERABLE.outcome.error)),
            id="delivery-failure-is-a-delivery-error",
        ),
        pytest.param(PROCEEDS, CONVERGED, DELIVERED, None, id="delivered-counts-nothing"),
    ],
)
def test_a_pass_record_names_the_leg_whose_error_it_counts(
    admission: AdmissionDecision,
    provision: LegResult | None,
    delivery: DeliveryResult | None,
    failure: LegFailure | None,
) -> None:
    rec = compute_pass_record(
        make_order(),
        cluster="",
        now=NOW,
        admission=admission,
        provision=provision,
        delivery=delivery,
    )
    assert rec.failure == failure


@pytest.mark.parametrize(
    ("leg", "condition_type"),
    [
        pytest.param(Leg.PROVISION, ConditionType.DATABASE_READY, id="provision"),
        pytest.param(Leg.DELIVERY, ConditionType.DELIVERY_READY, id="delivery"),
    ],
)
def test_a_leg_counts_its_errors_under_its_own_condition(
    leg: Leg, condition_type: ConditionType
) -> None:
    assert leg.condition_type is condition_type


def _recorded(provision: LegResult, delivery: DeliveryResult | None = None) -> PassRecord:
    return compute_pass_record(
        make_order(),
        cluster="",
        now=NOW,
        admission=PROCEEDS,
        provision=provision,
        delivery=delivery,
    )


@pytest.mark.parametrize(
    ("provision", "delivery", "ending"),
    [
        pytest.param(
            REFUSED,
            None,
            StepEnding("Refused", completed=False, again=True),
            id="refusal-after-the-writes-asks-for-a-new-pass",
        ),
        pytest.param(
            WAITING,
            None,
            StepEnding("WaitingForCredentials", requeue_after=10.0),
            id="waiting-comes-back-when-the-leg-asks",
        ),
        pytest.param(
            CONVERGED,
            DELIVERED,
            StepEnding("AllReady"),
            id="delivered-on-the-management-cluster-waits-for-events",
        ),
    ],
)
def test_a_chain_ends_by_what_it_recorded(
    provision: LegResult, delivery: DeliveryResult | None, ending: StepEnding
) -> None:
    assert decide_chain_end(_recorded(provision, delivery)) == ending


@pytest.mark.parametrize(
    ("provision", "delivery", "ending"),
    [
        pytest.param(
            LegResult(
                StepOutcome(
                    conditions=(
                        ConditionUpdate(
                            ConditionType.DATABASE_READY, False, Reason.OPENBAO_ERROR, "denied"
                        ),
                    ),
                    error='ensuring OpenBao database role "r": denied',
                )
            ),
            None,
            StepEnding("OpenBaoError", retry='ensuring OpenBao database role "r": denied'),
            id="failed-write-retries-with-the-status-it-wrote",
        ),
        pytest.param(
            CONVERGED,
            UNDELIVERABLE,
            StepEnding("DeliveryError", retry=str(UNDELIVERABLE.outcome.error)),
            id="failed-delivery-retries-as-delivery-error",
        ),
    ],
)
def test_a_failed_step_retries_with_its_legs_error(
    provision: LegResult, delivery: DeliveryResult | None, ending: StepEnding
) -> None:
    assert decide_retry(_recorded(provision, delivery)) == ending


def test_only_a_failed_leg_retries() -> None:
    with pytest.raises(ValueError, match="failed"):
        decide_retry(_recorded(CONVERGED, DELIVERED))


CERT = ClientCertificateRef("default", "order-db-openbao-client")
ROLE = EnsureRole("r", build_role("app_db", "openstack"), OpenBaoConnection(), CERT)


def _apply(kind: str) -> ApplyObject:
    return ApplyObject("", {"apiVersion": "v1", "kind": kind, "metadata": {"name": "x"}})


@pytest.mark.parametrize(
    ("actions", "role"),
    [
        pytest.param((), None, id="blocked-before-the-role-asks-openbao-nothing"),
        pytest.param((_apply("ServiceAccount"),), None, id="waiting-for-certificate"),
        pytest.param((_apply("ServiceAccount"), ROLE, _apply("Database")), ROLE, id="reaches-it"),
    ],
)
def test_only_a_plan_that_reaches_the_role_asks_openbao(
    actions: tuple[Action, ...], role: EnsureRole | None
) -> None:
    assert find_role_to_observe(ProvisionPlan(actions, WAITING)) == role


PLAN = (_apply("ServiceAccount"), _apply("Certificate"), ROLE, _apply("Database"))


@pytest.mark.parametrize(
    ("step", "selected"),
    [
        pytest.param(ProvisionStep.IDENTITY, ((0, PLAN[0]), (1, PLAN[1])), id="identity"),
        pytest.param(ProvisionStep.ROLE, ((2, ROLE),), id="role-keeps-its-place"),
        pytest.param(ProvisionStep.CREDENTIALS, (), id="nothing-of-its-own"),
    ],
)
def test_a_provision_step_performs_its_own_actions_in_plan_order(
    step: ProvisionStep, selected: tuple[tuple[int, Action], ...]
) -> None:
    assert select_provision_actions(PLAN, step) == selected


@pytest.mark.parametrize(
    ("steps", "position", "end"),
    [
        pytest.param(("identity", "role"), 1, ProvisionStepEnd(False, True), id="more-to-write"),
        pytest.param(
            ("role", DELIVERY_STEP), 1, ProvisionStepEnd(True, True), id="last-before-delivery"
        ),
        pytest.param(("identity", "role"), 2, ProvisionStepEnd(True, False), id="last-records"),
    ],
)
def test_the_last_provision_step_ends_the_leg_and_the_last_step_records(
    steps: tuple[str, ...], position: int, end: ProvisionStepEnd
) -> None:
    assert decide_provision_step_end(steps, position) == end


@pytest.mark.parametrize(
    ("steps", "converged", "delivers"),
    [
        pytest.param((), True, True, id="converged-with-nothing-to-write"),
        pytest.param((), False, False, id="waiting-with-nothing-to-write"),
        pytest.param(("role", DELIVERY_STEP), True, False, id="chain-delivers"),
    ],
)
def test_the_entry_delivers_only_a_converged_leg_with_nothing_to_write(
    steps: tuple[str, ...], converged: bool, delivers: bool
) -> None:
    assert delivers_from_entry(steps, converged) is delivers


ORDER = make_order()


def _delivery(issued: Secret | None, delivered: Secret | None = None) -> DeliveryObservation:
    return DeliveryObservation(
        order=ORDER,
        scope=scope_for(ORDER, CP),
        control_plane=CP,
        database_name="app_db",
        materialised_secret=issued,
        delivered_secret=delivered,
    )


@pytest.mark.parametrize(
    ("observation", "steps", "reason"),
    [
        pytest.param(_delivery(None), (), "WaitingForCredentials", id="credential-not-issued"),
        pytest.param(
            _delivery(materialised(), make_secret("app-db-credentials", "tenant-a", {})),
            (),
            "DeliveryRefused",
            id="foreign-secret-refused-in-the-entry",
        ),
        pytest.param(_delivery(materialised()), (DELIVERY_STEP,), None, id="secret-to-write"),
    ],
)
def test_the_entry_settles_a_delivery_without_a_write_and_chains_one_with(
    observation: DeliveryObservation, steps: tuple[str, ...], reason: str | None
) -> None:
    entry = plan_entry_delivery(observation)
    assert entry.steps == steps
    got = None if entry.result is None else entry.result.outcome.conditions[0].reason
    assert got == reason


def _ref(kind: str) -> ObjectRef:
    return ObjectRef("", "v1", kind, "ns", "x")


ROLE_GONE = DeleteObject(_ref("ExternalSecret"))


@pytest.mark.parametrize(
    ("actions", "steps"),
    [
        pytest.param((), (), id="nothing-left-the-entry-finalizes"),
        pytest.param((ROLE_GONE,), ("eso", "finalize"), id="deletes-go-to-a-chain"),
    ],
)
def test_a_teardown_hands_over_only_deletes(
    actions: tuple[Action, ...], steps: tuple[str, ...]
) -> None:
    assert plan_teardown_chain(actions) == steps


TEARDOWN = (
    DeleteObject(_ref("ExternalSecret")),
    PatchObject(_ref("Database"), {}),
    DeleteObject(_ref("Database")),
)


@pytest.mark.parametrize(
    ("step", "selected"),
    [
        pytest.param(TeardownStep.ESO, ((0, TEARDOWN[0]),), id="eso"),
        pytest.param(
            TeardownStep.DATABASE, ((1, TEARDOWN[1]), (2, TEARDOWN[2])), id="patch-then-delete"
        ),
        pytest.param(TeardownStep.SECRET, (), id="nothing"),
    ],
)
def test_a_teardown_step_performs_its_own_deletes(
    step: TeardownStep, selected: tuple[tuple[int, Action], ...]
) -> None:
    assert select_teardown_actions(TEARDOWN, step) == selected


LOGS = (LogEvent(CHILD_LOG), LogEvent(DELIVERED_REMOVAL_LOG))


@pytest.mark.parametrize(
    ("step", "logs"),
    [
        pytest.param(TeardownStep.ESO, (LOGS[0],), id="eso-says-what-it-removes"),
        pytest.param(TeardownStep.SECRET, (LOGS[1],), id="secret-says-what-it-removes"),
        pytest.param(TeardownStep.OPENBAO, (), id="nothing-to-say"),
    ],
)
def test_a_teardown_step_writes_its_own_log_lines(
    step: TeardownStep, logs: tuple[LogEvent, ...]
) -> None:
    assert select_teardown_logs(LOGS, step) == logs


@pytest.mark.parametrize(
    ("mode", "deletes", "reason", "requeue"),
    [
        pytest.param(TeardownMode.HELD, 0, "FinalizerReleased", None, id="all-gone-releases"),
        pytest.param(TeardownMode.HELD, 2, "TeardownHeld", 10.0, id="still-listed-holds"),
        pytest.param(TeardownMode.FAIL_OPEN, 2, "FinalizerReleased", None, id="cp-gone"),
    ],
)
def test_a_teardown_ends_in_one_word(
    mode: TeardownMode, deletes: int, reason: str, requeue: float | None
) -> None:
    result = compute_teardown_result(TeardownPlan((), mode, deletes))
    assert (result.reason, result.result.requeue_seconds()) == (reason, requeue)


@pytest.mark.parametrize(
    ("finalizers", "left"),
    [
        pytest.param([FINALIZER], [], id="only-ours"),
        pytest.param(["a/x", FINALIZER, "b/y"], ["a/x", "b/y"], id="others-kept-in-order"),
    ],
)
def test_releasing_keeps_the_other_finalizers(finalizers: list[str], left: list[str]) -> None:
    assert compute_released_finalizers(finalizers) == left


@pytest.mark.parametrize(
    ("meta", "generation", "deleting"),
    [
        pytest.param({"generation": 4}, 4, False, id="live-order"),
        pytest.param(
            {"generation": 2, "deletionTimestamp": "2026-03-01T11:00:00Z"}, 2, True, id="deleting"
        ),
        pytest.param({}, 0, False, id="no-generation"),
    ],
)
def test_an_unreadable_order_is_told_so_at_its_generation(
    meta: dict[str, object], generation: int, deleting: bool
) -> None:
    told = plan_unreadable_order({"metadata": meta}, "spec.databaseName: bad")
    assert told.generation == generation
    assert "spec.databaseName: bad" in told.message
    assert ("deletion waits" in told.message) is deleting
    patch = told.status_patch({}, NOW)
    assert patch["observedGeneration"] == generation
    assert told.status_patch(patch, NOW) == {}
    assert (told.reason, told.requeue_seconds()) == ("OrderUnreadable", 600.0)


@pytest.mark.parametrize(
    ("result", "seconds"),
    [
        pytest.param(PassResult(), None, id="on-an-event"),
        pytest.param(PassResult(requeue_after=timedelta(minutes=10)), 600.0, id="refresh"),
    ],
)
def test_a_requeue_is_said_in_seconds(result: PassResult, seconds: float | None) -> None:
    assert result.requeue_seconds() == seconds


def _note(order: MariaDBDatabase, cp: ControlPlane) -> PassNote:
    return PassNote(
        order.model_dump(mode="json", by_alias=True),
        cp.model_dump(mode="json", by_alias=True),
        ProvisionPlan((), CONVERGED),
        (),
        0.0,
    )


@pytest.mark.parametrize(
    ("order", "cp", "proceeds", "reason"),
    [
        pytest.param(make_order(), CP, True, None, id="admitted-as-the-entry-read-it"),
        pytest.param(
            make_order(),
            make_control_plane(db_credentials_ready="False"),
            False,
            "WaitingForDBCredentials",
            id="credentials-not-ready-when-the-entry-read-it",
        ),
    ],
)
def test_a_step_composes_its_record_from_the_gates_over_what_the_entry_read(
    order: MariaDBDatabase, cp: ControlPlane, proceeds: bool, reason: str | None
) -> None:
    admission = _note(order, cp).admission("")
    assert admission.outcome.proceed is proceeds
    reasons = {c.reason for c in admission.outcome.conditions}
    assert reasons == ({reason} if reason else set())


@pytest.mark.parametrize(
    ("chain", "names", "queues"),
    [
        pytest.param(
            PROVISION_CHAIN,
            ("identity", "role", "database", "credentials", DELIVERY_STEP),
            (Queue.PROVISION,) * 4 + (Queue.DELIVERY,),
            id="provision-then-delivery",
        ),
        pytest.param(
            TEARDOWN_CHAIN,
            ("openbao", "eso", "database", "secret", "finalize"),
            (Queue.TEARDOWN,) * 5,
            id="teardown-then-finalize",
        ),
    ],
)
def test_a_chain_runs_its_steps_in_flow_order_on_their_queues(
    chain: tuple[ChainStep, ...], names: tuple[str, ...], queues: tuple[Queue, ...]
) -> None:
    assert tuple(step.name for step in chain) == names
    assert tuple(step.queue for step in chain) == queues
    assert all(step.doc for step in chain)
