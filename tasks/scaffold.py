"""The kind scaffold: what every order kind declares, and the pass flow that serves them all.

A kind is one ``KindSpec``: its identity (``tenantdb.core.kinds``), how its order is read, its
gates, how it plans the children a live order needs and the removals a deleting one needs, what
it records when there is nothing to write, and its chain steps. ``declare_kind`` registers the
kind's entry with ``tasks.reconcile`` and one Celery task per step, named
``tenantdb.<kind>.<chain>.<step>`` and routed to the chain's queue.

The flow is the scaffold's, decided step by step by ``tenantdb.core.pass_path.decide_path``: read
the order once; gone or released ends the pass; a deleting order holding the finalizer is torn
down; otherwise the kind's gates run, the finalizer is added in the same pass when they ask for
it (that write wakes nothing), a gate that stops the pass has the kind record why, and past the
gates the kind plans. A plan with a write returns its steps and note as the entry's
``Handoff`` (``tasks.chain``), which the entry task chains under the pass's lease; a plan
without one is settled by the kind in the entry. The teardown works the same way.

A kind's callbacks receive a ``KindPass`` (the entry) or a ``KindStep`` (a chain step): the
order's key and lease guard, the kind's own I/O (``KindSpec.io``) and the ``Runtime`` every kind
shares (the order store, the work queue, the Ready book, the pass's note, the record of own
writes). ``serve`` and ``run_body`` take both as parameters, so a test runs a real pass or step
over I/O of its own.

A kind may also serve quiet refreshes (``tenantdb.core.quiet``): a converged pass whose plan
carries a quiet note leaves it as the order's basis, and a later pass that nothing touched since,
under the same watcher term, hands the note to the kind's ``quiet`` check instead of reading the
order and its children; when the check does not confirm the order, the pass reads in full. Any
full pass forgets the basis first; only its converged end leaves a new one.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from celery import shared_task
from pydantic import ValidationError
from redis import RedisError

from tasks.chain import (
    Handoff,
    StepContext,
    StepResult,
    StepTask,
    note_text,
    note_ttl_ms,
    note_value,
    run_step,
)
from tasks.reconcile import PassContext, PassOutcome, register_pass
from tasks.runtime import AnyTask, PerRegistry, note_ready, workqueue
from tenantdb.adapters.clusters import ClusterUnavailableError
from tenantdb.adapters.metrics import NOTES_REFUSED, PASSES
from tenantdb.adapters.orders import OrderStore
from tenantdb.adapters.workqueue import Lease, NoteRefusedError, WorkQueue
from tenantdb.core.actions import LogEvent, LogLevel
from tenantdb.core.keys import OrderKey
from tenantdb.core.kinds import KindIdentity, register_identity
from tenantdb.core.objects import ObjectMeta
from tenantdb.core.pass_path import PassPath, Verdict, decide_path, observe_order
from tenantdb.core.quiet import (
    QuietBasis,
    QuietLook,
    QuietVerdict,
    decide_quiet,
    may_record_basis,
)
from tenantdb.core.tasknames import Queue, step_task_name
from tenantdb.settings import load_settings

log = logging.getLogger(__name__)

Order = TypeVar("Order")
"""A kind's typed view of its order."""
Decision = TypeVar("Decision")
"""What a kind's gates decided, handed back to it when it plans or records."""
Local = TypeVar("Local")
"""What a live order's plan keeps in memory for ``settle`` when it writes nothing."""
Gone = TypeVar("Gone")
"""What a deleting order's plan keeps in memory for ``finalize`` when it deletes nothing."""
IO = TypeVar("IO")
"""A kind's own I/O: the children it reads and writes."""

_LEVELS = {
    LogLevel.INFO: logging.INFO,
    LogLevel.DEBUG: logging.DEBUG,
    LogLevel.ERROR: logging.ERROR,
}


class Orders(Protocol):
    """The order reads and writes every kind's pass makes (``OrderStore`` in a worker)."""

    def fetch(self, key: OrderKey) -> dict[str, Any] | None:
        """The order as stored; None when it is gone."""
        ...

    def set_finalizers(
        self, key: OrderKey, raw: dict[str, Any], finalizers: list[str]
    ) -> dict[str, Any]:
        """Replace the order's finalizers; return the order as written."""
        ...

    def write_status(
        self, key: OrderKey, raw: dict[str, Any], status: dict[str, Any], check: Callable[[], None]
    ) -> dict[str, Any]:
        """Write the order's status body; return the order as written."""
        ...


