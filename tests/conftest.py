"""Fixtures every test layer shares: the real Redis, and a key prefix of each test's own."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import pytest
import redis

REDIS_URL = os.environ.get("TENANTDB_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


@pytest.fixture
def key_prefix() -> str:
    """A Redis key prefix no other test uses."""
    return f"tenantdb-test-{secrets.token_hex(4)}:"


@pytest.fixture
def real_redis(key_prefix: str) -> Iterator[redis.Redis]:
    """A client of the real Redis; every key under the test's prefix is removed afterwards."""
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.ConnectionError:
        pytest.fail(f"Redis is not reachable at {REDIS_URL}; start it (see README)")
    yield client
    for name in client.scan_iter(match=f"{key_prefix}*", count=1000):
        client.delete(name)
    client.close()
