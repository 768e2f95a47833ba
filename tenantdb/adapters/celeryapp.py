"""The Celery application shared by every process that publishes or runs tenantdb tasks.

Workers, the watcher, beat and the CLI all build their app here, so producers and consumers agree
on the broker, the serializer, the routes and, above all, the Redis visibility timeout (with a
shared broker the shortest one wins, so a producer with another value would cause redeliveries).

Tasks carry order keys only and return condition reasons only; there is no result backend, so
nothing a task returns is stored beyond the events Flower shows.

Every message a tenantdb process publishes carries its publish time in the ``tenantdb-published``
header (epoch seconds), which is how beat tells the age of the oldest message in a queue
(``message_age``); a retry is a new message and is stamped anew.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from typing import Any

from celery import Celery
from celery.signals import before_task_publish
from kombu import Queue as KombuQueue

from tenantdb.adapters.broker import transport_for
from tenantdb.adapters.redisclient import HEALTH_CHECK_SECONDS, broker_connection
from tenantdb.adapters.workqueue import (
    EVENT_PRIORITY,
    PRIORITY_STEPS,
    REFRESH_PRIORITY,
    Publish,
    PublishLater,
)
from tenantdb.core.keys import OrderKey
from tenantdb.core.tasknames import RECONCILE_ORDER, Queue, queue_for
from tenantdb.settings import Settings

PUBLISHED_HEADER = "tenantdb-published"
"""The message header holding the epoch second a tenantdb process published the message at."""


@before_task_publish.connect(weak=False, dispatch_uid="tenantdb-published")
def _stamp_published(headers: dict[str, Any] | None = None, **_: Any) -> None:
    if headers is not None:
        headers[PUBLISHED_HEADER] = round(time.time(), 3)


def message_published_at(raw: bytes | str) -> float | None:
    """When a message as the Redis transport keeps it was published; None without the stamp."""
    try:
        message = json.loads(raw)
        stamp = message["headers"][PUBLISHED_HEADER]
        return float(stamp)
    except (ValueError, KeyError, TypeError):
        return None


def message_tag(raw: bytes | str) -> str | None:
    """The transport's delivery tag of a message, which names it while it waits."""
    try:
        return str(json.loads(raw)["properties"]["delivery_tag"])
    except (ValueError, KeyError, TypeError):
        return None


def _route(
    name: str, args: Any, kwargs: Any, options: Any, task: Any = None, **kw: Any
) -> Mapping[str, str] | None:
    """Route tenantdb's tasks to their chain's queue; leave other tasks alone."""
    try:
        return {"queue": queue_for(name).value}
    except ValueError:
        return None


def build_celery_app(
    settings: Settings, *, include: Iterable[str] = (), guard_transport: bool = True
) -> Celery:
    """Build the Celery app for these settings.

    Args:
        settings: the process settings.
        include: task modules a worker imports at start-up.
        guard_transport: run on tenantdb's guarded Redis transport (``tenantdb.adapters.broker``);
            Flower, which runs no task and reads the broker URL's scheme, takes kombu's own.
    """
    broker = broker_connection(settings)
    app = Celery("tenantdb", broker=broker.url, include=list(include))
    transport = {
        **broker.transport_options,
        "visibility_timeout": settings.visibility_timeout_seconds,
        # Prefixes the broker's own keys (queues, unacked sets) too, so several tenantdb
        # installations, or test runs, can share one Redis without reading each other's tasks.
        "global_keyprefix": settings.key_prefix,
        # As the work queue's own client: a broker that vanished without a reset fails a
        # publish or a poll after the timeout instead of blocking it for good.
        "socket_timeout": settings.redis_socket_timeout_seconds,
        "socket_connect_timeout": settings.redis_socket_timeout_seconds,
        "socket_keepalive": True,
        "health_check_interval": HEALTH_CHECK_SECONDS,
        # Two lists per queue: events' passes and chain steps first, periodic refreshes after
        # them (``tenantdb.adapters.workqueue.REFRESH_PRIORITY``). A worker's poll names every
        # queue's first list before any queue's second.
        "priority_steps": list(PRIORITY_STEPS),
    }
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,
        result_backend=None,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_acks_on_failure_or_timeout=True,
        worker_prefetch_multiplier=1,
        # A worker that loses the broker stops its running tasks and their messages go back to the
        # queue; a copy that runs again finds the fence taken, ends without writing, and leaves
        # the order dirty, so a new pass starts once the stopped step's lease runs out.
        worker_cancel_long_running_tasks_on_connection_loss=True,
        task_time_limit=settings.task_time_limit_seconds,
        task_soft_time_limit=max(1, settings.task_time_limit_seconds - 10),
        broker_transport_options=transport,
        # A rediss:// broker is verified: without these kombu would skip the certificate check.
        broker_use_ssl=broker.ssl or None,
        broker_connection_retry_on_startup=True,
        # kombu's transport, guarded so that a lost broker never ends the worker process.
        broker_transport=transport_for(broker.url) if guard_transport else None,
        task_queues=[KombuQueue(q.value) for q in Queue],
        task_default_queue=Queue.RECONCILE.value,
        task_routes=(_route,),
        task_create_missing_queues=False,
        worker_send_task_events=True,
        task_send_sent_event=True,
        worker_hijack_root_logger=False,
        enable_utc=True,
    )
    return app


def make_publisher(app: Celery, *, refresh: bool = False) -> Publish:
    """Return a function that publishes the reconcile task of a key through ``app``.

    A refresh's publisher sends it at the lowest priority, behind every other message.
    """
    priority = REFRESH_PRIORITY if refresh else EVENT_PRIORITY

    def publish(key: OrderKey) -> None:
        app.send_task(RECONCILE_ORDER, args=[str(key)], priority=priority)

    return publish


def make_later_publisher(app: Celery) -> PublishLater:
    """Return a function that publishes the reconcile task of a key through ``app``, to start
    no sooner than the given number of seconds from now (a busy key's next pass)."""

    def publish_later(key: OrderKey, seconds: float) -> None:
        app.send_task(RECONCILE_ORDER, args=[str(key)], countdown=seconds, priority=EVENT_PRIORITY)

    return publish_later
