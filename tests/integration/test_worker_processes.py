"""Real ``celery worker`` processes running the reconcile protocol: crash safety and dedup.

Two worker processes (prefork pool, one child each) and a beat process run against the real
Redis under the test's own key prefix, with the probe pass of ``workqueue_app``.
"""

from __future__ import annotations

import itertools
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import cast
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis

from tenantdb.adapters.celeryapp import build_celery_app, make_publisher
from tenantdb.adapters.workqueue import WorkQueue
from tenantdb.core.keys import OrderKey
from tenantdb.core.tasknames import RECONCILE_ABORT
from tenantdb.settings import Settings
from tests.conftest import REDIS_URL
from tests.integration.workqueue_app import CHAIN_STEP, DELIVERY_STEP, chain_keys, probe_keys
from tests.support import stop_processes, wait_for

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
KEY = OrderKey.parse("probe/tenant-a/crash-me")
LOCK_TTL = 2.0


class Stack:
    """Worker and beat processes for one test, stopped when the test ends."""

    def __init__(self, prefix: str, logs: Path) -> None:
        self.prefix = prefix
        self.logs = logs
        self.env = {
            **os.environ,
            "TENANTDB_REDIS_URL": REDIS_URL,
            "TENANTDB_KEY_PREFIX": prefix,
            "TENANTDB_LOCK_TTL_SECONDS": str(LOCK_TTL),
            "PYTHONPATH": str(REPO),
        }
        self.procs: list[subprocess.Popen[bytes]] = []
        self.settings = Settings(redis_url=REDIS_URL, key_prefix=prefix, lock_ttl_seconds=LOCK_TTL)
        self.client = redis.Redis.from_url(REDIS_URL)
        self.app = build_celery_app(self.settings)
        self.queue = WorkQueue(
            self.client,
            make_publisher(self.app),
            publish_refresh=make_publisher(self.app, refresh=True),
            prefix=prefix,
            lock_ttl=LOCK_TTL,
        )
        self.keys = probe_keys(prefix, str(KEY))

    def start_worker(self, name: str, queues: str = "") -> None:
        log = self.logs / f"{name}.log"
        argv = [
            sys.executable, "-m", "celery", "-A", "tests.integration.workqueue_app", "worker",
            "-P", "prefork", "-c", "1", "-n", f"{name}@%h", "-l", "INFO",
            "--without-heartbeat", "--without-mingle", "--without-gossip",
        ]  # fmt: skip
        if queues:
            argv += ["-Q", queues]
        self._spawn(argv, log)
        wait_for(lambda: "ready." in log.read_text(errors="replace"), 60, f"{name} ready")

    def start_beat(self) -> None:
        self._spawn([sys.executable, "-m", "tenantdb.cli", "beat"], self.logs / "beat.log")

    def _spawn(self, argv: list[str], log: Path) -> None:
        with log.open("wb") as out:
            self.procs.append(
                subprocess.Popen(argv, cwd=REPO, env=self.env, stdout=out, stderr=subprocess.STDOUT)
            )

    def stop(self) -> None:
        stop_processes(self.procs)
        self.client.close()

    def started(self) -> list[int]:
        return [int(pid) for pid in self.client.lrange(self.keys["started"], 0, -1)]

    def completed(self) -> int:
        return int(self.client.get(self.keys["completed"]) or 0)

    def quiet(self) -> bool:
        """Nothing is queued, reserved, pending, locked or dirty: no further pass can start."""
        return self.quiet_for(KEY)()

    def quiet_for(self, key: OrderKey) -> Callable[[], bool]:
        """Whether nothing is queued, reserved, pending, locked or dirty for ``key``."""
        return lambda: (
            not (
                self.queue.queue_depth("reconcile")
                or self.client.hlen(f"{self.prefix}unacked")
                or self.queue.is_pending(key)
                or self.queue.is_locked(key)
                or self.client.zcard(self.queue.keys.dirty)
            )
        )


@pytest.fixture
def stack(real_redis: redis.Redis, key_prefix: str, tmp_path: Path) -> Iterator[Stack]:
    running = Stack(key_prefix, tmp_path)
    try:
        yield running
    finally:
        running.stop()


def test_a_pass_killed_with_sigkill_is_run_again_to_completion(stack: Stack) -> None:
    stack.start_worker("w1")
    stack.start_worker("w2")
    stack.start_beat()
    stack.client.set(stack.keys["hold"], "1")
    assert stack.queue.enqueue(KEY)
    wait_for(lambda: len(stack.started()) == 1, 30, "the first pass to start")
    os.kill(stack.started()[0], signal.SIGKILL)
    stack.client.delete(stack.keys["hold"])

    wait_for(lambda: stack.completed() == 1, 60, "the order to be processed again")
    assert len(stack.started()) >= 2
    assert stack.client.get(stack.keys["overlaps"]) is None


