"""A cert-manager stand-in: CA issuers and Certificates, run as threads in the devstack process.

Owns issuing the Secrets of `cert-manager.io/v1` Certificates from CA issuers, as cert-manager
does for the objects tenantdb writes (see `controller` for what is left out), and the devstack CA
(`ca`) that also signs the OpenBao listener's certificate. Production code never imports it.
"""

from devstack.ca import CertificateAuthority, Issued, Request
from devstack.certmanager.controller import CLUSTER_RESOURCE_NAMESPACE, CertManager

__all__ = [
    "CLUSTER_RESOURCE_NAMESPACE",
    "CertManager",
    "CertificateAuthority",
    "Issued",
    "Request",
]
