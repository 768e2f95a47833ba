"""Workers under fault: killed mid-chain, frozen past the lease, a step message delivered twice."""

from __future__ import annotations

import base64
import json
import re
import signal
import time
import uuid
from pathlib import Path

import pytest

from tests.e2e.conftest import order_quiet
from tests.faults.conftest import Faults, hold, pass_name, poll_fast
from tests.support import wait_for

pytestmark = pytest.mark.slow

KILLS = 20


@pytest.mark.timeout(300)
def test_a_worker_killed_mid_chain_twenty_times_loses_no_order(faults: Faults) -> None:
    mid_step = 0
    for round_ in range(KILLS):
        for n in range(2):
            faults.create(f"kill{round_}-{n}")
        # A worker that received a chain step and has not finished it: kill it right there.
        victim: str = wait_for(
            lambda: next((w for w in faults.workers() if faults.running_chain_steps(w)), ""),
            30,
            f"a chain step in flight on some worker (round {round_ + 1})",
        )
        if any(value.endswith("!") for value in faults.locks().values()):
            mid_step += 1
        faults.kill_tree(victim)
        faults.start_worker(victim)
    ended = time.monotonic()
    faults.settle(
        "worker kill -9 mid-chain x20",
        ended,
        90,
        note=f"{KILLS} kills, {mid_step} with a step holding its lease",
    )
    assert faults.alive() == dict.fromkeys(faults.stack.procs, True)


@pytest.mark.timeout(180)
def test_a_lease_running_out_under_a_frozen_step_never_lets_it_write_again(
    faults: Faults,
) -> None:
    """The freeze can land anywhere in the step: before its lease check, between the check and
    a write, or with a write's request half sent (on a real kube-apiserver that request is
    completed when the worker thaws). Redis fences the stale step's next request; the write
    already on its way carries the resourceVersion its pass read, and the API server refuses it
    because the newer pass wrote since."""
    # Only worker-1 works until its step is frozen; then worker-2 takes over the order.
    faults.signal_tree("worker-2", signal.SIGSTOP)
    frozen_token = ""
    for attempt in range(5):
        name = faults.create(f"frozen{attempt}")
        key = str(faults.key(name))

        def running_step(key: str = key) -> str:
            value = faults.locks().get(key, "")
            return value if value.endswith("!") else ""

        seen = poll_fast(running_step, 20)
        assert seen, f"{name}: no chain step of its first pass ran"
        faults.signal_tree("worker-1", signal.SIGSTOP)
        frozen_at = time.monotonic()
        if running_step():
            frozen_token = seen.partition("#")[0]
            break
        # The step ended before the freeze; let the chain go on and try with another order.
        faults.signal_tree("worker-1", signal.SIGCONT)
    assert frozen_token, "never froze a worker in the middle of a step"
    faults.signal_tree("worker-2", signal.SIGCONT)
    frozen_pass = pass_name(frozen_token)
    wait_for(
        lambda: faults.locks().get(key, "").partition("#")[0] != frozen_token,
        30,
        "the frozen step's lease to run out",
    )
    expired_after = time.monotonic() - frozen_at
    wait_for(lambda: faults.ready(name), 60, f"{name} to become Ready on worker-2")
    # Keep worker-1 frozen well past the 10 s lease, then let the stale step go on.
    hold(max(0.0, 14 - (time.monotonic() - frozen_at)))
    frozen_for = time.monotonic() - frozen_at
    resumed = faults.writers().by_pass(frozen_pass)
    faults.signal_tree("worker-1", signal.SIGCONT)
    ended = time.monotonic()
    wait_for(lambda: not faults.running_chain_steps("worker-1"), 20, "the resumed step to end")
    figures = faults.settle(
        "lease runs out under a frozen step",
        ended,
        40,
        note=f"lease gone after {expired_after:.1f} s, worker frozen {frozen_for:.1f} s",
    )
    after = faults.writers().by_pass(frozen_pass)
    assert after == resumed, (
        f"the pass whose lease ran out wrote after it: {resumed} then {after} ({figures})"
    )


