"""The Kubernetes reads and writes of a MysqlDatabase pass.

Owns fetching the order's MysqlFailoverGroup, Secrets (decoded, NotFound as None, every other
failure raised so nothing is decided on a partial read), the peer orders of its namespace, and
the admin login and site target the group's operator Secret and TLS Secret make; writing the
order's status as a merge patch of what changed (and remembering the write, so its watch event
wakes nothing), its finalizers and its Events. Decoded Secret values stay in the caller's
memory: they are never logged, stored or put in an exception.
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import redis

from tenantdb.adapters.clusters import ClusterRegistry
from tenantdb.adapters.events import record_event
from tenantdb.adapters.kube import SECRET, KubeClient, NotFoundError, Resource, register_resources
from tenantdb.adapters.mysqladmin import (
    AdminError,
    AdminLogin,
    AdminSession,
    GroupBusyError,
    Target,
    TLSRequiredError,
    admin_pool,
    site_address,
    site_server_name,
)
from tenantdb.adapters.watchindex import Slot, WatchIndex
from tenantdb.core.events import Event
from tenantdb.core.keys import OrderKey
from tenantdb.core.mysqldatabase.apply import Observed, parse_observation, render_drop
from tenantdb.core.mysqldatabase.gates import OwnerSecret, compute_comeback_behind_circuit
from tenantdb.core.mysqldatabase.group import compute_active_site
from tenantdb.core.mysqldatabase.models import MysqlDatabase, read_order
from tenantdb.core.mysqldatabase.naming import CLAIM_INDEX, OWNER_NAME_INDEX
from tenantdb.core.mysqldatabase.passes import (
    REASSERT,
    VERIFY,
    Drift,
    GateReads,
    PrimaryFailure,
    QuietCheck,
    ServerFailure,
    TeardownReads,
    apply_usernames,
    claim_for_gates,
    compute_stop_wait,
    gates_stop_early,
    judge_verified,
    may_retire,
    needs_peer_username,
    owner_username,
    reserved_or_none,
)
from tenantdb.core.mysqldatabase.reading import (
    compute_named_by,
    compute_peer_reads,
    compute_peer_slots,
    compute_peer_users,
    compute_status_patch,
    deferred_slot,
    group_name,
    group_secret_names,
    needs_sibling_username,
    operator_secret_name,
    owner_secret_name,
    peers_on_group,
    peers_to_wake,
    peers_to_wake_indexed,
    tls_secret_name,
    unresolved_slot,
    username_slot,
)
from tenantdb.core.mysqldatabase.reasons import Phase
from tenantdb.core.mysqldatabase.sql import Dialect, Statement, observe_query
from tenantdb.core.mysqldatabase.teardown import TeardownPlan
from tenantdb.core.objects import decode_secret_value, metadata_of
from tenantdb.settings import load_settings

# What a MysqlDatabase pass reads and writes beyond core objects, registered with the kube
# adapter so that it knows them by apiVersion and kind.
MYSQL_DATABASE = Resource("shipstream.io", "v1alpha1", "mysqldatabases", "MysqlDatabase")
MYSQL_FAILOVER_GROUP = Resource(
    "shipstream.io", "v1alpha1", "mysqlfailovergroups", "MysqlFailoverGroup"
)

register_resources(MYSQL_DATABASE, MYSQL_FAILOVER_GROUP)

log = logging.getLogger(__name__)

LOGIN_REUSE_SECONDS = 300.0
"""How long a worker process reuses a group's admin login it read, for drift checks of orders
the watches vouch for. A rotation wakes the group's orders, whose next passes read it afresh;
a check that fails on an old login forgets it and the pass reads everything in full."""

_DSN = re.compile(r"^(?P<user>[^:@/]*)(?::(?P<password>[^@]*))?@")


class CredentialError(Exception):
    """The group's admin credential cannot be read or is not usable; names no value."""


@dataclass(frozen=True)
class SecretData:
    """A Secret's identity and its decoded values (kept in memory only)."""

    uid: str
    resource_version: str
    values: Mapping[str, str] = field(repr=False)


def decode(secret: Mapping[str, Any]) -> SecretData:
    """A stored Secret's identity and decoded data (undecodable values read as empty)."""
    meta = secret.get("metadata") or {}
    values: dict[str, str] = {}
    for key, value in (secret.get("data") or {}).items():
        values[str(key)] = decode_secret_value(value)
    return SecretData(str(meta.get("uid", "")), str(meta.get("resourceVersion", "")), values)


