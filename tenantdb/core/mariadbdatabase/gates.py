"""The admission gates a MariaDBDatabase passes before anything is provisioned.

Owns the checks, strictly in the reference order: the cluster name fits a label; the
ControlPlane resolves; it assigns the order's namespace on the order's cluster (the freeze);
the finalizer is in place; the shared database issues dynamic credentials; the ControlPlane's
DBCredentialsReady is True. Each refusal is written on both sub-conditions with its own
requeue. It must never read anything in the ControlPlane's namespace, Keystone's namespace or
OpenBao: nothing past a failed gate may be touched.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tenantdb.core.mariadbdatabase.conditions import compute_unreadable_status, on_both
from tenantdb.core.mariadbdatabase.controlplane import (
    find_namespace_assignment,
    is_db_credentials_ready,
    is_dynamic_credentials_enabled,
)
from tenantdb.core.mariadbdatabase.models import ControlPlane, MariaDBDatabase
from tenantdb.core.mariadbdatabase.naming import FINALIZER, MANAGEMENT_CLUSTER
from tenantdb.core.mariadbdatabase.reasons import (
    Reason,
    msg_cluster_name_too_long,
    msg_control_plane_not_found,
    msg_deletion_unreadable,
    msg_dependency_unreadable,
    msg_dynamic_credentials_unavailable,
    msg_namespace_not_assigned,
    msg_order_unreadable,
    msg_waiting_for_db_credentials,
)
from tenantdb.core.mariadbdatabase.results import (
    NO_REQUEUE,
    ORDER_REFRESH_AFTER,
    REQUEUE_ASSIGNMENT,
    REQUEUE_NEXT_PASS,
    REQUEUE_SHORT,
    PassResult,
    StepOutcome,
    Unreadable,
    compute_pass_result,
)
from tenantdb.core.mariadbdatabase.validation import is_cluster_name_too_long
from tenantdb.core.pass_path import Verdict


@dataclass(frozen=True)
class AdmissionObservation:
    """What the gates look at: the order, its cluster, and its ControlPlane (None: NotFound)."""

    order: MariaDBDatabase
    cluster: str
    control_plane: ControlPlane | None


@dataclass(frozen=True)
class AdmissionDecision:
    """The gates' verdict.

    When `outcome.proceed` is True the pass goes on to provision and delivery, and `result` is
    None. Otherwise the pass writes `outcome.conditions` (status is persisted either way) and
    ends with `result`. `add_finalizer` asks the engine to add the teardown finalizer first.
    """

    outcome: StepOutcome
    result: PassResult | None
    add_finalizer: bool = False


def _refuse(outcome: StepOutcome, result: PassResult) -> AdmissionDecision:
    return AdmissionDecision(outcome=outcome, result=result)


def should_read_control_plane(cluster: str) -> bool:
    """Whether the pass may read the ControlPlane: not before the cluster-name gate passed."""
    return not is_cluster_name_too_long(cluster)


def plan_admission(obs: AdmissionObservation) -> AdmissionDecision:
    """Run the gates in order; the first that fails ends the pass."""
    order, cluster, cp = obs.order, obs.cluster, obs.control_plane
    cp_namespace = order.control_plane_namespace()
    cp_name = order.spec.control_plane_ref.name
    if is_cluster_name_too_long(cluster):
        # Returned directly, past the pass-result rule: a rename is an edit elsewhere.
        conditions = on_both(Reason.CLUSTER_NAME_TOO_LONG, msg_cluster_name_too_long(cluster))
        return _refuse(StepOutcome(conditions=conditions), NO_REQUEUE)
    not_assigned = on_both(
        Reason.NAMESPACE_NOT_ASSIGNED,
        msg_namespace_not_assigned(cp_namespace, cp_name, order.metadata.namespace, cluster),
    )
    if cp is None and cluster != MANAGEMENT_CLUSTER:
        # The same words as a missing entry, so a target cluster learns nothing about
        # which ControlPlanes exist.
        outcome = StepOutcome(conditions=not_assigned, requeue_after=REQUEUE_ASSIGNMENT)
        return _refuse(outcome, PassResult(requeue_after=REQUEUE_ASSIGNMENT))
    if cp is None:
        conditions = on_both(
            Reason.CONTROL_PLANE_NOT_FOUND, msg_control_plane_not_found(cp_namespace, cp_name)
        )
        outcome = StepOutcome(conditions=conditions, requeue_after=REQUEUE_SHORT)
        return _refuse(outcome, PassResult(requeue_after=REQUEUE_SHORT))
    if find_namespace_assignment(cp, order.metadata.namespace, cluster) is None:
        outcome = StepOutcome(conditions=not_assigned, requeue_after=REQUEUE_ASSIGNMENT)
        return _refuse(outcome, PassResult(requeue_after=REQUEUE_ASSIGNMENT))
    if FINALIZER not in order.metadata.finalizers:
        return AdmissionDecision(
            outcome=StepOutcome(requeue_after=REQUEUE_NEXT_PASS),
            result=PassResult(requeue_after=REQUEUE_NEXT_PASS),
            add_finalizer=True,
        )
    return _plan_dynamic_gates(cp, cluster, cp_namespace, cp_name)


def plan_unreadable_control_plane(what: str, detail: str) -> AdmissionDecision:
    """Refuse on a ControlPlane that does not parse: DependencyUnreadable on both, 10-min refresh.

    Its watch event wakes the order once it is fixed, so nothing is retried meanwhile.
    """
    return _refuse_unreadable(msg_dependency_unreadable(what, detail))


def _refuse_unreadable(message: str) -> AdmissionDecision:
    outcome = StepOutcome(conditions=on_both(Reason.DEPENDENCY_UNREADABLE, message))
    return _refuse(outcome, PassResult(requeue_after=ORDER_REFRESH_AFTER))


def plan_unreadable_teardown(what: str, detail: str) -> AdmissionDecision:
    """Hold a deletion whose teardown reads an object that does not parse: DependencyUnreadable.

    Nothing is deleted and the finalizer stays, since the teardown cannot tell what to remove
    without it: the ControlPlane decides whether the deletion is held or fail-open, the
    SecretStore names the OpenBao that holds the role, the order's own Database CR carries the
    cleanup policy. The object's watch event or the 10-minute refresh brings the next pass.
    """
    return _refuse_unreadable(msg_deletion_unreadable(what, detail))


def _plan_dynamic_gates(
    cp: ControlPlane, cluster: str, cp_namespace: str, cp_name: str
) -> AdmissionDecision:
    if not is_dynamic_credentials_enabled(cp):
        outcome = StepOutcome(
            conditions=on_both(
                Reason.DYNAMIC_CREDENTIALS_UNAVAILABLE,
                msg_dynamic_credentials_unavailable(cp_namespace, cp_name),
            )
        )
        return _refuse(outcome, compute_pass_result(outcome, cluster=cluster, delivery_ready=False))
    if not is_db_credentials_ready(cp):
        outcome = StepOutcome(
            conditions=on_both(
                Reason.WAITING_FOR_DB_CREDENTIALS,
                msg_waiting_for_db_credentials(cp_namespace, cp_name),
            ),
            requeue_after=REQUEUE_SHORT,
        )
        return _refuse(outcome, PassResult(requeue_after=REQUEUE_SHORT))
    return AdmissionDecision(outcome=StepOutcome(proceed=True), result=None)


@dataclass(frozen=True)
class ControlPlaneRead:
    """The ControlPlane as the gates saw it: found, absent or not read (None), or unreadable."""

    control_plane: ControlPlane | None = None
    unreadable: Unreadable | None = None


@dataclass(frozen=True)
class Gate:
    """The ControlPlane the gates read, and what they decided over it."""

    seen: ControlPlaneRead
    decision: AdmissionDecision

    def verdict(self) -> Verdict:
        """The decision as the pass flow needs it."""
        return Verdict(self.decision.add_finalizer, self.decision.outcome.proceed)

    def admitted_control_plane(self) -> ControlPlane:
        """The ControlPlane the gates let the pass go on with.

        Raises:
            TypeError: the gates let the pass go on without one, which they never do.
        """
        if self.seen.control_plane is None:
            raise TypeError("the gates let no MariaDBDatabase pass without a ControlPlane plan")
        return self.seen.control_plane


def known_control_plane(cluster: str, previous: Gate | None) -> ControlPlaneRead | None:
    """The ControlPlane the gates decide on without reading it; None when it must be read.

    Gates that run again (after the finalizer was added) decide on what they read before; past a
    cluster name too long for a label nothing is read at all.
    """
    if previous is not None:
        return previous.seen
    if not should_read_control_plane(cluster):
        return ControlPlaneRead()
    return None


def plan_gate(order: MariaDBDatabase, cluster: str, seen: ControlPlaneRead) -> Gate:
    """Run the gates over the ControlPlane as read; one that does not parse refuses at once."""
    if seen.unreadable is not None:
        unreadable = seen.unreadable
        return Gate(seen, plan_unreadable_control_plane(unreadable.what, unreadable.detail))
    return Gate(seen, plan_admission(AdmissionObservation(order, cluster, seen.control_plane)))


@dataclass(frozen=True)
class UnreadableOrder:
    """What an order whose own body does not parse is told, and at which generation."""

    message: str
    generation: int

    def status_patch(self, stored: Mapping[str, Any], now: datetime) -> dict[str, Any]:
        """The status patch over the status as stored; empty when it says so already."""
        return compute_unreadable_status(stored, self.message, generation=self.generation, now=now)

    @property
    def reason(self) -> str:
        """The pass summed up in one word."""
        return Reason.ORDER_UNREADABLE.value

    def requeue_seconds(self) -> float | None:
        """When the order comes back: its next change, or the 10-minute refresh; nothing is
        retried meanwhile."""
        return PassResult(requeue_after=ORDER_REFRESH_AFTER).requeue_seconds()


def plan_unreadable_order(raw: Mapping[str, Any], detail: str) -> UnreadableOrder:
    """Word an order's own body that does not parse (``detail``: which fields fail and why).

    Read from the order as stored: a deleting order is told its deletion waits for the fix.
    """
    meta = raw.get("metadata") or {}
    message = msg_order_unreadable(detail, deleting=bool(meta.get("deletionTimestamp")))
    return UnreadableOrder(message, int(meta.get("generation") or 0))
