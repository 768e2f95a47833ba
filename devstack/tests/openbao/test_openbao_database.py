"""The database engine on the real MariaDB: minted users, their reach, and their end."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import hvac
import pymysql
import pytest

from devstack.tests.support import root_sql, sql_login, wait_for

from .openbao_support import MOUNT, Platform, sql_user_exists, suffix

# MariaDB answers a login of an unknown user with either of these, depending on the auth plugin
# exchange it happened to start.
_ACCESS_DENIED = {1045, 1698}


def _login_fails(creds: dict[str, Any]) -> bool:
    try:
        sql_login(creds["data"]["username"], creds["data"]["password"]).close()
    except pymysql.err.OperationalError as exc:
        return exc.args[0] in _ACCESS_DENIED
    return False


def _mint(
    platform: Platform, schema: str, writer: Any = None, minter: Any = None
) -> tuple[str, dict[str, Any]]:
    """Write an order's role for ``schema`` (as the operator unless ``writer`` is given) and
    mint credentials from it (as the generator unless ``minter`` is given)."""
    role = f"order.{platform.cp_namespace}.{suffix()}"
    platform.write_order_role(writer or platform.operator(), role, schema)
    minting = minter or platform.generator()
    return role, minting.secrets.database.generate_credentials(role, mount_point=MOUNT)


def test_minted_user_reaches_its_schema_and_no_other(
    platform: Platform, schemas: Callable[[], str]
) -> None:
    mine, other = schemas(), schemas()
    _, creds = _mint(platform, mine)

    session = sql_login(creds["data"]["username"], creds["data"]["password"], mine)
    try:
        with session.cursor() as cursor:
            cursor.execute("INSERT INTO t (id) VALUES (1)")
            cursor.execute("SELECT id FROM t")
            assert cursor.fetchall() == ((1,),)
            cursor.execute("SHOW DATABASES")
            visible = {row[0] for row in cursor.fetchall()}
            assert mine in visible
            assert other not in visible
            with pytest.raises(pymysql.err.OperationalError) as denied:
                cursor.execute(f"SELECT * FROM `{other}`.t")  # noqa: S608 - our own schema name
            assert denied.value.args[0] == 1142
        session.commit()
    finally:
        session.close()


def test_creds_answer_in_openbao_shape(platform: Platform, schemas: Callable[[], str]) -> None:
    role, creds = _mint(platform, schemas())
    username = creds["data"]["username"]
    assert len(username) <= 32
    assert username.startswith(f"v-kubernetes-{role[:10]}-")
    assert creds["renewable"] is True
    assert creds["lease_duration"] == 172800
    assert creds["lease_id"].startswith(f"{MOUNT}/creds/{role}/")
    assert len(creds["lease_id"].rsplit("/", 1)[1]) == 24

    lease = platform.root.sys.read_lease(creds["lease_id"])["data"]
    assert lease["id"] == creds["lease_id"]
    assert 172790 <= lease["ttl"] <= 172800
    assert lease["renewable"] is True


def test_revoking_the_lease_drops_the_user(platform: Platform, schemas: Callable[[], str]) -> None:
    _, creds = _mint(platform, schemas())
    sql_login(creds["data"]["username"], creds["data"]["password"]).close()
    assert platform.root.sys.revoke_lease(creds["lease_id"]).status_code == 204
    assert _login_fails(creds)
    assert not sql_user_exists(creds["data"]["username"])
    with pytest.raises(hvac.exceptions.InvalidRequest):
        platform.root.sys.read_lease(creds["lease_id"])


def test_revoke_prefix_drops_every_user_of_the_role(
    platform: Platform, schemas: Callable[[], str]
) -> None:
    role, first = _mint(platform, schemas())
    second = platform.generator().secrets.database.generate_credentials(role, mount_point=MOUNT)
    operator = platform.operator()
    operator.sys.revoke_prefix(f"{MOUNT}/creds/{role}")
    operator.secrets.database.delete_role(role, mount_point=MOUNT)
    assert _login_fails(first)
    assert _login_fails(second)
    with pytest.raises(hvac.exceptions.InvalidPath):
        platform.root.secrets.database.read_role(role, mount_point=MOUNT)


def test_lease_expiry_drops_the_user_under_time_scale(
    make_platform: Callable[..., Platform], schemas: Callable[[], str]
) -> None:
    # 48 h of lease in about two real seconds.
    platform = make_platform(time_scale=172800 / 2)
    _, creds = _mint(platform, schemas())
    sql_login(creds["data"]["username"], creds["data"]["password"]).close()
    wait_for(lambda: _login_fails(creds), 15, "the revoked credential to stop logging in")
    assert not sql_user_exists(creds["data"]["username"])


def _mint_as_root(platform: Platform, schema: str, client: Any = None) -> dict[str, Any]:
    """Mint as root (or ``client``): under a fast clock an operator token ends too soon."""
    return _mint(platform, schema, platform.root, client or platform.root)[1]


def test_a_renewal_moves_the_leases_end_both_ways(
    make_platform: Callable[..., Platform], schemas: Callable[[], str]
) -> None:
    platform = make_platform(time_scale=3600)  # an hour a second; the root token never ends
    kept, shortened = _mint_as_root(platform, schemas()), _mint_as_root(platform, schemas())
    renew = platform.root.sys.renew_lease
    # Due in an hour, then in ten: the first deadline must not end it.
    renew(kept["lease_id"], increment=3600)
    renew(kept["lease_id"], increment=36000)
    # From 48 hours to one: it ends then, not at its first deadline.
    renew(shortened["lease_id"], increment=3600)
    wait_for(lambda: _login_fails(shortened), 15, "the shortened lease to end")
    time.sleep(3)  # past the first deadline, well before the last
    assert not _login_fails(kept), "a lease renewed for longer ended at its first deadline"
    platform.root.sys.revoke_lease(kept["lease_id"])
    assert _login_fails(kept)


def test_revoking_a_token_ends_its_childrens_leases_too(
    platform: Platform, schemas: Callable[[], str]
) -> None:
    parent = platform.client(
        platform.root.auth.token.create(policies=["root"])["auth"]["client_token"]
    )
    child = platform.client(parent.auth.token.create(policies=["root"])["auth"]["client_token"])
    creds = _mint_as_root(platform, schemas(), client=child)
    sibling = _mint_as_root(platform, schemas(), client=parent)
    platform.root.auth.token.revoke(parent.token)
    assert _login_fails(creds)
    assert _login_fails(sibling)
    assert not child.is_authenticated()


def test_renew_is_capped_at_max_ttl(platform: Platform, schemas: Callable[[], str]) -> None:
    _, creds = _mint(platform, schemas())
    renewed = platform.generator().sys.renew_lease(creds["lease_id"], increment=400000)
    assert 259190 <= renewed["lease_duration"] <= 259200
    assert renewed["warnings"]
    lease = platform.root.sys.read_lease(creds["lease_id"])["data"]
    assert lease["last_renewal"] is not None


def test_revoking_the_minting_token_revokes_its_leases(
    platform: Platform, schemas: Callable[[], str]
) -> None:
    role = f"order.{platform.cp_namespace}.{suffix()}"
    platform.write_order_role(platform.operator(), role, schemas())
    generator = platform.generator()
    creds = generator.secrets.database.generate_credentials(role, mount_point=MOUNT)
    generator.auth.token.revoke_self()
    assert _login_fails(creds)


def test_stop_drops_every_user_it_created(
    make_platform: Callable[..., Platform], schemas: Callable[[], str]
) -> None:
    platform = make_platform()
    _, creds = _mint(platform, schemas())
    assert platform.server.stop() == []
    assert _login_fails(creds)
    assert not sql_user_exists(creds["data"]["username"])


def test_failed_creation_leaves_no_user_and_no_password_in_the_error(
    make_platform: Callable[..., Platform],
) -> None:
    # A username carries only the role's first 10 characters, `order.` and 4 of the namespace's:
    # a namespace that starts with random ones keeps users that other tests mint as root at the
    # same time out of the check below.
    platform = make_platform(controlplane_namespace=f"{suffix()}-cp")
    role = f"order.{platform.cp_namespace}.{suffix()}"
    platform.root.secrets.database.create_role(
        role,
        db_name=platform.connection,
        creation_statements=[
            "CREATE USER '{{name}}'@'%' IDENTIFIED BY '{{password}}';",
            "GRANT NONSENSE '{{password}}' TO '{{name}}'@'%';",
        ],
        mount_point=MOUNT,
    )
    with pytest.raises(hvac.exceptions.InternalServerError) as failed:
        platform.root.secrets.database.generate_credentials(role, mount_point=MOUNT)
    message = str(failed.value)
    assert "error creating user" in message
    assert "<password>" in message
    with pytest.raises(hvac.exceptions.InvalidPath):
        platform.root.sys.list_leases(f"{MOUNT}/creds/{role}")
    assert _v_users_for(role) == []


def _v_users_for(role: str) -> list[str]:
    session = root_sql()
    try:
        with session.cursor() as cursor:
            cursor.execute(
                "SELECT User FROM mysql.user WHERE User LIKE %s", (f"v-root-{role[:10]}-%",)
            )
            return [row[0] for row in cursor.fetchall()]
    finally:
        session.close()


def test_role_fields_round_trip_and_partial_update(platform: Platform) -> None:
    role = f"order.{platform.cp_namespace}.{suffix()}"
    database = platform.root.secrets.database
    database.create_role(
        role,
        db_name=platform.connection,
        creation_statements=["CREATE USER '{{name}}'@'%' IDENTIFIED BY '{{password}}';"],
        default_ttl="1h",
        max_ttl=7200,
        mount_point=MOUNT,
    )
    data = database.read_role(role, mount_point=MOUNT)["data"]
    assert data == {
        "db_name": platform.connection,
        "creation_statements": ["CREATE USER '{{name}}'@'%' IDENTIFIED BY '{{password}}';"],
        "revocation_statements": [],
        "rollback_statements": [],
        "renew_statements": [],
        "default_ttl": 3600,
        "max_ttl": 7200,
        "credential_type": "password",
    }
    platform.root.write_data(f"{MOUNT}/roles/{role}", data={"max_ttl": "3h"})
    updated = database.read_role(role, mount_point=MOUNT)["data"]
    assert (updated["default_ttl"], updated["max_ttl"]) == (3600, 10800)
    assert role in database.list_roles(mount_point=MOUNT)["data"]["keys"]
    assert database.delete_role(role, mount_point=MOUNT).status_code == 204
    assert database.delete_role(role, mount_point=MOUNT).status_code == 204


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param({"creation_statements": ["x"]}, "database name is required", id="no-db-name"),
        pytest.param({"db_name": "keystone-elsewhere"}, None, id="unknown-connection-accepted"),
        pytest.param(
            {"db_name": "keystone-X", "default_ttl": "soon"}, "invalid duration", id="ttl"
        ),
    ],
)
def test_role_write_validation(
    platform: Platform, body: dict[str, Any], message: str | None
) -> None:
    role = f"order.{platform.cp_namespace}.{suffix()}"
    if message is None:
        platform.root.write_data(f"{MOUNT}/roles/{role}", data=body)
        return
    with pytest.raises(hvac.exceptions.InvalidRequest, match=message):
        platform.root.write_data(f"{MOUNT}/roles/{role}", data=body)


def test_roles_outside_allowed_roles_are_refused(
    platform: Platform, schemas: Callable[[], str]
) -> None:
    stranger = f"order.elsewhere-{suffix()}.x"
    with pytest.raises(
        hvac.exceptions.InvalidRequest, match=f'"{stranger}" is not an allowed role'
    ):
        platform.write_order_role(platform.root, stranger, schemas())

    # A role written before allowed_roles narrowed is refused when its creds are read.
    role = f"order.{platform.cp_namespace}.{suffix()}"
    platform.write_order_role(platform.root, role, schemas())
    platform.root.secrets.database.configure(
        name=platform.connection,
        plugin_name="mysql-database-plugin",
        verify_connection=False,
        allowed_roles=[platform.connection],
        mount_point=MOUNT,
    )
    with pytest.raises(hvac.exceptions.InvalidRequest, match="is not an allowed role"):
        platform.root.secrets.database.generate_credentials(role, mount_point=MOUNT)
    with pytest.raises(hvac.exceptions.InvalidRequest, match="unknown role"):
        platform.root.secrets.database.generate_credentials("order.none.x", mount_point=MOUNT)


def test_connection_is_verified_on_write_unless_told_not_to(platform: Platform) -> None:
    name = f"conn-{suffix()}"
    with pytest.raises(hvac.exceptions.InvalidRequest, match="error verifying connection"):
        platform.root.secrets.database.configure(
            name=name,
            plugin_name="mysql-database-plugin",
            connection_url="{{username}}:{{password}}@tcp(db.example.svc:3306)/",
            username="no-such-user",
            password="wrong",
            mount_point=MOUNT,
        )
    platform.root.secrets.database.configure(
        name=name,
        plugin_name="mysql-database-plugin",
        connection_url="{{username}}:{{password}}@tcp(db.example.svc:3306)/",
        username="root",
        password="",
        mount_point=MOUNT,
    )
    assert (
        name in platform.root.secrets.database.list_connections(mount_point=MOUNT)["data"]["keys"]
    )
    with pytest.raises(hvac.exceptions.InvalidRequest, match="not supported"):
        platform.root.secrets.database.configure(
            name=name, plugin_name="postgresql-database-plugin", mount_point=MOUNT
        )


def test_display_names_cannot_smuggle_quotes_into_usernames(
    platform: Platform, schemas: Callable[[], str]
) -> None:
    role = f"order.{platform.cp_namespace}.{suffix()}"
    platform.write_order_role(platform.root, role, schemas())
    created = platform.root.auth.token.create(policies=["root"], display_name="a'b", ttl="1h")
    client = platform.client(token=created["auth"]["client_token"])
    creds = client.secrets.database.generate_credentials(role, mount_point=MOUNT)
    assert creds["data"]["username"].startswith("v-token-a-b-")
    sql_login(creds["data"]["username"], creds["data"]["password"]).close()