@dataclass(frozen=True)
class FetchedOrder:
    """The order as stored (what notes carry and writes are guarded by), and its typed view."""

    raw: dict[str, Any]
    order: MysqlDatabase


def fetched(raw: dict[str, Any]) -> FetchedOrder:
    """The order as stored with its typed view (reading never fails: see ``models``)."""
    return FetchedOrder(raw, read_order(raw))


@dataclass(frozen=True)
class Peers:
    """The other orders on an order's group a pass may be checked against, read live and in
    name order, and the names of those an apply or a release may unblock (``waiting``: from
    the index, ``peers_to_wake_indexed``; from a list, every peer not Ready)."""

    orders: tuple[dict[str, Any], ...]
    waiting: tuple[str, ...]


class MysqlSession(Protocol):
    """What a MysqlDatabase step does on a group's primary (``AdminSession`` in a worker)."""

    @property
    def dialect(self) -> Dialect:
        """The server's dialect."""
        ...

    @property
    def read_only_bypassed(self) -> bool:
        """Whether the admin account can write through ``read_only``."""
        ...

    @property
    def privilege_columns(self) -> tuple[tuple[str, str], ...]:
        """The server's ``mysql.db`` privilege columns (``sql.schema_privilege_columns``)."""
        ...

    @property
    def folds_case(self) -> bool:
        """Whether the server keeps schema names in lower case (``lower_case_table_names``)."""
        ...

    @property
    def executed(self) -> int:
        """How many writing statements ran in this session."""
        ...

    def query(self, statement: Statement) -> list[tuple[Any, ...]]:
        """Run a read-only query; its rows."""
        ...

    def execute(
        self,
        statements: Sequence[Statement],
        values: Mapping[str, str],
        check: Callable[[], None] | None = None,
    ) -> None:
        """Run statements in order, each bound value looked up in ``values`` when it is a key."""
        ...


class MysqlIO(Protocol):
    """The reads and writes a MysqlDatabase pass makes besides its order (``MysqlOrders``)."""

    def group(self, key: OrderKey, name: str) -> dict[str, Any] | None:
        """The order's MysqlFailoverGroup; None when it does not exist."""
        ...

    def secret(self, key: OrderKey, name: str) -> SecretData | None:
        """A Secret of the order's namespace, decoded; None when it does not exist."""
        ...

    def owner(self, key: OrderKey, name: str) -> OwnerSecret | None:
        """An owner Secret as the gates see it; None when it does not exist."""
        ...

    def group_secrets(
        self, key: OrderKey, names: tuple[str, ...]
    ) -> dict[str, Mapping[str, str] | None]:
        """The group's credential Secrets by name; None for one that does not exist."""
        ...

    def peers(self, key: OrderKey, order: Mapping[str, Any], owner_username: str | None) -> Peers:
        """The order's peers on its group that share a name with it."""
        ...

    def session(
        self, key: OrderKey, group: Mapping[str, Any], site: str, *, reuse: bool = False
    ) -> AbstractContextManager[MysqlSession]:
        """A session on the group's site as its admin (see ``MysqlOrders.session``)."""
        ...

    def write_status(
        self,
        key: OrderKey,
        order: dict[str, Any],
        status: Mapping[str, Any],
        check: Callable[[], None],
    ) -> dict[str, Any]:
        """Write what changed of the order's status; the order as written."""
        ...

    def set_finalizers(
        self, key: OrderKey, order: dict[str, Any], finalizers: list[str]
    ) -> dict[str, Any]:
        """Replace the order's finalizers."""
        ...

    def event(self, key: OrderKey, order: Mapping[str, Any], event: Event) -> None:
        """Record an Event on the order."""
        ...


