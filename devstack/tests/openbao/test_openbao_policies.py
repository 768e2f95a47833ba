"""The bootstrap's policies, proven through hvac: tenant isolation and the operator's reach."""

from __future__ import annotations

from collections.abc import Callable

import hvac
import pytest

from devstack.openbao.policy import Identity, granted_capabilities, parse_policy

from .openbao_support import MOUNT, Platform, suffix


def test_generator_reads_creds_of_its_own_namespace_only(
    make_platform: Callable[..., Platform], schemas: Callable[[], str]
) -> None:
    platform = make_platform()
    other_cp = f"cp-{suffix()}"
    # A second ControlPlane's roles live on the same connection here, so the only thing keeping
    # one namespace's generator away from the other's roles is the templated policy.
    platform.root.secrets.database.configure(
        name=platform.connection,
        plugin_name="mysql-database-plugin",
        verify_connection=False,
        allowed_roles=[f"order.{platform.cp_namespace}.*", f"order.{other_cp}.*"],
        mount_point=MOUNT,
    )
    operator = platform.operator()
    mine, theirs = f"order.{platform.cp_namespace}.a", f"order.{other_cp}.b"
    platform.write_order_role(operator, mine, schemas())
    platform.write_order_role(operator, theirs, schemas())

    generator = platform.generator()
    creds = generator.secrets.database.generate_credentials(mine, mount_point=MOUNT)
    assert creds["data"]["username"].startswith("v-")

    with pytest.raises(hvac.exceptions.Forbidden):
        generator.secrets.database.generate_credentials(theirs, mount_point=MOUNT)
    with pytest.raises(hvac.exceptions.Forbidden):
        generator.secrets.database.generate_credentials(platform.connection, mount_point=MOUNT)
    with pytest.raises(hvac.exceptions.Forbidden):
        generator.secrets.database.read_role(mine, mount_point=MOUNT)

    other_generator = platform.generator(other_cp)
    assert other_generator.secrets.database.generate_credentials(theirs, mount_point=MOUNT)
    with pytest.raises(hvac.exceptions.Forbidden):
        other_generator.secrets.database.generate_credentials(mine, mount_point=MOUNT)


def test_generator_policy_is_dot_closed(platform: Platform) -> None:
    # Namespace "cp-x" must not reach "order.cp-xy.*": the template is followed by a dot.
    generator = platform.generator()
    near_miss = f"order.{platform.cp_namespace}x.role"
    with pytest.raises(hvac.exceptions.Forbidden):
        generator.secrets.database.generate_credentials(near_miss, mount_point=MOUNT)


def test_operator_manages_order_roles_but_not_config_or_keystone(
    platform: Platform, schemas: Callable[[], str]
) -> None:
    operator = platform.operator()
    role = f"order.{platform.cp_namespace}.app"
    assert platform.write_order_role(operator, role, schemas()).status_code == 204
    assert (
        operator.secrets.database.read_role(role, mount_point=MOUNT)["data"]["default_ttl"]
        == 172800
    )
    assert operator.secrets.database.delete_role(role, mount_point=MOUNT).status_code == 204

    with pytest.raises(hvac.exceptions.Forbidden):
        operator.secrets.database.read_connection(platform.connection, mount_point=MOUNT)
    with pytest.raises(hvac.exceptions.Forbidden):
        operator.secrets.database.read_role(platform.connection, mount_point=MOUNT)
    with pytest.raises(hvac.exceptions.Forbidden):
        platform.write_order_role(operator, platform.connection, "keystone")
    with pytest.raises(hvac.exceptions.Forbidden):
        operator.secrets.database.generate_credentials(role, mount_point=MOUNT)
    # Root alone reads the connection, and never sees its password.
    config = platform.root.secrets.database.read_connection(platform.connection, mount_point=MOUNT)
    assert "password" not in config["data"]["connection_details"]


def test_revoke_prefix_needs_sudo(platform: Platform) -> None:
    prefix = f"{MOUNT}/creds/order.{platform.cp_namespace}.app"
    platform.root.sys.create_or_update_acl_policy(
        "no-sudo",
        f'path "sys/leases/revoke-prefix/{MOUNT}/creds/order.*" {{ capabilities = ["update"] }}',
    )
    created = platform.root.auth.token.create(policies=["no-sudo"], ttl="1h")
    without_sudo = platform.client(token=created["auth"]["client_token"])
    with pytest.raises(hvac.exceptions.Forbidden):
        without_sudo.sys.revoke_prefix(prefix)

    assert platform.operator().sys.revoke_prefix(prefix).status_code == 204
    with pytest.raises(hvac.exceptions.Forbidden):
        platform.operator().sys.revoke_prefix(f"{MOUNT}/creds/{platform.connection}")


def test_operator_login_is_bound_to_its_service_account(platform: Platform) -> None:
    with pytest.raises(hvac.exceptions.Forbidden):
        platform.login("c5c3-operator", "tenant-ns", "c5c3-operator")
    with pytest.raises(hvac.exceptions.Forbidden):
        platform.login("c5c3-operator", "c5c3-system", "someone-else")
    with pytest.raises(hvac.exceptions.Forbidden):
        platform.client().auth.kubernetes.login(
            "c5c3-operator", "not-a-cluster-token", mount_point="kubernetes/management"
        )
    with pytest.raises(hvac.exceptions.InvalidRequest, match="invalid role name"):
        platform.login("no-such-role", "c5c3-system", "c5c3-operator")


