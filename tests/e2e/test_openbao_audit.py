"""What tenantdb and ESO ask of the real OpenBao, read from its audit log.

On the real platform only: the stand-in keeps no audit log. The worker logs in on the
Kubernetes auth mount as `c5c3-operator` with its ServiceAccount's token of OpenBao's audience
(OpenBao checks the audience, and its listener requires the client certificate), reads the
generators' auth role with the order's role, and revokes every token it logged in with; ESO's
generator logs in as `order-db` with the ControlPlane namespace's `order-db-creds` account and
reads the credential, and never revokes that token, which is why the credential's life is
bounded by the `order-db` role's token TTL.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from devstack.upstream import RealOpenBao
from tests.e2e.conftest import Stack
from tests.support import wait_for

# The test reads OpenBao's whole audit log: a platform of its own.
pytestmark = [pytest.mark.slow, pytest.mark.private_platform]

LOGIN = "auth/kubernetes/management/login"
REVOKE_SELF = "auth/token/revoke-self"


@pytest.fixture
def stack_env() -> dict[str, str]:
    """Every session logs in and revokes its own token, so each login has its revocation."""
    return {"TENANTDB_OPENBAO_TOKEN_REUSE_SECONDS": "0"}


def _responses(openbao: RealOpenBao) -> list[dict[str, Any]]:
    return [e for e in openbao.audit_events() if e.get("type") == "response"]


def _by(events: list[dict[str, Any]], account: str) -> Counter[tuple[str, str]]:
    """Requests (operation, path) made with a token of the given ServiceAccount."""
    return Counter(
        (e["request"]["operation"], e["request"]["path"])
        for e in events
        if ((e.get("auth") or {}).get("metadata") or {}).get("service_account_name") == account
    )


def test_the_worker_revokes_each_token_and_esos_generator_keeps_its_own(stack: Stack) -> None:
    openbao = stack.platform.openbao
    assert isinstance(openbao, RealOpenBao)
    name = stack.name("audited-db")
    stack.apply_order(name)
    order = stack.wait_ready(name)
    role = order["status"]["roleName"]

    def settled() -> Counter[tuple[str, str]] | None:
        worker = _by(_responses(openbao), "c5c3-operator-worker")
        logins = worker[("update", LOGIN)]
        return worker if logins and worker[("update", REVOKE_SELF)] == logins else None

    worker = wait_for(settled, 30, "every worker token to be revoked")
    assert worker[("read", f"database/mariadb/roles/{role}")] >= 1
    assert worker[("create", f"database/mariadb/roles/{role}")] == 1
    assert worker[("read", "auth/kubernetes/management/role/order-db")] >= 1
    logins = [
        e
        for e in _responses(openbao)
        if e["request"]["path"] == LOGIN
        and (e["auth"].get("metadata") or {}).get("service_account_name") == "c5c3-operator-worker"
    ]
    assert {e["auth"]["metadata"]["service_account_namespace"] for e in logins} == {"c5c3-system"}
    assert {e["auth"]["metadata"]["role"] for e in logins} == {"c5c3-operator"}

    generator = _by(_responses(openbao), "order-db-creds")
    # Usually one read; ESO may read twice on an ExternalSecret's first sync, when its next
    # reconcile starts from a cache that has not seen its own status write yet (the second
    # credential replaces the first in its Secret, and tenantdb delivers that one).
    assert generator[("read", f"database/mariadb/creds/{role}")] >= 1
    # The generator's login read the credential; revoking it would revoke the credential.
    assert generator[("update", LOGIN)] > generator[("update", REVOKE_SELF)]
