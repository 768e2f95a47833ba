"""The watcher process: leader election, engaged clusters, and the watch loops of the leader.

Owns ``run_watcher`` (what ``tenantdb watcher`` runs) and the ``Watcher`` that supervises the
loops: it campaigns for the Redis lease of the ``watcher`` role, and only while it leads does it
run a list-then-watch loop for every watched kind on every engaged cluster: cluster-wide on the
management cluster, and on a target cluster in each namespace the ControlPlanes assign there (the
order kinds and delivered Secrets) or place Keystone in (Database CRs), as the chart grants it;
the namespaces follow the ControlPlanes as they change. On gaining the lease
it starts them all with an empty index, so each one relists and no event of the gap between two
leaders is lost; on losing it, the guarded ``enqueue`` refuses at once (it asks the lease, which
also runs out locally when Redis cannot be reached) and the loops are stopped. Every few seconds
it looks at the cluster configuration files and engages added clusters, drops removed ones and
reconnects to clusters whose connection changed, without a restart.

It must never decide anything about an order, talk to OpenBao or SQL, or log an object's body;
log lines carry kinds, cluster names and order keys only.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from redis import RedisError

from tenantdb.adapters.celeryapp import build_celery_app, make_publisher
from tenantdb.adapters.clusters import (
    ClusterConfig,
    ClusterRegistry,
    compute_config_stamp,
    load_cluster_config,
)
from tenantdb.adapters.kube import KubeClient
from tenantdb.adapters.leader import LeaderLease
from tenantdb.adapters.metrics import (
    CLUSTER_CONTEXTS_SKIPPED,
    ENQUEUES,
    LEADER,
    REDIS_ROLLBACKS,
    WATCH_LAST_EVENT,
)
from tenantdb.adapters.metrics import serve as serve_metrics
from tenantdb.adapters.redisclient import build_redis, warn_about_access, warn_about_eviction
from tenantdb.adapters.workqueue import Publish, WorkQueue
from tenantdb.core.keys import MANAGEMENT_CLUSTER, OrderKey
from tenantdb.settings import Settings
from watcher.index import SharedIndex
from watcher.loop import LoopTiming, WatchLoop
from watcher.routes import (
    Dispatcher,
    PublishTo,
    Route,
    cluster_label,
    load_routes,
    routes_for,
)

log = logging.getLogger(__name__)

ROLE = "watcher"
LoopId = tuple[str, str, str]
"""A loop's (cluster, kind, namespace); the namespace is "" for a cluster-wide watch."""


@dataclass(frozen=True, slots=True)
class WatcherConfig:
    """How the watcher paces itself."""

    timing: LoopTiming = field(default_factory=LoopTiming)
    cluster_poll: float = 5.0
    """How often the cluster configuration files are looked at."""
    leader_ttl: float = 10.0
    leader_retry: float = 1.0
    sync_wait: float = 10.0
    """How long a first relist waits for the index it maps against."""
    join_timeout: float = 5.0

    @classmethod
    def from_settings(cls, settings: Settings) -> WatcherConfig:
        """Read the watcher's settings, falling back to the defaults where one is not set."""
        timing = LoopTiming(
            server_timeout=int(settings.watch_timeout_seconds),
            read_timeout=float(settings.watch_inactivity_seconds),
            backoff_cap=float(settings.watch_backoff_max_seconds),
            unserved_retry=float(settings.watch_unserved_retry_seconds),
        )
        return cls(timing, cluster_poll=float(settings.cluster_poll_seconds))


