"""The demo a newcomer runs: it settles, tells how to connect, and Ctrl-C leaves nothing behind."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest
import redis

from devstack.demo import KEY_PREFIX
from tests.conftest import REDIS_URL
from tests.e2e.conftest import REPO, wait_for

pytestmark = pytest.mark.slow

DEMO_SCHEMAS = ("workflow_db", "edge_db")


def _schemas() -> set[str]:
    with pymysql.connect(host="127.0.0.1", user="root", password="") as conn, conn.cursor() as cur:
        cur.execute("SHOW DATABASES")
        return {row[0] for row in cur.fetchall()}


@pytest.fixture
def demo_cleanup() -> Iterator[None]:
    """Drop what a demo run leaves that was not there before: its schemas and Redis keys."""
    before = _schemas()
    yield
    root = pymysql.connect(host="127.0.0.1", user="root", password="", autocommit=True)
    with root as conn, conn.cursor() as cur:
        for name in (_schemas() - before) & set(DEMO_SCHEMAS):
            cur.execute(f"DROP DATABASE `{name}`")
    client = redis.Redis.from_url(REDIS_URL)
    for name in client.scan_iter(match=f"{KEY_PREFIX}*", count=1000):
        client.delete(name)
    client.close()


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        listed = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return found
    for child in listed:
        found += [int(child), *_children(int(child))]
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text() if Path(f"/proc/{pid}/stat").exists() else ""
    return " Z " not in stat


def test_demo_until_ready_exits_0_once_the_orders_settle(
    tmp_path: Path, demo_cleanup: None
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tenantdb.cli", "demo", "--until-ready", "--timeout", "180",
         "--state-dir", str(tmp_path / "demo")],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    table = done.stdout
    assert "workflow-db  management  True" in table
    assert "edge-db      edge-1      True" in table
    assert "DatabaseNameReserved" in table
    assert "get secret workflow-db-credentials -o jsonpath='{.data.password}'" in table
    assert "tenantdb reconcile mariadbdatabase/tenant-a/workflow-db --wait 30" in table
    # Debian's prometheus is installed (.ci/run installs it): the demo's Prometheus scraped
    # every process and shows the orders by Ready reason.
    assert shutil.which("prometheus"), "prometheus is not installed (apt-get install prometheus)"
    assert "Prometheus: http://127.0.0.1:9190" in table
    assert "Prometheus has tenantdb_orders for the demo orders:" in table
    assert "DatabaseNameReserved (Ready=False) = 1" in table


def test_ctrl_c_stops_everything_the_demo_started(tmp_path: Path, demo_cleanup: None) -> None:
    log = (tmp_path / "demo.out").open("w")
    demo = subprocess.Popen(
        [sys.executable, "-m", "tenantdb.cli", "demo", "--timeout", "180",
         "--state-dir", str(tmp_path / "demo")],
        cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        wait_for(
            lambda: "Ctrl-C stops everything" in (tmp_path / "demo.out").read_text(),
            180,
            "the demo to settle",
        )
        started = _children(demo.pid)
        assert len(started) >= 6, "devstack, watcher, two workers, beat and Flower"
        demo.send_signal(signal.SIGINT)
        assert demo.wait(timeout=60) == 0
        wait_for(lambda: not any(_alive(p) for p in started), 30, "every process to stop")
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
        log.close()
