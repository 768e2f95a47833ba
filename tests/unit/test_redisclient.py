"""Redis and broker connections: a plain URL, or Sentinels following a master."""

from __future__ import annotations

import time

import pytest
import redis

from devstack.mysql_group.blackhole import Blackhole
from tenantdb.adapters.redisclient import (
    access_problem,
    broker_connection,
    build_redis,
    sentinel_hosts,
)
from tenantdb.settings import Settings


def test_without_sentinels_the_broker_is_the_redis_url() -> None:
    settings = Settings(redis_url="redis://r:6379/2")
    assert sentinel_hosts(settings) == []
    assert broker_connection(settings) == ("redis://r:6379/2", {})


def test_sentinels_list_every_host_with_the_master_name() -> None:
    settings = Settings(
        redis_url="redis://:pw@ignored:6379/3",
        redis_sentinels="s1:26379, s2:26380",
        redis_sentinel_master="tenantdb",
    )
    assert sentinel_hosts(settings) == [("s1", 26379), ("s2", 26380)]
    url, options = broker_connection(settings)
    assert url == "sentinel://:pw@s1:26379/3;sentinel://:pw@s2:26380/3"
    assert options == {"master_name": "tenantdb"}


def test_an_explicit_broker_url_wins_over_sentinels() -> None:
    settings = Settings(redis_sentinels="s1:26379", broker_url="redis://broker:6379/0")
    assert broker_connection(settings) == ("redis://broker:6379/0", {})


def test_a_redis_that_accepts_and_never_answers_fails_a_command_in_its_timeout() -> None:
    hole = Blackhole()
    hole.start()
    host, port = hole.address
    try:
        client = build_redis(
            Settings(redis_url=f"redis://{host}:{port}/0", redis_socket_timeout_seconds=0.5)
        )
        started = time.monotonic()
        with pytest.raises(redis.TimeoutError):
            client.ping()
        waited = time.monotonic() - started
    finally:
        hole.stop()
    assert hole.accepted >= 1, "the connect went through; the answer never came"
    assert waited < 5, f"the command gave up after its timeout, not {waited:.1f} s later"


def test_every_connection_keeps_keepalive_and_a_health_check() -> None:
    client = build_redis(Settings(redis_url="redis://127.0.0.1:1/0"))
    kwargs = client.connection_pool.connection_kwargs
    assert kwargs["socket_timeout"] == kwargs["socket_connect_timeout"] == 10.0
    assert kwargs["socket_keepalive"] is True
    assert kwargs["health_check_interval"] == 30


@pytest.mark.parametrize(
    ("url", "broker", "said"),
    [
        ("redis://:s3cret@127.0.0.1:6379/0", "", ""),
        ("rediss://tenantdb:s3cret@redis.example:6380/0", "", ""),
        ("redis://127.0.0.1:6379/0", "", "TENANTDB_REDIS_URL carries no password"),
        ("redis://:s3cret@redis:6379/0", "", "TENANTDB_REDIS_URL is not TLS"),
        (
            "rediss://:s3cret@redis.example/0",
            "redis://broker.example/0",
            "the broker carries no password (nor ACL user); the broker is not TLS",
        ),
    ],
)
def test_a_redis_reached_without_credentials_or_tls_is_said_at_start(
    url: str, broker: str, said: str
) -> None:
    problem = access_problem(Settings(redis_url=url, broker_url=broker))
    assert said in problem if said else problem == ""
    assert "s3cret" not in problem
