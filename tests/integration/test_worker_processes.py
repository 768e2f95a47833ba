"""Real ``celery worker`` processes running the reconcile protocol: crash safety and dedup.

Two worker processes (prefork pool, one child each) and a beat process run against the real
Redis under the test's own key prefix, with the probe pass of ``workqueue_app``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from tenantdb.adapters.celeryapp import build_celery_app, make_publisher
from tenantdb.adapters.workqueue import WorkQueue
from tenantdb.core.keys import OrderKey
from tenantdb.settings import Settings
from tests.conftest import REDIS_URL
from tests.integration.workqueue_app import probe_keys

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
KEY = OrderKey.parse("probe/tenant-a/crash-me")
LOCK_TTL = 2.0


class Stack:
    """Worker and beat processes for one test, stopped when the test ends."""

    def __init__(self, prefix: str, logs: Path) -> None:
        self.prefix = prefix
        self.logs = logs
        self.env = {
            **os.environ,
            "TENANTDB_REDIS_URL": REDIS_URL,
            "TENANTDB_KEY_PREFIX": prefix,
            "TENANTDB_LOCK_TTL_SECONDS": str(LOCK_TTL),
            "PYTHONPATH": str(REPO),
        }
        self.procs: list[subprocess.Popen[bytes]] = []
        self.settings = Settings(redis_url=REDIS_URL, key_prefix=prefix, lock_ttl_seconds=LOCK_TTL)
        self.client = redis.Redis.from_url(REDIS_URL)
        self.queue = WorkQueue(
            self.client,
            make_publisher(build_celery_app(self.settings)),
            prefix=prefix,
            lock_ttl=LOCK_TTL,
        )
        self.keys = probe_keys(prefix, str(KEY))

    def start_worker(self, name: str) -> None:
        log = self.logs / f"{name}.log"
        argv = [
            sys.executable, "-m", "celery", "-A", "tests.integration.workqueue_app", "worker",
            "-P", "prefork", "-c", "1", "-n", f"{name}@%h", "-l", "INFO",
            "--without-heartbeat", "--without-mingle", "--without-gossip",
        ]  # fmt: skip
        self._spawn(argv, log)
        _wait_for(lambda: "ready." in log.read_text(errors="replace"), 60, f"{name} ready")

    def start_beat(self) -> None:
        self._spawn([sys.executable, "-m", "tenantdb.cli", "beat"], self.logs / "beat.log")

    def _spawn(self, argv: list[str], log: Path) -> None:
        with log.open("wb") as out:
            self.procs.append(
                subprocess.Popen(argv, cwd=REPO, env=self.env, stdout=out, stderr=subprocess.STDOUT)
            )

    def stop(self) -> None:
        for proc in self.procs:
            proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.client.close()

    def started(self) -> list[int]:
        return [int(pid) for pid in self.client.lrange(self.keys["started"], 0, -1)]

    def completed(self) -> int:
        return int(self.client.get(self.keys["completed"]) or 0)

    def quiet(self) -> bool:
        """Nothing is queued, reserved, pending, locked or dirty: no further pass can start."""
        return not (
            self.client.llen(f"{self.prefix}reconcile")
            or self.client.hlen(f"{self.prefix}unacked")
            or self.queue.is_pending(KEY)
            or self.queue.is_locked(KEY)
            or self.client.zcard(self.queue.keys.dirty)
        )


@pytest.fixture
def stack(real_redis: redis.Redis, key_prefix: str, tmp_path: Path) -> Iterator[Stack]:
    running = Stack(key_prefix, tmp_path)
    try:
        yield running
    finally:
        running.stop()


def test_a_pass_killed_with_sigkill_is_run_again_to_completion(stack: Stack) -> None:
    stack.start_worker("w1")
    stack.start_worker("w2")
    stack.start_beat()
    stack.client.set(stack.keys["hold"], "1")
    assert stack.queue.enqueue(KEY)
    _wait_for(lambda: len(stack.started()) == 1, 30, "the first pass to start")
    os.kill(stack.started()[0], signal.SIGKILL)
    stack.client.delete(stack.keys["hold"])

    _wait_for(lambda: stack.completed() == 1, 60, "the order to be processed again")
    assert len(stack.started()) >= 2
    assert stack.client.get(stack.keys["overlaps"]) is None


def test_a_thousand_enqueues_during_a_pass_cost_at_most_two_passes(stack: Stack) -> None:
    stack.start_worker("w1")
    stack.start_worker("w2")
    stack.client.set(stack.keys["hold"], "1")
    assert stack.queue.enqueue(KEY)
    _wait_for(lambda: len(stack.started()) == 1, 30, "the first pass to start")

    published = sum(stack.queue.enqueue(KEY) for _ in range(1000))
    stack.client.delete(stack.keys["hold"])
    stack.client.rpush(stack.keys["go"], "1")

    _wait_for(lambda: stack.completed() >= 2 and stack.quiet(), 60, "the work queue to settle")
    assert len(stack.started()) == 2
    assert stack.completed() == 2
    assert published < 1000, "enqueue did not deduplicate"
    assert stack.client.get(stack.keys["overlaps"]) is None


def _wait_for(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {seconds} s waiting for {what}")
        threading.Event().wait(0.05)
