"""The small controller runtime the devstack's stand-in operators share.

Owns the loop every stand-in controller (the mariadb-operator's, Bloodraven's) runs in the
devstack process: watch threads on each cluster's API (over HTTPS, see `devstack.kubeclient`)
that map events to object keys, one worker thread that reconciles keys level-based (re-reading
the object each time) with deduplication, delayed come-backs and a capped back-off after
errors, and a clean stop. Also the helpers those
controllers share: Kubernetes timestamps, Go durations, status conditions and core v1 Events.

It must never hold a lock while calling into a reconciler, never log an object body, and never
let one failing key stop the loop. Deliberately left out compared with controller-runtime:
informer caches (every reconcile reads through the API), leader election, rate limiters per key
beyond the back-off, and parallel workers (one worker keeps each stand-in's writes ordered).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from devstack.kubeclient import ApiError, KubeApi

log = logging.getLogger(__name__)

Obj = dict[str, Any]
_WATCH_WINDOW = 0.5
_MAX_BACKOFF = 10.0
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


@dataclass(frozen=True, order=True)
class Key:
    """One object a controller reconciles: its cluster, namespace and name."""

    cluster: str
    namespace: str
    name: str


Reconcile = Callable[[Key], float | None]
"""Reconcile one key; return seconds until it should come back, or None."""

Mapper = Callable[[str, Obj], Iterable[Key]]
"""Map a watch event (type, object) of a cluster to the keys it concerns."""


def now_text(moment: datetime | None = None) -> str:
    """Return a time as Kubernetes serializes `metav1.Time` (whole seconds, UTC)."""
    return (moment or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str | None) -> datetime | None:
    """Parse a `metav1.Time`; None when absent or unreadable."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None


def parse_go_duration(text: str) -> float:
    """Parse a Go `time.Duration` string such as `24h`, `1h0m0s` or `90s` into seconds.

    Raises:
        ValueError: The text is not a Go duration.
    """
    value = text.strip()
    if value == "0":
        return 0.0
    parts = _DURATION_PART.findall(value)
    if not parts or "".join(number + unit for number, unit in parts) != value:
        raise ValueError(f'time: invalid duration "{value}"')
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)


def condition(
    type_: str,
    status: bool,
    reason: str,
    message: str,
    previous: Iterable[Obj] = (),
    generation: int | None = None,
) -> Obj:
    """Build a `metav1.Condition`, keeping lastTransitionTime when the status did not flip."""
    text = "True" if status else "False"
    stamp = now_text()
    for old in previous:
        if old.get("type") == type_ and old.get("status") == text:
            stamp = str(old.get("lastTransitionTime") or stamp)
    built: Obj = {
        "type": type_,
        "status": text,
        "reason": reason,
        "message": message,
        "lastTransitionTime": stamp,
    }
    if generation is not None:
        built["observedGeneration"] = generation
    return built


def record_event(
    cluster: KubeApi,
    obj: Obj,
    reason: str,
    message: str,
    *,
    component: str,
    warning: bool = False,
) -> Obj:
    """Create a core v1 Event about an object, named `<object>.<hex nanoseconds>` like
    client-go's recorder names them."""
    m = meta(obj)
    stamp = now_text()
    namespace = str(m.get("namespace") or "default")
    body: Obj = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{m.get('name', '')}.{time.time_ns():x}", "namespace": namespace},
        "involvedObject": {
            "apiVersion": obj.get("apiVersion", ""),
            "kind": obj.get("kind", ""),
            "name": m.get("name", ""),
            "namespace": namespace,
            "uid": m.get("uid", ""),
            "resourceVersion": m.get("resourceVersion", ""),
        },
        "reason": reason,
        "message": message,
        "type": "Warning" if warning else "Normal",
        "source": {"component": component},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "reportingComponent": component,
        "reportingInstance": f"{component}-devstack",
    }
    return cluster.create("events", body, namespace, manager=component)


def get_or_none(cluster: KubeApi, resource: str, name: str, namespace: str = "") -> Obj | None:
    """Read an object; None when it (or its kind) is absent."""
    try:
        return cluster.get(resource, name, namespace)
    except ApiError as exc:
        if exc.code == 404:
            return None
        raise
    except KeyError:
        return None


def meta(obj: Obj) -> Obj:
    """Return an object's metadata (an empty dict when it has none)."""
    value = obj.get("metadata")
    return value if isinstance(value, dict) else {}


def owner_keys(cluster: str, obj: Obj, kind: str) -> list[Key]:
    """Map an object to the keys of its owners of one kind (same namespace)."""
    ns = str(meta(obj).get("namespace", ""))
    return [
        Key(cluster, ns, str(ref.get("name", "")))
        for ref in meta(obj).get("ownerReferences") or []
        if ref.get("kind") == kind
    ]