class MysqlOrders:
    """The Kubernetes side of MysqlDatabase passes, on every registered cluster."""

    def __init__(
        self,
        clusters: ClusterRegistry,
        *,
        claims: WatchIndex | None = None,
        owner_names: WatchIndex | None = None,
    ) -> None:
        """Bind to the clusters orders live on, the claim index the watcher keeps of them
        (without one, every pass lists its namespace) and its owner-name index of Secrets
        (without one, a pass reads every peer on its group that recorded no owner)."""
        self.clusters = clusters
        self.claims = claims
        self.owner_names = owner_names
        self._logins: dict[tuple[str, ...], tuple[float, Target, AdminLogin]] = {}

    def client(self, key: OrderKey) -> KubeClient:
        """The client of the order's cluster."""
        return self.clusters.get(key.cluster)

    def group(self, key: OrderKey, name: str) -> dict[str, Any] | None:
        """The order's MysqlFailoverGroup; None when it does not exist."""
        if not name:
            return None
        return self.client(key).get_or_none(MYSQL_FAILOVER_GROUP, key.namespace, name)

    def secret(self, key: OrderKey, name: str) -> SecretData | None:
        """A Secret of the order's namespace, decoded; None when it does not exist."""
        if not name:
            return None
        raw = self.client(key).get_or_none(SECRET, key.namespace, name)
        return None if raw is None else decode(raw)

    def owner(self, key: OrderKey, name: str) -> OwnerSecret | None:
        """An owner Secret as the gates see it (whether a password is set, never which)."""
        data = self.secret(key, name)
        if data is None:
            return None
        values = data.values
        return OwnerSecret(
            data.uid,
            data.resource_version,
            values.get("username", ""),
            bool(values.get("password")),
        )

    def group_secrets(
        self, key: OrderKey, names: tuple[str, ...]
    ) -> dict[str, Mapping[str, str] | None]:
        """The group's credential Secrets by name; None for one that does not exist."""
        found: dict[str, Mapping[str, str] | None] = {}
        for name in names:
            data = self.secret(key, name)
            found[name] = None if data is None else data.values
        return found

    def peers(self, key: OrderKey, order: Mapping[str, Any], owner_username: str | None) -> Peers:
        """The order's peers on its group that share a name with it (``compute_peer_slots``).

        Answered from the claim index when it is trusted and names few: each named order is
        read from the API server, so a stale entry costs a GET and never a wrong decision.
        Otherwise, and whenever Redis cannot answer, the namespace is listed.
        """
        indexed = self._indexed_peers(key, order, owner_username)
        if indexed is not None:
            return indexed
        listed = self.client(key).list_objects(MYSQL_DATABASE, key.namespace)
        peers = tuple(peers_on_group(listed, order))
        return Peers(peers, peers_to_wake(peers, order))

    def _indexed_peers(
        self, key: OrderKey, order: Mapping[str, Any], owner_username: str | None
    ) -> Peers | None:
        if self.claims is None:
            return None
        deferred = deferred_slot(order)
        try:
            owners = self._owner_names(key, order, owner_username)
            named_by = None if owners is None else compute_named_by(order, owner_username, owners)
            slots = compute_peer_slots(order, owner_username, named_by)
            found = self.claims.lookup(key.cluster, key.namespace, (*slots, deferred))
        except redis.RedisError as error:
            log.info("claim index unreadable (%s); listing the namespace", type(error).__name__)
            return None
        if found is None:
            return None
        if named_by is not None and owners is not None:
            # Kept with the owner names (from the watch of Secrets), not in the claim index.
            unresolved = unresolved_slot(group_name(order))
            found[unresolved] = owners.get(unresolved, [])
        names = compute_peer_reads(order, slots, found)
        if names is None:
            return None
        client = self.client(key)
        read = (client.get_or_none(MYSQL_DATABASE, key.namespace, name) for name in names)
        peers = tuple(peers_on_group((o for o in read if o is not None), order))
        return Peers(peers, peers_to_wake_indexed(order, peers, found[deferred]))

    def _owner_names(
        self, key: OrderKey, order: Mapping[str, Any], owner_username: str | None
    ) -> dict[Slot, list[str]] | None:
        """What the owner-name index says of the order's owner users and of the peers on its
        group whose Secret names none; None when there is no index or it is not trusted."""
        if self.owner_names is None:
            return None
        users = compute_peer_users(order, owner_username)
        slots = [*(username_slot(user) for user in users), unresolved_slot(group_name(order))]
        return self.owner_names.lookup(key.cluster, key.namespace, slots)

    def admin(
        self, key: OrderKey, group: Mapping[str, Any], site: str, *, reuse: bool = False
    ) -> tuple[Target, AdminLogin]:
        """Where and as whom to connect for the group's active site.

        With ``reuse``, what this process read for the same group, site and Secrets less than
        ``LOGIN_REUSE_SECONDS`` ago is used instead of reading the Secrets again; every read
        is remembered for that.

        Raises:
            CredentialError: the operator Secret (or the TLS Secret's CA) is missing or unusable.
        """
        meta = group.get("metadata") or {}
        name, uid = str(meta.get("name", "")), str(meta.get("uid", ""))
        secret_name = operator_secret_name(group)
        tls_name = tls_secret_name(group)
        cache_key = _login_key(key, group, site)
        found = self._logins.get(cache_key)
        now = time.monotonic()
        if reuse and found is not None and 0 <= now - found[0] < LOGIN_REUSE_SECONDS:
            return found[1], found[2]
        self._logins.pop(cache_key, None)
        data = self.secret(key, secret_name)
        if data is None:
            raise CredentialError(f'operator Secret "{secret_name}" not found')
        login = _login(secret_name, data.values)
        ca: bytes | None = None
        if tls_name is not None:
            tls = self.secret(key, tls_name)
            ca_text = "" if tls is None else tls.values.get("ca.crt", "")
            if not ca_text:
                raise CredentialError(f'TLS Secret "{tls_name}" holds no ca.crt')
            ca = ca_text.encode("ascii")
        target = Target(
            group=f"{key.namespace}/{name}@{uid}",
            site=site,
            address=site_address(name, site, key.namespace),
            server_name=site_server_name(name, site, key.namespace),
            ca_pem=ca,
        )
        self._logins[cache_key] = (now, target, login)
        return target, login

    @contextmanager
    def session(
        self, key: OrderKey, group: Mapping[str, Any], site: str, *, reuse: bool = False
    ) -> Iterator[AdminSession]:
        """A session of this process's admin pool on the group's site, as the group's admin
        (with ``reuse``, a login this process read lately: see ``admin``). A session that
        fails forgets the login, so the next one reads the Secrets again.

        Raises:
            CredentialError: the operator Secret (or the TLS Secret's CA) is missing or unusable.
            AdminError, GroupBusyError, TLSRequiredError: as ``AdminPool.session``.
        """
        target, login = self.admin(key, group, site, reuse=reuse)
        try:
            with admin_pool().session(target, login) as session:
                yield session
        except Exception:
            self._logins.pop(_login_key(key, group, site), None)
            raise

    def write_status(
        self,
        key: OrderKey,
        order: dict[str, Any],
        status: Mapping[str, Any],
        check: Callable[[], None],
    ) -> dict[str, Any]:
        """Write what changed of the order's status, guarded by the resourceVersion it was read
        at; the order as written (or as it was).

        ``check`` confirms the lease before a write that follows a conflict; see
        ``KubeClient.write_status``.
        """
        return self.client(key).write_status(
            MYSQL_DATABASE, order, lambda stored: compute_status_patch(stored, status), check
        )

    def set_finalizers(
        self, key: OrderKey, order: dict[str, Any], finalizers: list[str]
    ) -> dict[str, Any]:
        """Replace the order's finalizers (guarded by the resourceVersion it was read at)."""
        return self.client(key).set_finalizers(order, finalizers)

    def event(self, key: OrderKey, order: Mapping[str, Any], event: Event) -> None:
        """Record an Event on the order."""
        record_event(self.client(key), order, event.type.value, event.reason, event.message)


