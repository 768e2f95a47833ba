"""Which chain step performs which action of a plan.

A pass runs as Celery chains whose steps are named after the parts of the reference flow:
provision (identity, role, database, credentials), delivery (secret) and teardown (openbao, eso,
database, secret, finalize). The provision entry observes once and plans; its chain holds only
the steps with something to write, each performing the actions of its own part in plan order.
This module says which part an action belongs to, and which steps a plan needs. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from tenantdb.core.actions import ApplyObject, DeleteObject, LogEvent, PatchObject
from tenantdb.core.keys import OrderKey
from tenantdb.core.mariadbdatabase.actions import (
    Action,
    ClientCertificateRef,
    EnsureRole,
    RemoveRole,
)
from tenantdb.core.mariadbdatabase.delivery import (
    DeliveryObservation,
    DeliveryResult,
    compute_delivery_result,
    plan_delivery,
)
from tenantdb.core.mariadbdatabase.gates import (
    AdmissionDecision,
    AdmissionObservation,
    plan_admission,
)
from tenantdb.core.mariadbdatabase.models import ControlPlane, MariaDBDatabase
from tenantdb.core.mariadbdatabase.naming import (
    CLIENT_CERTIFICATE,
    MANAGEMENT_CLUSTER,
    SHARED_SERVICE_ACCOUNT,
)
from tenantdb.core.mariadbdatabase.provision import ProvisionPlan
from tenantdb.core.mariadbdatabase.scope import OrderScope, compute_order_scope
from tenantdb.core.mariadbdatabase.teardown import (
    CERTIFICATE_GONE_LOG,
    CHILD_LOG,
    DELIVERED_REMOVAL_LOG,
    TeardownPlan,
)
from tenantdb.core.tasknames import Queue


class ProvisionStep(IntEnum):
    """The provision chain's steps, in order."""

    IDENTITY = 1
    """The shared ServiceAccount and the cert-manager Certificate."""
    ROLE = 2
    """The OpenBao database role."""
    DATABASE = 3
    """The mariadb-operator Database CR."""
    CREDENTIALS = 4
    """The ESO generator and ExternalSecret, and the credential they issue."""


class TeardownStep(IntEnum):
    """The teardown chain's steps, in order."""

    OPENBAO = 1
    ESO = 2
    DATABASE = 3
    SECRET = 4


_PROVISION_KINDS = {
    "ServiceAccount": ProvisionStep.IDENTITY,
    "Certificate": ProvisionStep.IDENTITY,
    "Database": ProvisionStep.DATABASE,
    "VaultDynamicSecret": ProvisionStep.CREDENTIALS,
    "ExternalSecret": ProvisionStep.CREDENTIALS,
}

_TEARDOWN_KINDS = {
    "ExternalSecret": TeardownStep.ESO,
    "VaultDynamicSecret": TeardownStep.ESO,
    "Database": TeardownStep.DATABASE,
    "Secret": TeardownStep.SECRET,
}


def classify_provision_action(action: Action) -> ProvisionStep:
    """The provision step that performs ``action``.

    Raises:
        ValueError: the action is not part of the provision leg.
    """
    if isinstance(action, EnsureRole):
        return ProvisionStep.ROLE
    if isinstance(action, ApplyObject) and action.ref.kind in _PROVISION_KINDS:
        return _PROVISION_KINDS[action.ref.kind]
    raise ValueError(f"{type(action).__name__} is not a provision action")


def classify_teardown_action(action: Action) -> TeardownStep:
    """The teardown step that performs ``action``.

    Raises:
        ValueError: the action is not part of the teardown.
    """
    if isinstance(action, RemoveRole):
        return TeardownStep.OPENBAO
    if isinstance(action, DeleteObject | PatchObject) and action.ref.kind in _TEARDOWN_KINDS:
        return _TEARDOWN_KINDS[action.ref.kind]
    raise ValueError(f"{type(action).__name__} is not a teardown action")


DELIVERY_STEP = "secret"
"""The delivery step's name in a provision chain."""


