"""Only the leader watches and enqueues; a standby takes over quickly and relists the gap."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.conftest import REDIS_URL
from tests.integration.watcher.conftest import (
    FAST,
    ORDERS,
    Published,
    StartWatcher,
    key,
    metric,
    order,
)
from tests.realclusters import ApiServer
from tests.support import stop_processes, wait_for

REPO = Path(__file__).resolve().parents[3]


def test_a_replica_that_lost_its_lease_stops_and_the_next_term_relists_the_gap(
    servers: dict[str, ApiServer],
    start_watcher: StartWatcher,
    published: Published,
    real_redis: redis.Redis,
    key_prefix: str,
) -> None:
    kube = servers["management"].cluster
    watcher = start_watcher(config=dataclasses.replace(FAST, leader_ttl=1.5))
    assert metric("tenantdb_leader", role="watcher") == 1

    # Another replica holds the lease now (as after a partition): this one must stand down.
    real_redis.set(f"{key_prefix}leader:watcher", "another-replica", px=60_000)
    wait_for(lambda: watcher.engaged() == [], 10.0, "the replica kept watching without the lease")
    assert not watcher.lease.is_leader
    wait_for(lambda: metric("tenantdb_leader", role="watcher") == 0, 10.0, "still reported leading")

    kube.create(ORDERS, order("in-the-gap"), "tenant-a")
    assert key("in-the-gap") not in published

    real_redis.delete(f"{key_prefix}leader:watcher")  # the other replica is gone
    published.take(key("in-the-gap"))
    assert watcher.engaged() == ["", "edge-1"]


def test_a_leader_whose_redis_lost_its_data_relists_every_order(
    servers: dict[str, ApiServer],
    start_watcher: StartWatcher,
    published: Published,
    real_redis: redis.Redis,
    key_prefix: str,
) -> None:
    kube = servers["management"].cluster
    kube.create(ORDERS, order("before-the-loss"), "tenant-a")
    start_watcher(config=dataclasses.replace(FAST, leader_ttl=1.5))  # its first list is drained

    # Redis restarted without its data: the lease, pending marks and timetables are gone, and
    # with them every order's come-back. Only a relist brings the orders back.
    for name in real_redis.scan_iter(match=f"{key_prefix}*"):
        real_redis.delete(name)
    published.take(key("before-the-loss"))


def test_an_event_during_a_lapse_of_the_leader_flag_is_found_by_a_relist(
    servers: dict[str, ApiServer],
    start_watcher: StartWatcher,
    published: Published,
) -> None:
    kube = servers["management"].cluster
    # The cluster files are looked at seldom, so only the lapse itself can bring a relist.
    config = dataclasses.replace(FAST, leader_ttl=3.0, cluster_poll=60.0)
    watcher = start_watcher(config=config)

    # A renewal slower than the lease's safe share: the lease still holds in Redis, but the
    # replica cannot vouch for it and does not enqueue, while its watches read on.
    watcher.lease._valid_until = 0.0
    kube.create(ORDERS, order("during-the-lapse"), "tenant-a")
    published.take(key("during-the-lapse"))


def _published(client: redis.Redis, prefix: str) -> list[tuple[int, str]]:
    rows = [
        r.decode() if isinstance(r, bytes) else str(r)
        for r in client.lrange(f"{prefix}test:published", 0, -1)
    ]
    return [(int(pid), text) for pid, text in (r.split(" ", 1) for r in rows)]


@pytest.fixture
def replicas(kubeconfig_file: Path, key_prefix: str) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Start watcher processes on demand; kill what is left afterwards."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    stop_processes(started)


def _start(
    replicas: list[subprocess.Popen[bytes]], kubeconfig_file: Path, key_prefix: str
) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "TENANTDB_KUBECONFIG": str(kubeconfig_file),
        "TENANTDB_MANAGEMENT_CONTEXT": "management",
        "TENANTDB_REDIS_URL": REDIS_URL,
        "TENANTDB_KEY_PREFIX": key_prefix,
        "TENANTDB_METRICS_PORT": "0",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.watcher.watcher_main"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    replicas.append(process)
    return process


@pytest.mark.slow
def test_only_the_leader_enqueues_and_a_standby_leads_within_15_s_of_its_death(
    servers: dict[str, ApiServer],
    kubeconfig_file: Path,
    replicas: list[subprocess.Popen[bytes]],
    real_redis: redis.Redis,
    key_prefix: str,
) -> None:
    kube = servers["management"].cluster
    kube.create(ORDERS, order("app"), "tenant-a")
    wanted = str(key("app"))

    leader = _start(replicas, kubeconfig_file, key_prefix)
    wait_for(
        lambda: (leader.pid, wanted) in _published(real_redis, key_prefix),
        20,
        "the first replica never led",
    )
    standby = _start(replicas, kubeconfig_file, key_prefix)
    wait_for(
        lambda: bool(real_redis.exists(f"{key_prefix}test:up:{standby.pid}")),
        20,
        "the standby never started",
    )

    real_redis.delete(f"{key_prefix}pending:{wanted}")  # a worker took the first pass
    kube.patch(ORDERS, "app", {"metadata": {"annotations": {"seen-by": "leader"}}}, "tenant-a")
    wait_for(
        lambda: _published(real_redis, key_prefix).count((leader.pid, wanted)) >= 2,
        10.0,
        "the leader missed an edit",
    )
    assert {pid for pid, _ in _published(real_redis, key_prefix)} == {leader.pid}

    real_redis.delete(f"{key_prefix}pending:{wanted}")
    leader.send_signal(signal.SIGKILL)  # no chance to give the lease up
    died = time.monotonic()
    kube.create(ORDERS, order("in-the-gap"), "tenant-a")
    wait_for(
        lambda: (standby.pid, str(key("in-the-gap"))) in _published(real_redis, key_prefix),
        20,
        "the standby did not take over and relist",
    )
    assert time.monotonic() - died < 15
    assert (standby.pid, wanted) in _published(real_redis, key_prefix), "the relist covers all"
