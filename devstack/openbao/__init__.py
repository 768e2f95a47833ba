"""An OpenBao (Vault-compatible) API subset for tests and the demo, usable through `hvac`.

Owns a stand-in for the OpenBao server tenantdb and External Secrets Operator talk to: the HTTP(S)
listener (optionally requiring client certificates), tokens, ACL policies with templated paths,
Kubernetes auth validated by a TokenReview, and the database secrets engine with the MySQL plugin
running its creation and revocation statements on a real MariaDB. Production code never imports
it; it must never leave SQL users behind (`OpenBaoServer.stop()` revokes every lease it issued).

Deliberately left out compared with real OpenBao:
- storage, seal/unseal, HA, namespaces, audit devices, response wrapping, replication: state lives
  in memory and is gone when the server stops; the server is always unsealed;
- every auth method but Kubernetes and tokens; every secrets engine but `database`; the identity
  store beyond what a Kubernetes login creates (one entity per ServiceAccount alias);
- batch, periodic and limited-use tokens, token roles, accessor lookups, `explicit_max_ttl`;
- policy parameter constraints (refused when written), Sentinel policies, control groups;
- database engine: static roles, root rotation, custom username templates and password policies
  (refused), non-password credential types, renew/rollback statements (stored, never run), every
  plugin outside the MySQL family; revocations always run synchronously (`sync` is ignored), and
  the WAL-based rollback of half-created users is replaced by dropping the user at once;
- on purpose, role writes are checked against the connection's `allowed_roles` (real OpenBao
  checks only when credentials are read); the reference deployment's contract counts on the
  write being refused with 400 `"<role>" is not an allowed role`;
- the `time_scale` option (simulated time running faster than real time) has no counterpart.
"""

from devstack.openbao.database import MariaDBEndpoint
from devstack.openbao.kubeauth import KubeTokenReviewer, ReviewResult, TokenReviewer
from devstack.openbao.server import OpenBaoServer, TLSConfig

__all__ = [
    "KubeTokenReviewer",
    "MariaDBEndpoint",
    "OpenBaoServer",
    "ReviewResult",
    "TLSConfig",
    "TokenReviewer",
]