class Watcher:
    """Supervises the watch loops of one watcher replica."""

    def __init__(
        self,
        settings: Settings,
        queue: WorkQueue,
        lease: LeaderLease,
        config: WatcherConfig | None = None,
        *,
        route_modules: Iterable[str],
        load_config: Callable[[Settings], ClusterConfig] = load_cluster_config,
        config_stamp: Callable[[Settings], object] = compute_config_stamp,
    ) -> None:
        """Prepare a replica; ``run`` campaigns and watches.

        ``route_modules`` declare the routes of the served kinds (the entry point names those of
        ``tenantdb.core.served.KINDS``); the settings' kind modules are imported after them.
        """
        load_routes((*route_modules, *settings.kind_module_names))
        self.settings = settings
        self.queue = queue
        self.lease = lease
        self.config = config or WatcherConfig.from_settings(settings)
        self._load_config = load_config
        self._config_stamp = config_stamp
        self._stamp: object = None
        self._failed_stamp: object = None
        self._registry: ClusterRegistry | None = None
        self._digests: dict[str, str] = {}
        self._clients: dict[str, KubeClient] = {}
        self._loops: dict[LoopId, WatchLoop] = {}
        self._retired_loops: list[WatchLoop] = []
        self._retired_clients: list[KubeClient] = []
        self._index = SharedIndex()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._lapsed = threading.Event()
        self._round_at = time.monotonic()
        self._campaign: threading.Thread | None = None

    # -- what tests and operators look at ------------------------------------------------------

    def engaged(self) -> list[str]:
        """The clusters this replica runs watch loops on ("" is management)."""
        with self._lock:
            return sorted({cluster for cluster, _, _ in self._loops})

    def watches(self, *, listed: bool = False) -> list[LoopId]:
        """The (cluster, kind, namespace) of every watch loop this replica runs; with
        ``listed``, of those that have handed on their first list."""
        with self._lock:
            return sorted(
                i for i, loop in self._loops.items() if loop.listed.is_set() or not listed
            )

    def liveness(self, max_age: float) -> str | None:
        """Why this replica does not get on with its work (one line), or None while it does:
        its supervisor has not gone round, its lease campaign stopped, or one of its watch loops
        stopped or has handed on no event, bookmark or relist for ``max_age`` seconds (an API
        server sends a bookmark about every minute on a quiet watch)."""
        now = time.monotonic()
        if now - self._round_at > max_age:
            return f"the watcher's supervisor has not gone round for {now - self._round_at:.0f} s"
        if self._campaign is not None and not self._campaign.is_alive():
            return "the watcher's lease campaign stopped"
        with self._lock:
            loops = list(self._loops.values())
        for loop in loops:
            where = f"watch of {loop.route.kind} on {loop.dispatcher.where}"
            if not loop.alive:
                return f"{where} stopped"
            silent = now - loop.dispatcher.heard_at
            if silent > max_age:
                return f"{where} has heard nothing for {silent:.0f} s (limit {max_age:.0f} s)"
        return None

    def synced(self) -> bool:
        """Whether this replica leads and every loop has handed on its first list."""
        with self._lock:
            loops = list(self._loops.values())
        return bool(loops) and all(loop.listed.is_set() for loop in loops)

    # -- enqueue, guarded by the lease -----------------------------------------------------------

    def _is_own_write(self, cluster: str, obj: Mapping[str, Any]) -> bool:
        try:
            return self.queue.is_own_write(cluster, obj)
        except (RedisError, OSError):
            return False

    def enqueue(self, key: OrderKey) -> None:
        """Queue a reconcile of ``key``, unless this replica no longer leads.

        An event that arrives while the lease cannot be confirmed (a renewal slower than the
        lease's safe share) is not queued; the watches then relist from scratch as soon as the
        lease is confirmed again, so the event is found on the relist rather than lost.
        """
        if not self.lease.is_leader:
            self._lapsed.set()
            self._wake.set()
            return
        published = self.queue.enqueue(key)
        ENQUEUES.labels(result="queued" if published else "deduped").inc()
        log.debug("enqueued %s (%s)", key, "queued" if published else "deduped")

    # -- the supervisor --------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Campaign, engage clusters and run the leader's loops until ``stop`` is set."""
        LEADER.labels(role=ROLE).set(0)
        campaign_stop = threading.Event()
        campaign = threading.Thread(
            target=self.lease.run,
            args=(campaign_stop, self._on_lease),
            name="watcher-lease",
            daemon=True,
        )
        campaign.start()
        self._campaign = campaign
        try:
            while not stop.is_set():
                self._round_at = time.monotonic()
                self._reload_clusters()
                self._converge()
                self._reap()
                self._pause(stop)
        finally:
            campaign_stop.set()
            campaign.join(self.config.join_timeout)
            self._shutdown()

    def _pause(self, stop: threading.Event) -> None:
        deadline = time.monotonic() + self.config.cluster_poll
        while not stop.is_set() and time.monotonic() < deadline:
            if self._wake.wait(min(0.2, self.config.cluster_poll)):
                break
            if self._index.namespaces_changed.is_set():
                break  # a target cluster's namespaces may have changed
            if self._lapsed.is_set() and self.lease.is_leader:
                break  # the lease is confirmed again: relist what went unqueued at once
        self._wake.clear()

    def _on_lease(self, held: bool) -> None:
        LEADER.labels(role=ROLE).set(1 if held else 0)
        if not held:
            with self._lock:
                self._retire(list(self._loops))
        self._wake.set()

    def _reload_clusters(self) -> None:
        stamp = self._config_stamp(self.settings)
        if stamp in (self._stamp, self._failed_stamp):
            return
        try:
            config = self._load_config(self.settings)
        except Exception as exc:  # a half-written file is read again once it changes
            self._failed_stamp = stamp
            log.warning(
                "cluster configuration unreadable (%s); keeping the clusters engaged",
                type(exc).__name__,
            )
            return
        with self._lock:
            for name in sorted(set(self._digests) | set(config.digests)):
                before, after = self._digests.get(name), config.digests.get(name)
                if before == after:
                    continue
                if before is not None:
                    self._retire([i for i in self._loops if i[0] == name])
                    client = self._clients.pop(name, None)
                    if client is not None:
                        self._retired_clients.append(client)
                log.info(
                    "cluster %s %s",
                    cluster_label(name),
                    "added" if before is None else "removed" if after is None else "changed",
                )
            self._stamp, self._registry, self._digests = stamp, config.registry, config.digests
        for context, problem in sorted(config.registry.skipped.items()):
            log.warning("cluster context %r skipped, its orders get no pass: %s", context, problem)
        CLUSTER_CONTEXTS_SKIPPED.set(len(config.registry.skipped))

    def _client(self, cluster: str) -> KubeClient | None:
        client = self._clients.get(cluster)
        if client is None and self._registry is not None:
            try:
                client = self._clients[cluster] = self._registry.get(cluster)
            except Exception as exc:  # one bad cluster must not stop the others
                log.warning(
                    "cannot build a client for cluster %s (%s)",
                    cluster_label(cluster),
                    type(exc).__name__,
                )
        return client

    def _converge(self) -> None:
        leading = self.lease.is_leader
        with self._lock:
            if not leading:
                self._retire(list(self._loops))
                return
            if self._must_relist() and self._loops:
                self._retire(list(self._loops))
            if not self._loops:
                # A new term (or the first): everything relists against a fresh index.
                self._lapsed.clear()
                self._index = SharedIndex()
            self._index.namespaces_changed.clear()
            wanted: set[LoopId] = set()
            for cluster in sorted(self._digests, key=lambda c: (c != "", c)):
                client = self._client(cluster)
                if client is None:
                    wanted |= {i for i in self._loops if i[0] == cluster}
                    continue
                for route in routes_for(cluster):
                    for namespace in self._namespaces(cluster, route):
                        loop_id = (cluster, route.kind, namespace or "")
                        wanted.add(loop_id)
                        if loop_id not in self._loops:
                            self._start_loop(loop_id, client, route, namespace)
            unwanted = sorted(set(self._loops) - wanted)
            for cluster, kind, namespace in unwanted:
                log.info(
                    "no longer watching %s in %s on %s", kind, namespace, cluster_label(cluster)
                )
            self._retire(unwanted)

    def _must_relist(self) -> bool:
        """Whether events may have gone unqueued this term, so every watch must relist."""
        lapsed = self._lapsed.is_set()
        if lapsed and self._loops:
            log.warning("events went unqueued while the leader lease lapsed; relisting")
        return self._rolled_back() or lapsed

    def _rolled_back(self) -> bool:
        """Whether Redis lost enqueues it had acknowledged, while the leader lease stayed.

        A partial loss (the last second of an append-only file, a failover to a replica a
        little behind) can keep the lease and lose an order's pending mark and message; no new
        term then relists. The count of enqueues going back shows it.
        """
        try:
            found = self.queue.rolled_back()
        except (RedisError, OSError):
            return False
        if found is None:
            return False
        seen, now = found
        REDIS_ROLLBACKS.inc()
        log.warning(
            "Redis lost writes it had acknowledged (its count of enqueues went back from %d to"
            " %d); relisting every watch",
            seen,
            now,
        )
        return True

    def _namespaces(self, cluster: str, route: Route) -> list[str | None]:
        """Where a route is watched on a cluster: [None] is cluster-wide.

        On the management cluster, with ``management_namespaces``, a namespaced kind in each of
        those. On a target cluster that grants the kind per namespace, the namespaces the route
        names there (for MariaDBDatabase: those the ControlPlanes assign or place Keystone in,
        none until the ControlPlanes are listed).
        """
        served = self.settings.management_namespace_list
        if cluster == MANAGEMENT_CLUSTER and served and route.resource.namespaced:
            return [*served]
        if (
            cluster == MANAGEMENT_CLUSTER
            or route.namespaces is None
            or self.settings.target_watch_scope == "cluster"
        ):
            return [None]
        return [*sorted(route.namespaces(self._index, cluster))]

    def _start_loop(
        self, loop_id: LoopId, client: KubeClient, route: Route, namespace: str | None
    ) -> None:
        cluster = loop_id[0]
        stopping = threading.Event()
        dispatcher = Dispatcher(
            route,
            cluster,
            self._index,
            self._enqueuer(stopping),
            stopping,
            sync_wait=self.config.sync_wait,
            is_own_write=self._is_own_write,
            namespace=namespace,
            publish_to=PublishTo(
                self.queue.redis, self.settings.key_prefix, self.lease.token, cluster, namespace
            ),
        )
        loop = WatchLoop(client, dispatcher, stopping, self.config.timing)
        self._loops[loop_id] = loop
        loop.start()
        if namespace is not None:
            log.info("watching %s in %s on %s", route.kind, namespace, cluster_label(cluster))

    def _enqueuer(self, stopping: threading.Event) -> Callable[[OrderKey], None]:
        # A loop being retired is not listened to: its events are the next loops' to find.
        def enqueue(key: OrderKey) -> None:
            if not stopping.is_set():
                self.enqueue(key)

        return enqueue

    def _retire(self, loop_ids: list[LoopId]) -> None:
        for loop_id in loop_ids:
            loop = self._loops.pop(loop_id, None)
            if loop is not None:
                loop.stop()
                self._retired_loops.append(loop)
        # A (cluster, kind) no loop watches any more has no last event to report: left in place,
        # its timestamp would only age (and TenantdbWatchStale fire) until the process restarts.
        watched = {(cluster, kind) for cluster, kind, _ in self._loops}
        for cluster, kind in {(cluster, kind) for cluster, kind, _ in loop_ids} - watched:
            with contextlib.suppress(KeyError):
                WATCH_LAST_EVENT.remove(cluster_label(cluster), kind)

    def _reap(self) -> None:
        with self._lock:
            self._retired_loops = [loop for loop in self._retired_loops if loop.alive]
            in_use = {id(loop.client) for loop in self._retired_loops}
            in_use |= {id(c) for c in self._clients.values()}
            closing = [c for c in self._retired_clients if id(c) not in in_use]
            self._retired_clients = [c for c in self._retired_clients if id(c) in in_use]
        for client in closing:
            client.api.close()

    def _shutdown(self) -> None:
        with self._lock:
            self._retire(list(self._loops))
            loops = list(self._retired_loops)
            self._retired_clients.extend(self._clients.values())
            self._clients.clear()
        deadline = time.monotonic() + self.config.join_timeout
        for loop in loops:
            loop.join(max(0.0, deadline - time.monotonic()))
        self._reap()
        LEADER.labels(role=ROLE).set(0)


