"""Real Kubernetes control planes on loopback: the devstack's clusters.

Owns, under the work directory it is given: one etcd, and for each cluster name one
kube-apiserver (and, when asked, one kube-controller-manager) using the binaries that
`tools/kube/build.sh` puts in `tools/kube/bin`; a throwaway PKI (a CA, one serving certificate
for 127.0.0.1/localhost and one admin client certificate in `system:masters`, all issued by the
devstack's certificate authority, and an RSA service-account key per cluster); one admin
kubeconfig per cluster plus one holding every cluster as a context; and one log file per
process.

The clusters share the etcd and are kept apart by their etcd prefix (`/registry-<name>`) and by
their service-account keys: a token one cluster issues is refused by the others. Authentication
is by client certificate and service-account token, authorization is Node,RBAC, and
TokenRequest and TokenReview are the real ones. Everything listens on 127.0.0.1 only, on ports
picked free at start; etcd speaks plain HTTP there and keeps no fsync (the data is throwaway).

Every process is spawned through `setpriv --pdeathsig TERM` from one long-lived thread, so a
parent that is killed (SIGKILL runs no Python) takes its children along; `RealKube.stop` sends
SIGTERM, waits and then kills, and runs by itself when the object is collected or the
interpreter exits.

It never builds or downloads anything (a missing binary is an error naming `make kube`), never
reads or writes `~/.kube`, `$KUBECONFIG` or anything outside the work directory, never lets the
caller's `ETCD_*` variables configure its etcd, and never leaves a process running after
`stop` or interpreter exit.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import datetime
import ipaddress
import json
import os
import queue
import re
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from devstack.ca import CertificateAuthority, Request

BIN_DIR = Path(__file__).resolve().parents[1] / "tools" / "kube" / "bin"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager")
SETPRIV = Path("/usr/bin/setpriv")
HOST = "127.0.0.1"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
ADMIN_USER = "admin"
ADMIN_GROUP = "system:masters"
START_TIMEOUT = 120.0
STOP_TIMEOUT = 15.0
# What kube-controller-manager runs when asked for: enough for namespaces to finish deleting,
# owner references to cascade, and every namespace to get its `default` ServiceAccount and the
# `kube-root-ca.crt` ConfigMap.
CONTROLLERS = (
    "namespace-controller",
    "garbage-collector-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "clusterrole-aggregation-controller",
)
_CLUSTER_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,98}[a-z0-9])?")
_LOG_TAIL_LINES = 30


class RealKubeError(RuntimeError):
    """A binary is missing, or a process did not start or become ready."""


def missing_binaries(bin_dir: Path = BIN_DIR) -> list[str]:
    """The binaries `start_real_clusters` needs that `bin_dir` lacks (empty when all are built)."""
    return [name for name in BINARIES if not os.access(bin_dir / name, os.X_OK)]


# ------------------------------------------------------------------------------------ the PKI


@dataclass(frozen=True)
class Pki:
    """The PEM files of the throwaway PKI every cluster shares."""

    ca_cert: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path


def _write_private(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as sink:
        sink.write(data)
    return path


def _key_pem(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def make_pki(directory: Path) -> Pki:
    """Write a fresh CA, a serving certificate for the API servers and an admin client
    certificate (CN=admin, O=system:masters) into `directory`, signed by the devstack's CA."""
    ca = CertificateAuthority.generate("tenantdb-realkube-ca", datetime.timedelta(days=7))
    week = datetime.timedelta(days=7)
    serving = ca.sign(
        Request(
            common_name="kube-apiserver",
            dns_names=(
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ),
            ip_addresses=(
                HOST,
                "::1",
                str(next(ipaddress.ip_network(SERVICE_CLUSTER_IP_RANGE).hosts())),
            ),
            usages=("digital signature", "server auth"),
            duration=week,
            algorithm="ECDSA",
        ),
        encoding="PKCS8",
    )
    admin = ca.sign(
        Request(
            common_name=ADMIN_USER,
            organizations=(ADMIN_GROUP,),
            usages=("digital signature", "client auth"),
            duration=week,
            algorithm="ECDSA",
        ),
        encoding="PKCS8",
    )
    directory.mkdir(parents=True, exist_ok=True)
    pki = Pki(
        ca_cert=directory / "ca.crt",
        serving_cert=directory / "apiserver.crt",
        serving_key=directory / "apiserver.key",
        admin_cert=directory / "admin.crt",
        admin_key=directory / "admin.key",
    )
    pki.ca_cert.write_bytes(ca.cert_pem)
    pki.serving_cert.write_bytes(serving.cert_pem)
    _write_private(pki.serving_key, serving.key_pem)
    pki.admin_cert.write_bytes(admin.cert_pem)
    _write_private(pki.admin_key, admin.key_pem)
    return pki


