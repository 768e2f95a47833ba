"""The bench's scenarios: each drives a running stack as a user would and returns its figures.

Every scenario creates or edits orders with the official client only, lets tenantdb's real
processes serve them, waits until the stack is idle again (no pass pending or running, nothing
queued, no short come-back due) and turns the difference of two meter readings into figures.
A figure is a plain number; names end in the unit (`_s` seconds, `_cpu_s` CPU seconds) or count
something per order or per pass. None of them is asserted anywhere: they go to the report.
"""

from __future__ import annotations

import secrets
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench.harness import MARIADB, MYSQL, BenchError, Delta, OrderKind, Stack

Figures = dict[str, Any]

_CREATORS = 8
"""Client threads that create or edit orders "at once"."""


def _name(base: str) -> str:
    return f"{base}-{secrets.token_hex(3)}"


def _per_order(delta: Delta, orders: int) -> Figures:
    return {
        "passes": delta.passes / orders,
        "entry_tasks": delta.entry_tasks / orders,
        "busy_messages": delta.busy / orders,
        "celery_tasks": delta.all_tasks / orders,
        "kube_requests": delta.kube_requests / orders,
        "kube_requests_per_pass": delta.kube_requests / delta.passes if delta.passes else None,
        "openbao_requests": delta.openbao_requests / orders,
        "sql_requests": delta.sql_requests / orders,
        "tenantdb_cpu_s": delta.tenantdb_cpu / orders,
        "devstack_cpu_s": delta.devstack_cpu / orders,
        "platform_cpu_s": _components(delta, orders),
    }


def _components(delta: Delta, per: float) -> dict[str, float]:
    """The platform's CPU seconds by part, divided by ``per``, the dearest first."""
    parts = sorted(delta.components.items(), key=lambda item: -item[1])
    return {name: round(seconds / per, 4) for name, seconds in parts if seconds > 0}


def _percentile(values: list[float], q: float) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def _create(stack: Stack, name: str, kind: OrderKind, cluster: str = "management") -> None:
    if kind is MYSQL:  # MysqlDatabase orders live on the management cluster only
        stack.create_mysql_order(name)
    else:
        stack.create_order(name, cluster)


def new_orders_warm(
    stack: Stack, orders: int, *, kind: OrderKind = MARIADB, timeout: float = 120.0
) -> Figures:
    """Create orders one after another on warm workers; each is Ready and settled before the next.

    Figures: create-to-Ready p50 and p95, and per order the passes, entry tasks, Busy messages,
    Celery tasks, Kubernetes, OpenBao and SQL requests, and CPU seconds of tenantdb and the
    devstack.
    """
    stack.wait_idle()
    latencies = []
    before = stack.read()
    with stack.watch_ready(kind=kind) as watch:
        for _ in range(orders):
            name = _name("warm")
            start = time.monotonic()
            _create(stack, name, kind)
            if not watch.wait({name}, timeout):
                raise BenchError(f"order {name} was not Ready within {timeout:g} s")
            latencies.append(watch.ready_at[name] - start)
            stack.wait_idle()
    delta = stack.read().since(before)
    return {
        "ready_p50_s": _percentile(latencies, 50),
        "ready_p95_s": _percentile(latencies, 95),
        **_per_order(delta, orders),
    }


def mysql_burst(stack: Stack, orders: int, *, timeout: float = 900.0) -> Figures:
    """``orders`` new MysqlDatabases created at once on the group beside the Ready ones, each
    with an owner Secret of its own; they stay, as Ready peers of what is measured next.

    Figures: seconds until all are Ready and orders per second, and per order what
    ``new_orders_warm`` counts.
    """
    stack.wait_idle()
    # The watch lists every order of the namespace as it opens: opened before the meters start.
    with stack.watch_ready(kind=MYSQL) as watch:
        before = stack.read()
        start = time.monotonic()
        names = stack.fill_mysql_orders(stack.mysql_fillers + orders, timeout=timeout, watch=watch)
        took = max(watch.ready_at[name] for name in names) - start
    stack.wait_idle()
    delta = stack.read().since(before)
    return {
        "orders": orders,
        "all_ready_s": took,
        "orders_per_s": orders / took if took > 0 else None,
        **_per_order(delta, orders),
    }