def stop_all(controllers: Iterable[Controller]) -> None:
    """Stop controllers together, so their watch windows end in parallel."""
    pending = list(controllers)
    for controller in pending:
        controller.request_stop()
    for controller in pending:
        controller.stop()


class Controller:
    """Watches that enqueue keys, and one worker that reconciles them."""

    def __init__(self, name: str, reconcile: Reconcile) -> None:
        """Name the controller (threads carry it) and bind its reconcile function."""
        self.name = name
        self._reconcile = reconcile
        self._watches: list[tuple[KubeApi, str, Mapper]] = []
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Key]] = []
        self._due: dict[Key, float] = {}
        self._failures: dict[Key, int] = {}
        self._busy = False
        self._seq = itertools.count()

    def watch(self, cluster: KubeApi, resource: str, mapper: Mapper) -> None:
        """Watch a resource on a cluster (call before `start`)."""
        self._watches.append((cluster, resource, mapper))

    def enqueue(self, key: Key, delay: float = 0.0) -> None:
        """Ask for a reconcile of a key after `delay` seconds (an earlier request wins)."""
        due = time.monotonic() + max(0.0, delay)
        with self._cond:
            current = self._due.get(key)
            if current is not None and current <= due:
                return
            self._due[key] = due
            heapq.heappush(self._heap, (due, next(self._seq), key))
            self._cond.notify_all()

    def start(self) -> None:
        """Start the watch threads and the worker."""
        for cluster, resource, mapper in self._watches:
            thread = threading.Thread(
                target=self._watch_loop,
                args=(cluster, resource, mapper),
                name=f"{self.name}-watch-{cluster.name}-{resource}",
                daemon=True,
            )
            self._threads.append(thread)
        self._threads.append(
            threading.Thread(target=self._work_loop, name=f"{self.name}-worker", daemon=True)
        )
        for thread in self._threads:
            thread.start()

    def request_stop(self) -> None:
        """Ask every thread to end, without waiting."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()

    def stop(self) -> None:
        """Stop every thread; a reconcile in progress finishes first."""
        self.request_stop()
        for thread in self._threads:
            thread.join(timeout=10)
        self._threads.clear()

    def wait_idle(self, timeout: float = 5.0) -> bool:
        """Wait until no key is due now and none is being reconciled."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                now = time.monotonic()
                if not self._busy and not any(due <= now for due in self._due.values()):
                    return True
                if now >= deadline:
                    return False
                self._cond.wait(min(0.05, deadline - now))

    # ------------------------------------------------------------ threads

    def _watch_loop(self, cluster: KubeApi, resource: str, mapper: Mapper) -> None:
        version: str | None = None
        while not self._stop.is_set():
            try:
                events = cluster.watch(
                    resource, None, version, timeout=cluster.watch_window, bookmarks=True
                )
                for type_, obj in events:
                    if self._stop.is_set():
                        return
                    if type_ == "ERROR":
                        version = None
                        break
                    # Bookmarks carry the store's cursor, so a quiet kind never falls behind.
                    version = str(meta(obj).get("resourceVersion") or "") or version
                    if type_ != "BOOKMARK":
                        for key in mapper(type_, obj):
                            self.enqueue(key)
            except Exception:
                if self._stop.is_set():
                    return
                log.exception("%s: watching %s on %s failed", self.name, resource, cluster.name)
                version = None
                self._stop.wait(1.0)

    def _next_key(self) -> Key | None:
        with self._cond:
            while not self._stop.is_set():
                now = time.monotonic()
                while self._heap and self._due.get(self._heap[0][2]) != self._heap[0][0]:
                    heapq.heappop(self._heap)
                if self._heap and self._heap[0][0] <= now:
                    _, _, key = heapq.heappop(self._heap)
                    del self._due[key]
                    self._busy = True
                    return key
                wait = self._heap[0][0] - now if self._heap else 1.0
                self._cond.wait(min(wait, 1.0))
        return None

    def _work_loop(self) -> None:
        while True:
            key = self._next_key()
            if key is None:
                return
            try:
                again = self._reconcile(key)
                self._failures.pop(key, None)
            except Exception as exc:
                failures = self._failures.get(key, 0) + 1
                self._failures[key] = failures
                again = min(_MAX_BACKOFF, 0.2 * 2**failures)
                log.warning(
                    "%s: reconciling %s/%s on %s failed (%s); retrying in %.1f s",
                    self.name,
                    key.namespace,
                    key.name,
                    key.cluster,
                    type(exc).__name__,
                    again,
                    exc_info=log.isEnabledFor(logging.DEBUG),
                )
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
            if again is not None and not self._stop.is_set():
                self.enqueue(key, again)
