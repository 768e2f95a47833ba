"""The Redis broker transports tenantdb runs Celery on: kombu's, with one guard.

kombu's Redis channel builds the parameters of a new Redis connection from its transport
connection's client. When a worker loses the broker it closes that connection first, and a
channel that then needs a Redis connection (to put back the messages it had received, as a
channel does when it closes) finds the client gone: kombu raises ``AttributeError``, which the
worker takes for an unrecoverable error, and the worker process exits. The guard raises
``redis.ConnectionError`` instead, one of the transport's connection errors, so the worker
treats it as the broker being away and reconnects; the messages it held come back with the
visibility timeout, as for any connection lost.

``transport_for`` names the guarded transport for a broker URL (``broker_transport``); schemes
other than ``redis://``, ``rediss://`` and ``sentinel://`` keep kombu's own.
"""

from __future__ import annotations

from typing import Any

import redis
from kombu.transport import redis as kombu_redis


class _GuardedConnect:
    """Refuse to build a Redis connection once the channel's transport connection is closed.

    Mixed in ahead of a kombu channel class, so both channels below share the one guard.
    """

    connection: Any

    def _connparams(self, asynchronous: bool = False) -> Any:
        if getattr(self.connection, "client", None) is None:
            raise redis.ConnectionError("the broker connection is closed")
        return super()._connparams(asynchronous)  # type: ignore[misc]


class RedisChannel(_GuardedConnect, kombu_redis.Channel):
    """kombu's Redis channel, refusing to connect once its transport connection is closed."""


class RedisTransport(kombu_redis.Transport):
    """kombu's Redis transport with the guarded channel."""

    Channel = RedisChannel


class SentinelChannel(_GuardedConnect, kombu_redis.SentinelChannel):
    """kombu's Sentinel channel, refusing to connect once its transport connection is closed."""


class SentinelTransport(kombu_redis.SentinelTransport):
    """kombu's Sentinel transport with the guarded channel."""

    Channel = SentinelChannel


def transport_for(broker_url: str) -> str | None:
    """The transport class path for a broker URL, or None to keep kombu's choice."""
    scheme = broker_url.partition("://")[0]
    if scheme in ("redis", "rediss"):
        return f"{__name__}:RedisTransport"
    if scheme == "sentinel":
        return f"{__name__}:SentinelTransport"
    return None
