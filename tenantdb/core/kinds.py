"""What names an order kind everywhere: its API identity, finalizer and ownership labels. Pure.

A kind declares one ``KindIdentity``; order keys, task names, metric labels, watches, the CRD
and the CLI all read it from there, so a kind's names are spelled once. The registry maps the
kind part of an order key to its identity: a worker registers each kind it declares
(``tasks.scaffold.declare_kind``), and the CLI registers tenantdb's own kinds and those of the
kind modules it is configured with (``tenantdb.ops.load_kinds``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tenantdb.core.keys import OrderKey


class UnknownKindError(LookupError):
    """An order key names a kind no module registered."""


@dataclass(frozen=True, slots=True)
class KindIdentity:
    """The API identity of an order kind and the marks tenantdb puts on what it owns."""

    group: str
    version: str
    kind: str
    plural: str
    finalizer: str
    label_name: str
    """Label on a child naming its order."""
    label_namespace: str
    """Label on a child naming its order's namespace."""
    label_cluster: str
    """Label on a child naming its order's cluster ("" for the management cluster)."""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()

    @property
    def singular(self) -> str:
        """The lower-case kind: the first part of an order key, of task names and metrics."""
        return self.kind.lower()

    @property
    def list_kind(self) -> str:
        """The kind of a list of these orders."""
        return f"{self.kind}List"

    @property
    def api_version(self) -> str:
        """The apiVersion orders of this kind carry."""
        return f"{self.group}/{self.version}"

    @property
    def crd_name(self) -> str:
        """The metadata.name of the kind's CustomResourceDefinition."""
        return f"{self.plural}.{self.group}"

    def key(self, namespace: str, name: str, cluster: str = "") -> OrderKey:
        """The key of one order of this kind.

        Raises:
            InvalidOrderKeyError: the parts cannot name an order.
        """
        return OrderKey(self.singular, namespace, name, cluster)


_IDENTITIES: dict[str, KindIdentity] = {}


def register_identity(identity: KindIdentity) -> KindIdentity:
    """Make a kind known by the kind part of its keys; registering it again is harmless.

    Raises:
        ValueError: another identity already holds the same key kind.
    """
    found = _IDENTITIES.setdefault(identity.singular, identity)
    if found != identity:
        raise ValueError(f"kind {identity.singular!r} is registered twice, differently")
    return identity


def identity_for(key: OrderKey | str) -> KindIdentity:
    """The identity of the kind an order key (or its kind part) names.

    Raises:
        UnknownKindError: no module registered that kind.
    """
    kind = key.kind if isinstance(key, OrderKey) else key
    found = _IDENTITIES.get(kind)
    if found is None:
        known = ", ".join(sorted(_IDENTITIES)) or "none"
        raise UnknownKindError(f"kind {kind!r} is not served (known kinds: {known})")
    return found


def registered_identities() -> tuple[KindIdentity, ...]:
    """Every registered kind, in key-kind order."""
    return tuple(_IDENTITIES[k] for k in sorted(_IDENTITIES))
