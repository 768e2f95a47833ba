"""A dead MySQL site costs the fleet one timeout, and one group never takes every worker.

The guard's circuits and slots on the real Redis (and fakeredis, for the same scripts), then the
admin pool against a site that accepts TCP and never answers, as two worker processes see it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import fakeredis
import pytest
import redis

from devstack.mysql_group.blackhole import Blackhole
from tenantdb.adapters.groupguard import Entry, GroupGuard
from tenantdb.adapters.mysqladmin import AdminError, AdminLogin, AdminPool, GroupBusyError, Target
from tenantdb.settings import load_settings

GROUP, SITE = "bloodraven/dead@uid-1", "mysql-dead-dc1-internal.bloodraven.svc.cluster.local:3306"


@pytest.fixture(params=["real-redis", "fakeredis"])
def client(request: pytest.FixtureRequest, real_redis: redis.Redis) -> redis.Redis:
    """The real Redis, or a fakeredis server with Lua, for the same tests."""
    if request.param == "real-redis":
        return real_redis
    return fakeredis.FakeRedis()


def _guard(client: redis.Redis, prefix: str, **kw: float) -> GroupGuard:
    options: dict[str, float] = {
        "limit": 2,
        "lease_seconds": 30,
        "base_seconds": 0.2,
        "cap_seconds": 0.5,
    }
    options.update(kw)
    return GroupGuard(client, prefix, **options)  # type: ignore[arg-type]


def test_a_failed_connect_opens_the_circuit_for_every_process_and_a_good_one_closes_it(
    client: redis.Redis, key_prefix: str
) -> None:
    one, other = _guard(client, key_prefix), _guard(client, key_prefix)
    assert one.enter(GROUP, SITE).entry is Entry.GO
    assert one.trip(SITE, "connect to site dc1: timed out") == pytest.approx(0.2)
    seen = other.enter(GROUP, SITE)
    assert (seen.entry, seen.message) == (Entry.OPEN, "connect to site dc1: timed out")
    assert 0 < seen.closes_in <= 0.2
    # Open twice as long after a second failure in a row, up to the cap.
    assert one.trip(SITE, "again") == pytest.approx(0.4)
    assert one.trip(SITE, "again") == pytest.approx(0.5)
    time.sleep(0.6)
    assert other.enter(GROUP, SITE).entry is Entry.GO  # the next pass tries for real
    one.heal(SITE)
    assert one.trip(SITE, "fresh") == pytest.approx(0.2)  # healing forgot the failures


def test_a_group_has_a_limited_number_of_slots_and_a_dead_holder_frees_its_own(
    client: redis.Redis, key_prefix: str
) -> None:
    guard = _guard(client, key_prefix, lease_seconds=0.3)
    first, second = guard.enter(GROUP, SITE), guard.enter(GROUP, SITE)
    assert (first.entry, second.entry) == (Entry.GO, Entry.GO)
    assert guard.enter(GROUP, SITE).entry is Entry.BUSY
    assert guard.enter("bloodraven/main@uid-2", "elsewhere:3306").entry is Entry.GO
    guard.leave(GROUP, first.token)
    third = guard.enter(GROUP, SITE)
    assert third.entry is Entry.GO
    assert guard.enter(GROUP, SITE).entry is Entry.BUSY
    time.sleep(0.4)  # neither holder left: their leases ran out
    assert guard.enter(GROUP, SITE).entry is Entry.GO


@pytest.fixture
def blackhole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Blackhole]:
    """A site that accepts TCP and never answers, behind the group's in-cluster address."""
    hole = Blackhole().start()
    host, port = hole.address
    path = tmp_path / "services.json"
    path.write_text(json.dumps({SITE: f"{host}:{port}"}))
    monkeypatch.setenv("TENANTDB_ADDRESS_MAP_FILE", str(path))
    monkeypatch.setenv("TENANTDB_MYSQL_CONNECT_TIMEOUT_SECONDS", "1")
    monkeypatch.setenv("TENANTDB_MYSQL_READ_TIMEOUT_SECONDS", "30")
    load_settings.cache_clear()
    yield hole
    hole.stop()
    load_settings.cache_clear()


def test_a_site_that_never_answers_costs_one_connect_timeout_for_all_processes(
    real_redis: redis.Redis, key_prefix: str, blackhole: Blackhole
) -> None:
    target = Target(GROUP, "dc1", SITE, "mysql-dead-dc1.bloodraven.svc")
    login = AdminLogin("bloodraven", "pw")
    worker_a = AdminPool(_guard(real_redis, key_prefix, base_seconds=30, cap_seconds=60))
    worker_b = AdminPool(_guard(real_redis, key_prefix, base_seconds=30, cap_seconds=60))
    started = time.monotonic()
    with pytest.raises(AdminError) as first, worker_a.session(target, login):
        pass
    waited = time.monotonic() - started
    assert first.value.transient
    # The greeting is read with the connect timeout (1 s), not the read timeout (30 s).
    assert 0.9 <= waited < 5, waited
    assert blackhole.accepted == 1
    started = time.monotonic()
    with pytest.raises(AdminError) as second, worker_b.session(target, login):
        pass
    assert time.monotonic() - started < 0.5, (str(second.value), blackhole.accepted)
    assert "failed a moment ago" in str(second.value)
    assert second.value.transient
    assert 25 < second.value.retry_after <= 30  # the pass comes back once the circuit closes
    assert blackhole.accepted == 1  # the other process never dialled
    assert "pw" not in str(first.value) + str(second.value)


def test_a_busy_group_turns_a_pass_away_at_once(real_redis: redis.Redis, key_prefix: str) -> None:
    guard = _guard(real_redis, key_prefix, limit=1)
    taken = guard.enter(GROUP, SITE)
    assert taken.entry is Entry.GO
    pool = AdminPool(guard)
    target = Target(GROUP, "dc1", SITE, "mysql-dead-dc1.bloodraven.svc")
    with pytest.raises(GroupBusyError), pool.session(target, AdminLogin("u", "pw")):
        pass
    guard.leave(GROUP, taken.token)
