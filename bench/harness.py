"""The bench's stack and meters: a fresh platform, tenantdb's real processes, and what they cost.

`Stack` starts `python -m devstack up` (the platform: kube-apiservers over etcd, OpenBao, ESO,
cert-manager and the stand-in operators) and tenantdb's watcher, one Celery worker with N
prefork processes and beat as subprocesses, each on its own metrics port and under a key prefix
of its own, and stops all of them (which drops every schema and SQL user the run created). It
drives orders only through the official Kubernetes client, under the User-Agent
`tenantdb-bench`, so the audit logs tell the bench's requests from tenantdb's.

`Meter.read()` takes one `Reading` of everything a figure is made of: the API servers' and
OpenBao's request counts (tenantdb's own requests only, watches apart, from the API servers'
audit logs and OpenBao's file audit device), the passes, Busy and stale messages from
tenantdb's metrics, the Celery tasks each worker ran (Celery's remote-control `stats`), and the
CPU seconds of tenantdb's processes (their whole process trees) and of the platform (the
`devstack up` process tree: the API servers, etcd, OpenBao, ESO, cert-manager and the stand-in
operators), from /proc. The difference of two readings is what happened between them.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from prometheus_client.parser import text_string_to_metric_families

from devstack.platform import CP_NAMESPACE as KEYSTONE_NAMESPACE
from devstack.platform import MARIADB_NAME, WORKER_SERVICE_ACCOUNT, read_env, role_env
from tenantdb.adapters.celeryapp import build_celery_app
from tenantdb.adapters.workqueue import WorkQueue, WorkQueueKeys
from tenantdb.core.keys import OrderKey
from tenantdb.ops import build_workqueue
from tenantdb.settings import Settings

REPO = Path(__file__).resolve().parent.parent
GROUP, VERSION, PLURAL = "c5c3.io", "v1alpha1", "mariadbdatabases"
NAMESPACE = "tenant-a"
MYSQL_GROUP_NAME = "main"
"""The MySQL failover group the devstack runs, in ``MYSQL.namespace``."""
CLUSTERS = ("management", "edge-1")
BENCH_AGENT = "tenantdb-bench"
TENANTDB_AGENT = "tenantdb"
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class BenchError(Exception):
    """The stack could not be brought up or did not settle; the message says where to look."""


@dataclass(frozen=True)
class OrderKind:
    """Where the orders of one kind live, as the official client and tenantdb's keys name them."""

    group: str
    version: str
    namespace: str
    plural: str
    key_kind: str

    @property
    def api(self) -> tuple[str, str, str, str]:
        """The arguments the custom objects API takes for the kind's namespace."""
        return (self.group, self.version, self.namespace, self.plural)


MARIADB = OrderKind(GROUP, VERSION, NAMESPACE, PLURAL, "mariadbdatabase")
MYSQL = OrderKind("shipstream.io", "v1alpha1", "bloodraven", "mysqldatabases", "mysqldatabase")


# -- CPU from /proc ------------------------------------------------------------------------------


