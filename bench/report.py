"""The bench's markdown report: one table per scenario, from the JSON `python -m bench` writes.

A figure shows its median over the runs, with min and max beside it when the runs differ. A
scenario whose devstack CPU is more than half of tenantdb's is marked as bound by the platform:
there the platform, not tenantdb, sets the pace on this machine.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

Figures = dict[str, Any]

STAND_IN_BOUND = 0.5
"""Devstack CPU above this share of tenantdb's CPU marks a figure as bound by the platform."""


def _num(value: float) -> str:
    value = round(value, 9)  # a median of divisions: 9.999999999999998 is 10
    if value == int(value):
        return f"{int(value):,}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}" if value != int(value) else f"{int(value)}"


def cell(figure: Any) -> str:
    """One figure as a table cell: `median (min-max)`, `yes`/`no`, or `-`."""
    if figure is None:
        return "-"
    if isinstance(figure, dict) and "median" in figure:
        text = _num(figure["median"])
        if figure["min"] != figure["max"]:
            text += f" ({_num(figure['min'])}-{_num(figure['max'])})"
        return text
    if isinstance(figure, dict) and "any" in figure:
        return "yes" if figure["any"] else "no"
    if isinstance(figure, bool):
        return "yes" if figure else "no"
    if isinstance(figure, int | float):
        return _num(figure)
    return str(figure)


def _cpu_ms(forced: Figures) -> str:
    """A converged pass's tenantdb CPU in milliseconds (reports before ``tenantdb_cpu_ms``
    carry it in seconds, one pass per run)."""
    figure = forced.get("tenantdb_cpu_ms")
    if figure is not None:
        return cell(figure)
    seconds = forced.get("tenantdb_cpu_s")
    if isinstance(seconds, dict) and "median" in seconds:
        return cell({k: 1000 * seconds[k] for k in ("median", "min", "max")})
    return cell(1000 * seconds if isinstance(seconds, int | float) else None)


def _median(figures: Figures, name: str) -> float:
    figure = figures.get(name)
    if isinstance(figure, dict) and "median" in figure:
        return float(figure["median"])
    if isinstance(figure, int | float) and not isinstance(figure, bool):
        return float(figure)  # one run's figure
    return 0.0


def bound_note(
    figures: Figures, tenantdb: str = "tenantdb_cpu_s", devstack: str = "devstack_cpu_s"
) -> str:
    """`platform` when the devstack's CPU was more than half of tenantdb's, naming its dearest
    parts (their CPU seconds), else `tenantdb`."""
    ours, theirs = _median(figures, tenantdb), _median(figures, devstack)
    if not ours or theirs / ours <= STAND_IN_BOUND:
        return "tenantdb"
    parts = figures.get("platform_cpu_s")
    if not isinstance(parts, dict) or not parts:
        return "platform"
    top = list(parts.items())[:2]
    return "platform (" + ", ".join(f"{name} {seconds:.3g} s" for name, seconds in top) + ")"


_NEW_ORDER_ROWS = (
    ("create-to-Ready p50 (s)", "ready_p50_s"),
    ("create-to-Ready p95 (s)", "ready_p95_s"),
    ("passes", "passes"),
    ("entry tasks", "entry_tasks"),
    ("Busy messages", "busy_messages"),
    ("Celery tasks", "celery_tasks"),
    ("Kubernetes requests (watches apart)", "kube_requests"),
    ("OpenBao requests", "openbao_requests"),
    ("tenantdb CPU (s)", "tenantdb_cpu_s"),
    ("devstack CPU (s)", "devstack_cpu_s"),
)

_CONVERGED_ROWS = (
    ("Kubernetes requests (watches apart)", "kube_requests"),
    ("OpenBao requests", "openbao_requests"),
    ("Celery tasks", "celery_tasks"),
    ("passes", "passes"),
    ("caused another pass", "caused_another_pass"),
    ("tenantdb CPU (s)", "tenantdb_cpu_s"),
    ("devstack CPU (s)", "devstack_cpu_s"),
)