class Guard(Protocol):
    """What confirms the pass still holds its lease before each write (``Heartbeat``)."""

    def check(self) -> None:
        """Raise ``LeaseLostError`` when the lease is lost."""
        ...


class Runtime(Protocol):
    """What a pass uses besides its kind's own I/O: the orders, the pass's note, the Ready
    book, the record of its own writes and the work queue (timetables, wakes)."""

    @property
    def orders(self) -> Orders:
        """The order store."""
        ...

    @property
    def queue(self) -> WorkQueue:
        """The work queue."""
        ...

    def note_ready(self, key: OrderKey, order: Mapping[str, Any]) -> None:
        """Record the order's Ready state as read or written."""
        ...

    def remember_write(self, cluster: str, answer: Mapping[str, Any] | None) -> None:
        """Remember an object the pass wrote, so its watch event wakes no order."""
        ...

    def save_note(self, lease: Lease, note: object) -> None:
        """Replace the pass's note for the steps after this one."""
        ...

    def load_note(self, lease: Lease, note_type: type[Any]) -> Any:
        """The note the pass left, as ``note_type``; None when it expired."""
        ...

    @property
    def full_refresh_seconds(self) -> float:
        """How long a basis lets refreshes be quiet; 0 turns quiet refreshes off."""
        ...

    def look_quiet(self, key: OrderKey) -> tuple[QuietLook, str | None]:
        """The order's touch count, the watcher's term and the order's basis with its note."""
        ...

    def record_quiet(self, key: OrderKey, basis: QuietBasis, note: str) -> None:
        """Leave the basis a converged pass vouches for, with the kind's quiet note."""
        ...

    def forget_quiet(self, key: OrderKey) -> None:
        """Drop the order's basis."""
        ...


@dataclass(frozen=True, slots=True)
class KindPass(Generic[IO]):
    """What a kind's entry callbacks receive: the order, the lease's guard, and the I/O."""

    key: OrderKey
    guard: Guard
    io: IO
    """The kind's own I/O."""
    runtime: Runtime


@dataclass(frozen=True, slots=True)
class KindStep(Generic[IO]):
    """What a kind's step bodies receive: the step's place in its pass, and the I/O."""

    key: OrderKey
    lease: Lease
    guard: Guard
    io: IO
    runtime: Runtime
    step: int = 1
    """The step's position in its chain, 1 first."""
    attempt: int = 0
    """Which attempt of the step this is, 0 first; a retry is 1 and up."""

    def save_note(self, note: object) -> None:
        """Replace the pass's note, for the steps after this one."""
        self.guard.check()
        self.runtime.save_note(self.lease, note)


@dataclass(frozen=True)
class Admission(Generic[Decision]):
    """The gates' answer: the verdict the flow needs, and the kind's own decision."""

    verdict: Verdict
    decision: Decision


@dataclass(frozen=True)
class Plan(Generic[Local]):
    """What a kind plans for one pass.

    ``steps`` are the chain steps with a write, in order (empty: nothing to write). ``note`` is
    what those steps read instead of observing again: it is stored as JSON under the pass's
    lease, so it holds no credential. ``local`` is what the kind needs to settle a pass without
    a chain, kept in memory only.
    """

    steps: tuple[str, ...]
    note: object | None = None
    converged: bool = False
    local: Local | None = None
    reason: str = "Chained"
    """The entry's task result when it hands the steps to a chain."""
    quiet: object | None = None
    """What the kind's quiet check needs, set only by a plan that leaves nothing to do: the
    pass that settles it leaves it as the order's basis. Stored as JSON; never a credential."""


@dataclass(frozen=True)
class Step:
    """One chain step of a kind: its name, its chain (and so its queue), and its body.

    The body receives the step's context and the note the pass's entry left, as ``note_type``.
    """

    name: str
    chain: Queue
    body: Callable[[KindStep[Any], Any], StepResult]
    note_type: type[Any]
    doc: str = ""


@runtime_checkable
class CheckedNote(Protocol):
    """A note type every kind's steps read: it says why a step must not act on it.

    Checked again before each step's body runs, although the note is sealed: whether the note
    is of the order the step serves and plans nothing beyond that order (its identifiers
    valid, no reserved account, writes on its own children only). A note it refuses runs
    nothing, and the order is planned afresh.
    """

    def refusal(self, key: OrderKey) -> str | None:
        """Why a step serving ``key`` must not act on this note; None when it may."""
        ...