def test_a_worker_runs_events_passes_before_a_backlog_of_refreshes(stack: Stack) -> None:
    refreshed = [OrderKey.parse(f"probe/tenant-a/refreshed-{i}") for i in range(20)]
    for key in refreshed:
        assert stack.queue.enqueue(key, refresh=True)
    new = OrderKey.parse("probe/tenant-a/new-order")
    assert stack.queue.enqueue(new), "a new order's first pass"
    assert stack.queue.enqueue(refreshed[-1]), "an edit of an order whose refresh waits last"
    assert stack.queue.queue_depth("reconcile") == 22, "the depth counts both priorities"
    order = probe_keys(stack.prefix, str(KEY))["order"]

    stack.start_worker("w1")
    wait_for(lambda: stack.client.llen(order) == 21, 60, "every order's pass")
    wait_for(stack.quiet_for(refreshed[-1]), 30, "the refresh's message to end as stale")

    ran = [_text(k) for k in stack.client.lrange(order, 0, -1)]
    assert ran[:2] == [str(new), str(refreshed[-1])], "the events' passes go first"
    assert ran[2:] == [str(k) for k in refreshed[:-1]], "then the refreshes, oldest first"
    assert stack.client.llen(order) == 21, "the edited order's refresh found its work done"


def test_a_failed_pass_is_retried_as_the_keys_pending_pass(stack: Stack) -> None:
    stack.start_worker("w1")
    stack.client.set(stack.keys["fail"], 2)
    assert stack.queue.enqueue(KEY)
    wait_for(lambda: stack.completed() == 1, 30, "the pass to succeed on its third attempt")
    wait_for(stack.quiet, 30, "the work queue to settle")
    assert len(stack.started()) == 3, "two failures, then the pass that completed"
    assert stack.client.get(stack.keys["overlaps"]) is None


@pytest.fixture
def broker_user(real_redis: redis.Redis) -> Iterator[tuple[str, str]]:
    """A Redis user of its own for the broker (its name and a broker URL that logs in as it), so
    a test can take commands away from it.

    Requested before ``stack``, so it is removed only once the processes using it have stopped.
    """
    name, password = f"tenantdb-broker-{secrets.token_hex(3)}", secrets.token_hex(12)
    real_redis.acl_setuser(
        name,
        reset=True,
        enabled=True,
        passwords=[f"+{password}"],
        keys=["*"],
        channels=["*"],
        categories=["+@all"],
    )
    url = urlsplit(REDIS_URL)
    try:
        yield name, urlunsplit(url._replace(netloc=f"{name}:{password}@{url.hostname}:{url.port}"))
    finally:
        real_redis.acl_deluser(name)


def test_a_retry_the_broker_refuses_is_run_once_the_broker_takes_it_again(
    broker_user: tuple[str, str], stack: Stack
) -> None:
    user, stack.env["TENANTDB_BROKER_URL"] = broker_user
    stack.start_worker("w1")
    stack.start_beat()
    stack.client.set(stack.keys["hold"], "1")
    stack.client.set(stack.keys["fail"], 1)
    assert stack.queue.enqueue(KEY)
    wait_for(lambda: len(stack.started()) == 1, 30, "the first pass to start")

    # The broker refuses every publish from here on: the failing pass's retry, and the sweep's.
    stack.client.acl_setuser(user, enabled=True, commands=["-lpush"])
    stack.client.delete(stack.keys["hold"])
    stack.client.rpush(stack.keys["go"], "1")
    log = stack.logs / "w1.log"
    wait_for(
        lambda: "could not publish the retry" in log.read_text(errors="replace"),
        30,
        "the worker to find its retry refused",
    )
    wait_for(
        lambda: (
            not stack.queue.is_pending(KEY)
            and stack.client.zscore(stack.queue.keys.dirty, str(KEY)) is not None
        ),
        10,
        "the order to be left dirty with no pending mark",
    )
    time.sleep(3)  # long past the retry's countdown: the sweep's publishes are refused too
    assert stack.completed() == 0
    assert len(stack.started()) == 1

    stack.client.acl_setuser(user, enabled=True, commands=["+lpush"])
    wait_for(lambda: stack.completed() == 1, 30, "the order's pass once the broker takes it")
    wait_for(stack.quiet, 30, "the work queue to settle")
    assert len(stack.started()) == 2, "the failed pass, then the one the sweep brought"
    assert stack.client.get(stack.keys["overlaps"]) is None


