"""Real platforms shared by the tests of one pytest process.

Starting the real platform (two kube-apiservers over etcd, OpenBao, ESO, cert-manager, the seed)
takes about 20 s, longer than most tests it serves. Tests own their orders (a random suffix in
every name), their Redis key prefix and their schemas, so one platform can serve them one after
another: ``PlatformPool.lease`` hands a test the running platform started with the same
clusters and options, and takes it back afterwards, when tenantdb's processes are stopped, by
removing every order and every object tenantdb labelled as an order's child, on every cluster,
finalizers and all. The next test then starts its watcher on clusters that hold no order.

A test that changes the platform itself (the ControlPlane, OpenBao's state, a controller
stopped, an issuer deleted) asks for a private platform (marker ``private_platform``), which is
started for it alone and stopped after it.

Each pytest process keeps at most ``KEPT`` shared platforms running (the least recently used one
stops first); with ``pytest -n 2`` that is two per process.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections import OrderedDict
from collections.abc import Hashable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devstack.platform import Platform, start_platform
from tenantdb.adapters.clusters import ClusterRegistry
from tenantdb.adapters.kube import (
    SECRET,
    SERVICE_ACCOUNT,
    KindNotServedError,
    KubeClient,
    NotFoundError,
    Resource,
)
from tenantdb.adapters.mariadbdatabase import (
    CERTIFICATE,
    DATABASE,
    EXTERNAL_SECRET,
    MARIADB_DATABASE,
    VAULT_DYNAMIC_SECRET,
)
from tenantdb.adapters.mysqldatabase import MYSQL_DATABASE
from tenantdb.core.served import KINDS
from tenantdb.settings import Settings

log = logging.getLogger(__name__)

KEPT = 2
"""Shared platforms one pytest process keeps running at a time."""

_CHILDREN = (EXTERNAL_SECRET, VAULT_DYNAMIC_SECRET, DATABASE, CERTIFICATE, SECRET, SERVICE_ACCOUNT)
"""What tenantdb creates for an order, found by the labels it puts on each."""


def _option_key(value: Any) -> Hashable:
    """A start option as part of a pool key: a running object (a MySQL group) by identity."""
    if isinstance(value, Hashable) and not hasattr(value, "__dict__"):
        return value
    return ("object", id(value))


@dataclass
class Lease:
    """A platform lent to one test."""

    platform: Platform
    shared: bool
    marks: dict[str, int] = field(default_factory=dict)
    """Where each API server's audit log ended when the test got the platform."""


@dataclass
class PlatformPool:
    """Real platforms of one pytest process (see module)."""

    root: Path
    _running: OrderedDict[Hashable, Platform] = field(default_factory=OrderedDict)
    _serial: Iterator[int] = field(default_factory=itertools.count)

    @contextlib.contextmanager
    def lease(
        self, clusters: tuple[str, ...], options: Mapping[str, Any], *, private: bool
    ) -> Iterator[Lease]:
        """A platform for one test: a shared one (cleared of orders when the block ends), or
        with ``private`` one of its own (stopped when the block ends)."""
        if private:
            platform = self._start(clusters, options)
            try:
                yield Lease(platform, shared=False, marks=platform.audit_marks())
            finally:
                platform.stop()
            return
        key = (clusters, tuple(sorted((k, _option_key(v)) for k, v in options.items())))
        if key in self._running:
            platform = self._running.pop(key)
        else:
            while len(self._running) >= KEPT:
                _, oldest = self._running.popitem(last=False)
                oldest.stop()
            platform = self._start(clusters, options)
        try:
            yield Lease(platform, shared=True, marks=platform.audit_marks())
        except BaseException:
            platform.stop()  # a test that failed in the middle may have left it in any state
            raise
        try:
            clear_orders(platform)
        except Exception:
            log.exception("could not clear the shared platform; stopping it")
            platform.stop()
            return
        self._running[key] = platform

    def close(self) -> None:
        """Stop every platform still running."""
        while self._running:
            _, platform = self._running.popitem()
            platform.stop()

    def _start(self, clusters: tuple[str, ...], options: Mapping[str, Any]) -> Platform:
        directory = self.root / f"platform-{next(self._serial)}"
        return start_platform(directory, clusters=clusters, **options)


def clear_orders(platform: Platform) -> None:
    """Remove every order of both kinds and every child tenantdb labelled, on every cluster,
    finalizers included (tenantdb is not running to tear them down)."""
    registry = ClusterRegistry.from_settings(
        Settings(kubeconfig=str(platform.kubeconfig_path), management_context="management")
    )
    for name in platform.names:
        kube = registry.get("" if name == "management" else name)
        for resource in (MARIADB_DATABASE, MYSQL_DATABASE):
            with contextlib.suppress(KindNotServedError):
                for order in kube.list_objects(resource):
                    _force_delete(kube, resource, order)
        for kind in KINDS:
            for resource in _CHILDREN:
                with contextlib.suppress(KindNotServedError):
                    for child in kube.list_objects(
                        resource, label_selector=kind.identity.label_name
                    ):
                        _force_delete(kube, resource, child)


def _force_delete(kube: KubeClient, resource: Resource, obj: dict[str, Any]) -> None:
    meta = obj["metadata"]
    namespace = meta.get("namespace")
    with contextlib.suppress(NotFoundError):
        if meta.get("finalizers"):
            kube.patch(resource, namespace, meta["name"], {"metadata": {"finalizers": None}})
        kube.delete(resource, namespace, meta["name"])
