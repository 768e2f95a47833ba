"""The controllers a real control plane runs that the API's callers can observe.

Owns background garbage collection through ownerReferences (dependents of a removed owner go;
a dangling owner reference is dropped, and a dependent whose owners are all gone is deleted),
foreground and orphan deletion, namespace termination (contents deleted, then the namespace),
CRD cleanup (instances deleted, then the CRD and its served kind), and ClusterRole aggregation
(an aggregated ClusterRole's rules rewritten from the roles its selectors pick). Work runs on one
thread per cluster, after the request that caused it returned, as in a real cluster. It must
never delete an object a live owner still holds.
"""

from __future__ import annotations

import contextlib
import copy
import queue
import threading
from typing import Any

from devstack.kube import rbac
from devstack.kube.api import CRD_FINALIZER, MERGE, Api, WriteOptions
from devstack.kube.errors import ApiError
from devstack.kube.kinds import Kind, kind_from_crd
from devstack.kube.store import Obj

_GC = WriteOptions(
    user="system:serviceaccount:kube-system:generic-garbage-collector",
    field_manager="kube-controller-manager",
)
_AGGREGATOR = WriteOptions(
    user="system:serviceaccount:kube-system:clusterrole-aggregation-controller",
    field_manager="clusterrole-aggregation-controller",
)
_STOP = ("stop", "")