# -- the read and SQL sequences of a pass, over any MysqlIO ------------------------------------


def read_peer_users(
    io: MysqlIO,
    key: OrderKey,
    peers: tuple[dict[str, Any], ...],
    needed: Callable[[dict[str, Any]], bool],
) -> dict[str, str]:
    """The usernames the owner Secrets of the ``needed`` peers name, by peer."""
    found: dict[str, str] = {}
    for peer in peers:
        if needed(peer):
            secret = io.owner(key, owner_secret_name(peer))
            if secret is not None and secret.username:
                found[str(metadata_of(peer).get("name"))] = secret.username
    return found


def read_gates(io: MysqlIO, key: OrderKey, fetched: FetchedOrder) -> GateReads:
    """What the gates need, read only as far as they need it: the group and the owner Secret,
    then (unless the gates stop on those) the group's credential Secrets, the peers and the
    owner usernames of the peers the conflict check must know."""
    order, spec = fetched.raw, fetched.order.spec
    group = io.group(key, spec.group_ref.name)
    owner = io.owner(key, spec.owner.secret_name)
    if group is None or gates_stop_early(order, group, owner):
        return GateReads(order, group, owner)
    group_secrets = io.group_secrets(key, group_secret_names(group))
    found = io.peers(key, order, owner_username(owner))
    me = claim_for_gates(order, owner)
    retiring = may_retire(order, owner_username(owner))
    peer_users = read_peer_users(
        io, key, found.orders, lambda peer: needs_peer_username(me, peer, retiring=retiring)
    )
    return GateReads(order, group, owner, group_secrets, found.orders, peer_users, found.waiting)


