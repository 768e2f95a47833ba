"""What tests of every layer need alike: waiting for a condition, stopping the processes a test
started, sessions on the real MariaDB.

Every test that polls uses ``wait_for``, so a timeout reads the same everywhere: what was
awaited, for how long, and (with ``describe``) what was still wrong at the deadline.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from typing import Any

import pymysql
import pytest

MARIADB_HOST, MARIADB_PORT = "127.0.0.1", 3306
"""The real MariaDB every test that speaks SQL uses (root with an empty password over TCP)."""


def wait_for(
    condition: Callable[[], Any],
    seconds: float = 10.0,
    what: str = "",
    describe: Callable[[], str] | None = None,
    *,
    interval: float = 0.05,
) -> Any:
    """Poll ``condition`` until it returns something truthy, and return that; fail the test
    after ``seconds`` naming ``what`` and, when given, what ``describe`` says was still wrong."""
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            state = f": {describe()}" if describe is not None else ""
            pytest.fail(f"timed out after {seconds} s waiting for {what or condition}{state}")
        time.sleep(interval)


def stop_processes(procs: Iterable[subprocess.Popen[Any]], grace: float = 15.0) -> None:
    """SIGTERM every process still running, give them ``grace`` seconds together to exit, and
    SIGKILL what is left: the clean stop a user's supervisor gives, bounded."""
    procs = list(procs)
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def root_sql() -> pymysql.connections.Connection[Any]:
    """An autocommit root session on the real MariaDB."""
    return pymysql.connect(
        host=MARIADB_HOST, port=MARIADB_PORT, user="root", password="", autocommit=True
    )


def sql_login(
    user: str, password: str | bytes, database: str | None = None
) -> pymysql.connections.Connection[Any]:
    """Log in to the real MariaDB as a user tenantdb (or a test) made."""
    return pymysql.connect(
        host=MARIADB_HOST,
        port=MARIADB_PORT,
        user=user,
        password=password,
        database=database,
        connect_timeout=5,
    )