class Controllers:
    """A work queue and the thread that drains it."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self._queue: queue.Queue[tuple[str, str]] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="devstack-controllers", daemon=True)
        self._idle = threading.Event()
        self._idle.set()
        api.on_removed.append(self._removed)
        api.on_created.append(self._written)
        api.on_deleting.append(self._deleting)

    def start(self) -> None:
        """Start the worker thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop the worker thread."""
        self._queue.put(_STOP)
        self._thread.join(timeout=5)

    def wait_idle(self, timeout: float = 5.0) -> bool:
        """Wait until the queue is drained (tests use this instead of sleeping)."""
        return self._idle.wait(timeout)

    def _enqueue(self, task: str, arg: str) -> None:
        self._idle.clear()
        self._queue.put((task, arg))

    # ------------------------------------------------------------ hooks (under the store lock)

    def _removed(self, kind: Kind, obj: Obj) -> None:
        meta = obj["metadata"]
        self._enqueue("owner_gone", str(meta["uid"]))
        if meta.get("namespace"):
            self._enqueue("namespace", str(meta["namespace"]))
        for ref in meta.get("ownerReferences") or []:
            self._enqueue("foreground", str(ref.get("uid")))
        if kind.kind == "CustomResourceDefinition":
            self.api.registry.uninstall(kind_from_crd(obj).key)
        elif not kind.builtin:
            self._enqueue("crd_cleanup", kind.resource)
        if kind.key == rbac.CLUSTER_ROLES:
            self._enqueue("aggregate", "")

    def _written(self, kind: Kind, obj: Obj) -> None:
        if kind.kind == "CustomResourceDefinition" and not obj["metadata"].get("deletionTimestamp"):
            self.api.registry.install(kind_from_crd(obj))
        if obj["metadata"].get("ownerReferences"):
            self._enqueue("dangling", str(obj["metadata"]["uid"]))
        if kind.key == rbac.CLUSTER_ROLES:
            self._enqueue("aggregate", "")

    def _deleting(self, kind: Kind, obj: Obj) -> None:
        meta = obj["metadata"]
        finalizers = meta.get("finalizers") or []
        if kind.kind == "Namespace":
            self._enqueue("namespace", str(meta["name"]))
        if kind.kind == "CustomResourceDefinition":
            self._enqueue("crd_cleanup", str(meta["name"]))
        if "foregroundDeletion" in finalizers:
            self._enqueue("foreground", str(meta["uid"]))
        if "orphan" in finalizers:
            self._enqueue("orphan", str(meta["uid"]))

    # ------------------------------------------------------------ worker

    def _run(self) -> None:
        while True:
            task, arg = self._queue.get()
            if (task, arg) == _STOP:
                return
            # An ApiError: a concurrent client changed the object first; the next event retries.
            with contextlib.suppress(ApiError):
                getattr(self, f"_do_{task}")(arg)
            if self._queue.empty():
                self._idle.set()

    def _kind_of(self, key: str) -> Kind | None:
        return next((k for k in self.api.registry.kinds() if k.key == key), None)

    def _dependents(self, uid: str) -> list[tuple[Kind, Obj]]:
        out = []
        with self.api.store.lock:
            for key, obj in self.api.store.all_objects():
                refs = obj["metadata"].get("ownerReferences") or []
                kind = self._kind_of(key)
                if kind is not None and any(r.get("uid") == uid for r in refs):
                    out.append((kind, obj))
        return out

    def _alive(self, uid: str) -> bool:
        return self.api.store.by_uid(uid) is not None

    def _delete(self, kind: Kind, obj: Obj, options: dict[str, Any] | None = None) -> None:
        meta = obj["metadata"]
        try:
            self.api.delete(
                kind, kind.storage_version, meta.get("namespace", ""), meta["name"], _GC, options
            )
        except ApiError as exc:
            if exc.code != 404:
                raise

    def _drop_refs(self, kind: Kind, obj: Obj, gone: set[str]) -> None:
        meta = obj["metadata"]
        with self.api.store.lock:
            current = self.api.store.get(kind.key, meta.get("namespace", ""), meta["name"])
            if current is None:
                return
            refs = [
                r
                for r in current["metadata"].get("ownerReferences") or []
                if r.get("uid") not in gone
            ]
            patch: dict[str, Any] = {"metadata": {"ownerReferences": refs or None}}
            self.api.patch(
                kind,
                kind.storage_version,
                meta.get("namespace", ""),
                meta["name"],
                "application/merge-patch+json",
                patch,
                _GC,
            )

    def _collect(self, kind: Kind, obj: Obj) -> None:
        refs = obj["metadata"].get("ownerReferences") or []
        gone = {str(r.get("uid")) for r in refs if not self._alive(str(r.get("uid")))}
        if not gone:
            return
        if len(gone) == len(refs):
            self._delete(kind, obj)
        else:
            self._drop_refs(kind, obj, gone)

    def _do_owner_gone(self, uid: str) -> None:
        for kind, obj in self._dependents(uid):
            self._collect(kind, obj)

    def _do_dangling(self, uid: str) -> None:
        found = self.api.store.by_uid(uid)
        if found is None:
            return
        kind = self._kind_of(found[0])
        obj = self.api.store.get(*found)
        if kind is not None and obj is not None:
            self._collect(kind, obj)

    def _owner(self, uid: str) -> tuple[Kind, Obj] | None:
        found = self.api.store.by_uid(uid)
        kind = self._kind_of(found[0]) if found else None
        obj = self.api.store.get(*found) if found else None
        return (kind, obj) if kind is not None and obj is not None else None

    def _do_foreground(self, uid: str) -> None:
        owner = self._owner(uid)
        if owner is None or "foregroundDeletion" not in (
            owner[1]["metadata"].get("finalizers") or []
        ):
            return
        dependents = self._dependents(uid)
        for kind, obj in dependents:
            if not obj["metadata"].get("deletionTimestamp"):
                self._delete(kind, obj, {"propagationPolicy": "Foreground"})
        if not self._dependents(uid):
            kind, obj = owner
            self.api.remove_finalizer(
                kind,
                obj["metadata"].get("namespace", ""),
                obj["metadata"]["name"],
                "foregroundDeletion",
            )

    def _do_orphan(self, uid: str) -> None:
        owner = self._owner(uid)
        if owner is None:
            return
        for kind, obj in self._dependents(uid):
            self._drop_refs(kind, obj, {uid})
        kind, obj = owner
        self.api.remove_finalizer(
            kind, obj["metadata"].get("namespace", ""), obj["metadata"]["name"], "orphan"
        )

    def _do_namespace(self, name: str) -> None:
        ns_kind = self.api.registry.find("namespaces")
        namespace = self.api.store.get(ns_kind.key, "", name)
        if namespace is None or not namespace["metadata"].get("deletionTimestamp"):
            return
        remaining = 0
        for kind in self.api.registry.kinds():
            if not kind.namespaced:
                continue
            for obj in list(self.api.store.items(kind.key, name)):
                remaining += 1
                if not obj["metadata"].get("deletionTimestamp"):
                    self._delete(kind, obj)
        if remaining and any(
            self.api.store.items(k.key, name) for k in self.api.registry.kinds() if k.namespaced
        ):
            return
        with self.api.store.lock:
            current = self.api.store.get(ns_kind.key, "", name)
            if current is None or current["metadata"].get("finalizers"):
                return
            final = copy.deepcopy(current)
            final.setdefault("spec", {})["finalizers"] = []
            self.api._remove(ns_kind, final)

    def _do_crd_cleanup(self, name: str) -> None:
        crd_kind = self.api.registry.find("customresourcedefinitions")
        crd = self.api.store.get(crd_kind.key, "", name)
        if crd is None or not crd["metadata"].get("deletionTimestamp"):
            return
        served = kind_from_crd(crd)
        items = self.api.store.items(served.key)
        for obj in items:
            if not obj["metadata"].get("deletionTimestamp"):
                self._delete(served, obj)
        if not self.api.store.items(served.key):
            self.api.remove_finalizer(crd_kind, "", name, CRD_FINALIZER)

    def _do_aggregate(self, _: str) -> None:
        kind = self._kind_of(rbac.CLUSTER_ROLES)
        if kind is None:
            return
        with self.api.store.lock:
            for role in self.api.store.items(rbac.CLUSTER_ROLES):
                if not rbac.is_aggregated(role):
                    continue
                rules = rbac.aggregated_rules(self.api.store, role)
                if rules != (role.get("rules") or []):
                    self.api.patch(
                        kind,
                        kind.storage_version,
                        "",
                        role["metadata"]["name"],
                        MERGE,
                        {"rules": rules},
                        _AGGREGATOR,
                    )
