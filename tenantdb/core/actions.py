"""The typed actions a plan hands the engine, and the log events it asks to be written.

Owns the vocabulary between decision and I/O: apply this object, patch that one, delete that
one; a kind adds its own (MariaDBDatabase: its OpenBao role). The engine runs the actions of a
plan in order and stops at the first failure. Nothing here performs an action, and an action's
repr never shows an object body, because a body can hold a credential.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class ApplyStrategy(StrEnum):
    """How an object is written."""

    SERVER_SIDE_APPLY = "ServerSideApply"
    """Server-side apply with tenantdb's field manager, forcing ownership of the fields sent."""
    CREATE_OR_UPDATE = "CreateOrUpdate"
    """Read, replace the spec, write back (the shared cert-manager Certificate)."""


@dataclass(frozen=True)
class ObjectRef:
    """Where an object lives: its cluster ("" is management), kind, namespace and name."""

    cluster: str
    api_version: str
    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        where = f"@{self.cluster}" if self.cluster else ""
        return f"{self.kind} {self.namespace}/{self.name}{where}"


UNSTORED_VERSION = "18446744073709551615"
"""A resourceVersion no stored object carries: the API server parses a body's resourceVersion as
an unsigned 64-bit number, and etcd's revisions, which resourceVersions are, are signed 64-bit
numbers counted up from 1. An apply naming it creates an object that is absent and is refused
(409 Conflict) when one exists."""


def read_version(live: Mapping[str, Any] | None) -> str:
    """The precondition for writing an object a pass read as ``live`` (None: read absent).

    An apply with it lands only while the object is still as the pass read it: a pass that
    lost its lease after reading cannot overwrite what a newer pass wrote since.
    """
    if live is None:
        return UNSTORED_VERSION
    return str((live.get("metadata") or {}).get("resourceVersion") or "")


@dataclass(frozen=True)
class ApplyObject:
    """Write a desired object.

    ``read_version`` is the precondition the write carries (``read_version()`` of what the pass
    read); None writes without one. It says when the write may land, not what is written, so
    two actions that write the same object alike are equal whatever their precondition.
    """

    cluster: str
    manifest: dict[str, Any] = field(repr=False, compare=True)
    strategy: ApplyStrategy = ApplyStrategy.SERVER_SIDE_APPLY
    read_version: str | None = field(default=None, compare=False)

    @property
    def ref(self) -> ObjectRef:
        """Return where the object goes."""
        meta = self.manifest["metadata"]
        return ObjectRef(
            self.cluster,
            self.manifest["apiVersion"],
            self.manifest["kind"],
            meta.get("namespace", ""),
            meta["name"],
        )


@dataclass(frozen=True)
class PatchObject:
    """Merge-patch an object."""

    ref: ObjectRef
    merge_patch: dict[str, Any]


@dataclass(frozen=True)
class DeleteObject:
    """Delete an object; NotFound counts as done.

    ``uid`` is the object the plan saw: the delete then lands on that object only (a
    precondition), and one made since under the same name (a re-created order's) is left and
    counts as done, since the object meant is gone. Empty: whatever bears the name.
    """

    ref: ObjectRef
    uid: str = ""


ObjectAction = ApplyObject | PatchObject | DeleteObject
"""What a plan asks of a cluster: apply, patch or delete one object."""


class LogLevel(StrEnum):
    """Severity of a log event a plan asks for."""

    INFO = "info"
    DEBUG = "debug"
    ERROR = "error"


@dataclass(frozen=True)
class LogEvent:
    """A log line a decision asks for; fields never hold a credential."""

    message: str
    fields: tuple[tuple[str, str], ...] = ()
    level: LogLevel = LogLevel.INFO
