"""What an operator does to orders from a shell: re-run a pass, wait for it, and look at state.

``reconcile`` enqueues through the same deduplicating path the watcher uses; with a wait it
watches the key's event counters until a finished pass covers the event it added, then reads
the order's conditions. ``status`` puts each order's conditions next to the work queue's view of
it (pending, running, next due time, last pass) and words why it is not Ready and what happens
next. Neither prints a secret: orders' statuses carry none.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kubernetes import config as k8s_config

from tenantdb.adapters.celeryapp import build_celery_app, make_publisher
from tenantdb.adapters.clusters import ClusterRegistry, ClusterUnavailableError
from tenantdb.adapters.kube import KindNotServedError, KubeError, resource_of
from tenantdb.adapters.redisclient import build_redis
from tenantdb.adapters.workqueue import WorkQueue
from tenantdb.core.keys import MANAGEMENT_CLUSTER, OrderKey
from tenantdb.core.kinds import identity_for, register_identity, registered_identities
from tenantdb.core.report import (
    OrderReport,
    QueueView,
    build_report,
    build_unreadable_report,
)
from tenantdb.core.schedule import Timetable
from tenantdb.core.served import KINDS
from tenantdb.settings import Settings


def load_kinds(settings: Settings) -> None:
    """Make every kind known: tenantdb's own, and those the settings' kind modules declare.

    Raises:
        ImportError: a kind module does not import.
    """
    for kind in KINDS:
        register_identity(kind.identity)
    for module in settings.kind_module_names:
        importlib.import_module(module)


def build_workqueue(settings: Settings) -> WorkQueue:
    """The work queue as every process sees it, publishing through tenantdb's Celery app."""
    app = build_celery_app(settings)
    return WorkQueue(
        build_redis(settings),
        make_publisher(app),
        publish_refresh=make_publisher(app, refresh=True),
        prefix=settings.key_prefix,
        lock_ttl=settings.lock_ttl_seconds,
        pending_ttl=settings.pending_ttl_seconds,
    )


@dataclass(frozen=True)
class WaitResult:
    """How a wait for a pass ended."""

    finished: bool
    order: dict[str, Any] | None


def wait_for_pass(
    queue: WorkQueue,
    key: OrderKey,
    events: int,
    timeout: float,
    read_order: Callable[[], dict[str, Any] | None],
    *,
    poll: float = 0.2,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> WaitResult:
    """Wait until a finished pass covers event number ``events`` of the key, or the timeout."""
    deadline = clock() + timeout
    while True:
        _, covered = queue.progress(key)
        if covered >= events and not queue.is_locked(key):
            return WaitResult(True, read_order())
        if clock() >= deadline:
            return WaitResult(False, read_order())
        sleep(poll)


def read_order(registry: ClusterRegistry, key: OrderKey) -> dict[str, Any] | None:
    """The order as stored on its cluster, or None when it is gone.

    Raises:
        UnknownKindError: the key names a kind no module registered.
    """
    resource = resource_of(identity_for(key))
    return registry.get(key.cluster).get_or_none(resource, key.namespace, key.name)


def is_ready(order: dict[str, Any] | None) -> bool:
    """Whether the order's Ready condition is True."""
    status = (order or {}).get("status") or {}
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or ()
    )


UNREADABLE_ERRORS: tuple[type[Exception], ...] = (
    KubeError,
    ClusterUnavailableError,
    k8s_config.ConfigException,
)
"""What reading a cluster raises when it cannot be read: no answer, a refusal, a context or a
ServiceAccount that does not load. The message names the cluster, never a credential."""


def list_order_keys(
    registry: ClusterRegistry,
    unreadable: dict[str, str] | None = None,
    management_namespaces: tuple[str, ...] = (),
) -> Iterator[OrderKey]:
    """Every order of every registered kind, on every registered cluster that serves it; a
    cluster that cannot be read is noted in ``unreadable`` (cluster: why), once. On the
    management cluster, with ``management_namespaces``, the orders of those namespaces only."""
    for identity in registered_identities():
        for cluster in registry.names():
            if unreadable is not None and cluster in unreadable:
                continue
            client = registry.get(cluster)
            resource = resource_of(identity)
            scope: tuple[str | None, ...] = (None,)
            if cluster == MANAGEMENT_CLUSTER and management_namespaces:
                scope = management_namespaces
            try:
                items = [o for ns in scope for o in client.list_objects(resource, ns)]
            except KindNotServedError:
                continue
            except UNREADABLE_ERRORS as exc:
                if unreadable is not None:
                    unreadable[cluster] = str(exc)
                continue
            for item in items:
                meta = item.get("metadata") or {}
                yield identity.key(meta["namespace"], meta["name"], cluster)


def queue_view(queue: WorkQueue, key: OrderKey) -> QueueView:
    """The work queue's view of one key."""
    last = queue.last_pass(key)
    return QueueView(
        pending=queue.is_pending(key),
        locked=queue.is_locked(key),
        due_at=queue.due_at(key, Timetable.DUE),
        refresh_at=queue.due_at(key, Timetable.REFRESH),
        last_pass_at=last[0] if last else None,
        last_result=last[1] if last else "",
    )


@dataclass(frozen=True)
class StatusFilter:
    """Which orders ``tenantdb status`` shows; None matches any."""

    kind: str | None = None
    namespace: str | None = None
    cluster: str | None = None
    """A cluster's name; "" is the management cluster."""
    not_ready: bool = False

    def admits(self, key: OrderKey) -> bool:
        """Whether the key's parts pass the filter (readiness is judged on the row)."""
        return (
            (self.kind is None or key.kind == self.kind)
            and (self.namespace is None or key.namespace == self.namespace)
            and (self.cluster is None or key.cluster == self.cluster)
        )


@dataclass(frozen=True)
class StatusReport:
    """The rows of ``tenantdb status``, and the clusters that could not be read (cluster: why):
    an outage is said, never shown as orders that do not exist."""

    rows: list[OrderReport]
    unreadable: dict[str, str]


def gather_status(
    registry: ClusterRegistry,
    queue: WorkQueue,
    keys: list[OrderKey] | None = None,
    where: StatusFilter | None = None,
    management_namespaces: tuple[str, ...] = (),
) -> StatusReport:
    """The status rows of the given orders, or of every order tenantdb can see, that pass
    ``where``; an order whose cluster cannot be read passes a not-Ready filter."""
    where = where or StatusFilter()
    now = time.time()
    unreadable: dict[str, str] = {}
    rows = []
    listed = list_order_keys(registry, unreadable, management_namespaces)
    for key in keys if keys is not None else sorted(listed):
        if not where.admits(key):
            continue
        view = queue_view(queue, key)
        try:
            order = read_order(registry, key)
        except UNREADABLE_ERRORS as exc:
            unreadable.setdefault(key.cluster, str(exc))
            rows.append(build_unreadable_report(key, str(exc), view, now))
            continue
        row = build_report(key, order, view, now)
        if not (where.not_ready and row.ready == "True"):
            rows.append(row)
    return StatusReport(rows, unreadable)