def _converged_figures(delta: Delta) -> Figures:
    return {
        "kube_requests": delta.kube_requests,
        "kube_by_request": dict(sorted(delta.kube.items())),
        "openbao_requests": delta.openbao_requests,
        "openbao_by_request": dict(sorted(delta.openbao.items())),
        "sql_requests": delta.sql_requests,
        "sql_by_operation": dict(sorted(delta.sql_by_operation.items())),
        "celery_tasks": delta.all_tasks,
        "passes": delta.passes,
        "caused_another_pass": delta.passes > 1,
        "tenantdb_cpu_s": delta.tenantdb_cpu,
        "devstack_cpu_s": delta.devstack_cpu,
        "platform_cpu_s": _components(delta, 1),
    }


def _ready_order(stack: Stack, cluster: str, timeout: float, kind: OrderKind = MARIADB) -> str:
    name = _name("converged")
    with stack.watch_ready(cluster, kind) as watch:
        _create(stack, name, kind, cluster)
        if not watch.wait({name}, timeout):
            raise BenchError(f"order {name} on {cluster} was not Ready within {timeout:g} s")
    stack.wait_idle()
    return name


def converged_forced(stack: Stack, *, kind: OrderKind = MARIADB, timeout: float = 120.0) -> Figures:
    """One forced re-reconcile of a Ready order, as `tenantdb reconcile KEY --force` asks it."""
    name = _ready_order(stack, "management", timeout, kind)
    key = stack.order_key(name, kind=kind)
    queue = stack.workqueue()
    before = stack.read()
    queue.enqueue(_parse(key), force=True)
    stack.wait_idle()
    return _converged_figures(stack.read().since(before))


IN_A_ROW = 30
"""Forced passes ``converged_beside`` measures in one window: CPU is counted in ticks of 10 ms,
about what one converged pass uses, so a window's figure per pass is good to a third of a
millisecond."""


def converged_beside(
    stack: Stack, existing: int, runs: int, *, kind: OrderKind = MARIADB, timeout: float = 120.0
) -> list[Figures]:
    """Forced re-reconciles of one Ready order beside ``existing`` others: for MariaDBDatabase
    Database CRs in Keystone's namespace, for MysqlDatabase Ready orders on the same group.
    What a converged pass costs as the fleet around it grows.

    Each run forces ``IN_A_ROW`` passes of the order one after another, with beat paused: the
    window then holds those passes and nothing the fleet's timetables would have swept (whose
    cost is the steady state's). Figures per run are per pass: those of a converged pass
    divided by ``IN_A_ROW``, the CPU also in milliseconds (``*_cpu_ms``, tenantdb's and its
    worker's alone), and ``pass_s``, the median time from an enqueue until the pass recorded
    its end.
    """
    if kind is MYSQL:
        stack.fill_mysql_orders(existing, timeout=max(timeout, 900.0, 0.3 * existing))
        # Orders built at once come due for their first refresh at once, and a first refresh
        # after the pass that made an order Ready reads in full. The figures are those of the
        # steady state beside them, after that round: each of its passes costs 0.1 to 0.2 s.
        stack.wait_idle(max(120.0, 0.3 * existing))
    else:
        stack.fill_databases(existing)
    name = _ready_order(stack, "management", timeout, kind)
    key = _parse(stack.order_key(name, kind=kind))
    queue = stack.workqueue()
    found = []
    for _ in range(runs):
        stack.wait_idle()
        with stack.paused("beat"):
            stack.wait_idle(due_within=None)
            before = stack.read()
            took = [_forced_pass(stack, queue, key, timeout) for _ in range(IN_A_ROW)]
            stack.wait_idle(due_within=None)
            delta = stack.read().since(before)
        figures = _per_pass(_converged_figures(delta), IN_A_ROW)
        found.append(
            {
                **figures,
                "tenantdb_cpu_ms": 1000 * delta.tenantdb_cpu / IN_A_ROW,
                "worker_cpu_ms": 1000 * delta.cpu.get("worker", 0.0) / IN_A_ROW,
                "caused_another_pass": delta.passes > IN_A_ROW,
                "in_a_row": IN_A_ROW,
                "pass_s": statistics.median(took),
            }
        )
    return found