def read_teardown(io: MysqlIO, key: OrderKey, fetched: FetchedOrder) -> TeardownReads:
    """What deciding a teardown needs: the group only when the drop may touch MySQL, and with
    it the group's credential Secrets and the peers."""
    if not fetched.order.may_touch_mysql:
        return TeardownReads()
    group = io.group(key, fetched.order.spec.group_ref.name)
    if group is None:
        return TeardownReads()
    reserved = reserved_or_none(io.group_secrets(key, group_secret_names(group)))
    found = io.peers(key, fetched.raw, None)
    peer_users = read_peer_users(io, key, found.orders, needs_sibling_username)
    return TeardownReads(group, reserved, found.orders, peer_users, found.waiting)


def observe(session: MysqlSession, database: str, usernames: Sequence[str]) -> Observed:
    """The primary's answer to the one read-only look a step takes before it writes."""
    look = observe_query(
        database,
        usernames,
        session.dialect,
        session.privilege_columns,
        folds_case=session.folds_case,
    )
    return parse_observation(session.query(look))


def run_drop(
    io: MysqlIO,
    key: OrderKey,
    group: Mapping[str, Any],
    site: str,
    plan: TeardownPlan,
    database: str,
    check: Callable[[], None],
) -> None:
    """Look at the primary, then revoke and drop what ``plan`` says, each statement guarded
    by ``check``.

    Raises:
        AdminError: the site is read-only (transient), or the server failed.
        CredentialError, GroupBusyError, TLSRequiredError: as ``MysqlIO.session``.
    """
    with io.session(key, group, site) as session:
        observed = observe(session, database, (*plan.revoke, *plan.revoke_patterns))
        if observed.read_only:
            raise AdminError(f"site {site} is read-only", code=None, transient=True)
        session.execute(render_drop(plan, observed, session.dialect), {}, check=check)


def revoke_refused(
    io: MysqlIO,
    key: OrderKey,
    group: Mapping[str, Any] | None,
    plan: TeardownPlan | None,
    check: Callable[[], None],
) -> None:
    """Revoke the pattern grants of a refused order (``passes.plan_refused_revocation``) on
    the group's active site. A failure is logged and left to the order's next pass: the
    refusal is recorded all the same."""
    if plan is None or group is None:
        return
    try:
        run_drop(io, key, group, compute_active_site(group), plan, plan.database, check)
    except (*PRIMARY_ERRORS, GroupBusyError) as error:
        log.warning(
            "could not revoke the pattern grants of a refused order (%s)",
            type(error).__name__,
            extra={"order": str(key)},
        )


def verified(io: MysqlIO, key: OrderKey, check: QuietCheck, *, reuse: bool) -> bool:
    """Whether the order stands on its primary as ``check`` says its last apply left it: one
    session (with ``reuse``, on a login this process read lately) and one read-only query.

    False when it drifted or would be refused, and when the look failed for any reason: the
    apply step that follows repairs, or records why.
    """
    note = check.note
    try:
        with io.session(key, check.group, note.site, reuse=reuse) as session:
            observed = observe(session, note.spec.database_name, apply_usernames(note))
            return judge_verified(note, observed, session.dialect)
    except (*PRIMARY_ERRORS, GroupBusyError) as error:
        log.info(
            "the drift check could not look at the primary (%s)",
            type(error).__name__,
            extra={"order": str(key)},
        )
        return False


class Periods(Protocol):
    """The work queue's periodic claims a drift check keeps (``WorkQueue``)."""

    def claim_period(self, name: str, key: OrderKey, period_ms: int) -> bool:
        """Whether the periodic work is due; claim it for a period if so."""
        ...

    def release_period(self, name: str, key: OrderKey) -> None:
        """Give a claim back: the work is due again at once."""
        ...

    def holds_period(self, name: str, key: OrderKey) -> bool:
        """Whether a claim is held, leaving it."""
        ...

    def take_period(self, name: str, key: OrderKey) -> bool:
        """Whether a claim was held; give it back."""
        ...


