"""`python -m bench`: what an order costs, measured from outside, in one command.

Runs every scenario of `bench.scenarios` against fresh devstacks with tenantdb's real watcher,
worker and beat, repeats each figure (`--runs`, at least 3 for the report; the 1,000-order cold
runs once per worker count), and writes `bench/results/<date>-<commit>.json` and, with `--doc`,
the markdown tables of `docs/benchmarks.md`. Each figure is reported as its median over the runs
with the min and max beside it, next to the machine it ran on.

Profiles: `full` (the report: `make bench`), `quick` (the same table for small N, about six
minutes: `make bench-quick`), `fleet` (a fleet of 10,000 Ready orders built through tenantdb,
and its steady state: `make bench-fleet`), `mysql-fleet` (the MysqlDatabase growth up to 10,000
Ready orders on one group, and their steady state: `make bench-mysql-fleet`), `tiny` (one run
each with the smallest N, the fleet too, to keep the harness working in CI). Needs Redis and
MariaDB on localhost, as the tests do.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from bench import refresh_spread, scenarios
from bench.harness import MARIADB, MYSQL, REPO, BenchError, OrderKind, Stack, temp_state
from bench.report import render_markdown

Figures = dict[str, Any]


@dataclass(frozen=True)
class Profile:
    """How much of each scenario to run."""

    runs: int
    warm_orders: int
    cold_sizes: tuple[int, ...]
    cold_timeout: float
    storm_updates: int
    storm_orders: int
    refresh_keys: int
    refresh_cycle: int
    dead_orders: int
    dead_window: float
    growth_sizes: tuple[int, ...]
    """How many Database CRs no order owns stand beside the measured ones, in turn."""
    mysql_growth_sizes: tuple[int, ...]
    """How many Ready MysqlDatabases on the same group stand beside the measured ones, in turn."""
    fleet_size: int = 0
    """Ready MariaDBDatabases the fleet scenario builds through tenantdb (0: it does not run)."""
    fleet_batch: int = 0
    """New orders created at once in each step of the fleet's build."""
    fleet_burst: int = 0
    """New orders created at once beside the fleet, at each of its measured sizes."""
    mysql_burst: int = 0
    """New MysqlDatabases created at once beside each growth size (0: none): its throughput."""
    mysql_steady: bool = False
    """Whether the MysqlDatabases on the group are refreshed whole as a steady state after the
    last growth size, at the pace 10,000 orders get on the 10-minute refresh (the fleet's
    rates are priced from the cost of each pass)."""
    groups: tuple[str, ...] = ()
    """The scenario groups the profile runs, in order (empty: every group but the fleet)."""


GROUPS = ("warm", "cold", "refresh", "dead_group", "growth", "mysql_growth")
"""The scenario groups of the report, in the order they run (the fleet apart)."""

PROFILES = {
    "full": Profile(
        3,
        10,
        (100, 1000),
        300.0,
        1000,
        500,
        10_000,
        600,
        100,
        120.0,
        (0, 1000, 10_000),
        (0, 100, 1000),
        mysql_burst=100,
        mysql_steady=True,
    ),
    "quick": Profile(3, 2, (5,), 120.0, 50, 5, 1_000, 60, 20, 30.0, (0, 1000), (0, 100)),
    "tiny": Profile(
        1,
        1,
        (2,),
        120.0,
        5,
        2,
        200,
        20,
        3,
        8.0,
        (0, 20),
        (0, 10),
        fleet_size=4,
        fleet_batch=2,
        fleet_burst=2,
        mysql_burst=2,
        mysql_steady=True,
        groups=(*GROUPS, "fleet"),
    ),
    "fleet": Profile(
        3,
        10,
        (),
        600.0,
        0,
        0,
        0,
        0,
        0,
        0.0,
        (),
        (),
        fleet_size=10_000,
        fleet_batch=1_000,
        fleet_burst=100,
        groups=("fleet",),
    ),
    "mysql-fleet": Profile(
        3,
        10,
        (),
        600.0,
        0,
        0,
        0,
        0,
        0,
        0.0,
        (),
        (0, 100, 1000, 10_000),
        mysql_burst=100,
        mysql_steady=True,
        groups=("mysql_growth",),
    ),
}

MANY = 1000
"""Cold runs at least this large run once per worker count."""


