"""``tenantdb demo`` (``python -m demo``): the whole stack, three orders, a live table.

Starts the platform (real kube-apiservers for ``management`` and ``edge-1`` with real OpenBao,
External Secrets and cert-manager, built by ``make kube`` and onboarded as docs/operations.md says;
the mariadb-operator stand-in, and a MySQL failover group where the MariaDB server binaries are
installed) on the local Redis and MariaDB, then tenantdb's watcher, two workers, beat and Flower,
and a Prometheus (Debian's ``prometheus``, when installed) scraping every tenantdb process with the
chart's alert rules loaded; applies the orders in ``examples/`` with kubectl (MariaDBDatabases on
the management cluster and on ``edge-1``, one that is refused, and a MysqlDatabase on the failover
group, whose owner Secret the demo writes as a platform's secret store would) and shows them until
they settle; once they have, it waits for Prometheus to show them by Ready reason. Ctrl-C (or the
end of ``--until-ready``) stops every process it started and nothing else.

It prints how to read a delivered credential, never the credential itself; Flower's demo
password goes to a file in the state directory. It drives tenantdb and the devstack alike, so
it belongs to neither distribution: it runs from a source checkout, next to ``examples/`` and the
chart it reads, and runs tenantdb and the devstack from that checkout.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from devstack.mysql_group import INITIAL_PRIMARY, binaries_present
from devstack.platform import read_env, role_env
from tenantdb.adapters.clusters import ClusterRegistry
from tenantdb.adapters.kube import SECRET, KindNotServedError, KubeError, Resource
from tenantdb.adapters.mariadbdatabase import MARIADB_DATABASE
from tenantdb.adapters.mysqldatabase import MYSQL_DATABASE
from tenantdb.adapters.redisclient import build_redis
from tenantdb.core.kinds import KindIdentity
from tenantdb.core.mariadbdatabase.naming import IDENTITY as MARIADB
from tenantdb.core.mysqldatabase.naming import IDENTITY as MYSQL
from tenantdb.core.readiness import compute_ready_state
from tenantdb.core.report import QueueView, build_report
from tenantdb.settings import Settings

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
KEY_PREFIX = "tenantdb-demo:"
FLOWER_PORT = 5555
METRICS_PORTS = {"watcher": 9103, "worker-1": 9101, "worker-2": 9102, "beat": 9104}
PROMETHEUS_PORT = 9190
RULES = REPO / "charts" / "tenantdb" / "rules" / "tenantdb.rules.yaml"


@dataclass(frozen=True)
class DemoOrder:
    """An example order: its file, the cluster it is applied on, and whether it should be Ready."""

    file: str
    cluster: str
    name: str
    namespace: str
    ready: bool
    resource: Resource = MARIADB_DATABASE
    identity: KindIdentity = MARIADB

    @property
    def kind(self) -> str:
        return self.resource.kind


MARIADB_ORDERS = (
    DemoOrder("workflow-db.yaml", "management", "workflow-db", "tenant-a", ready=True),
    DemoOrder("edge-db.yaml", "edge-1", "edge-db", "tenant-a", ready=True),
    DemoOrder("reserved-db.yaml", "management", "reserved-db", "tenant-a", ready=False),
)
MYSQL_ORDER = DemoOrder(
    "orders-db.yaml", "management", "orders-db", "bloodraven", True, MYSQL_DATABASE, MYSQL
)
"""Served where the devstack runs its MySQL failover group (the MariaDB server binaries)."""
MYSQL_OWNER = ("bloodraven", "orders-db-owner", "orders_app")
"""The owner Secret the MysqlDatabase names: namespace, name, and the owner's username."""
MYSQL_ORDER_SCHEMA = "orders_db"
ORDERS = (*MARIADB_ORDERS, *((MYSQL_ORDER,) if binaries_present() else ()))