def _service_account_keys(directory: Path) -> tuple[Path, Path]:
    """An RSA key pair for one cluster's service-account tokens: (private, public)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = directory / "service-account.pub"
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return _write_private(directory / "service-account.key", _key_pem(key)), public


# ------------------------------------------------------------------------------ kubeconfigs


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode("ascii")


def _write_kubeconfig(path: Path, pki: Pki, servers: Mapping[str, str]) -> Path:
    """A self-contained admin kubeconfig with one context per (cluster name, server URL); the
    first is the current one. JSON is YAML, so every client reads it."""
    user = {
        "name": ADMIN_USER,
        "user": {
            "client-certificate-data": _b64(pki.admin_cert),
            "client-key-data": _b64(pki.admin_key),
        },
    }
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [
            {
                "name": name,
                "cluster": {"server": server, "certificate-authority-data": _b64(pki.ca_cert)},
            }
            for name, server in servers.items()
        ],
        "users": [user],
        "contexts": [
            {"name": name, "context": {"cluster": name, "user": ADMIN_USER}} for name in servers
        ],
        "current-context": next(iter(servers)),
    }
    _write_private(path, (json.dumps(config, indent=2) + "\n").encode())
    return path


# -------------------------------------------------------------------------------- processes


class Spawner:
    """Starts every child from one daemon thread that lives as long as the interpreter.

    `--pdeathsig` fires when the *thread* that forked the child ends, so children forked from a
    short-lived thread (a thread pool, a timeout watchdog) would be killed with it.
    """

    def __init__(self) -> None:
        self._jobs: queue.Queue[Callable[[], None]] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def popen(
        self, argv: Sequence[str], log: Path, env: Mapping[str, str]
    ) -> subprocess.Popen[bytes]:
        """Start `argv` with stdout and stderr appended to `log`."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._serve, name="realkube-spawner", daemon=True
                )
                self._thread.start()
        done: queue.Queue[subprocess.Popen[bytes] | BaseException] = queue.Queue(maxsize=1)

        def job() -> None:
            try:
                with open(log, "ab") as sink:
                    done.put(
                        subprocess.Popen(  # noqa: S603 - our own binaries, arguments built here
                            [str(SETPRIV), "--pdeathsig", "TERM", "--", *argv],
                            stdin=subprocess.DEVNULL,
                            stdout=sink,
                            stderr=sink,
                            env=dict(env),
                            start_new_session=True,
                        )
                    )
            except BaseException as exc:  # handed to the caller, which raises it
                done.put(exc)

        self._jobs.put(job)
        result = done.get()
        if isinstance(result, BaseException):
            raise result
        return result

    def _serve(self) -> None:
        while True:
            self._jobs.get()()


SPAWNER = Spawner()


@dataclass(frozen=True)
class ChildProcess:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    ready_url: str

    def failure(self, what: str) -> RealKubeError:
        """An error naming this process, `what` went wrong, and the end of its log."""
        try:
            tail = self.log.read_text(errors="replace").splitlines()[-_LOG_TAIL_LINES:]
        except OSError:
            tail = []
        return RealKubeError(f"{self.name} {what} (log {self.log}):\n" + "\n".join(tail))


def stop_tiers(tiers: list[list[ChildProcess]], timeout: float) -> None:
    """SIGTERM each tier (controller managers, then API servers, then etcd), wait, then kill."""
    for tier in tiers:
        for proc in tier:
            if proc.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.popen.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for proc in tier:
            try:
                proc.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    proc.popen.kill()
                proc.popen.wait(timeout=10)


