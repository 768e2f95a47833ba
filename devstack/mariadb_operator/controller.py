"""The mariadb-operator stand-in's controllers: MariaDB health and Database schemas.

Owns, on every cluster it is given, what upstream mariadb-operator does to the objects tenantdb
reads and writes: a `MariaDB` reads Ready while the real server answers a root login (every MariaDB
CR maps to the one real server; the root password comes from `rootPasswordSecretKeyRef`).

A `Database` resolves `mariaDbRef` (kind `MariaDB` unless it says `ExternalMariaDB`) in its own
namespace or the one named; while a MariaDB does not read Ready it is looked at again every second
(whatever `waitForIt` says, as upstream). It then logs in and creates its schema (`spec.name`, else
its own name) with `CREATE DATABASE … CHARACTER SET … COLLATE …` unless the schema exists, in which
case nothing is checked or changed. After the first successful create it gets the finalizer
`database.k8s.mariadb.com/finalizer`, and it reads Ready (`Created`, `Created`); a failure reads
Ready False (`Failed`: `MariaDB not found`, `Error connecting to MariaDB: …`, `Error creating
<name>: …`). A created Database comes back after `requeueInterval` (10 h without one) plus up to
1 h at random; a failed one after `retryInterval`, or at once with the controller's back-off
without one (a missing MariaDB always backs off). Durations are simulated seconds (`time_scale`).

Deleting a Database that has the finalizer releases it without SQL when its MariaDB is gone or
being deleted; otherwise it waits for the MariaDB as above, logs in, drops the schema with
`DROP DATABASE IF EXISTS` unless `cleanupPolicy` is `Skip` (unset means Delete), and releases the
finalizer; a failure there backs off.

Schemas this process created are tracked: `cleanup()` (run when the devstack stops) drops those
whose Database last said Delete or nothing, and keeps those under Skip, because an order with
`deletionPolicy: Retain` owns them. A schema that existed before its Database is never dropped at
stop (a Database deleted with Delete still drops it, as the real operator would).

It must never send a name to SQL that is not a plain identifier (such a Database reads Failed with
`Error creating <name>: invalid database name …` and is not retried). Deliberately left out: the
operator's webhook (the CRD's CEL rules keep its immutable fields), ExternalMariaDB (the devstack
serves none, so such a reference is never found), StatefulSet health (the MariaDB's Ready stands
in for it), binlog replay, every other SQL kind (User, Grant, …), Galera/replication topology,
and TLS to the server.
"""

from __future__ import annotations

import base64
import logging
import random
import threading
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import pymysql

from devstack.kubeclient import ApiError, KubeApi
from devstack.mariadb_operator import sql
from devstack.reconciler import (
    Controller,
    Key,
    Mapper,
    Obj,
    condition,
    get_or_none,
    meta,
    parse_go_duration,
    stop_all,
)

log = logging.getLogger(__name__)

MARIADBS = "mariadbs.k8s.mariadb.com"
EXTERNAL_MARIADBS = "externalmariadbs.k8s.mariadb.com"
DATABASES = "databases.k8s.mariadb.com"
FINALIZER = "database.k8s.mariadb.com/finalizer"
MANAGER = "mariadb-operator"
MARIADB = "MariaDB"
EXTERNAL_MARIADB = "ExternalMariaDB"
SKIP = "Skip"
DELETE = "Delete"
DEFAULT_CHARSET = "utf8"
DEFAULT_COLLATE = "utf8_general_ci"
HEALTH_INTERVAL = 5.0
REQUEUE_INTERVAL = 10 * 3600.0
"""Seconds a created Database waits before it is reconciled again, without `requeueInterval`."""
REQUEUE_MAX_OFFSET = 3600.0
"""The most random seconds added to every requeue interval, so Databases spread out."""
WAIT_FOR_MARIADB = 1.0
"""Seconds between looks at a MariaDB that does not read Ready (real seconds, not scaled)."""

Outcome = Literal["created", "not-found", "connect", "create"]
"""What a Database's reconcile came to, as its Ready condition tells it."""
FinalizeStep = Literal["none", "release", "wait", "drop", "keep"]
"""What deleting a Database does next: nothing, release the finalizer without SQL, wait for the
MariaDB, or log in and then drop or keep the schema before releasing."""


class RetryError(Exception):
    """A Database's reconcile failed and has no `retryInterval`: the controller backs off."""


def mariadb_kind(spec: Obj) -> str:
    """The kind a Database's `mariaDbRef` points at: ExternalMariaDB if it says so, else MariaDB."""
    ref = spec.get("mariaDbRef") or {}
    return EXTERNAL_MARIADB if ref.get("kind") == EXTERNAL_MARIADB else MARIADB


