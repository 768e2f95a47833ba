"""OpenBao request durations and errors by operation, through tenantdb's adapter and the real
OpenBao.

A request is timed whether it succeeds or fails; only a failure is an error: a role or lease
that is not there is an answer. The labels name the operation only, never a role, a path, a
token or the JWT.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from prometheus_client import REGISTRY, generate_latest

from tenantdb.adapters.metrics import OPENBAO_OPERATIONS
from tenantdb.adapters.openbao import ClientCertificate, OpenBaoError, open_session
from tenantdb.core.mariadbdatabase.openbao import build_role
from tests.integration.openbao.conftest import (
    CP_NAMESPACE,
    KEYSTONE_NAMESPACE,
    KUBE_MOUNT,
    OPERATOR_ROLE,
    Bao,
)


def _snapshot() -> dict[str, tuple[float, float]]:
    """Per operation: requests timed, and errors counted."""
    found = {}
    for operation in OPENBAO_OPERATIONS:
        labels = {"operation": operation}
        timed = REGISTRY.get_sample_value("tenantdb_openbao_request_duration_seconds_count", labels)
        errors = REGISTRY.get_sample_value("tenantdb_openbao_request_errors_total", labels)
        assert timed is not None, f"{operation} is exported before its first request"
        assert errors is not None, f"{operation}'s errors are exported before the first"
        found[operation] = (timed, errors)
    return found


def _delta(before: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
    after = _snapshot()
    moved = {
        op: (after[op][0] - before[op][0], after[op][1] - before[op][1])
        for op in OPENBAO_OPERATIONS
    }
    return {op: change for op, change in moved.items() if change != (0, 0)}


def test_each_request_is_timed_by_operation_and_absent_objects_are_no_error(
    bao: Bao, client_certificate: ClientCertificate, schemas: Callable[[], str]
) -> None:
    schema = schemas()
    role = f"order.{CP_NAMESPACE}.metrics-{schema[4:12]}-database"
    body = build_role(schema, KEYSTONE_NAMESPACE).to_request()
    jwt = bao.jwt()
    before = _snapshot()
    args = (bao.url, KUBE_MOUNT, OPERATOR_ROLE, lambda: jwt, client_certificate)
    with open_session(*args) as session:
        assert session.read_role(role) is None
        session.write_role(role, body)
        session.read_role(role)
        session.revoke_role_leases(role)
        session.delete_role(role)
        session.delete_role(role)
    assert _delta(before) == {
        "login": (1, 0),
        "read_role": (2, 0),
        "write_role": (1, 0),
        "revoke_leases": (1, 0),
        "delete_role": (2, 0),
        "revoke_token": (1, 0),
    }
    page = generate_latest(REGISTRY).decode()
    assert role not in page
    assert jwt not in page


def test_a_refused_write_and_a_denied_login_count_as_errors(
    bao: Bao, client_certificate: ClientCertificate, schemas: Callable[[], str]
) -> None:
    body = build_role(schemas(), KEYSTONE_NAMESPACE).to_request()
    before = _snapshot()
    args = (bao.url, KUBE_MOUNT, OPERATOR_ROLE)
    # The operator's policy writes order roles only: a Keystone role is refused (403).
    with (
        open_session(*args, bao.jwt, client_certificate) as session,
        pytest.raises(OpenBaoError, match="403"),
    ):
        session.write_role("keystone-elsewhere", body)
    intruder = bao.jwt("tenant-a", "default")
    with (
        pytest.raises(OpenBaoError),
        open_session(*args, lambda: intruder, client_certificate),
    ):
        pass
    assert _delta(before) == {"login": (2, 1), "write_role": (1, 1), "revoke_token": (1, 0)}


def test_an_unreachable_server_counts_a_login_error(client_certificate: ClientCertificate) -> None:
    before = _snapshot()
    session = open_session(
        "https://127.0.0.1:9", KUBE_MOUNT, OPERATOR_ROLE, lambda: "jwt", client_certificate
    )
    with pytest.raises(OpenBaoError):
        session.__enter__()
    assert _delta(before) == {"login": (1, 1)}
