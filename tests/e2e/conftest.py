"""End-to-end fixtures: the real platform and tenantdb's real processes on it, per test.

Every test runs on the platform: a kube-apiserver over etcd for each of
``management`` and ``edge-1`` (``devstack.realkube``, built by ``make kube``), where tenantdb
holds only the chart's grants and a token the real server issued, with the real OpenBao, ESO and
cert-manager beside them (``devstack.upstream``) and the mariadb-operator stand-in. The platform
is shared with the tests before and after it in the same pytest process (``tests.platforms``),
which is safe because a test owns its orders, key prefix and schemas; a test that changes the
platform itself (the ControlPlane, OpenBao, a controller) is marked ``private_platform`` and gets
one of its own. Each test gets its own Redis key prefix and its own watcher, two workers and beat
as real subprocesses. Orders are driven only through the official client; names carry a random
suffix, and every schema and SQL user a test leaves behind is dropped afterwards. Before a stack
is stopped it is scanned for leaked secrets (``tests.e2e.leaks``): a password, token or private
key the platform issued, found in Redis, a process log, a metrics page, an order's status or an
Event, fails the test at teardown, and so does any request of tenantdb's ServiceAccount an API
server refused while the test ran."""

from __future__ import annotations

import base64
import json
import os
import random
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import hvac
import pytest
import redis

from devstack.mysql_group import MysqlGroup
from devstack.platform import Platform, role_env
from devstack.realkube import AuditEntry
from tenantdb.adapters.clusters import ClusterRegistry
from tenantdb.adapters.kube import SECRET, KubeClient
from tenantdb.adapters.mariadbdatabase import CONTROL_PLANE, EXTERNAL_SECRET, MARIADB_DATABASE
from tenantdb.adapters.workqueue import WorkQueueKeys
from tenantdb.core.mariadbdatabase.naming import compute_order_names
from tenantdb.settings import Settings
from tests.conftest import REDIS_URL
from tests.e2e import leaks
from tests.platforms import PlatformPool
from tests.support import root_sql, stop_processes, wait_for

REPO = Path(__file__).resolve().parents[2]
API_VERSION = "c5c3.io/v1alpha1"


def schema_exists(name: str) -> bool:
    """Whether the schema exists on the real MariaDB."""
    with root_sql() as conn, conn.cursor() as cur:
        cur.execute("SELECT 1 FROM information_schema.schemata WHERE schema_name = %s", (name,))
        return cur.fetchone() is not None


def user_exists(name: str) -> bool:
    """Whether an SQL user of that name exists."""
    with root_sql() as conn, conn.cursor() as cur:
        cur.execute("SELECT 1 FROM mysql.user WHERE user = %s", (name,))
        return cur.fetchone() is not None


