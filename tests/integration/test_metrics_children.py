"""A worker's ``/metrics`` under the prefork pool answers while a child is starting.

Each prefork child writes its samples to a file of its own in ``PROMETHEUS_MULTIPROC_DIR``; a
child creates that file empty and sizes it only afterwards, and a child killed in between
leaves it empty for good. The scrape must still answer with every other child's samples.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request
from pathlib import Path

from tests.e2e.conftest import free_port
from tests.support import stop_processes, wait_for

REPO = Path(__file__).resolve().parents[2]

_SERVER = textwrap.dedent(
    """
    import sys, time
    from tenantdb.adapters import metrics

    metrics.PASSES.labels(kind="probe", path="full").inc(3)
    metrics.serve(int(sys.argv[1]))
    time.sleep(120)
    """
)


def _scrape(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, ""
    except urllib.error.URLError:
        return 0, ""


def test_a_child_samples_file_without_samples_yet_does_not_fail_the_scrape(
    tmp_path: Path,
) -> None:
    samples = tmp_path / "samples"
    samples.mkdir()
    # The file of a child that was killed between creating and sizing it.
    (samples / "counter_4194301.db").touch()
    port = free_port()
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(samples), "PYTHONPATH": str(REPO)}
    server = subprocess.Popen([sys.executable, "-c", _SERVER, str(port)], env=env, cwd=REPO)
    try:
        status, text = wait_for(lambda: (got := _scrape(port))[0] and got, 20, "the scrape")
        assert status == 200
        assert 'tenantdb_reconcile_passes_total{kind="probe",path="full"} 3.0' in text
    finally:
        stop_processes([server])