def _forced_pass(stack: Stack, queue: Any, key: Any, timeout: float) -> float:
    """Force one pass of the order, as `tenantdb reconcile KEY --force` does; the seconds until
    it recorded its end. Returns once nothing is queued or running for it, so that the next
    one finds the order's lease free. Only the order's own keys are looked at: the callers
    pause beat, and a scan of a 10,000-order fleet's keys after each pass would compete with
    the passes measured for the two cores."""
    last = queue.last_pass(key)
    start = time.monotonic()
    queue.enqueue(key, force=True)
    deadline = start + timeout
    while queue.last_pass(key) == last:
        if time.monotonic() > deadline:
            raise BenchError(f"the forced pass of {key} did not end within {timeout:g} s")
        time.sleep(0.005)
    took = time.monotonic() - start
    while not stack.is_idle(due_within=None, order=key):
        if time.monotonic() > deadline:
            raise BenchError(f"the forced pass of {key} did not settle within {timeout:g} s")
        time.sleep(0.005)
    return took


def _per_pass(figures: Figures, passes: int) -> Figures:
    """A window's counts divided by the passes it was opened for (maps of counts too)."""
    out: Figures = {}
    for name, value in figures.items():
        if isinstance(value, bool):
            out[name] = value
        elif isinstance(value, int | float):
            out[name] = value / passes
        elif isinstance(value, dict):
            out[name] = {k: v / passes for k, v in value.items()}
        else:
            out[name] = value
    return out


def converged_refresh(stack: Stack, *, timeout: float = 120.0) -> Figures:
    """One periodic refresh of a Ready order on a target cluster, swept by beat when due, in
    the steady state: after a refresh of its own, which leaves the basis of quiet refreshes
    (``tenantdb.core.quiet``) when the order's last pass wrote."""
    from tenantdb.core.schedule import Timetable

    name = _ready_order(stack, "edge-1", timeout)
    key = _parse(stack.order_key(name, "edge-1"))
    queue = stack.workqueue()
    if queue.due_at(key, Timetable.REFRESH) is None:
        raise BenchError(f"the Ready order {key} has no refresh in the timetable")
    _refresh(stack, key, timeout)
    before = stack.read()
    _refresh(stack, key, timeout)
    return _converged_figures(stack.read().since(before))


def _refresh(stack: Stack, key: Any, timeout: float) -> None:
    """Make the order's refresh due now and wait until beat swept it and its pass ended."""
    from tenantdb.core.schedule import Timetable

    queue = stack.workqueue()
    last = queue.last_pass(key)
    queue.schedule(key, time.time(), Timetable.REFRESH)
    deadline = time.monotonic() + timeout
    while queue.last_pass(key) == last:
        if time.monotonic() > deadline:
            raise BenchError(f"beat did not sweep the refresh of {key} within {timeout:g} s")
        time.sleep(0.1)
    stack.wait_idle()


def _refresh_round(stack: Stack, keys: list[Any], timeout: float) -> float:
    """Make every key's refresh due now; wait until each had its pass; the seconds it took."""
    from tenantdb.core.schedule import Timetable

    queue = stack.workqueue()
    last = dict(zip(keys, queue.last_passes(keys), strict=True))
    start = time.monotonic()
    now = time.time()
    for key in keys:
        queue.schedule(key, now, Timetable.REFRESH)
    waiting = list(keys)
    while waiting:
        if time.monotonic() - start > timeout:
            raise BenchError(f"{len(waiting)} of {len(keys)} refreshes not done in {timeout:g} s")
        time.sleep(0.5 if len(waiting) < 1000 else 2.0)  # a large fleet: poll it less often
        # In pipelines: read one by one, 10,000 keys cost the bench 0.9 s of CPU per poll,
        # on the cores whose use by tenantdb the window measures.
        ended = queue.last_passes(waiting)
        waiting = [key for key, seen in zip(waiting, ended, strict=True) if seen == last[key]]
    return time.monotonic() - start


def _parse(key: str) -> Any:
    from tenantdb.core.keys import OrderKey

    return OrderKey.parse(key)


