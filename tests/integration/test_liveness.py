"""Real ``tenantdb beat`` and ``tenantdb worker`` processes whose Redis fails: each one's liveness
probe (``/livez``) says so, while ``/metrics`` goes on answering, and passes again after.

Each process runs against a ``redis-server`` of the test's own. Beat's Redis is frozen with
SIGSTOP (a Redis that hangs without resetting the connection): the sweep blocks on its socket.
The worker's is killed: the consumer loses its connection and stops going round its event loop
while it reconnects. The metrics server answers throughout, so ``/metrics`` alone would keep
either pod alive for ever.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.e2e.conftest import free_port
from tests.faults.conftest import RedisServer
from tests.support import stop_processes, wait_for

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
LIMIT = 4.0
"""The role's TENANTDB_*_LIVENESS_SECONDS for the test."""


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


@contextmanager
def _role(
    tmp_path: Path, key_prefix: str, argv: list[str], env: dict[str, str]
) -> Iterator[tuple[RedisServer, int, Path]]:
    """Run ``tenantdb <argv>`` on a Redis of its own with a metrics port; yield the Redis, the
    port and the process's log."""
    server = RedisServer(tmp_path / "redis")
    server.start()
    port = free_port()
    log = tmp_path / f"{argv[0]}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tenantdb.cli", *argv],
            cwd=REPO,
            env={
                **os.environ,
                "PYTHONPATH": str(REPO),
                "TENANTDB_REDIS_URL": server.url,
                "TENANTDB_KEY_PREFIX": key_prefix,
                "TENANTDB_METRICS_PORT": str(port),
                **env,
            },
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield server, port, log
    finally:
        if server.proc is not None:
            server.resume()
        stop_processes([proc])
        server.stop()


@pytest.mark.timeout(120)
def test_beat_fails_its_liveness_probe_while_its_sweeps_hang_and_recovers(
    tmp_path: Path, key_prefix: str
) -> None:
    env = {
        "TENANTDB_BEAT_LIVENESS_SECONDS": str(LIMIT),
        # Longer than the test waits: the frozen sweep hangs on its socket, it does not fail.
        "TENANTDB_REDIS_SOCKET_TIMEOUT_SECONDS": "60",
    }
    with _role(tmp_path, key_prefix, ["beat"], env) as (server, port, _):
        wait_for(
            lambda: _get(port, "/livez")[0] == 200 and _last_sweep(port) > 0, 30, "beat sweeping"
        )
        server.pause()
        frozen_at = _last_sweep(port)
        _, said = wait_for(
            lambda: (answer := _get(port, "/livez"))[0] == 503 and answer,
            LIMIT + 10,
            "the liveness probe to fail",
        )
        assert "completed no sweep for" in said
        assert _get(port, "/metrics")[0] == 200, "the metrics answer: alone they would not tell"
        assert _last_sweep(port) == frozen_at, "the last sweep's time stands still"

        server.resume()
        wait_for(lambda: _get(port, "/livez")[0] == 200, 30, "the probe to pass once beat sweeps")
        wait_for(lambda: _last_sweep(port) > frozen_at, 10, "a new sweep's time")


@pytest.mark.timeout(120)
def test_a_worker_fails_its_liveness_probe_while_its_broker_is_gone_and_recovers(
    tmp_path: Path, key_prefix: str
) -> None:
    argv = ["worker", "--", "-c", "1", "--without-mingle", "--without-gossip", "-n", "live@%h"]
    env = {"TENANTDB_WORKER_LIVENESS_SECONDS": str(LIMIT)}
    with _role(tmp_path, key_prefix, argv, env) as (server, port, log):
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
        assert _get(port, "/metrics")[0] == 200, "the metrics answer: alone they would not tell"

        server.start()
        wait_for(lambda: _get(port, "/livez")[0] == 200, 60, "the probe to pass once reconnected")
