"""The liveness answers of beat and the worker: alive while their work goes on, one line after."""

from __future__ import annotations

import time

from tenantdb.adapters.metrics import Progress
from workers.beat import beat_liveness


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_alive_until_the_limit_passes_without_progress() -> None:
    clock = Clock()
    liveness = Progress(60, "stalled for {age} s (limit {limit} s)", clock)
    clock.now += 60
    assert liveness() is None
    clock.now += 1
    assert liveness() == "stalled for 61 s (limit 60 s)"
    liveness.progressed()
    assert liveness() is None, "progress makes it alive again"


def test_beat_says_what_stalled() -> None:
    liveness = beat_liveness(0.0)  # any time at all without a sweep is too long
    time.sleep(0.01)
    said = liveness()
    assert said is not None
    assert said.startswith("beat has completed no sweep for 0 s (limit 0 s)")
