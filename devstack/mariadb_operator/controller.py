"""The mariadb-operator stand-in's controllers: MariaDB health and Database schemas.

Owns, on every cluster it is given, what mariadb-operator does to the objects tenantdb reads and
writes: a `MariaDB` reads Ready while the real server answers a root login (every MariaDB CR maps
to the one real server; the root password comes from `rootPasswordSecretKeyRef`); a `Database`
resolves `mariaDbRef` in its own namespace (or the one named), gets the finalizer
`database.k8s.mariadb.com/finalizer`, and has its schema created with
`CREATE DATABASE IF NOT EXISTS` and its characterSet and collate, then reads Ready (`Created`).
Deleting a Database drops the schema when `cleanupPolicy` is `Delete` (unset means Delete, as in
the real operator) and keeps it with `Skip`, then releases the finalizer.

Schemas this process created are tracked: `cleanup()` (run when the devstack stops) drops those
whose Database last said Delete or nothing, and keeps those under Skip, because an order with
`deletionPolicy: Retain` owns them. A schema that existed before its Database is never dropped at
stop (a Database deleted with Delete still drops it, as the real operator would).

It must never send a name to SQL that is not a plain identifier. Deliberately left out: the
operator's webhook (immutability), every other SQL kind (User, Grant, …), Galera/replication
topology, TLS to the server, and `requeueInterval` beyond re-running the create.
"""

from __future__ import annotations

import base64
import logging
import threading
from collections.abc import Iterable, Mapping

import pymysql

from devstack.kube.client import KubeApi
from devstack.kube.errors import ApiError
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
DATABASES = "databases.k8s.mariadb.com"
FINALIZER = "database.k8s.mariadb.com/finalizer"
MANAGER = "mariadb-operator"
SKIP = "Skip"
HEALTH_INTERVAL = 5.0
_RETRY = 2.0


class MariaDBOperator:
    """MariaDB and Database controllers over a set of clusters, backed by one real server."""

    def __init__(
        self, clusters: Mapping[str, KubeApi], server: sql.Server, *, time_scale: float = 1.0
    ) -> None:
        """Bind to clusters and the real server.

        Args:
            clusters: The clusters to serve, by name.
            server: Where every MariaDB CR really runs (its user is the root user; the password
                comes from each CR's root password Secret).
            time_scale: Simulated seconds per real second for requeueInterval.
        """
        self.clusters = dict(clusters)
        self.server = server
        self.time_scale = time_scale
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
                ref = (db.get("spec") or {}).get("mariaDbRef") or {}
                dm = meta(db)
                ns = ref.get("namespace") or dm.get("namespace")
                if ref.get("name") == m.get("name") and ns == m.get("namespace"):
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
        self, cluster: KubeApi, key: Key, db: Obj, ok: bool, reason: str, message: str
    ) -> None:
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

    def _mariadb_of(self, cluster: KubeApi, db: Obj) -> Obj | None:
        ref = (db.get("spec") or {}).get("mariaDbRef") or {}
        ns = str(ref.get("namespace") or meta(db).get("namespace", ""))
        return get_or_none(cluster, MARIADBS, str(ref.get("name", "")), ns)

    def _reconcile_database(self, key: Key) -> float | None:
        cluster = self.clusters[key.cluster]
        db = get_or_none(cluster, DATABASES, key.name, key.namespace)
        if db is None:
            return None
        if meta(db).get("deletionTimestamp"):
            return self._finalize(cluster, key, db)
        finalizers = list(meta(db).get("finalizers") or [])
        if FINALIZER not in finalizers:
            cluster.patch(
                DATABASES,
                key.name,
                {"metadata": {"finalizers": [*finalizers, FINALIZER]}},
                key.namespace,
                manager=MANAGER,
            )
            return 0.0
        spec = db.get("spec") or {}
        schema = str(spec.get("name") or key.name)
        try:
            sql.check_identifier(schema, "database name")
        except sql.InvalidIdentifierError as exc:
            self._set_ready(cluster, key, db, False, "Failed", str(exc))
            return None
        mariadb = self._mariadb_of(cluster, db)
        if mariadb is None:
            ref = spec.get("mariaDbRef") or {}
            message = f'Error getting MariaDB: MariaDB "{ref.get("name", "")}" not found'
            self._set_ready(cluster, key, db, False, "Failed", message)
            return _RETRY
        if not any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (mariadb.get("status") or {}).get("conditions") or []
        ):
            self._set_ready(cluster, key, db, False, "Failed", "MariaDB not ready")
            return _RETRY
        return self._create(cluster, key, db, mariadb, schema)

    def _create(
        self, cluster: KubeApi, key: Key, db: Obj, mariadb: Obj, schema: str
    ) -> float | None:
        spec = db.get("spec") or {}
        policy = str(spec.get("cleanupPolicy") or "Delete")
        try:
            server = self._root_server(cluster, mariadb)
            created = sql.create_schema(
                server,
                schema,
                str(spec.get("characterSet") or "utf8"),
                str(spec.get("collate") or "utf8_general_ci"),
            )
        except sql.InvalidIdentifierError as exc:
            self._set_ready(cluster, key, db, False, "Failed", str(exc))
            return None
        except (LookupError, pymysql.MySQLError) as exc:
            message = exc.args[0] if isinstance(exc, LookupError) else _sql_error(exc)
            self._set_ready(cluster, key, db, False, "ConnectionFailed", f"Error: {message}")
            return _RETRY
        with self._lock:
            if created or schema in self._created:
                self._created[schema] = policy
        self._set_ready(cluster, key, db, True, "Created", "Created")
        requeue = spec.get("requeueInterval")
        if requeue:
            try:
                return parse_go_duration(str(requeue)) / self.time_scale
            except ValueError:
                return None
        return None

    def _finalize(self, cluster: KubeApi, key: Key, db: Obj) -> float | None:
        finalizers = list(meta(db).get("finalizers") or [])
        if FINALIZER not in finalizers:
            return None
        spec = db.get("spec") or {}
        schema = str(spec.get("name") or key.name)
        policy = str(spec.get("cleanupPolicy") or "Delete")
        mariadb = self._mariadb_of(cluster, db)
        if mariadb is not None and sql.IDENTIFIER.fullmatch(schema):
            if policy == SKIP:
                with self._lock:
                    if schema in self._created:
                        self._created[schema] = SKIP
            else:
                try:
                    sql.drop_schema(self._root_server(cluster, mariadb), schema)
                except (LookupError, pymysql.MySQLError) as exc:
                    message = exc.args[0] if isinstance(exc, LookupError) else _sql_error(exc)
                    self._set_ready(cluster, key, db, False, "ConnectionFailed", str(message))
                    return _RETRY
                with self._lock:
                    self._created.pop(schema, None)
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


def _sql_error(exc: pymysql.MySQLError) -> str:
    """Render a driver error without anything but its code and server message."""
    args = exc.args
    if len(args) >= 2:
        return f"({args[0]}) {args[1]}"
    return type(exc).__name__