def plan_chain_steps(actions: tuple[Action, ...], converged: bool) -> tuple[str, ...]:
    """The chain a provision plan needs: each step with a write, in order, then delivery.

    Delivery follows only a leg that converged. Empty when the plan writes nothing: the entry
    then ends the pass itself, or delivers when the leg converged.
    """
    parts = {classify_provision_action(action) for action in actions}
    steps = tuple(step.name.lower() for step in ProvisionStep if step in parts)
    return (*steps, DELIVERY_STEP) if steps and converged else steps


def select_provision_actions(
    actions: tuple[Action, ...], step: ProvisionStep
) -> tuple[tuple[int, Action], ...]:
    """The actions of a provision plan that ``step`` performs, with their places in the plan."""
    return tuple((i, a) for i, a in enumerate(actions) if classify_provision_action(a) is step)


@dataclass(frozen=True)
class ProvisionStepEnd:
    """What a provision step does once its writes succeeded.

    ``ends_leg``: it is the leg's last step, so the leg's duration ends here. ``goes_on``: a
    step follows, which carries the pass on; otherwise this step records the pass and ends it.
    """

    ends_leg: bool
    goes_on: bool


def decide_provision_step_end(steps: tuple[str, ...], position: int) -> ProvisionStepEnd:
    """How the step at ``position`` (1 first) of a provision chain of ``steps`` ends."""
    following = steps[position:]
    return ProvisionStepEnd(
        ends_leg=not following or following[0] == DELIVERY_STEP, goes_on=bool(following)
    )


def delivers_from_entry(steps: tuple[str, ...], converged: bool) -> bool:
    """Whether the entry itself delivers: the provision leg converged with nothing to write."""
    return not steps and converged


@dataclass(frozen=True)
class EntryDelivery:
    """The delivery leg as the entry decides it: settled there (``result``), or handed to the
    delivery step when the Secret beside the order needs a write (``steps``)."""

    steps: tuple[str, ...] = ()
    result: DeliveryResult | None = None


def plan_entry_delivery(obs: DeliveryObservation) -> EntryDelivery:
    """Settle the delivery in the entry when it writes nothing; else chain the delivery step.

    The step reads the two Secrets again itself: a credential never travels in a note.
    """
    planned = plan_delivery(obs)
    if planned.apply is None:
        return EntryDelivery(result=compute_delivery_result(obs, planned, None))
    return EntryDelivery(steps=(DELIVERY_STEP,))


@dataclass(frozen=True)
class QuietCheck:
    """What a quiet refresh of a converged order checks (``tenantdb.core.quiet``): its OpenBao
    role, the one child no watch sees. Never a credential: the role's name and definition, the
    OpenBao connection and where the client certificate is."""

    role: EnsureRole


def plan_quiet_check(
    role: EnsureRole | None,
    steps: tuple[str, ...],
    planned: ProvisionPlan,
    delivered: DeliveryResult | None,
    *,
    tls: bool,
) -> QuietCheck | None:
    """What later refreshes may check instead of reading everything, or None when this pass
    leaves them nothing to trust: something to write, a leg that has not converged, no role to
    check, or an order over TLS (its CA bundle is a Secret no watch follows)."""
    if steps or role is None or tls or delivered is None:
        return None
    legs = (planned.result.outcome, delivered.outcome)
    if not all(leg.proceed and leg.requeue_after is None for leg in legs):
        return None
    return QuietCheck(role)


@dataclass(frozen=True)
class PassNote:
    """What the entry observed and decided, left for the chain's steps so none reads it again.

    Holds the order and ControlPlane as read, the provision plan (desired objects and the leg's
    outcome; never a credential) and the chain's steps in order.
    """

    order: dict[str, Any]
    control_plane: dict[str, Any]
    plan: ProvisionPlan
    steps: tuple[str, ...]
    provision_started: float
    """When the entry began to observe the provision leg, in epoch seconds."""

    def cp(self) -> ControlPlane:
        """The ControlPlane as the entry read it."""
        return ControlPlane.model_validate(self.control_plane)

    def refusal(self, key: OrderKey) -> str | None:
        """Why a step serving ``key`` must not act on this note (``check_pass_note``)."""
        return check_pass_note(key, self)

    def admission(self, cluster: str) -> AdmissionDecision:
        """The gates' decision over the order and ControlPlane as the entry read them, which
        every record of the pass composes from."""
        order = MariaDBDatabase.model_validate(self.order)
        return plan_admission(AdmissionObservation(order, cluster, self.cp()))