def test_a_thousand_enqueues_during_a_pass_cost_at_most_two_passes(stack: Stack) -> None:
    stack.start_worker("w1")
    stack.start_worker("w2")
    stack.client.set(stack.keys["hold"], "1")
    assert stack.queue.enqueue(KEY)
    wait_for(lambda: len(stack.started()) == 1, 30, "the first pass to start")

    published = sum(stack.queue.enqueue(KEY) for _ in range(1000))
    stack.client.delete(stack.keys["hold"])
    stack.client.rpush(stack.keys["go"], "1")

    wait_for(lambda: stack.completed() >= 2 and stack.quiet(), 60, "the work queue to settle")
    assert len(stack.started()) == 2
    assert stack.completed() == 2
    assert published < 1000, "enqueue did not deduplicate"
    assert stack.client.get(stack.keys["overlaps"]) is None


def _started(stack: Stack, passes: int) -> Callable[[], bool]:
    return lambda: len(stack.started()) == passes


def test_an_order_changed_during_every_pass_gets_its_passes_spaced(stack: Stack) -> None:
    stack.env["TENANTDB_BUSY_PASS_SPACING_SECONDS"] = "3"
    stack.start_worker("w1")
    stack.start_worker("w2")
    stack.client.set(stack.keys["hold"], "1")
    assert stack.queue.enqueue(KEY)
    began: list[float] = []
    for n in range(1, 7):
        wait_for(_started(stack, n), 30, f"pass {n} to start")
        began.append(time.monotonic())
        if n < 6:
            assert not stack.queue.enqueue(KEY), "an event during a pass waits for its end"
        stack.client.rpush(stack.keys["go"], "1")
    wait_for(lambda: stack.completed() == 6 and stack.quiet(), 30, "the sixth pass to end")
    gaps = [round(later - earlier, 2) for earlier, later in itertools.pairwise(began)]
    # Passes 1 to 4 each saw an event: the next three ran at once, then each waited 3 s.
    assert all(gap < 2.0 for gap in gaps[:3]), gaps
    assert all(gap >= 2.9 for gap in gaps[3:]), gaps

    # Pass 6 saw nothing new, so the next event is served at once again.
    stack.client.delete(stack.keys["hold"])
    asked = time.monotonic()
    assert stack.queue.enqueue(KEY)
    wait_for(lambda: stack.completed() == 7, 30, "the pass after a quiet end")
    assert time.monotonic() - asked < 2.0
    assert len(stack.started()) == 7
    assert stack.client.get(stack.keys["overlaps"]) is None


def test_two_copies_of_one_chain_step_at_once_write_once(stack: Stack) -> None:
    keys = chain_keys(stack.prefix)
    key = OrderKey.parse("probechain/tenant-a/twice")
    stack.start_worker("w1")
    stack.start_worker("w2")
    stack.client.set(keys["hold"], "1")
    assert stack.queue.enqueue(key)
    wait_for(lambda: stack.client.llen(keys["steps"]) == 1, 30, "step 1 to start and hold")
    args = {_text(k): _text(v) for k, v in stack.client.hgetall(keys["args"]).items()}

    # The copy a redelivery or a second publish would bring, while the first still runs.
    stack.app.send_task(CHAIN_STEP, args=[args["key"], args["name"], 1])
    wait_for(
        lambda: (
            not stack.client.llen(f"{stack.prefix}reconcile")
            and stack.client.hlen(f"{stack.prefix}unacked") == 1
        ),
        30,
        "the copy to be consumed while step 1 holds",
    )
    stack.client.delete(keys["hold"])
    stack.client.rpush(keys["go"], "1")
    wait_for(
        lambda: bool(stack.client.sismember(keys["done"], str(key))), 30, "the chain to finish"
    )
    wait_for(stack.quiet_for(key), 30, "the work queue to settle")

    assert [_text(s) for s in stack.client.lrange(keys["steps"], 0, -1)] == [
        f"1:{key}",
        f"2:{key}",
    ]
    assert int(stack.client.get(keys["writes:1"]) or 0) == 1
    assert int(stack.client.get(keys["writes:2"]) or 0) == 1
    assert int(stack.client.get(keys["entries"]) or 0) == 1