class DemoError(Exception):
    """The demo cannot go on; the message says what to do."""


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def ensure_services(wait: Callable[[float], None] = time.sleep) -> None:
    """Start the local Redis and MariaDB when they are installed but down."""
    needs = {
        "Redis": (
            6379,
            "redis-server",
            ["redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "--port", "6379",
             "--save", "", "--appendonly", "no"],
        ),
        "MariaDB": (
            3306,
            "mariadbd",
            ["start-stop-daemon", "--start", "--oknodo", "--background", "--exec",
             shutil.which("mariadbd") or "/usr/sbin/mariadbd"],
        ),
    }  # fmt: skip
    for name, (port, binary, start) in needs.items():
        if _answers("127.0.0.1", port):
            continue
        if shutil.which(binary) is None and not Path(f"/usr/sbin/{binary}").exists():
            package = "redis-server" if name == "Redis" else "mariadb-server"
            raise DemoError(
                f"{name} does not answer on 127.0.0.1:{port} and is not installed;"
                f" install it (Debian: apt-get install {package})"
            )
        subprocess.run(start, check=False, capture_output=True)  # noqa: S603
        deadline = time.monotonic() + 60
        while not _answers("127.0.0.1", port):
            if time.monotonic() > deadline:
                raise DemoError(f"{name} was started but does not answer on 127.0.0.1:{port}")
            wait(0.5)


