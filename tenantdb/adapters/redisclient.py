"""The Redis connections of tenantdb: a plain URL, or a Sentinel-managed master.

With ``TENANTDB_REDIS_SENTINELS`` set, the work-queue client asks the Sentinels for the current
master of ``TENANTDB_REDIS_SENTINEL_MASTER`` (and follows a failover), and the Celery broker URL
lists the Sentinels with the master's name in the transport options.

Credentials and TLS come from the URL or, where it leaves them out, from
``TENANTDB_REDIS_USERNAME``, ``TENANTDB_REDIS_PASSWORD_FILE`` and ``TENANTDB_REDIS_TLS_CA_FILE``:
a ``rediss://`` URL means TLS, verified, to the server and, with Sentinel, to every Sentinel.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

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


class RedisAccessError(ValueError):
    """The Redis credentials cannot be read (a password file missing or empty)."""


@dataclass(frozen=True)
class RedisAccess:
    """Who tenantdb is to its Redis and how it reaches it, the URL and the settings combined."""

    username: str | None
    password: str | None = field(repr=False)
    db: int
    tls: dict[str, Any]
    """The TLS options of a connection (redis-py's and kombu's names); empty without TLS."""


def redis_access(settings: Settings) -> RedisAccess:
    """The credentials, database and TLS of tenantdb's own Redis (``redis_url``).

    Raises:
        RedisAccessError: the password file is set but cannot be read or is empty.
    """
    parts = urlsplit(settings.redis_url)
    password = unquote(parts.password) if parts.password else _password_file(settings)
    username = unquote(parts.username) if parts.username else settings.redis_username
    tls: dict[str, Any] = {}
    if parts.scheme == "rediss":
        tls = {"ssl_cert_reqs": "required", "ssl_check_hostname": True}
        if settings.redis_tls_ca_file:
            tls["ssl_ca_certs"] = settings.redis_tls_ca_file
    return RedisAccess(
        username=username or None,
        password=password or None,
        db=int(parts.path.strip("/") or 0),
        tls=tls,
    )


def _password_file(settings: Settings) -> str:
    if not settings.redis_password_file:
        return ""
    path = Path(settings.redis_password_file)
    try:
        password = path.read_text().strip("\r\n")
    except OSError as exc:
        raise RedisAccessError(
            f"cannot read the Redis password file {path}: {exc.strerror or exc}"
        ) from None
    if not password:
        raise RedisAccessError(f"the Redis password file {path} is empty")
    return password


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
    access = redis_access(settings)
    login: dict[str, Any] = {"username": access.username, "password": access.password}
    if not hosts:
        # The URL's own options win over these; they fill in what it leaves out.
        return redis.Redis.from_url(settings.redis_url, **login, **options, **access.tls)
    tls = {"ssl": True, **access.tls} if access.tls else {}
    timeout = settings.redis_socket_timeout_seconds
    # redis-py before 8.2 leaves Sentinel unannotated (hence ignores that may go unused);
    # master_for returns a Redis client.
    sentinel = Sentinel(  # type: ignore[no-untyped-call, unused-ignore]
        hosts,
        sentinel_kwargs={"socket_timeout": timeout, "socket_connect_timeout": timeout, **tls},
        **login,
        **tls,
    )
    master: redis.Redis = sentinel.master_for(  # type: ignore[no-untyped-call, unused-ignore]
        settings.redis_sentinel_master, db=access.db, **options
    )
    return master


@dataclass(frozen=True)
class BrokerConnection:
    """What the Celery app is given to reach its broker."""

    url: str = field(repr=False)
    """The broker URL, credentials included (Celery and Flower print it masked)."""
    transport_options: dict[str, Any]
    """Sentinel's master name and its connections' TLS; empty without Sentinel."""
    ssl: dict[str, Any]
    """``broker_use_ssl``: the TLS of the broker's own connections; empty without TLS."""


def broker_connection(settings: Settings) -> BrokerConnection:
    """The broker of these settings: ``broker_url`` as it is, else tenantdb's own Redis (or its
    Sentinels) with the credentials and TLS of ``redis_access``."""
    if settings.broker_url:
        tls = _url_tls(settings.broker_url, settings)
        return BrokerConnection(settings.broker_url, {}, tls)
    access = redis_access(settings)
    auth = _userinfo(access)
    hosts = sentinel_hosts(settings)
    if not hosts:
        parts = urlsplit(settings.redis_url)
        netloc = auth + parts.netloc.rpartition("@")[2]
        url = parts._replace(netloc=netloc).geturl()
        return BrokerConnection(url, {}, access.tls)
    url = ";".join(f"sentinel://{auth}{host}:{port}/{access.db}" for host, port in hosts)
    options: dict[str, Any] = {"master_name": settings.redis_sentinel_master}
    if access.tls:
        timeout = settings.redis_socket_timeout_seconds
        options["sentinel_kwargs"] = {
            "socket_timeout": timeout,
            "socket_connect_timeout": timeout,
            "ssl": True,
            **access.tls,
        }
    return BrokerConnection(url, options, access.tls)


def _userinfo(access: RedisAccess) -> str:
    if not access.password and not access.username:
        return ""
    user = quote(access.username or "", safe="")
    password = f":{quote(access.password, safe='')}" if access.password else ""
    return f"{user}{password}@"


def _url_tls(url: str, settings: Settings) -> dict[str, Any]:
    if urlsplit(url).scheme != "rediss" or "ssl_cert_reqs" in url:
        return {}
    tls: dict[str, Any] = {"ssl_cert_reqs": "required"}
    if settings.redis_tls_ca_file:
        tls["ssl_ca_certs"] = settings.redis_tls_ca_file
    return tls


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
        own = url == settings.redis_url and settings.redis_password_file
        if not parts.password and not own:
            problems.append(f"{name} carries no password (nor ACL user)")
        hosts = [parts.hostname]
        if url == settings.redis_url and settings.redis_sentinels:
            hosts = [host for host, _ in sentinel_hosts(settings)]
        local = parts.scheme == "unix" or all(h in ("127.0.0.1", "localhost", "::1") for h in hosts)
        if parts.scheme == "redis" and not local:
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
