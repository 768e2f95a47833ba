"""Real kube-apiservers for the integration tests that need clusters but no platform.

``start_servers`` starts one etcd and a kube-apiserver per cluster name (``devstack.realkube``,
built by ``make kube``) and returns each as an ``ApiServer``: its URL and an admin's
``RemoteCluster`` (objects by resource name, as the stand-in operators use them). Two clusters
start in about 3 s, so a test can have its own. ``kubeconfig`` writes what tenantdb reads: one
context per cluster, named like it, with an admin user ``<cluster>-admin`` on each (a test may
swap a user for a ServiceAccount token to act with the chart's grants).
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from devstack import crds as crd_install
from devstack.kubeclient import RemoteCluster
from devstack.realkube import RealKube, missing_binaries, start_real_clusters


@dataclass
class ApiServer:
    """One running kube-apiserver of a test."""

    name: str
    url: str
    cluster: RemoteCluster
    """An admin's client (client certificate in `system:masters`)."""
    real: RealKube
    """The servers it was started with (their PKI, etcd and audit logs)."""

    def requests(self, verb: str, resource: str) -> int:
        """How many `verb` requests on `resource` (`secrets`, `controlplanes.c5c3.io`) the
        server answered so far, watches apart, from its audit log."""
        count = 0
        for event in self.real.clusters[self.name].audit_events():
            ref = event.get("objectRef") or {}
            group = f".{ref['apiGroup']}" if ref.get("apiGroup") else ""
            if (
                event.get("stage") == "ResponseComplete"
                and event.get("verb") == verb
                and f"{ref.get('resource', '')}{group}" == resource
                and not ref.get("subresource")
            ):
                count += 1
        return count

    def install(self, *crds: dict[str, Any]) -> None:
        """Install CRDs and wait until the server serves them."""
        crd_install.install(self.cluster, list(crds))
        crd_install.wait_established(self.cluster, list(crds))


@contextlib.contextmanager
def start_servers(
    directory: Path, names: Sequence[str], apiserver_args: Sequence[str] = ()
) -> Iterator[dict[str, ApiServer]]:
    """Real API servers for ``names`` over one etcd, for the block; stopped at its end.
    ``apiserver_args`` are added to each kube-apiserver's flags."""
    missing = [n for n in missing_binaries() if n != "kube-controller-manager"]
    if missing:
        pytest.fail(f"{', '.join(missing)} not built in tools/kube/bin; run `make kube`")
    real = start_real_clusters(directory, names, apiserver_args=apiserver_args)
    pair = (str(real.pki.admin_cert), str(real.pki.admin_key))
    servers = {
        name: ApiServer(
            name, url, RemoteCluster(name, url, ca_pem=real.ca_pem, client_cert=pair), real
        )
        for name, url in real.servers.items()
    }
    try:
        yield servers
    finally:
        for server in servers.values():
            server.cluster.close()
        real.stop()


def kubeconfig(servers: Mapping[str, ApiServer], current: str | None = None) -> dict[str, Any]:
    """A kubeconfig with one context per cluster, named like it, each with its admin user."""
    names = list(servers)

    def b64(path: Path) -> str:
        return base64.b64encode(path.read_bytes()).decode()

    def user(server: ApiServer) -> dict[str, Any]:
        pki = server.real.pki
        return {
            "client-certificate-data": b64(pki.admin_cert),
            "client-key-data": b64(pki.admin_key),
        }

    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [
            {
                "name": n,
                "cluster": {
                    "server": servers[n].url,
                    "certificate-authority-data": b64(servers[n].real.pki.ca_cert),
                },
            }
            for n in names
        ],
        "users": [{"name": f"{n}-admin", "user": user(servers[n])} for n in names],
        "contexts": [
            {"name": n, "context": {"cluster": n, "user": f"{n}-admin", "namespace": "default"}}
            for n in names
        ],
        "current-context": current or (names[0] if names else ""),
    }


def write_kubeconfig(path: Path, servers: Mapping[str, ApiServer]) -> None:
    """Write a kubeconfig atomically (as a mounted file changes); management is current."""
    current = "management" if "management" in servers else next(iter(servers))
    scratch = path.with_name(f".{path.name}.new")
    scratch.write_text(yaml.safe_dump(kubeconfig(servers, current=current)))
    scratch.chmod(0o600)
    scratch.replace(path)