@dataclass(frozen=True)
class KindSpec(Generic[Order, Decision, Local, Gone, IO]):
    """Everything the scaffold needs to serve one order kind."""

    identity: KindIdentity
    io: Callable[[], IO]
    """The kind's I/O in this process (rebuilt when the cluster configuration changes)."""
    read: Callable[[dict[str, Any]], Order]
    """Validate the order as stored into the kind's typed view."""
    admit: Callable[[KindPass[IO], Order, Decision | None], Admission[Decision]]
    """Run the gates; given the previous decision when they run again after the finalizer."""
    gated: Callable[[KindPass[IO], Order, Decision], PassOutcome]
    """Record why a gate stopped the pass."""
    plan: Callable[[KindPass[IO], Order, Decision], Plan[Local]]
    """Observe what the live order's children need, once, and plan the writes."""
    settle: Callable[[KindPass[IO], Order, Decision, Plan[Local]], PassOutcome]
    """End a pass with nothing to write: record it, deliver what it read."""
    teardown: Callable[[KindPass[IO], Order], Plan[Gone]]
    """Observe what a deleting order left, once, and plan its removal."""
    finalize: Callable[[KindPass[IO], Order, Plan[Gone]], PassOutcome]
    """End a teardown with nothing to delete: decide the finalizer."""
    steps: tuple[Step, ...] = ()
    """The steps a live order's chain is made of."""
    teardown_steps: tuple[Step, ...] = ()
    """The steps a deleting order's chain is made of."""
    step_tasks: Mapping[str, AnyTask] = field(default_factory=dict)
    """Filled by ``declare_kind``: the Celery task of each of ``steps``, by name."""
    teardown_tasks: Mapping[str, AnyTask] = field(default_factory=dict)
    """Filled by ``declare_kind``: the Celery task of each of ``teardown_steps``, by name."""
    unreadable: Callable[[KindPass[IO], dict[str, Any], ValidationError], PassOutcome] | None = None
    """Say on the order that its own body does not parse (``read`` raised), and end the pass;
    None for a kind whose ``read`` cannot fail."""
    quiet: Callable[[KindPass[IO], Any], bool] | None = None
    """Check what no watch sees of a converged order, given its quiet note (``quiet_note``):
    whether that confirms the order (if not, the pass reads in full). None for a kind without
    quiet refreshes."""
    quiet_note: type[Any] = object
    """The type of the kind's quiet note."""

    def task_name(self, step: Step) -> str:
        """The Celery task name of one of the kind's steps."""
        return step_task_name(self.identity.singular, step.chain, step.name)


# -- what kinds share ----------------------------------------------------------------------------

order_store = PerRegistry(OrderStore)
"""The order reads and writes of this worker process, on its current clusters."""

OWN_WRITE_TTL_MS = 60_000
"""How long the watcher recognises the event of one of tenantdb's writes as its echo."""


class ProcessRuntime:
    """The runtime of a worker process: its orders on its current clusters, its Redis."""

    @property
    def orders(self) -> Orders:
        """The order store of the current cluster configuration."""
        return order_store()

    @property
    def queue(self) -> WorkQueue:
        """The process's work queue."""
        return workqueue()

    def note_ready(self, key: OrderKey, order: Mapping[str, Any]) -> None:
        """Record the order's Ready state; a Redis failure costs only the gauge's freshness."""
        note_ready(key, order)

    def remember_write(self, cluster: str, answer: Mapping[str, Any] | None) -> None:
        """Remember the object a pass wrote, so the watch event it causes wakes no order.

        A Redis failure here only costs that event's pass.
        """
        if answer is None:
            return
        try:
            workqueue().note_written(cluster, answer, OWN_WRITE_TTL_MS)
        except RedisError:
            log.warning("could not note an own write; its watch event will cost a pass")

    def save_note(self, lease: Lease, note: object) -> None:
        """Replace the pass's note, for the steps after this one."""
        workqueue().save_note(lease, note_text(note), note_ttl_ms())

    def load_note(self, lease: Lease, note_type: type[Any]) -> Any:
        """The note the pass's entry left, as ``note_type``; None when it expired."""
        text = workqueue().load_note(lease)
        return None if text is None else note_value(text, note_type)

    @property
    def full_refresh_seconds(self) -> float:
        """``TENANTDB_FULL_REFRESH_SECONDS``."""
        return load_settings().full_refresh_seconds

    def look_quiet(self, key: OrderKey) -> tuple[QuietLook, str | None]:
        """The order's quiet look; a Redis failure finds no basis (the pass reads in full)."""
        try:
            return workqueue().look_quiet(key)
        except RedisError:
            return QuietLook(0, None), None

    def record_quiet(self, key: OrderKey, basis: QuietBasis, note: str) -> None:
        """Leave the basis for the full-refresh period; a Redis failure costs a full refresh."""
        ttl_ms = max(1, int(self.full_refresh_seconds * 1000))
        try:
            workqueue().record_quiet(key, basis, note, ttl_ms)
        except RedisError:
            log.warning("could not leave the order's quiet basis", extra={"order": str(key)})

    def forget_quiet(self, key: OrderKey) -> None:
        """Drop the basis. Raises ``RedisError``: a pass must not read in full over a basis it
        could not drop, or a later refresh could trust what this pass changed."""
        workqueue().forget_quiet(key)