def mariadb_resource(spec: Obj) -> str:
    """The resource a Database's `mariaDbRef` is read from."""
    return EXTERNAL_MARIADBS if mariadb_kind(spec) == EXTERNAL_MARIADB else MARIADBS


def schema_of(name: str, spec: Obj) -> str:
    """The schema a Database stands for: `spec.name`, else the Database's own name."""
    return str(spec.get("name") or name)


def charset_and_collate(spec: Obj) -> tuple[str, str]:
    """A Database's character set and collation (the CRD's defaults when absent)."""
    charset = spec.get("characterSet")
    collate = spec.get("collate")
    return (
        DEFAULT_CHARSET if charset is None else str(charset),
        DEFAULT_COLLATE if collate is None else str(collate),
    )


def cleanup_policy(spec: Obj) -> str:
    """A Database's `cleanupPolicy`; unset means Delete."""
    return str(spec.get("cleanupPolicy") or DELETE)


def waits_for(spec: Obj, mariadb: Obj) -> bool:
    """Whether a Database waits for its MariaDB: one of kind MariaDB that does not read Ready."""
    if mariadb_kind(spec) != MARIADB:
        return False
    conditions = (mariadb.get("status") or {}).get("conditions") or []
    return not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def ready_status(outcome: Outcome, name: str, detail: str = "") -> tuple[bool, str, str]:
    """The Ready condition's status, reason and message for a reconcile's outcome.

    Args:
        outcome: What the reconcile came to.
        name: The Database's own name.
        detail: The kind not found, or the error connecting or creating.
    """
    if outcome == "created":
        return True, "Created", "Created"
    messages = {
        "not-found": f"{detail} not found",
        "connect": f"Error connecting to MariaDB: {detail}",
        "create": f"Error creating {name}: {detail}",
    }
    return False, "Failed", messages[outcome]


def _duration(value: Any) -> float | None:
    """A Go duration in seconds; None when absent or unreadable."""
    if value is None or value == "":
        return None
    try:
        return parse_go_duration(str(value))
    except ValueError:
        return None


def requeue_after(spec: Obj, fraction: float) -> float:
    """Seconds until a created Database is reconciled again: `requeueInterval` (10 h without
    one) plus `fraction` (0 to 1) of the 1 h random offset."""
    interval = _duration(spec.get("requeueInterval"))
    return (REQUEUE_INTERVAL if interval is None else interval) + fraction * REQUEUE_MAX_OFFSET


def retry_after(spec: Obj) -> float | None:
    """Seconds until a failed Database is tried again: `retryInterval`; None (the controller's
    back-off) without one (a zero or unreadable one counts as none)."""
    return _duration(spec.get("retryInterval")) or None


def finalize_step(db: Obj, mariadb: Obj | None) -> FinalizeStep:
    """What deleting a Database does next, given its MariaDB (None when it is gone)."""
    if FINALIZER not in (meta(db).get("finalizers") or []):
        return "none"
    if mariadb is None or meta(mariadb).get("deletionTimestamp"):
        return "release"
    spec = db.get("spec") or {}
    if waits_for(spec, mariadb):
        return "wait"
    return "keep" if cleanup_policy(spec) == SKIP else "drop"


