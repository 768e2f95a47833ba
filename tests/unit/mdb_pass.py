"""Run one real MariaDBDatabase pass over a ``World``: the product's entry and steps, fake I/O.

``run_pass`` calls the scaffold's ``serve`` with the kind's declaration (``tasks.mariadbdatabase``),
then each step of the chain the entry handed over (the teardown's, for a deleting order), in
order, with the note the entry left, as a Celery chain would. Only the I/O is replaced: the order
store and the kind's I/O (``MariaDBIO``) answer from the ``World`` and record what is written (the
Ready states for the orders gauges too), every write succeeding except the OpenBao role when the
world says it fails. A step that fails with a retry ends the run, as its first attempt would.
What the pass composed is read from what it handed its I/O: each pass record as the pass wrote
it, and the provision and delivery plans as core plans them over the observations served.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import TypeAdapter

import tasks.mariadbdatabase as kind
import tasks.scaffold as scaffold
from tasks.chain import RetryStepError, StepContext, note_text
from tasks.reconcile import PassContext
from tenantdb.adapters.mariadbdatabase import (
    ActionError,
    Failed,
    FetchedOrder,
    Kept,
    Noted,
    Remember,
    UnreadableError,
    ignore_failure,
    keep_nothing,
    parse_databases,
    parse_object,
    run_in_order,
)
from tenantdb.adapters.workqueue import Heartbeat, Lease, WorkQueue
from tenantdb.core.actions import ApplyObject, ObjectRef
from tenantdb.core.events import Event
from tenantdb.core.keys import OrderKey
from tenantdb.core.mariadbdatabase.actions import Action, EnsureRole
from tenantdb.core.mariadbdatabase.conditions import build_status_body
from tenantdb.core.mariadbdatabase.delivery import DeliveryObservation, DeliveryPlan, plan_delivery
from tenantdb.core.mariadbdatabase.gates import ControlPlaneRead
from tenantdb.core.mariadbdatabase.models import (
    ControlPlane,
    DatabaseCR,
    MariaDBDatabase,
    MariaDBDatabaseStatus,
    SecretStore,
)
from tenantdb.core.mariadbdatabase.naming import IDENTITY
from tenantdb.core.mariadbdatabase.openbao import OpenBaoConnection, compute_connection
from tenantdb.core.mariadbdatabase.passes import PassRecord
from tenantdb.core.mariadbdatabase.provision import (
    ProvisionObservation,
    ProvisionPlan,
    plan_provision,
)
from tenantdb.core.mariadbdatabase.results import Unreadable
from tenantdb.core.mariadbdatabase.scope import OrderScope, compute_order_scope
from tenantdb.core.mariadbdatabase.teardown import TeardownObservation
from tenantdb.core.objects import KubeObject, Secret
from tenantdb.core.quiet import QuietBasis, QuietLook
from tests.unit.mdb_builders import CONNECTION, World


@dataclass
class NoteLog:
    """The notes a step left for the steps after it (Redis, in a real worker)."""

    saved: list[object] = field(default_factory=list)


@dataclass
class WorldIO:
    """The kind's adapter and the order store, answering from a World."""

    world: World
    statuses: list[MariaDBDatabaseStatus] = field(default_factory=list)
    finalizers: list[list[str]] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    status_patches: list[dict[str, Any]] = field(default_factory=list)
    """What ``write_unreadable_status`` sent, one patch a write."""
    notes: NoteLog = field(default_factory=lambda: NoteLog())
    ready: list[tuple[OrderKey, dict[str, Any]]] = field(default_factory=list)
    """The orders as ``note_ready`` received them (Redis, in a real worker)."""
    schema_releases: list[str] = field(default_factory=list)
    """The schemas whose claim a teardown let go of (Redis, in a real worker)."""
    events: list[Event] = field(default_factory=list)
    """The Events the status writes recorded on the order."""
    records: list[PassRecord] = field(default_factory=list)
    """Each pass record the pass handed over to be carried out, written or not."""
    provisions: list[ProvisionObservation] = field(default_factory=list)
    """The provision observations served, the OpenBao role's last."""
    deliveries: list[DeliveryObservation] = field(default_factory=list)
    """The delivery observations served."""
    role_checks: list[EnsureRole] = field(default_factory=list)
    """The roles a quiet check asked OpenBao about."""

    def note_ready(self, key: OrderKey, order: dict[str, Any]) -> None:
        self.ready.append((key, order))

    # -- the order store -----------------------------------------------------------------------

    def fetch(self, key: OrderKey) -> dict[str, Any]:
        if self.world.order_raw is not None:
            return self.world.order_raw
        return self.world.order.model_dump(mode="json", by_alias=True, exclude_none=True)

    def set_finalizers(
        self, key: OrderKey, fetched: FetchedOrder, finalizers: list[str]
    ) -> FetchedOrder:
        raw = _with_finalizers(self, fetched.raw, finalizers)
        return FetchedOrder.of(raw)

    # -- the kind's adapter --------------------------------------------------------------------

    def read_control_plane(self, order: MariaDBDatabase) -> ControlPlaneRead:
        try:
            return ControlPlaneRead(self.fetch_control_plane(order))
        except UnreadableError as exc:
            return ControlPlaneRead(unreadable=Unreadable(exc.context, exc.message))

    def fetch_control_plane(self, order: MariaDBDatabase) -> ControlPlane | None:
        if self.world.cp_raw is not None:
            return parse_object(ControlPlane, self.world.cp_raw, "ControlPlane")
        return self.world.cp

    def fetch_connection(self, scope: OrderScope) -> OpenBaoConnection:
        if self.world.store_raw is not None:
            store = parse_object(SecretStore, self.world.store_raw, scope.store.kind)
            return compute_connection(store)
        return CONNECTION

    def read_provision(self, order: MariaDBDatabase, scope: OrderScope) -> ProvisionObservation:
        world = self.world
        connection = self.fetch_connection(scope)
        observation = ProvisionObservation(
            order=order,
            scope=scope,
            connection=connection,
            keystone_cluster_error=world.keystone_cluster_error,
            mariadb=world.mariadb,
            databases=world.databases
            if world.database_raws is None
            else parse_databases(list(world.database_raws), scope.names.database_cr),
            client_certificate=world.client_certificate,
            vault_dynamic_secret=world.vault_dynamic_secret,
            external_secret=world.external_secret,
            materialised_secret=world.materialised,
            claimed_by=world.claimed_by,
        )
        if world.children_live:
            observation = replace(observation, live=_as_wanted(plan_provision(observation).actions))
        self.provisions.append(observation)
        return observation

    def release_schema(self, order: MariaDBDatabase, scope: OrderScope) -> None:
        self.schema_releases.append(scope.schema)

    def observe_role(
        self, observation: ProvisionObservation, role: EnsureRole | None
    ) -> ProvisionObservation:
        if role is not None and self.world.openbao_role != "unobserved":
            observation = replace(observation, role=self._role(role), role_observed=True)
        self.provisions.append(observation)
        return observation

    def _role(self, role: EnsureRole) -> dict[str, Any] | None:
        stands = self.world.openbao_role
        if stands == "absent":
            return None
        body = role.body.to_request()
        return {**body, "max_ttl": body["max_ttl"] + 1} if stands == "drifted" else body

    def role_as_desired(self, role: EnsureRole) -> bool:
        self.role_checks.append(role)
        return self.world.openbao_role == "desired"

    def fetch_delivery(
        self,
        order: MariaDBDatabase,
        scope: OrderScope,
        cp: ControlPlane,
        provision: ProvisionObservation | None = None,
    ) -> DeliveryObservation:
        world = self.world
        observation = DeliveryObservation(
            order=order,
            scope=scope,
            control_plane=cp,
            database_name=scope.schema,
            keystone_cluster_error=world.delivery_keystone_cluster_error,
            ca_bundle=world.ca_bundle,
            materialised_secret=world.materialised,
            external_secret=world.external_secret,
            delivered_secret=world.delivered,
        )
        wanted = plan_delivery(observation).apply
        if world.children_live and wanted is not None:
            live = _as_wanted((wanted,))[wanted.ref]
            secret = Secret.model_validate(live)
            observation = replace(observation, delivered_secret=secret, delivered_raw=live)
        self.deliveries.append(observation)
        return observation

    def apply_delivery(
        self, apply: ApplyObject | None, check: Callable[[], None], remember: Remember
    ) -> Secret | None:
        if apply is None:
            return None
        answer = self._run(apply)
        return None if answer is None else Secret.model_validate(answer)

    def read_teardown(self, order: MariaDBDatabase, cluster: str) -> TeardownObservation:
        cp = self.fetch_control_plane(order)
        scope = compute_order_scope(order, cluster, cp)
        return self.fetch_teardown(
            order,
            scope,
            control_plane_present=cp is not None,
            connection=self.fetch_connection(scope),
        )

    def fetch_teardown(
        self,
        order: MariaDBDatabase,
        scope: OrderScope,
        *,
        control_plane_present: bool,
        connection: OpenBaoConnection,
    ) -> TeardownObservation:
        world = self.world
        databases = (
            world.databases
            if world.database_raws is None
            else tuple(parse_object(DatabaseCR, d, "Database") for d in world.database_raws)
        )
        return TeardownObservation(
            order=order,
            scope=scope,
            control_plane_present=control_plane_present,
            connection=connection,
            client_certificate=world.client_certificate,
            external_secrets=()
            if world.external_secret is None
            else (KubeObject(metadata=world.external_secret.metadata),),
            databases=databases,
            delivered_secret=world.delivered,
        )

    def run_each(
        self,
        actions: Iterable[tuple[int, Action]],
        check: Callable[[], None],
        remember: Remember,
        *,
        keep_going: bool = False,
        failed: Failed = ignore_failure,
    ) -> tuple[tuple[int, str], ...]:
        return run_in_order(
            actions,
            lambda action, _check: self._run(action),
            check,
            remember,
            keep_going=keep_going,
            failed=failed,
        )

    def _run(self, action: Action) -> dict[str, Any] | None:
        self.actions.append(action)
        if isinstance(action, EnsureRole) and self.world.role_error is not None:
            error, status = self.world.role_error
            raise ActionError(error, status)
        if isinstance(action, ApplyObject):
            if action.ref.kind == "Secret" and self.world.applied is not None:
                return self.world.applied.model_dump(mode="json", by_alias=True)
            return action.manifest
        return None

    def write_unreadable_status(
        self,
        key: OrderKey,
        raw: dict[str, Any],
        compute: Callable[[Mapping[str, Any]], Mapping[str, Any]],
        check: Callable[[], None],
    ) -> dict[str, Any]:
        patch = dict(compute(raw.get("status") or {}))
        if patch:
            self.status_patches.append(patch)
        return raw

    def write_record(
        self,
        key: OrderKey,
        fetched: FetchedOrder,
        rec: PassRecord,
        check: Callable[[], None],
        noted: Noted,
        written: Kept = keep_nothing,
    ) -> None:
        self.records.append(rec)
        if not rec.write_status:
            return
        self.statuses.append(rec.status)
        stored = {**fetched.raw, "status": build_status_body(rec.status)}
        noted(key, stored)
        self.events.extend(rec.events)
        written(stored)