def test_login_carries_the_service_account_metadata(platform: Platform) -> None:
    client = platform.client()
    jwt = platform.reviewer.issue(platform.cp_namespace, "order-db-creds")
    auth = client.auth.kubernetes.login("order-db", jwt, mount_point="kubernetes/management")[
        "auth"
    ]
    assert auth["metadata"]["service_account_namespace"] == platform.cp_namespace
    assert auth["metadata"]["service_account_name"] == "order-db-creds"
    assert auth["token_policies"] == ["default", "order-db-dynamic"]
    assert auth["lease_duration"] == 72 * 3600
    assert auth["entity_id"]
    listing = platform.root.sys.list_auth_methods()["data"]
    assert listing["kubernetes/management/"]["accessor"] == platform.result.kube_mount_accessor


def test_policy_round_trip_and_errors(platform: Platform) -> None:
    text = 'path "secret/+/x" {\n  capabilities = ["read", "deny"]\n}\n'
    platform.root.sys.create_or_update_acl_policy("Mixed-Case", text)
    assert platform.root.sys.read_acl_policy("mixed-case")["data"]["policy"] == text
    assert "mixed-case" in platform.root.sys.list_acl_policies()["data"]["keys"]
    platform.root.sys.delete_acl_policy("mixed-case")
    with pytest.raises(hvac.exceptions.InvalidPath):
        platform.root.sys.read_acl_policy("mixed-case")
    with pytest.raises(hvac.exceptions.InvalidRequest, match="invalid capability"):
        platform.root.sys.create_or_update_acl_policy("bad", 'path "x" { capabilities = ["fly"] }')
    with pytest.raises(hvac.exceptions.InvalidRequest, match="not supported"):
        platform.root.sys.create_or_update_acl_policy(
            "bad", 'path "x" { capabilities = ["read"] allowed_parameters = { "a" = [] } }'
        )
    with pytest.raises(hvac.exceptions.InvalidRequest):
        platform.root.sys.create_or_update_acl_policy(
            "root", 'path "x" { capabilities = ["read"] }'
        )


# --- the matcher on its own ----------------------------------------------------------------------

_IDENTITY = Identity(
    entity_id="e1",
    aliases={"auth_kubernetes_1": ("uid", {"service_account_namespace": "team-a"})},
)


@pytest.mark.parametrize(
    ("rules", "path", "expected"),
    [
        pytest.param('path "a/b" { capabilities = ["read"] }', "a/b", {"read"}, id="exact"),
        pytest.param(
            'path "a/b" { capabilities = ["read"] }', "a/b/c", set(), id="exact-no-prefix"
        ),
        pytest.param('path "a/*" { capabilities = ["read"] }', "a/b/c", {"read"}, id="glob"),
        pytest.param(
            'path "a/b*" { capabilities = ["read"] }', "a/bc", {"read"}, id="glob-in-segment"
        ),
        pytest.param('path "a/+/c" { capabilities = ["read"] }', "a/x/c", {"read"}, id="plus"),
        pytest.param(
            'path "a/+/c" { capabilities = ["read"] }', "a/x/y/c", set(), id="plus-one-segment"
        ),
        pytest.param(
            'path "a/*" { capabilities = ["read"] }\npath "a/b" { capabilities = ["update"] }',
            "a/b",
            {"update"},
            id="exact-beats-glob",
        ),
        pytest.param(
            'path "a/*" { capabilities = ["read"] }\npath "a/b/*" { capabilities = ["list"] }',
            "a/b/c",
            {"list"},
            id="longer-glob-wins",
        ),
        pytest.param(
            'path "a/+/c" { capabilities = ["read"] }\npath "a/b/*" { capabilities = ["list"] }',
            "a/b/c",
            {"list"},
            id="later-wildcard-wins",
        ),
        pytest.param(
            'path "a/*" { capabilities = ["read"] }\npath "a/b" { capabilities = ["deny"] }',
            "a/b",
            set(),
            id="deny",
        ),
        pytest.param(
            'path "c/order.{{identity.entity.aliases.auth_kubernetes_1'
            '.metadata.service_account_namespace}}.*" { capabilities = ["read"] }',
            "c/order.team-a.x",
            {"read"},
            id="template",
        ),
        pytest.param(
            'path "c/{{identity.entity.aliases.auth_other.metadata.service_account_namespace}}/*"'
            ' { capabilities = ["read"] }',
            "c//x",
            set(),
            id="unresolvable-template-dropped",
        ),
        pytest.param(
            '{"path": {"j/*": {"capabilities": ["read", "list"]}}}',
            "j/k",
            {"read", "list"},
            id="json",
        ),
    ],
)
def test_policy_matcher(rules: str, path: str, expected: set[str]) -> None:
    policy = parse_policy("p", rules)
    assert granted_capabilities([policy], path, _IDENTITY) == expected
