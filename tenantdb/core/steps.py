"""Which chain step performs which action of a plan.

A pass runs as Celery chains whose steps are named after the parts of the reference flow:
provision (identity, role, database, credentials), delivery (secret) and teardown (openbao, eso,
database, secret, finalize). Every step re-reads the world and re-plans with core, then performs
only the actions of its own part, in plan order; this module says which part an action belongs
to. Pure.
"""

from __future__ import annotations

from enum import IntEnum

from tenantdb.core.actions import (
    Action,
    ApplyObject,
    DeleteObject,
    EnsureRole,
    LogEvent,
    PatchObject,
    RemoveRole,
)
from tenantdb.core.teardown import CERTIFICATE_GONE_LOG, CHILD_LOG, DELIVERED_REMOVAL_LOG


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


def should_end_provision_at(
    step: ProvisionStep, actions: tuple[Action, ...], converged: bool
) -> bool:
    """Whether the pass ends at this provision step rather than going on down the chain.

    It goes on while the plan holds actions of a later step, and past the last step only when
    the leg converged (delivery follows); otherwise this step records the pass and ends it.
    """
    if any(classify_provision_action(action) > step for action in actions):
        return False
    return not (step is ProvisionStep.CREDENTIALS and converged)


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