def _child_env() -> dict[str, str]:
    """The caller's environment minus what would configure etcd behind our flags' back."""
    return {key: value for key, value in os.environ.items() if not key.startswith("ETCD_")}


def free_ports(count: int) -> list[int]:
    """`count` distinct loopback ports that are free now (all bound at once, then released)."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((HOST, 0))
            ports.append(int(sock.getsockname()[1]))
        return ports


def http_get(url: str, context: ssl.SSLContext | None) -> tuple[int, str]:
    request = urllib.request.Request(url)  # noqa: S310 - http(s) on loopback, built here
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as answer:  # noqa: S310
            return int(answer.status), answer.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


def wait_ready(proc: ChildProcess, context: ssl.SSLContext | None, deadline: float) -> None:
    """Poll the process's ready URL until it answers 200, failing early if the process exits."""
    url = proc.ready_url
    last = "no answer"
    while True:
        if proc.popen.poll() is not None:
            raise proc.failure(f"exited with status {proc.popen.returncode} before ready")
        try:
            status, body = http_get(url, context)
        except OSError as exc:
            last = str(exc)
        else:
            if status == 200:
                return
            last = f"HTTP {status}: {body.strip()[-500:]}"
        if time.monotonic() > deadline:
            raise proc.failure(f"not ready at {url} in time; last answer: {last}")
        time.sleep(0.05)


# ---------------------------------------------------------------------------------- clusters


@dataclass(frozen=True)
class AuditEntry:
    """One request of an API server's audit log: who wrote (or read) what, when (to the
    microsecond), with which field manager, answer code and User-Agent."""

    time: str
    user: str
    verb: str
    resource: str
    namespace: str
    name: str
    field_manager: str
    code: int
    user_agent: str = ""


WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
"""The audit verbs that change what is stored."""
READ_VERBS = frozenset({"get", "list"})
"""The audit verbs that read what is stored (watches apart)."""


@dataclass(frozen=True)
class RealCluster:
    """One running kube-apiserver and what a client needs to reach it as admin."""

    name: str
    server: str
    kubeconfig: Path
    etcd_prefix: str
    service_account_key: Path
    log: Path
    controller_manager_log: Path | None
    audit_log: Path
    """The API server's audit log: one JSON event per request (Metadata level, written before
    the response is sent), `responseStatus.code` and `userAgent` included."""

    def audit_mark(self) -> int:
        """Where the audit log ends now: pass it as `since` to read only what comes after."""
        try:
            return self.audit_log.stat().st_size
        except FileNotFoundError:
            return 0

    def audit_events(self, since: int = 0) -> list[dict[str, Any]]:
        """Every audit event written so far, or after the mark `since` (a line cut short by a
        write in progress is left out)."""
        events: list[dict[str, Any]] = []
        if not self.audit_log.exists():
            return events
        with self.audit_log.open("rb") as log:
            log.seek(since)
            text = log.read().decode(errors="replace")
        for line in text.splitlines():
            with contextlib.suppress(ValueError):
                events.append(json.loads(line))
        return events

    def audit_writes(self, since: int = 0) -> list[AuditEntry]:
        """The completed writes of the audit log (after the mark `since`), as the devstack's
        `Cluster.audit_log` records them: the time the response was sent, the field manager
        from the request's query."""
        return self._audit_entries(WRITE_VERBS, since)

    def audit_reads(self, since: int = 0) -> list[AuditEntry]:
        """The completed gets and lists of the audit log (after the mark `since`), as the
        devstack's `Cluster.read_log` records them."""
        return self._audit_entries(READ_VERBS, since)

    def _audit_entries(self, verbs: frozenset[str], since: int) -> list[AuditEntry]:
        entries: list[AuditEntry] = []
        for event in self.audit_events(since):
            if event.get("stage") != "ResponseComplete" or event.get("verb") not in verbs:
                continue
            ref = event.get("objectRef") or {}
            query = urllib.parse.parse_qs(
                urllib.parse.urlsplit(str(event.get("requestURI", ""))).query
            )
            group = f".{ref['apiGroup']}" if ref.get("apiGroup") else ""
            sub = f"/{ref['subresource']}" if ref.get("subresource") else ""
            entries.append(
                AuditEntry(
                    time=str(event.get("stageTimestamp", "")),
                    user=str((event.get("user") or {}).get("username", "")),
                    verb=str(event["verb"]),
                    resource=f"{ref.get('resource', '')}{group}{sub}",
                    namespace=str(ref.get("namespace", "")),
                    name=str(ref.get("name", "")),
                    field_manager=(query.get("fieldManager") or [""])[0],
                    code=int((event.get("responseStatus") or {}).get("code") or 0),
                    user_agent=str(event.get("userAgent", "")),
                )
            )
        return entries