def _as_wanted(actions: Iterable[Action]) -> dict[ObjectRef, dict[str, Any]]:
    """What the API server answers for each child the actions apply, as they want it."""
    return {
        a.ref: {**a.manifest, "metadata": {**a.manifest["metadata"], "uid": "u"}}
        for a in actions
        if isinstance(a, ApplyObject)
    }


def _with_finalizers(io: WorldIO, raw: dict[str, Any], finalizers: list[str]) -> dict[str, Any]:
    io.finalizers.append(finalizers)
    return {**raw, "metadata": {**raw["metadata"], "finalizers": finalizers}}


@dataclass
class PassRun:
    """What one real pass over a World did and composed."""

    io: WorldIO
    reason: str
    steps: tuple[str, ...] = ()
    requeue_after: float | None = None
    """When the entry asked to come back, in seconds (for a pass it ended itself)."""

    @property
    def record(self) -> PassRecord:
        """The pass as the product composed it last."""
        return self.io.records[-1]

    @property
    def provision(self) -> ProvisionPlan | None:
        """The last provision plan, over the last observation served (None: the gates stopped
        the pass, or the leg could not read its inputs)."""
        served = self.io.provisions
        return plan_provision(served[-1]) if served else None

    @property
    def delivery(self) -> DeliveryPlan | None:
        """The last delivery plan, over the last observation served (None: the pass did not
        get that far)."""
        served = self.io.deliveries
        return plan_delivery(served[-1]) if served else None

    def condition(self, condition_type: str) -> tuple[str, str, str] | None:
        """Return (status, reason, message) of a condition after the pass."""
        for c in self.record.status.conditions:
            if c.type == condition_type:
                return (c.status, c.reason, c.message)
        return None


