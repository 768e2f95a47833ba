"""The Prometheus metrics of tenantdb's processes, and serving them.

The MariaDBDatabase reconciler API's names and labels for the two legs of a pass
(``c5c3_operator_reconcile_duration_seconds`` with that API's buckets and
``c5c3_operator_reconcile_errors_total``), and tenantdb's own ``tenantdb_*`` metrics. A leg is
observed once per pass with its whole duration, from its observation in the entry to its last
write, even when its writes ran in several chain steps.

Worker processes run under Celery's prefork pool: with ``PROMETHEUS_MULTIPROC_DIR`` set (the
``tenantdb worker`` command sets it), every child writes its samples to that directory and the
parent serves them all. Labels never carry a secret or an order's name: kinds, paths, legs,
condition types and reasons, queues, operations, clusters and watched kinds only.

Beat keeps the gauges of the whole installation (the orders by Ready reason, the queues, the
timetables) from what is in Redis; only the active beat exports them, and a beat that loses its
lease drops the orders and queue-age series (``forget_beat_gauges``), so a standby never shows
stale values beside the leader's.
"""

from __future__ import annotations

import glob
import os
import platform
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from socketserver import ThreadingMixIn
from time import monotonic, perf_counter, time
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    make_wsgi_app,
)
from prometheus_client import multiprocess as prometheus_multiprocess

LEG_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
LAG_BUCKETS = (0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)

