"""Fixtures every test layer shares: the real Redis, a key prefix of each test's own, and the
platforms shared between tests."""

from __future__ import annotations

import atexit
import os
import secrets
import tempfile
from collections.abc import Iterator

import pytest
import redis

from tenantdb.adapters.groupguard import GroupGuard
from tests.platforms import PlatformPool

REDIS_URL = os.environ.get("TENANTDB_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def _note_keys_file() -> str:
    # A worker seals the notes it leaves in Redis with these keys; every worker this pytest
    # process runs (eager, in-process or a subprocess) shares one file, as a deployment's
    # workers share one Secret. A stack on a platform gets the platform's own.
    fd, path = tempfile.mkstemp(prefix="tenantdb-note-keys-")
    with os.fdopen(fd, "w") as handle:
        handle.write(secrets.token_hex(32) + "\n")
    atexit.register(os.unlink, path)
    return path


os.environ.setdefault("TENANTDB_NOTE_KEYS_FILE", _note_keys_file())
# The test MariaDB servers a group's sites run on speak plaintext unless a test gives them TLS;
# tenantdb reaches only the groups named here that way (a group with spec.tls always over TLS).
os.environ.setdefault("TENANTDB_MYSQL_PLAINTEXT_GROUPS", "bloodraven/*")


@pytest.fixture(scope="session")
def platforms(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlatformPool]:
    """The real platforms this pytest process shares between its tests (`tests.platforms`)."""
    pool = PlatformPool(tmp_path_factory.mktemp("platforms"))
    try:
        yield pool
    finally:
        pool.close()


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


@pytest.fixture
def admin_guard(real_redis: redis.Redis, key_prefix: str) -> GroupGuard:
    """The MySQL groups' guard (circuits, dial turns, slots) on the real Redis, under the test's
    own prefix: what the admin pools of every worker share."""
    return GroupGuard(
        real_redis, key_prefix, limit=2, lease_seconds=60, base_seconds=5, cap_seconds=10
    )