class MariaDBOperator:
    """MariaDB and Database controllers over a set of clusters, backed by one real server."""

    def __init__(self, clusters: Mapping[str, KubeApi], server: sql.Server) -> None:
        """Bind to clusters and the real server.

        Args:
            clusters: The clusters to serve, by name.
            server: Where every MariaDB CR really runs (its user is the root user; the password
                comes from each CR's root password Secret).
        """
        self.clusters = dict(clusters)
        self.server = server
        self._lock = threading.Lock()
        self._created: dict[str, str] = {}
        self.mariadbs = Controller("mariadb-operator-mariadb", self._reconcile_mariadb)
        self.databases = Controller("mariadb-operator-database", self._reconcile_database)
        for name, cluster in self.clusters.items():
            self.mariadbs.watch(cluster, MARIADBS, self._keys(name))
            self.databases.watch(cluster, DATABASES, self._keys(name))
            self.databases.watch(cluster, MARIADBS, self._databases_of_mariadb(name))

    def start(self) -> None:
        """Start both controllers."""
        self.mariadbs.start()
        self.databases.start()

    @property
    def controllers(self) -> tuple[Controller, ...]:
        """The controllers this stand-in runs."""
        return (self.mariadbs, self.databases)

    def stop(self) -> None:
        """Stop both controllers."""
        stop_all(self.controllers)

    def created_schemas(self) -> dict[str, str]:
        """Schemas this process created, with the cleanupPolicy their Database last carried."""
        with self._lock:
            return dict(self._created)

    def cleanup(self) -> list[str]:
        """Drop every schema this process created unless its Database said Skip.

        Returns:
            The schemas that could not be dropped (logged as warnings too).
        """
        failed = []
        for schema, policy in self.created_schemas().items():
            if policy == SKIP:
                continue
            try:
                sql.drop_schema(self.server, schema)
                with self._lock:
                    self._created.pop(schema, None)
            except (pymysql.MySQLError, sql.InvalidIdentifierError) as exc:
                log.warning("could not drop schema %s at stop: %s", schema, type(exc).__name__)
                failed.append(schema)
        return failed

    # ------------------------------------------------------------ mapping

    @staticmethod
    def _keys(cluster: str) -> Mapper:
        def mapper(event: str, obj: Obj) -> Iterable[Key]:
            m = meta(obj)
            return [Key(cluster, str(m.get("namespace", "")), str(m.get("name", "")))]

        return mapper

    def _databases_of_mariadb(self, cluster: str) -> Mapper:
        def mapper(event: str, obj: Obj) -> Iterable[Key]:
            m = meta(obj)
            keys = []
            for db in self.clusters[cluster].list(DATABASES):
                spec = db.get("spec") or {}
                ref = spec.get("mariaDbRef") or {}
                dm = meta(db)
                ns = ref.get("namespace") or dm.get("namespace")
                same = ref.get("name") == m.get("name") and ns == m.get("namespace")
                if same and mariadb_kind(spec) == MARIADB:
                    keys.append(Key(cluster, str(dm["namespace"]), str(dm["name"])))
            return keys

        return mapper

    # ------------------------------------------------------------ MariaDB

    def _root_server(self, cluster: KubeApi, mariadb: Obj) -> sql.Server:
        """The real server with the CR's root password.

        Raises:
            LookupError: The root password Secret or its key is missing.
        """
        ref = (mariadb.get("spec") or {}).get("rootPasswordSecretKeyRef") or {}
        if not ref.get("name"):
            return self.server
        ns = str(meta(mariadb).get("namespace", ""))
        secret = get_or_none(cluster, "secrets", str(ref["name"]), ns)
        key = str(ref.get("key") or "password")
        data = (secret or {}).get("data") or {}
        if secret is None or key not in data:
            raise LookupError(f'root password Secret "{ref["name"]}" (key {key}) not found')
        password = base64.b64decode(str(data[key])).decode("utf-8")
        return sql.Server(self.server.host, self.server.port, self.server.user, password)

    def _reconcile_mariadb(self, key: Key) -> float | None:
        cluster = self.clusters[key.cluster]
        mariadb = get_or_none(cluster, MARIADBS, key.name, key.namespace)
        if mariadb is None or meta(mariadb).get("deletionTimestamp"):
            return None
        previous = (mariadb.get("status") or {}).get("conditions") or []
        try:
            sql.ping(self._root_server(cluster, mariadb))
            ready = condition("Ready", True, "StatefulSetReady", "Running", previous)
        except LookupError as exc:
            ready = condition("Ready", False, "StatefulSetNotReady", f"Not ready: {exc}", previous)
        except pymysql.MySQLError as exc:
            ready = condition(
                "Ready", False, "StatefulSetNotReady", f"Not ready: {_sql_error(exc)}", previous
            )
        if previous != [ready]:
            cluster.patch(
                MARIADBS,
                key.name,
                {"status": {"conditions": [ready], "currentPrimary": f"{key.name}-0"}},
                key.namespace,
                subresource="status",
                manager=MANAGER,
            )
        return HEALTH_INTERVAL

    # ------------------------------------------------------------ Database

    def _set_ready(
        self, cluster: KubeApi, key: Key, db: Obj, outcome: Outcome, detail: str = ""
    ) -> None:
        ok, reason, message = ready_status(outcome, key.name, detail)
        previous = (db.get("status") or {}).get("conditions") or []
        ready = condition("Ready", ok, reason, message, previous)
        if previous == [ready]:
            return
        try:
            cluster.patch(
                DATABASES,
                key.name,
                {"status": {"conditions": [ready]}},
                key.namespace,
                subresource="status",
                manager=MANAGER,
            )
        except ApiError as exc:
            if exc.code != 404:
                raise

    def _failed(self, cluster: KubeApi, key: Key, db: Obj, outcome: Outcome, detail: str) -> float:
        """Say why a reconcile failed; come back after `retryInterval`, else back off."""
        self._set_ready(cluster, key, db, outcome, detail)
        retry = retry_after(db.get("spec") or {})
        if retry is None:
            raise RetryError(ready_status(outcome, key.name, detail)[2])
        return retry

    def _mariadb_of(self, cluster: KubeApi, db: Obj) -> Obj | None:
        spec = db.get("spec") or {}
        ref = spec.get("mariaDbRef") or {}
        ns = str(ref.get("namespace") or meta(db).get("namespace", ""))
        return get_or_none(cluster, mariadb_resource(spec), str(ref.get("name", "")), ns)

    def _reconcile_database(self, key: Key) -> float | None:
        cluster = self.clusters[key.cluster]
        db = get_or_none(cluster, DATABASES, key.name, key.namespace)
        if db is None:
            return None
        if meta(db).get("deletionTimestamp"):
            return self._finalize(cluster, key, db)
        spec = db.get("spec") or {}
        mariadb = self._mariadb_of(cluster, db)
        if mariadb is None:
            self._set_ready(cluster, key, db, "not-found", mariadb_kind(spec))
            raise RetryError(ready_status("not-found", key.name, mariadb_kind(spec))[2])
        if waits_for(spec, mariadb):
            return WAIT_FOR_MARIADB
        try:
            server = self._root_server(cluster, mariadb)
            sql.ping(server)
        except (LookupError, pymysql.MySQLError) as exc:
            return self._failed(cluster, key, db, "connect", _error_text(exc))
        return self._create(cluster, key, db, server)

    def _create(self, cluster: KubeApi, key: Key, db: Obj, server: sql.Server) -> float | None:
        spec = db.get("spec") or {}
        schema = schema_of(key.name, spec)
        try:
            created = sql.create_schema(server, schema, *charset_and_collate(spec))
        except sql.InvalidIdentifierError as exc:
            self._set_ready(cluster, key, db, "create", str(exc))
            return None
        except pymysql.MySQLError as exc:
            return self._failed(cluster, key, db, "create", _sql_error(exc))
        with self._lock:
            if created or schema in self._created:
                self._created[schema] = cleanup_policy(spec)
        finalizers = list(meta(db).get("finalizers") or [])
        if FINALIZER not in finalizers:
            cluster.patch(
                DATABASES,
                key.name,
                {"metadata": {"finalizers": [*finalizers, FINALIZER]}},
                key.namespace,
                manager=MANAGER,
            )
        self._set_ready(cluster, key, db, "created")
        fraction = random.random()  # noqa: S311 - spread, not secrecy
        return requeue_after(spec, fraction)

    def _finalize(self, cluster: KubeApi, key: Key, db: Obj) -> float | None:
        finalizers = list(meta(db).get("finalizers") or [])
        if FINALIZER not in finalizers:
            return None
        mariadb = self._mariadb_of(cluster, db)
        step = finalize_step(db, mariadb)
        if step == "wait":
            return WAIT_FOR_MARIADB
        if mariadb is not None and step in ("drop", "keep"):
            self._clean_up_schema(cluster, key, db, mariadb, step)
        remaining = [f for f in finalizers if f != FINALIZER]
        try:
            cluster.patch(
                DATABASES,
                key.name,
                {"metadata": {"finalizers": remaining or None}},
                key.namespace,
                manager=MANAGER,
            )
        except ApiError as exc:
            if exc.code != 404:
                raise
        return None

    def _clean_up_schema(
        self, cluster: KubeApi, key: Key, db: Obj, mariadb: Obj, step: FinalizeStep
    ) -> None:
        """Log in, and drop the schema under Delete (keep it under Skip).

        Raises:
            RetryError: The login or the drop failed.
        """
        schema = schema_of(key.name, db.get("spec") or {})
        try:
            server = self._root_server(cluster, mariadb)
            if step == "drop" and sql.IDENTIFIER.fullmatch(schema):
                sql.drop_schema(server, schema)
            else:
                sql.ping(server)
        except (LookupError, pymysql.MySQLError) as exc:
            raise RetryError(f"error finalizing {key.name}: {_error_text(exc)}") from exc
        with self._lock:
            if step == "drop":
                self._created.pop(schema, None)
            elif schema in self._created:
                self._created[schema] = SKIP


def _error_text(exc: LookupError | pymysql.MySQLError) -> str:
    """A missing root password's message, or a driver error's code and server message."""
    return str(exc.args[0]) if isinstance(exc, LookupError) else _sql_error(exc)


def _sql_error(exc: pymysql.MySQLError) -> str:
    """Render a driver error without anything but its code and server message."""
    args = exc.args
    if len(args) >= 2:
        return f"({args[0]}) {args[1]}"
    return type(exc).__name__