FINALIZE_STEP = "finalize"
"""The teardown chain's last step, which decides the finalizer."""


@dataclass(frozen=True)
class TeardownNote:
    """What the teardown's entry observed and planned, left for its chain's steps.

    ``failures`` collects, in fail-open mode, each failed action's index and error text, so the
    finalize step's log line says what failed. Never a credential.
    """

    order: dict[str, Any]
    plan: TeardownPlan
    steps: tuple[str, ...]
    failures: tuple[tuple[int, str], ...] = ()

    def refusal(self, key: OrderKey) -> str | None:
        """Why a step serving ``key`` must not act on this note (``check_teardown_note``)."""
        return check_teardown_note(key, self)


def plan_teardown_steps(actions: tuple[Action, ...]) -> tuple[str, ...]:
    """The teardown chain a plan needs: each step with a delete, in order, then finalize.

    Only finalize when nothing is left to delete: the entry then decides the finalizer itself.
    """
    parts = {classify_teardown_action(action) for action in actions}
    steps = tuple(step.name.lower() for step in TeardownStep if step in parts)
    return (*steps, FINALIZE_STEP)


def plan_teardown_chain(actions: tuple[Action, ...]) -> tuple[str, ...]:
    """The teardown chain to hand over: empty when nothing is left to delete, so the entry
    decides the finalizer itself."""
    steps = plan_teardown_steps(actions)
    return () if steps == (FINALIZE_STEP,) else steps


def select_teardown_actions(
    actions: tuple[Action, ...], step: TeardownStep
) -> tuple[tuple[int, Action], ...]:
    """The actions of a teardown plan that ``step`` performs, with their places in the plan."""
    return tuple((i, a) for i, a in enumerate(actions) if classify_teardown_action(a) is step)


def select_teardown_logs(logs: tuple[LogEvent, ...], step: TeardownStep) -> tuple[LogEvent, ...]:
    """The log lines of a teardown plan that ``step`` writes."""
    return tuple(event for event in logs if classify_teardown_log(event) is step)


_TEARDOWN_LOGS = (
    (CERTIFICATE_GONE_LOG, TeardownStep.OPENBAO),
    (CHILD_LOG, TeardownStep.ESO),
    (DELIVERED_REMOVAL_LOG, TeardownStep.SECRET),
)


def classify_teardown_log(event: LogEvent) -> TeardownStep | None:
    """The teardown step that writes one of the plan's log lines (None: the finalize step)."""
    for message, step in _TEARDOWN_LOGS:
        if event.message.startswith(message):
            return step
    return None


@dataclass(frozen=True)
class ChainStep:
    """One step a chain may hold: its name, the queue it runs on, and what its task is."""

    name: str
    queue: Queue
    doc: str


PROVISION_CHAIN = (
    *(
        ChainStep(
            s.name.lower(),
            Queue.PROVISION,
            f"Provision step {s.name.lower()} of a MariaDBDatabase pass.",
        )
        for s in ProvisionStep
    ),
    ChainStep(
        DELIVERY_STEP,
        Queue.DELIVERY,
        "Delivery step of a MariaDBDatabase pass: the Secret beside the order.",
    ),
)
"""The steps a live order's chain may hold, in order."""

TEARDOWN_CHAIN = (
    *(
        ChainStep(
            s.name.lower(), Queue.TEARDOWN, f"Teardown step {s.name.lower()} of a MariaDBDatabase."
        )
        for s in TeardownStep
    ),
    ChainStep(
        FINALIZE_STEP,
        Queue.TEARDOWN,
        "Final teardown step: decide the finalizer on the deletes the plan issued.",
    ),
)
"""The steps a deleting order's chain may hold, in order."""


