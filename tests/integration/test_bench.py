"""The bench harness keeps working: its smallest profile produces every figure of the report.

Runs `python -m bench --profile tiny` as `make bench` runs the full one: fresh platforms,
tenantdb's real watcher, worker and beat, orders through the official client. Speeds are never
asserted here; they live in docs/benchmarks.md. What is asserted is that every figure the report
promises is there and is a measurement (a pass was counted, requests were seen, CPU was used).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]

NEW_ORDER = (
    "ready_p50_s", "ready_p95_s", "passes", "entry_tasks", "busy_messages", "celery_tasks",
    "kube_requests", "openbao_requests", "tenantdb_cpu_s", "devstack_cpu_s", "platform_cpu_s",
)  # fmt: skip
CONVERGED = (
    "kube_requests", "kube_by_request", "openbao_requests", "openbao_by_request",
    "celery_tasks", "passes", "caused_another_pass", "tenantdb_cpu_s", "devstack_cpu_s",
)  # fmt: skip
COLD = ("all_ready_s", "ready_at_deadline", "passes", "entry_tasks", "kube_requests")


def _every_pass(by_request: dict[str, float]) -> dict[str, float]:
    """The requests of a converged pass made on every pass (per pass): the odd re-read of a
    shared object whose version moved (ESO writes its SecretStore's status now and then) is
    no question the pass asks because of the orders beside it."""
    return {k: v for k, v in by_request.items() if v >= 1}


def _median(figure: Any) -> float:
    assert isinstance(figure, dict), figure
    return float(figure["median"])


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_tiny_bench_produces_every_figure(tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--profile", "tiny", "--out-dir", str(tmp_path),
         "--doc", str(doc)],
        cwd=REPO, capture_output=True, text=True, timeout=580, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (result,) = tmp_path.glob("*-tiny.json")
    report = json.loads(result.read_text())

    assert set(report["machine"]) >= {"cores", "memory_gib", "python", "redis", "mariadb"}
    new = report["warm"]["new_order"]
    assert set(new) >= set(NEW_ORDER)
    assert _median(new["passes"]) >= 1
    assert _median(new["kube_requests"]) > 0
    assert _median(new["openbao_requests"]) > 0
    assert _median(new["tenantdb_cpu_s"]) > 0
    assert _median(new["devstack_cpu_s"]) > 0
    # The platform's CPU by part: the API servers and OpenBao served the new order.
    assert {"kube-apiserver", "OpenBao"} <= set(new["platform_cpu_s"]), new["platform_cpu_s"]
    for name in ("converged_forced", "converged_refresh"):
        converged = report["warm"][name]
        assert set(converged) >= set(CONVERGED), name
        assert _median(converged["passes"]) >= 1, name
    forced, refresh = report["warm"]["converged_forced"], report["warm"]["converged_refresh"]
    assert forced["kube_by_request"], "a forced pass reads the order and its children"
    # A refresh nothing touched since a converged pass trusts the watches: it reads less.
    assert _median(refresh["kube_requests"]) < _median(forced["kube_requests"])
    mysql = report["warm"]["mysql_new_order"]
    assert set(mysql) >= {"ready_p50_s", "passes", "kube_requests", "sql_requests"}
    assert _median(mysql["passes"]) >= 1
    assert _median(mysql["sql_requests"]) > 0, "a new MysqlDatabase is applied with SQL"
    mysql_converged = report["warm"]["mysql_converged_forced"]
    assert _median(mysql_converged["passes"]) >= 1
    assert mysql_converged["kube_by_request"]
    assert "sql_by_operation" in mysql_converged
    for workers in (1, 2):
        cold = report["cold"][f"cold_2_workers_{workers}"]
        assert set(cold) >= set(COLD)
        assert _median(cold["ready_at_deadline"]) == 2
        assert _median(cold["all_ready_s"]) > 0
    assert report["cold"]["cold_2_speedup"] > 0
    assert _median(report["warm"]["storm_one_order"]["passes"]) >= 1
    assert _median(report["cold"]["storm_many_orders"]["passes_per_order"]) > 0
    # The cold run's orders, refreshed whole at a fleet's pace: every pass a converged one.
    fleet = report["cold"]["fleet_refresh"]
    assert _median(fleet["passes"]) >= 2, "each order of the fleet had its refresh pass"
    assert _median(fleet["writes"]) == 0
    assert _median(fleet["quiet_share"]) > 0, "the watches vouched for no refresh"
    assert _median(fleet["full_kube_requests_per_pass"]) > 0
    assert _median(fleet["kube_requests_per_pass"]) < _median(fleet["full_kube_requests_per_pass"])
    assert _median(fleet["fleet_tenantdb_cores"]) > 0
    assert _median(fleet["redis_bytes_per_order"]) > 0
    assert "## Steady state: a Ready fleet on the 10-minute refresh" in doc.read_text()
    for layout in ("burst", "random"):
        assert _median(report["refresh"][layout]["peak_to_mean"]) >= 1
        assert _median(report["refresh"][layout]["redis_bytes_per_order"]) > 0
    dead = report["dead_group"]
    assert _median(dead["healthy_ready_p50_unloaded_s"]) > 0
    assert _median(dead["healthy_ready_p50_loaded_s"]) > 0
    assert _median(dead["connect_wait_s"]) > 0, "a connect to the dead group was timed"
    assert _median(dead["dead_pending"]) == 1, "every dead order waits Pending"
    assert "## A dead group beside a healthy one" in doc.read_text()

    # Beside more Database CRs, a converged pass asks the same questions and lists nothing.
    growth = report["growth"]
    assert not [size for size, figures in growth.items() if "failed" in figures], growth
    alone = _every_pass(growth["0"]["converged_forced"]["kube_by_request"])
    assert alone, "no request of a converged pass counted"
    assert not [r for r in alone if r.startswith("list ")], alone
    for size, figures in growth.items():
        assert _every_pass(figures["converged_forced"]["kube_by_request"]) == alone, size
        assert _median(figures["converged_forced"]["pass_s"]) > 0, size
        assert _median(figures["new_order"]["ready_p50_s"]) > 0, size
    assert "## Growth: beside more and more Database CRs" in doc.read_text()
    # Beside more MysqlDatabases on its group, the same holds for the other kind.
    mysql_growth = dict(report["mysql_growth"])
    _check_mysql_steady(mysql_growth.pop("steady"), doc.read_text())
    assert not [size for size, figures in mysql_growth.items() if "failed" in figures]
    alone = _every_pass(mysql_growth["0"]["converged_forced"]["kube_by_request"])
    assert alone, "no request of a converged MysqlDatabase pass counted"
    for size, figures in mysql_growth.items():
        by_request = figures["converged_forced"]["kube_by_request"]
        assert _every_pass(by_request) == alone, size
        assert not [r for r in by_request if r.startswith("list ")], (size, by_request)
    assert "## Growth: MysqlDatabase beside more and more orders on its group" in doc.read_text()
    _check_mysql_bursts(mysql_growth, doc.read_text())
    # What the installation holds beside the orders: Redis keys and the watcher's memory.
    for growth_of in (growth, mysql_growth):
        for figures in growth_of.values():
            assert figures["footprint"]["redis_bytes"] > 0
            assert figures["footprint"]["watcher_rss_bytes"] > 0

    _check_fleet(report["fleet"], doc.read_text())

    markdown = doc.read_text()
    for heading in (
        "## A new order, warm workers", "## A converged pass",
        "## MysqlDatabase: a new order, and a converged pass", "## Cold: many new orders at once",
        "## Storms", "## Refresh smoothness",
    ):  # fmt: skip
        assert heading in markdown
    assert done.stdout.strip() == markdown.strip()


def _check_mysql_bursts(growth: dict[str, Any], markdown: str) -> None:
    """A burst of new orders at once beside each size: all Ready, and its throughput reported."""
    for size, figures in growth.items():
        burst = figures["burst"]
        assert _median(burst["orders"]) == 2, size
        assert _median(burst["all_ready_s"]) > 0, size
        assert _median(burst["passes"]) >= 1, size
    assert "| 2 at once: all Ready (s) | 2 at once: orders/s | vs beside 0 |" in markdown


def _check_mysql_steady(steady: dict[str, Any], markdown: str) -> None:
    """The MysqlDatabases of the growth run, refreshed whole once their drift checks are due:
    every pass is quiet, asks Kubernetes nothing and looks at the primary."""
    assert "failed" not in steady, steady.get("failed")
    assert steady["passes"] >= steady["orders"] > 0, "each order had its refresh pass"
    assert steady["writes"] == 0
    assert steady["quiet_share"] == 1.0, "a refresh nothing touched read in full"
    # Nothing but the admin login, read once per worker process for its first quiet check;
    # a full pass makes nine requests.
    assert set(steady["kube_by_verb_per_pass"]) <= {"get"}, steady["kube_by_verb_per_pass"]
    assert steady["kube_requests_per_pass"] < 1.0, steady["kube_by_verb_per_pass"]
    assert steady["sql_requests_per_pass"] > 0, "no refresh looked at the primary"
    assert "### Their steady state: the MysqlDatabases on the 10-minute refresh" in markdown


def _check_fleet(fleet: dict[str, Any], markdown: str) -> None:
    """A fleet of real orders, built through tenantdb step by step: each step's orders all went
    Ready beside the last ones, a converged pass beside the grown fleet asks what it asked
    beside none, and the whole fleet's refresh writes nothing."""
    assert "failed" not in fleet, fleet.get("failed")
    assert [step["orders"] for step in fleet["steps"]] == [2, 2]
    assert fleet["steps"][1]["existing"] > fleet["steps"][0]["existing"]
    assert all(step["orders_per_s"] > 0 for step in fleet["steps"])
    points = fleet["beside"]
    assert list(points) == ["0", "2", "4"]
    existing = [point["existing"] for point in points.values()]
    assert existing[0] == 0
    assert existing == sorted(set(existing)), existing
    beside_none = _every_pass(points["0"]["converged_forced"]["kube_by_request"])
    assert beside_none
    assert not [r for r in beside_none if r.startswith("list ")], beside_none
    for size, point in points.items():
        assert _every_pass(point["converged_forced"]["kube_by_request"]) == beside_none, size
        assert point["burst_orders_per_s"] > 0, size
    steady = fleet["steady"]
    assert steady["orders"] >= existing[-1]
    assert steady["passes"] >= steady["orders"], "each order had its refresh pass"
    assert steady["writes"] == 0
    assert "## A fleet of 4 Ready orders" in markdown
