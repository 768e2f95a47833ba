"""A real ``tenantdb beat`` process whose Redis stops answering: its liveness probe says so.

Beat runs against a ``redis-server`` of the test's own, which the test freezes with SIGSTOP (a
Redis that hangs without resetting the connection). The sweep then blocks on its socket; the
metrics server goes on answering, so ``/metrics`` alone would keep the pod alive for ever.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import free_port, wait_for
from tests.faults.conftest import RedisServer

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
LIMIT = 4.0
"""TENANTDB_BEAT_LIVENESS_SECONDS for the test."""


def _get(port: int, path: str) -> tuple[int, str]:
    """The status and body of a GET; status 0 while nothing listens yet."""
    url = f"http://127.0.0.1:{port}{path}"
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()
    except urllib.error.URLError:
        return 0, ""


def _last_sweep(port: int) -> float:
    _, text = _get(port, "/metrics")
    found = re.search(r"^tenantdb_beat_last_sweep_timestamp_seconds (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


@pytest.fixture
def beat(tmp_path: Path, key_prefix: str) -> Iterator[tuple[RedisServer, int]]:
    server = RedisServer(tmp_path / "redis")
    server.start()
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "TENANTDB_REDIS_URL": server.url,
        "TENANTDB_KEY_PREFIX": key_prefix,
        "TENANTDB_METRICS_PORT": str(port),
        "TENANTDB_BEAT_LIVENESS_SECONDS": str(LIMIT),
        # Longer than the test waits: the frozen sweep hangs on its socket, it does not fail.
        "TENANTDB_REDIS_SOCKET_TIMEOUT_SECONDS": "60",
    }
    with (tmp_path / "beat.log").open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tenantdb.cli", "beat"],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        yield server, port
    finally:
        server.resume()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        server.stop()


@pytest.mark.timeout(120)
def test_beat_fails_its_liveness_probe_while_its_sweeps_hang_and_recovers(
    beat: tuple[RedisServer, int],
) -> None:
    server, port = beat
    wait_for(lambda: _get(port, "/livez")[0] == 200 and _last_sweep(port) > 0, 30, "beat sweeping")

    server.pause()
    frozen_at = _last_sweep(port)
    _, said = wait_for(
        lambda: (answer := _get(port, "/livez"))[0] == 503 and answer,
        LIMIT + 10,
        "the liveness probe to fail",
    )
    assert "completed no sweep for" in said
    assert _get(port, "/metrics")[0] == 200, "the metrics still answer: they alone would not tell"
    assert _last_sweep(port) == frozen_at, "the last sweep's time stands still"

    server.resume()
    wait_for(lambda: _get(port, "/livez")[0] == 200, 30, "the probe to pass once beat sweeps")
    wait_for(lambda: _last_sweep(port) > frozen_at, 10, "a new sweep's time")
