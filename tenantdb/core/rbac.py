"""The Kubernetes access a kind needs, as data: which verbs on which resources, for which role.

Each kind declares its ``KindAccess`` in its own core package (``<kind>/rbac.py``), from what its
adapter, tasks and routes call: a ``get`` or ``get_or_none`` is ``get``, ``list_objects`` is
``list``, a watch loop is ``list`` and ``watch``, ``create`` is ``create``, ``patch``,
``set_finalizers`` and a server-side ``apply`` are ``patch`` (an apply that creates also needs
``create``), ``write_status`` is ``patch`` on ``<plural>/status``, ``delete`` is ``delete``.
``make gen`` merges the access of every served kind into the chart's Role rules
(``tools/gen_rbac.py``). Access no kind owns (Events on the orders) stays in the chart's
templates. Pure: no I/O, no kind named here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tenantdb.core.kinds import KindIdentity

VERBS: tuple[str, ...] = ("get", "list", "watch", "create", "update", "patch", "delete")
"""Every verb a grant may name, in the order the chart spells them."""


@dataclass(frozen=True, slots=True)
class Grant:
    """Verbs on resources of one API group (optionally only objects of some names), and why.

    ``why`` says which call needs the grant; the generated chart carries it as a comment.
    """

    api_group: str
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    why: str
    resource_names: tuple[str, ...] = ()
    cluster_scoped: bool = False
    """Whether the resources are cluster-scoped: a per-namespace binding cannot grant them, so
    where tenantdb serves listed namespaces only they keep a cluster-wide binding of their own."""

    def __post_init__(self) -> None:
        unknown = [verb for verb in self.verbs if verb not in VERBS]
        if unknown or not self.verbs or not self.resources:
            raise ValueError(
                f"a grant names resources and verbs among {VERBS}: {self.resources} {self.verbs}"
            )

    @property
    def target(self) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
        """What the grant is on: its API group, resources and resource names."""
        return (self.api_group, self.resources, self.resource_names)


@dataclass(frozen=True, slots=True)
class KindAccess:
    """What one kind needs of each role's Role, in each place the chart grants it.

    The management cluster has a ClusterRole per role: the watcher lists and watches, the worker
    reads and writes what its passes touch (the ops shell runs in a worker pod). A target
    cluster's one account has a Role in each namespace whose orders tenantdb serves there
    (``target_assigned``) and in each namespace it only reads (``target_placed``).
    """

    watcher: tuple[Grant, ...] = ()
    worker: tuple[Grant, ...] = ()
    target_assigned: tuple[Grant, ...] = ()
    target_placed: tuple[Grant, ...] = ()


PLACES: tuple[str, ...] = ("watcher", "worker", "target_assigned", "target_placed")
"""The fields of ``KindAccess``, in the order the chart's rules are generated."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One generated Role rule: the grants of every kind on one target, verbs united."""

    api_group: str
    resources: tuple[str, ...]
    resource_names: tuple[str, ...]
    verbs: tuple[str, ...]
    reasons: tuple[str, ...]
    """Each contributing grant's why, prefixed with its kind."""


def order_resource(identity: KindIdentity, subresource: str = "") -> str:
    """The RBAC resource of an order kind, or of one of its subresources."""
    return f"{identity.plural}/{subresource}" if subresource else identity.plural


def watched_orders(identity: KindIdentity) -> Grant:
    """The watcher's grant on a kind's orders: the scaffold serves every order it hears of."""
    return Grant(
        identity.group,
        (order_resource(identity),),
        ("list", "watch"),
        "every change of an order starts a pass.",
    )


def patched_status(identity: KindIdentity) -> Grant:
    """The grant on a kind's status: every status write is a patch."""
    return Grant(
        identity.group,
        (order_resource(identity, "status"),),
        ("patch",),
        "the status is written by patch.",
    )


def merge_grants(granted: Iterable[tuple[str, Grant]]) -> tuple[Rule, ...]:
    """One rule per target from (kind, grant) pairs, in the order targets first appear.

    Two kinds that need the same resource (Secrets) share one rule holding both kinds' verbs,
    so the chart grants the union and no rule repeats another.
    """
    verbs: dict[tuple[str, tuple[str, ...], tuple[str, ...]], set[str]] = {}
    reasons: dict[tuple[str, tuple[str, ...], tuple[str, ...]], list[str]] = {}
    for kind, grant in granted:
        verbs.setdefault(grant.target, set()).update(grant.verbs)
        reason = f"{kind}: {grant.why}"
        if reason not in reasons.setdefault(grant.target, []):
            reasons[grant.target].append(reason)
    return tuple(
        Rule(group, resources, names, tuple(v for v in VERBS if v in verbs[target]), tuple(why))
        for target, why in reasons.items()
        for group, resources, names in (target,)
    )