def _stat(pid: int) -> tuple[int, float, float] | None:
    """(ppid, own CPU seconds, CPU seconds of reaped children) of one process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    ppid = int(fields[1])
    own = (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
    reaped = (int(fields[13]) + int(fields[14])) / _CLOCK_TICKS
    return ppid, own, reaped


def _processes() -> tuple[dict[int, tuple[int, float, float]], dict[int, list[int]]]:
    """Every live process's ``_stat``, by pid, and each pid's children."""
    stats: dict[int, tuple[int, float, float]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (found := _stat(int(entry.name))) is not None:
            stats[int(entry.name)] = found
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    return stats, children


def _descendants(root: int, children: Mapping[int, list[int]]) -> list[int]:
    """``root`` and every process below it."""
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def _tree(root: int) -> list[int]:
    """A live process and its descendants."""
    return _descendants(root, _processes()[1])


def tree_cpu_seconds(roots: Mapping[str, int]) -> dict[str, float]:
    """CPU seconds used so far by each root process and every descendant, live or reaped."""
    stats, children = _processes()
    out = {}
    for name, root in roots.items():
        if root not in stats:
            out[name] = 0.0
            continue
        # Children the root has reaped count through its own stat line (cutime and cstime).
        out[name] = stats[root][2] + sum(stats[pid][1] for pid in _descendants(root, children))
    return out


COMPONENTS = {
    "kube-apiserver": "kube-apiserver",
    "etcd": "etcd",
    "kube-controller": "kube-controller-manager",
    "bao": "OpenBao",
    "external-secrets": "ESO",
    "cert-manager-co": "cert-manager",
    "mariadbd": "the group's MariaDB servers",
}
"""The platform's processes by their name in /proc (at most 15 characters), as the report
names them; anything else under the devstack (itself, with the stand-in operators, and the
onboarding's commands it reaped) counts as `devstack`."""


def component_cpu_seconds(root: int) -> dict[str, float]:
    """CPU seconds used so far by each part of the platform below the process ``root`` (see
    ``COMPONENTS``), live processes and what the root reaped."""
    stats, children = _processes()
    out: dict[str, float] = {}
    if root not in stats:
        return out
    out["devstack"] = stats[root][2]
    for pid in _descendants(root, children):
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        name = COMPONENTS.get(comm, "devstack")
        out[name] = out.get(name, 0.0) + stats[pid][1]
    return out


# -- readings ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reading:
    """Everything the figures are made of, at one moment."""

    at: float
    kube: Counter[str] = field(default_factory=Counter)
    """tenantdb's API requests by `verb resource` (watches as `watch resource`)."""
    openbao: Counter[str] = field(default_factory=Counter)
    """tenantdb's OpenBao requests by `METHOD path-shape`."""
    metrics: Counter[str] = field(default_factory=Counter)
    """tenantdb's counters: passes by path, Busy and stale messages."""
    tasks: Counter[str] = field(default_factory=Counter)
    """Celery tasks run, by task name."""
    cpu: dict[str, float] = field(default_factory=dict)
    """CPU seconds by process role (watcher, worker, beat, devstack)."""
    components: dict[str, float] = field(default_factory=dict)
    """The devstack's CPU seconds by part of the platform (``component_cpu_seconds``)."""

    def since(self, before: Reading) -> Delta:
        """What happened between ``before`` and this reading."""
        return Delta(
            seconds=self.at - before.at,
            kube=self.kube - before.kube,
            openbao=self.openbao - before.openbao,
            metrics=self.metrics - before.metrics,
            tasks=self.tasks - before.tasks,
            cpu={k: self.cpu.get(k, 0.0) - before.cpu.get(k, 0.0) for k in self.cpu},
            components={k: v - before.components.get(k, 0.0) for k, v in self.components.items()},
        )


@dataclass(frozen=True)
class Delta:
    """The difference of two readings."""

    seconds: float
    kube: Counter[str]
    openbao: Counter[str]
    metrics: Counter[str]
    tasks: Counter[str]
    cpu: dict[str, float]
    components: dict[str, float] = field(default_factory=dict)
    """The devstack's CPU seconds by part of the platform."""

    @property
    def kube_requests(self) -> int:
        """tenantdb's API requests, watches left out."""
        return sum(n for k, n in self.kube.items() if not k.startswith("watch "))

    @property
    def openbao_requests(self) -> int:
        """tenantdb's OpenBao requests."""
        return sum(self.openbao.values())

    @property
    def sql_requests(self) -> int:
        """tenantdb's requests to the MySQL group's servers (connects, queries, statements)."""
        return sum(self.sql_by_operation.values())

    @property
    def sql_by_operation(self) -> dict[str, int]:
        """tenantdb's requests to the MySQL group's servers, by operation."""
        return {k.removeprefix("sql "): n for k, n in self.metrics.items() if k.startswith("sql ")}

    @property
    def passes(self) -> int:
        """Passes that took an order's lease, whatever path they took."""
        return sum(n for k, n in self.metrics.items() if k.startswith("passes "))

    @property
    def busy(self) -> int:
        """Messages that found their order's lease held."""
        return self.metrics["busy"]

    @property
    def entry_tasks(self) -> int:
        """Reconcile messages the workers ran (passes, Busy and stale ones)."""
        return self.tasks["tenantdb.reconcile.order"]

    @property
    def all_tasks(self) -> int:
        """Every Celery task the workers ran."""
        return sum(self.tasks.values())

    @property
    def tenantdb_cpu(self) -> float:
        """CPU seconds of tenantdb's processes."""
        return sum(v for k, v in self.cpu.items() if k != "devstack")

    @property
    def devstack_cpu(self) -> float:
        """CPU seconds of the devstack process."""
        return self.cpu.get("devstack", 0.0)


def audited_counts(logs: str) -> Counter[str]:
    """tenantdb's requests to the API servers, from their audit logs (`name=path,...`), keyed
    `verb resource[.group][/subresource]`: each request
    once, a watch when it started, every other request when its response was complete."""
    out: Counter[str] = Counter()
    for entry in filter(None, logs.split(",")):
        path = Path(entry.partition("=")[2])
        if not path.exists():
            continue
        for line in path.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a line being written
            agent = str(event.get("userAgent", ""))
            if agent.split(" ", 1)[0].split("/", 1)[0] != TENANTDB_AGENT:
                continue
            wanted = "ResponseStarted" if event.get("verb") == "watch" else "ResponseComplete"
            ref = event.get("objectRef")
            if event.get("stage") != wanted or not ref:
                continue
            group = f".{ref['apiGroup']}" if ref.get("apiGroup") else ""
            sub = f"/{ref['subresource']}" if ref.get("subresource") else ""
            out[f"{event['verb']} {ref.get('resource', '')}{group}{sub}"] += 1
    return out


def audited_openbao_counts(log: Path) -> Counter[str]:
    """tenantdb's requests to the real OpenBao, from its file audit device, keyed
    `operation path` (`update auth/kubernetes/management/login`, `read database/mariadb/roles/*`):
    each response made with (or, for a login, issuing) a token of tenantdb's worker
    ServiceAccount; ESO's generator logs in as another."""
    out: Counter[str] = Counter()
    if not log.exists():
        return out
    for line in log.read_text(errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a line being written
        if event.get("type") != "response":
            continue
        meta = (event.get("auth") or {}).get("metadata") or {}
        if meta.get("service_account_name") != WORKER_SERVICE_ACCOUNT:
            continue
        request = event.get("request") or {}
        out[f"{request.get('operation')} {_path_shape(str(request.get('path', '')))}"] += 1
    return out


def _path_shape(path: str) -> str:
    """An OpenBao path with the order-specific last segment of role and creds paths folded."""
    parts = path.strip("/").split("/")
    if len(parts) >= 4 and parts[-2] in ("roles", "creds"):
        parts[-1] = "*"
    return "/".join(parts)


# -- the stack -----------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Stack:
    """A fresh devstack and tenantdb's processes on it."""

    state: Path
    worker_processes: int
    dead_group: bool = False
    """Also run the devstack's group `dead`, whose sites accept TCP and never answer."""
    prefix: str = field(default_factory=lambda: f"tenantdb-bench-{secrets.token_hex(4)}:")
    env: dict[str, str] = field(default_factory=dict)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    metrics_ports: dict[str, int] = field(default_factory=dict)
    apis: dict[str, k8s.CustomObjectsApi] = field(default_factory=dict)
    refresh_cycle: float | None = None
    """The cycle beat spreads refreshes over (`TENANTDB_REFRESH_CYCLE_SECONDS`); None: the
    product's default."""
    fillers: int = 0
    """Database CRs no order owns that ``fill_databases`` created in Keystone's namespace."""
    mysql_fillers: int = 0
    """Ready MysqlDatabase orders ``fill_mysql_orders`` created beside the measured ones."""
    _redis: redis.Redis | None = None
    _celery: Any = None

    # ---------------------------------------------------------------- processes

    def _start(self, name: str, argv: list[str], env: Mapping[str, str]) -> None:
        log = (self.state / "logs" / f"{name}.log").open("ab")
        self.procs[name] = subprocess.Popen(
            argv, cwd=REPO, env=dict(env), stdout=log, stderr=subprocess.STDOUT
        )
        log.close()

    def up(self) -> Stack:
        """Start the devstack, then the watcher, the worker and beat; wait until all serve."""
        (self.state / "logs").mkdir(parents=True, exist_ok=True)
        base = {**os.environ, "PYTHONPATH": str(REPO)}
        devstack_dir = self.state / "devstack"
        self._start(
            "devstack",
            [sys.executable, "-m", "devstack", "up", "--state-dir", str(devstack_dir),
             "--clusters", ",".join(CLUSTERS),
             *(["--dead-group"] if self.dead_group else [])],
            base,
        )  # fmt: skip
        self._wait(lambda: (devstack_dir / "env").exists(), 60, "the devstack to be ready")
        self._wait(
            lambda: "devstack ready" in self.log("devstack"), 60, "the devstack's ready line"
        )
        self.env = {
            **base,
            **read_env(devstack_dir / "env"),
            "TENANTDB_KEY_PREFIX": self.prefix,
        }
        if self.refresh_cycle is not None:
            self.env["TENANTDB_REFRESH_CYCLE_SECONDS"] = str(self.refresh_cycle)
        tenantdb = [sys.executable, "-m", "tenantdb.cli"]
        roles = {
            "watcher": [*tenantdb, "watcher"],
            "worker": [*tenantdb, "worker", "--", "-c", str(self.worker_processes),
                       "-n", f"bench-{self.prefix.split('-')[-1].strip(':')}@%h",
                       "-Q", "reconcile,provision,delivery,teardown", "--without-mingle",
                       "--without-gossip"],
            "beat": [*tenantdb, "beat"],
        }  # fmt: skip
        for name, argv in roles.items():
            port = self.metrics_ports[name] = _free_port()
            self._start(
                name, argv, {**role_env(self.env, name), "TENANTDB_METRICS_PORT": str(port)}
            )
        self._connect()
        self._wait(self._serving, 60, "tenantdb's processes to serve their metrics")
        self._wait(self._workers_answer, 60, "the worker to answer Celery's remote control")
        return self

    def _connect(self) -> None:
        kubeconfig = self.env["DEVSTACK_KUBECONFIG"]  # the bench acts as the order owners
        for cluster in CLUSTERS:
            api = k8s_config.new_client_from_config(config_file=kubeconfig, context=cluster)
            api.user_agent = f"{BENCH_AGENT}/1"
            self.apis[cluster] = k8s.CustomObjectsApi(api)
        settings = self.settings()
        self._redis = redis.Redis.from_url(settings.redis_url)
        self._celery = build_celery_app(settings)

    def settings(self) -> Settings:
        """tenantdb's settings as its processes on this stack read them."""
        saved = dict(os.environ)
        os.environ.update(self.env)
        try:
            return Settings()
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def _serving(self) -> bool:
        self.check()
        try:
            for name in self.metrics_ports:
                self.metrics_text(name)
        except OSError:
            return False
        return True

    def _workers_answer(self) -> bool:
        self.check()
        return bool(self._celery.control.inspect(timeout=1.0, limit=1).ping())

    def check(self) -> None:
        """Fail when a process died."""
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise BenchError(f"{name} exited with {proc.returncode}; see {self.logs(name)}")

    def logs(self, name: str) -> Path:
        """The log file of one process."""
        return self.state / "logs" / f"{name}.log"

    def log(self, name: str) -> str:
        """The log of one process so far."""
        path = self.logs(name)
        return path.read_text(errors="replace") if path.exists() else ""

    @staticmethod
    def _wait(condition: Callable[[], object], seconds: float, what: str) -> None:
        deadline = time.monotonic() + seconds
        while not condition():
            if time.monotonic() > deadline:
                raise BenchError(f"timed out after {seconds:g} s waiting for {what}")
            time.sleep(0.1)

    def down(self) -> None:
        """Stop tenantdb's processes, then the devstack (which drops what the run created)."""
        if self._celery is not None:
            self._celery.close()
        ordered = [n for n in self.procs if n != "devstack"] + ["devstack"]
        for name in ordered:
            proc = self.procs.get(name)
            if proc is None or proc.poll() is not None:
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._redis is not None:
            for key in self._redis.scan_iter(match=f"{self.prefix}*", count=1000):
                self._redis.delete(key)
            self._redis.close()

    # ---------------------------------------------------------------- orders

    def create_order(self, name: str, cluster: str = "management") -> None:
        """Create one order with the official client."""
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "MariaDBDatabase",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"controlPlaneRef": {"name": "cp", "namespace": "openstack"}},
        }
        self.apis[cluster].create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, body)

    def fill_databases(self, total: int, threads: int = 8) -> int:
        """Bring the Database CRs in Keystone's namespace that no order owns up to ``total``.

        Each carries a schema of its own on the shared MariaDB, as another order's would; the
        name is not a plain identifier, so the mariadb-operator stand-in marks it Failed once
        and creates nothing. Returns how many there are now.
        """
        api = self.apis["management"]
        missing = range(self.fillers, total)

        def create(i: int) -> None:
            body = {
                "apiVersion": "k8s.mariadb.com/v1alpha1",
                "kind": "Database",
                "metadata": {"name": f"bench-filler-{i}", "namespace": KEYSTONE_NAMESPACE},
                "spec": {"mariaDbRef": {"name": MARIADB_NAME}, "name": f"filler-{i}"},
            }
            api.create_namespaced_custom_object(
                "k8s.mariadb.com", "v1alpha1", KEYSTONE_NAMESPACE, "databases", body
            )

        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(create, missing))
        self.fillers = max(self.fillers, total)
        return self.fillers

    def fill_mysql_orders(
        self,
        total: int,
        *,
        threads: int = 8,
        timeout: float = 900.0,
        watch: ReadyWatch | None = None,
    ) -> list[str]:
        """Bring the Ready MysqlDatabase orders on the group that no scenario measures up to
        ``total``, each with a schema and an owner of its own. Returns the names it created.

        ``watch`` (open on MysqlDatabases) is used instead of a watch of its own: a caller that
        times the orders opens it first, since opening one lists the namespace, every Ready
        order beside included.
        """
        missing = [f"bench-peer-{i}" for i in range(self.mysql_fillers, total)]
        if missing:
            with contextlib.ExitStack() as scope:
                if watch is None:
                    watch = scope.enter_context(self.watch_ready(kind=MYSQL))
                with ThreadPoolExecutor(threads) as pool:
                    list(pool.map(self.create_mysql_order, missing))
                if not watch.wait(set(missing), timeout):
                    late = len(set(missing) - watch.ready_at.keys())
                    raise BenchError(f"{late} of {len(missing)} peer MysqlDatabases not Ready")
        self.mysql_fillers = max(self.mysql_fillers, total)
        return missing

    def create_mysql_order(self, name: str, group: str = MYSQL_GROUP_NAME) -> None:
        """Create one MysqlDatabase order and its owner Secret, as a caller and ESO would."""
        ident = name.replace("-", "_")
        secret = k8s.V1Secret(
            metadata=k8s.V1ObjectMeta(name=f"{name}-owner", namespace=MYSQL.namespace),
            string_data={"username": f"{ident}_app", "password": secrets.token_urlsafe(18)},
        )
        core = k8s.CoreV1Api(self.apis["management"].api_client)
        core.create_namespaced_secret(MYSQL.namespace, secret)
        body = {
            "apiVersion": f"{MYSQL.group}/{MYSQL.version}",
            "kind": "MysqlDatabase",
            "metadata": {"name": name, "namespace": MYSQL.namespace},
            "spec": {
                "groupRef": {"name": group},
                "databaseName": ident,
                "owner": {"secretName": f"{name}-owner"},
            },
        }
        self.apis["management"].create_namespaced_custom_object(*MYSQL.api, body)

    def delete_mysql_order(self, name: str) -> None:
        """Delete one MysqlDatabase order (and its owner Secret)."""
        self.apis["management"].delete_namespaced_custom_object(*MYSQL.api, name)
        core = k8s.CoreV1Api(self.apis["management"].api_client)
        core.delete_namespaced_secret(f"{name}-owner", MYSQL.namespace)

    def mysql_orders(self) -> set[str]:
        """The names of the MysqlDatabase orders that exist."""
        listed = self.apis["management"].list_namespaced_custom_object(*MYSQL.api)
        return {str(o["metadata"]["name"]) for o in listed.get("items", ())}

    def forget_circuits(self) -> None:
        """Close every MySQL site circuit and forget its failures: nothing learnt yet."""
        client = self.workqueue().redis
        for pattern in ("mysql-circuit:*", "mysql-trips:*"):
            for name in client.scan_iter(match=f"{self.prefix}{pattern}", count=1000):
                client.delete(name)

    def connect_seconds(self) -> float:
        """Seconds the worker's processes spent connecting to MySQL servers so far (the connects
        that failed included)."""
        total = 0.0
        for family in text_string_to_metric_families(self.metrics_text("worker")):
            for sample in family.samples:
                if (
                    sample.name == "tenantdb_sql_request_duration_seconds_sum"
                    and sample.labels.get("operation") == "connect"
                ):
                    total += float(sample.value)
        return total

    def annotate(self, name: str, value: str, cluster: str = "management") -> None:
        """Change one annotation of an order (an edit that changes no spec)."""
        patch = {"metadata": {"annotations": {"bench.tenantdb.io/touch": value}}}
        self.apis[cluster].patch_namespaced_custom_object(
            GROUP, VERSION, NAMESPACE, PLURAL, name, patch
        )

    def ready_orders(self, cluster: str = "management", kind: OrderKind = MARIADB) -> set[str]:
        """The names of the orders of the kind whose Ready condition is True."""
        listed = self.apis[cluster].list_namespaced_custom_object(
            kind.group, kind.version, kind.namespace, kind.plural
        )
        return {o["metadata"]["name"] for o in listed["items"] if _ready(o)}

    @contextmanager
    def watch_ready(
        self, cluster: str = "management", kind: OrderKind = MARIADB
    ) -> Iterator[ReadyWatch]:
        """Record when each order of the kind's namespace is first seen Ready."""
        watch = ReadyWatch(self.apis[cluster], kind)
        watch.start()
        try:
            yield watch
        finally:
            watch.stop()

    # ---------------------------------------------------------------- the work queue

    def order_key(self, name: str, cluster: str = "management", kind: OrderKind = MARIADB) -> str:
        """The order key tenantdb gives an order."""
        suffix = "" if cluster == "management" else f"@{cluster}"
        return f"{kind.key_kind}/{kind.namespace}/{name}{suffix}"

    def workqueue(self) -> WorkQueue:
        """The product's work queue, as `tenantdb reconcile` uses it."""
        return build_workqueue(self.settings())

    def is_idle(self, *, due_within: float | None = 15.0, order: OrderKey | None = None) -> bool:
        """No pass pending or running, nothing queued, and (unless ``due_within`` is None) no
        short come-back due soon.

        With ``order``, only that order's pending mark and lease are looked at, for a window
        in which nothing else can start a pass. Otherwise every order's: that is a scan of
        Redis's keyspace, whose cost grows with the fleet, and on two cores a scan that runs
        beside the passes measured slows them.
        """
        assert self._redis is not None
        r, p = self._redis, self.prefix
        keys = WorkQueueKeys(p)
        if order is not None:
            if r.exists(keys.pending(order), keys.lock(order)):
                return False
        else:
            for pattern in (f"{p}pending:*", f"{p}lock:*"):
                if next(iter(r.scan_iter(match=pattern, count=1000)), None) is not None:
                    return False
        for queue in ("reconcile", "provision", "delivery", "teardown"):
            if any(r.llen(lst) for lst in keys.broker_lists(queue)):
                return False
        if r.hlen(f"{p}unacked"):
            return False
        if due_within is None:
            return True
        soon = (time.time() + due_within) * 1000
        return not r.zcount(f"{p}due", "-inf", soon)

    def wait_idle(self, seconds: float = 120.0, *, due_within: float | None = 15.0) -> None:
        """Wait until the stack is idle twice in a row, a quarter second apart."""
        deadline = time.monotonic() + seconds
        streak = 0
        while streak < 2:
            self.check()
            streak = streak + 1 if self.is_idle(due_within=due_within) else 0
            if time.monotonic() > deadline:
                raise BenchError(f"tenantdb did not settle within {seconds:g} s")
            time.sleep(0.25)

    @contextmanager
    def paused(self, name: str) -> Iterator[None]:
        """One of the stack's processes (and its children) stopped, resumed at the end.

        With beat paused nothing is swept from the timetables, so a window holds only the work
        the scenario itself asks for, however large the fleet beside it."""
        pids = _tree(self.procs[name].pid)
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)

    # ---------------------------------------------------------------- meters

    def metrics_text(self, name: str) -> str:
        """The /metrics text one of tenantdb's processes serves."""
        url = f"http://127.0.0.1:{self.metrics_ports[name]}/metrics"
        with urllib.request.urlopen(url, timeout=5) as answer:
            return str(answer.read().decode())

    def _metric_counts(self) -> Counter[str]:
        out: Counter[str] = Counter()
        for family in text_string_to_metric_families(self.metrics_text("worker")):
            for sample in family.samples:
                if sample.name == "tenantdb_reconcile_passes_total":
                    out[f"passes {sample.labels['path']}"] += int(sample.value)
                elif sample.name == "tenantdb_lock_busy_total":
                    out["busy"] += int(sample.value)
                elif sample.name == "tenantdb_stale_messages_total":
                    out["stale"] += int(sample.value)
                elif sample.name == "tenantdb_sql_request_duration_seconds_count":
                    out[f"sql {sample.labels['operation']}"] += int(sample.value)
        return out

    def _task_counts(self) -> Counter[str]:
        out: Counter[str] = Counter()
        for _ in range(5):
            stats = self._celery.control.inspect(timeout=2.0, limit=1).stats() or {}
            if stats:
                for worker in stats.values():
                    out.update(worker.get("total") or {})
                return out
        raise BenchError("the worker did not answer Celery's stats request")

    def _kube_counts(self) -> Counter[str]:
        return audited_counts(self.env.get("DEVSTACK_AUDIT_LOGS", ""))

    def _openbao_counts(self) -> Counter[str]:
        return audited_openbao_counts(Path(self.env["DEVSTACK_OPENBAO_AUDIT_LOG"]))

    def footprint(self) -> dict[str, int]:
        """What the installation holds now: the bytes of every Redis key under the stack's
        prefix (the broker's queues included), and the watcher's resident memory."""
        assert self._redis is not None
        redis_bytes = 0
        for key in self._redis.scan_iter(match=f"{self.prefix}*", count=1000):
            redis_bytes += int(self._redis.memory_usage(key, samples=0) or 0)
        status = Path(f"/proc/{self.procs['watcher'].pid}/status").read_text()
        rss_kb = next(
            int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")
        )
        return {"redis_bytes": redis_bytes, "watcher_rss_bytes": rss_kb * 1024}

    def read(self) -> Reading:
        """One reading of every meter."""
        roles = {name: proc.pid for name, proc in self.procs.items()}
        return Reading(
            at=time.monotonic(),
            kube=self._kube_counts(),
            openbao=self._openbao_counts(),
            metrics=self._metric_counts(),
            tasks=self._task_counts(),
            cpu=tree_cpu_seconds(roles),
            components=component_cpu_seconds(roles["devstack"]) if "devstack" in roles else {},
        )


