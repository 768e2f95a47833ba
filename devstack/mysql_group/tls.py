"""TLS for the devstack's MySQL failover group: the sites' server certificates and their files.

Owns the names a site's certificate carries (`mysql-<group>-<site>.<namespace>.svc.cluster.local`,
the name clients verify, and `mysql-<group>-<site>-internal.<namespace>.svc.cluster.local`, the
Service they dial), issuing one ECDSA server-auth certificate per site from a CA the caller
passes (or one generated here), a group-wide certificate for every site's names (the keypair a
`<group>-tls` Secret holds, as a cert-manager Certificate for the group would), and writing a
site's PEMs as 0600 files (`<site>/tls/tls.crt`, `tls.key`, `ca.crt` under the group's
directory) for mariadbd's `--ssl-cert`, `--ssl-key` and `--ssl-ca`.

It must never write a private key anywhere but those 0600 files, and never log or show one
(`Issued` keeps keys out of its repr). ECDSA P-256 keys keep issuing to milliseconds, so a
group with TLS starts about as fast as one without. Deliberately left out: client certificates
(the servers ask for none), renewal, and TLS on the replication links.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from devstack.ca import CertificateAuthority, Issued, Request

DEFAULT_GROUP = "main"
DEFAULT_NAMESPACE = "bloodraven"
USAGES = ("digital signature", "key encipherment", "server auth")
VALIDITY = timedelta(days=365)


def server_name(group: str, site: str, namespace: str) -> str:
    """The name a site's certificate is verified for, whatever address is dialled."""
    return f"mysql-{group}-{site}.{namespace}.svc.cluster.local"


def internal_name(group: str, site: str, namespace: str) -> str:
    """The host name of a site's in-cluster Service."""
    return f"mysql-{group}-{site}-internal.{namespace}.svc.cluster.local"


def site_names(group: str, site: str, namespace: str) -> tuple[str, str]:
    """The DNS names of a site's certificate: its server name and its Service's name."""
    return server_name(group, site, namespace), internal_name(group, site, namespace)


def _issue(ca: CertificateAuthority, common_name: str, names: Iterable[str]) -> Issued:
    return ca.sign(
        Request(
            common_name=common_name,
            dns_names=tuple(names),
            usages=USAGES,
            duration=VALIDITY,
            algorithm="ECDSA",
        )
    )


@dataclass(frozen=True)
class TLSFiles:
    """Where one site's PEMs are: its certificate, its key, and the CA."""

    cert: Path
    key: Path
    ca: Path


def _write_private(path: Path, content: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(content)
    path.chmod(0o600)


def write_files(directory: Path, issued: Issued, ca_pem: bytes) -> TLSFiles:
    """Write a site's keypair and the CA as 0600 files into `directory` (made 0700)."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    files = TLSFiles(directory / "tls.crt", directory / "tls.key", directory / "ca.crt")
    _write_private(files.cert, issued.cert_pem)
    _write_private(files.key, issued.key_pem)
    _write_private(files.ca, ca_pem)
    return files


@dataclass(frozen=True)
class GroupTLS:
    """A group's TLS material: the CA, each site's keypair, and the group-wide keypair."""

    ca: CertificateAuthority = field(repr=False)
    group: str
    namespace: str
    sites: Mapping[str, Issued]
    group_pair: Issued

    @classmethod
    def issue(
        cls,
        sites: Iterable[str],
        ca: CertificateAuthority | None = None,
        *,
        group: str = DEFAULT_GROUP,
        namespace: str = DEFAULT_NAMESPACE,
    ) -> GroupTLS:
        """Issue every site's certificate (and the group's) from `ca`, generated when None."""
        authority = ca or CertificateAuthority.generate(f"devstack mysql-{group} CA")
        names = list(sites)
        per_site = {
            site: _issue(
                authority, server_name(group, site, namespace), site_names(group, site, namespace)
            )
            for site in names
        }
        every = [n for site in names for n in site_names(group, site, namespace)]
        whole = _issue(authority, f"mysql-{group}.{namespace}.svc.cluster.local", every)
        return cls(authority, group, namespace, per_site, whole)

    @property
    def ca_pem(self) -> bytes:
        """The CA certificate (what a client verifies the servers against)."""
        return self.ca.cert_pem

    def server_name(self, site: str) -> str:
        """The name a site's certificate is verified for."""
        return server_name(self.group, site, self.namespace)