def cold(stack: Stack, orders: int, *, timeout: float) -> tuple[Figures, list[str]]:
    """Create ``orders`` new orders at once on a fresh stack and time until all are Ready.

    Returns the figures (seconds to all Ready, or how many were Ready at the deadline; per order
    passes, tasks, requests and CPU) and the names of the orders that went Ready.
    """
    names = [_name(f"cold{i}") for i in range(orders)]
    stack.wait_idle()
    # The watch lists every order of the namespace as it opens: opened before the meters start.
    with stack.watch_ready() as watch:
        before = stack.read()
        start = time.monotonic()
        with ThreadPoolExecutor(_CREATORS) as pool:
            list(pool.map(stack.create_order, names))
        created = time.monotonic() - start
        done = watch.wait(set(names), timeout)
        ready = [n for n in names if n in watch.ready_at]
        elapsed = max((watch.ready_at[n] for n in ready), default=start) - start
    if done:
        stack.wait_idle(timeout)
    delta = stack.read().since(before)
    figures: Figures = {
        "orders": orders,
        "all_ready_s": elapsed if done else None,
        "ready_at_deadline": len(ready),
        "deadline_s": timeout,
        "create_s": created,
        **_per_order(delta, orders),
    }
    return figures, ready


def storm_one(stack: Stack, updates: int, *, timeout: float = 120.0) -> Figures:
    """Edit one Ready order's annotations ``updates`` times as fast as the client can."""
    name = _ready_order(stack, "management", timeout)
    before = stack.read()
    with ThreadPoolExecutor(_CREATORS) as pool:
        list(pool.map(lambda i: stack.annotate(name, str(i)), range(updates)))
    stack.wait_idle(timeout)
    delta = stack.read().since(before)
    return {
        "updates": updates,
        "passes": delta.passes,
        "entry_tasks": delta.entry_tasks,
        "busy_messages": delta.busy,
        "tenantdb_cpu_s": delta.tenantdb_cpu,
        "devstack_cpu_s": delta.devstack_cpu,
    }


def storm_many(stack: Stack, names: list[str], *, timeout: float = 300.0) -> Figures:
    """Edit each of ``names`` (Ready orders) once, all at once."""
    stack.wait_idle(timeout)
    before = stack.read()
    value = secrets.token_hex(3)
    with ThreadPoolExecutor(_CREATORS) as pool:
        list(pool.map(lambda n: stack.annotate(n, value), names))
    stack.wait_idle(timeout)
    delta = stack.read().since(before)
    return {
        "orders": len(names),
        "passes_per_order": delta.passes / len(names),
        "entry_tasks_per_order": delta.entry_tasks / len(names),
        "busy_messages": delta.busy,
        "seconds": delta.seconds,
        "tenantdb_cpu_s_per_order": delta.tenantdb_cpu / len(names),
        "devstack_cpu_s_per_order": delta.devstack_cpu / len(names),
    }


def dead_group(
    stack: Stack, dead_orders: int, healthy_orders: int, window: float, *, timeout: float = 120.0
) -> Figures:
    """What a group that never answers costs the orders of a healthy group.

    Needs a stack with the devstack's group `dead`. First ``healthy_orders`` new MysqlDatabase
    orders on group `main`, one after another, unloaded. Then, with every site circuit closed
    (nothing learnt yet), ``dead_orders`` orders on `dead` at once, and for ``window`` seconds a
    new healthy order every 2 s while the dead ones keep coming back. The dead orders are
    deleted at the end (their policy is Retain: no connection).

    Figures: the healthy create-to-Ready p50 unloaded and loaded and their ratio; the seconds
    the worker's processes spent connecting during the window (every connect to `dead` fails,
    and healthy connects are pooled), that time as a share of the window (an upper bound on
    any one process's share), the passes per minute in the window (both groups), and the share
    of dead orders Pending PrimaryUnavailable.
    """

    def healthy(count: int, spacing: float = 0.0, until: float = 0.0) -> list[float]:
        latencies: list[float] = []
        with stack.watch_ready(kind=MYSQL) as watch:
            while len(latencies) < count or time.monotonic() < until:
                name = _name("healthy")
                start = time.monotonic()
                stack.create_mysql_order(name)
                if not watch.wait({name}, timeout):
                    raise BenchError(f"order {name} was not Ready within {timeout:g} s")
                latencies.append(watch.ready_at[name] - start)
                time.sleep(max(0.0, start + spacing - time.monotonic()))
        return latencies

    stack.wait_idle()
    unloaded = _percentile(healthy(healthy_orders), 50)
    stack.forget_circuits()
    names = [_name("dead") for _ in range(dead_orders)]
    connecting = stack.connect_seconds()
    before = stack.read()
    started = time.monotonic()
    with ThreadPoolExecutor(_CREATORS) as pool:
        list(pool.map(lambda n: stack.create_mysql_order(n, group="dead"), names))
    loaded = _percentile(healthy(healthy_orders, spacing=2.0, until=started + window), 50)
    elapsed = time.monotonic() - started
    waited = stack.connect_seconds() - connecting
    passes = stack.read().since(before).passes
    pending = _pending_unavailable(stack, set(names))
    for name in names:
        stack.delete_mysql_order(name)
    deadline = time.monotonic() + timeout
    while stack.mysql_orders() & set(names):
        if time.monotonic() > deadline:
            raise BenchError("the dead group's orders were not released")
        time.sleep(0.5)
    return {
        "healthy_ready_p50_unloaded_s": unloaded,
        "healthy_ready_p50_loaded_s": loaded,
        "healthy_ready_p50_ratio": loaded / unloaded if unloaded else None,
        "connect_wait_s": waited,
        "window_s": elapsed,
        "connect_wait_share": waited / elapsed,
        "passes_per_minute": passes / elapsed * 60,
        "dead_pending": pending / dead_orders,
    }


