"""The group's own accounts are reserved, and the check fails closed."""

from __future__ import annotations

import pytest

from tenantdb.core.mysqldatabase.principals import (
    ALWAYS_RESERVED,
    GroupSecretInvalidError,
    GroupSecretUnreadableError,
    compute_reserved_usernames,
)


def test_the_group_secrets_usernames_join_the_built_in_accounts() -> None:
    reserved = compute_reserved_usernames(
        {
            "main-operator": {"username": "bloodraven", "password": "p",
                              "MYSQL_REPLICATION_USER": "repl"},
            "main-app": {"username": "app", "password": "p",
                         "dsn": "wms:s3cret@tcp(mysql-main:3306)/wms?parseTime=true"},
            "main-readonly": {"username": "ro", "password": "p"},
        }
    )  # fmt: skip
    assert reserved == ALWAYS_RESERVED | {"bloodraven", "repl", "app", "wms", "ro"}
    assert {"root", "mysql.sys", "mysql.session", "mysql.infoschema", "replicator"} <= reserved
    assert "mariadb.sys" in reserved  # MariaDB's owner of its system views


def test_an_unreadable_group_secret_fails_closed() -> None:
    with pytest.raises(GroupSecretUnreadableError, match="'main-monitor' cannot be read"):
        compute_reserved_usernames({"main-operator": {"username": "op"}, "main-monitor": None})


def test_a_dsn_that_names_no_user_in_the_drivers_form_is_an_error_that_quotes_nothing() -> None:
    with pytest.raises(GroupSecretInvalidError) as refused:
        compute_reserved_usernames({"main-app": {"dsn": "not a dsn with s3cret"}})
    assert "s3cret" not in str(refused.value)
    assert "main-app" in str(refused.value)
