"""The bench's markdown report: which count a growth row names and divides by."""

from __future__ import annotations

from typing import Any

from bench.report import cell, render_markdown


def _summary(*runs: float) -> dict[str, Any]:
    ordered = sorted(runs)
    middle = ordered[len(ordered) // 2]
    return {"median": middle, "min": ordered[0], "max": ordered[-1], "runs": list(runs)}


def _size(footprint: int, burst_runs: int, beside: int | None = None) -> dict[str, Any]:
    figures: dict[str, Any] = {
        "converged_forced": {
            "kube_requests": _summary(8, 8, 8),
            "kube_by_request": {"get mysqldatabases": 1},
            "pass_s": _summary(0.02, 0.02, 0.02),
            "tenantdb_cpu_ms": _summary(11, 10, 12),
            "in_a_row": _summary(30, 30, 30),
        },
        "new_order": {
            "ready_p50_s": _summary(0.05, 0.05, 0.05),
            "kube_requests": _summary(14, 14, 14),
            "tenantdb_cpu_s": _summary(0.03, 0.03, 0.03),
        },
        "burst": {
            "orders": _summary(*[100] * burst_runs),
            "all_ready_s": _summary(*[4.0] * burst_runs),
            "orders_per_s": _summary(*[25.0] * burst_runs),
        },
        "footprint": {"redis_bytes": footprint, "watcher_rss_bytes": footprint},
    }
    if beside is not None:
        figures["beside"] = beside
    return figures


def _rows(growth: dict[str, Any]) -> list[str]:
    machine = {"cores": 2, "cpu": "-", "memory_gib": 1, "python": "-", "redis": "-", "mariadb": "-"}
    report = {"profile": "mysql-fleet", "commit": "0", "date": "-", "bench_seconds": 60}
    markdown = render_markdown({**report, "machine": machine, "mysql_growth": growth})
    return [line for line in markdown.splitlines() if line.startswith("| ") and "|---" not in line]


def test_a_row_names_the_orders_that_stood_beside_it_when_earlier_bursts_outgrew_its_size() -> None:
    # Three bursts of 100 at size 0 stay on the group: "100" is measured beside 300.
    growth = {"0": _size(0, 3), "100": _size(300_000, 3), "1000": _size(1_000_000, 3)}

    rows = _rows(growth)

    assert "vs beside 300" in rows[0]
    second, third = rows[2].split(" | "), rows[3].split(" | ")
    assert second[0] == "| 300"
    assert second[-2:] == ["1,000", "1,000 |"]  # 300,000 bytes over 300 orders, not over 100
    assert third[0] == "| 1,000"  # filled up to the size: the bursts before did not outgrow it


def test_a_recorded_count_wins_over_the_one_worked_out_from_the_bursts() -> None:
    growth = {"0": _size(0, 1), "100": _size(250_000, 1, beside=250)}

    second = _rows(growth)[2].split(" | ")

    assert second[0] == "| 250"
    assert second[-1] == "1,000 |"


def test_a_median_of_divisions_prints_as_the_round_number_it_is() -> None:
    assert cell(_summary(9.999999999999998, 9.999999999999998, 9.999999999999998)) == "10"
    assert cell(_summary(9.333333333333, 10.0, 10.666666666667)) == "10 (9.33-10.7)"
