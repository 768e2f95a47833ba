"""The Redis connections of tenantdb: a plain URL, or a Sentinel-managed master.

With ``TENANTDB_REDIS_SENTINELS`` set, the work-queue client asks the Sentinels for the current
master of ``TENANTDB_REDIS_SENTINEL_MASTER`` (and follows a failover), and the Celery broker URL
lists the Sentinels with the master's name in the transport options.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit

import redis
from redis.sentinel import Sentinel

from tenantdb.settings import Settings

log = logging.getLogger(__name__)


def sentinel_hosts(settings: Settings) -> list[tuple[str, int]]:
    """The Sentinels as (host, port) pairs; empty without Sentinel."""
    hosts = []
    for item in settings.redis_sentinels.split(","):
        host, _, port = item.strip().rpartition(":")
        if host:
            hosts.append((host, int(port)))
    return hosts


HEALTH_CHECK_SECONDS = 30
"""A connection idle this long is checked with a PING before its next command."""


def connection_options(settings: Settings) -> dict[str, Any]:
    """What every work-queue connection is opened with: a bound on each command and connect,
    TCP keepalive, and a health check after idling, so a Redis that vanished without a reset
    (a dead node, a dropped route) fails a command instead of blocking it for ever."""
    timeout = settings.redis_socket_timeout_seconds
    return {
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "socket_keepalive": True,
        "health_check_interval": HEALTH_CHECK_SECONDS,
    }


def build_redis(settings: Settings) -> redis.Redis:
    """A client of the work-queue Redis: the URL's server, or the Sentinels' current master."""
    hosts = sentinel_hosts(settings)
    options = connection_options(settings)
    if not hosts:
        return redis.Redis.from_url(settings.redis_url, **options)
    parts = urlsplit(settings.redis_url)
    db = int(parts.path.strip("/") or 0)
    # redis-py before 8.2 leaves Sentinel unannotated (hence ignores that may go unused);
    # master_for returns a Redis client.
    sentinel = Sentinel(hosts, socket_timeout=5.0, password=parts.password)  # type: ignore[no-untyped-call, unused-ignore]
    master: redis.Redis = sentinel.master_for(  # type: ignore[no-untyped-call, unused-ignore]
        settings.redis_sentinel_master, db=db, password=parts.password, **options
    )
    return master


def broker_connection(settings: Settings) -> tuple[str, dict[str, Any]]:
    """The Celery broker URL and the transport options Sentinel needs (none without it)."""
    hosts = sentinel_hosts(settings)
    if settings.broker_url or not hosts:
        return settings.effective_broker_url, {}
    parts = urlsplit(settings.redis_url)
    auth = f":{parts.password}@" if parts.password else ""
    db = parts.path.strip("/") or "0"
    url = ";".join(f"sentinel://{auth}{host}:{port}/{db}" for host, port in hosts)
    return url, {"master_name": settings.redis_sentinel_master}


def eviction_problem(client: redis.Redis) -> str:
    """What is wrong with the server's eviction policy for tenantdb, or ``""``.

    Pending marks, leases, timetables and the broker's messages live in Redis; a server that
    evicts keys under memory pressure (any ``maxmemory-policy`` but ``noeviction``) drops them in
    silence, and an order whose marks are gone waits for its next refresh. A server that refuses
    ``CONFIG GET`` (many managed services) cannot be checked, which is said too.
    """
    try:
        found = client.config_get("maxmemory-policy")
    except redis.ResponseError:
        return (
            "Redis does not answer CONFIG GET maxmemory-policy; make sure it is noeviction,"
            " or keys tenantdb needs may be evicted under memory pressure"
        )
    policy = str(found.get("maxmemory-policy", ""))
    if policy in ("", "noeviction"):
        return ""
    return (
        f"Redis evicts keys under memory pressure (maxmemory-policy {policy}); set it to"
        " noeviction, or pending marks, leases and queued steps may vanish"
    )


def warn_about_eviction(client: redis.Redis) -> None:
    """Log `eviction_problem` as an error once, at start; an unreachable Redis is not judged."""
    try:
        problem = eviction_problem(client)
    except (redis.RedisError, OSError):
        return
    if problem:
        log.error("%s", problem)


def access_problem(settings: Settings) -> str:
    """What is wrong with how tenantdb reaches its Redis, or ``""``: a URL (tenantdb's or the
    broker's) without credentials, or without TLS to another host.

    Whoever reaches that Redis can delay, drop or replay tenantdb's work and read the orders'
    specs and statuses (a note they write is refused, its seal does not open); it belongs
    inside tenantdb's trust boundary, behind a password or an ACL user.
    """
    problems: list[str] = []
    for name, url in (
        ("TENANTDB_REDIS_URL", settings.redis_url),
        ("the broker", settings.broker_url),
    ):
        if not url:
            continue
        parts = urlsplit(url)
        if not parts.password:
            problems.append(f"{name} carries no password (nor ACL user)")
        local = parts.hostname in ("127.0.0.1", "localhost", "::1") or parts.scheme == "unix"
        if parts.scheme == "redis" and not local and not settings.redis_sentinels:
            problems.append(f"{name} is not TLS (rediss://)")
    if not problems:
        return ""
    return (
        "; ".join(problems)
        + ": whoever reaches that Redis can delay, drop or replay tenantdb's work; give it a"
        " password or an ACL user, and TLS across the network"
    )


def warn_about_access(settings: Settings) -> None:
    """Log ``access_problem`` as a warning once, at start."""
    problem = access_problem(settings)
    if problem:
        log.warning("%s", problem)


def reply_text(value: object) -> str:
    """A Redis reply as text, whether the client decodes replies or not."""
    return value.decode() if isinstance(value, bytes) else str(value)
