"""The clusters tenantdb serves: the management cluster and the named target clusters.

Clusters come from one kubeconfig: the management context (or the pod's ServiceAccount when no
kubeconfig is set) and every other context as a target cluster named like the context, or only
the contexts named in the settings. Each cluster gets an ``ApiClient`` of its own, never the
client library's global configuration, so several clusters are served from one process.

A cluster that is not registered does not resolve; its error text is what an order reports as
TargetClusterUnavailable, and it names the cluster only.

For long-running processes the configuration can be read again: ``load_cluster_config`` adds the
target clusters of a directory of kubeconfigs (one file per cluster, as a mounted Secret gives
them) and a digest per cluster, and ``compute_config_stamp`` tells cheaply when a file changed.
Nothing here ever logs a kubeconfig's content.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from tenantdb.adapters.errors import SafeError
from tenantdb.adapters.kube import (
    KubeClient,
    client_from_kubeconfig,
    in_cluster_client,
    kubeconfig_contexts,
)
from tenantdb.core.keys import cluster_name_problem
from tenantdb.settings import Settings

MANAGEMENT = ""


class ClusterUnavailableError(SafeError, LookupError):
    """A cluster name that no configured context serves."""

    def __init__(self, cluster: str) -> None:
        super().__init__(f'cluster "{cluster}" is not registered with tenantdb')
        self.cluster = cluster


class ClusterRegistry:
    """Kubernetes clients by cluster name ("" is the management cluster)."""

    def __init__(
        self,
        factories: dict[str, Callable[[], KubeClient]],
        skipped: dict[str, str] | None = None,
    ) -> None:
        """Register a client factory per cluster; each client is built on first use.

        ``skipped`` names the contexts left out and why (a name order keys cannot carry).
        """
        self._factories = factories
        self.skipped: dict[str, str] = dict(skipped or {})
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
        skipped: dict[str, str] = {}
        for context in targets:
            if context in contexts and context != management:
                problem = cluster_name_problem(context)
                if problem:
                    skipped[context] = problem
                else:
                    factories[context] = _factory(path, context)
        return cls(factories, skipped)

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


# -- reloading -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """One reading of the cluster configuration: the registry and a digest per cluster.

    A cluster whose digest changes between two readings points somewhere else (another server,
    another credential), so whoever holds a client of it builds a new one.
    """

    registry: ClusterRegistry
    digests: dict[str, str]


def load_cluster_config(settings: Settings) -> ClusterConfig:
    """Read the clusters the settings name: the kubeconfig's and the kubeconfig directory's.

    The directory (``kubeconfig_dir``, as a mounted Secret gives it) holds one kubeconfig per
    target cluster, the file named like the cluster, used with its current context; hidden
    entries (a mounted Secret's ``..data`` links) are skipped. A file named like a context of the
    main kubeconfig takes that cluster's place.

    Raises:
        OSError, ValueError, yaml.YAMLError: a file is unreadable or half written; read again
            later.
    """
    base = ClusterRegistry.from_settings(settings)
    factories: dict[str, Callable[[], KubeClient]] = {
        name: functools.partial(base.get, name) for name in base.names()
    }
    digests = _kubeconfig_digests(settings.kubeconfig, settings.management_context, base.names())
    skipped = dict(base.skipped)
    for name, path in _directory_kubeconfigs(_kubeconfig_dir(settings)).items():
        if name == MANAGEMENT:
            continue
        problem = cluster_name_problem(name)
        if problem:
            skipped[name] = f"file {path.name}: {problem}"
            continue
        context = _current_context(str(path))
        factories[name] = functools.partial(client_from_kubeconfig, str(path), context, name)
        digests[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return ClusterConfig(ClusterRegistry(factories, skipped), digests)


def compute_config_stamp(settings: Settings) -> tuple[object, ...]:
    """A cheap stamp of the configuration files; it changes whenever one of them is rewritten."""
    stamps: list[object] = []
    if settings.kubeconfig:
        stamps.append(_file_stamp(Path(settings.kubeconfig)))
    directory = _kubeconfig_dir(settings)
    if directory:
        stamps.extend(
            (name, _file_stamp(path)) for name, path in _directory_kubeconfigs(directory).items()
        )
    return tuple(stamps)


def _kubeconfig_dir(settings: Settings) -> str:
    return settings.kubeconfig_dir


def _file_stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_size, info.st_ino)


def _directory_kubeconfigs(directory: str) -> dict[str, Path]:
    if not directory:
        return {}
    found: dict[str, Path] = {}
    try:
        entries = sorted(Path(directory).iterdir())
    except OSError:
        return {}
    for entry in entries:
        if not entry.name.startswith(".") and entry.is_file():
            found[entry.name] = entry
    return found


def _kubeconfig_digests(path: str, management: str, names: list[str]) -> dict[str, str]:
    if not path:
        return dict.fromkeys(names, "in-cluster")
    document = yaml.safe_load(Path(path).read_text()) or {}
    by_name = {
        section: {str(e.get("name")): e for e in document.get(section) or [] if isinstance(e, dict)}
        for section in ("contexts", "clusters", "users")
    }
    digests: dict[str, str] = {}
    current = management or str(document.get("current-context") or "")
    for name in names:
        context = by_name["contexts"].get(name or current) or {}
        inner = context.get("context") or {}
        parts = [
            context,
            by_name["clusters"].get(str(inner.get("cluster"))),
            by_name["users"].get(str(inner.get("user"))),
        ]
        text = json.dumps(parts, sort_keys=True, default=str)
        digests[name] = hashlib.sha256(text.encode()).hexdigest()
    return digests
