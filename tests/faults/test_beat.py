"""Beat killed in the middle of a sweep of due come-backs: nothing due is lost."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

import pytest

from tests.faults.conftest import Faults, poll_fast
from tests.support import wait_for

pytestmark = [pytest.mark.slow]

ORDERS = 8
ATTEMPTS = 4


def _last_pass_at(faults: Faults, name: str) -> float:
    at = faults.client.hget(f"{faults.stack.prefix}last:{faults.key(name)}", "at")
    return float(at) if at is not None else 0.0


def _served_since(faults: Faults, names: list[str], at: float) -> Callable[[], bool]:
    return lambda: all(_last_pass_at(faults, n) > at for n in names)


@pytest.mark.timeout(200)
def test_beat_killed_mid_sweep_loses_no_come_back(faults: Faults) -> None:
    names = [faults.create(f"due{n}") for n in range(ORDERS)]
    faults.wait_all_ready(60)
    faults.wait_quiet(names, 20)
    prefix = faults.stack.prefix
    claimed = f"{prefix}due:claimed"
    left_behind = 0
    due_at = 0.0
    for _ in range(ATTEMPTS):
        # Hold beat, make every order's come-back due, and kill beat as soon as it has claimed.
        faults.signal_tree("beat", signal.SIGSTOP)
        due_at = time.time()
        faults.client.zadd(f"{prefix}due", {str(faults.key(n)): int(due_at * 1000) for n in names})
        faults.signal_tree("beat", signal.SIGCONT)
        seen = poll_fast(lambda: faults.client.zcard(claimed) > 0, 5)
        faults.kill_tree("beat")
        left_behind = int(faults.client.zcard(claimed))
        faults.start("beat", "beat")
        if seen and left_behind:
            break
        # Beat swept them all before the kill landed: wait for those passes and try again.
        wait_for(
            _served_since(faults, names, due_at),
            30,
            "the come-back passes",
        )
    assert left_behind, f"beat was never killed in the middle of a sweep in {ATTEMPTS} tries"
    ended = time.monotonic()
    wait_for(
        _served_since(faults, names, due_at),
        90,
        f"every due come-back to get its pass ({left_behind} claims left by the killed beat)",
    )
    faults.settle(
        "beat kill -9 mid-sweep",
        ended,
        30,
        note=f"{left_behind}/{ORDERS} claims left by the kill",
    )
    assert faults.client.zcard(claimed) == 0, "the killed beat's claims went back"
