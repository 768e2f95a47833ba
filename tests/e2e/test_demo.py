"""The demo a newcomer runs: both kinds settle, it tells how to connect, Flower shows its queues
and tasks in a browser behind its login, and Ctrl-C leaves nothing behind."""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest
import redis

from demo import KEY_PREFIX
from tests.conftest import REDIS_URL
from tests.e2e.conftest import REPO
from tests.support import wait_for

pytestmark = pytest.mark.slow

DEMO_SCHEMAS = ("workflow_db", "edge_db")


def _schemas() -> set[str]:
    with pymysql.connect(host="127.0.0.1", user="root", password="") as conn, conn.cursor() as cur:
        cur.execute("SHOW DATABASES")
        return {row[0] for row in cur.fetchall()}


@pytest.fixture
def one_demo_at_a_time() -> Iterator[None]:
    """Hold the demo's place for this test alone, across test processes. A demo listens where a
    newcomer's does (Flower's, Prometheus's and the metrics ports) and keeps its fixed schemas and
    Redis prefix, so two at once would fight over them."""
    with (Path(tempfile.gettempdir()) / "tenantdb-demo-test.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@pytest.fixture
def demo_cleanup(one_demo_at_a_time: None) -> Iterator[None]:
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


def _interrupt(demo: subprocess.Popen[Any]) -> None:
    """Stop a demo still running as a user would, with Ctrl-C, so that it stops what it
    started; SIGKILL (which would leave its processes behind) only if it does not exit."""
    if demo.poll() is not None:
        return
    demo.send_signal(signal.SIGINT)
    try:
        demo.wait(timeout=60)
    except subprocess.TimeoutExpired:
        demo.kill()
        demo.wait()


@pytest.mark.timeout(600)  # the other demo test may hold the demo's place first
def test_demo_until_ready_exits_0_once_the_orders_settle(
    tmp_path: Path, demo_cleanup: None
) -> None:
    # What an earlier demo left under the demo's prefix (its claims on the demo's databases
    # among it) goes before the new run starts: left there, it would refuse the orders.
    stale = redis.Redis.from_url(REDIS_URL)
    stale.set(f"{KEY_PREFIX}schema:left-by-an-earlier-demo", "x")
    demo = subprocess.Popen(
        [sys.executable, "-m", "tenantdb.cli", "demo", "--until-ready", "--timeout", "180",
         "--state-dir", str(tmp_path / "demo")],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        out, err = demo.communicate(timeout=240)
    finally:
        _interrupt(demo)
    assert demo.returncode == 0, out[-2000:] + err[-2000:]
    assert not stale.exists(f"{KEY_PREFIX}schema:left-by-an-earlier-demo")
    stale.close()
    table = out
    assert "workflow-db  MariaDBDatabase  management  True" in table
    assert "edge-db      MariaDBDatabase  edge-1      True" in table
    assert "DatabaseNameReserved" in table
    # Both kinds: the MysqlDatabase on the devstack's failover group, with how to log in as its
    # owner (the password read from its Secret, never printed).
    assert "orders-db    MysqlDatabase    management  True   DatabaseReconciled" in table
    assert "-n bloodraven get secret orders-db-owner -o jsonpath='{.data.password}'" in table
    assert '-u orders_app -p"$PASS" orders_db' in table
    assert "get secret workflow-db-credentials -o jsonpath='{.data.password}'" in table
    assert "tenantdb reconcile mariadbdatabase/tenant-a/workflow-db --wait 30" in table
    # Debian's prometheus is installed (.ci/run installs it): the demo's Prometheus scraped
    # every process and shows the orders by Ready reason.
    assert shutil.which("prometheus"), "prometheus is not installed (apt-get install prometheus)"
    assert "Prometheus: http://127.0.0.1:9190" in table
    assert "Prometheus has tenantdb_orders for the demo orders:" in table
    assert "mariadbdatabase DatabaseNameReserved (Ready=False) = 1" in table
    assert "mysqldatabase DatabaseReconciled (Ready=True) = 1" in table


def _browse(url: str, profile: Path) -> str:
    """The page at ``url`` as headless Chromium leaves it once its scripts ran (the DOM)."""
    chromium = shutil.which("chromium")
    assert chromium, "chromium is not installed (apt-get install chromium)"
    done = subprocess.run(
        [chromium, "--headless=new", "--no-sandbox", "--disable-gpu",
         f"--user-data-dir={profile}", "--virtual-time-budget=10000", "--dump-dom", url],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"chromium exited with {done.returncode}"  # no URL: it has auth
    return done.stdout


def _flower_in_a_browser(state: Path, profile: Path) -> None:
    """Flower's pages, as a browser shows them, behind the demo's login."""
    login = (state / "flower-auth").read_text().strip()
    outside = _browse("http://127.0.0.1:5555/tasks", profile / "anonymous")
    assert "tenantdb.reconcile.order" not in outside, "Flower showed its tasks without a login"
    broker = _browse(f"http://{login}@127.0.0.1:5555/broker", profile / "broker")
    missing = [q for q in ("reconcile", "provision", "delivery", "teardown") if q not in broker]
    assert missing == [], f"queues missing from Flower's broker page: {missing}"
    tasks = _browse(f"http://{login}@127.0.0.1:5555/tasks", profile / "tasks")
    # The task list is filled in by the page's scripts: only a browser shows it.
    assert "tenantdb.reconcile.order" in tasks, "no reconcile task on Flower's tasks page"
    assert "SUCCESS" in tasks, "no finished task on Flower's tasks page"


@pytest.mark.timeout(600)  # the other demo test may hold the demo's place first
def test_a_running_demo_shows_its_flower_and_ctrl_c_stops_everything(
    tmp_path: Path, demo_cleanup: None
) -> None:
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
        _flower_in_a_browser(tmp_path / "demo", tmp_path / "chromium")
        demo.send_signal(signal.SIGINT)
        assert demo.wait(timeout=60) == 0
        wait_for(lambda: not any(_alive(p) for p in started), 30, "every process to stop")
    finally:
        _interrupt(demo)
        log.close()
