"""The logical core of the OpenBao stand-in: tokens, leases, policies, mounts and routing.

Owns the token store (TTLs, parents, the root token), the lease table (expiry on the scaled clock,
revocation through the database engine, retries when MariaDB refuses), the ACL check in front of
every authenticated path, the mount tables of the Kubernetes auth method and the database engine,
and the mapping of an API request to its handler. Knows nothing about HTTP.

Must never let a request past the ACL that its token's policies do not allow (the root policy
aside), never keep a lease whose user it failed to create, and never forget a lease whose user it
failed to drop: a failed revocation stays queued and is retried.
"""

from __future__ import annotations

import logging
import re
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pymysql

from devstack.openbao.api import (
    JSON,
    ApiError,
    Reply,
    Request,
    bad_request,
    base62,
    not_found,
    permission_denied,
    unsupported_path,
)
from devstack.openbao.clock import ScaledClock, parse_duration, rfc3339
from devstack.openbao.database import DatabaseMount, LeaseSecret, MariaDBEndpoint
from devstack.openbao.expiry import Children, Deadlines, LeaseTable
from devstack.openbao.kubeauth import DEFAULT_TOKEN_TTL, KubernetesAuthMount, TokenReviewer
from devstack.openbao.policy import (
    Identity,
    Policy,
    PolicyError,
    granted_capabilities,
    parse_policy,
)

log = logging.getLogger(__name__)

VERSION = "2.2.0-devstack"
MOUNT_MAX_TTL = DEFAULT_TOKEN_TTL
_RETRY_REAL_SECONDS = 2.0
_MAX_WAIT_REAL_SECONDS = 5.0

DEFAULT_POLICY = """
path "auth/token/lookup-self" { capabilities = ["read"] }
path "auth/token/renew-self" { capabilities = ["update"] }
path "auth/token/revoke-self" { capabilities = ["update"] }
path "sys/capabilities-self" { capabilities = ["update"] }
path "sys/leases/renew" { capabilities = ["update"] }
path "sys/leases/lookup" { capabilities = ["update"] }
"""


@dataclass
class Token:
    """A service token (the root token has no expiry)."""

    id: str
    accessor: str
    policies: tuple[str, ...]
    display_name: str
    path: str
    issue_time: float
    ttl: int
    expire_time: float | None
    max_expire: float | None
    parent: str | None
    entity_id: str = ""
    identity: Identity | None = None
    meta: dict[str, str] = field(default_factory=dict)

    @property
    def is_root(self) -> bool:
        """Whether the token carries the root policy."""
        return "root" in self.policies

    def remaining(self, now: float) -> int:
        """Return the whole seconds left (0 for a token that never expires)."""
        return 0 if self.expire_time is None else max(0, int(self.expire_time - now))


@dataclass
class Lease:
    """A dynamic secret's lease."""

    id: str
    issue_time: float
    expire_time: float
    max_expire: float
    token_id: str
    secret: LeaseSecret
    last_renewal: float | None = None
    retry_at: float | None = None

    def lookup_data(self, now: float) -> JSON:
        """Return what `sys/leases/lookup` shows."""
        return {
            "id": self.id,
            "issue_time": rfc3339(self.issue_time),
            "expire_time": rfc3339(self.expire_time),
            "last_renewal": rfc3339(self.last_renewal) if self.last_renewal else None,
            "renewable": True,
            "ttl": max(0, int(self.expire_time - now)),
        }


@dataclass(frozen=True)
class Call:
    """One routed request as a handler sees it."""

    request: Request
    operation: str
    match: re.Match[str]
    token: Token | None
    mount: Any = None

    @property
    def data(self) -> Mapping[str, Any]:
        """The request body merged with the query."""
        return self.request.data

    def arg(self, name: str) -> str:
        """Return a named group of the route's pattern."""
        return self.match.groupdict().get(name) or ""


Handler = Callable[[Call], Reply]


@dataclass(frozen=True)
class Route:
    """A path pattern of one backend, relative to its mount."""

    pattern: re.Pattern[str]
    operations: frozenset[str]
    handler: Handler
    unauthenticated: bool = False
    sudo: bool = False
    exists: Callable[[Call], bool] | None = None


def _route(
    pattern: str,
    operations: str,
    handler: Handler,
    *,
    unauthenticated: bool = False,
    sudo: bool = False,
    exists: Callable[[Call], bool] | None = None,
) -> Route:
    return Route(
        pattern=re.compile(pattern),
        operations=frozenset(operations.split()),
        handler=handler,
        unauthenticated=unauthenticated,
        sudo=sudo,
        exists=exists,
    )


_DISPLAY_UNSAFE = re.compile(r"[^A-Za-z0-9-]")


def _display_name(name: str) -> str:
    # Display names end up inside SQL usernames, so anything but letters, digits and dashes goes.
    return _DISPLAY_UNSAFE.sub("-", name)


