"""A watcher replica as its own process, for the failover test.

Runs ``run_watcher`` with the settings of the environment (``TENANTDB_*``) and pacing short enough
for tests, except the leader lease, which keeps the production TTL and retry. Published keys are
pushed, with this process's pid, to the Redis list ``<prefix>test:published``; the key
``<prefix>test:up:<pid>`` says the replica is up. SIGTERM stops it cleanly.
"""

from __future__ import annotations

import os
import signal
import threading

import redis

from tenantdb.core.keys import OrderKey
from tenantdb.core.served import route_modules
from tenantdb.settings import Settings
from watcher.loop import LoopTiming
from watcher.process import WatcherConfig, run_watcher


def main() -> None:
    """Run one replica until SIGTERM."""
    settings = Settings()
    client = redis.Redis.from_url(settings.redis_url)
    pid = os.getpid()

    def publish(key: OrderKey) -> None:
        client.rpush(f"{settings.key_prefix}test:published", f"{pid} {key}")

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    config = WatcherConfig(
        LoopTiming(server_timeout=30, read_timeout=5.0, backoff_base=0.05, backoff_cap=0.5),
        cluster_poll=0.5,
    )
    client.set(f"{settings.key_prefix}test:up:{pid}", "1", ex=120)
    run_watcher(settings, stop, route_modules=route_modules(), publish=publish, config=config)


if __name__ == "__main__":
    main()