@pytest.mark.parametrize("faults", [{"queues": "reconcile,provision,teardown"}], indirect=True)
@pytest.mark.timeout(120)
def test_a_step_delivered_twice_runs_once(faults: Faults) -> None:
    name = faults.create("twice")
    prefix = faults.stack.prefix
    queue = f"{prefix}delivery"
    # No worker serves the delivery queue yet: the pass that delivers waits there for it.
    wait_for(lambda: faults.client.llen(queue) == 1, 60, "the delivery step in its queue")
    raw = faults.client.lindex(queue, 0)
    assert raw is not None
    message = json.loads(raw)
    copy = json.loads(raw)
    copy["properties"]["delivery_tag"] = str(uuid.uuid4())
    faults.client.lpush(queue, json.dumps(copy))
    body = json.loads(base64.b64decode(message["body"]))
    name_of_pass = str(body[0][1])  # the step's arguments name the pass, never its token
    faults.start_worker("worker-3", "delivery")
    ended = time.monotonic()
    wait_for(lambda: faults.ready(name), 30, f"{name} to become Ready")
    wait_for(lambda: order_quiet(faults.stack, faults.client, faults.key(name)), 20, "quiet")
    duplicates = faults.stack.counter("worker-3", "tenantdb_duplicate_steps_total")
    figures = faults.settle("step message delivered twice", ended, 20, note=f"dups={duplicates}")
    # One copy delivers; the other ends without writing: as a duplicate while the pass still
    # holds its lease, or, when it starts only after the pass is over, finding the lease gone.
    endings = _step_endings(faults.stack.logs / "worker-3.log", str(faults.key(name)))
    late = [e for e in endings if e in ("Duplicate", "LeaseLost")]
    assert len(endings) == 2, f"both copies ran: {endings} ({figures})"
    assert len(late) == 1, f"one copy of the delivery step ends without delivering: {endings}"
    assert duplicates == late.count("Duplicate"), f"a duplicate is counted ({figures})"
    delivered = [
        e
        for e in faults.writes()
        if e.resource == "secrets"
        and e.name == f"{name}-credentials"
        and e.field_manager == "tenantdb"
    ]
    assert len(delivered) == 1, f"the Secret is written once, not by both copies: {delivered}"
    span = faults.writers().by_pass(name_of_pass)
    assert span is not None, "the delivering pass wrote"


@pytest.mark.parametrize("faults", [{"queues": "reconcile,provision,teardown"}], indirect=True)
@pytest.mark.timeout(120)
def test_a_step_message_lost_on_its_way_to_a_worker_is_replaced_within_a_lease(
    faults: Faults,
) -> None:
    # A worker that pops a message from the broker and dies before it has even parsed it takes
    # the message with it: it is in no queue and in no unacknowledged set, so the broker never
    # delivers it again. Here the delivery step's message is taken out of its queue that way.
    name = faults.create("lost")
    queue = f"{faults.stack.prefix}delivery"
    wait_for(lambda: faults.client.llen(queue) == 1, 60, "the delivery step in its queue")
    assert faults.client.rpop(queue) is not None
    lost_at = time.monotonic()
    faults.start_worker("worker-3", "delivery")
    # Without a look at the lost wait the order would wait out the visibility timeout (the
    # hand-over covers the step's wait in its queue that long): here a lease (10 s) and a sweep.
    wait_for(lambda: faults.ready(name), 40, f"{name} to become Ready after its step was lost")
    faults.settle("step message lost before a worker held it", lost_at, 20)


def _step_endings(log: Path, key: str) -> list[str]:
    """The results of the chain steps a worker ran for one order, from Celery's success lines."""
    ending = re.compile(r"succeeded in [0-9.e-]+s: \{'order': '([^']+)', 'result': '(\w+)'\}")
    return [
        match.group(2)
        for match in ending.finditer(log.read_text(errors="replace"))
        if match.group(1) == key
    ]


BACKLOG = 8
_ORPHANED = re.compile(r"beat enqueued \d+ due, \d+ refreshes, (\d+) orphaned")


@pytest.mark.parametrize("faults", [{"queues": "reconcile,provision,teardown"}], indirect=True)
@pytest.mark.timeout(180)
def test_a_delivery_backlog_longer_than_a_lease_is_waited_out_not_taken_for_lost(
    faults: Faults,
) -> None:
    # Separate pools: the two workers serve the entry and provision queues, and the delivery
    # pool is down, so every new order's pass ends up waiting in the delivery queue, behind the
    # others, for longer than a lease. A wait whose message is still queued is not lost: no
    # pass is ended and started again for it, and each delivery step runs once.
    names = [faults.create(f"backlog{n}") for n in range(BACKLOG)]
    queue = f"{faults.stack.prefix}delivery"
    wait_for(lambda: faults.client.llen(queue) == BACKLOG, 60, "every delivery step queued")
    queued_at = time.monotonic()
    hold(15.0)  # longer than the 10 s lease
    waited = time.monotonic() - queued_at
    faults.start_worker("worker-3", "delivery")
    ended = time.monotonic()
    wait_for(lambda: all(faults.ready(n) for n in names), 60, "every order Ready")
    figures = faults.settle(
        "delivery backlog past a lease, separate pools",
        ended,
        30,
        note=f"{BACKLOG} deliveries queued {waited:.0f} s with no delivery worker",
    )
    orphaned = sum(int(m[1]) for line in faults.log_lines("beat") if (m := _ORPHANED.search(line)))
    assert orphaned == 0, f"beat took {orphaned} waiting passes for lost ({figures})"
    endings = [
        e
        for n in names
        for e in _step_endings(faults.stack.logs / "worker-3.log", str(faults.key(n)))
    ]
    assert endings.count("Duplicate") == 0, f"a delivery step ran twice: {endings}"
    assert len(endings) == BACKLOG, f"one delivery step per order: {endings}"