def _breakdown(title: str, counts: dict[str, int]) -> list[str]:
    rows = ", ".join(f"{name} x{n}" for name, n in counts.items()) or "none"
    return [f"- {title}: {rows}"]


def _new_order(warm: Figures) -> list[str]:
    figures = warm["new_order"]
    lines = [
        "## A new order, warm workers",
        "",
        "Orders created one after another; each is Ready and the stack idle before the next.",
        f"Per order. Bound by: {bound_note(figures)}.",
        "",
        "| figure | median (min-max) |",
        "|---|---|",
    ]
    lines += [f"| {label} | {cell(figures.get(name))} |" for label, name in _NEW_ORDER_ROWS]
    return [*lines, ""]


def _side_by_side(
    heading: str,
    intro: list[str],
    columns: tuple[str, str],
    figures: tuple[Figures, Figures],
    rows: tuple[tuple[str, str], ...],
) -> list[str]:
    """A section whose table sets two scenarios' figures side by side, row by row."""
    left, right = figures
    lines = [
        heading,
        "",
        *intro,
        f"Bound by: {bound_note(left)} / {bound_note(right)}.",
        "",
        f"| figure | {columns[0]} | {columns[1]} |",
        "|---|---|---|",
    ]
    lines += [
        f"| {label} | {cell(left.get(name))} | {cell(right.get(name))} |" for label, name in rows
    ]
    return lines


def _converged(warm: Figures) -> list[str]:
    forced, refresh = warm["converged_forced"], warm["converged_refresh"]
    lines = _side_by_side(
        "## A converged pass",
        [
            "A forced re-reconcile of a Ready order (`tenantdb reconcile KEY --force`), and one",
            "periodic refresh of a Ready order on the target cluster `edge-1`, swept by beat.",
        ],
        ("forced re-reconcile", "target-cluster refresh"),
        (forced, refresh),
        _CONVERGED_ROWS,
    )
    lines += ["", "Requests of the median run:", ""]
    lines += _breakdown("forced, Kubernetes", forced.get("kube_by_request") or {})
    lines += _breakdown("forced, OpenBao", forced.get("openbao_by_request") or {})
    lines += _breakdown("refresh, Kubernetes", refresh.get("kube_by_request") or {})
    lines += _breakdown("refresh, OpenBao", refresh.get("openbao_by_request") or {})
    return [*lines, ""]


_MYSQL_ROWS = (
    ("create-to-Ready p50 (s)", "ready_p50_s"),
    ("create-to-Ready p95 (s)", "ready_p95_s"),
    ("passes", "passes"),
    ("Celery tasks", "celery_tasks"),
    ("Kubernetes requests (watches apart)", "kube_requests"),
    ("SQL requests", "sql_requests"),
    ("tenantdb CPU (s)", "tenantdb_cpu_s"),
    ("devstack CPU (s)", "devstack_cpu_s"),
)


def _mysql(warm: Figures) -> list[str]:
    if "mysql_new_order" not in warm:  # a report from before the kind was measured
        return []
    new, forced = warm["mysql_new_order"], warm["mysql_converged_forced"]
    lines = _side_by_side(
        "## MysqlDatabase: a new order, and a converged pass",
        [
            "Orders on the devstack's MySQL failover group (two MariaDB servers, dc1 the primary),",
            "each with its owner Secret, created one after another; each is Ready and the stack"
            " idle",
            "before the next. Then a forced re-reconcile of a Ready order. SQL requests are",
            "tenantdb's connects, queries and statements to the group's servers.",
        ],
        ("new order (per order)", "converged pass (forced)"),
        (new, forced),
        _MYSQL_ROWS,
    )
    lines += ["", "Requests of the median converged run:", ""]
    lines += _breakdown("Kubernetes", forced.get("kube_by_request") or {})
    lines += _breakdown("SQL", forced.get("sql_by_operation") or {})
    return [*lines, ""]


