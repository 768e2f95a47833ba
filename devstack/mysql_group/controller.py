"""The Bloodraven stand-in's controller: planned failovers of the MysqlFailoverGroups it serves.

Owns, for each group object bound to a running `MysqlGroup`, what Bloodraven does when the
annotation `bloodraven.shipstream.io/planned-failover=<site>` names a site other than the active
one: `status.plannedFailover` goes Pending → Draining (read_only on the old primary) →
WaitingForLag (MASTER_GTID_WAIT on the target for the old primary's gtid_binlog_pos) →
Promoting (the target stops and forgets its replication and turns writable, every other site
replicates from it; then `status.activeSite` and `status.lastFailoverTarget` name it) → Resuming
→ Succeeded, and the annotation is removed. Each phase holds for `dwell` seconds (divided by the
time scale) so that a client can see the fence. A request for an unknown or dr-only site, the
active site, or a site that is not running ends Failed with a message and touches no server; a
replica that does not catch up within `lag_timeout` ends Failed with the old primary writable
again. Each failover's start and end is a core v1 Event on the group (PlannedFailoverStarted,
PlannedFailoverSucceeded, PlannedFailoverFailed).

The annotation is removed before the terminal status is written, so that a retried reconcile
never reads a finished request as a new one. It drives only the failovers it started: a phase
written by anyone else (a test playing Bloodraven) is left alone, and so are objects it does not
serve. It must
never log a password. Deliberately left out: unplanned failover, Validating and Deferred
(maintenance windows), Dragonfly, in-place restores (`spec.restoreInPlace` is served by the
CRD but nothing acts on it) and status conditions.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pymysql

from devstack.crds.bloodraven import DR_ONLY, RESOURCE
from devstack.kubeclient import ApiError, KubeApi
from devstack.mysql_group.group import MysqlGroup
from devstack.mysql_group.servers import ServerError
from devstack.reconciler import Controller, Key, Obj, get_or_none, meta, record_event

log = logging.getLogger(__name__)

ANNOTATION = "bloodraven.shipstream.io/planned-failover"
MANAGER = "bloodraven"
DEFAULT_DWELL = 0.5
LAG_TIMEOUT = 10.0
STARTED = "PlannedFailoverStarted"
SUCCEEDED = "PlannedFailoverSucceeded"
FAILED = "PlannedFailoverFailed"
Step = Callable[[MysqlGroup, Obj, str], float | None]


@dataclass
class _Run:
    """A failover this controller started: its target, and when the current phase's dwell ends."""

    target: str
    due: float


def _failover(obj: Obj) -> dict[str, Any]:
    value = (obj.get("status") or {}).get("plannedFailover")
    return value if isinstance(value, dict) else {}


def _active(obj: Obj) -> str:
    return str((obj.get("status") or {}).get("activeSite") or "")


def _sql_error(exc: Exception) -> str:
    args = exc.args
    if isinstance(exc, pymysql.MySQLError) and len(args) >= 2:
        return f"({args[0]}) {args[1]}"
    return str(exc) or type(exc).__name__


