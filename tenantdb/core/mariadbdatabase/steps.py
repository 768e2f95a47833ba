"""Which chain step performs which action of a plan.

A pass runs as Celery chains whose steps are named after the parts of the reference flow:
provision (identity, role, database, credentials), delivery (secret) and teardown (openbao, eso,
database, secret, finalize). The provision entry observes once and plans; its chain holds only
the steps with something to write, each performing the actions of its own part in plan order.
This module says which part an action belongs to, and which steps a plan needs. Pure.
"""

from __future__ import annotations

from enum import IntEnum

from tenantdb.core.actions import ApplyObject, DeleteObject, LogEvent, PatchObject
from tenantdb.core.mariadbdatabase.actions import Action, EnsureRole, RemoveRole
from tenantdb.core.mariadbdatabase.teardown import (
    CERTIFICATE_GONE_LOG,
    CHILD_LOG,
    DELIVERED_REMOVAL_LOG,
)


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


FINALIZE_STEP = "finalize"
"""The teardown chain's last step, which decides the finalizer."""


def plan_teardown_steps(actions: tuple[Action, ...]) -> tuple[str, ...]:
    """The teardown chain a plan needs: each step with a delete, in order, then finalize.

    Only finalize when nothing is left to delete: the entry then decides the finalizer itself.
    """
    parts = {classify_teardown_action(action) for action in actions}
    steps = tuple(step.name.lower() for step in TeardownStep if step in parts)
    return (*steps, FINALIZE_STEP)


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
