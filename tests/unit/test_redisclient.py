"""Redis and broker connections: a plain URL, or Sentinels following a master."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis

from devstack.mysql_group.blackhole import Blackhole
from tenantdb.adapters.redisclient import (
    RedisAccessError,
    access_problem,
    broker_connection,
    build_redis,
    redis_access,
    sentinel_hosts,
)
from tenantdb.settings import Settings


def test_without_sentinels_the_broker_is_the_redis_url() -> None:
    settings = Settings(redis_url="redis://r:6379/2")
    assert sentinel_hosts(settings) == []
    broker = broker_connection(settings)
    assert (broker.url, broker.transport_options, broker.ssl) == ("redis://r:6379/2", {}, {})


def test_sentinels_list_every_host_with_the_master_name() -> None:
    settings = Settings(
        redis_url="redis://:pw@ignored:6379/3",
        redis_sentinels="s1:26379, s2:26380",
        redis_sentinel_master="tenantdb",
    )
    assert sentinel_hosts(settings) == [("s1", 26379), ("s2", 26380)]
    broker = broker_connection(settings)
    assert broker.url == "sentinel://:pw@s1:26379/3;sentinel://:pw@s2:26380/3"
    assert broker.transport_options == {"master_name": "tenantdb"}
    assert broker.ssl == {}


def test_an_explicit_broker_url_wins_over_sentinels() -> None:
    settings = Settings(redis_sentinels="s1:26379", broker_url="redis://broker:6379/0")
    broker = broker_connection(settings)
    assert (broker.url, broker.transport_options) == ("redis://broker:6379/0", {})


def test_a_password_file_and_acl_user_fill_in_what_the_url_leaves_out(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("p@ss/w:rd\n")  # as a mounted Secret may end
    settings = Settings(
        redis_url="redis://redis:6379/4",
        redis_username="tenantdb",
        redis_password_file=str(secret),
    )
    access = redis_access(settings)
    assert (access.username, access.password, access.db) == ("tenantdb", "p@ss/w:rd", 4)
    assert "p@ss" not in repr(access)
    broker = broker_connection(settings)
    assert broker.url == "redis://tenantdb:p%40ss%2Fw%3Ard@redis:6379/4"
    assert "p@ss" not in repr(broker)
    assert access_problem(settings).startswith("TENANTDB_REDIS_URL is not TLS")


def test_the_urls_own_password_wins_over_the_file(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("from-file")
    settings = Settings(redis_url="redis://:from-url@r/0", redis_password_file=str(secret))
    assert redis_access(settings).password == "from-url"


@pytest.mark.parametrize("content", [None, "", "\n"])
def test_a_password_file_that_cannot_be_used_is_one_clear_error(
    tmp_path: Path, content: str | None
) -> None:
    secret = tmp_path / "password"
    if content is not None:
        secret.write_text(content)
    settings = Settings(redis_url="redis://r/0", redis_password_file=str(secret))
    with pytest.raises(RedisAccessError, match="Redis password file"):
        build_redis(settings)


def test_rediss_is_verified_tls_to_the_server_and_every_sentinel() -> None:
    settings = Settings(
        redis_url="rediss://:pw@ignored/1",
        redis_sentinels="s1:26379,s2:26379",
        redis_tls_ca_file="/ca.pem",
    )
    verified = {
        "ssl_cert_reqs": "required",
        "ssl_check_hostname": True,
        "ssl_ca_certs": "/ca.pem",
    }
    broker = broker_connection(settings)
    assert broker.ssl == verified
    assert broker.transport_options["sentinel_kwargs"]["ssl"] is True
    assert broker.transport_options["sentinel_kwargs"]["ssl_ca_certs"] == "/ca.pem"
    plain = broker_connection(Settings(redis_url="rediss://:pw@redis.example/0"))
    assert plain.url == "rediss://:pw@redis.example/0"
    assert plain.ssl == {"ssl_cert_reqs": "required", "ssl_check_hostname": True}


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
        ("redis://:s3cret@127.0.0.1:6379/0", "s1:26379", "TENANTDB_REDIS_URL is not TLS"),
        ("redis://:s3cret@127.0.0.1:6379/0", "127.0.0.1:26379", ""),
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
    if ":26379" in broker:  # the Sentinels, not a broker
        settings = Settings(redis_url=url, redis_sentinels=broker)
    else:
        settings = Settings(redis_url=url, broker_url=broker)
    problem = access_problem(settings)
    assert said in problem if said else problem == ""
    assert "s3cret" not in problem