class _Guard(Heartbeat):
    """A heartbeat over no lease: a pass run here never loses it."""

    def __init__(self) -> None:
        """Keep no lease and start no thread."""

    def check(self) -> None:
        """A pass run here never loses its lease."""


@dataclass
class WorldOrders:
    """The order store over a World: reads the World's order, records finalizer writes."""

    io: WorldIO

    def fetch(self, key: OrderKey) -> dict[str, Any] | None:
        return self.io.fetch(key)

    def set_finalizers(
        self, key: OrderKey, raw: dict[str, Any], finalizers: list[str]
    ) -> dict[str, Any]:
        return _with_finalizers(self.io, raw, finalizers)

    def write_status(
        self, key: OrderKey, raw: dict[str, Any], status: dict[str, Any], check: Callable[[], None]
    ) -> dict[str, Any]:
        self.io.status_patches.append(status)
        return {**raw, "status": status}


@dataclass
class QuietBook:
    """What Redis holds for quiet refreshes across passes: the order's touch count, the
    watcher's leader token (None: no watcher leads) and the basis with its note."""

    touched: int = 0
    leader: str | None = "watcher-term-1"
    full_every: float = 43200.0
    basis: QuietBasis | None = None
    note: str | None = None
    forgotten: int = 0
    """How many times a pass dropped the basis."""


