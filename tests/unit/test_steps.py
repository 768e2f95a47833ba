"""Which chain step performs which action, and the one-word summary of a pass."""

from __future__ import annotations

import pytest

from tenantdb.core.actions import ApplyObject, DeleteObject, LogEvent, ObjectRef, PatchObject
from tenantdb.core.mariadbdatabase.actions import (
    Action,
    ClientCertificateRef,
    EnsureRole,
    RemoveRole,
)
from tenantdb.core.mariadbdatabase.models import MariaDBDatabaseStatus
from tenantdb.core.mariadbdatabase.openbao import OpenBaoConnection, build_role
from tenantdb.core.mariadbdatabase.passes import describe_status
from tenantdb.core.mariadbdatabase.steps import (
    ProvisionStep,
    TeardownStep,
    classify_provision_action,
    classify_teardown_action,
    classify_teardown_log,
    plan_chain_steps,
    plan_teardown_steps,
)
from tenantdb.core.mariadbdatabase.teardown import BEST_EFFORT_LOG, CHILD_LOG, DELIVERED_REMOVAL_LOG

CERT = ClientCertificateRef("openstack", "order-db-openbao-client")


def _apply(kind: str) -> ApplyObject:
    return ApplyObject("", {"apiVersion": "v1", "kind": kind, "metadata": {"name": "x"}})


def _ref(kind: str) -> ObjectRef:
    return ObjectRef("", "v1", kind, "ns", "x")


@pytest.mark.parametrize(
    ("action", "step"),
    [
        pytest.param(_apply("ServiceAccount"), ProvisionStep.IDENTITY, id="service-account"),
        pytest.param(_apply("Certificate"), ProvisionStep.IDENTITY, id="certificate"),
        pytest.param(
            EnsureRole("r", build_role("db", "ks"), OpenBaoConnection(), CERT),
            ProvisionStep.ROLE,
            id="role",
        ),
        pytest.param(_apply("Database"), ProvisionStep.DATABASE, id="database-cr"),
        pytest.param(_apply("VaultDynamicSecret"), ProvisionStep.CREDENTIALS, id="generator"),
        pytest.param(_apply("ExternalSecret"), ProvisionStep.CREDENTIALS, id="external-secret"),
    ],
)
def test_provision_actions_belong_to_their_step(action: Action, step: ProvisionStep) -> None:
    assert classify_provision_action(action) is step


@pytest.mark.parametrize(
    ("action", "step"),
    [
        pytest.param(
            RemoveRole("r", "database/mariadb/creds/r", OpenBaoConnection(), CERT),
            TeardownStep.OPENBAO,
            id="role",
        ),
        pytest.param(DeleteObject(_ref("ExternalSecret")), TeardownStep.ESO, id="external-secret"),
        pytest.param(DeleteObject(_ref("VaultDynamicSecret")), TeardownStep.ESO, id="generator"),
        pytest.param(PatchObject(_ref("Database"), {}), TeardownStep.DATABASE, id="cleanup-patch"),
        pytest.param(DeleteObject(_ref("Database")), TeardownStep.DATABASE, id="database-cr"),
        pytest.param(DeleteObject(_ref("Secret")), TeardownStep.SECRET, id="delivered-secret"),
    ],
)
def test_teardown_actions_belong_to_their_step(action: Action, step: TeardownStep) -> None:
    assert classify_teardown_action(action) is step


def test_actions_of_another_leg_are_refused() -> None:
    with pytest.raises(ValueError, match="not a provision action"):
        classify_provision_action(DeleteObject(_ref("Secret")))
    with pytest.raises(ValueError, match="not a teardown action"):
        classify_teardown_action(_apply("ServiceAccount"))


