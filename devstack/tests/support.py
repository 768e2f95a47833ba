"""What the devstack's tests need alike: waiting for a condition, sessions on the real MariaDB.

The platform creates schemas and users on a real MariaDB (root with an empty password over TCP
at 127.0.0.1:3306), as the platform they stand in for would.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pymysql
import pytest

MARIADB_HOST, MARIADB_PORT = "127.0.0.1", 3306
"""The real MariaDB the platform and these tests use."""


def wait_for(condition: Callable[[], Any], seconds: float = 10.0, what: str = "") -> Any:
    """Poll ``condition`` until it returns something truthy, and return that; fail the test
    after ``seconds`` naming ``what``."""
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {seconds} s waiting for {what or condition}")
        time.sleep(0.05)


def root_sql() -> pymysql.connections.Connection[Any]:
    """An autocommit root session on the real MariaDB."""
    return pymysql.connect(
        host=MARIADB_HOST, port=MARIADB_PORT, user="root", password="", autocommit=True
    )


def sql_login(
    user: str, password: str | bytes, database: str | None = None
) -> pymysql.connections.Connection[Any]:
    """Log in to the real MariaDB as a user OpenBao minted."""
    return pymysql.connect(
        host=MARIADB_HOST,
        port=MARIADB_PORT,
        user=user,
        password=password,
        database=database,
        connect_timeout=5,
    )
