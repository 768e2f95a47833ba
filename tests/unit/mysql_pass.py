"""Run one real MysqlDatabase pass over a ``World``: the product's entry and steps, fake I/O.

``run_pass`` calls the scaffold's ``serve`` with the kind's declaration (``tasks.mysqldatabase``),
then each step of the chain the entry handed over (the teardown's, for a deleting order), in
order, through the scaffold's ``run_body`` with the note the entry left, as the step's task does.
Only the I/O is replaced: the kind's I/O (``WorldIO``, a ``MysqlIO``) answers from the World and
records the statuses, finalizers and Events written; the group's primary is a ``FakeSession``
that answers the observation query from the World and records the statements sent; the work
queue is a real ``WorkQueue`` on fakeredis, its publishes recorded, its lease a real one.
Nothing is patched. A step that raises ends the run with the error in ``PassRun.raised``.
"""

from __future__ import annotations

import base64
import copy
import hashlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import fakeredis
from pydantic import TypeAdapter

import tasks.mysqldatabase as kind
import tasks.scaffold as scaffold
from tasks.chain import StepContext, StepResult, note_text
from tasks.reconcile import PassContext, PassOutcome
from tenantdb.adapters.mysqldatabase import (
    MysqlSession,
    Peers,
    SecretData,
)
from tenantdb.adapters.workqueue import Heartbeat, Lease, WorkQueue
from tenantdb.core.events import Event
from tenantdb.core.keys import OrderKey
from tenantdb.core.mysqldatabase.gates import OwnerSecret
from tenantdb.core.mysqldatabase.naming import IDENTITY
from tenantdb.core.mysqldatabase.sql import Dialect, Statement
from tenantdb.core.quiet import QuietBasis, QuietLook
from tenantdb.core.seal import SealKeys

NAMESPACE = "bloodraven"
ORDER = "tenant-acme"
GROUP = "main"
OWNER_SECRET = "acme-owner"
OWNER_USER = "acme_app"
PASSWORD = "first-pw"
DATABASE = "acme_wms"


def b64(value: str) -> str:
    """A Secret value as the API returns it."""
    return base64.b64encode(value.encode()).decode()


