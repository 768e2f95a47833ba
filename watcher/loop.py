"""The list-then-watch loop of one kind on one cluster, in a thread of its own.

Owns the list-then-watch loop client-go's reflector runs: a chunked LIST whose items go to the
dispatcher as a relist, then a WATCH from the list's resourceVersion with bookmarks, a server-side
timeout and a client read timeout that is the inactivity watchdog (longer than the server's
bookmark interval); the resourceVersion follows every event, bookmarks included, so a reconnect
resumes where the stream broke. A 410 (an expired resourceVersion) relists; a silent stream
reconnects at once (the read timeout was its wait); a broken or failing one reconnects after a
capped, jittered exponential backoff; a kind the cluster does not
serve is tried again later. Every restart is counted with its reason. ``stop`` ends the loop
promptly by closing the open stream.

It must never map events itself, touch Redis, or log an object's body.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass

from tenantdb.adapters.kube import (
    GoneError,
    KindNotServedError,
    KubeClient,
    KubeError,
    UnavailableError,
    WatchStream,
    WatchTimeoutError,
)
from tenantdb.adapters.metrics import WATCH_RESTARTS
from tenantdb.core.watching import compute_backoff
from watcher.routes import Dispatcher, cluster_label

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LoopTiming:
    """The timeouts and backoff of a watch loop."""

    server_timeout: int = 300
    """timeoutSeconds: the server ends each watch after this long; the loop reconnects."""
    read_timeout: float = 90.0
    """The inactivity watchdog: a stream silent this long (no event, no bookmark) is dead."""
    connect_timeout: float = 10.0
    backoff_base: float = 0.5
    backoff_cap: float = 30.0
    unserved_retry: float = 60.0
    """How long before a kind the cluster does not serve is tried again."""
    page: int = 500


class Reason:
    """Why a watch stream ended, as ``tenantdb_watch_restarts_total`` counts it."""

    CLOSED = "closed"
    GONE = "gone"
    TIMEOUT = "timeout"
    UNAVAILABLE = "unavailable"
    NOT_SERVED = "not_served"
    ERROR = "error"
    ENQUEUE = "enqueue_failed"


class WatchLoop:
    """List, then watch, one kind on one cluster until told to stop."""

    def __init__(
        self,
        client: KubeClient,
        dispatcher: Dispatcher,
        stopping: threading.Event,
        timing: LoopTiming,
        *,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        """Prepare the loop; ``start`` runs it.

        Args:
            client: the cluster's client.
            dispatcher: where relists and events go.
            stopping: the event ``stop`` sets; the dispatcher enqueues nothing once it is set.
            timing: timeouts and backoff.
            jitter: a source of numbers in [0, 1) for the backoff.
        """
        self.client = client
        self.dispatcher = dispatcher
        self.route = dispatcher.route
        self.cluster = dispatcher.cluster
        self.timing = timing
        self.listed = threading.Event()
        """Set once the first list was handed on (or the kind turned out not to be served)."""
        self._stopping = stopping
        self._jitter = jitter
        self._version = ""
        self._failures = 0
        self._stream: WatchStream | None = None
        self._lock = threading.Lock()
        self._label = cluster_label(self.cluster)
        self._where = dispatcher.where
        self._thread = threading.Thread(
            target=self._run, name=f"watch {self.route.kind}@{self._where}", daemon=True
        )

    def start(self) -> None:
        """Run the loop in its thread."""
        self._thread.start()

    def stop(self) -> None:
        """Tell the loop to stop and close its open stream; does not wait."""
        self._stopping.set()
        with self._lock:
            stream = self._stream
        if stream is not None:
            stream.close()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread to end; return whether it did."""
        if self._thread.ident is not None:
            self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def alive(self) -> bool:
        """Whether the thread still runs."""
        return self._thread.is_alive()

    def _run(self) -> None:
        while not self._stopping.is_set():
            reason = self._cycle()
            if self._stopping.is_set():
                return
            WATCH_RESTARTS.labels(cluster=self._label, kind=self.route.kind, reason=reason).inc()
            if reason == Reason.NOT_SERVED:
                delay = self.timing.unserved_retry
            else:
                delay = compute_backoff(
                    self._failures,
                    base=self.timing.backoff_base,
                    cap=self.timing.backoff_cap,
                    jitter=self._jitter(),
                )
            self._stopping.wait(delay)

    def _cycle(self) -> str:
        """List if needed, then follow one stream; return why it ended."""
        try:
            if not self._version:
                self._relist()
            if self._follow():
                self._failures = 0
            else:
                # A stream that ends without a single event or bookmark is not progress.
                self._failures += 1
            return Reason.CLOSED
        except GoneError:
            self._version = ""
            return Reason.GONE
        except KindNotServedError:
            self._version = ""
            if not self.listed.is_set():
                log.info("%s is not served on %s; trying again later", self.route.kind, self._where)
            self.dispatcher.not_served()
            self.listed.set()
            return Reason.NOT_SERVED
        except KubeError as exc:
            return self._broken(exc)
        except Exception as exc:  # an enqueue failure must not end the loop
            # The event that failed may be lost from the stream; a relist hands it on again.
            self._version = ""
            self._failures += 1
            if not self._stopping.is_set():
                log.warning(
                    "watch of %s on %s: handing on events failed (%s); relisting",
                    self.route.kind,
                    self._where,
                    type(exc).__name__,
                )
            return Reason.ENQUEUE

    def _broken(self, exc: KubeError) -> str:
        """Count a stream that ended on an error, log it, and say why it ended."""
        if isinstance(exc, WatchTimeoutError):
            # The server took the watch and then sent nothing, not even a bookmark: a quiet kind
            # whose server bookmarks only once its resourceVersion moves, or a dead connection.
            # Either way reconnect from the same resourceVersion at once, not after a growing
            # backoff: the wait was the read timeout already, and while no stream is open the
            # kind's index is not trusted and passes list instead of reading it.
            self._failures = 0
            reason, level = Reason.TIMEOUT, logging.INFO
        else:
            self._failures += 1
            reason = Reason.UNAVAILABLE if isinstance(exc, UnavailableError) else Reason.ERROR
            level = logging.WARNING
        if not self._stopping.is_set():
            log.log(
                level,
                "watch of %s on %s restarts (%s): %s",
                self.route.kind,
                self._where,
                reason,
                exc,
            )
        return reason

    def _relist(self) -> None:
        items, version = self.client.list_with_version(
            self.route.resource,
            self.dispatcher.namespace,
            label_selector=self.route.label_selector,
            field_selector=self.route.field_selector,
            page=self.timing.page,
        )
        if self._stopping.is_set():
            return
        self.dispatcher.relisted(items)
        self._version = version
        self.listed.set()
        log.info("listed %d %s on %s", len(items), self.route.kind, self._where)

    def _follow(self) -> bool:
        """Follow one watch stream to its end; return whether anything arrived on it."""
        if self._stopping.is_set() or not self._version:
            return True
        stream = self.client.watch(
            self.route.resource,
            self.dispatcher.namespace,
            resource_version=self._version,
            label_selector=self.route.label_selector,
            field_selector=self.route.field_selector,
            timeout_seconds=self.timing.server_timeout,
            connect_timeout=self.timing.connect_timeout,
            read_timeout=self.timing.read_timeout,
        )
        with self._lock:
            self._stream = stream
        if self._stopping.is_set():
            stream.close()
        progressed = False
        events = stream.events()
        try:
            self.dispatcher.following()
            for event in events:
                if self._stopping.is_set():
                    break
                self.dispatcher.handle(event)
                self._version = event.resource_version or self._version
                progressed = True
        finally:
            self.dispatcher.interrupted()
            with self._lock:
                self._stream = None
            events.close()
            stream.close()
        return progressed
