"""Fault injection: tenantdb's real processes on the devstack, and what breaks under them.

What the suite proves, one fault per test, with orders in flight when the fault strikes:

- a worker killed with SIGKILL in the middle of a chain, twenty times in a row;
- Redis restarted empty (every queue, mark, lease and timetable lost), and Redis frozen for longer
  than an order's lease;
- Redis gone silent without a RST (``tests.faults.proxy``) for every process, and for one worker
  while the rest keep it; a real Sentinel failover with the master killed under load;
- OpenBao unreachable for a while: delivered Secrets stay as they are and a deletion is held;
- the API servers' watches cut and expired (410) during a storm of edits to the orders;
- a lease running out under a frozen step, a step message delivered twice, a delivery backlog
  longer than a lease with separate worker pools, the watcher leader killed while a standby
  waits;
- beat killed in the middle of a sweep of due come-backs.

After each fault the test asserts what a user would notice: every order converges (Ready, or
gone when it was deleted), no order is lost, and no two passes of one order wrote at once. The
last is read from the API servers' audit logs: every request a pass makes carries the
User-Agent ``tenantdb/<version> (pass <12 hex>; <order key>)``, so tenantdb's writes group by
order and pass; each writing pass spans [first request, last successful write] (the first request
is usually a read, so a stale pass whose only write lands late still spans the newer pass), and
two spans of one order that overlap are two concurrent writers. Each test's figures (time to
converge, passes, lost orders, concurrent writers) are printed in a table at the end of the
session; "unnamed" counts the writes naming no pass, which are the test's own (it creates and
edits orders through tenantdb's client).

Every test gets the real platform (shared as the end-to-end tests share it), its own
``redis-server`` on a free port (``--save "" --appendonly no``, so a restart loses everything; the
shared Redis on 6379 is never touched) and its own watcher, two workers and beat as
subprocesses; the schemas and SQL users its orders created are dropped afterwards.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
import urllib.parse
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml
from redis.sentinel import Sentinel

from devstack.platform import Platform
from devstack.realkube import AuditEntry
from tenantdb.adapters.mariadbdatabase import MARIADB_DATABASE
from tenantdb.adapters.workqueue import WorkQueueKeys, pass_name
from tenantdb.core.keys import OrderKey
from tests.e2e.conftest import Stack, _drop_leftovers, descendants, free_port, lease_platform
from tests.faults.proxy import SilentProxy
from tests.platforms import PlatformPool
from tests.support import root_sql, stop_processes, wait_for

ALL_QUEUES = "reconcile,provision,delivery,teardown"
CHAIN_QUEUES = ("provision", "delivery", "teardown")
KIND = "mariadbdatabase"
NAMESPACE = "tenant-a"

# -- the audit: which pass of which order wrote what, when ----------------------------------------

PASS_AGENT = re.compile(r"^tenantdb/\S+ \(pass (?P<pass_id>[0-9a-f]{12}); (?P<order>[^)]+)\)$")
"""The User-Agent of a request a pass makes."""


@dataclass(frozen=True)
class PassSpan:
    """One writing pass of one order: from its first request (a read or a write) to its last
    successful write.

    Starting at the first request, a pass that read, lost its lease, and had a write land after
    a newer pass wrote overlaps that newer pass, even when the late write was its only one.
    """

    order: str
    pass_id: str
    first: datetime
    last: datetime
    writes: int


@dataclass(frozen=True)
class Writers:
    """tenantdb's audited writes, by pass."""

    spans: list[PassSpan]
    unattributed: int
    """tenantdb writes whose User-Agent names no pass."""
    unattributed_agents: tuple[str, ...] = ()
    """What those writes were: verb, resource and User-Agent, each once."""

    def by_pass(self, pass_id: str) -> PassSpan | None:
        return next((s for s in self.spans if s.pass_id == pass_id), None)