class BloodravenOperator:
    """Planned failovers of MysqlFailoverGroup objects, each backed by a running MysqlGroup."""

    def __init__(
        self,
        cluster: KubeApi,
        groups: Mapping[tuple[str, str], MysqlGroup],
        *,
        dwell: float = DEFAULT_DWELL,
        lag_timeout: float = LAG_TIMEOUT,
    ) -> None:
        """Bind to a cluster and the groups served there.

        Args:
            cluster: The cluster the MysqlFailoverGroup objects live on.
            groups: The running group behind each served object, by (namespace, name).
            dwell: Seconds each failover phase holds.
            lag_timeout: Real seconds the target may take to apply the old primary's binlog.
        """
        self.cluster = cluster
        self.groups = dict(groups)
        self.dwell = dwell
        self.lag_timeout = lag_timeout
        self._runs: dict[Key, _Run] = {}
        self._runs_lock = threading.Lock()
        self._steps: dict[str, Step] = {
            "Pending": self._drain,
            "Draining": self._wait_for_lag,
            "WaitingForLag": self._promote,
            "Promoting": self._resume,
            "Resuming": self._succeed,
        }
        self.failovers = Controller("bloodraven-failover", self._reconcile)
        self.failovers.watch(cluster, RESOURCE, self._keys)

    @property
    def phase_seconds(self) -> float:
        """Real seconds each phase holds."""
        return self.dwell

    @property
    def controllers(self) -> tuple[Controller, ...]:
        """The controllers this stand-in runs."""
        return (self.failovers,)

    def start(self) -> None:
        """Bind each group's reset to its object, then start the controller."""
        for (namespace, name), group in self.groups.items():
            group.bind(self._reset_hook(namespace, name))
        self.failovers.start()

    def stop(self) -> None:
        """Stop the controller and unbind the groups."""
        self.failovers.stop()
        self.unbind()

    def unbind(self) -> None:
        """Forget the reset hooks this controller bound."""
        for group in self.groups.values():
            group.bind(None)

    def _reset_hook(self, namespace: str, name: str) -> Callable[[], None]:
        def hook() -> None:
            self.reset_object(namespace, name)

        return hook

    def reset_object(self, namespace: str, name: str) -> None:
        """Clear a served object's failover state: no annotation, no plannedFailover, no last
        target, and activeSite the group's primary."""
        group = self.groups[(namespace, name)]
        with self._runs_lock:
            self._runs.pop(Key(self.cluster.name, namespace, name), None)
        obj = get_or_none(self.cluster, RESOURCE, name, namespace)
        if obj is None:
            return
        if ANNOTATION in (meta(obj).get("annotations") or {}):
            self._remove_annotation(obj)
        self._patch_status(
            obj,
            {"activeSite": group.primary, "plannedFailover": None, "lastFailoverTarget": None},
        )

    # ------------------------------------------------------------ mapping

    def _keys(self, event: str, obj: Obj) -> Iterable[Key]:
        m = meta(obj)
        pair = (str(m.get("namespace", "")), str(m.get("name", "")))
        return [Key(self.cluster.name, *pair)] if pair in self.groups else []

    # ------------------------------------------------------------ reconcile

    def _reconcile(self, key: Key) -> float | None:
        group = self.groups.get((key.namespace, key.name))
        if group is None:
            return None
        with group.lock:
            obj = get_or_none(self.cluster, RESOURCE, key.name, key.namespace)
            if obj is None or meta(obj).get("deletionTimestamp"):
                return None
            failover = _failover(obj)
            step = self._steps.get(str(failover.get("phase") or ""))
            target = str(failover.get("targetSite") or "")
            if step is None:
                requested = (meta(obj).get("annotations") or {}).get(ANNOTATION)
                return self._begin(group, obj, str(requested)) if requested else None
            with self._runs_lock:
                run = self._runs.get(key)
            if run is None or run.target != target:
                return None
            wait = run.due - time.monotonic()
            if wait > 0:
                return wait
            try:
                again = step(group, obj, target)
            except (pymysql.MySQLError, ServerError, OSError) as exc:
                self._abort(group, obj, target, step in (self._drain, self._wait_for_lag), exc)
                return None
            if again is not None:
                run.due = time.monotonic() + again
            return again

    def _abort(
        self, group: MysqlGroup, obj: Obj, target: str, unfence: bool, exc: Exception
    ) -> None:
        source = _active(obj)
        message = f"planned failover to {target} failed: {_sql_error(exc)}"
        if unfence and source:
            try:
                group.fence(source, on=False)
                message += f"; {source} is writable again"
            except (pymysql.MySQLError, OSError):
                message += f"; {source} could not be made writable again"
        self._fail(obj, target, message)

    def _refusal(self, group: MysqlGroup, obj: Obj, source: str, target: str) -> str | None:
        name = meta(obj).get("name", "")
        sites = {
            str(s.get("name")): s
            for s in (obj.get("spec") or {}).get("sites") or []
            if isinstance(s, dict)
        }
        if target not in sites or target not in group.servers:
            return f'site "{target}" is not a site of MysqlFailoverGroup "{name}"'
        if sites[target].get("role") == DR_ONLY:
            return f'site "{target}" is {DR_ONLY} and cannot become the primary'
        if target == source:
            return f'site "{target}" is already the active site'
        if source != group.primary:
            return f'status.activeSite "{source}" is not the primary "{group.primary}"'
        for site in (source, target):
            if not group.is_running(site):
                return f'site "{site}" is not running'
        return None

    def _begin(self, group: MysqlGroup, obj: Obj, target: str) -> float | None:
        source = _active(obj) or group.primary
        refused = self._refusal(group, obj, source, target)
        if refused is not None:
            self._fail(obj, target, f"planned failover refused: {refused}")
            return None
        with self._runs_lock:
            self._runs[self._key(obj)] = _Run(target, time.monotonic() + self.phase_seconds)
        self._set_phase(obj, "Pending", target, f"planned failover from {source} to {target}")
        self._event(obj, STARTED, f"planned failover from {source} to {target} started")
        return self.phase_seconds

    # ------------------------------------------------------------ the phases

    def _drain(self, group: MysqlGroup, obj: Obj, target: str) -> float | None:
        source = _active(obj)
        group.fence(source)
        self._set_phase(obj, "Draining", target, f"{source} is read-only; draining writes")
        return self.phase_seconds

    def _wait_for_lag(self, group: MysqlGroup, obj: Obj, target: str) -> float | None:
        source = _active(obj)
        position = group.position(source)
        self._set_phase(
            obj, "WaitingForLag", target, f"waiting for {target} to apply {source} {position}"
        )
        if not group.wait_for(target, position, self.lag_timeout):
            group.fence(source, on=False)
            self._fail(
                obj,
                target,
                f"{target} did not apply {source}'s binlog within {self.lag_timeout:g} s;"
                f" {source} is writable again",
            )
            return None
        return self.phase_seconds

    def _promote(self, group: MysqlGroup, obj: Obj, target: str) -> float | None:
        source = _active(obj)
        self._set_phase(obj, "Promoting", target, f"promoting {target}")
        group.promote(target)
        for site in group.sites:
            if site != target and (site == source or group.is_running(site)):
                group.repoint(site, target)
        self._patch_status(obj, {"activeSite": target, "lastFailoverTarget": target})
        return self.phase_seconds

    def _resume(self, group: MysqlGroup, obj: Obj, target: str) -> float | None:
        self._set_phase(obj, "Resuming", target, f"{target} takes writes; resuming")
        return self.phase_seconds

    def _succeed(self, group: MysqlGroup, obj: Obj, target: str) -> float | None:
        self._forget(obj)
        self._remove_annotation(obj, only=target)
        message = f"planned failover to {target} succeeded"
        self._set_phase(obj, "Succeeded", target, message)
        self._event(obj, SUCCEEDED, message)
        return None

    def _fail(self, obj: Obj, target: str, message: str) -> None:
        self._forget(obj)
        self._remove_annotation(obj, only=target)
        self._set_phase(obj, "Failed", target, message)
        self._event(obj, FAILED, message, warning=True)

    # ------------------------------------------------------------ writes

    def _forget(self, obj: Obj) -> None:
        with self._runs_lock:
            self._runs.pop(self._key(obj), None)

    def _key(self, obj: Obj) -> Key:
        m = meta(obj)
        return Key(self.cluster.name, str(m.get("namespace", "")), str(m.get("name", "")))

    def _patch_status(self, obj: Obj, status: dict[str, Any]) -> None:
        m = meta(obj)
        self.cluster.patch(
            RESOURCE,
            str(m.get("name", "")),
            {"status": status},
            str(m.get("namespace", "")),
            subresource="status",
            manager=MANAGER,
        )

    def _set_phase(self, obj: Obj, phase: str, target: str, message: str) -> None:
        self._patch_status(
            obj, {"plannedFailover": {"phase": phase, "targetSite": target, "message": message}}
        )

    def _remove_annotation(self, obj: Obj, only: str | None = None) -> None:
        m = meta(obj)
        current = (m.get("annotations") or {}).get(ANNOTATION)
        if current is None or (only is not None and current != only):
            return
        self.cluster.patch(
            RESOURCE,
            str(m.get("name", "")),
            {"metadata": {"annotations": {ANNOTATION: None}}},
            str(m.get("namespace", "")),
            manager=MANAGER,
        )

    def _event(self, obj: Obj, reason: str, message: str, *, warning: bool = False) -> None:
        try:
            record_event(self.cluster, obj, reason, message, component=MANAGER, warning=warning)
        except ApiError as exc:
            log.warning("could not record event %s: %s", reason, exc.code)