def _pending_unavailable(stack: Stack, names: set[str]) -> int:
    listed = stack.apis["management"].list_namespaced_custom_object(*MYSQL.api)
    count = 0
    for order in listed.get("items", ()):
        if order["metadata"]["name"] not in names:
            continue
        conditions = (order.get("status") or {}).get("conditions") or ()
        if any(c.get("reason") == "PrimaryUnavailable" for c in conditions):
            count += 1
    return count


FLEET = 10_000
"""The fleet the steady-state figures are given for."""

REFRESH_S = 600.0
"""How often a Ready order is refreshed (`ORDER_REFRESH_AFTER`): its steady-state pass rate."""

FULL_REFRESH_S = 43_200.0
"""How often each order is still read in full (``TENANTDB_FULL_REFRESH_SECONDS``'s default)."""

_READS = ("get", "list", "watch")


def fleet_pace_cycle(orders: int) -> float:
    """The refresh cycle over which ``orders`` orders are refreshed at the rate ``FLEET`` orders
    are on the 10-minute refresh (for 1,000 orders: 60 s)."""
    return orders * REFRESH_S / FLEET


def refresh_all(
    stack: Stack,
    names: list[str],
    empty: dict[str, int],
    *,
    kind: OrderKind = MARIADB,
    timeout: float = 900.0,
) -> Figures:
    """Every one of ``names`` (Ready orders) made due for its refresh at once, swept by beat at
    the pace its refresh cycle allows, until each has had its pass.

    With the stack's cycle at ``fleet_pace_cycle(len(names))`` beat offers passes at the rate a
    fleet of ``FLEET`` Ready orders gets on the 10-minute refresh, so the window is that
    fleet's steady state in passes per second. Figures: what the fleet holds per order (Redis,
    the watcher's memory, against ``empty``: the stack's footprint before any order), the
    passes per second the workers kept, each pass's cost (requests by verb, writes, CPU), and
    from those the steady state of ``FLEET`` orders: requests per second and CPU cores.
    Raises BenchError when a pass wrote anything (the fleet was not converged) or an order
    lost its Ready.

    A first round, not measured, brings every order to the steady state: every basis is
    forgotten before it, so each order's first refresh reads in full (its cost is what a
    full-refresh period's full pass costs) and leaves the basis its later refreshes are quiet
    on (``tenantdb.core.quiet``). The measured round is the second. For
    MysqlDatabase, every order's drift check is made due before it, as it is on each 10-minute
    refresh, so every measured pass looks at the primary.
    """
    from tenantdb.core.mysqldatabase.passes import VERIFY

    stack.wait_idle()
    keys = [_parse(stack.order_key(name, kind=kind)) for name in names]
    queue = stack.workqueue()
    for key in keys:  # a pass since an order went Ready may have left one: start from none
        queue.forget_quiet(key)
    first = stack.read()
    _refresh_round(stack, keys, timeout)
    stack.wait_idle(timeout)
    if kind is MYSQL:
        for key in keys:
            queue.release_period(VERIFY, key)
    before = stack.read()
    full = before.since(first)
    full_requests = full.kube_requests / (full.passes or 1)
    window = _refresh_round(stack, keys, timeout)
    stack.wait_idle(timeout)
    delta = stack.read().since(before)
    held = stack.footprint()  # the steady state's, quiet-refresh bases included
    passes = delta.passes or 1
    by_verb: dict[str, int] = {}
    for request, count in delta.kube.items():
        verb = request.split(" ", 1)[0]
        by_verb[verb] = by_verb.get(verb, 0) + count
    writes = sum(n for verb, n in by_verb.items() if verb not in _READS)
    if writes:
        raise BenchError(f"a refresh of the converged fleet wrote: {dict(sorted(by_verb.items()))}")
    unready = set(names) - stack.ready_orders(kind=kind)
    if unready:
        raise BenchError(f"{len(unready)} orders lost their Ready during the refresh")
    per_pass = {verb: n / passes for verb, n in sorted(by_verb.items()) if verb != "watch"}
    requests = sum(per_pass.values())
    cpu = delta.tenantdb_cpu / passes
    rate = FLEET / REFRESH_S
    # Each order is still read in full once a full-refresh period; those passes cost what the
    # first round's did, the rest what the measured round's did.
    full_rate = FLEET / FULL_REFRESH_S
    fleet_requests = requests * (rate - full_rate) + full_requests * full_rate
    return {
        "orders": len(names),
        "redis_bytes_per_order": (held["redis_bytes"] - empty["redis_bytes"]) / len(names),
        "watcher_bytes_per_order": (held["watcher_rss_bytes"] - empty["watcher_rss_bytes"])
        / len(names),
        "window_s": window,
        "passes": delta.passes,
        "passes_per_s": delta.passes / window,
        "kube_requests_per_pass": requests,
        "kube_by_verb_per_pass": per_pass,
        "writes": writes,
        "quiet_share": delta.metrics["passes quiet"] / passes,
        "openbao_requests_per_pass": delta.openbao_requests / passes,
        "sql_requests_per_pass": delta.sql_requests / passes,
        "tenantdb_cpu_s_per_pass": cpu,
        "devstack_cpu_s_per_pass": delta.devstack_cpu / passes,
        "fleet": FLEET,
        "fleet_passes_per_s": rate,
        "full_kube_requests_per_pass": full_requests,
        "fleet_full_passes_per_s": full_rate,
        "fleet_kube_requests_per_s": fleet_requests,
        "fleet_lists_per_s": per_pass.get("list", 0.0) * rate,
        "fleet_tenantdb_cores": cpu * rate,
    }


