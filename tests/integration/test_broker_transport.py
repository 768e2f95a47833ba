"""The broker transport: kombu's Redis transport, and a lost broker that never ends a worker.

A worker that loses Redis closes its broker connection and then puts back the messages its
channel held; with kombu's own channel that last step raised AttributeError (the closed
connection has no client), which the worker treats as unrecoverable, and it exited. The
guarded channel reports a connection error instead, which the worker rides out.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import redis
from kombu.utils.functional import maybe_list

from tenantdb.adapters.broker import RedisTransport, transport_for
from tenantdb.adapters.celeryapp import build_celery_app, make_publisher
from tenantdb.core.keys import OrderKey
from tenantdb.settings import Settings
from tests.conftest import REDIS_URL
from tests.faults.conftest import RedisServer


def test_tenantdb_talks_to_redis_through_the_guarded_transport(key_prefix: str) -> None:
    app = build_celery_app(Settings(redis_url=REDIS_URL, key_prefix=key_prefix))
    with app.connection_for_write() as connection:
        assert isinstance(connection.transport, RedisTransport)
        channel: Any = connection.default_channel
        assert channel.client.ping()


def test_a_channel_of_a_closed_connection_reports_a_connection_error(key_prefix: str) -> None:
    app = build_celery_app(Settings(redis_url=REDIS_URL, key_prefix=key_prefix))
    connection = app.connection_for_write()
    channel: Any = connection.default_channel
    errors = tuple(maybe_list(connection.connection_errors))
    transport = channel.connection
    connection.close()  # what the worker does first when the broker goes away
    assert transport.client is None, "closing detaches the transport from its connection"
    with pytest.raises(redis.ConnectionError) as raised:
        channel._connparams()
    assert isinstance(raised.value, errors), "the worker ignores it as a lost connection"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://127.0.0.1:6379/0", "tenantdb.adapters.broker:RedisTransport"),
        (
            "sentinel://s1:26379/0;sentinel://s2:26379/0",
            "tenantdb.adapters.broker:SentinelTransport",
        ),
        ("rediss://127.0.0.1:6380/0", "tenantdb.adapters.broker:RedisTransport"),
        ("amqp://guest@rabbit//", None),
    ],
)
def test_only_redis_and_sentinel_urls_get_the_guarded_transport(
    url: str, expected: str | None
) -> None:
    assert transport_for(url) == expected


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_a_publish_to_a_broker_that_stopped_answering_fails_instead_of_hanging(
    key_prefix: str, tmp_path: Path
) -> None:
    server = RedisServer(tmp_path / "redis")
    server.start()
    try:
        settings = Settings(
            redis_url=server.url, key_prefix=key_prefix, redis_socket_timeout_seconds=1
        )
        publish = make_publisher(build_celery_app(settings))
        publish(OrderKey.parse("probe/tenant-a/first"))  # the connection is open and in use
        server.pause()  # a Redis that hangs without resetting its connections
        outcome: list[BaseException | None] = []

        def attempt() -> None:
            try:
                publish(OrderKey.parse("probe/tenant-a/second"))
                outcome.append(None)
            except Exception as exc:  # whichever error kombu surfaces
                outcome.append(exc)

        caller = threading.Thread(target=attempt, daemon=True)
        caller.start()
        caller.join(timeout=30)
        assert not caller.is_alive(), "the publish hung on the frozen broker"
        assert outcome[0] is not None, "a publish to a frozen broker cannot succeed"
    finally:
        server.stop()