def test_an_abort_sent_from_outside_cannot_end_a_running_pass(stack: Stack) -> None:
    keys = chain_keys(stack.prefix)
    key = OrderKey.parse("probechain/tenant-a/forged")
    stack.start_worker("w1")
    stack.start_worker("w2")
    stack.client.set(keys["hold"], "1")
    assert stack.queue.enqueue(key)
    wait_for(lambda: stack.client.llen(keys["steps"]) == 1, 30, "step 1 to start and hold")
    held = stack.client.get(f"{stack.prefix}lock:{key}")
    args = {_text(k): _text(v) for k, v in stack.client.hgetall(keys["args"]).items()}
    assert held is not None
    assert args["name"] not in _text(held), "the step's arguments do not carry the lease token"

    # What anyone who can send a task (from Flower, say) could send while the step runs.
    stack.app.send_task(RECONCILE_ABORT, args=[str(key)])
    wait_for(lambda: not stack.client.llen(f"{stack.prefix}reconcile"), 30, "the abort to run")
    assert stack.client.get(f"{stack.prefix}lock:{key}") == held, "the lease was ended"

    stack.client.delete(keys["hold"])
    stack.client.rpush(keys["go"], "1")
    wait_for(
        lambda: bool(stack.client.sismember(keys["done"], str(key))), 30, "the chain to finish"
    )
    wait_for(stack.quiet_for(key), 30, "the work queue to settle")
    # The abort counts as an event, so one more pass may follow; it never runs beside the first.
    steps = [_text(s) for s in stack.client.lrange(keys["steps"], 0, -1)]
    assert steps[:2] == [f"1:{key}", f"2:{key}"]
    assert steps == [f"{n}:{key}" for _ in range(len(steps) // 2) for n in (1, 2)], steps


@pytest.mark.timeout(300)
def test_a_thousand_relisted_orders_complete_with_a_lease_shorter_than_the_queue(
    stack: Stack,
) -> None:
    keys = chain_keys(stack.prefix)
    orders = [OrderKey.parse(f"probechain/tenant-a/relisted-{i}") for i in range(1000)]
    stack.start_worker("w1")
    stack.start_worker("w2")
    started = time.monotonic()
    for key in orders:
        stack.queue.enqueue(key)

    wait_for(lambda: stack.client.scard(keys["done"]) == len(orders), 240, "every pass to finish")
    waited = time.monotonic() - started

    assert waited > LOCK_TTL, "the queue was never longer than a lease; the test proves nothing"
    assert int(stack.client.get(keys["entries"]) or 0) == len(orders), "a pass had to start over"
    assert int(stack.client.get(keys["writes:2"]) or 0) == len(orders)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def test_a_step_handed_over_to_another_queue_is_waited_for_in_that_queue(stack: Stack) -> None:
    keys = chain_keys(stack.prefix)
    key = OrderKey.parse("probehandover/tenant-a/backlog")
    # Nobody serves the delivery queue yet: the second step waits there, as in a backlog.
    stack.start_worker("w1", queues="reconcile,provision,teardown")
    assert stack.queue.enqueue(key)
    delivery = f"{stack.prefix}delivery"
    wait_for(lambda: stack.client.llen(delivery) == 1, 30, "the second step in its queue")

    def waits() -> list[str]:
        members = cast(list[bytes], stack.client.zrange(stack.queue.keys.waiting, 0, -1))
        return [_text(m) for m in members]

    # Celery publishes the step before the step that published it has recorded its wait (the
    # hand-over's record, naming the first step's queue, is replaced a moment later).
    wait_for(
        lambda: waits() == [f"delivery {key}"], 10, "the wait to name the queue the step is in"
    )
    time.sleep(LOCK_TTL * 1.5)
    assert stack.queue.sweep_lost_waits(["delivery"]) == [], "a step still queued is not lost"

    stack.start_worker("w2", queues="delivery")
    wait_for(lambda: bool(stack.client.sismember(keys["done"], str(key))), 30, "the last step")
    wait_for(stack.quiet_for(key), 30, "the work queue to settle")
    steps = [_text(s) for s in stack.client.lrange(keys["steps"], 0, -1)]
    assert steps == [f"1:{key}"], "step 1 ran once: the backlog cost no second pass"


def test_a_forged_step_cannot_make_an_order_look_served(stack: Stack) -> None:
    keys = chain_keys(stack.prefix)
    key = OrderKey.parse("probehandover/tenant-a/forged-start")

    def done() -> bool:
        return bool(stack.client.sismember(keys["done"], str(key)))

    # The last step waits in the delivery queue, which nobody serves yet.
    stack.start_worker("w1", queues="reconcile,provision,teardown")
    assert stack.queue.enqueue(key)
    wait_for(lambda: stack.client.llen(f"{stack.prefix}delivery") == 1, 30, "the last step")
    name = _text(cast(bytes, stack.client.hget(keys["args"], "name")))

    # What anyone who can publish to the broker (Flower's task API, say) could send for the
    # waiting step: one that claims the pass began after every event the order will ever have,
    # and one with the step's own arguments.
    for args in ([str(key), name, 10**15, 2], [str(key), name, 2]):
        stack.app.send_task(DELIVERY_STEP, args=args, queue="reconcile")
    wait_for(done, 30, "a forged step to end the pass")
    stack.start_worker("w2", queues="delivery")
    wait_for(stack.quiet_for(key), 30, "the work queue to settle")

    # The order's next event still brings a pass: no message made it look covered.
    stack.client.srem(keys["done"], str(key))
    assert stack.queue.enqueue(key)
    wait_for(done, 30, "the next event's pass")