@dataclass
class WorldRuntime:
    """The scaffold's runtime over a World: the order store is the World's, Redis is lists."""

    io: WorldIO
    book: QuietBook = field(default_factory=QuietBook)
    note: str | None = None
    """The pass's note as Redis would hold it (JSON)."""

    @property
    def orders(self) -> WorldOrders:
        return WorldOrders(self.io)

    @property
    def queue(self) -> WorkQueue:
        raise AssertionError("a MariaDBDatabase pass uses no work queue of its own")

    def note_ready(self, key: OrderKey, order: Mapping[str, Any]) -> None:
        self.io.note_ready(key, dict(order))

    def remember_write(self, cluster: str, answer: Mapping[str, Any] | None) -> None:
        """The watcher's echo record is Redis's; nothing here reads it."""

    def save_note(self, lease: Lease, note: object) -> None:
        self.io.notes.saved.append(note)
        self.note = note_text(note)

    def load_note(self, lease: Lease, note_type: type[Any]) -> Any:
        return None if self.note is None else TypeAdapter(note_type).validate_json(self.note)

    @property
    def full_refresh_seconds(self) -> float:
        return self.book.full_every

    def look_quiet(self, key: OrderKey) -> tuple[QuietLook, str | None]:
        book = self.book
        return QuietLook(book.touched, book.leader, book.basis), book.note

    def record_quiet(self, key: OrderKey, basis: QuietBasis, note: str) -> None:
        self.book.basis, self.book.note = basis, note

    def forget_quiet(self, key: OrderKey) -> None:
        self.book.basis, self.book.note = None, None
        self.book.forgotten += 1


def run_pass(
    world: World,
    book: QuietBook | None = None,
    before_steps: Callable[[WorldRuntime], None] | None = None,
) -> PassRun:
    """Run the entry of one pass over the world's order, then its chain's steps in order;
    ``book`` carries what Redis keeps for quiet refreshes from one pass to the next, and
    ``before_steps`` may change what the entry left (its note) before the steps run."""
    key = IDENTITY.key(world.order.metadata.namespace, world.order.metadata.name, world.cluster)
    io = WorldIO(world)
    runtime = WorldRuntime(io, QuietBook() if book is None else book)
    outcome = scaffold.serve(kind.SPEC, PassContext(key, _Guard()), io=io, runtime=runtime)
    run = PassRun(io, outcome.reason, requeue_after=outcome.requeue_after)
    if outcome.handoff is None:
        return run
    handoff = outcome.handoff
    deleting = world.order.metadata.deletion_timestamp is not None
    declared = kind.SPEC.teardown_steps if deleting else kind.SPEC.steps
    steps = {kind.SPEC.task_name(step): step for step in declared}
    run = replace(run, steps=tuple(steps[name].name for name in handoff.steps))
    runtime.note = handoff.note  # the note travels as JSON, as it does through Redis
    if before_steps is not None:
        before_steps(runtime)
    for position, name in enumerate(handoff.steps, start=1):
        ctx = StepContext(key, Lease(key, "token", 1), _Guard(), position)
        try:
            result = scaffold.run_body(
                kind.SPEC, steps[name], ctx, teardown=deleting, io=io, runtime=runtime
            )
        except RetryStepError as failure:
            return replace(run, reason=failure.reason)
        if result.done:
            return replace(run, reason=result.reason)
    return run
