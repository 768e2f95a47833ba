"""`python -m bench.server_accounts` keeps working: it applies new orders as a worker plans them
on a real mariadbd beside a filled fleet, and reports every part of each order's apply.

Speeds are never asserted here; they live in docs/benchmarks-mysql-fleet.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PARTS = ("look_ms_p50", "create_database_ms_p50", "create_user_ms_p50", "grant_all_ms_p50")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_server_bench_measures_each_part_of_a_new_order(tmp_path: Path) -> None:
    out = tmp_path / "accounts.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.server_accounts", "--sizes", "0,5", "--orders", "6",
         "--runs", "1", "--json", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(out.read_text())
    assert [(r["accounts"], r["clients"]) for r in rows] == [(0, 1), (0, 2), (5, 1), (5, 2)]
    for row in rows:
        assert row["orders"] == 6
        assert all(row[part] > 0 for part in PARTS), row
        assert row["writes_ms_p50"] >= row["create_user_ms_p50"]
        assert row["orders_per_s"] > 0
    table = done.stdout.splitlines()
    assert table[0].startswith("| accounts | connections | look | CREATE DATABASE | CREATE USER")
    assert len(table) == 2 + len(rows)