# -- what a step checks of its note before it writes ---------------------------------------------


def _note_order(key: OrderKey, order: dict[str, Any]) -> MariaDBDatabase | str:
    """The note's order, or why it is not the order ``key`` names."""
    try:
        parsed = MariaDBDatabase.model_validate(order)
    except ValueError:
        return "the note's order does not parse"
    meta = parsed.metadata
    if (meta.namespace, meta.name) != (key.namespace, key.name):
        return f"the note is of order {meta.namespace}/{meta.name}"
    return parsed


def _foreign(action: Action, scope: OrderScope, namespace: str, *, teardown: bool) -> str:
    """Why ``action`` reaches past the order's own children ("" when it does not).

    An order's children are the shared ServiceAccount and client Certificate of its ControlPlane
    namespace, its Database CR (in Keystone's namespace), its generator and ExternalSecret, the
    Secret delivered beside it, and its OpenBao role.
    """
    names = scope.names
    if isinstance(action, EnsureRole | RemoveRole):
        own = ClientCertificateRef(scope.cp_namespace, CLIENT_CERTIFICATE)
        if action.role_name != names.role or action.client_certificate != own:
            return f"OpenBao role {action.role_name}"
        if isinstance(action, RemoveRole) and action.creds_path != names.creds_path:
            return f"OpenBao path {action.creds_path}"
        return ""
    ref = action.ref
    management = ref.cluster == MANAGEMENT_CLUSTER
    prefixed = ref.name.startswith(names.prefix)
    if ref.kind == "ServiceAccount":
        own_ref = management and (ref.namespace, ref.name) == (
            scope.cp_namespace,
            SHARED_SERVICE_ACCOUNT,
        )
    elif ref.kind == "Certificate":
        own_ref = management and (ref.namespace, ref.name) == (
            scope.cp_namespace,
            CLIENT_CERTIFICATE,
        )
    elif ref.kind in ("ExternalSecret", "VaultDynamicSecret"):
        own_ref = management and ref.namespace == scope.cp_namespace and prefixed
    elif ref.kind == "Database":
        own_ref = prefixed and (
            teardown
            or (ref.cluster, ref.namespace) == (scope.keystone_cluster, scope.keystone_namespace)
        )
    elif ref.kind == "Secret":
        own_ref = (ref.cluster, ref.namespace, ref.name) == (
            scope.cluster,
            namespace,
            names.delivered_secret,
        )
    else:
        own_ref = False
    return "" if own_ref else str(ref)


def check_pass_note(key: OrderKey, note: PassNote) -> str | None:
    """Why a provision or delivery step must not act on ``note`` (None: it may).

    The note must be of the order the step serves, and every write it plans must be on that
    order's own children; a note that fails either is someone else's plan.
    """
    try:
        cp = note.cp()
    except ValueError:
        return "the note's ControlPlane does not parse"
    return _check_note(key, note.order, cp, note.plan.actions)


def check_teardown_note(key: OrderKey, note: TeardownNote) -> str | None:
    """Why a teardown step must not act on ``note`` (None: it may): as ``check_pass_note``.

    A teardown may find the Database CR where the ControlPlane placed Keystone, which the note
    does not carry, so a Database under the order's prefix is the order's wherever it is."""
    return _check_note(key, note.order, None, note.plan.actions)


def _check_note(
    key: OrderKey, raw: dict[str, Any], cp: ControlPlane | None, actions: tuple[Action, ...]
) -> str | None:
    order = _note_order(key, raw)
    if isinstance(order, str):
        return order
    scope = compute_order_scope(order, key.cluster, cp)
    for action in actions:
        where = _foreign(action, scope, key.namespace, teardown=cp is None)
        if where:
            return f"the note plans a write outside the order's children: {where}"
    return None