def _dead_group(dead: Figures | None) -> list[str]:
    if not dead:  # a report from before the scenario existed
        return []
    rows = (
        ("healthy new order, create-to-Ready p50, unloaded (s)", "healthy_ready_p50_unloaded_s"),
        ("the same while the dead group's orders wait (s)", "healthy_ready_p50_loaded_s"),
        ("loaded / unloaded", "healthy_ready_p50_ratio"),
        ("seconds the worker's processes spent connecting, loaded", "connect_wait_s"),
        ("the loaded window (s)", "window_s"),
        ("connecting / window (bound on any one process's share)", "connect_wait_share"),
        ("passes per minute in the window, both groups", "passes_per_minute"),
        ("dead orders Pending PrimaryUnavailable (share)", "dead_pending"),
    )
    lines = [
        "## A dead group beside a healthy one",
        "",
        "The devstack's group `dead` has two sites that accept TCP and never answer. Healthy",
        "MysqlDatabase orders on group `main` are created one after another, first alone, then",
        f"one every 2 s for a window that starts when {dead['orders']} orders on `dead` are"
        " created at once, with 2 worker",
        "processes and every circuit closed at the start. A connect to a dead site costs the",
        "connect timeout (5 s) and opens the site's circuit for every worker, for 60 s and then",
        "twice as long each time; one pass at a time dials a site, and an order behind an open",
        "circuit comes back when the circuit closes.",
        "",
        "| figure | value |",
        "|---|---|",
    ]
    lines += [f"| {label} | {cell(dead.get(key))} |" for label, key in rows]
    return [*lines, ""]


_GROWTH_INTRO = {
    "Database CRs": [
        "## Growth: beside more and more Database CRs",
        "",
        "One stack with 2 worker processes; Database CRs that no order owns are added to",
        "Keystone's namespace, each carrying a schema of its own on the shared MariaDB, as other",
        "orders' would. At each size: forced re-reconciles of one Ready order, {in_a_row} in a",
        "row with beat paused, their figures per pass (`pass` is from the enqueue until the pass",
        "recorded its end), then new orders created one after another.",
    ],
    "MysqlDatabases": [
        "## Growth: MysqlDatabase beside more and more orders on its group",
        "",
        "One stack with 2 worker processes; MysqlDatabase orders, each with a schema and an owner",
        "of its own, are added on the same failover group and left Ready. At each size: forced",
        "re-reconciles of one Ready MysqlDatabase, {in_a_row} in a row with beat paused, their",
        "figures per pass, then new ones created one after another.",
    ],
}


def _in_a_row(points: Iterable[Figures], name: str) -> str:
    """How many forced passes each converged window held (10 in reports from before the
    figure was recorded)."""
    for point in points:
        found = (point.get(name) or {}).get("in_a_row")
        if found is not None:
            return cell(found)
    return "10"


def _runs(bursts: Iterable[Figures]) -> str:
    """How many bursts each size's figures are the median of."""
    for burst in bursts:
        runs = burst.get("all_ready_s")
        if isinstance(runs, dict) and len(runs.get("runs") or ()) > 1:
            return f"the median of {len(runs['runs'])} bursts, one after another"
    return "one run"


def _beside(sizes: Figures) -> dict[str, int]:
    """How many stood beside at each size of a growth run. A size's bursts stay: when they
    outgrow the next size, that size is measured beside them all. Reports from before the
    count was recorded (``beside``) have it worked out from the bursts."""
    out: dict[str, int] = {}
    carried = 0
    for size, figures in sizes.items():
        count = int(figures.get("beside", max(int(size), carried)))
        out[size] = count
        burst: Figures = figures.get("burst") or {}
        orders: Any = burst.get("orders", 0)
        if isinstance(orders, dict):
            added = int(orders["median"]) * len(orders.get("runs") or (1,))
        else:
            added = int(orders)
        carried = count + added
    return out