def _accessor(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(4)}"


class OpenBaoCore:
    """The stand-in's state and request handling, thread-safe behind one lock."""

    def __init__(
        self,
        clock: ScaledClock,
        token_reviewer: TokenReviewer | None,
        mariadb: MariaDBEndpoint | None,
        kubernetes_mounts: Iterable[str] = (),
        database_mounts: Iterable[str] = (),
    ) -> None:
        """Build an empty server state with a root token.

        Args:
            clock: The scaled clock all TTLs run on.
            token_reviewer: Reviews JWTs for every Kubernetes auth mount; None asks the API
                server named in each mount's `config`.
            mariadb: Where database connections really dial; None dials their URLs.
            kubernetes_mounts: Kubernetes auth mounts to enable at start.
            database_mounts: Database engine mounts to enable at start.
        """
        self.clock = clock
        self._reviewer = token_reviewer
        self._endpoint = mariadb
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._reaper: threading.Thread | None = None
        self._tokens: dict[str, Token] = {}
        self._children = Children()
        self._leases: LeaseTable[Lease] = LeaseTable()
        self._expiries = Deadlines()
        """Token and lease expiries, on the scaled clock."""
        self._retries = Deadlines()
        """Retries of failed revocations, on the monotonic clock."""
        self._entities: dict[tuple[str, str], str] = {}
        self._policies: dict[str, Policy] = {"default": parse_policy("default", DEFAULT_POLICY)}
        self._kube_mounts: dict[str, KubernetesAuthMount] = {}
        self._db_mounts: dict[str, DatabaseMount] = {}
        self._token_accessor = _accessor("auth_token")
        self._mount_uuids: dict[str, str] = {}
        for path in kubernetes_mounts:
            self._enable_kubernetes(path.strip("/"))
        for path in database_mounts:
            self._enable_database(path.strip("/"))
        self.root_token = self._issue_token(
            policies=("root",),
            display_name="root",
            path="auth/token/root",
            ttl=0,
            max_ttl=0,
            parent=None,
        ).id
        self._system_routes = self._build_system_routes()
        self._token_routes = self._build_token_routes()
        self._kube_routes = self._build_kube_routes()
        self._db_routes = self._build_db_routes()

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the thread that ends expired tokens and leases."""
        self._stopping.clear()
        self._reaper = threading.Thread(target=self._reap_loop, name="openbao-expiry", daemon=True)
        self._reaper.start()

    def stop(self) -> list[str]:
        """Stop the expiry thread and revoke every lease still held.

        Returns:
            The ids of leases whose users could not be dropped.
        """
        self._stopping.set()
        self._wake.set()
        if self._reaper is not None:
            self._reaper.join(timeout=30)
        with self._lock:
            leases = self._leases.clear()
            self._expiries.clear()
            self._retries.clear()
        close = getattr(self._reviewer, "close", None)
        if close is not None:
            close()
        failed = [lease.id for lease in leases if not self._drop_user(lease)]
        for lease_id in failed:
            log.warning("lease %s: its SQL user could not be dropped at shutdown", lease_id)
        return failed

    def _reap_loop(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            wait = self._reap_once()
            self._wake.wait(wait)

    def _reap_once(self) -> float:
        """End what has expired and retry failed revocations; return the real seconds to wait.

        Only what is due is looked at (`Deadlines`); an entry whose object has gone, or was
        renewed since, is skipped.
        """
        now = self.clock.now()
        mono = time.monotonic()
        due: dict[str, Lease] = {}
        with self._lock:
            # A token revoked here records its leases as due now: they are popped in this loop.
            for kind, ident in self._expiries.due(now):
                if kind == "token":
                    token = self._tokens.get(ident)
                    if token and token.expire_time is not None and token.expire_time <= now:
                        self._revoke_token_locked(ident)
                    continue
                lease = self._leases.get(ident)
                if lease is not None and lease.expire_time <= now:
                    due[ident] = lease
            for _, ident in self._retries.due(mono):
                lease = self._leases.get(ident)
                if lease is not None and lease.retry_at is not None and lease.retry_at <= mono:
                    due[ident] = lease
            for ident in due:
                self._leases.pop(ident)
        self._revoke_leases(due.values())
        with self._lock:
            expiry, retry = self._expiries.next(), self._retries.next()
        waits = [_MAX_WAIT_REAL_SECONDS]
        if expiry is not None:
            waits.append(self.clock.real_seconds(expiry - self.clock.now()))
        if retry is not None:
            waits.append(max(0.0, retry - time.monotonic()))
        return min(waits)

    # --- request handling ------------------------------------------------------------------------

    def handle(self, request: Request) -> Reply:
        """Authenticate, authorise and serve one request.

        Raises:
            ApiError: The request failed; the error carries OpenBao's status and messages.
        """
        routes, mount, relative = self._backend_for(request.path)
        route, match = self._match(routes, relative)
        token = None
        if route is None or not route.unauthenticated:
            token = self._authenticate(request.token)
        operation = request.operation
        if (
            route is not None
            and operation not in route.operations
            and not (operation == "write" and route.operations & {"create", "update"})
        ):
            raise ApiError(405, "unsupported operation")
        if operation == "write":
            operation = "update"
            if route is not None and route.exists is not None and match is not None:
                probe = Call(request, operation, match, token, mount)
                with self._lock:
                    operation = "update" if route.exists(probe) else "create"
        if token is not None:
            # LIST requests are authorised on the directory form of the path, as in OpenBao.
            acl_path = request.path + "/" if operation == "list" else request.path
            self._authorize(token, acl_path, operation, route is not None and route.sudo)
        if route is None or match is None:
            raise unsupported_path(request.path)
        return route.handler(Call(request, operation, match, token, mount))

    def _backend_for(self, path: str) -> tuple[list[Route], Any, str]:
        if path.startswith("sys/") or path == "sys":
            return self._system_routes, None, path.removeprefix("sys").lstrip("/")
        if path.startswith("auth/token/"):
            return self._token_routes, None, path.removeprefix("auth/token/")
        with self._lock:
            for prefix, mounts, routes in (
                ("auth/", self._kube_mounts, self._kube_routes),
                ("", self._db_mounts, self._db_routes),
            ):
                if not path.startswith(prefix):
                    continue
                rest = path.removeprefix(prefix)
                for mount_path in sorted(mounts, key=len, reverse=True):
                    if rest == mount_path or rest.startswith(mount_path + "/"):
                        return routes, mounts[mount_path], rest[len(mount_path) :].lstrip("/")
        return [], None, path

    @staticmethod
    def _match(routes: list[Route], relative: str) -> tuple[Route | None, re.Match[str] | None]:
        for route in routes:
            match = route.pattern.fullmatch(relative)
            if match is not None:
                return route, match
        return None, None

    def _authenticate(self, token_id: str) -> Token:
        if not token_id:
            raise permission_denied()
        with self._lock:
            token = self._tokens.get(token_id)
            if (
                token is not None
                and token.expire_time is not None
                and token.expire_time <= self.clock.now()
            ):
                self._revoke_token_locked(token.id)
                self._wake.set()
                token = None
        if token is None:
            raise ApiError(403, "permission denied", "invalid token")
        return token

    def _authorize(self, token: Token, path: str, operation: str, sudo: bool) -> None:
        if token.is_root:
            return
        granted = self.capabilities(token, path)
        if operation not in granted or (sudo and "sudo" not in granted):
            raise permission_denied()

    def capabilities(self, token: Token, path: str) -> frozenset[str]:
        """Return the capabilities a token holds on a path."""
        if token.is_root:
            return frozenset({"root"})
        with self._lock:
            policies = [self._policies[name] for name in token.policies if name in self._policies]
        return granted_capabilities(policies, path, token.identity)

    # --- tokens ----------------------------------------------------------------------------------

    def _issue_token(
        self,
        *,
        policies: tuple[str, ...],
        display_name: str,
        path: str,
        ttl: int,
        max_ttl: int,
        parent: str | None,
        entity_id: str = "",
        identity: Identity | None = None,
        meta: Mapping[str, str] | None = None,
    ) -> Token:
        now = self.clock.now()
        token = Token(
            id="s." + base62(24),
            accessor=base62(24),
            policies=policies,
            display_name=_display_name(display_name),
            path=path,
            issue_time=now,
            ttl=ttl,
            expire_time=now + ttl if ttl else None,
            max_expire=now + max_ttl if max_ttl else None,
            parent=parent,
            entity_id=entity_id,
            identity=identity,
            meta=dict(meta or {}),
        )
        with self._lock:
            self._tokens[token.id] = token
            self._children.add(parent, token.id)
            if token.expire_time is not None:
                self._expiries.add(token.expire_time, "token", token.id)
        self._wake.set()
        return token

    def _auth_block(self, token: Token) -> JSON:
        return {
            "client_token": token.id,
            "accessor": token.accessor,
            "policies": sorted(token.policies),
            "token_policies": sorted(token.policies),
            "identity_policies": None,
            "metadata": token.meta or None,
            "lease_duration": token.ttl,
            "renewable": token.expire_time is not None,
            "entity_id": token.entity_id,
            "token_type": "service",
            "orphan": token.parent is None,
            "mfa_requirement": None,
            "num_uses": 0,
        }

    def _token_data(self, token: Token) -> JSON:
        now = self.clock.now()
        return {
            "accessor": token.accessor,
            "creation_time": int(token.issue_time),
            "creation_ttl": token.ttl,
            "display_name": token.display_name,
            "entity_id": token.entity_id,
            "expire_time": rfc3339(token.expire_time) if token.expire_time else None,
            "explicit_max_ttl": 0,
            "id": token.id,
            "issue_time": rfc3339(token.issue_time),
            "meta": token.meta or None,
            "num_uses": 0,
            "orphan": token.parent is None,
            "path": token.path,
            "policies": sorted(token.policies),
            "renewable": token.expire_time is not None,
            "ttl": token.remaining(now),
            "type": "service",
        }

    def _revoke_token_locked(self, token_id: str) -> list[str]:
        """Forget a token and its children; queue their leases for revocation now. Return the
        ids of the tokens forgotten."""
        token = self._tokens.pop(token_id, None)
        if token is None:
            return []
        self._children.remove(token.parent, token_id)
        now = self.clock.now()
        for lease in self._leases.of_token(token_id):
            self._end_lease_at(lease, min(lease.expire_time, now))
        gone = [token_id]
        for child in self._children.take(token_id):
            gone += self._revoke_token_locked(child)
        self._wake.set()
        return gone

    def _end_lease_at(self, lease: Lease, when: float) -> None:
        """Make a lease end at ``when`` (clock seconds); call under the lock. The reaper pops
        its deadline then; an earlier one recorded before is skipped as no longer current."""
        lease.expire_time = when
        self._expiries.add(when, "lease", lease.id)

    def _revoke_token_now(self, token_id: str) -> None:
        with self._lock:
            owned = self._take_leases_of(self._revoke_token_locked(token_id))
        self._revoke_leases(owned)

    def _take_leases_of(self, token_ids: Iterable[str]) -> list[Lease]:
        """Take the leases of tokens just revoked out of the table, to revoke them now."""
        owned = [lease for t in token_ids for lease in self._leases.of_token(t)]
        for lease in owned:
            self._leases.pop(lease.id)
        return owned

    # --- leases ----------------------------------------------------------------------------------

    def _drop_user(self, lease: Lease) -> bool:
        mount = self._db_mounts.get(lease.secret.mount) or DatabaseMount(
            lease.secret.mount, "", self._endpoint
        )
        try:
            mount.revoke_user(lease.secret)
        except pymysql.MySQLError as exc:
            log.warning("lease %s: revocation failed (MySQL error %s)", lease.id, exc.args[:1])
            return False
        return True

    def _revoke_leases(self, leases: Iterable[Lease]) -> list[Lease]:
        """Drop the users of leases already taken out of the table; requeue the failures."""
        failed = [lease for lease in leases if not self._drop_user(lease)]
        if failed:
            with self._lock:
                for lease in failed:
                    lease.retry_at = time.monotonic() + _RETRY_REAL_SECONDS
                    self._leases.put(lease)
                    self._retries.add(lease.retry_at, "lease", lease.id)
            self._wake.set()
        return failed

    def _take_leases(self, predicate: Callable[[Lease], bool]) -> list[Lease]:
        with self._lock:
            taken = [lease for lease in self._leases.values() if predicate(lease)]
            for lease in taken:
                self._leases.pop(lease.id)
        return taken

    def _revoke_matching(self, predicate: Callable[[Lease], bool]) -> Reply:
        return self._revoke_taken(self._take_leases(predicate))

    def _revoke_taken(self, taken: list[Lease]) -> Reply:
        failed = self._revoke_leases(taken)
        if failed:
            raise ApiError(
                500, f"failed to revoke {len(failed)} lease(s); revocation will be retried"
            )
        return Reply.no_content()

    # --- system backend --------------------------------------------------------------------------

    def _build_system_routes(self) -> list[Route]:
        return [
            _route(r"health", "read", self._sys_health, unauthenticated=True),
            _route(r"seal-status", "read", self._sys_seal_status, unauthenticated=True),
            _route(r"mounts", "read", self._sys_mounts),
            _route(r"mounts/(?P<path>.+)", "update delete", self._sys_mount_write),
            _route(r"auth", "read", self._sys_auth),
            _route(r"auth/(?P<path>.+)", "update delete", self._sys_auth_write, sudo=True),
            _route(r"policies/acl", "list", self._policy_list),
            _route(r"policy", "read list", self._policy_list),
            _route(
                r"(?:policies/acl|policy)/(?P<name>[^/]+)",
                "read create update delete",
                self._policy_crud,
                exists=lambda call: call.arg("name").lower() in self._policies,
            ),
            _route(r"capabilities-self", "update", self._capabilities_self),
            _route(r"leases/lookup", "update", self._lease_lookup),
            _route(r"leases/lookup/(?P<prefix>.*)", "list", self._lease_list, sudo=True),
            _route(r"leases/renew(?:/(?P<lease>.+))?", "update", self._lease_renew),
            _route(r"leases/revoke(?:/(?P<lease>.+))?", "update", self._lease_revoke),
            _route(
                r"leases/revoke-prefix/(?P<prefix>.+)",
                "update",
                self._lease_revoke_prefix,
                sudo=True,
            ),
            _route(
                r"leases/revoke-force/(?P<prefix>.+)",
                "update",
                self._lease_revoke_force,
                sudo=True,
            ),
        ]

    def _sys_health(self, call: Call) -> Reply:
        try:
            status = int(call.data.get("activecode", 200))
        except ValueError as exc:
            raise bad_request("activecode must be an integer") from exc
        return Reply(
            status=status,
            raw={
                "initialized": True,
                "sealed": False,
                "standby": False,
                "performance_standby": False,
                "replication_performance_mode": "disabled",
                "replication_dr_mode": "disabled",
                "server_time_utc": int(self.clock.now()),
                "version": VERSION,
                "cluster_name": "devstack",
                "cluster_id": self._mount_uuid("cluster"),
            },
        )

    def _sys_seal_status(self, call: Call) -> Reply:
        return Reply(
            raw={
                "type": "shamir",
                "initialized": True,
                "sealed": False,
                "t": 1,
                "n": 1,
                "progress": 0,
                "nonce": "",
                "version": VERSION,
                "build_date": "",
                "migration": False,
                "recovery_seal": False,
                "storage_type": "inmem",
            }
        )

    def _mount_uuid(self, key: str) -> str:
        return self._mount_uuids.setdefault(key, str(uuid.uuid4()))

    def _mount_entry(self, kind: str, accessor: str, key: str) -> JSON:
        return {
            "type": kind,
            "description": "",
            "accessor": accessor,
            "config": {"default_lease_ttl": 0, "max_lease_ttl": 0, "force_no_cache": False},
            "local": False,
            "seal_wrap": False,
            "external_entropy_access": False,
            "options": None,
            "uuid": self._mount_uuid(key),
            "plugin_version": "",
            "running_plugin_version": "",
            "running_sha256": "",
        }

    @staticmethod
    def _listing(entries: JSON) -> Reply:
        # OpenBao answers these two reads with the map both at the top level and under `data`.
        envelope = Reply(data=entries).body() or {}
        return Reply(raw={**entries, **envelope})

    def _sys_mounts(self, call: Call) -> Reply:
        with self._lock:
            entries = {
                "sys/": self._mount_entry("system", "system_00000000", "sys"),
                **{
                    f"{path}/": self._mount_entry("database", mount.accessor, path)
                    for path, mount in self._db_mounts.items()
                },
            }
        return self._listing(entries)

    def _sys_auth(self, call: Call) -> Reply:
        with self._lock:
            entries = {
                "token/": self._mount_entry("token", self._token_accessor, "auth/token"),
                **{
                    f"{path}/": self._mount_entry("kubernetes", mount.accessor, f"auth/{path}")
                    for path, mount in self._kube_mounts.items()
                },
            }
        return self._listing(entries)

    def _enable_database(self, path: str) -> DatabaseMount:
        mount = DatabaseMount(path, _accessor("database"), self._endpoint)
        self._db_mounts[path] = mount
        return mount

    def _enable_kubernetes(self, path: str) -> KubernetesAuthMount:
        mount = KubernetesAuthMount(path, _accessor("auth_kubernetes"), self._reviewer)
        self._kube_mounts[path] = mount
        return mount

    def _path_in_use(self, path: str) -> bool:
        taken = [*self._db_mounts, *(f"auth/{p}" for p in self._kube_mounts), "sys", "auth/token"]
        return any(
            path == other or path.startswith(other + "/") or other.startswith(path + "/")
            for other in taken
        )

    def _sys_mount_write(self, call: Call) -> Reply:
        path = call.arg("path").strip("/")
        if call.request.operation == "delete":
            with self._lock:
                self._db_mounts.pop(path, None)
            return self._revoke_matching(lambda lease: lease.secret.mount == path)
        kind = str(call.data.get("type", ""))
        if kind != "database":
            raise bad_request(f'plugin type "{kind}" is not supported by this OpenBao stand-in')
        with self._lock:
            if self._path_in_use(path):
                raise bad_request(f"path is already in use at {path}/")
            self._enable_database(path)
        return Reply.no_content()

    def _sys_auth_write(self, call: Call) -> Reply:
        path = call.arg("path").strip("/")
        if call.request.operation == "delete":
            with self._lock:
                self._kube_mounts.pop(path, None)
                gone: list[str] = []
                for token in [
                    t for t in self._tokens.values() if t.path.startswith(f"auth/{path}/")
                ]:
                    gone += self._revoke_token_locked(token.id)
                owned = self._take_leases_of(gone)
            self._revoke_leases(owned)
            return Reply.no_content()
        kind = str(call.data.get("type", ""))
        if kind != "kubernetes":
            raise bad_request(f'auth method "{kind}" is not supported by this OpenBao stand-in')
        with self._lock:
            if self._path_in_use(f"auth/{path}"):
                raise bad_request(f"path is already in use at auth/{path}/")
            self._enable_kubernetes(path)
        return Reply.no_content()

    def _policy_list(self, call: Call) -> Reply:
        with self._lock:
            keys = sorted({*self._policies, "root"})
        return Reply(data={"keys": keys, "policies": keys})

    def _policy_crud(self, call: Call) -> Reply:
        name = call.arg("name").lower()
        legacy = call.request.path.startswith("sys/policy/")
        operation = call.request.operation
        if operation == "read":
            with self._lock:
                policy = self._policies.get(name)
            if policy is None:
                raise not_found()
            return Reply(data={"name": name, "rules" if legacy else "policy": policy.text})
        if name == "root":
            raise bad_request(
                f'cannot {"delete" if operation == "delete" else "update"} "root" policy'
            )
        if operation == "delete":
            if name == "default":
                raise bad_request('cannot delete "default" policy')
            with self._lock:
                self._policies.pop(name, None)
            return Reply.no_content()
        text = str(call.data.get("policy") or call.data.get("rules") or "")
        if not text.strip():
            raise bad_request("'policy' parameter not supplied or empty")
        try:
            policy = parse_policy(name, text)
        except PolicyError as exc:
            raise bad_request(str(exc)) from exc
        with self._lock:
            self._policies[name] = policy
        return Reply.no_content()

    def _capabilities_self(self, call: Call) -> Reply:
        assert call.token is not None  # noqa: S101 - an authenticated route
        raw = call.data.get("paths", call.data.get("path", []))
        paths = [raw] if isinstance(raw, str) else [str(p) for p in raw]
        data: JSON = {}
        for path in paths:
            granted = self.capabilities(call.token, path.strip("/"))
            data[path] = sorted(granted) if granted else ["deny"]
        if len(paths) == 1:
            data["capabilities"] = data[paths[0]]
        return Reply(data=data)

    def _lease_id(self, call: Call) -> str:
        lease_id = call.arg("lease") or str(
            call.data.get("lease_id") or call.data.get("lease") or ""
        )
        if not lease_id:
            raise bad_request("lease_id must be specified")
        return lease_id

    def _lease_lookup(self, call: Call) -> Reply:
        lease_id = self._lease_id(call)
        with self._lock:
            lease = self._leases.get(lease_id)
            if lease is None:
                raise bad_request("invalid lease")
            return Reply(data=lease.lookup_data(self.clock.now()))

    def _lease_list(self, call: Call) -> Reply:
        prefix = call.arg("prefix").strip("/")
        prefix = prefix + "/" if prefix else ""
        with self._lock:
            keys = set()
            for lease_id in self._leases:
                if lease_id.startswith(prefix):
                    head, slash, _ = lease_id[len(prefix) :].partition("/")
                    keys.add(head + slash)
        if not keys:
            raise not_found()
        return Reply(data={"keys": sorted(keys)})

    def _lease_renew(self, call: Call) -> Reply:
        lease_id = self._lease_id(call)
        try:
            increment = parse_duration(call.data.get("increment", 0) or 0, "increment")
        except ValueError as exc:
            raise bad_request(str(exc)) from exc
        with self._lock:
            lease = self._leases.get(lease_id)
            if lease is None or lease.retry_at is not None:
                raise bad_request("lease not found")
            mount = self._db_mounts.get(lease.secret.mount)
            role = mount.roles.get(lease.secret.role) if mount else None
            if role is None:
                raise ApiError(
                    500, f'error during renew: could not find role with name "{lease.secret.role}"'
                )
            now = self.clock.now()
            ttl = increment or role.default_ttl or MOUNT_MAX_TTL
            warnings = None
            if now + ttl > lease.max_expire:
                ttl = max(0, int(lease.max_expire - now))
                warnings = ["TTL of the lease was capped by its max_ttl"]
            lease.last_renewal = now
            self._end_lease_at(lease, now + ttl)
        self._wake.set()
        return Reply(lease_id=lease_id, renewable=True, lease_duration=ttl, warnings=warnings)

    def _lease_revoke(self, call: Call) -> Reply:
        lease_id = self._lease_id(call)
        with self._lock:
            lease = self._leases.pop(lease_id)
        return self._revoke_taken([] if lease is None else [lease])

    def _lease_revoke_prefix(self, call: Call) -> Reply:
        prefix = call.arg("prefix").strip("/")
        return self._revoke_matching(
            lambda lease: lease.id == prefix or lease.id.startswith(prefix + "/")
        )

    def _lease_revoke_force(self, call: Call) -> Reply:
        prefix = call.arg("prefix").strip("/")
        taken = self._take_leases(
            lambda lease: lease.id == prefix or lease.id.startswith(prefix + "/")
        )
        # Forced: leases whose users cannot be dropped are forgotten all the same.
        for lease in taken:
            if not self._drop_user(lease):
                log.warning("lease %s: forgotten by revoke-force with its user in place", lease.id)
        return Reply.no_content()

    # --- token backend ---------------------------------------------------------------------------

    def _build_token_routes(self) -> list[Route]:
        return [
            _route(r"lookup-self", "read update", self._token_lookup_self),
            _route(r"lookup", "update", self._token_lookup),
            _route(r"revoke-self", "update", self._token_revoke_self),
            _route(r"revoke", "update", self._token_revoke),
            _route(r"renew-self", "update", self._token_renew_self),
            _route(r"create(?:-orphan)?", "update", self._token_create),
        ]

    def _token_lookup_self(self, call: Call) -> Reply:
        assert call.token is not None  # noqa: S101 - an authenticated route
        return Reply(data=self._token_data(call.token))

    def _token_lookup(self, call: Call) -> Reply:
        with self._lock:
            token = self._tokens.get(str(call.data.get("token", "")))
        if token is None:
            raise bad_request("bad token")
        return Reply(data=self._token_data(token))

    def _token_revoke_self(self, call: Call) -> Reply:
        assert call.token is not None  # noqa: S101 - an authenticated route
        self._revoke_token_now(call.token.id)
        return Reply.no_content()

    def _token_revoke(self, call: Call) -> Reply:
        self._revoke_token_now(str(call.data.get("token", "")))
        return Reply.no_content()

    def _token_renew_self(self, call: Call) -> Reply:
        token = call.token
        assert token is not None  # noqa: S101 - an authenticated route
        if token.expire_time is None:
            raise bad_request("lease is not renewable")
        try:
            increment = parse_duration(call.data.get("increment", 0) or 0, "increment")
        except ValueError as exc:
            raise bad_request(str(exc)) from exc
        with self._lock:
            now = self.clock.now()
            expire = now + (increment or token.ttl)
            if token.max_expire is not None:
                expire = min(expire, token.max_expire)
            token.expire_time = expire
            self._expiries.add(expire, "token", token.id)
        self._wake.set()
        return Reply(auth=self._auth_block(token) | {"lease_duration": token.remaining(now)})

    def _token_create(self, call: Call) -> Reply:
        parent = call.token
        assert parent is not None  # noqa: S101 - an authenticated route
        requested = call.data.get("policies") or list(parent.policies)
        if isinstance(requested, str):
            requested = requested.split(",")
        policies = tuple(sorted({str(p).strip().lower() for p in requested if str(p).strip()}))
        if not parent.is_root and not set(policies) <= set(parent.policies) | {"default"}:
            raise bad_request("child policies must be subset of parent")
        if "root" not in policies and not call.data.get("no_default_policy"):
            policies = tuple(sorted({*policies, "default"}))
        try:
            ttl = parse_duration(call.data.get("ttl", 0) or 0, "ttl") or MOUNT_MAX_TTL
        except ValueError as exc:
            raise bad_request(str(exc)) from exc
        if "root" in policies and not parent.is_root:
            raise permission_denied()
        orphan = call.request.path.endswith("create-orphan") or bool(call.data.get("no_parent"))
        name = str(call.data.get("display_name", ""))
        token = self._issue_token(
            policies=policies,
            display_name=f"token-{name}" if name else "token",
            path="auth/token/create",
            ttl=ttl,
            max_ttl=ttl,
            parent=None if orphan else parent.id,
            meta={str(k): str(v) for k, v in dict(call.data.get("meta") or {}).items()},
        )
        return Reply(auth=self._auth_block(token))

    # --- Kubernetes auth backend -----------------------------------------------------------------

    def _build_kube_routes(self) -> list[Route]:
        def role_exists(call: Call) -> bool:
            mount: KubernetesAuthMount = call.mount
            return call.arg("name") in mount.roles

        return [
            _route(r"login", "update", self._kube_login, unauthenticated=True),
            _route(r"config", "read update", self._kube_config),
            _route(r"role/?", "list", self._kube_role_list),
            _route(
                r"role/(?P<name>[\w\-.@]+)",
                "read create update delete",
                self._kube_role,
                exists=role_exists,
            ),
        ]

    def _kube_login(self, call: Call) -> Reply:
        mount: KubernetesAuthMount = call.mount
        result = mount.login(call.data)
        with self._lock:
            entity_key = (mount.accessor, result.alias_name)
            entity_id = self._entities.setdefault(entity_key, str(uuid.uuid4()))
        identity = Identity(
            entity_id=entity_id,
            entity_name=f"entity_{entity_id[:8]}",
            aliases={mount.accessor: (result.alias_name, dict(result.metadata))},
        )
        ttl = result.ttl or DEFAULT_TOKEN_TTL
        max_ttl = result.max_ttl or DEFAULT_TOKEN_TTL
        token = self._issue_token(
            policies=tuple(sorted({*result.policies, "default"})),
            display_name=f"{mount.path.replace('/', '-')}-{result.display_name}",
            path=f"auth/{mount.path}/login",
            ttl=min(ttl, max_ttl),
            max_ttl=max_ttl,
            parent=None,
            entity_id=entity_id,
            identity=identity,
            meta=dict(result.metadata),
        )
        return Reply(auth=self._auth_block(token))

    def _kube_config(self, call: Call) -> Reply:
        mount: KubernetesAuthMount = call.mount
        with self._lock:
            if call.request.operation == "read":
                return mount.read_config()
            mount.write_config(call.data)
        return Reply.no_content()

    def _kube_role_list(self, call: Call) -> Reply:
        mount: KubernetesAuthMount = call.mount
        with self._lock:
            keys = sorted(mount.roles)
        if not keys:
            raise not_found()
        return Reply(data={"keys": keys})

    def _kube_role(self, call: Call) -> Reply:
        mount: KubernetesAuthMount = call.mount
        name = call.arg("name")
        with self._lock:
            if call.request.operation == "read":
                role = mount.roles.get(name)
                if role is None:
                    raise not_found()
                return Reply(data=role.read_data())
            if call.request.operation == "delete":
                mount.roles.pop(name, None)
            else:
                mount.roles[name] = mount.build_role(name, call.data)
        return Reply.no_content()

    # --- database backend ------------------------------------------------------------------------

    def _build_db_routes(self) -> list[Route]:
        def exists(call: Call) -> bool:
            mount: DatabaseMount = call.mount
            return mount.exists(call.match.group(0))

        name = r"(?P<name>\w(?:[\w\-.]*\w)?)"
        return [
            _route(r"config/?", "list", self._db_list),
            _route(rf"config/{name}", "read create update delete", self._db_config, exists=exists),
            _route(r"roles/?", "list", self._db_list),
            _route(rf"roles/{name}", "read create update delete", self._db_role, exists=exists),
            _route(rf"creds/{name}", "read", self._db_creds),
        ]

    def _db_list(self, call: Call) -> Reply:
        mount: DatabaseMount = call.mount
        with self._lock:
            source = mount.connections if call.match.group(0).startswith("config") else mount.roles
            keys = sorted(source)
        if not keys:
            raise not_found()
        return Reply(data={"keys": keys})

    def _db_config(self, call: Call) -> Reply:
        mount: DatabaseMount = call.mount
        name = call.arg("name")
        operation = call.request.operation
        if operation == "read":
            with self._lock:
                return mount.read_config(name)
        if operation == "delete":
            with self._lock:
                mount.connections.pop(name, None)
            return Reply.no_content()
        with self._lock:
            connection = mount.build_connection(name, call.data)
        if connection.verify_connection:
            mount.verify(connection)
        with self._lock:
            mount.connections[name] = connection
        return Reply.no_content()

    def _db_role(self, call: Call) -> Reply:
        mount: DatabaseMount = call.mount
        name = call.arg("name")
        with self._lock:
            if call.request.operation == "read":
                return mount.read_role(name)
            if call.request.operation == "delete":
                mount.roles.pop(name, None)
            else:
                mount.roles[name] = mount.build_role(name, call.data)
        return Reply.no_content()

    def _db_creds(self, call: Call) -> Reply:
        mount: DatabaseMount = call.mount
        token = call.token
        assert token is not None  # noqa: S101 - an authenticated route
        with self._lock:
            plan = mount.plan_credentials(
                call.arg("name"), token.display_name, self.clock.now(), MOUNT_MAX_TTL
            )
        now = self.clock.now()
        secret = mount.create_user(plan, now)
        lease = Lease(
            id=f"{mount.path}/creds/{plan.role.name}/{base62(24)}",
            issue_time=now,
            expire_time=now + plan.ttl,
            max_expire=now + plan.max_ttl,
            token_id=token.id,
            secret=secret,
        )
        with self._lock:
            token_alive = token.id in self._tokens
            if token_alive:
                self._leases.put(lease)
                self._end_lease_at(lease, lease.expire_time)
        if not token_alive:
            # The token ended while the user was being created: its leases end with it.
            self._revoke_leases([lease])
            raise ApiError(403, "permission denied", "invalid token")
        self._wake.set()
        return Reply(
            data={"username": plan.username, "password": plan.password},
            lease_id=lease.id,
            lease_duration=plan.ttl,
            renewable=True,
        )
