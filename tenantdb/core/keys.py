"""Order keys: the one name of an order across Redis, task arguments, logs and the CLI.

An order key names the kind, the cluster, the namespace and the name of one order. Its string
form is ``KIND/NAMESPACE/NAME`` for an order on the management cluster and
``KIND/NAMESPACE/NAME@CLUSTER`` for an order on a target cluster, ``KIND`` being the lower-case
kind (``mariadbdatabase``). Every place that writes a key writes this form, and every place that
reads one parses it here.

This module must never do I/O or know which kinds are served; the engine decides that.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A lower-case kind as Kubernetes spells it in a resource's singular name.
_KIND = re.compile(r"^[a-z][a-z0-9]{0,62}$")
# RFC 1123 label: namespaces and cluster names.
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# RFC 1123 subdomain: object names.
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_MAX_SUBDOMAIN = 253
# Cluster names are registered by the platform; they may be longer than a label (the order then
# reports ClusterNameTooLong), so only the character set is checked here.
_CLUSTER = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")

MANAGEMENT_CLUSTER = ""
"""The cluster name of the management cluster, in hashes, labels and order keys."""

FORMAT_HELP = "expected KIND/NAMESPACE/NAME or KIND/NAMESPACE/NAME@CLUSTER"


class InvalidOrderKeyError(ValueError):
    """A string or a set of fields that does not name an order."""


@dataclass(frozen=True, slots=True, order=True)
class OrderKey:
    """The identity of one order: kind, cluster (empty for management), namespace, name."""

    kind: str
    namespace: str
    name: str
    cluster: str = ""

    def __post_init__(self) -> None:
        problem = _problem(self.kind, self.namespace, self.name, self.cluster)
        if problem:
            raise InvalidOrderKeyError(problem)

    def __str__(self) -> str:
        base = f"{self.kind}/{self.namespace}/{self.name}"
        return f"{base}@{self.cluster}" if self.cluster else base

    @property
    def on_management(self) -> bool:
        """Whether the order lives on the management cluster."""
        return self.cluster == ""

    @classmethod
    def parse(cls, text: str) -> OrderKey:
        """Parse the documented string form.

        Raises:
            InvalidOrderKeyError: the text is not ``KIND/NAMESPACE/NAME[@CLUSTER]`` with
                valid parts;
                the message quotes the text and says which part is wrong.
        """
        body, at, cluster = text.partition("@")
        if at and not cluster:
            raise InvalidOrderKeyError(
                f"order key {text!r}: empty cluster after '@'; {FORMAT_HELP}"
            )
        parts = body.split("/")
        if len(parts) != 3:
            raise InvalidOrderKeyError(f"order key {text!r}: {FORMAT_HELP}")
        kind, namespace, name = parts
        problem = _problem(kind, namespace, name, cluster)
        if problem:
            raise InvalidOrderKeyError(f"order key {text!r}: {problem}")
        return cls(kind=kind, namespace=namespace, name=name, cluster=cluster)


def cluster_name_problem(name: str) -> str:
    """Why a kubeconfig context cannot name a target cluster in order keys, or ``""``.

    A key carries a cluster as lower-case letters, digits, ``-`` and ``.``, starting and ending
    with a letter or digit: GKE's ``gke_project_zone_name`` or an EKS ARN does not fit, and such a
    context is served under a name of its own (a file in the kubeconfig directory) or not at all.
    """
    if _CLUSTER.fullmatch(name):
        return ""
    return (
        f"context {name!r} cannot name a cluster in order keys: use lower-case letters, digits,"
        " '-' and '.', starting and ending with a letter or digit"
    )


def _problem(kind: str, namespace: str, name: str, cluster: str) -> str:
    """Say what is wrong with the parts of a key, or return an empty string."""
    # fullmatch: "$" alone would let a trailing newline through.
    if not _KIND.fullmatch(kind):
        return f"kind {kind!r} is not a lower-case kind such as 'mariadbdatabase'"
    if not _LABEL.fullmatch(namespace):
        return f"namespace {namespace!r} is not a valid namespace name"
    if len(name) > _MAX_SUBDOMAIN or not _SUBDOMAIN.fullmatch(name):
        return f"name {name!r} is not a valid object name"
    if cluster and not _CLUSTER.fullmatch(cluster):
        return f"cluster {cluster!r} is not a valid cluster name"
    return ""
