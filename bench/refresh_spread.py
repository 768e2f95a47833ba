"""How evenly beat spreads the periodic refreshes of many orders over their cycle.

Puts N keys in the refresh set of the real Redis, then runs beat's sweep against a simulated
clock, one sweep per simulated second, for several cycles. Each enqueued key is "processed" at
once: its pending mark is cleared and it is rescheduled one cycle later, as a converged order's pass
would do. The figure of merit is the largest number of enqueues in any one second of the last cycle,
as a ratio to the mean rate N / cycle. Two starting layouts: every key due at once (the worst case,
as after an outage) and keys due at random times.

Usage: .venv/bin/python -m bench.refresh_spread [--keys 10000] [--cycle 600] [--runs 3]
"""

from __future__ import annotations

import argparse
import random
import secrets
import statistics
from collections import Counter

import redis

from tenantdb.adapters.workqueue import WorkQueue
from tenantdb.core.keys import OrderKey
from tenantdb.core.schedule import Timetable
from workers.beat import sweep_once


def run(keys: int, cycle: int, layout: str, seed: int, cycles: int) -> float:
    """Return the max-second / mean-rate ratio over the last simulated cycle."""
    return measure(keys, cycle, layout, seed, cycles)["peak_to_mean"]


def measure(keys: int, cycle: int, layout: str, seed: int, cycles: int) -> dict[str, float]:
    """Sweep ``cycles`` simulated cycles; return the last cycle's peak and mean enqueue rates.

    Also the refresh set's Redis bytes per order, read with MEMORY USAGE once it is filled.
    """
    client = redis.Redis()
    prefix = f"tenantdb-bench-{secrets.token_hex(4)}:"
    rng = random.Random(seed)
    per_second: Counter[int] = Counter()
    clock = {"now": 0.0}
    queue: WorkQueue

    def publish(key: OrderKey) -> None:
        tick = int(clock["now"])
        per_second[tick] += 1
        queue.clear_pending(key)
        queue.schedule(key, clock["now"] + cycle, Timetable.REFRESH)

    queue = WorkQueue(client, publish, prefix=prefix)
    start = 1_000_000
    try:
        pipe = client.pipeline()
        for i in range(keys):
            offset = 0 if layout == "burst" else rng.random() * cycle
            key = str(OrderKey("mariadbdatabase", "tenant", f"order-{i}"))
            pipe.zadd(queue.keys.timetable(Timetable.REFRESH), {key: int((start + offset) * 1000)})
        pipe.execute()
        size = client.memory_usage(queue.keys.timetable(Timetable.REFRESH), samples=0) or 0
        for second in range(cycles * cycle):
            clock["now"] = start + second
            sweep_once(queue, clock["now"], refresh_cycle=cycle, interval=1.0)
        last = [per_second[start + s] for s in range((cycles - 1) * cycle, cycles * cycle)]
        mean = keys / cycle
        return {
            "peak_per_s": float(max(last)),
            "mean_per_s": mean,
            "peak_to_mean": max(last) / mean,
            "redis_bytes_per_order": int(size) / keys,
        }
    finally:
        for name in client.scan_iter(match=f"{prefix}*", count=1000):
            client.delete(name)


def main() -> None:
    """Run the benchmark and print medians over the runs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--cycle", type=int, default=600)
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"{args.keys} keys, {args.cycle} s cycle, mean rate {args.keys / args.cycle:.1f}/s")
    for layout in ("burst", "random"):
        ratios = [
            run(args.keys, args.cycle, layout, seed, args.cycles) for seed in range(args.runs)
        ]
        median = statistics.median(ratios)
        runs = ", ".join(f"{r:.2f}" for r in ratios)
        print(
            f"{layout:>6}: max second / mean rate, last cycle: median {median:.2f} (runs: {runs})"
        )


if __name__ == "__main__":
    main()
