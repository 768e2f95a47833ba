"""A toy order kind, Widget: its spec.message is kept in a ConfigMap beside it.

Everything a kind declares, in one module: its identity and CRD, its gates (none but the
finalizer), its plan (one ConfigMap), its status, its teardown, its steps and its watch. The
scaffold does the rest. Workers and the watcher load it through TENANTDB_KIND_MODULES.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tasks.chain import StepResult
from tasks.reconcile import PassOutcome
from tasks.runtime import cluster_registry
from tasks.scaffold import Admission, KindPass, KindSpec, KindStep, Plan, Step, declare_kind
from tenantdb.adapters.clusters import ClusterRegistry
from tenantdb.adapters.kube import CONFIG_MAP
from tenantdb.core.keys import OrderKey
from tenantdb.core.kinds import KindIdentity
from tenantdb.core.pass_path import Verdict
from tenantdb.core.tasknames import Queue
from watcher.routes import order_route, register_routes

IDENTITY = KindIdentity(
    group="toy.tenantdb.test",
    version="v1",
    kind="Widget",
    plural="widgets",
    finalizer="toy.tenantdb.test/teardown",
    label_name="toy.tenantdb.test/widget-name",
    label_namespace="toy.tenantdb.test/widget-namespace",
    label_cluster="toy.tenantdb.test/widget-cluster",
)


@dataclass(frozen=True)
class Note:
    """What the steps act on: the order's key parts and the ConfigMap it wants."""

    namespace: str
    name: str
    finalizers: tuple[str, ...]
    raw: dict[str, Any]
    message: str

    def refusal(self, key: OrderKey) -> str | None:
        """A note of another Widget is refused: the steps write only this order's ConfigMap."""
        if (self.namespace, self.name) != (key.namespace, key.name):
            return f"the note is of Widget {self.namespace}/{self.name}"
        return None


def _config_map(order: dict[str, Any], message: str) -> dict[str, Any]:
    meta = order["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{meta['name']}-widget", "namespace": meta["namespace"]},
        "data": {"message": message},
    }


Ctx = KindPass[ClusterRegistry] | KindStep[ClusterRegistry]


def _live(ctx: Ctx, order: dict[str, Any]) -> dict[str, Any] | None:
    meta = order["metadata"]
    client = ctx.io.get(ctx.key.cluster)
    return client.get_or_none(CONFIG_MAP, meta["namespace"], f"{meta['name']}-widget")


def _note(order: dict[str, Any]) -> Note:
    meta = order["metadata"]
    message = str((order.get("spec") or {}).get("message", ""))
    return Note(meta["namespace"], meta["name"], tuple(meta.get("finalizers", ())), order, message)


def _ready(ctx: Ctx, order: dict[str, Any], message: str) -> PassOutcome:
    status = order.get("status") or {}
    if status.get("message") != message:
        ctx.guard.check()
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        condition = {
            "type": "Ready",
            "status": "True",
            "reason": "Built",
            "message": message,
            "lastTransitionTime": now,
        }
        body = {"message": message, "conditions": [condition]}
        ctx.runtime.orders.write_status(ctx.key, order, body, ctx.guard.check)
    return PassOutcome("Built")


def admit(ctx: KindPass[ClusterRegistry], order: dict[str, Any], previous: None) -> Admission[None]:
    return Admission(Verdict(add_finalizer=True, proceed=True), None)


def plan(ctx: KindPass[ClusterRegistry], order: dict[str, Any], decision: None) -> Plan[None]:
    note = _note(order)
    live = _live(ctx, order)
    if live is not None and (live.get("data") or {}).get("message") == note.message:
        return Plan((), converged=True)
    return Plan(("build",), note, converged=True)


REFUSED = "refuse"
"""A message the build step fails on, every attempt: a step retrying through an outage."""


def build(ctx: KindStep[ClusterRegistry], note: Note) -> StepResult:
    if note.message == REFUSED:
        raise RuntimeError("the widget refuses this message")
    ctx.guard.check()
    ctx.io.get(ctx.key.cluster).apply(_config_map(note.raw, note.message))
    return StepResult(_ready(ctx, note.raw, note.message).reason, done=True)


def teardown(ctx: KindPass[ClusterRegistry], order: dict[str, Any]) -> Plan[None]:
    return Plan(("remove",), _note(order)) if _live(ctx, order) else Plan(())


def release(ctx: Ctx, raw: dict[str, Any]) -> str:
    ctx.guard.check()
    kept = [f for f in raw["metadata"].get("finalizers", ()) if f != IDENTITY.finalizer]
    ctx.runtime.orders.set_finalizers(ctx.key, raw, kept)
    return "FinalizerReleased"


def remove(ctx: KindStep[ClusterRegistry], note: Note) -> StepResult:
    ctx.guard.check()
    ctx.io.get(ctx.key.cluster).delete(CONFIG_MAP, note.namespace, f"{note.name}-widget")
    return StepResult(release(ctx, note.raw), done=True)


SPEC = declare_kind(
    KindSpec(
        io=cluster_registry,
        identity=IDENTITY,
        read=lambda raw: raw,
        admit=admit,
        gated=lambda ctx, order, decision: PassOutcome("Gated"),
        plan=plan,
        settle=lambda ctx, order, decision, plan: _ready(ctx, order, _note(order).message),
        teardown=teardown,
        finalize=lambda ctx, order, plan: PassOutcome(release(ctx, order)),
        steps=(Step("build", Queue.PROVISION, build, Note),),
        teardown_steps=(Step("remove", Queue.TEARDOWN, remove, Note),),
    )
)

register_routes([order_route(IDENTITY)])


def build_crd() -> dict[str, Any]:
    """The Widget CRD, as a kind's crd module in core builds it."""
    open_object = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    spec = {"type": "object", "properties": {"message": {"type": "string"}}}
    schema = {"type": "object", "properties": {"spec": spec, "status": open_object}}
    version = {
        "name": IDENTITY.version,
        "served": True,
        "storage": True,
        "subresources": {"status": {}},
        "schema": {"openAPIV3Schema": schema},
    }
    names = {
        "kind": IDENTITY.kind,
        "listKind": IDENTITY.list_kind,
        "plural": IDENTITY.plural,
        "singular": IDENTITY.singular,
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": IDENTITY.crd_name},
        "spec": {
            "group": IDENTITY.group,
            "names": names,
            "scope": "Namespaced",
            "versions": [version],
        },
    }