_PORTS = range(20_000, 32_768)
"""Ports below Linux's ephemeral range (32768-60999): no outgoing connection takes one of them
between the moment it is handed out and the moment a process binds it."""
_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A TCP port nothing listens on right now, handed out once per test session."""
    rng = random.Random()
    for _ in range(200):
        port = rng.choice(_PORTS)
        if port in _HANDED_OUT:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    raise RuntimeError("no free port below the ephemeral range")


def at_once(calls: list[Callable[[], Any]]) -> None:
    """Run ``calls`` from a thread each, released together; fail if any raised."""
    start = threading.Barrier(len(calls))
    errors: list[BaseException] = []

    def run(call: Callable[[], Any]) -> None:
        start.wait()
        try:
            call()
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors, errors


def wait_settled(
    reason_of: Callable[[str], str], names: list[str], outcomes: tuple[str, ...], seconds: float
) -> dict[str, str]:
    """Wait until every order's reason is one of ``outcomes``; return the reasons by name."""

    def settled() -> dict[str, str] | None:
        reasons = {name: reason_of(name) for name in names}
        return reasons if all(r in outcomes for r in reasons.values()) else None

    found: dict[str, str] = wait_for(settled, seconds, f"every order to reach one of {outcomes}")
    return found


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (a worker's prefork children)."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    found: list[int] = []
    for child in children:
        found += [int(child), *descendants(int(child))]
    return found


POOL = 2
"""Pool processes per worker of the stack."""


def order_quiet(stack: Stack, client: redis.Redis, key: Any) -> bool:
    """Whether no pass of the order is pending or running and every queue is drained."""
    prefix = stack.prefix
    return not (
        client.exists(f"{prefix}pending:{key}")
        or client.exists(f"{prefix}lock:{key}")
        or any(
            client.llen(name)
            for q in ("reconcile", "provision", "delivery")
            for name in WorkQueueKeys(prefix).broker_lists(q)
        )
        or client.hlen(f"{prefix}unacked")
    )


@dataclass
class Stack:
    """One platform and tenantdb's processes on it."""

    platform: Platform
    prefix: str
    logs: Path
    suffix: str = field(default_factory=lambda: secrets.token_hex(3))
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    registry: ClusterRegistry | None = None
    metrics_ports: dict[str, int] = field(default_factory=dict)
    extra_env: dict[str, str] = field(default_factory=dict)
    """Settings every tenantdb process of the stack gets on top of the defaults."""
    leak_recorder: leaks.Recorder | None = None
    """What the platform issued while it ran, for the secret-leak scan at teardown."""
    audit_marks: dict[str, int] = field(default_factory=dict)
    """Where each real API server's audit log ended when the test got the platform."""

    @property
    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            **self.platform.env,
            "TENANTDB_REDIS_URL": REDIS_URL,
            "TENANTDB_KEY_PREFIX": self.prefix,
            "TENANTDB_LOCK_TTL_SECONDS": "10",
            "TENANTDB_RETRY_BACKOFF_MAX_SECONDS": "4",
            "TENANTDB_WATCH_BACKOFF_MAX_SECONDS": "2",
            "TENANTDB_CLUSTER_POLL_SECONDS": "1",
            "PYTHONPATH": str(REPO),
            **self.extra_env,
        }

    def start(self, name: str, *args: str, env: dict[str, str] | None = None) -> None:
        port = free_port()
        self.metrics_ports[name] = port
        with (self.logs / f"{name}.log").open("ab") as out:
            self.procs[name] = subprocess.Popen(
                [sys.executable, "-m", "tenantdb.cli", *args],
                cwd=REPO,
                env={
                    **role_env(self.env, args[0]),
                    "TENANTDB_METRICS_PORT": str(port),
                    **(env or {}),
                },
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def signal_tree(self, name: str, sig: signal.Signals) -> None:
        """Send ``sig`` to one of the stack's processes and every process below it."""
        pid = self.procs[name].pid
        for target in (pid, *descendants(pid)):
            try:
                os.kill(target, sig)
            except ProcessLookupError:
                continue

    @contextmanager
    def workers_held(self) -> Iterator[None]:
        """Freeze every worker process (SIGSTOP) for the block: what they had begun stays in
        flight and what is enqueued meanwhile waits; they go on (SIGCONT) when it ends."""
        workers = sorted(name for name in self.procs if name.startswith("worker"))
        for name in workers:
            self.signal_tree(name, signal.SIGSTOP)
        try:
            yield
        finally:
            for name in workers:
                self.signal_tree(name, signal.SIGCONT)

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run a ``tenantdb`` command with the stack's settings; its output is captured."""
        return subprocess.run(
            [sys.executable, "-m", "tenantdb.cli", *args],
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def metrics(self, name: str, seconds: float = 30) -> str:
        """The /metrics text one process serves; a process still starting is waited for (it
        serves once it has imported and forked, which a loaded machine can take seconds to do),
        one that has exited fails the test."""
        url = f"http://127.0.0.1:{self.metrics_ports[name]}/metrics"
        deadline = time.monotonic() + seconds
        while True:
            try:
                with urllib.request.urlopen(url, timeout=5) as answer:
                    return str(answer.read().decode())
            except urllib.error.URLError as error:
                if not isinstance(error.reason, ConnectionRefusedError):
                    raise
                process = self.procs.get(name)
                if process is not None and process.poll() is not None:
                    pytest.fail(f"{name} exited with {process.returncode} before serving metrics")
                if time.monotonic() > deadline:
                    raise
            threading.Event().wait(0.2)

    def counter(self, name: str, metric: str, **labels: str) -> float:
        """The sum of a counter's samples with these labels, across the named processes."""
        total = 0.0
        for line in self.metrics(name).splitlines():
            if not line.startswith(metric + "{") and not line.startswith(metric + " "):
                continue
            if all(f'{k}="{v}"' in line for k, v in labels.items()):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def start_worker(self, name: str) -> None:
        self.start(
            name, "worker", "--", "-c", str(POOL), "-n", f"{name}-{self.suffix}@%h",
            "-Q", "reconcile,provision,delivery,teardown", "--without-mingle", "--without-gossip",
        )  # fmt: skip

    def pool_processes(self) -> int:
        """How many pool processes the running workers have between them."""
        return POOL * sum(1 for name in self.procs if name.startswith("worker"))

    def kill(self, name: str) -> None:
        proc = self.procs.pop(name)
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def stop(self) -> None:
        stop_processes(self.procs.values(), grace=20)

    def kube(self, cluster: str = "") -> KubeClient:
        if self.registry is None:
            self.registry = ClusterRegistry.from_settings(
                Settings(
                    kubeconfig=str(self.platform.kubeconfig_path), management_context="management"
                )
            )
        return self.registry.get(cluster)

    def logs_text(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.logs.glob("*.log")))

    # -- orders ----------------------------------------------------------------------------

    def name(self, base: str) -> str:
        """An order name no other test uses (its schema name follows from it)."""
        return f"{base}-{self.suffix}"

    def apply_order(self, name: str, cluster: str = "", **spec: Any) -> dict[str, Any]:
        body = {
            "apiVersion": API_VERSION,
            "kind": "MariaDBDatabase",
            "metadata": {"name": name, "namespace": "tenant-a"},
            "spec": {"controlPlaneRef": {"name": "cp", "namespace": "openstack"}, **spec},
        }
        return self.kube(cluster).create(body)

    def order(self, name: str, cluster: str = "") -> dict[str, Any] | None:
        return self.kube(cluster).get_or_none(MARIADB_DATABASE, "tenant-a", name)

    def condition(self, name: str, kind: str, cluster: str = "") -> dict[str, Any]:
        status = (self.order(name, cluster) or {}).get("status") or {}
        return next((c for c in status.get("conditions") or () if c["type"] == kind), {})

    def wait_ready(self, name: str, cluster: str = "", seconds: float = 40) -> dict[str, Any]:
        wait_for(
            lambda: self.condition(name, "Ready", cluster).get("status") == "True",
            seconds,
            f"{name} to become Ready; last status {self.order(name, cluster)}",
        )
        order = self.order(name, cluster)
        assert order is not None
        return order

    def wait_reason(
        self, name: str, kind: str, reason: str, cluster: str = "", seconds: float = 40
    ) -> dict[str, Any]:
        found: dict[str, Any] = wait_for(
            lambda: (c := self.condition(name, kind, cluster)).get("reason") == reason and c,
            seconds,
            f"{name} {kind}={reason}; last status {self.order(name, cluster)}",
        )
        return found

    def force_refresh(self, name: str, ready: dict[str, Any]) -> dict[str, Any]:
        """Force ESO to fetch a new credential for a Ready management-cluster order (as an
        operator's force-sync annotation does); return the order once tenantdb delivered it.

        ``ready`` is the order as last read, Ready; the delivered user must change and
        ``credentialsRefreshedAt`` move past it.
        """
        ready = self.settle_credential(name)
        before = self.secret(f"{name}-credentials") or {}
        assert before.get("username"), f"{name} has no delivered credential to refresh"
        refreshed = ready["status"]["credentialsRefreshedAt"]
        # refreshTime has whole seconds: let the clock pass the first one before forcing one.
        first = datetime.fromisoformat(refreshed).timestamp()
        wait_for(lambda: time.time() >= first + 1, 5, "a new second")
        es_name = compute_order_names("", "tenant-a", name, "openstack").credentials
        self.kube().patch(
            EXTERNAL_SECRET,
            "openstack",
            es_name,
            {"metadata": {"annotations": {"force-sync": str(time.time())}}},
        )
        wait_for(
            lambda: (
                (self.secret(f"{name}-credentials") or {}).get("username") != before["username"]
            ),
            20,
            "the delivered Secret to carry the refreshed user",
        )
        after: dict[str, Any] = wait_for(
            lambda: (
                (o := self.order(name))
                and o["status"].get("credentialsRefreshedAt") != refreshed
                and o
            ),
            20,
            "credentialsRefreshedAt to move",
        )
        return after

    def settle_credential(
        self, name: str, cluster: str = "", seconds: float = 20
    ) -> dict[str, Any]:
        """Wait until a Ready order's delivered credential is the one ESO holds (on the
        management cluster) and has stayed so for a second; return the order.

        ESO may read a second credential right after an ExternalSecret's first sync (its cache
        has not seen its own status write yet), and tenantdb then delivers that one: a test
        that compares credentials starts once that is over.
        """
        credentials = compute_order_names(cluster, "tenant-a", name, "openstack").credentials
        seen: list[tuple[float, str]] = []

        def settled() -> bool:
            issued = self.secret(credentials, namespace="openstack") or {}
            delivered = self.secret(f"{name}-credentials", cluster) or {}
            user = delivered.get("username", "")
            if not user or user != issued.get("username"):
                seen.clear()
                return False
            if not seen or seen[-1][1] != user:
                seen[:] = [(time.monotonic(), user)]
            return time.monotonic() - seen[0][0] >= 1.0

        wait_for(settled, seconds, f"{name}'s credential to settle")
        return self.wait_ready(name, cluster)

    def secret(
        self, name: str, cluster: str = "", namespace: str = "tenant-a"
    ) -> dict[str, str] | None:
        obj = self.kube(cluster).get_or_none(SECRET, namespace, name)
        if obj is None:
            return None
        return {k: base64.b64decode(v).decode() for k, v in (obj.get("data") or {}).items()}

    def role_exists(self, role: str) -> bool:
        """Whether OpenBao holds the database role (read as root)."""
        client = self.platform.root_client()
        try:
            client.secrets.database.read_role(role, mount_point="database/mariadb")
        except hvac.exceptions.InvalidPath:
            return False
        finally:
            client.adapter.close()
        return True

    def control_plane(self) -> dict[str, Any]:
        return self.kube().get(CONTROL_PLANE, "openstack", "cp")

    def patch_control_plane(self, patch: dict[str, Any]) -> None:
        self.kube().patch(CONTROL_PLANE, "openstack", "cp", patch)

    def record_writes(self) -> Callable[[], list[AuditEntry]]:
        """Start recording every cluster's writes; the function returned reads those made since
        (from the API servers' audit logs, read from where they end now)."""
        real = self.platform.real
        marks = {name: c.audit_mark() for name, c in real.clusters.items()}
        return lambda: [e for name, c in real.clusters.items() for e in c.audit_writes(marks[name])]

    def real_address(self, host: str, port: str) -> tuple[str, int]:
        services = json.loads((self.platform.state_dir / "services.json").read_text())
        real = services.get(f"{host}:{port}", f"{host}:{port}")
        real_host, _, real_port = real.rpartition(":")
        return real_host, int(real_port)


@pytest.fixture
def stack_env() -> dict[str, str]:
    """Settings for every tenantdb process of ``stack``; a test module may override it."""
    return {}


@pytest.fixture(scope="session")
def mysql_group() -> Iterator[MysqlGroup]:
    """The two MariaDB servers every test of the session shares (reset per platform)."""
    with tempfile.TemporaryDirectory(prefix="tenantdb-e2e-mysql-") as directory:
        group = MysqlGroup.start(Path(directory))
        try:
            yield group
        finally:
            group.stop()


@pytest.fixture
def platform_options() -> dict[str, Any]:
    """Keyword arguments of ``start_platform`` for ``stack``; a test module may override it."""
    return {}


@pytest.fixture
def stack(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    key_prefix: str,
    real_redis: redis.Redis,
    stack_env: dict[str, str],
    platform_options: dict[str, Any],
    platforms: PlatformPool,
) -> Iterator[Stack]:
    """A platform with tenantdb's watcher, two workers and beat running on it.

    Its target clusters are ``edge-1``, or the names a test passes as the fixture's parameter.
    The platform is shared with the tests before and after (``tests.platforms``) unless the
    test is marked ``private_platform``. At teardown the stack is scanned for leaked secrets
    (``_scan_for_leaks``) before it stops, and the API servers are asked for every request of
    tenantdb's ServiceAccount they refused with 403 while the test ran; a finding of either
    fails the test.
    """
    targets = tuple(getattr(request, "param", ("edge-1",)))
    clusters = ("management", *targets)
    private = request.node.get_closest_marker("private_platform") is not None
    recorder = leaks.Recorder().start()
    failures: list[str] = []
    try:
        options = platform_options
        leased = lease_platform(platforms, clusters, options, private)
        with leased as (platform, marks):
            recorder.watch(platform)
            logs = tmp_path / "logs"
            logs.mkdir()
            running = Stack(platform, key_prefix, logs, extra_env=stack_env, leak_recorder=recorder)
            running.audit_marks = marks
            with root_sql() as conn, conn.cursor() as cur:
                cur.execute("SHOW DATABASES")
                before = {row[0] for row in cur.fetchall()}
            try:
                running.start("watcher", "watcher")
                running.start_worker("worker-1")
                running.start_worker("worker-2")
                running.start("beat", "beat")
                yield running
            finally:
                try:
                    refused = [
                        line
                        for user in platform.operator_users
                        for line in platform.forbidden(user, marks)
                    ]
                    if refused:
                        failures.append("tenantdb was refused (403): " + "; ".join(refused))
                    leaked = _scan_for_leaks(running, real_redis)
                    if leaked:
                        failures.append(leaked)
                finally:
                    # The recorder's watches end before the platform is cleared or stops: an
                    # API server with a watch open waits for it before it exits.
                    recorder.stop()
                    running.stop()
                    _drop_leftovers(before, running.suffix)
    finally:
        recorder.stop()
    if failures:
        pytest.fail("\n".join(failures), pytrace=False)


@contextmanager
def lease_platform(
    platforms: PlatformPool,
    clusters: tuple[str, ...],
    options: dict[str, Any],
    private: bool,
) -> Iterator[tuple[Platform, dict[str, int]]]:
    """The platform of one stack, from the pool, and the audit marks it had when the test got
    it."""
    with platforms.lease(clusters, options, private=private) as lease:
        yield lease.platform, lease.marks


def _scan_for_leaks(
    stack: Stack, client: redis.Redis, extra: Iterable[leaks.Place] = ()
) -> str | None:
    """Scan the stack for issued secrets (see ``tests.e2e.leaks``); a report when one leaked.

    The secrets, the metrics pages, the orders and the Events are read while everything runs;
    the processes are stopped (their last log lines written) before Redis and the logs are read.
    """
    found = leaks.collect(stack.platform, stack.leak_recorder)
    places, missed = leaks.live_places(stack)
    places += extra
    stack.stop()
    places += leaks.stored_places(stack, client)
    findings = leaks.scan(found, places)
    # A page that did not answer (a process still starting) has served nothing to leak.
    return leaks.describe(findings, found, missed) if findings else None


def _drop_leftovers(before: set[str], suffix: str) -> None:
    """Drop the schemas this test's orders left (Retain keeps them) and any user they issued."""
    with root_sql() as conn, conn.cursor() as cur:
        cur.execute("SHOW DATABASES")
        for (name,) in cur.fetchall():
            if name not in before and re.search(rf"_{suffix}$", name):
                cur.execute(f"DROP DATABASE `{name}`")
        cur.execute("SELECT user, host FROM mysql.user WHERE user LIKE 'v-%%'")
        for user, host in cur.fetchall():
            if suffix.replace("-", "") in user:
                cur.execute("DROP USER %s@%s", (user, host))
