"""A Kubernetes API server in Python that the official client and kubectl use as the real one.

One `ClusterServer` per simulated cluster (several per process, each on a free port, HTTPS with a
throwaway CA because client-go only sends bearer tokens over TLS), built on a `Cluster` that other
stand-ins can drive from Python: `get`/`list`/`watch`/`create`/`apply`/`patch`/`delete`, issuing
ServiceAccount tokens, request counters, an audit log, the watch-history window and killing open
watches. Served: discovery and OpenAPI v2/v3 for kubectl, Namespace, Secret, ConfigMap,
ServiceAccount (+ TokenRequest), Service, Event (core v1, with its field selectors), Lease,
TokenReview, SelfSubjectReview, CustomResourceDefinition and the kinds CRDs install (with printer
columns); uid, resourceVersion, generation, 201/403/404/409/410/415/422 with the real wording;
label and field selectors; chunked lists with consistent pages and lists at a resourceVersion
(rebuilt from the watch history; older than it is a 410); watches with bookmarks as the watch cache
sends them, timeouts and 410; merge, JSON, strategic merge and server-side apply with
managedFields; the status subresource; finalizers; background, foreground and orphan garbage
collection; namespace and CRD cleanup; CRD pruning, defaults, structural validation and CEL rules;
bearer tokens, anonymous requests and impersonation; RBAC authorization of every request (Role,
ClusterRole, RoleBinding, ClusterRoleBinding, aggregated ClusterRoles, the bootstrap policy,
escalation checks) with the access reviews `kubectl auth can-i` uses.
Production code must never import this package.

Deliberately left out versus the real kube-apiserver:
- Protobuf beyond the request bodies `kubectl create` and `kubectl auth` send for Namespace,
  Secret, ConfigMap, ServiceAccount, TokenRequest, the RBAC kinds and the reviews (others get
  415), CBOR, and protobuf responses (always JSON).
- Authorizers other than RBAC (Node, Webhook, ABAC), client-certificate authentication,
  admission webhooks, ValidatingAdmissionPolicy, quotas, rate limits, API priority and fairness,
  aggregated discovery (clients fall back to the legacy discovery documents), HTTP/2.
- CRD conversion webhooks (versions are converted by rewriting apiVersion only), the scale
  subresource, CEL cost budgets and ratcheting, the Kubernetes CEL extension libraries, and the
  full built-in schemas (built-ins keep their top-level fields and are not validated field by
  field beyond names, keys, Secret data, the RBAC kinds and the immutability rules tenantdb
  meets).
- Graceful deletion periods (deletion is immediate once finalizers are gone), Pods and every
  kind not listed above (`events.k8s.io` included), the expiry of Events, and persistence
  (state lives in memory for the life of the process).
"""

from devstack.kube.cluster import Cluster
from devstack.kube.server import ClusterServer, kubeconfig, start_clusters

__all__ = ["Cluster", "ClusterServer", "kubeconfig", "start_clusters"]