def _growth(growth: Figures | None, beside: str = "Database CRs") -> list[str]:
    if not growth:  # a report from before the scenario existed
        return []
    sizes = {k: v for k, v in growth.items() if k.isdigit()}
    counts = _beside(sizes)
    bursts = {k: v["burst"] for k, v in sizes.items() if "burst" in v}
    burst_size = next((cell(b["orders"]) for b in bursts.values()), "")
    # The goal compares with the throughput beside 100 orders, when the run has that size.
    against = "100" if "100" in bursts else next(iter(bursts), "")
    burst_head = (
        f" | {burst_size} at once: all Ready (s) | {burst_size} at once: orders/s"
        f" | vs beside {_num(float(counts.get(against, 0)))}"
        if bursts
        else ""
    )
    in_a_row = _in_a_row(sizes.values(), "converged_forced")
    lines = [
        *(line.replace("{in_a_row}", in_a_row) for line in _GROWTH_INTRO[beside]),
        "",
        f"| {beside} beside | converged: Kubernetes requests | converged: LISTs"
        " | converged: pass (s) | converged: tenantdb CPU per pass (ms)"
        " | new order: create-to-Ready p50 (s) | new order: Kubernetes requests"
        " | new order: tenantdb CPU (s)"
        f"{burst_head} | Redis per order (B) | watcher per order (B) |",
        "|---|---|---|---|---|---|---|---|---|---|" + ("---|---|---|" if bursts else ""),
    ]
    base = (sizes.get("0") or {}).get("footprint")
    first = _median(bursts.get(against) or {}, "orders_per_s")
    for size, figures in sizes.items():
        if "failed" in figures:
            lines.append(f"| {_num(float(size))} | did not finish: {figures['failed']} |")
            continue
        forced, new = figures["converged_forced"], figures["new_order"]
        by_request = forced.get("kube_by_request") or {}
        lists = sum(n for request, n in by_request.items() if request.startswith("list "))
        burst = ""
        if bursts:
            got = figures.get("burst") or {}
            rate = got.get("orders_per_s")
            ratio = _median(got, "orders_per_s") / first if rate and first else None
            burst = (
                f" | {cell(got.get('all_ready_s'))} | {cell(rate)} | {cell(ratio)}"
                if got
                else " | - | - | -"
            )
        lines.append(
            f"| {_num(float(counts[size]))} | {cell(forced['kube_requests'])} | {lists}"
            f" | {cell(forced['pass_s'])} | {_cpu_ms(forced)}"
            f" | {cell(new['ready_p50_s'])} | {cell(new['kube_requests'])}"
            f" | {cell(new['tenantdb_cpu_s'])}{burst}"
            f" | {_per_order(figures, base, counts[size], 'redis_bytes')}"
            f" | {_per_order(figures, base, counts[size], 'watcher_rss_bytes')} |"
        )
    lines += [
        "",
        "Per order: what the installation holds beside that many orders, less what it holds",
        "beside none, divided by their number (the broker's queues and every tenantdb key in",
        "Redis; the watcher's resident memory, which the allocator returns in coarse steps).",
    ]
    if bursts:
        lines += [
            "",
            f"{burst_size} at once: that many new orders, each with an owner Secret of its own,",
            "created at once beside the Ready ones on the group, until all are Ready (2 worker",
            f"processes; {_runs(bursts.values())}); they stay, as Ready peers of the next size.",
        ]
    return [*lines, ""]


def _mysql_steady(growth: Figures | None) -> list[str]:
    """The MysqlDatabases of the growth run, refreshed whole as a steady state."""
    steady = (growth or {}).get("steady")
    if not steady:
        return []
    title = "### Their steady state: the MysqlDatabases on the 10-minute refresh"
    if "failed" in steady:
        return [title, "", f"Did not finish: {steady['failed']}", ""]
    whose = f"The {cell(steady['orders'])} MysqlDatabases of the growth run, on one group"
    return [
        title,
        "",
        *_steady(steady, whose),
        "Before the measured round every order's drift check is made due, as it is on each",
        "10-minute refresh: each measured pass looks at the primary with one read-only query"
        f" ({cell(steady.get('sql_requests_per_pass', 0.0))} SQL requests per pass).",
        "",
    ]