class RealKube:
    """The running etcd and clusters `start_real_clusters` returned; `stop` ends them all."""

    def __init__(
        self,
        workdir: Path,
        pki: Pki,
        etcd_url: str,
        clusters: Mapping[str, RealCluster],
        kubeconfig: Path,
        tiers: list[list[ChildProcess]],
    ) -> None:
        """Take over the processes in `tiers`; use `start_real_clusters` instead."""
        self.workdir = workdir
        self.pki = pki
        self.etcd_url = etcd_url
        self.clusters: Mapping[str, RealCluster] = dict(clusters)
        self.kubeconfig = kubeconfig
        self._tiers = tiers
        self._finalizer = weakref.finalize(self, stop_tiers, tiers, STOP_TIMEOUT)

    @property
    def ca_pem(self) -> str:
        """The CA that signed the serving and admin certificates, PEM."""
        return self.pki.ca_cert.read_text()

    @property
    def kubeconfigs(self) -> dict[str, Path]:
        """Each cluster's own admin kubeconfig, by cluster name."""
        return {name: cluster.kubeconfig for name, cluster in self.clusters.items()}

    @property
    def servers(self) -> dict[str, str]:
        """Each cluster's API server URL, by cluster name."""
        return {name: cluster.server for name, cluster in self.clusters.items()}

    def __getitem__(self, name: str) -> RealCluster:
        return self.clusters[name]

    def compact(self) -> int:
        """Compact etcd's history up to its current revision, as the API servers do every few
        minutes: a watch resumed from an older version then gets a 410 Gone (when the API
        server serves it from etcd, not from its watch cache). The revision compacted to."""
        state = _etcd_call(self.etcd_url, "/v3/kv/range", {"key": base64.b64encode(b"/").decode()})
        revision = int(state["header"]["revision"])
        _etcd_call(self.etcd_url, "/v3/kv/compaction", {"revision": revision, "physical": True})
        return revision

    @property
    def running(self) -> bool:
        """Whether every process is still alive."""
        return self._finalizer.alive and all(
            proc.popen.poll() is None for tier in self._tiers for proc in tier
        )

    def stop(self) -> None:
        """Terminate every process (SIGTERM, wait, then kill); later calls do nothing."""
        self._finalizer()

    def __enter__(self) -> RealKube:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def _etcd_call(etcd_url: str, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """One call of etcd's v3 JSON gateway."""
    request = urllib.request.Request(  # noqa: S310 - http on loopback, built here
        etcd_url + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
        result: dict[str, Any] = json.loads(answer.read())
    return result


def _etcd_argv(binary: Path, data_dir: Path, client_port: int, peer_port: int) -> list[str]:
    client = f"http://{HOST}:{client_port}"
    peer = f"http://{HOST}:{peer_port}"
    return [
        str(binary),
        "--name=realkube",
        f"--data-dir={data_dir}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=realkube={peer}",
        "--initial-cluster-state=new",
        "--unsafe-no-fsync=true",
        "--log-level=warn",
    ]


AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata"}],
}


def _apiserver_argv(
    binary: Path,
    name: str,
    pki: Pki,
    etcd_url: str,
    port: int,
    sa_key: Path,
    sa_pub: Path,
    cert_dir: Path,
    audit: tuple[Path, Path],
) -> list[str]:
    policy, audit_log = audit
    return [
        str(binary),
        f"--etcd-servers={etcd_url}",
        f"--etcd-prefix=/registry-{name}",
        f"--bind-address={HOST}",
        f"--advertise-address={HOST}",
        f"--secure-port={port}",
        f"--cert-dir={cert_dir}",
        f"--tls-cert-file={pki.serving_cert}",
        f"--tls-private-key-file={pki.serving_key}",
        f"--client-ca-file={pki.ca_cert}",
        "--authorization-mode=Node,RBAC",
        f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
        f"--service-account-key-file={sa_pub}",
        f"--service-account-signing-key-file={sa_key}",
        f"--api-audiences={SERVICE_ACCOUNT_ISSUER}",
        f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
        "--allow-privileged=true",
        # A loopback address is no valid endpoint of the `kubernetes` Service; keep it unset.
        "--endpoint-reconciler-type=none",
        "--profiling=false",
        f"--audit-policy-file={policy}",
        f"--audit-log-path={audit_log}",
        "--audit-log-format=json",
        "--audit-log-mode=blocking",
        "--audit-log-maxbackup=0",
    ]


def _controller_manager_argv(
    binary: Path,
    kubeconfig: Path,
    pki: Pki,
    port: int,
    sa_key: Path,
    cert_dir: Path,
    controllers: Sequence[str] = CONTROLLERS,
) -> list[str]:
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--bind-address={HOST}",
        f"--secure-port={port}",
        f"--cert-dir={cert_dir}",
        f"--tls-cert-file={pki.serving_cert}",
        f"--tls-private-key-file={pki.serving_key}",
        "--leader-elect=false",
        f"--controllers={','.join(controllers)}",
        f"--service-account-private-key-file={sa_key}",
        f"--root-ca-file={pki.ca_cert}",
        "--profiling=false",
    ]