PROCESS_RUNTIME = ProcessRuntime()


def emit(key: OrderKey, events: Iterable[LogEvent]) -> None:
    """Write the log lines a decision asked for; their fields never hold a credential."""
    for event in events:
        fields = dict(event.fields)
        text = " ".join(f"{k}={v!r}" for k, v in fields.items())
        log.log(
            _LEVELS[event.level],
            "%s%s",
            event.message,
            f" ({text})" if text else "",
            extra={"order": str(key), "fields": fields},
        )


def note_order(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The order as a note carries it: without its annotations and managed fields.

    No step reads either, and they are what can make an order large (annotations up to 256 KiB,
    a managed-fields entry per writer); every write a step makes patches, so nothing of them is
    lost on the object.
    """
    meta = {
        k: v
        for k, v in dict(raw.get("metadata") or {}).items()
        if k not in ("annotations", "managedFields")
    }
    return {**raw, "metadata": meta}


NOTE_GONE = StepResult("NoteGone", done=True, completed=False, again=True)
"""A step whose pass left no note (it expired): a new pass observes afresh."""

NOTE_REFUSED = StepResult("NoteRefused", done=True, completed=False, again=True)
"""A step whose pass's note in Redis no worker sealed (forged, tampered with, or past its
seal's time): it runs nothing, and a new pass plans afresh."""

DELETED_MEANWHILE = StepResult("DeletedMeanwhile", done=True, completed=False, again=True)
"""A retried step of a live order's chain whose order is being deleted: the teardown goes first."""


def _deleted_meanwhile(ctx: KindStep[Any], finalizer: str) -> bool:
    # A step retrying through an outage keeps the order's lease, so a deletion would wait for
    # the outage to end. Each retry looks at the order first (one read) and gives way when the
    # flow would no longer admit it: gone, or being deleted.
    raw = ctx.runtime.orders.fetch(ctx.key)
    meta = None if raw is None else ObjectMeta.model_validate(raw.get("metadata") or {})
    return decide_path(observe_order(meta, finalizer)) is not PassPath.ADMIT


# -- the flow ------------------------------------------------------------------------------------


def serve(
    spec: KindSpec[Order, Decision, Local, Gone, IO],
    pass_ctx: PassContext,
    *,
    io: IO | None = None,
    runtime: Runtime = PROCESS_RUNTIME,
) -> PassOutcome:
    """One pass over one order of the kind, as ``decide_path`` leads it.

    ``io`` and ``runtime`` default to this process's; a test hands in its own.
    """
    ctx = KindPass(pass_ctx.key, pass_ctx.guard, spec.io() if io is None else io, runtime)
    if spec.quiet is None:
        return _serve_in_full(spec, ctx)[0]
    look, note = runtime.look_quiet(ctx.key)
    quiet = _serve_quietly(spec, ctx, look, note)
    if quiet is not None:
        return quiet
    if look.basis is not None:
        runtime.forget_quiet(ctx.key)
    outcome, settled = _serve_in_full(spec, ctx)
    if settled is not None and may_record_basis(look, full_every=runtime.full_refresh_seconds):
        basis = QuietBasis(look.touched, str(look.leader), time.time())
        runtime.record_quiet(ctx.key, basis, _quiet_text(settled, outcome))
    return outcome


QUIET = "Quiet"
"""The entry's task result of a quiet pass."""


def _quiet_text(check: object, outcome: PassOutcome) -> str:
    """The stored quiet note: the kind's check and when the converged pass came back."""
    stored = {"check": json.loads(note_text(check)), "requeue": outcome.requeue_after}
    return json.dumps(stored, separators=(",", ":"))


def _serve_quietly(
    spec: KindSpec[Order, Decision, Local, Gone, IO],
    ctx: KindPass[IO],
    look: QuietLook,
    note: str | None,
) -> PassOutcome | None:
    """The outcome of a quiet pass, or None when the pass must read in full."""
    verdict = decide_quiet(look, now=time.time(), full_every=ctx.runtime.full_refresh_seconds)
    if verdict is not QuietVerdict.QUIET or note is None or spec.quiet is None:
        log.debug("pass reads in full (%s)", verdict.value, extra={"order": str(ctx.key)})
        return None
    try:
        stored = json.loads(note)
        check = note_value(json.dumps(stored["check"]), spec.quiet_note)
        requeue = stored["requeue"]
    except (ValueError, KeyError, TypeError):
        return None  # a note of an older shape: read in full, and leave a new one
    if not spec.quiet(ctx, check):
        log.info(
            "a quiet check did not confirm the order; reading it in full",
            extra={"order": str(ctx.key)},
        )
        return None
    PASSES.labels(kind=spec.identity.singular, path=PassPath.QUIET.value).inc()
    return PassOutcome(QUIET, None if requeue is None else float(requeue))


def _serve_in_full(
    spec: KindSpec[Order, Decision, Local, Gone, IO], ctx: KindPass[IO]
) -> tuple[PassOutcome, object | None]:
    """One pass that reads the order and its children, as ``decide_path`` leads it; with the
    quiet note of a plan the kind settled (None for any other end)."""
    kind, key, runtime = spec.identity.singular, ctx.key, ctx.runtime
    store = runtime.orders
    try:
        raw = store.fetch(key)
    except ClusterUnavailableError:
        log.warning(
            "the cluster the %s lives on does not resolve; skipping it",
            spec.identity.kind,
            extra={"order": str(key)},
        )
        PASSES.labels(kind=kind, path="unresolved").inc()
        return PassOutcome("ClusterUnresolved"), None
    meta = None if raw is None else ObjectMeta.model_validate(raw.get("metadata") or {})
    facts = observe_order(meta, spec.identity.finalizer)
    path = decide_path(facts)
    if raw is None or path is PassPath.GONE:
        PASSES.labels(kind=kind, path=PassPath.GONE.value).inc()
        return PassOutcome("Gone", gone=True), None
    runtime.note_ready(key, raw)
    if path is PassPath.RELEASED:
        return PassOutcome("Deleting"), None
    try:
        order = spec.read(raw)
    except ValidationError as exc:
        if spec.unreadable is None:
            raise
        PASSES.labels(kind=kind, path=PassPath.UNREADABLE.value).inc()
        return spec.unreadable(ctx, raw, exc), None
    if path is PassPath.TEARDOWN:
        PASSES.labels(kind=kind, path=path.value).inc()
        return _tear_down(spec, ctx, order), None
    admission = spec.admit(ctx, order, None)
    path = decide_path(replace(facts, verdict=admission.verdict))
    if path is PassPath.ADD_FINALIZER:
        # The finalizer write wakes nothing (a finalizer change passes no update predicate),
        # so the pass goes on with the order it wrote instead of asking for a pass of its own.
        ctx.guard.check()
        finalizers = [*(meta.finalizers if meta else ()), spec.identity.finalizer]
        raw = store.set_finalizers(key, raw, finalizers)
        order = spec.read(raw)
        facts = replace(facts, holds_finalizer=True)
        admission = spec.admit(ctx, order, admission.decision)
        path = decide_path(replace(facts, verdict=admission.verdict))
    if path is not PassPath.PLAN:
        PASSES.labels(kind=kind, path=PassPath.GATED.value).inc()
        return spec.gated(ctx, order, admission.decision), None
    plan = spec.plan(ctx, order, admission.decision)
    path = decide_path(
        replace(facts, verdict=admission.verdict, steps=plan.steps, converged=plan.converged)
    )
    PASSES.labels(kind=kind, path=path.value).inc()
    if path is PassPath.CHAIN:
        return _hand_over(spec, plan), None
    return spec.settle(ctx, order, admission.decision, plan), plan.quiet


def _tear_down(
    spec: KindSpec[Order, Decision, Local, Gone, IO], ctx: KindPass[IO], order: Order
) -> PassOutcome:
    plan = spec.teardown(ctx, order)
    if not plan.steps:
        return spec.finalize(ctx, order, plan)
    return _hand_over(spec, plan, teardown=True)


def _hand_over(
    spec: KindSpec[Any, Any, Any, Any, Any], plan: Plan[Any], *, teardown: bool = False
) -> PassOutcome:
    """The entry's outcome for a plan with writes: its steps' tasks and its note."""
    steps = {step.name: step for step in (spec.teardown_steps if teardown else spec.steps)}
    names = tuple(spec.task_name(steps[name]) for name in plan.steps)
    note = None if plan.note is None else note_text(plan.note)
    return PassOutcome(plan.reason, handoff=Handoff(names, note, note_ttl_ms()))


def run_body(
    spec: KindSpec[Any, Any, Any, Any, Any],
    step: Step,
    step_ctx: StepContext,
    *,
    teardown: bool = False,
    io: Any = None,
    runtime: Runtime = PROCESS_RUNTIME,
) -> StepResult:
    """Run one step's body over the note its pass left, as the step's task does.

    ``io`` and ``runtime`` default to this process's; a test hands in its own.
    """
    ctx = KindStep(
        step_ctx.key,
        step_ctx.lease,
        step_ctx.guard,
        spec.io() if io is None else io,
        runtime,
        step_ctx.step,
        step_ctx.attempt,
    )
    try:
        note = runtime.load_note(ctx.lease, step.note_type)
    except NoteRefusedError:
        return NOTE_REFUSED
    if note is None:
        return NOTE_GONE
    problem = note.refusal(ctx.key) if isinstance(note, CheckedNote) else "not a checked note"
    if problem is not None:
        NOTES_REFUSED.labels(note="pass", reason="Mismatch").inc()
        log.warning(
            "a pass note in Redis was refused (Mismatch): %s; it is not used",
            problem,
            extra={"order": str(ctx.key)},
        )
        return NOTE_REFUSED
    if ctx.attempt > 0 and not teardown and _deleted_meanwhile(ctx, spec.identity.finalizer):
        return DELETED_MEANWHILE
    return step.body(ctx, note)


def _step_task(
    spec: KindSpec[Any, Any, Any, Any, Any], step: Step, *, teardown: bool = False
) -> AnyTask:
    def body(ctx: StepContext) -> StepResult:
        return run_body(spec, step, ctx, teardown=teardown)

    @shared_task(name=spec.task_name(step), bind=True, max_retries=None, base=StepTask)
    def task(self: AnyTask, key: str, name: str, position: int) -> dict[str, str]:
        return run_step(self, key, name, position, body)

    task.__doc__ = step.doc or f"Step {step.name} of a {spec.identity.kind} pass."
    return task


def declare_kind(
    spec: KindSpec[Order, Decision, Local, Gone, IO],
) -> KindSpec[Order, Decision, Local, Gone, IO]:
    """Serve the kind: register its identity, a task per step and its entry.

    Raises:
        ValueError: two steps of a chain kind share a name, or two tasks would, or a step's
            note type is no ``CheckedNote``.
    """
    names = [spec.task_name(step) for step in (*spec.steps, *spec.teardown_steps)]
    for steps in (spec.steps, spec.teardown_steps):
        if len({step.name for step in steps}) != len(steps):
            raise ValueError(f"{spec.identity.kind}: step names repeat: {names}")
    if len(set(names)) != len(names):
        raise ValueError(f"{spec.identity.kind}: task names repeat: {names}")
    for step in (*spec.steps, *spec.teardown_steps):
        if not callable(getattr(step.note_type, "refusal", None)):
            raise ValueError(
                f"{spec.identity.kind}: the note of step {step.name} does not say what it"
                " refuses (CheckedNote)"
            )
    register_identity(spec.identity)
    declared = replace(
        spec,
        step_tasks={step.name: _step_task(spec, step) for step in spec.steps},
        teardown_tasks={
            step.name: _step_task(spec, step, teardown=True) for step in spec.teardown_steps
        },
    )
    register_pass(spec.identity.singular, lambda ctx: serve(declared, ctx))
    return declared