def run_watcher(
    settings: Settings,
    stop: threading.Event,
    *,
    route_modules: Iterable[str],
    publish: Publish | None = None,
    config: WatcherConfig | None = None,
) -> None:
    """Run a watcher replica until ``stop`` is set: metrics, lease, clusters, loops.

    Args:
        settings: the process settings (Redis, key prefix, kubeconfig, metrics port).
        stop: set it to shut down; the lease is released so a standby takes over at once.
        route_modules: the modules declaring the routes of the served kinds.
        publish: sends the reconcile task of a key; the Celery publisher by default.
        config: pacing; read from the settings by default.
    """
    config = config or WatcherConfig.from_settings(settings)
    client = build_redis(settings)
    warn_about_eviction(client)
    warn_about_access(settings)
    queue = WorkQueue(
        client,
        publish or make_publisher(build_celery_app(settings)),
        prefix=settings.key_prefix,
        lock_ttl=settings.lock_ttl_seconds,
        pending_ttl=settings.pending_ttl_seconds,
    )
    lease = LeaderLease(
        client, ROLE, prefix=settings.key_prefix, ttl=config.leader_ttl, retry=config.leader_retry
    )
    watcher = Watcher(settings, queue, lease, config, route_modules=route_modules)
    max_age = settings.watcher_liveness_seconds
    serve_metrics(settings.metrics_port, lambda: watcher.liveness(max_age))
    try:
        watcher.run(stop)
    finally:
        client.close()
