"""The OpenBao role body, its escaping and comparison, the connection, and failure wording."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tenantdb.core.mariadbdatabase.models import SecretStore
from tenantdb.core.mariadbdatabase.openbao import (
    OpenBaoConnection,
    StoreLocation,
    build_role,
    compute_connection,
    compute_login_ttl,
    compute_openbao_failure,
    compute_store_location,
    is_login_ttl_too_short,
    should_write_role,
)
from tests.unit.mdb_builders import make_control_plane

GRANT = "GRANT ALL PRIVILEGES ON `workflow\\_db`.* TO '{{name}}'@'%';"


def test_role_body_matches_the_reference_request() -> None:
    body = build_role("workflow_db", "openstack").to_request()
    assert body == {
        "db_name": "keystone-openstack",
        "creation_statements": [
            "CREATE USER '{{name}}'@'%' IDENTIFIED BY '{{password}}';",
            GRANT,
        ],
        "revocation_statements": ["DROP USER IF EXISTS '{{name}}'@'%';"],
        "default_ttl": 172800,
        "max_ttl": 259200,
    }
    assert "`workflow\\\\_db`" in json.dumps(body), "one literal backslash, doubled in JSON"
    assert body["creation_statements"][1].count("\\") == 1


@pytest.mark.parametrize(
    ("schema", "target"),
    [
        pytest.param("app_db", "`app\\_db`", id="one-underscore"),
        pytest.param("a__b_", "`a\\_\\_b\\_`", id="every-underscore"),
        pytest.param("Custom", "`Custom`", id="no-underscore"),
    ],
)
def test_grant_escapes_every_underscore(schema: str, target: str) -> None:
    grant = build_role(schema, "ks").creation_statements[1]
    assert grant == f"GRANT ALL PRIVILEGES ON {target}.* TO '{{{{name}}}}'@'%';"


def test_role_cannot_be_built_for_an_unvalidated_name() -> None:
    with pytest.raises(ValueError, match="validated"):
        build_role("a`b", "ks")


DESIRED = build_role("app_db", "default")
STORED = DESIRED.to_request()


@pytest.mark.parametrize(
    ("observed", "write"),
    [
        pytest.param(None, True, id="absent"),
        pytest.param(STORED, False, id="equal"),
        pytest.param(
            {**STORED, "credential_type": "password", "renew_statements": []},
            False,
            id="extra-fields-ignored",
        ),
        pytest.param(
            {
                **STORED,
                "creation_statements": [
                    STORED["creation_statements"][0],
                    "GRANT ALL PRIVILEGES ON `app_db`.* TO '{{name}}'@'%';",
                ],
            },
            True,
            id="unescaped-grant",
        ),
        pytest.param(
            {**STORED, "creation_statements": list(reversed(STORED["creation_statements"]))},
            True,
            id="statement-order",
        ),
        pytest.param({**STORED, "db_name": "keystone-other"}, True, id="db-name"),
        pytest.param({**STORED, "revocation_statements": []}, True, id="revocation"),
        pytest.param({**STORED, "default_ttl": 3600}, True, id="default-ttl"),
        pytest.param({**STORED, "max_ttl": 259201}, True, id="max-ttl"),
        pytest.param({**STORED, "max_ttl": "not-a-number"}, True, id="undecodable"),
    ],
)
def test_should_write_role(observed: dict[str, Any] | None, write: bool) -> None:
    assert should_write_role(observed, DESIRED) is write


def test_differing_escaping_is_rewritten_exactly_once() -> None:
    stored: dict[str, Any] = {
        **STORED,
        "creation_statements": [
            STORED["creation_statements"][0],
            "GRANT ALL PRIVILEGES ON `app_db`.* TO '{{name}}'@'%';",
        ],
    }
    writes = 0
    for _ in range(3):
        if should_write_role(stored, DESIRED):
            writes += 1
            stored = DESIRED.to_request()
    assert writes == 1


@pytest.mark.parametrize(
    ("status", "message"),
    [
        pytest.param(
            403,
            "the operator's OpenBao login or policy is missing; re-run "
            "deploy/openbao/bootstrap/setup-auth.sh, setup-policies.sh and "
            "setup-database-tenant.sh: openbao: 403 on POST /v1/auth/kubernetes/management/login: "
            "permission denied",
            id="403-hint",
        ),
        pytest.param(
            400,
            "openbao: 403 on POST /v1/auth/kubernetes/management/login: permission denied",
            id="400-no-hint",
        ),
        pytest.param(
            None,
            "openbao: 403 on POST /v1/auth/kubernetes/management/login: permission denied",
            id="no-answer-no-hint",
        ),
    ],
)
def test_openbao_failure_wording(status: int | None, message: str) -> None:
    error = "openbao: 403 on POST /v1/auth/kubernetes/management/login: permission denied"
    assert compute_openbao_failure(error, status) == message


def test_allowed_roles_failure_starts_with_the_status() -> None:
    error = (
        "openbao: 400 on POST /v1/database/mariadb/roles/x: "
        '"order.default.x" is not an allowed role'
    )
    assert compute_openbao_failure(error, 400).startswith("openbao: 400")


@pytest.mark.parametrize(
    ("store_ref", "expected"),
    [
        pytest.param(
            None,
            StoreLocation("SecretStore", "openbao-tenant-store", "default"),
            id="default-namespaced",
        ),
        pytest.param(
            {"name": "shared"},
            StoreLocation("ClusterSecretStore", "shared", ""),
            id="empty-kind-is-cluster",
        ),
        pytest.param(
            {"kind": "SecretStore", "name": "mine"},
            StoreLocation("SecretStore", "mine", "default"),
            id="namespaced",
        ),
    ],
)
def test_store_location(store_ref: dict[str, str] | None, expected: StoreLocation) -> None:
    assert compute_store_location(make_control_plane(store_ref=store_ref)) == expected


def test_store_location_without_control_plane() -> None:
    assert compute_store_location(None) == StoreLocation(
        "ClusterSecretStore", "openbao-cluster-store", ""
    )


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(None, OpenBaoConnection(), id="no-store"),
        pytest.param({}, OpenBaoConnection(), id="empty-store"),
        pytest.param(
            {"provider": {"vault": {"server": "https://bao:8200"}}},
            OpenBaoConnection(server="https://bao:8200"),
            id="server-only",
        ),
        pytest.param(
            {"provider": {"vault": {"auth": {"kubernetes": {"mountPath": "kubernetes/x"}}}}},
            OpenBaoConnection(auth_mount="kubernetes/x"),
            id="mount-only",
        ),
    ],
)
def test_connection_falls_back_field_by_field(
    spec: dict[str, Any] | None, expected: OpenBaoConnection
) -> None:
    store = None if spec is None else SecretStore.model_validate({"spec": spec})
    assert compute_connection(store) == expected


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param({"token_ttl": 259200, "token_max_ttl": 259200}, 259200, id="onboarded"),
        pytest.param({"token_ttl": 30, "token_max_ttl": 0}, 30, id="ttl-only"),
        pytest.param({"token_ttl": 0, "token_max_ttl": 3600}, 3600, id="max-only"),
        pytest.param({"token_ttl": 7200, "token_max_ttl": 3600}, 3600, id="the-shorter"),
        pytest.param({"token_ttl": 0, "token_max_ttl": 0}, None, id="mount-defaults"),
        pytest.param({"token_ttl": "30s"}, None, id="not-seconds"),
        pytest.param({"token_ttl": True}, None, id="not-a-number"),
        pytest.param(None, None, id="unread"),
    ],
)
def test_the_login_ttl_is_the_shorter_token_ttl_set(
    data: dict[str, Any] | None, expected: int | None
) -> None:
    assert compute_login_ttl(data) == expected


@pytest.mark.parametrize(
    ("login_ttl", "too_short"),
    [
        pytest.param(None, False, id="unknown-is-not-refused"),
        pytest.param(30, True, id="thirty-seconds"),
        pytest.param(24 * 3600 - 1, True, id="a-second-short-of-the-refresh"),
        pytest.param(24 * 3600, False, id="lives-until-the-refresh"),
        pytest.param(72 * 3600, False, id="onboarded"),
    ],
)
def test_a_login_ttl_shorter_than_the_refresh_is_refused(
    login_ttl: int | None, too_short: bool
) -> None:
    assert is_login_ttl_too_short(login_ttl, 24 * 3600) is too_short
