"""tenantdb says at start when its Redis may evict the keys it lives on."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tenantdb.adapters.redisclient import eviction_problem, warn_about_eviction
from tests.faults.conftest import RedisServer


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[redis.Redis]:
    server = RedisServer(tmp_path / "redis")
    server.start()
    client = redis.Redis.from_url(server.url, socket_timeout=5)
    yield client
    client.close()
    server.stop()


def test_noeviction_passes_and_an_evicting_policy_is_named_in_an_error(
    own_redis: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    own_redis.config_set("maxmemory-policy", "noeviction")
    assert eviction_problem(own_redis) == ""

    own_redis.config_set("maxmemory-policy", "allkeys-lru")
    caplog.set_level(logging.ERROR, logger="tenantdb.adapters.redisclient")
    warn_about_eviction(own_redis)
    assert [r.getMessage() for r in caplog.records] == [
        "Redis evicts keys under memory pressure (maxmemory-policy allkeys-lru); set it to"
        " noeviction, or pending marks, leases and queued steps may vanish"
    ]


def test_a_redis_that_refuses_config_is_said_to_be_unchecked(
    own_redis: redis.Redis,
) -> None:
    # As managed services do: CONFIG renamed away.
    own_redis.acl_setuser(
        "tenantdb", enabled=True, nopass=True, commands=["+@all", "-config"], keys=["*"]
    )
    limited = redis.Redis(
        host="127.0.0.1",
        port=own_redis.connection_pool.connection_kwargs["port"],
        username="tenantdb",
        socket_timeout=5,
    )
    try:
        assert "does not answer CONFIG GET maxmemory-policy" in eviction_problem(limited)
    finally:
        limited.close()


def test_an_unreachable_redis_is_not_judged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR)
    warn_about_eviction(redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=1))
    assert caplog.records == []