def beside_fleet(
    stack: Stack, runs: int, warm_orders: int, burst: int, *, timeout: float
) -> tuple[Figures, list[Figures], list[Figures]]:
    """What a converged pass and new orders cost beside the Ready orders the stack holds now.

    Returns the point's own figures (``existing``: how many Ready orders stood beside; the
    figures of ``burst`` new orders created at once; the installation's footprint after), the
    forced passes of ``converged_beside`` and the ``new_orders_warm`` runs, for the caller to
    summarize. Every order these create stays, Ready, in the fleet.
    """
    existing = len(stack.ready_orders())
    forced = converged_beside(stack, 0, runs, timeout=timeout)
    new = [new_orders_warm(stack, warm_orders, timeout=timeout) for _ in range(runs)]
    figures = grow_fleet(stack, burst, timeout=timeout)
    point: Figures = {
        "existing": existing,
        "burst": figures,
        "burst_orders_per_s": figures["orders_per_s"],
        "footprint": stack.footprint(),
    }
    return point, forced, new


def grow_fleet(stack: Stack, orders: int, *, timeout: float) -> Figures:
    """One step of a fleet's build: ``orders`` new orders at once beside the Ready ones.

    Figures: those of ``cold``, with ``existing`` (the Ready orders beside) and the step's
    throughput in orders per second. Raises BenchError when an order was not Ready in time.
    """
    existing = len(stack.ready_orders())
    figures, ready = cold(stack, orders, timeout=timeout)
    if len(ready) < orders:
        raise BenchError(
            f"beside {existing} Ready orders, {orders - len(ready)} of {orders} new orders"
            f" were not Ready in {timeout:g} s"
        )
    return {"existing": existing, **figures, "orders_per_s": orders / figures["all_ready_s"]}