def _check_names(names: Sequence[str]) -> None:
    if not names:
        raise ValueError("start_real_clusters needs at least one cluster name")
    if len(set(names)) != len(names):
        raise ValueError(f"cluster names repeat: {list(names)}")
    for name in names:
        if not _CLUSTER_NAME.fullmatch(name):
            raise ValueError(
                f"cluster name {name!r} is not lower-case alphanumerics and dashes"
                " of at most 100 characters"
            )


def start_real_clusters(
    workdir: Path,
    names: Sequence[str],
    *,
    controller_manager: bool = False,
    extra_controllers: Sequence[str] = (),
    apiserver_args: Sequence[str] = (),
    bin_dir: Path = BIN_DIR,
    timeout: float = START_TIMEOUT,
) -> RealKube:
    """Start one etcd and one kube-apiserver per name (with a kube-controller-manager each when
    `controller_manager`, running `CONTROLLERS` and `extra_controllers`, e.g. the deployment and
    replicaset controllers that turn a Deployment into Pods), wait until every one is ready, and
    return them running. `apiserver_args` are added to every kube-apiserver's flags (e.g.
    `--watch-cache=false`, so that a watch resumed from a compacted version gets a 410).

    `workdir` receives the PKI, etcd's data, the kubeconfigs and the logs; it should be fresh.
    On any failure everything started is stopped again and `RealKubeError` is raised with the
    end of the failing process's log.
    """
    _check_names(names)
    needed = [
        n for n in missing_binaries(bin_dir) if controller_manager or n != "kube-controller-manager"
    ]
    if needed:
        raise RealKubeError(f"{', '.join(needed)} not built in {bin_dir}; run `make kube`")
    if not os.access(SETPRIV, os.X_OK):
        raise RealKubeError(f"{SETPRIV} is missing; install util-linux")
    workdir = workdir.resolve()
    logs = workdir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    pki = make_pki(workdir / "pki")
    env = _child_env()
    deadline = time.monotonic() + timeout
    etcd_tier: list[ChildProcess] = []
    apiserver_tier: list[ChildProcess] = []
    manager_tier: list[ChildProcess] = []
    tiers = [manager_tier, apiserver_tier, etcd_tier]
    try:
        client_port, peer_port = free_ports(2)
        etcd_url = f"http://{HOST}:{client_port}"
        argv = _etcd_argv(bin_dir / "etcd", workdir / "etcd", client_port, peer_port)
        log = logs / "etcd.log"
        etcd = ChildProcess("etcd", SPAWNER.popen(argv, log, env), log, f"{etcd_url}/health")
        etcd_tier.append(etcd)
        wait_ready(etcd, None, deadline)

        clusters = _start_apiservers(
            workdir, names, pki, etcd_url, bin_dir, env, apiserver_tier, apiserver_args
        )
        tls = ssl.create_default_context(cafile=str(pki.ca_cert))
        tls.load_cert_chain(str(pki.admin_cert), str(pki.admin_key))
        for proc in apiserver_tier:
            wait_ready(proc, tls, deadline)

        if controller_manager:
            clusters = _start_controller_managers(
                clusters, pki, bin_dir, env, manager_tier, (*CONTROLLERS, *extra_controllers)
            )
            anonymous = ssl.create_default_context(cafile=str(pki.ca_cert))
            for proc in manager_tier:
                wait_ready(proc, anonymous, deadline)

        combined = _write_kubeconfig(
            workdir / "kubeconfig", pki, {name: c.server for name, c in clusters.items()}
        )
    except BaseException:
        stop_tiers(tiers, STOP_TIMEOUT)
        raise
    return RealKube(workdir, pki, etcd_url, clusters, combined, tiers)


