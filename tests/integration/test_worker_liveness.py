"""A real ``tenantdb worker`` whose broker goes away: its liveness probe says so, and recovers.

The worker runs against a ``redis-server`` of the test's own, which the test kills: the consumer
loses its connection and stops going round its event loop while it reconnects. The metrics
server goes on answering, so ``/metrics`` alone would keep such a pod alive for ever.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import free_port, wait_for
from tests.faults.conftest import RedisServer
from tests.integration.test_beat_liveness import _get

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
LIMIT = 4.0
"""TENANTDB_WORKER_LIVENESS_SECONDS for the test."""


@pytest.fixture
def worker(tmp_path: Path, key_prefix: str) -> Iterator[tuple[RedisServer, int, Path]]:
    server = RedisServer(tmp_path / "redis")
    server.start()
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "TENANTDB_REDIS_URL": server.url,
        "TENANTDB_KEY_PREFIX": key_prefix,
        "TENANTDB_METRICS_PORT": str(port),
        "TENANTDB_WORKER_LIVENESS_SECONDS": str(LIMIT),
    }
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable, "-m", "tenantdb.cli", "worker", "--", "-c", "1",
                "--without-mingle", "--without-gossip", "-n", f"liveness-{port}@%h",
            ],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        yield server, port, log
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        server.stop()


@pytest.mark.timeout(120)
def test_a_worker_fails_its_liveness_probe_while_its_broker_is_gone_and_recovers(
    worker: tuple[RedisServer, int, Path],
) -> None:
    server, port, log = worker
    wait_for(lambda: "ready." in log.read_text(errors="replace"), 60, "the worker to be ready")
    wait_for(lambda: _get(port, "/livez")[0] == 200, 10, "the probe to pass")
    # An idle consumer goes round its loop too: past the limit, the probe still passes.
    time.sleep(LIMIT * 1.5)
    assert _get(port, "/livez")[0] == 200, "an idle worker is alive"

    server.kill()
    _, said = wait_for(
        lambda: (answer := _get(port, "/livez"))[0] == 503 and answer,
        LIMIT + 15,
        "the liveness probe to fail",
    )
    assert "has not gone round its event loop" in said
    assert _get(port, "/metrics")[0] == 200, "the metrics still answer: they alone would not tell"

    server.start()
    wait_for(lambda: _get(port, "/livez")[0] == 200, 60, "the probe to pass once reconnected")