def _ready(obj: Mapping[str, Any]) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


class ReadyWatch:
    """A watch on one kind's orders in its namespace that notes when each first turns Ready."""

    def __init__(self, api: k8s.CustomObjectsApi, kind: OrderKind = MARIADB) -> None:
        """Watch the kind's orders with ``api`` once started."""
        self._api = api
        self._kind = kind
        self.ready_at: dict[str, float] = {}
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="bench-ready-watch")
        self._started = threading.Event()

    def start(self) -> None:
        """Start watching; returns once the watch is open."""
        self._thread.start()
        if not self._started.wait(30):
            raise BenchError("the bench's watch on the orders did not open")

    def stop(self) -> None:
        """Stop watching; the thread ends with its current watch request, within a second."""
        self._stop.set()

    def _run(self) -> None:
        from kubernetes import watch

        version = self._list()
        self._started.set()
        while not self._stop.is_set():
            stream = watch.Watch().stream(
                self._api.list_namespaced_custom_object, *self._kind.api,
                resource_version=version, timeout_seconds=1, allow_watch_bookmarks=True,
            )  # fmt: skip
            try:
                for event in stream:
                    obj = event["object"]
                    version = obj["metadata"]["resourceVersion"]
                    if event["type"] in ("ADDED", "MODIFIED") and _ready(obj):
                        self._note(obj["metadata"]["name"])
                    if self._stop.is_set():
                        break
            except k8s.ApiException as error:
                if error.status != 410:
                    raise
                # Other kinds' writes moved the server's history past this quiet watch.
                version = self._list()

    def _list(self) -> str:
        listed = self._api.list_namespaced_custom_object(*self._kind.api)
        for obj in listed["items"]:
            if _ready(obj):
                self._note(obj["metadata"]["name"])
        return str(listed["metadata"]["resourceVersion"])

    def _note(self, name: str) -> None:
        with self._changed:
            self.ready_at.setdefault(name, time.monotonic())
            self._changed.notify_all()

    def wait(self, names: set[str], seconds: float) -> bool:
        """Wait until every name in ``names`` was seen Ready; False at the deadline."""
        deadline = time.monotonic() + seconds
        with self._changed:
            while not names <= self.ready_at.keys():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(min(left, 0.5))
        return True


def temp_state() -> Path:
    """A fresh state directory for one stack."""
    return Path(tempfile.mkdtemp(prefix="tenantdb-bench-"))