def _start_apiservers(
    workdir: Path,
    names: Sequence[str],
    pki: Pki,
    etcd_url: str,
    bin_dir: Path,
    env: Mapping[str, str],
    tier: list[ChildProcess],
    extra_args: Sequence[str],
) -> dict[str, RealCluster]:
    """Spawn one kube-apiserver per name, all at once; readiness is the caller's to wait for."""
    clusters: dict[str, RealCluster] = {}
    for name, port in zip(names, free_ports(len(names)), strict=True):
        home = workdir / name
        home.mkdir(parents=True, exist_ok=True)
        sa_key, sa_pub = _service_account_keys(home)
        server = f"https://{HOST}:{port}"
        log = workdir / "logs" / f"kube-apiserver-{name}.log"
        audit_log = workdir / "logs" / f"audit-{name}.log"
        policy = home / "audit-policy.json"
        policy.write_text(json.dumps(AUDIT_POLICY))
        argv = _apiserver_argv(
            bin_dir / "kube-apiserver",
            name,
            pki,
            etcd_url,
            port,
            sa_key,
            sa_pub,
            home / "certs",
            (policy, audit_log),
        )
        popen = SPAWNER.popen([*argv, *extra_args], log, env)
        tier.append(ChildProcess(f"kube-apiserver {name}", popen, log, f"{server}/readyz"))
        clusters[name] = RealCluster(
            name=name,
            server=server,
            kubeconfig=_write_kubeconfig(home / "kubeconfig", pki, {name: server}),
            etcd_prefix=f"/registry-{name}",
            service_account_key=sa_key,
            log=log,
            controller_manager_log=None,
            audit_log=audit_log,
        )
    return clusters


def _start_controller_managers(
    clusters: Mapping[str, RealCluster],
    pki: Pki,
    bin_dir: Path,
    env: Mapping[str, str],
    tier: list[ChildProcess],
    controllers: Sequence[str],
) -> dict[str, RealCluster]:
    """Spawn one kube-controller-manager per cluster; returns the clusters naming its log."""
    started: dict[str, RealCluster] = {}
    ports = free_ports(len(clusters))
    for (name, cluster), port in zip(clusters.items(), ports, strict=True):
        log = cluster.log.with_name(f"kube-controller-manager-{name}.log")
        argv = _controller_manager_argv(
            bin_dir / "kube-controller-manager",
            cluster.kubeconfig,
            pki,
            port,
            cluster.service_account_key,
            cluster.kubeconfig.parent / "certs",
            controllers,
        )
        popen = SPAWNER.popen(argv, log, env)
        ready = f"https://{HOST}:{port}/healthz"
        tier.append(ChildProcess(f"kube-controller-manager {name}", popen, log, ready))
        started[name] = dataclasses.replace(cluster, controller_manager_log=log)
    return started