def _audit_time(text: str) -> datetime:
    for form in ("%Y-%m-%dT%H:%M:%S.%fZ", "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return datetime.strptime(text, form)
        except ValueError:
            continue
    raise ValueError(f"not an audit time: {text!r}")


def tenantdb_writers(entries: Sequence[AuditEntry], reads: Sequence[AuditEntry] = ()) -> Writers:
    """Group tenantdb's successful writes by order key and pass id into spans, each starting
    at the pass's first request of ``entries`` and ``reads`` (the gets and lists)."""
    times: dict[tuple[str, str], list[datetime]] = defaultdict(list)
    unattributed = 0
    agents: dict[str, None] = {}
    for entry in entries:
        if entry.field_manager != "tenantdb" or entry.code >= 300:
            continue
        agent = str(getattr(entry, "user_agent", ""))
        match = PASS_AGENT.match(agent)
        if match is None:
            unattributed += 1
            agents[f"{entry.verb} {entry.resource} {agent!r}"] = None
            continue
        times[(match["order"], match["pass_id"])].append(_audit_time(entry.time))
    started: dict[tuple[str, str], datetime] = {}
    for entry in [*entries, *reads]:
        match = PASS_AGENT.match(str(getattr(entry, "user_agent", "")))
        if match is None:
            continue
        pass_of = (match["order"], match["pass_id"])
        at = _audit_time(entry.time)
        started[pass_of] = min(at, started.get(pass_of, at))
    spans = [
        PassSpan(order, pass_id, min(*at, started.get((order, pass_id), at[0])), max(at), len(at))
        for (order, pass_id), at in times.items()
    ]
    return Writers(sorted(spans, key=lambda s: (s.order, s.first)), unattributed, tuple(agents))


def concurrent_writers(spans: Sequence[PassSpan]) -> list[tuple[PassSpan, PassSpan]]:
    """Pairs of passes of one order whose [first request, last write] spans overlap."""
    found: list[tuple[PassSpan, PassSpan]] = []
    by_order: dict[str, list[PassSpan]] = defaultdict(list)
    for span in spans:
        by_order[span.order].append(span)
    for order_spans in by_order.values():
        order_spans.sort(key=lambda s: s.first)
        for i, earlier in enumerate(order_spans):
            for later in order_spans[i + 1 :]:
                if later.first >= earlier.last:
                    break
                found.append((earlier, later))
    return found


# -- figures, printed at the end of the session ---------------------------------------------------


@dataclass
class Figures:
    """What one scenario measured."""

    scenario: str
    converge_seconds: float
    passes: float
    writing_passes: int
    orders: int
    lost: int
    unconverged: int
    concurrent: int
    unattributed: int
    note: str = ""
    unattributed_agents: tuple[str, ...] = ()


FIGURES: list[Figures] = []


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print every scenario's figures, so they show in CI output without ``-s``."""
    if not FIGURES:
        return
    terminalreporter.section("fault injection figures")
    header = (
        f"{'scenario':<44} {'converge s':>10} {'passes':>6} {'writing':>7} {'orders':>6} "
        f"{'lost':>4} {'stuck':>5} {'overlap':>7} {'unnamed':>10}  note"
    )
    terminalreporter.write_line(header)
    for f in FIGURES:
        terminalreporter.write_line(
            f"{f.scenario:<44} {f.converge_seconds:>10.1f} {f.passes:>6.0f} {f.writing_passes:>7} "
            f"{f.orders:>6} {f.lost:>4} {f.unconverged:>5} {f.concurrent:>7} "
            f"{f.unattributed:>10}  {f.note}"
        )


# -- a Redis of the test's own --------------------------------------------------------------------


class RedisServer:
    """A ``redis-server`` that keeps nothing on disk, on a port of its own."""

    def __init__(self, directory: Path, args: Sequence[str] = ()) -> None:
        """Prepare a server; ``args`` are more of its options (``--replicaof`` for a replica)."""
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.args = tuple(args)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start the server on the port (with what ``save`` left, else empty); wait until it
        answers."""
        with (self.directory / "redis.log").open("ab") as out:
            self.proc = subprocess.Popen(
                [
                    "redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                    "--save", "", "--appendonly", "no", "--dir", str(self.directory),
                    "--daemonize", "no", *self.args,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )  # fmt: skip

        def answers() -> bool:
            client = redis.Redis.from_url(self.url, socket_timeout=1)
            try:
                return bool(client.ping())
            except redis.RedisError:
                return False
            finally:
                client.close()

        wait_for(answers, 10, f"redis-server on port {self.port}")

    def save(self) -> None:
        """Write everything it holds to its directory, where ``start`` loads it from."""
        client = redis.Redis.from_url(self.url, socket_timeout=10)
        try:
            client.save()
        finally:
            client.close()

    def kill(self) -> None:
        """SIGKILL: everything it held since the last ``save`` is gone."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)
        self.proc.kill()
        self.proc.wait()
        self.proc = None

    def pause(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGCONT)
        _end(self.proc)
        self.proc = None


def _end(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, and SIGKILL after 10 s."""
    stop_processes([proc], grace=10)


class SentinelServer:
    """One Redis Sentinel watching ``master_port`` as the master ``MASTER_NAME``, quick to act:
    a master silent for a second is down, and as the only Sentinel it decides alone."""

    MASTER_NAME = "tenantdb"

    def __init__(self, directory: Path, master_port: int) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.config = directory / "sentinel.conf"
        # Sentinel rewrites its own configuration file as it learns the group.
        self.config.write_text(
            f"port {self.port}\nbind 127.0.0.1\ndir {directory}\n"
            f"sentinel monitor {self.MASTER_NAME} 127.0.0.1 {master_port} 1\n"
            f"sentinel down-after-milliseconds {self.MASTER_NAME} 1000\n"
            f"sentinel failover-timeout {self.MASTER_NAME} 5000\n"
            f"sentinel parallel-syncs {self.MASTER_NAME} 1\n"
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with (self.directory / "sentinel.log").open("ab") as out:
            self.proc = subprocess.Popen(
                ["redis-server", str(self.config), "--sentinel"],
                stdout=out,
                stderr=subprocess.STDOUT,
            )

        def answers() -> bool:
            return self.master_port() is not None

        wait_for(answers, 10, f"redis sentinel on port {self.port}")

    def master_port(self) -> int | None:
        """The port of the master the Sentinel names now; None when it does not answer."""
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1)
        try:
            found = client.sentinel_get_master_addr_by_name(self.MASTER_NAME)
        except redis.RedisError:
            return None
        finally:
            client.close()
        return int(found[1]) if isinstance(found, tuple) else None

    def stop(self) -> None:
        if self.proc is None:
            return
        _end(self.proc)
        self.proc = None


# -- the stack under fault ------------------------------------------------------------------------


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


_TASK_LINE = re.compile(r"Task (?P<name>\S+)\[(?P<id>[0-9a-f-]+)\] (?P<what>\w+)")


@dataclass
class Faults:
    """A stack with its own Redis, the orders a test created, and the faults' bookkeeping."""

    stack: Stack
    redis_server: RedisServer
    client: redis.Redis
    live: list[str] = field(default_factory=list)
    """Orders that must end Ready."""
    deleted: list[str] = field(default_factory=list)
    """Orders that must end gone."""
    retired_passes: float = 0.0
    """Passes counted by worker processes killed since."""
    log_offsets: dict[str, int] = field(default_factory=dict)
    """Where each process's current life starts in its log."""
    proxy: SilentProxy | None = None
    """The proxy between Redis and the processes ``proxied`` names (the fixture's option)."""
    proxied: frozenset[str] = frozenset()
    """The processes that reach Redis through ``proxy`` (and nothing else)."""
    replica: RedisServer | None = None
    """With the ``sentinel`` option: the replica of ``redis_server``, the first master."""
    sentinel: SentinelServer | None = None
    """With the ``sentinel`` option: the Sentinel every process asks for the master."""
    api_proxies: list[SilentProxy] = field(default_factory=list)
    """With the ``api_proxied`` option: a proxy before each API server, for the watchers."""
    watcher_kubeconfig: Path | None = None
    """With the ``api_proxied`` option: the watchers' kubeconfig, through ``api_proxies``."""

    # -- processes --------------------------------------------------------------------------------

    def start(self, name: str, *args: str) -> None:
        path = self.stack.logs / f"{name}.log"
        self.log_offsets[name] = path.stat().st_size if path.exists() else 0
        env: dict[str, str] = {}
        if self.proxy is not None and name in self.proxied:
            env["TENANTDB_REDIS_URL"] = self.proxy.url
        if self.watcher_kubeconfig is not None and args[:1] == ("watcher",):
            env["TENANTDB_KUBECONFIG"] = str(self.watcher_kubeconfig)
        self.stack.start(name, *args, env=env)

    def cut_watches(self, *, abrupt: bool) -> int:
        """Once the watchers hold a connection to every API server again (they re-open their
        watches after a backoff), cut every one of them (the watches among them), with a RST
        when ``abrupt``; how many were open."""
        wait_for(
            lambda: all(proxy.connections() for proxy in self.api_proxies),
            15,
            "the watchers to reconnect to every API server",
        )
        return sum(proxy.cut(abrupt=abrupt) for proxy in self.api_proxies)

    def start_worker(self, name: str, queues: str = ALL_QUEUES) -> None:
        self.start(
            name, "worker", "--", "-c", "2", "-n", f"{name}-{self.stack.suffix}@%h",
            "-Q", queues, "--without-mingle", "--without-gossip",
        )  # fmt: skip

    def workers(self) -> list[str]:
        return sorted(n for n in self.stack.procs if n.startswith("worker"))

    def pids(self, name: str) -> list[int]:
        pid = self.stack.procs[name].pid
        return [pid, *descendants(pid)]

    def signal_tree(self, name: str, sig: signal.Signals) -> None:
        """Send ``sig`` to a process and every process below it."""
        self.stack.signal_tree(name, sig)

    def kill_tree(self, name: str) -> None:
        """SIGKILL a process and its children at once, as a node losing the pod would."""
        if name.startswith("worker"):
            with contextlib.suppress(OSError):
                self.retired_passes += self.stack.counter(
                    name, "tenantdb_reconcile_passes_total", kind=KIND
                )
        pids = self.pids(name)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
        self.stack.procs.pop(name).wait()
        for pid in pids[1:]:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                continue

    def log_lines(self, name: str) -> list[str]:
        """The log lines of the process's current life."""
        path = self.stack.logs / f"{name}.log"
        with path.open("rb") as handle:
            handle.seek(self.log_offsets.get(name, 0))
            return handle.read().decode(errors="replace").splitlines()

    def running_chain_steps(self, name: str) -> list[str]:
        """Chain tasks the worker received in its current life and has not finished."""
        open_tasks: dict[str, str] = {}
        for line in self.log_lines(name):
            match = _TASK_LINE.search(line)
            if match is None or not any(f".{q}." in match["name"] for q in CHAIN_QUEUES):
                continue
            if match["what"] == "received":
                open_tasks[match["id"]] = match["name"]
            else:
                open_tasks.pop(match["id"], None)
        return list(open_tasks.values())

    def alive(self) -> dict[str, bool]:
        return {name: proc.poll() is None for name, proc in self.stack.procs.items()}

    def passes(self) -> float:
        """Passes over MariaDBDatabase orders every worker counted, killed ones included."""
        return self.retired_passes + sum(
            self.stack.counter(name, "tenantdb_reconcile_passes_total", kind=KIND)
            for name in self.workers()
        )

    def counter(self, metric: str, **labels: str) -> float:
        """A counter summed over the running workers."""
        return sum(self.stack.counter(name, metric, **labels) for name in self.workers())

    # -- orders -----------------------------------------------------------------------------------

    def key(self, name: str) -> OrderKey:
        return OrderKey(KIND, NAMESPACE, name)

    def create(self, base: str) -> str:
        name = self.stack.name(base)
        self.stack.apply_order(name)
        self.live.append(name)
        return name

    def delete(self, name: str) -> None:
        self.stack.kube().delete(MARIADB_DATABASE, NAMESPACE, name)
        self.live.remove(name)
        self.deleted.append(name)

    def wait_quiet(self, names: Sequence[str], seconds: float) -> None:
        wait_for(lambda: all(self.quiet(n) for n in names), seconds, f"{names} to be quiet")

    def pending(self, name: str) -> bool:
        return bool(self.client.exists(f"{self.stack.prefix}pending:{self.key(name)}"))

    def describe(self, name: str) -> str:
        """The order's conditions and generations, in one line."""
        order = self.stack.order(name)
        if order is None:
            return "gone"
        status = order.get("status") or {}
        conditions = " ".join(
            f"{c['type']}={c['status']}/{c.get('reason')}@{c.get('lastTransitionTime')}"
            for c in status.get("conditions") or ()
        )
        generation = order["metadata"].get("generation")
        return (
            f"gen {generation} observed {status.get('observedGeneration')}: {conditions}"
            f" [{self.queue_state(name)}]"
        )

    def queue_state(self, name: str) -> str:
        """What the work queue holds for the order: lock, pending mark, dirty and due times."""
        key, prefix, client = str(self.key(name)), self.stack.prefix, self.client
        lock = client.get(f"{prefix}lock:{key}")
        fence = _text(lock).partition("#")[2] if lock is not None else "-"
        now = time.time() * 1000
        dirty = client.zscore(f"{prefix}dirty", key)
        due = client.zscore(f"{prefix}due", key)
        events, covered = client.hmget(f"{prefix}seq:{key}", ["events", "covered"])
        return (
            f"lock {fence} ttl {client.pttl(f'{prefix}lock:{key}')} ms, "
            f"pending ttl {client.pttl(f'{prefix}pending:{key}')} ms, "
            f"dirty in {'-' if dirty is None else int(dirty - now)} ms, "
            f"due in {'-' if due is None else int(due - now)} ms, "
            f"events {_text(events or b'0')}/{_text(covered or b'0')}"
        )

    def quiet(self, name: str) -> bool:
        """No pass of the order pending or running, and every queue drained.

        Unlike ``order_quiet`` it does not wait for the broker's unacknowledged messages: those a
        killed worker held stay there until the visibility timeout, and each ends at once when
        it is delivered again (its pass is over).
        """
        key, prefix, client = str(self.key(name)), self.stack.prefix, self.client
        return not (
            client.exists(f"{prefix}pending:{key}")
            or client.exists(f"{prefix}lock:{key}")
            or any(
                client.llen(lst)
                for q in ("reconcile", *CHAIN_QUEUES)
                for lst in WorkQueueKeys(prefix).broker_lists(q)
            )
        )

    def ready(self, name: str) -> bool:
        return self.stack.condition(name, "Ready").get("status") == "True"

    def locks(self) -> dict[str, str]:
        """Every order lease held now: key -> lock value (``token[#fence]``)."""
        prefix = f"{self.stack.prefix}lock:"
        found: dict[str, str] = {}
        for name in self.client.scan_iter(match=f"{prefix}*", count=1000):
            value = self.client.get(name)
            if value is not None:
                found[_text(name)[len(prefix) :]] = _text(value)
        return found

    def in_flight(self) -> bool:
        """Whether some pass holds a lease now."""
        return bool(self.locks())

    def unsettled(self) -> list[str]:
        """Orders not where they must end: not Ready (or not gone), or with work still queued."""
        out: list[str] = []
        for name in self.live:
            if not self.ready(name):
                out.append(f"{name}: not Ready ({self.describe(name)})")
        for name in self.deleted:
            if self.stack.order(name) is not None:
                out.append(f"{name}: not gone")
        if not out:
            for name in [*self.live, *self.deleted]:
                if not self.quiet(name):
                    out.append(f"{name}: a pass is still pending or running")
        return out

    def lost(self) -> list[str]:
        """Orders that must be served but are missing, or that no pass ever reported on."""
        out: list[str] = []
        for name in self.live:
            order = self.stack.order(name)
            if order is None or not (order.get("status") or {}).get("conditions"):
                out.append(name)
        return out

    def writes(self) -> list[AuditEntry]:
        """Every write the API servers' audit logs recorded since the test began."""
        real, marks = self.stack.platform.real, self.stack.audit_marks
        return [e for n, c in real.clusters.items() for e in c.audit_writes(marks.get(n, 0))]

    def reads(self) -> list[AuditEntry]:
        """Every get and list the clusters recorded, as `writes` records the writes."""
        real, marks = self.stack.platform.real, self.stack.audit_marks
        return [e for n, c in real.clusters.items() for e in c.audit_reads(marks.get(n, 0))]

    def writers(self) -> Writers:
        """tenantdb's writes by order and pass, each pass from its first request."""
        return tenantdb_writers(self.writes(), self.reads())

    # -- the verdict ------------------------------------------------------------------------------

    def settle(self, scenario: str, since: float, seconds: float, note: str = "") -> Figures:
        """Wait up to ``seconds`` for every order to converge; record and check the figures.

        ``since`` is the monotonic time the fault ended; the time to converge is counted from it.
        """
        deadline = time.monotonic() + seconds
        while (left := self.unsettled()) and time.monotonic() < deadline:
            time.sleep(0.2)
        converged = time.monotonic() - since
        lost = self.lost()
        writers = self.writers()
        overlaps = concurrent_writers(writers.spans)
        figures = Figures(
            scenario=scenario,
            converge_seconds=converged if not left else float("nan"),
            passes=self.passes(),
            writing_passes=len(writers.spans),
            orders=len(self.live) + len(self.deleted),
            lost=len(lost),
            unconverged=len(left),
            concurrent=len(overlaps),
            unattributed=writers.unattributed,
            note=note,
            unattributed_agents=writers.unattributed_agents,
        )
        FIGURES.append(figures)
        assert not left, f"not converged {seconds:.0f} s after the fault: {left}"
        assert not lost, f"lost orders: {lost}"
        assert writers.spans, "no tenantdb write named its pass in the User-Agent"
        assert not overlaps, "passes of one order wrote at once: " + "; ".join(
            f"{a.order}: {a.pass_id} [{a.first}..{a.last}] and {b.pass_id} [{b.first}..{b.last}]"
            for a, b in overlaps
        )
        return figures

    def wait_all_ready(self, seconds: float) -> None:
        wait_for(lambda: all(self.ready(n) for n in self.live), seconds, "every order Ready")


@pytest.fixture
def faults(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    key_prefix: str,
    platforms: PlatformPool,
) -> Iterator[Faults]:
    """A platform, a Redis of the test's own and tenantdb's processes on them.

    Parametrize indirectly to change the processes: ``{"watchers": 2}`` runs two watchers
    (``watcher-1`` and ``watcher-2``), ``{"queues": "reconcile,provision"}`` starts the two
    workers on those queues only, ``{"proxied": ("worker-1",)}`` has those processes reach
    Redis through a ``SilentProxy`` (``Faults.proxy``), ``{"sentinel": True}`` gives Redis a
    replica and a Sentinel that every process (and the test's client) follows to the master,
    ``{"api_proxied": True}`` has the watchers reach every API server through a proxy whose
    connections ``Faults.cut_watches`` cuts.
    The platform is shared as the end-to-end stack's is (``tests.e2e.conftest.stack``).
    """
    options: dict[str, Any] = dict(getattr(request, "param", {}))
    private = request.node.get_closest_marker("private_platform") is not None
    clusters = ("management", "edge-1")
    leased = lease_platform(platforms, clusters, {}, private)
    with leased as (platform, marks):
        yield from _faults(platform, marks, options, tmp_path, key_prefix)


def _faults(
    platform: Platform,
    marks: dict[str, int],
    options: dict[str, Any],
    tmp_path: Path,
    key_prefix: str,
) -> Iterator[Faults]:
    server = RedisServer(tmp_path / "redis")
    server.start()
    proxy = SilentProxy(server.port).__enter__() if options.get("proxied") else None
    env = {"TENANTDB_REDIS_URL": server.url, "TENANTDB_PENDING_TTL_SECONDS": "30"}
    replica = sentinel = None
    if options.get("sentinel"):
        replica, sentinel = _sentinel(server, tmp_path)
        env |= {
            "TENANTDB_REDIS_SENTINELS": f"127.0.0.1:{sentinel.port}",
            "TENANTDB_REDIS_SENTINEL_MASTER": SentinelServer.MASTER_NAME,
        }
        watching = Sentinel([("127.0.0.1", sentinel.port)], socket_timeout=5)  # type: ignore[no-untyped-call, unused-ignore]
        client: redis.Redis = watching.master_for(SentinelServer.MASTER_NAME, socket_timeout=5)  # type: ignore[no-untyped-call, unused-ignore]
    else:
        client = redis.Redis.from_url(server.url, socket_timeout=5)
    logs = tmp_path / "logs"
    logs.mkdir()
    # A message lost with its publisher blocks its key for one pending TTL (300 s by default):
    # 30 s here (``env`` above), so that recovery fits in a scenario's window.
    stack = Stack(platform, key_prefix, logs, extra_env=env, audit_marks=marks)
    with root_sql() as conn, conn.cursor() as cur:
        cur.execute("SHOW DATABASES")
        before = {row[0] for row in cur.fetchall()}
    running = Faults(
        stack,
        server,
        client,
        proxy=proxy,
        proxied=frozenset(options.get("proxied", ())),
        replica=replica,
        sentinel=sentinel,
    )
    if options.get("api_proxied"):
        running.api_proxies, running.watcher_kubeconfig = _proxied_watcher(platform, tmp_path)
    try:
        watchers = int(options.get("watchers", 1))
        for n in range(watchers):
            running.start("watcher" if watchers == 1 else f"watcher-{n + 1}", "watcher")
        for name in ("worker-1", "worker-2"):
            running.start_worker(name, str(options.get("queues", ALL_QUEUES)))
        running.start("beat", "beat")
        yield running
    finally:
        for name in list(stack.procs):
            running.signal_tree(name, signal.SIGCONT)
        if server.proc is not None:
            server.resume()
        stack.stop()
        _drop_leftovers(before, stack.suffix)
        client.close()
        _stop_helpers(running)


def _sentinel(server: RedisServer, tmp_path: Path) -> tuple[RedisServer, SentinelServer]:
    """A replica of ``server`` and a Sentinel watching it, both running."""
    replica = RedisServer(tmp_path / "replica", ("--replicaof", "127.0.0.1", str(server.port)))
    replica.start()
    sentinel = SentinelServer(tmp_path / "sentinel", server.port)
    sentinel.start()
    return replica, sentinel


def _stop_helpers(running: Faults) -> None:
    """Close the proxies and stop the Redis servers of a test's faults."""
    for proxy in (running.proxy, *running.api_proxies):
        if proxy is not None:
            proxy.close()
    for extra in (running.sentinel, running.replica):
        if extra is not None:
            extra.stop()
    running.redis_server.stop()


def _proxied_watcher(platform: Platform, directory: Path) -> tuple[list[SilentProxy], Path]:
    """A proxy before each API server and a copy of the watcher's kubeconfig through them."""
    source = Path(platform.env["DEVSTACK_WATCHER_KUBECONFIG"])
    config = yaml.safe_load(source.read_text())
    proxies: list[SilentProxy] = []
    for entry in config["clusters"]:
        url = urllib.parse.urlsplit(entry["cluster"]["server"])
        assert url.port is not None, url
        proxy = SilentProxy(url.port).__enter__()
        proxies.append(proxy)
        entry["cluster"]["server"] = f"{url.scheme}://{url.hostname}:{proxy.port}"
    path = directory / "watcher-proxied.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return proxies, path


def hold(seconds: float) -> None:
    """Keep a fault in place for ``seconds`` (a duration of the fault, not a wait for a state)."""
    time.sleep(seconds)


def poll_fast(condition: Callable[[], Any], seconds: float) -> Any:
    """Poll ``condition`` without pause for up to ``seconds``; its last value."""
    deadline = time.monotonic() + seconds
    value = condition()
    while not value and time.monotonic() < deadline:
        value = condition()
    return value


__all__ = [
    "Faults",
    "PassSpan",
    "concurrent_writers",
    "hold",
    "pass_name",
    "poll_fast",
    "tenantdb_writers",
]
