"""The Prometheus metrics of tenantdb's processes, and serving them.

The reference's names and labels for the two legs of a MariaDBDatabase pass
(``c5c3_operator_reconcile_duration_seconds`` with the reference's buckets and
``c5c3_operator_reconcile_errors_total``), and tenantdb's own ``tenantdb_*`` metrics. A leg is
observed once per pass with its whole duration, from its observation in the entry to its last
write, even when its writes ran in several chain steps.

Worker processes run under Celery's prefork pool: with ``PROMETHEUS_MULTIPROC_DIR`` set (the
``tenantdb worker`` command sets it), every child writes its samples to that directory and the
parent serves them all. Labels never carry a secret: kinds, paths, legs and condition types only.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from time import perf_counter, time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client import multiprocess as prometheus_multiprocess

LEG_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

RECONCILE_DURATION = Histogram(
    "c5c3_operator_reconcile_duration_seconds",
    "Duration of one invocation of a sub-reconciler (a leg of a pass).",
    ["sub_reconciler"],
    buckets=LEG_BUCKETS,
)
RECONCILE_ERRORS = Counter(
    "c5c3_operator_reconcile_errors",
    "Invocations of a sub-reconciler that returned an error.",
    ["sub_reconciler", "condition_type"],
)
PASSES = Counter(
    "tenantdb_reconcile_passes",
    "Passes over orders, by the path the pass took.",
    ["kind", "path"],
)
RETRIES = Counter(
    "tenantdb_step_retries",
    "Chain steps that failed and were scheduled again with backoff.",
    ["task"],
)
DUPLICATE_STEPS = Counter(
    "tenantdb_duplicate_steps",
    "Copies of a chain step that found the pass's fence moved on and ended without writing.",
    ["task"],
)
LOCK_BUSY = Counter(
    "tenantdb_lock_busy",
    "Messages that found their order's lease held by another pass (the order is marked dirty).",
    ["kind"],
)
STALE_MESSAGES = Counter(
    "tenantdb_stale_messages",
    "Messages that ended at once because a finished pass covered their events.",
    ["kind"],
)
ENQUEUES = Counter(
    "tenantdb_enqueue",
    "Enqueues, by whether they published a task or found one pending.",
    ["result"],
)
DUE_KEYS = Gauge(
    "tenantdb_due_keys",
    "Keys waiting in the timetables.",
    ["table"],
    multiprocess_mode="livemax",
)
QUEUE_DEPTH = Gauge(
    "tenantdb_queue_depth",
    "Messages waiting in each chain's broker queue.",
    ["queue"],
    multiprocess_mode="livemax",
)
PENDING_KEYS = Gauge(
    "tenantdb_pending_keys",
    "Orders with a reconcile queued and not yet started.",
    multiprocess_mode="livemax",
)
WATCH_EVENTS = Counter(
    "tenantdb_watch_events",
    "Watch events received, by cluster, kind and type (LISTED for objects a relist handed on).",
    ["cluster", "kind", "type"],
)
WATCH_RESTARTS = Counter(
    "tenantdb_watch_restarts",
    "Watch streams that ended and were opened again, by cluster, kind and reason.",
    ["cluster", "kind", "reason"],
)
LEADER = Gauge(
    "tenantdb_leader",
    "1 while this replica holds the leader lease of its role, else 0.",
    ["role"],
    multiprocess_mode="livemax",
)


@contextmanager
def observe_leg(sub_reconciler: str) -> Iterator[None]:
    """Time one invocation of a leg."""
    started = perf_counter()
    try:
        yield
    finally:
        RECONCILE_DURATION.labels(sub_reconciler=sub_reconciler).observe(perf_counter() - started)


def observe_leg_since(sub_reconciler: str, started: float) -> None:
    """Observe a leg that began at epoch seconds ``started`` (in another task) and ends now."""
    RECONCILE_DURATION.labels(sub_reconciler=sub_reconciler).observe(max(0.0, time() - started))


def serve(port: int) -> None:
    """Serve /metrics on ``port``: every child's samples under prefork, this process's otherwise."""
    if not port:
        return
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        prometheus_multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        start_http_server(port, registry=registry)
    else:
        start_http_server(port)


def mark_process_dead(pid: int) -> None:
    """Drop a dead prefork child's live gauges."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        prometheus_multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]