def summarize(runs: list[Figures]) -> Figures:
    """Median, min and max of each numeric figure over the runs; other values from one run."""
    out: Figures = {}
    for name in runs[0]:
        values = [r[name] for r in runs]
        numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
        if len(numbers) == len(values):
            out[name] = {
                "median": statistics.median(numbers),
                "min": min(numbers),
                "max": max(numbers),
                "runs": numbers,
            }
        elif all(isinstance(v, bool) for v in values):
            out[name] = {"any": any(values), "runs": values}
        else:
            middle = sorted(range(len(runs)), key=lambda i: _sort_key(runs[i]))[len(runs) // 2]
            out[name] = values[middle]
    return out


def _sort_key(figures: Figures) -> float:
    value = figures.get("kube_requests", 0)
    return float(value) if isinstance(value, int | float) else 0.0


def _version(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return (done.stdout or done.stderr).strip().splitlines()[0] if done.returncode == 0 else "?"


def machine() -> Figures:
    """What the figures were measured on."""
    meminfo = Path("/proc/meminfo").read_text().split()
    memory_gib = int(meminfo[meminfo.index("MemTotal:") + 1]) / 1024 / 1024
    info = redis.Redis().info("server")
    mariadb = shutil.which("mariadb") or shutil.which("mysql") or "mariadb"
    return {
        "cores": os.cpu_count(),
        "memory_gib": round(memory_gib, 1),
        "cpu": _cpu_model(),
        "python": platform.python_version(),
        "redis": str(info.get("redis_version")),
        "mariadb": _version([mariadb, "--version"]),
    }


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.machine()


def commit() -> str:
    """The checked-out commit, marked when the tree has uncommitted changes."""
    head = _version(["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"])
    dirty = subprocess.run(
        ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True, text=True, check=False,
    ).stdout.strip()  # fmt: skip
    return f"{head}-dirty" if dirty else head


def _with_stack(
    workers: int,
    body: Callable[[Stack], Figures],
    *,
    dead_group: bool = False,
    refresh_cycle: float | None = None,
) -> Figures:
    stack = Stack(temp_state(), workers, dead_group=dead_group, refresh_cycle=refresh_cycle)
    try:
        stack.up()
        return body(stack)
    except BenchError as error:
        raise BenchError(f"{error} (logs in {stack.state / 'logs'})") from None
    finally:
        stack.down()


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def run_warm(profile: Profile) -> Figures:
    """New orders on warm workers, converged passes and the one-order storm, on one stack."""

    def body(stack: Stack) -> Figures:
        names = ("new", "forced", "refresh", "storm", "mysql_new", "mysql_forced")
        runs: dict[str, list[Figures]] = {k: [] for k in names}
        # Warm the workers' imports and connections, the admin connections to the group too.
        scenarios.converged_forced(stack)
        scenarios.converged_forced(stack, kind=MYSQL)
        for i in range(profile.runs):
            _say(f"bench: warm stack, run {i + 1}/{profile.runs}")
            runs["new"].append(scenarios.new_orders_warm(stack, profile.warm_orders))
            runs["forced"].append(scenarios.converged_forced(stack))
            runs["refresh"].append(scenarios.converged_refresh(stack))
            runs["storm"].append(scenarios.storm_one(stack, profile.storm_updates))
            runs["mysql_new"].append(
                scenarios.new_orders_warm(stack, profile.warm_orders, kind=MYSQL)
            )
            runs["mysql_forced"].append(scenarios.converged_forced(stack, kind=MYSQL))
        return {
            "new_order": summarize(runs["new"]),
            "converged_forced": summarize(runs["forced"]),
            "converged_refresh": summarize(runs["refresh"]),
            "storm_one_order": summarize(runs["storm"]),
            "mysql_new_order": summarize(runs["mysql_new"]),
            "mysql_converged_forced": summarize(runs["mysql_forced"]),
        }

    return _with_stack(2, body)


def _growth_of(kind: OrderKind, sizes: tuple[int, ...], profile: Profile) -> Figures:
    """A converged pass and a new order of ``kind`` beside more and more others, on one stack."""

    steady = kind is MYSQL and profile.mysql_steady and bool(sizes)

    def body(stack: Stack) -> Figures:
        out: Figures = {}
        empty = stack.footprint()
        for size in sizes:
            _say(f"bench: {kind.key_kind} beside {size} others")
            try:
                forced = scenarios.converged_beside(
                    stack, size, profile.runs, kind=kind, timeout=300.0
                )
                # The bursts of a smaller size stay, and may outnumber this one.
                beside = stack.mysql_fillers if kind is MYSQL else stack.fillers
                new = [
                    scenarios.new_orders_warm(stack, profile.warm_orders, timeout=300.0, kind=kind)
                    for _ in range(profile.runs)
                ]
                # Before the burst, whose orders join the Ready ones beside the next size.
                footprint = stack.footprint()
                # One burst on two shared cores spreads far: the median of as many as runs.
                burst = (
                    {
                        "burst": summarize(
                            [
                                scenarios.mysql_burst(stack, profile.mysql_burst, timeout=900.0)
                                for _ in range(profile.runs)
                            ]
                        )
                    }
                    if kind is MYSQL and profile.mysql_burst
                    else {}
                )
            except BenchError as error:  # a size that does not finish is a result too
                out[str(size)] = {"failed": str(error)}
                break
            out[str(size)] = {
                "beside": beside,
                "converged_forced": summarize(forced),
                "new_order": summarize(new),
                **burst,
                "footprint": footprint,
            }
        else:
            if steady:
                names = [f"bench-peer-{i}" for i in range(stack.mysql_fillers)]
                _say(f"bench: the steady state of {len(names)} Ready {kind.key_kind}s")
                try:
                    out["steady"] = scenarios.refresh_all(
                        stack, names, empty, kind=kind, timeout=3600.0
                    )
                except BenchError as error:
                    out["steady"] = {"failed": str(error)}
        return out

    cycle = scenarios.fleet_pace_cycle(max(sizes)) if steady else None
    return _with_stack(2, body, refresh_cycle=cycle)


def run_growth(profile: Profile) -> Figures:
    """A MariaDBDatabase beside more and more Database CRs in Keystone's namespace."""
    return _growth_of(MARIADB, profile.growth_sizes, profile)


def run_mysql_growth(profile: Profile) -> Figures:
    """A MysqlDatabase beside more and more Ready MysqlDatabases on its group."""
    return _growth_of(MYSQL, profile.mysql_growth_sizes, profile)


def run_cold(profile: Profile) -> Figures:
    """N new orders at once on fresh stacks with 1 and 2 worker processes.

    On the last two-worker run of each size whose orders all went Ready, the fleet they make is
    refreshed whole at the pace of a 10,000-order fleet (`scenarios.refresh_all`), then the storm
    of one edit on each of many orders runs; the largest such size is reported.
    """
    out: Figures = {}
    for size in profile.cold_sizes:
        for workers in (1, 2):
            runs: list[Figures] = []
            storms: list[Figures] = []
            fleets: list[Figures] = []
            count = 1 if size >= MANY else profile.runs
            for i in range(count):
                _say(f"bench: {size} new orders, {workers} worker processes, run {i + 1}/{count}")
                storm = workers == 2 and i == count - 1

                def body(
                    stack: Stack,
                    size: int = size,
                    storm: bool = storm,
                    storms: list[Figures] = storms,
                    fleets: list[Figures] = fleets,
                ) -> Figures:
                    empty = stack.footprint()
                    figures, ready = scenarios.cold(stack, size, timeout=profile.cold_timeout)
                    if storm and figures["all_ready_s"] is not None:
                        _say(f"bench: a refresh of all {size} orders at the pace of a fleet")
                        fleets.append(scenarios.refresh_all(stack, ready, empty))
                        picked = ready[: profile.storm_orders]
                        for j in range(profile.runs):
                            _say(f"bench: one edit on each of {len(picked)} orders, run {j + 1}")
                            storms.append(scenarios.storm_many(stack, picked))
                    return figures

                cycle = scenarios.fleet_pace_cycle(size)
                runs.append(_with_stack(workers, body, refresh_cycle=cycle))
            out[f"cold_{size}_workers_{workers}"] = summarize(runs)
            if storms:
                out["storm_many_orders"] = summarize(storms)
            if fleets:
                out["fleet_refresh"] = summarize(fleets)
        one, two = out[f"cold_{size}_workers_1"], out[f"cold_{size}_workers_2"]
        t1, t2 = one["all_ready_s"], two["all_ready_s"]
        if isinstance(t1, dict) and isinstance(t2, dict) and t2["median"]:
            out[f"cold_{size}_speedup"] = t1["median"] / t2["median"]
    return out


def run_fleet(profile: Profile) -> Figures:
    """A fleet of Ready MariaDBDatabases built through tenantdb, step by step, on one stack
    with 2 worker processes whose refresh cycle is the 10-minute one of ``FLEET`` orders.

    Each step creates ``fleet_batch`` new orders at once beside the Ready ones (its throughput
    beside that many); beside none, beside one step's worth and beside the whole fleet, a
    converged pass, new orders one by one and a burst of ``fleet_burst`` are measured; then the
    whole fleet is refreshed as its steady state (``scenarios.refresh_all``). A step or a
    point that does not finish ends the build; what was measured until then is kept.
    """
    size, batch = profile.fleet_size, profile.fleet_batch
    if not size:
        return {}

    def body(stack: Stack) -> Figures:
        empty = stack.footprint()
        out: Figures = {"size": size, "batch": batch, "burst": profile.fleet_burst}
        steps: list[Figures] = []
        points: Figures = {}
        out["steps"], out["beside"] = steps, points
        marks = sorted({0, batch, size})
        try:
            for mark in marks:
                while len(steps) * batch < mark:
                    _say(f"bench: fleet, {batch} new orders beside {len(steps) * batch}")
                    steps.append(scenarios.grow_fleet(stack, batch, timeout=profile.cold_timeout))
                _say(f"bench: fleet, a converged pass and new orders beside {mark}")
                point, forced, new = scenarios.beside_fleet(
                    stack, profile.runs, profile.warm_orders, profile.fleet_burst, timeout=300.0
                )
                points[str(mark)] = {
                    **point,
                    "converged_forced": summarize(forced),
                    "new_order": summarize(new),
                }
            names = sorted(stack.ready_orders())
            _say(f"bench: fleet, the steady state of {len(names)} Ready orders")
            out["steady"] = scenarios.refresh_all(stack, names, empty, timeout=3600.0)
        except BenchError as error:
            out["failed"] = str(error)
        return out

    return _with_stack(2, body, refresh_cycle=scenarios.fleet_pace_cycle(size))


def run_dead_group(profile: Profile) -> Figures:
    """Healthy MysqlDatabase orders beside a group that never answers, on 2 worker processes."""

    def body(stack: Stack) -> Figures:
        scenarios.converged_forced(stack, kind=MYSQL)  # warm the workers and the pool
        runs = []
        for i in range(profile.runs):
            _say(f"bench: a dead group with {profile.dead_orders} orders, run {i + 1}")
            runs.append(
                scenarios.dead_group(
                    stack, profile.dead_orders, max(profile.warm_orders, 3), profile.dead_window
                )
            )
        return {"orders": profile.dead_orders, **summarize(runs)}

    return _with_stack(2, body, dead_group=True)


def run_refresh(profile: Profile) -> Figures:
    """Beat's refresh sweep over the refresh set (real Redis, simulated clock)."""
    out: Figures = {}
    for layout in ("burst", "random"):
        _say(f"bench: refresh spread, {profile.refresh_keys} orders, {layout}")
        runs = [
            refresh_spread.measure(profile.refresh_keys, profile.refresh_cycle, layout, seed, 3)
            for seed in range(profile.runs)
        ]
        out[layout] = summarize(runs)
    return {"orders": profile.refresh_keys, "cycle_s": profile.refresh_cycle, **out}


def run(profile_name: str, save: Callable[[Figures], None] = lambda report: None) -> Figures:
    """Every scenario of one profile; the report as a JSON-ready dict.

    ``save`` gets the report so far after each group of scenarios, so a long run that fails
    late keeps what it measured.
    """
    profile = PROFILES[profile_name]
    started = time.monotonic()
    report: Figures = {
        "profile": profile_name,
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": commit(),
        "machine": machine(),
        "sizes": profile.__dict__,
    }
    functions: dict[str, Callable[[Profile], Figures]] = {
        "warm": run_warm,
        "cold": run_cold,
        "refresh": run_refresh,
        "dead_group": run_dead_group,
        "growth": run_growth,
        "mysql_growth": run_mysql_growth,
        "fleet": run_fleet,
    }
    for group in profile.groups or GROUPS:
        report[group] = functions[group](profile)
        report["bench_seconds"] = time.monotonic() - started
        save(report)
    return report


BASELINE = REPO / "bench" / "results" / "baseline.json"
"""The report the current figures are compared with: the first one the bench produced."""


def _baseline(path: Path | None, profile: str) -> Figures | None:
    if path is None or not path.exists():
        return None
    loaded: Figures = json.loads(path.read_text())
    with contextlib.suppress(ValueError):
        loaded["source"] = str(path.resolve().relative_to(REPO))
    return loaded if loaded.get("profile") == profile else None


def main(argv: list[str] | None = None) -> int:
    """Run the bench and write its results."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=sorted(PROFILES), default="full")
    parser.add_argument("--out-dir", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--doc", type=Path, help="also write the markdown report to this file")
    parser.add_argument(
        "--baseline",
        type=Path,
        default=BASELINE,
        help="an earlier results file to compare the headline figures with (same profile only)",
    )
    args = parser.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    suffix = "" if args.profile == "full" else f"-{args.profile}"

    out_dir: Path = args.out_dir

    def save(report: Figures) -> None:
        path = out_dir / f"{report['date'][:10]}-{report['commit']}{suffix}.json"
        path.write_text(json.dumps(report, indent=2, sort_keys=False) + "\n")
        print(f"bench: results so far in {path}", file=sys.stderr)

    try:
        report = run(args.profile, save)
    except BenchError as error:
        print(f"bench: {error}", file=sys.stderr)
        return 1
    baseline = _baseline(args.baseline, report["profile"])
    markdown = render_markdown(report, baseline)
    if args.doc is not None:
        args.doc.parent.mkdir(parents=True, exist_ok=True)
        args.doc.write_text(markdown)
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