class Processes:
    """The processes the demo started; only these are stopped."""

    def __init__(self, logs: Path) -> None:
        """Keep logs of every process under ``logs``."""
        self.logs = logs
        self.started: list[tuple[str, subprocess.Popen[bytes], IO[bytes]]] = []

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        """Start one process with its output in ``logs/<name>.log``."""
        out = (self.logs / f"{name}.log").open("wb")
        proc = subprocess.Popen(  # noqa: S603
            argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.started.append((name, proc, out))
        return proc

    def check(self) -> None:
        """Fail when a process the demo needs has died."""
        for name, proc, _ in self.started:
            if proc.poll() is not None:
                raise DemoError(f"{name} exited with {proc.returncode}; see {self.logs / name}.log")

    def stop(self) -> None:
        """Stop every started process, the last started first."""
        for _, proc, _ in reversed(self.started):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for _, proc, out in reversed(self.started):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            out.close()


def _wait_for_line(path: Path, text: str, proc: subprocess.Popen[bytes], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while text not in path.read_text(errors="replace"):
        if proc.poll() is not None:
            said = [line for line in path.read_text(errors="replace").splitlines() if line]
            last = f": {said[-1]}" if said else ""
            raise DemoError(f"the devstack exited{last} (see {path})")
        if time.monotonic() > deadline:
            raise DemoError(f"the devstack did not get ready within {seconds:g} s; see {path}")
        time.sleep(0.2)


def forget_earlier_runs() -> None:
    """Drop what an earlier demo left under the demo's Redis key prefix. Every run starts a new
    platform, so the last run's state would only stand in the way: its claim on `workflow_db`,
    held by a Database CR of clusters that are gone, would refuse the new order with
    DatabaseCollision."""
    client = build_redis(Settings())
    try:
        for key in client.scan_iter(match=f"{KEY_PREFIX}*", count=1000):
            client.delete(key)
    finally:
        client.close()


@contextmanager
def running_stack(state: Path) -> Iterator[tuple[dict[str, str], Processes]]:
    """Start the devstack and tenantdb's processes; yield the environment they run with."""
    forget_earlier_runs()
    state.mkdir(parents=True, exist_ok=True)
    logs = state / "logs"
    logs.mkdir(exist_ok=True)
    procs = Processes(logs)
    try:
        devstack = procs.start(
            "devstack",
            [sys.executable, "-m", "devstack", "up", "--state-dir", str(state / "devstack"),
             "--clusters", "management,edge-1"],
            {**os.environ, "PYTHONPATH": str(REPO)},
        )  # fmt: skip
        _wait_for_line(logs / "devstack.log", "devstack ready", devstack, 120)
        env = {
            **os.environ,
            **read_env(state / "devstack" / "env"),
            "TENANTDB_KEY_PREFIX": KEY_PREFIX,
            "PYTHONPATH": str(REPO),
        }
        auth_file = state / "flower-auth"
        if not auth_file.exists():
            auth_file.write_text(f"demo:{secrets.token_urlsafe(12)}\n")
            auth_file.chmod(0o600)
        tenantdb = [sys.executable, "-m", "tenantdb.cli"]
        roles = {
            "watcher": [*tenantdb, "watcher"],
            "worker-1": [*tenantdb, "worker", "--", "-c", "2", "-n", "demo-1@%h",
                         "-Q", "reconcile,provision,delivery,teardown"],
            "worker-2": [*tenantdb, "worker", "--", "-c", "2", "-n", "demo-2@%h",
                         "-Q", "reconcile,provision,delivery,teardown"],
            "beat": [*tenantdb, "beat"],
        }  # fmt: skip
        for name, argv in roles.items():
            role = argv[len(tenantdb)]
            procs.start(
                name,
                argv,
                {**role_env(env, role), "TENANTDB_METRICS_PORT": str(METRICS_PORTS[name])},
            )
        procs.start(
            "flower",
            [*tenantdb, "flower", "--port", str(FLOWER_PORT), "--address", "127.0.0.1"],
            {**role_env(env, "flower"), "TENANTDB_FLOWER_BASIC_AUTH_FILE": str(auth_file)},
        )
        prometheus = shutil.which("prometheus")
        if prometheus is not None:
            procs.start("prometheus", prometheus_argv(prometheus, state), dict(os.environ))
        yield env, procs
    finally:
        procs.stop()


def prometheus_config() -> dict[str, object]:
    """A Prometheus configuration scraping every tenantdb process, with the chart's rules."""
    return {
        "global": {"scrape_interval": "2s", "evaluation_interval": "5s"},
        "rule_files": [str(RULES)],
        "scrape_configs": [
            {
                "job_name": f"tenantdb-{name}",
                "static_configs": [
                    {"targets": [f"127.0.0.1:{port}"], "labels": {"namespace": "demo"}}
                ],
            }
            for name, port in METRICS_PORTS.items()
        ],
    }


def prometheus_argv(binary: str, state: Path) -> list[str]:
    """Write the demo's Prometheus configuration under ``state``; return its command line."""
    directory = state / "prometheus"
    directory.mkdir(exist_ok=True)
    config = directory / "prometheus.yml"
    config.write_text(json.dumps(prometheus_config(), indent=2))  # JSON is YAML
    return [
        binary,
        f"--config.file={config}",
        f"--storage.tsdb.path={directory / 'data'}",
        f"--web.listen-address=127.0.0.1:{PROMETHEUS_PORT}",
        "--storage.tsdb.retention.time=1d",
    ]


def query_prometheus(query: str) -> list[dict[str, object]] | None:
    """The instant vector Prometheus answers for ``query``; None when it does not answer."""
    url = f"http://127.0.0.1:{PROMETHEUS_PORT}/api/v1/query?" + urllib.parse.urlencode(
        {"query": query}
    )
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            body = json.loads(answer.read())
    except (OSError, ValueError):
        return None
    result = body.get("data", {}).get("result") if isinstance(body, dict) else None
    return result if isinstance(result, list) else None


def expected_series(registry: ClusterRegistry) -> dict[tuple[str, str, str], int]:
    """The ``tenantdb_orders`` samples the demo's orders make now: (kind, status, reason) ->
    count, the kind in lower case as the metric labels it."""
    found: dict[tuple[str, str, str], int] = {}
    for order, obj in read_orders(registry):
        if obj is not None:
            state = compute_ready_state(obj)
            labels = (order.kind.lower(), state.status, state.reason)
            found[labels] = found.get(labels, 0) + 1
    return found


def orders_series_present(registry: ClusterRegistry) -> str | None:
    """A line reporting the orders-by-reason series in Prometheus, or None while they are
    not all there (Prometheus scrapes beat every 2 s; beat counts the orders every 10 s)."""
    result = query_prometheus("sum by (kind, status, reason) (tenantdb_orders)")
    if not result:
        return None
    seen: dict[tuple[str, str, str], int] = {}
    for sample in result:
        metric = sample.get("metric")
        value = sample.get("value")
        if isinstance(metric, dict) and isinstance(value, list) and len(value) == 2:
            labels = (str(metric.get("kind")), str(metric.get("status")), str(metric.get("reason")))
            seen[labels] = int(float(value[1]))
    expected = expected_series(registry)
    if not expected or any(seen.get(labels) != n for labels, n in expected.items()):
        return None
    shown = ", ".join(f"{k} {r} (Ready={st}) = {n}" for (k, st, r), n in sorted(expected.items()))
    return f"Prometheus has tenantdb_orders for the demo orders: {shown}"


def kubectl() -> str:
    """The kubectl next to this Python, or the one on PATH."""
    local = Path(sys.executable).parent / "kubectl"
    found = str(local) if local.exists() else shutil.which("kubectl")
    if not found:
        raise DemoError("kubectl is not installed; run `make install`")
    return found


def write_owner_secret(kubeconfig: str) -> None:
    """Write the MysqlDatabase owner's Secret, with a password of its own, as a platform's secret
    store would; the password goes to kubectl on stdin, never on a command line."""
    namespace, name, username = MYSQL_OWNER
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "type": "Opaque",
        "stringData": {"username": username, "password": secrets.token_urlsafe(18)},
    }
    done = subprocess.run(  # noqa: S603
        [kubectl(), "--kubeconfig", kubeconfig, "--context", "management", "apply", "-f", "-"],
        input=json.dumps(secret), capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise DemoError(f"kubectl apply the owner Secret {namespace}/{name}: {done.stderr.strip()}")


def apply_examples(kubeconfig: str) -> None:
    """Apply every example order on its cluster with kubectl (and the MysqlDatabase's owner
    Secret first, when the demo serves one)."""
    if MYSQL_ORDER in ORDERS:
        write_owner_secret(kubeconfig)
    for order in ORDERS:
        done = subprocess.run(  # noqa: S603
            [kubectl(), "--kubeconfig", kubeconfig, "--context", order.cluster, "apply", "-f",
             str(EXAMPLES / order.file)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise DemoError(f"kubectl apply {order.file}: {done.stderr.strip()}")


@dataclass(frozen=True)
class Row:
    """One line of the live table."""

    name: str
    kind: str
    cluster: str
    ready: str
    reason: str
    database: str
    refreshed: str


def read_orders(registry: ClusterRegistry) -> list[tuple[DemoOrder, dict[str, Any] | None]]:
    """Each example order with the object its cluster holds (None: not there, or unreadable)."""
    found: list[tuple[DemoOrder, dict[str, Any] | None]] = []
    for order in ORDERS:
        try:
            obj = registry.get(_cluster(order)).get_or_none(
                order.resource, order.namespace, order.name
            )
        except (KubeError, KindNotServedError):
            obj = None
        found.append((order, obj))
    return found


def _cluster(order: DemoOrder) -> str:
    return "" if order.cluster == "management" else order.cluster


def read_rows(registry: ClusterRegistry) -> list[Row]:
    """The example orders as their clusters report them."""
    rows = []
    for order, obj in read_orders(registry):
        report = build_report(
            order.identity.key(order.namespace, order.name, _cluster(order)),
            obj,
            QueueView(),
            time.time(),
        )
        # A MysqlDatabase names its schema in its spec only.
        database = report.database or str(((obj or {}).get("spec") or {}).get("databaseName", ""))
        rows.append(
            Row(
                order.name,
                order.kind,
                order.cluster,
                report.ready or "-",
                report.reason or "-",
                database or "-",
                report.refreshed or "-",
            )
        )
    return rows


def settled(rows: list[Row]) -> bool:
    """Whether the orders that should be Ready are, and the refused one shows its reason."""
    by_name = {row.name: row for row in rows}
    for order in ORDERS:
        row = by_name[order.name]
        if order.ready and row.ready != "True":
            return False
        if not order.ready and row.reason in ("-", "", "NotAllReady"):
            return False
    return True


def render(rows: list[Row]) -> str:
    """The live table."""
    header = Row("NAME", "KIND", "CLUSTER", "READY", "REASON", "DATABASE", "REFRESHED")
    table = [header, *rows]
    widths = [max(len(getattr(r, f)) for r in table) for f in Row.__dataclass_fields__]
    return "\n".join(
        "  ".join(
            getattr(r, f).ljust(w) for f, w in zip(Row.__dataclass_fields__, widths, strict=True)
        )
        for r in table
    )


def _how_to_mysql(kubeconfig: str, mapping: dict[str, str]) -> list[str]:
    """How to log in as the MysqlDatabase's owner on the group's primary (none without one)."""
    if MYSQL_ORDER not in ORDERS:
        return []
    namespace, name, username = MYSQL_OWNER
    site = f"mysql-main-{INITIAL_PRIMARY}-internal."  # the group's primary until a failover
    primary = next((real for name, real in mapping.items() if name.startswith(site)), "")
    host, _, port = str(primary).rpartition(":")
    get = (
        f"{kubectl()} --kubeconfig {kubeconfig} --context management -n {namespace}"
        f" get secret {name}"
    )
    return [
        "",
        f"orders-db (MysqlDatabase) is owned by {username}, with the password of its owner"
        f" Secret {namespace}/{name}:",
        f"  PASS=$({get} -o jsonpath='{{.data.password}}' | base64 -d)",
        f'  mariadb -h {host or "<primary>"} -P {port or "<port>"} -u {username} -p"$PASS"'
        f" {MYSQL_ORDER_SCHEMA}",
    ]


def _how_to(state: Path, kubeconfig: str, registry: ClusterRegistry) -> str:
    services = state / "devstack" / "services.json"
    mapping = json.loads(services.read_text()) if services.exists() else {}
    secret = registry.get("").get_or_none(SECRET, "tenant-a", "workflow-db-credentials") or {}
    data = secret.get("data") or {}
    host = base64.b64decode(data.get("host", "")).decode() if data else "?"
    port = base64.b64decode(data.get("port", "")).decode() if data else "?"
    real = mapping.get(f"{host}:{port}", f"{host}:{port}")
    real_host, _, real_port = str(real).rpartition(":")
    get = (
        f"{kubectl()} --kubeconfig {kubeconfig} --context management -n tenant-a"
        " get secret workflow-db-credentials"
    )
    return "\n".join(
        [
            "",
            "Connect with the delivered credential of workflow-db (the Secret says host"
            f" {host}:{port}, which is {real} on this machine):",
            f"  USER=$({get} -o jsonpath='{{.data.username}}' | base64 -d)",
            f"  PASS=$({get} -o jsonpath='{{.data.password}}' | base64 -d)",
            f'  mariadb -h {real_host} -P {real_port} -u "$USER" -p"$PASS" workflow_db',
            *_how_to_mysql(kubeconfig, mapping),
            "",
            f"Flower:  http://127.0.0.1:{FLOWER_PORT}  (user:password in {state / 'flower-auth'})",
            *(
                [f"Prometheus: http://127.0.0.1:{PROMETHEUS_PORT}  (scrapes every tenantdb"
                 " process, with the chart's alert rules loaded)"]
                if shutil.which("prometheus") is not None
                else []
            ),
            "Metrics: "
            + ", ".join(f"{n} http://127.0.0.1:{p}/metrics" for n, p in METRICS_PORTS.items()),
            "Re-run a pass from another shell:",
            f"  set -a; . {state / 'devstack' / 'env'}; TENANTDB_KEY_PREFIX={KEY_PREFIX}"
            " tenantdb reconcile mariadbdatabase/tenant-a/workflow-db --wait 30",
            "Logs: " + str(state / "logs"),
            "Ctrl-C stops everything the demo started.",
        ]
    )  # fmt: skip


def _report_series(registry: ClusterRegistry, procs: Processes, stop: threading.Event) -> bool:
    """Wait (a minute at most) for Prometheus to show the demo orders by reason; print it."""
    deadline = time.monotonic() + 60
    while not stop.is_set():
        procs.check()
        report = orders_series_present(registry)
        if report is not None:
            print(report)
            return True
        if time.monotonic() > deadline:
            print("Prometheus shows no tenantdb_orders series for the demo orders")
            return False
        stop.wait(1.0)
    return True


def run_demo(state: Path, *, until_ready: bool, timeout: float, stop: threading.Event) -> int:
    """Run the demo; return 0 once the orders settled (``until_ready``) or on Ctrl-C."""
    ensure_services()
    with running_stack(state) as (env, procs):
        kubeconfig = env["DEVSTACK_KUBECONFIG"]  # the user's own: tenantdb creates no order
        apply_examples(kubeconfig)
        registry = ClusterRegistry.from_settings(
            Settings(kubeconfig=kubeconfig, management_context="management")
        )
        deadline = time.monotonic() + timeout
        rows = read_rows(registry)
        while not stop.is_set():
            procs.check()
            rows = read_rows(registry)
            if not until_ready:
                sys.stdout.write("\x1b[H\x1b[2J" + render(rows) + "\n")
                sys.stdout.flush()
            if settled(rows):
                break
            if time.monotonic() > deadline:
                print(render(rows))
                print(f"the orders did not settle within {timeout:g} s; logs in {state / 'logs'}")
                return 1
            stop.wait(1.0)
        if stop.is_set():
            return 0
        print(render(rows))
        print(_how_to(state, kubeconfig, registry))
        if shutil.which("prometheus") is not None and not _report_series(registry, procs, stop):
            return 1
        if until_ready:
            return 0
        stop.wait()
    return 0