def check_drift(
    io: MysqlIO, periods: Periods, key: OrderKey, check: QuietCheck | None, *, quiet: bool
) -> Drift | None:
    """The drift check of an order its last apply left as it is, when its verify period is
    due (claimed here, for the period); None for an order whose inputs moved (no ``check``).

    A full pass (``quiet`` false) takes a pending password reassert and reads the admin login
    afresh. A quiet refresh leaves a pending reassert to the full pass, looks on a login this
    process read lately, and gives the period back when the look does not confirm the order,
    so the full pass that follows checks (and repairs) at once.
    """
    if check is None:
        return None
    if quiet and periods.holds_period(REASSERT, key):
        return Drift.REASSERT
    if not periods.claim_period(VERIFY, key, verify_ms()):
        return Drift.NOT_DUE
    if not quiet and periods.take_period(REASSERT, key):
        return Drift.REASSERT
    if verified(io, key, check, reuse=quiet):
        return Drift.VERIFIED
    if quiet:
        periods.release_period(VERIFY, key)
    return Drift.UNVERIFIED


PRIMARY_ERRORS = (CredentialError, TLSRequiredError, AdminError)
"""The failures of a step's work on the group's primary (``GroupBusyError`` aside)."""


def batch_failure(error: AdminError, executed: int) -> ServerFailure:
    """A batch that failed after ``executed`` statements ran, as the pass records it."""
    return ServerFailure(str(error), executed, error.may_have_run, error.transient)


def with_claims(clusters: ClusterRegistry, redis_client: redis.Redis, prefix: str) -> MysqlOrders:
    """The orders of a worker process, their peers looked up in the watcher's claim index."""
    return MysqlOrders(
        clusters,
        claims=WatchIndex(redis_client, prefix, CLAIM_INDEX),
        owner_names=WatchIndex(redis_client, prefix, OWNER_NAME_INDEX),
    )


def primary_failure(error: Exception) -> PrimaryFailure:
    """What a failure on the primary means for the pass: a missing credential or a refused
    plaintext connection waits like an unreachable server."""
    if isinstance(error, AdminError):
        return PrimaryFailure(str(error), error.transient, error.retry_after)
    return PrimaryFailure(str(error), True, 0.0)


# -- the clock, the settings and the spread of a pass's come-backs -------------------------------


def now() -> datetime:
    """The time a record is stamped with."""
    return datetime.now(UTC)


def stop_wait(phase: Phase) -> float:
    """When a stopped order comes back (``compute_stop_wait``), spread at random."""
    return compute_stop_wait(phase, random.random())  # noqa: S311 - load spreading


def pending_wait() -> float:
    """When a Pending order comes back, spread at random."""
    return stop_wait(Phase.PENDING)


def busy_wait() -> float:
    """When a pass that found its group's slots taken comes back: soon, spread."""
    return 1.0 + random.random()  # noqa: S311 - load spreading


def behind_circuit(pending: float, closes_in: float) -> float:
    """When a pass that found the site's circuit open comes back (after it closes), spread."""
    spread = random.random()  # noqa: S311 - load spreading
    return compute_comeback_behind_circuit(pending, closes_in, spread)


def verify_seconds() -> float:
    """The drift check's period of a Ready order."""
    return load_settings().mysql_verify_seconds


def verify_ms() -> int:
    """The drift check's claim: a little under its period, so the come-back finds it due."""
    return int(verify_seconds() * 900)


def _login_key(key: OrderKey, group: Mapping[str, Any], site: str) -> tuple[str, ...]:
    """What a remembered admin login is for: the group (by uid too), its site and the Secrets
    it was read from."""
    meta = group.get("metadata") or {}
    return (
        key.cluster,
        key.namespace,
        str(meta.get("name", "")),
        str(meta.get("uid", "")),
        site,
        operator_secret_name(group),
        str(tls_secret_name(group)),
    )


def _login(secret_name: str, values: Mapping[str, str]) -> AdminLogin:
    user, password = values.get("username", ""), values.get("password", "")
    root = values.get("MYSQL_ROOT_PASSWORD", "")
    if not user and values.get("dsn"):
        found = _DSN.match(values["dsn"])
        if found is None or not found["user"]:
            raise CredentialError(f'operator Secret "{secret_name}": key dsn names no user')
        user, password = found["user"], found["password"] or ""
    if not user:
        raise CredentialError(f'operator Secret "{secret_name}" carries no username')
    return AdminLogin(user, password, root)


__all__ = [
    "PRIMARY_ERRORS",
    "CredentialError",
    "FetchedOrder",
    "MysqlIO",
    "MysqlOrders",
    "MysqlSession",
    "NotFoundError",
    "Peers",
    "PrimaryFailure",
    "SecretData",
    "decode",
]
