"""Where a pass's "come back after" lands, and how fast beat may sweep refreshes."""

from __future__ import annotations

import pytest

from tenantdb.core.schedule import (
    Comeback,
    Timetable,
    compute_refresh_cap,
    compute_timetable,
    plan_comebacks,
)

NOW = 1_000_000.0


@pytest.mark.parametrize(
    ("requeue_after", "resync", "jitter", "expected"),
    [
        pytest.param(None, 0, 0.5, (), id="wait-for-events-no-resync"),
        pytest.param(1.0, 0, 0.5, (Comeback(Timetable.DUE, NOW + 1),), id="next-pass-1s"),
        pytest.param(10.0, 0, 0.5, (Comeback(Timetable.DUE, NOW + 10),), id="waiting-10s"),
        pytest.param(60.0, 0, 0.5, (Comeback(Timetable.DUE, NOW + 60),), id="frozen-1min"),
        pytest.param(600.0, 0, 0.5, (Comeback(Timetable.REFRESH, NOW + 600),), id="refresh-10min"),
        pytest.param(
            None, 3600, 0.0, (Comeback(Timetable.REFRESH, NOW + 3600),), id="resync-no-jitter"
        ),
        pytest.param(
            None, 3600, 0.5, (Comeback(Timetable.REFRESH, NOW + 3600 + 180),), id="resync-jitter"
        ),
        pytest.param(
            10.0,
            3600,
            0.0,
            (Comeback(Timetable.DUE, NOW + 10), Comeback(Timetable.REFRESH, NOW + 3600)),
            id="wait-and-resync",
        ),
    ],
)
def test_plan_comebacks(
    requeue_after: float | None, resync: float, jitter: float, expected: tuple[Comeback, ...]
) -> None:
    assert plan_comebacks(requeue_after, now=NOW, resync_seconds=resync, jitter=jitter) == expected


@pytest.mark.parametrize(
    ("waiting", "cycle", "interval", "cap"),
    [
        pytest.param(0, 600, 1, 1, id="empty-set-still-sweeps-one"),
        pytest.param(10, 600, 1, 1, id="few-keys"),
        pytest.param(10_000, 600, 1, 21, id="ten-thousand-keys"),
        pytest.param(10_000, 600, 0.5, 11, id="half-second-interval"),
        pytest.param(60_000, 600, 1, 125, id="sixty-thousand-keys"),
    ],
)
def test_refresh_cap_stays_near_the_mean_rate(
    waiting: int, cycle: float, interval: float, cap: int
) -> None:
    assert compute_refresh_cap(waiting, cycle, interval) == cap
    mean = waiting / cycle * interval
    if mean >= 1:
        assert cap <= 1.5 * mean


@pytest.mark.parametrize(
    ("comebacks", "expected"),
    [
        pytest.param((), {Timetable.DUE: None, Timetable.REFRESH: None}, id="nothing-clears-both"),
        pytest.param(
            (Comeback(Timetable.REFRESH, NOW + 3600),),
            {Timetable.DUE: None, Timetable.REFRESH: NOW + 3600},
            id="ready-order-drops-an-old-short-wait",
        ),
        pytest.param(
            (Comeback(Timetable.REFRESH, NOW + 600), Comeback(Timetable.REFRESH, NOW + 3600)),
            {Timetable.DUE: None, Timetable.REFRESH: NOW + 600},
            id="refresh-before-resync",
        ),
        pytest.param(
            (Comeback(Timetable.DUE, NOW + 10), Comeback(Timetable.REFRESH, NOW + 3600)),
            {Timetable.DUE: NOW + 10, Timetable.REFRESH: NOW + 3600},
            id="wait-and-resync",
        ),
    ],
)
def test_a_completed_pass_sets_the_whole_timetable(
    comebacks: tuple[Comeback, ...], expected: dict[Timetable, float | None]
) -> None:
    assert compute_timetable(comebacks) == expected