def _per_order(figures: Figures, base: Figures | None, count: int, name: str) -> str:
    mine = figures.get("footprint")
    if not mine or not base or count <= 0:
        return "-"
    return _num((mine[name] - base[name]) / count)


def _cold(cold: Figures) -> list[str]:
    lines = [
        "## Cold: many new orders at once",
        "",
        "Fresh stack; the orders are created by 8 client threads; time from the first create",
        "until the last order is seen Ready. Per-order figures divide the run's totals.",
        "",
        "| orders | worker processes | all Ready (s) | Ready at deadline | passes | entry tasks"
        " | Kubernetes requests | tenantdb CPU (s) | devstack CPU (s) | bound by |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, figures in cold.items():
        if not name.startswith("cold_") or "_workers_" not in name:
            continue
        size, workers = name.removeprefix("cold_").split("_workers_")
        lines.append(
            f"| {size} | {workers} | {cell(figures['all_ready_s'])}"
            f" | {cell(figures['ready_at_deadline'])} | {cell(figures['passes'])}"
            f" | {cell(figures['entry_tasks'])} | {cell(figures['kube_requests'])}"
            f" | {cell(figures['tenantdb_cpu_s'])} | {cell(figures['devstack_cpu_s'])}"
            f" | {bound_note(figures)} |"
        )
    lines.append("")
    for name, ratio in cold.items():
        if name.endswith("_speedup"):
            size = name.removeprefix("cold_").removesuffix("_speedup")
            lines.append(f"- {size} orders: 1 worker process / 2 worker processes = {ratio:.2f}")
    return [*lines, ""]


def _storms(warm: Figures, cold: Figures) -> list[str]:
    one = warm["storm_one_order"]
    lines = [
        "## Storms",
        "",
        "| storm | passes | entry tasks | Busy messages | tenantdb CPU (s) | devstack CPU (s) |",
        "|---|---|---|---|---|---|",
        f"| {cell(one['updates'])} annotation edits of one order | {cell(one['passes'])}"
        f" | {cell(one['entry_tasks'])} | {cell(one['busy_messages'])}"
        f" | {cell(one['tenantdb_cpu_s'])} | {cell(one['devstack_cpu_s'])} |",
    ]
    many = cold.get("storm_many_orders")
    if many:
        lines.append(
            f"| one edit on each of {cell(many['orders'])} orders (per order)"
            f" | {cell(many['passes_per_order'])} | {cell(many['entry_tasks_per_order'])}"
            f" | {cell(many['busy_messages'])} | {cell(many['tenantdb_cpu_s_per_order'])}"
            f" | {cell(many['devstack_cpu_s_per_order'])} |"
        )
    return [*lines, ""]


FLEET_GOALS = {
    "fleet_kube_requests_per_s": 5.0,
    "fleet_tenantdb_cores": 0.3,
    "redis_bytes_per_order": 4_000.0,
    "watcher_bytes_per_order": 20_000.0,
}
"""The steady state a fleet of 10,000 Ready orders should stay within (watches apart)."""


def _fleet(cold: Figures) -> list[str]:
    """A Ready fleet refreshed whole at the pace of 10,000 orders on the 10-minute refresh."""
    fleet = cold.get("fleet_refresh")
    if not fleet:
        return []
    return [
        "## Steady state: a Ready fleet on the 10-minute refresh",
        "",
        *_steady(fleet, f"The {cell(fleet['orders'])} orders of the cold run"),
    ]


def _steady(fleet: Figures, whose: str) -> list[str]:
    """The steady-state table of ``scenarios.refresh_all``'s figures; ``whose`` names the
    orders refreshed."""
    size, total = cell(fleet["orders"]), cell(fleet["fleet"])
    verbs = fleet["kube_by_verb_per_pass"]
    lines = [
        f"{whose}, Ready and settled, all made due for their refresh"
        " at once; beat sweeps them at the rate its refresh cycle allows, set so that it offers"
        f" passes at the rate {total} orders get on the 10-minute refresh"
        f" ({cell(fleet['fleet_passes_per_s'])} passes/s), twice: every basis of quiet"
        " refreshes is forgotten first, so each order's first refresh reads in full and leaves"
        " a new one, and the second round is measured. Every pass is a converged one: the run"
        " fails if one writes or an order loses its Ready. The fleet's rates are the cost of one"
        " measured pass times that rate, except for the passes that still read each order in"
        " full once"
        f" a full-refresh period ({cell(fleet['fleet_full_passes_per_s'])} passes/s), which"
        " cost what a pass of the first round did.",
        "",
        "| figure | measured | goal |",
        "|---|---|---|",
        f"| passes/s the workers kept (offered: {cell(fleet['fleet_passes_per_s'])})"
        f" | {cell(fleet['passes_per_s'])} | - |",
        f"| quiet passes (share) | {cell(fleet.get('quiet_share', 0.0))} | - |",
        f"| Kubernetes requests per pass | {cell(fleet['kube_requests_per_pass'])} | - |",
        *(f"| of which {verb} | {cell(n)} | - |" for verb, n in verbs.items()),
        f"| OpenBao requests per pass | {cell(fleet['openbao_requests_per_pass'])} | - |",
        "| Kubernetes requests per full pass (first round)"
        f" | {cell(fleet.get('full_kube_requests_per_pass', 0.0))} | - |",
        f"| tenantdb CPU per pass (s) | {cell(fleet['tenantdb_cpu_s_per_pass'])} | - |",
    ]
    rows = (
        (f"{total} orders: Kubernetes requests/s", "fleet_kube_requests_per_s"),
        (f"{total} orders: LISTs/s", "fleet_lists_per_s"),
        (f"{total} orders: tenantdb CPU (cores)", "fleet_tenantdb_cores"),
        (f"Redis per Ready order (B), beside {size}", "redis_bytes_per_order"),
        (f"watcher per Ready order (B), beside {size}", "watcher_bytes_per_order"),
    )
    for label, key in rows:
        goal = FLEET_GOALS.get(key)
        lines.append(f"| {label} | {cell(fleet[key])} | {'-' if goal is None else cell(goal)} |")
    return [*lines, ""]


def _fleet_build(fleet: Figures | None) -> list[str]:
    """A fleet of real orders built through tenantdb: each step's throughput, the cost of a
    pass and of new orders beside it, and its steady state."""
    if not fleet:
        return []
    size, batch, burst = (cell(fleet[k]) for k in ("size", "batch", "burst"))
    lines = [
        f"## A fleet of {size} Ready orders",
        "",
        f"One stack with 2 worker processes builds a fleet of {size} MariaDBDatabases through"
        f" tenantdb, {batch} new orders at a time, each step started once the last one's orders"
        " are Ready and the stack is idle; the Ready orders refresh on the 10-minute cycle"
        " meanwhile, as a real fleet's would. Every order is a real one: its children, its"
        " OpenBao role, its schema and its user.",
        "",
    ]
    if fleet.get("failed"):
        lines += [f"**The build did not finish:** {fleet['failed']}", ""]
    steps = fleet.get("steps") or []
    if steps:
        first = steps[0]["orders_per_s"]
        lines += [
            "| Ready orders beside | new at once | all Ready (s) | orders/s | vs the first step"
            " | passes | Kubernetes requests | tenantdb CPU (s) | devstack CPU (s) | bound by |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for step in steps:
            lines.append(
                f"| {cell(step['existing'])} | {cell(step['orders'])}"
                f" | {cell(step['all_ready_s'])} | {cell(step['orders_per_s'])}"
                f" | {cell(step['orders_per_s'] / first)} | {cell(step['passes'])}"
                f" | {cell(step['kube_requests'])} | {cell(step['tenantdb_cpu_s'])}"
                f" | {cell(step['devstack_cpu_s'])} | {bound_note(step)} |"
            )
        lines += ["", "Per-order figures divide the step's totals by its new orders.", ""]
    points = fleet.get("beside") or {}
    if points:
        base = points.get("0") or {}
        base_rate = base.get("burst_orders_per_s")
        lines += [
            f"Beside the fleet as it grows: forced re-reconciles of one Ready order"
            f" ({_in_a_row(points.values(), 'converged_forced')} in a row"
            f" with beat paused, figures per pass), new orders created one after another, and a"
            f" burst of {burst} new orders at once.",
            "",
            "| Ready orders beside | converged: Kubernetes requests | converged: LISTs"
            " | converged: pass (s) | converged: tenantdb CPU per pass (ms)"
            " | new order: create-to-Ready p50 (s) | new order: Kubernetes requests"
            f" | {burst} at once: all Ready (s) | {burst} at once: vs beside none"
            " | Redis per order (B) | watcher per order (B) |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for point in points.values():
            forced, new = point["converged_forced"], point["new_order"]
            by_request = forced.get("kube_by_request") or {}
            lists = sum(n for request, n in by_request.items() if request.startswith("list "))
            ratio = point["burst_orders_per_s"] / base_rate if base_rate else None
            lines.append(
                f"| {cell(point['existing'])} | {cell(forced['kube_requests'])} | {lists}"
                f" | {cell(forced['pass_s'])} | {_cpu_ms(forced)}"
                f" | {cell(new['ready_p50_s'])} | {cell(new['kube_requests'])}"
                f" | {cell(point['burst']['all_ready_s'])} | {cell(ratio)}"
                f" | {_fleet_per_order(point, base)} |"
            )
        lines.append("")
    steady = fleet.get("steady")
    if steady:
        lines += [
            f"### Its steady state: {cell(steady['orders'])} Ready orders on the 10-minute refresh",
            "",
            *_steady(steady, f"All {cell(steady['orders'])} orders of the fleet"),
        ]
    return lines


def _fleet_per_order(point: Figures, base: Figures) -> str:
    """Redis and watcher memory per Ready order beside the fleet, over the point beside none."""
    extra = int(point["existing"] - base.get("existing", 0))
    return " | ".join(
        _per_order(point, base.get("footprint"), extra, name)
        for name in ("redis_bytes", "watcher_rss_bytes")
    )


def _refresh(refresh: Figures) -> list[str]:
    lines = [
        "## Refresh smoothness",
        "",
        f"{cell(refresh['orders'])} orders in the refresh set on a {refresh['cycle_s']} s cycle;"
        " beat's real sweep on real Redis under a simulated clock; the last of three cycles.",
        "",
        "| start | peak enqueues/s | mean enqueues/s | peak / mean | refresh-set bytes per order |",
        "|---|---|---|---|---|",
    ]
    for layout, label in (("burst", "all due at once"), ("random", "random phases")):
        f = refresh[layout]
        lines.append(
            f"| {label} | {cell(f['peak_per_s'])} | {cell(f['mean_per_s'])}"
            f" | {cell(f['peak_to_mean'])} | {cell(f['redis_bytes_per_order'])} |"
        )
    return [*lines, ""]


_COMPARED = (
    ("new order: create-to-Ready p50 (s)", ("warm", "new_order", "ready_p50_s")),
    ("new order: passes", ("warm", "new_order", "passes")),
    ("new order: entry tasks", ("warm", "new_order", "entry_tasks")),
    ("new order: Celery tasks", ("warm", "new_order", "celery_tasks")),
    ("new order: Kubernetes requests", ("warm", "new_order", "kube_requests")),
    ("new order: tenantdb CPU (s)", ("warm", "new_order", "tenantdb_cpu_s")),
    ("converged pass: Kubernetes requests", ("warm", "converged_forced", "kube_requests")),
    ("converged pass: OpenBao requests", ("warm", "converged_forced", "openbao_requests")),
    ("converged pass: Celery tasks", ("warm", "converged_forced", "celery_tasks")),
    (
        "MysqlDatabase new order: create-to-Ready p50 (s)",
        ("warm", "mysql_new_order", "ready_p50_s"),
    ),
    ("MysqlDatabase new order: SQL requests", ("warm", "mysql_new_order", "sql_requests")),
    (
        "MysqlDatabase converged pass: SQL requests",
        ("warm", "mysql_converged_forced", "sql_requests"),
    ),
    ("100 new orders, 2 workers: all Ready (s)", ("cold", "cold_100_workers_2", "all_ready_s")),
    ("1000 new orders, 2 workers: all Ready (s)", ("cold", "cold_1000_workers_2", "all_ready_s")),
    (
        "1000 new orders, 2 workers: Ready at the deadline",
        ("cold", "cold_1000_workers_2", "ready_at_deadline"),
    ),
    ("many edits of one order: passes", ("warm", "storm_one_order", "passes")),
)


def _lookup(report: Figures, path: tuple[str, ...]) -> Any:
    value: Any = report
    for part in path:
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def render_comparison(baseline: Figures, report: Figures) -> str:
    """A before/after table of the headline figures of two reports (same profile)."""
    lines = [
        "## Against the baseline",
        "",
        f"Baseline: commit `{baseline['commit']}`, {baseline['date']}, profile"
        f" `{baseline['profile']}` (`{baseline.get('source', 'bench/results/baseline.json')}`;"
        " `-dirty` marks a tree measured with uncommitted changes).",
        "",
        f"| figure | baseline `{baseline['commit']}` | now `{report['commit']}` |",
        "|---|---|---|",
    ]
    for label, path in _COMPARED:
        before, after = _lookup(baseline, path), _lookup(report, path)
        if before is None and after is None:
            continue
        lines.append(f"| {label} | {cell(before)} | {cell(after)} |")
    return "\n".join([*lines, ""])


def render_markdown(report: Figures, baseline: Figures | None = None) -> str:
    """The whole report, with a before/after table when a baseline report is given."""
    m = report["machine"]
    lines = [
        "# Benchmarks",
        "",
        "Produced by `make bench` (`python -m bench`); `make bench-quick` prints the same tables"
        " for small N, and `make bench-fleet` builds a fleet of 10,000 Ready orders and measures"
        " it (`docs/benchmarks-fleet.md`), and `make bench-mysql-fleet` grows one MySQL group"
        " to 10,000 Ready MysqlDatabases (`docs/benchmarks-mysql-fleet.md`)."
        " Each figure is the median of the runs, with min-max"
        " in brackets when they differ. Kubernetes and OpenBao requests are tenantdb's own,"
        " read from the API servers' and OpenBao's audit logs; CPU seconds come from /proc,"
        " for tenantdb's processes (watcher, worker and its pool, beat) and for the platform"
        " apart (`devstack CPU`: the kube-apiservers, etcd, kube-controller-managers, OpenBao,"
        " ESO, cert-manager and the stand-in operators the devstack runs). A scenario is"
        f" marked bound by the platform when it used more than {STAND_IN_BOUND:.0%} of"
        " tenantdb's CPU.",
        "",
        f"Profile `{report['profile']}`, commit `{report['commit']}`, {report['date']},"
        f" {report['bench_seconds'] / 60:.1f} min. Machine: {m['cores']} cores ({m['cpu']}),"
        f" {m['memory_gib']} GiB, Python {m['python']}, Redis {m['redis']}, {m['mariadb']}.",
        "",
    ]
    warm, cold = report.get("warm"), report.get("cold")
    if warm and cold:  # the fleet profile runs the fleet alone
        if baseline is not None:
            lines += render_comparison(baseline, report).splitlines()
            lines.append("")
        lines += _new_order(warm)
        lines += _converged(warm)
        lines += _mysql(warm)
        lines += _cold(cold)
        lines += _storms(warm, cold)
        lines += _fleet(cold)
        lines += _refresh(report["refresh"])
    lines += _dead_group(report.get("dead_group"))
    lines += _growth(report.get("growth"))
    lines += _growth(report.get("mysql_growth"), "MysqlDatabases")
    lines += _mysql_steady(report.get("mysql_growth"))
    lines += _fleet_build(report.get("fleet"))
    return "\n".join(lines)
