"""The clusters tenantdb serves: the management cluster and the named target clusters.

Clusters come from one kubeconfig: the management context (or the pod's ServiceAccount when no
kubeconfig is set) and every other context as a target cluster named like the context, or only
the contexts named in the settings. Each cluster gets an ``ApiClient`` of its own, never the
client library's global configuration, so several clusters are served from one process.

A cluster that is not registered does not resolve; its error text is what an order reports as
TargetClusterUnavailable, and it names the cluster only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from tenantdb.adapters.kube import (
    KubeClient,
    client_from_kubeconfig,
    in_cluster_client,
    kubeconfig_contexts,
)
from tenantdb.settings import Settings

MANAGEMENT = ""


class ClusterUnavailableError(LookupError):
    """A cluster name that no configured context serves."""

    def __init__(self, cluster: str) -> None:
        super().__init__(f'cluster "{cluster}" is not registered with tenantdb')
        self.cluster = cluster


class ClusterRegistry:
    """Kubernetes clients by cluster name ("" is the management cluster)."""

    def __init__(self, factories: dict[str, Callable[[], KubeClient]]) -> None:
        """Register a client factory per cluster; each client is built on first use."""
        self._factories = factories
        self._clients: dict[str, KubeClient] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> ClusterRegistry:
        """Register the management cluster and the target clusters the settings name."""
        path = settings.kubeconfig
        if not path:
            return cls({MANAGEMENT: in_cluster_client})
        contexts = kubeconfig_contexts(path)
        management = settings.management_context or _current_context(path)
        wanted = [c.strip() for c in settings.target_contexts.split(",") if c.strip()]
        targets = wanted or [c for c in contexts if c != management]
        factories: dict[str, Callable[[], KubeClient]] = {
            MANAGEMENT: lambda: client_from_kubeconfig(path, management, MANAGEMENT)
        }
        for context in targets:
            if context in contexts and context != management:
                factories[context] = _factory(path, context)
        return cls(factories)

    def get(self, cluster: str) -> KubeClient:
        """The client of one cluster.

        Raises:
            ClusterUnavailableError: no context serves that cluster.
        """
        with self._lock:
            client = self._clients.get(cluster)
            if client is None:
                factory = self._factories.get(cluster)
                if factory is None:
                    raise ClusterUnavailableError(cluster)
                client = self._clients[cluster] = factory()
            return client

    def names(self) -> list[str]:
        """Every registered cluster, the management cluster ("") first."""
        return sorted(self._factories, key=lambda name: (name != MANAGEMENT, name))


def _factory(path: str, context: str) -> Callable[[], KubeClient]:
    return lambda: client_from_kubeconfig(path, context, context)


def _current_context(path: str) -> str:
    from kubernetes import config as k8s_config

    _, current = k8s_config.list_kube_config_contexts(config_file=path)
    return str(current["name"])