def _status(*conditions: tuple[str, str, str]) -> MariaDBDatabaseStatus:
    return MariaDBDatabaseStatus.model_validate(
        {
            "conditions": [
                {
                    "type": t,
                    "status": s,
                    "reason": r,
                    "message": "m",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
                for t, s, r in conditions
            ]
        }
    )


@pytest.mark.parametrize(
    ("status", "summary"),
    [
        pytest.param(_status(), "NoConditions", id="fresh"),
        pytest.param(
            _status(("DatabaseReady", "False", "OpenBaoError")), "OpenBaoError", id="provision"
        ),
        pytest.param(
            _status(
                ("DatabaseReady", "True", "DatabaseProvisioned"),
                ("DeliveryReady", "False", "DeliveryRefused"),
            ),
            "DeliveryRefused",
            id="delivery",
        ),
        pytest.param(
            _status(
                ("DatabaseReady", "True", "DatabaseProvisioned"),
                ("DeliveryReady", "True", "Delivered"),
                ("Ready", "True", "AllReady"),
            ),
            "AllReady",
            id="ready",
        ),
    ],
)
def test_a_pass_sums_up_in_its_first_unready_reason(
    status: MariaDBDatabaseStatus, summary: str
) -> None:
    assert describe_status(status) == summary


@pytest.mark.parametrize(
    ("message", "step"),
    [
        pytest.param(
            'the OpenBao client certificate is gone; leaving database role "r" to its TTLs',
            TeardownStep.OPENBAO,
            id="certificate-gone",
        ),
        pytest.param(CHILD_LOG, TeardownStep.ESO, id="child"),
        pytest.param(DELIVERED_REMOVAL_LOG, TeardownStep.SECRET, id="delivered-secret"),
        pytest.param(BEST_EFFORT_LOG, None, id="finalize"),
    ],
)
def test_teardown_log_lines_are_written_by_their_step(
    message: str, step: TeardownStep | None
) -> None:
    assert classify_teardown_log(LogEvent(message)) is step


_IDENTITY = (_apply("ServiceAccount"), _apply("Certificate"))
_ROLE = EnsureRole("r", build_role("db", "ks"), OpenBaoConnection(), CERT)
_CREDENTIALS = (_apply("VaultDynamicSecret"), _apply("ExternalSecret"))


@pytest.mark.parametrize(
    ("actions", "converged", "steps"),
    [
        pytest.param((), False, (), id="blocked-or-waiting-with-nothing-to-write"),
        pytest.param((), True, (), id="converged-nothing-to-write-entry-delivers"),
        pytest.param(_IDENTITY, False, ("identity",), id="waiting-for-the-certificate"),
        pytest.param(
            (*_IDENTITY, _ROLE, _apply("Database")),
            False,
            ("identity", "role", "database"),
            id="new-order-waiting-for-database",
        ),
        pytest.param(_CREDENTIALS, False, ("credentials",), id="credentials-not-issued-yet"),
        pytest.param((_ROLE,), True, ("role", "secret"), id="role-drifted-then-delivery"),
        pytest.param(
            (_apply("Database"), *_CREDENTIALS),
            True,
            ("database", "credentials", "secret"),
            id="steps-keep-the-flow-order",
        ),
    ],
)
def test_a_chain_holds_only_the_steps_with_a_write(
    actions: tuple[Action, ...], converged: bool, steps: tuple[str, ...]
) -> None:
    assert plan_chain_steps(actions, converged) == steps


_ROLE_REMOVAL = RemoveRole("r", "database/mariadb/creds/r", OpenBaoConnection(), CERT)


@pytest.mark.parametrize(
    ("actions", "steps"),
    [
        pytest.param((), ("finalize",), id="nothing-left-entry-finalizes"),
        pytest.param(
            (_ROLE_REMOVAL, DeleteObject(_ref("ExternalSecret")), DeleteObject(_ref("Secret"))),
            ("openbao", "eso", "secret", "finalize"),
            id="only-the-steps-with-a-delete",
        ),
        pytest.param(
            (PatchObject(_ref("Database"), {}), DeleteObject(_ref("Database"))),
            ("database", "finalize"),
            id="database-patch-then-delete-is-one-step",
        ),
    ],
)
def test_a_teardown_chain_holds_the_steps_with_a_delete_then_finalize(
    actions: tuple[Action, ...], steps: tuple[str, ...]
) -> None:
    assert plan_teardown_steps(actions) == steps