def make_order(
    *,
    name: str = ORDER,
    database: str = DATABASE,
    owner_secret: str = OWNER_SECRET,
    grants: Sequence[Mapping[str, Any]] = (),
    deletion_policy: str | None = None,
    finalizers: tuple[str, ...] = (IDENTITY.finalizer,),
    deleting: bool = False,
    status: Mapping[str, Any] | None = None,
    generation: int = 1,
) -> dict[str, Any]:
    """A MysqlDatabase as read from the API server."""
    spec: dict[str, Any] = {
        "groupRef": {"name": GROUP},
        "databaseName": database,
        "owner": {"secretName": owner_secret},
    }
    if grants:
        spec["grants"] = [dict(g) for g in grants]
    if deletion_policy is not None:
        spec["deletionPolicy"] = deletion_policy
    meta: dict[str, Any] = {
        "name": name,
        "namespace": NAMESPACE,
        "uid": f"uid-{name}",
        "generation": generation,
        "resourceVersion": "7",
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "finalizers": list(finalizers),
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-02T00:00:00Z"
    raw: dict[str, Any] = {
        "apiVersion": "shipstream.io/v1alpha1",
        "kind": "MysqlDatabase",
        "metadata": meta,
        "spec": spec,
    }
    if status is not None:
        raw["status"] = dict(status)
    return raw


def make_group(
    *,
    active_site: str | None = "dc1",
    dc1_role: str = "primary-candidate",
    tls: bool = False,
    **status: Any,
) -> dict[str, Any]:
    """The order's MysqlFailoverGroup: two sites, dc1 active, credentials in Secrets."""
    spec: dict[str, Any] = {
        "credentials": {"operatorSecret": "main-operator", "readOnlySecret": "main-readonly"},
        "sites": [{"name": "dc1", "role": dc1_role}, {"name": "dc2", "role": "replica"}],
    }
    if tls:
        spec["tls"] = {}
    state: dict[str, Any] = {**status}
    if active_site is not None:
        state["activeSite"] = active_site
    return {
        "apiVersion": "shipstream.io/v1alpha1",
        "kind": "MysqlFailoverGroup",
        "metadata": {"name": GROUP, "namespace": NAMESPACE, "uid": "g-1"},
        "spec": spec,
        "status": state,
    }


def default_secrets() -> dict[str, dict[str, str]]:
    """The owner Secret and the group's credential Secrets, decoded."""
    return {
        OWNER_SECRET: {"username": OWNER_USER, "password": PASSWORD},
        "main-operator": {"username": "bloodraven", "password": "op-pw"},
        "main-readonly": {"username": "reader", "password": "ro-pw"},
    }


@dataclass
class World:
    """What a pass finds: the order, its group, the Secrets of its namespace, its peers, and
    how the group's primary answers."""

    order: dict[str, Any] = field(default_factory=make_order)
    group: dict[str, Any] | None = field(default_factory=make_group)
    secrets: dict[str, dict[str, str]] = field(default_factory=default_secrets)
    peers: tuple[dict[str, Any], ...] = ()
    waiting: tuple[str, ...] = ()
    """The peers that are not Ready: an apply or a release wakes them."""
    rows: list[tuple[Any, ...]] = field(default_factory=lambda: [("read_only", 0, "")])
    """What the observation query answers."""
    dialect: Dialect = Dialect.MARIADB
    read_only_bypassed: bool = False
    open_error: BaseException | None = None
    """Raised when a session is asked for: the pool's refusal (busy, circuit, TLS, login)."""
    execute_error: tuple[int, BaseException] | None = None
    """Raised at the statement of this index (0 first) of the session's batch."""
    probe: Callable[[], object] | None = None
    """Read at each status write (``WorldIO.probed``): what was true when the order showed it."""


@dataclass
class FakeSession:
    """The group's primary: answers the observation from the World, records what is sent."""

    world: World
    queries: list[Statement] = field(default_factory=list)
    sent: list[Statement] = field(default_factory=list)
    bound: list[Mapping[str, str]] = field(default_factory=list)
    executed: int = 0

    @property
    def dialect(self) -> Dialect:
        return self.world.dialect

    @property
    def read_only_bypassed(self) -> bool:
        return self.world.read_only_bypassed

    @property
    def privilege_columns(self) -> tuple[tuple[str, str], ...]:
        return ()

    @property
    def folds_case(self) -> bool:
        return False

    def query(self, statement: Statement) -> list[tuple[Any, ...]]:
        self.queries.append(statement)
        return list(self.world.rows)

    def execute(
        self,
        statements: Sequence[Statement],
        values: Mapping[str, str],
        check: Callable[[], None] | None = None,
    ) -> None:
        self.bound.append(dict(values))
        for index, statement in enumerate(statements):
            if check is not None:
                check()
            failing = self.world.execute_error
            if failing is not None and failing[0] == index:
                raise failing[1]
            self.sent.append(statement)
            self.executed += 1


def _decoded(values: Mapping[str, str]) -> dict[str, str]:
    # As the API server stores them and MysqlOrders decodes them: round-trip through base64.
    return {k: base64.b64decode(b64(v)).decode() for k, v in values.items()}


@dataclass
class WorldIO:
    """The kind's I/O over a World: the reads answer from it, the writes are recorded."""

    world: World
    statuses: list[dict[str, Any]] = field(default_factory=list)
    finalizers: list[list[str]] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    sessions: list[FakeSession] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    """Every write in order: ``status:<phase>``, ``event:<reason>``, ``finalizers``."""
    probed: list[object] = field(default_factory=list)
    """What ``World.probe`` read at each status write."""
    secret_reads: list[str] = field(default_factory=list)
    """The Secrets read, by name, in order."""
    reused: list[bool] = field(default_factory=list)
    """Whether each session asked for a login read lately (a quiet refresh's check)."""

    def group(self, key: OrderKey, name: str) -> dict[str, Any] | None:
        group = self.world.group
        if group is None or group["metadata"]["name"] != name:
            return None
        return copy.deepcopy(group)

    def secret(self, key: OrderKey, name: str) -> SecretData | None:
        self.secret_reads.append(name)
        values = self.world.secrets.get(name)
        if values is None:
            return None
        # A write of other values is a new resourceVersion, as on the API server.
        version = hashlib.sha256(repr(sorted(values.items())).encode()).hexdigest()[:8]
        return SecretData(f"uid-{name}", version, _decoded(values))

    def owner(self, key: OrderKey, name: str) -> OwnerSecret | None:
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
        found: dict[str, Mapping[str, str] | None] = {}
        for name in names:
            data = self.secret(key, name)
            found[name] = None if data is None else data.values
        return found

    def peers(self, key: OrderKey, order: Mapping[str, Any], owner_username: str | None) -> Peers:
        return Peers(self.world.peers, self.world.waiting)

    @contextmanager
    def session(
        self, key: OrderKey, group: Mapping[str, Any], site: str, *, reuse: bool = False
    ) -> Iterator[MysqlSession]:
        self.reused.append(reuse)
        if self.world.open_error is not None:
            raise self.world.open_error
        session = FakeSession(self.world)
        self.sessions.append(session)
        yield session

    def write_status(
        self,
        key: OrderKey,
        order: dict[str, Any],
        status: Mapping[str, Any],
        check: Callable[[], None],
    ) -> dict[str, Any]:
        if self.world.probe is not None:
            self.probed.append(self.world.probe())
        self.statuses.append(dict(status))
        self.log.append(f"status:{status.get('phase')}")
        written = {**order, "status": dict(status)}
        self.world.order = written
        return written

    def set_finalizers(
        self, key: OrderKey, order: dict[str, Any], finalizers: list[str]
    ) -> dict[str, Any]:
        self.finalizers.append(list(finalizers))
        self.log.append("finalizers")
        written = {**order, "metadata": {**order["metadata"], "finalizers": list(finalizers)}}
        self.world.order = written
        return written

    def event(self, key: OrderKey, order: Mapping[str, Any], event: Event) -> None:
        self.events.append(event)
        self.log.append(f"event:{event.reason}")

    # -- what a test reads -------------------------------------------------------------------

    @property
    def sent(self) -> list[Statement]:
        """Every writing statement every session sent, in order."""
        return [s for session in self.sessions for s in session.sent]

    @property
    def status(self) -> dict[str, Any]:
        """The status last written."""
        return self.statuses[-1]

    def condition(self) -> tuple[str, str, str]:
        """(status, reason, message) of the Ready condition last written."""
        for c in self.status.get("conditions") or ():
            if c["type"] == "Ready":
                return (c["status"], c["reason"], c["message"])
        raise AssertionError("no Ready condition written")


@dataclass
class WorldOrders:
    """The order store over a World."""

    io: WorldIO

    def fetch(self, key: OrderKey) -> dict[str, Any] | None:
        return copy.deepcopy(self.io.world.order)

    def set_finalizers(
        self, key: OrderKey, raw: dict[str, Any], finalizers: list[str]
    ) -> dict[str, Any]:
        return self.io.set_finalizers(key, raw, finalizers)

    def write_status(
        self, key: OrderKey, raw: dict[str, Any], status: dict[str, Any], check: Callable[[], None]
    ) -> dict[str, Any]:
        return self.io.write_status(key, raw, status, check)


@dataclass
class WorldRuntime:
    """The scaffold's runtime over a World: a real work queue on fakeredis."""

    io: WorldIO
    queue: WorkQueue
    published: list[OrderKey] = field(default_factory=list)
    ready: list[dict[str, Any]] = field(default_factory=list)
    remembered: list[Mapping[str, Any]] = field(default_factory=list)
    note: str | None = None
    """The note the entry left (Redis, in a real worker)."""

    @property
    def orders(self) -> WorldOrders:
        return WorldOrders(self.io)

    def note_ready(self, key: OrderKey, order: Mapping[str, Any]) -> None:
        self.ready.append(dict(order))

    def remember_write(self, cluster: str, answer: Mapping[str, Any] | None) -> None:
        if answer is not None:
            self.remembered.append(answer)

    def save_note(self, lease: Lease, note: object) -> None:
        self.note = note_text(note)

    def load_note(self, lease: Lease, note_type: type[Any]) -> Any:
        if self.note is None:
            return None
        return TypeAdapter(note_type).validate_json(self.note)

    @property
    def full_refresh_seconds(self) -> float:
        return 43200.0

    def look_quiet(self, key: OrderKey) -> tuple[QuietLook, str | None]:
        return self.queue.look_quiet(key)

    def record_quiet(self, key: OrderKey, basis: QuietBasis, note: str) -> None:
        self.queue.record_quiet(key, basis, note, int(self.full_refresh_seconds * 1000))

    def forget_quiet(self, key: OrderKey) -> None:
        self.queue.forget_quiet(key)


def make_runtime(world: World) -> WorldRuntime:
    """A runtime over the world, its queue on a fakeredis server of its own."""
    published: list[OrderKey] = []
    queue = WorkQueue(
        fakeredis.FakeRedis(),
        published.append,
        prefix="tenantdb-test:",
        seal_keys=SealKeys.parse("k" * 32),
    )
    return WorldRuntime(WorldIO(world), queue, published)


KEY = IDENTITY.key(NAMESPACE, ORDER)


@dataclass
class PassRun:
    """What one real pass over a World did."""

    io: WorldIO
    runtime: WorldRuntime
    entry: PassOutcome
    results: list[StepResult] = field(default_factory=list)
    raised: BaseException | None = None

    @property
    def steps(self) -> tuple[str, ...]:
        """The steps the entry handed over, by name."""
        if self.entry.handoff is None:
            return ()
        return tuple(name.rsplit(".", 1)[-1] for name in self.entry.handoff.steps)

    @property
    def reason(self) -> str:
        """The reason of the last task: the last step's, or the entry's."""
        return self.results[-1].reason if self.results else self.entry.reason

    @property
    def result(self) -> StepResult:
        """What the last step reported."""
        return self.results[-1]


def run_pass(
    world: World,
    *,
    runtime: WorldRuntime | None = None,
    attempt: int = 0,
    before_steps: Callable[[World], None] | None = None,
) -> PassRun:
    """Run the entry of one pass over the world's order, then its chain's steps in order.

    ``before_steps`` changes the world between the entry and its steps; ``attempt`` is the
    attempt the steps run as (1 and up: a retry).
    """
    runtime = runtime or make_runtime(world)
    queue = runtime.queue
    lease = queue.acquire(KEY)
    assert lease is not None  # a fresh fakeredis holds no lease
    guard = Heartbeat(queue, lease, 10.0)
    try:
        return _run(world, runtime, lease, guard, attempt, before_steps)
    finally:
        queue.redis.delete(queue.keys.lock(KEY))  # the pass ends: its lease goes


def _run(
    world: World,
    runtime: WorldRuntime,
    lease: Lease,
    guard: Heartbeat,
    attempt: int,
    before_steps: Callable[[World], None] | None,
) -> PassRun:
    outcome = scaffold.serve(kind.SPEC, PassContext(KEY, guard), io=runtime.io, runtime=runtime)
    run = PassRun(runtime.io, runtime, outcome)
    if outcome.handoff is None:
        return run
    runtime.note = outcome.handoff.note
    deleting = bool(world.order["metadata"].get("deletionTimestamp"))
    if before_steps is not None:
        before_steps(world)
    declared = kind.SPEC.teardown_steps if deleting else kind.SPEC.steps
    steps = {kind.SPEC.task_name(step): step for step in declared}
    for position, name in enumerate(outcome.handoff.steps, start=1):
        ctx = StepContext(KEY, lease, guard, position, attempt)
        try:
            result = scaffold.run_body(
                kind.SPEC, steps[name], ctx, teardown=deleting, io=runtime.io, runtime=runtime
            )
        except Exception as error:  # the run reports what the step raised
            run.raised = error
            return run
        run.results.append(result)
        if result.done:
            return run
    return run