OPENBAO_OPERATIONS = (
    "login",
    "read_role",
    "read_auth_role",
    "write_role",
    "delete_role",
    "revoke_leases",
    "revoke_token",
)
"""The OpenBao requests tenantdb makes, as the ``operation`` label names them."""
SQL_OPERATIONS = ("connect", "query", "execute")
"""The requests to a MySQL server: opening the admin connection, a read-only query, and one
writing statement."""

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
NOTES_REFUSED = Counter(
    "tenantdb_notes_refused",
    "Notes read back from Redis whose seal did not open or had ended (pass: a chain step's"
    " note, the pass is planned afresh; quiet: a quiet basis, the refresh reads in full).",
    ["note", "reason"],
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
REDIS_ROLLBACKS = Counter(
    "tenantdb_redis_rollbacks_total",
    "Times the watcher found that Redis had lost enqueues it acknowledged (its count of "
    "enqueues went back) and relisted every watch.",
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
CLUSTER_CONTEXTS_SKIPPED = Gauge(
    "tenantdb_cluster_contexts_skipped",
    "Kubeconfig contexts the watcher left out because an order key cannot carry their name (its"
    " log names each and why); their orders get no pass.",
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
BUILD_INFO = Gauge(
    "tenantdb_build_info",
    "1, labelled with the tenantdb version and the Python version the process runs.",
    ["version", "python"],
    multiprocess_mode="livemax",
)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tenantdb")
    except PackageNotFoundError:  # a checkout that was never installed
        return "unknown"


BUILD_INFO.labels(version=_version(), python=platform.python_version()).set(1)

LEADER = Gauge(
    "tenantdb_leader",
    "1 while this replica holds the leader lease of its role, else 0.",
    ["role"],
    multiprocess_mode="livemax",
)

BEAT_LAST_SWEEP = Gauge(
    "tenantdb_beat_last_sweep_timestamp_seconds",
    "When the active beat last completed a sweep of the timetables and orphans (Unix time). It "
    "stands still while sweeps fail or hang; only the active beat exports it.",
)

ORDERS = Gauge(
    "tenantdb_orders",
    "Orders by kind and by the status and reason of their Ready condition, as tenantdb last "
    "read or wrote it (for an order not Ready, the reason of its first condition that is not "
    "True). Kept by the active beat.",
    ["kind", "status", "reason"],
    multiprocess_mode="livemax",
)
MYSQL_STATEMENTS = Counter(
    "tenantdb_mysql_statements_total",
    "Statements tenantdb sent to MySQL servers, by kind of statement (queries included).",
    ["verb"],
)
ORDER_READY_SECONDS = Histogram(
    "tenantdb_order_ready_seconds",
    "Seconds from an order's creation until tenantdb first saw it Ready, once per order (its "
    "creationTimestamp has whole seconds, so the first buckets are coarse).",
    ["kind"],
    buckets=LAG_BUCKETS,
)
ORDERS_NOT_READY = Gauge(
    "tenantdb_orders_not_ready_seconds",
    "The longest time an order of this kind and reason has been not Ready: seconds since its "
    "Ready condition last changed status (since its creation when it has none). Kept by the "
    "active beat.",
    ["kind", "reason"],
    multiprocess_mode="livemax",
)
OLDEST_PENDING = Gauge(
    "tenantdb_oldest_pending_seconds",
    "Age of the next message a worker takes from each chain's broker queue (the oldest "
    "waiting): seconds since it was published, from the publish time every tenantdb process "
    "stamps on its messages; a message without the stamp counts from when beat first saw it "
    "next in line. 0 when the queue is empty.",
    ["queue"],
    multiprocess_mode="livemax",
)
REFRESH_LAG = Histogram(
    "tenantdb_refresh_lag_seconds",
    "How late beat takes due come-backs, by timetable: for each key it claims, the claim time "
    "minus the time the key was due.",
    ["table"],
    buckets=LAG_BUCKETS,
)
OPENBAO_DURATION = Histogram(
    "tenantdb_openbao_request_duration_seconds",
    "Duration of OpenBao requests by operation, failed ones included.",
    ["operation"],
    buckets=REQUEST_BUCKETS,
)
OPENBAO_ERRORS = Counter(
    "tenantdb_openbao_request_errors",
    "OpenBao requests that failed (no answer, or an error status tenantdb does not expect; "
    "a role or lease that is not there is no error), by operation.",
    ["operation"],
)
SQL_DURATION = Histogram(
    "tenantdb_sql_request_duration_seconds",
    "Duration of requests to MySQL servers by operation (connect, query, execute), failed "
    "ones included.",
    ["operation"],
    buckets=REQUEST_BUCKETS,
)
SQL_ERRORS = Counter(
    "tenantdb_sql_request_errors",
    "Requests to MySQL servers that failed, by operation.",
    ["operation"],
)
WATCH_LAST_EVENT = Gauge(
    "tenantdb_watch_last_event_timestamp_seconds",
    "When the watcher last heard from a watch, by cluster and kind: an event, a bookmark or a "
    "relist, in epoch seconds.",
    ["cluster", "kind"],
    multiprocess_mode="livemax",
)

for _operation in OPENBAO_OPERATIONS:
    OPENBAO_DURATION.labels(operation=_operation)
    OPENBAO_ERRORS.labels(operation=_operation)
for _operation in SQL_OPERATIONS:
    SQL_DURATION.labels(operation=_operation)
    SQL_ERRORS.labels(operation=_operation)


@contextmanager
def observe_request(duration: Histogram, errors: Counter, operation: str) -> Iterator[None]:
    """Time one request to an external system; count it as failed when the body raises."""
    started = perf_counter()
    try:
        yield
    except Exception:
        errors.labels(operation=operation).inc()
        raise
    finally:
        duration.labels(operation=operation).observe(perf_counter() - started)


def openbao_request(operation: str) -> AbstractContextManager[None]:
    """Time one OpenBao request (``OPENBAO_OPERATIONS``)."""
    return observe_request(OPENBAO_DURATION, OPENBAO_ERRORS, operation)


def sql_request(operation: str) -> AbstractContextManager[None]:
    """Time one request to a MySQL server (``SQL_OPERATIONS``)."""
    return observe_request(SQL_DURATION, SQL_ERRORS, operation)


def forget_beat_gauges() -> None:
    """Drop the series only the active beat keeps: this replica no longer leads."""
    for gauge in (ORDERS, ORDERS_NOT_READY, OLDEST_PENDING):
        gauge.clear()
    BEAT_LAST_SWEEP.set(0)


def set_series(gauge: Gauge, values: Mapping[tuple[str, ...], float]) -> None:
    """Set a labelled gauge to exactly these series: new values first, then drop the rest.

    A scrape in between sees every current series, never a gap.
    """
    for labels, value in values.items():
        gauge.labels(*labels).set(value)
    for labels in _label_sets(gauge) - set(values):
        gauge.remove(*labels)


def _label_sets(gauge: Gauge) -> set[tuple[str, ...]]:
    names = gauge._labelnames
    return {
        tuple(sample.labels[n] for n in names)
        for metric in gauge.collect()
        for sample in metric.samples
    }


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


Liveness = Callable[[], str | None]
"""Why the process is not alive (one line, no secret), or None while it is."""


class Progress:
    """A ``Liveness`` for a process whose work shows itself by going on: alive while it was
    told of progress (``progressed``) within ``max_age`` seconds.

    ``stalled`` words the failure; it is formatted with ``age`` and ``limit`` (whole seconds).
    """

    def __init__(
        self, max_age: float, stalled: str, clock: Callable[[], float] = monotonic
    ) -> None:
        self.max_age = max_age
        self.stalled = stalled
        self._clock = clock
        self._at = clock()

    def progressed(self) -> None:
        """The process did what it is there for just now."""
        self._at = self._clock()

    def __call__(self) -> str | None:
        """None while alive; otherwise one line saying for how long it has not progressed."""
        age = self._clock() - self._at
        if age <= self.max_age:
            return None
        return self.stalled.format(age=f"{age:.0f}", limit=f"{self.max_age:.0f}")


def serve(port: int, liveness: Liveness | None = None) -> None:
    """Serve /metrics on ``port``: every child's samples under prefork, this process's otherwise.

    With ``liveness``, ``/livez`` answers 200 while it returns None and 503 with its reason
    otherwise, for a liveness probe that restarts a process whose work has stalled while its
    metrics still answer.
    """
    if not port:
        return
    registry = REGISTRY
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        registry.register(_ChildrenCollector(os.environ["PROMETHEUS_MULTIPROC_DIR"]))
    metrics = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        if liveness is not None and environ.get("PATH_INFO") == "/livez":
            why = liveness()
            status = "200 OK" if why is None else "503 Service Unavailable"
            start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
            return [f"{why or 'ok'}\n".encode()]
        return metrics(environ, start_response)  # type: ignore[no-any-return]

    server = make_server("", port, app, _ThreadingServer, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()


_HEADER_BYTES = 8
"""A prefork child's samples file starts with how many bytes of it are used (4 bytes, padded
to 8): a file shorter than that holds no sample yet."""


class _ChildrenCollector:
    """The samples of every prefork child, as prometheus_client's multiprocess collector
    merges them, leaving out a file that holds no sample yet.

    A child creates its samples file empty and sizes it only afterwards, and a child killed in
    that moment leaves the empty file behind for good. The library's collector fails the whole
    scrape on such a file (prometheus/client_python#1199), so one child starting while Redis
    fails over, say, would cost the scrape every sample of every child.
    """

    def __init__(self, path: str) -> None:
        self._path = path

    def collect(self) -> Iterable[Any]:
        """Every child's samples, merged; files without a sample yet left out."""
        files = [
            name for name in glob.glob(os.path.join(self._path, "*.db")) if _holds_samples(name)
        ]
        return prometheus_multiprocess.MultiProcessCollector.merge(  # type: ignore[no-any-return,no-untyped-call]
            files, accumulate=True
        )


def _holds_samples(name: str) -> bool:
    try:
        return os.path.getsize(name) >= _HEADER_BYTES
    except FileNotFoundError:
        return False  # a dead child's live gauges, dropped since the listing


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Probes and scrapes are not worth a log line each."""


def mark_process_dead(pid: int) -> None:
    """Drop a dead prefork child's live gauges."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        prometheus_multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]
