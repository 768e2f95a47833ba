"""Typed views of a MysqlDatabase order: its spec and its status, as ``crd.py`` declares them.

Every model is frozen and speaks the API's camelCase names; unknown fields are ignored. A field
the CRD requires is still optional here, and a value of the wrong type reads as its field's
empty value (a non-string as "", a non-list as none): an order the API server would not admit
today is read exactly as the raw readers of ``reading`` read it, so the gates report it the
same way (Pending on a missing group or Secret, InvalidSpec on an invalid value) instead of the
pass failing to parse it. Reading never fails.

A status model dumps (``model_dump(mode="json", by_alias=True, exclude_none=True)``) to the
same body tenantdb writes; its conditions keep their timestamps as the strings written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from tenantdb.core.objects import ApiModel, ObjectMeta, SpecModel


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _optional_text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _items(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, list | tuple) else ()


def _mappings(value: Any) -> tuple[Mapping[str, Any], ...]:
    return tuple(v for v in _items(value) if isinstance(v, Mapping))


def _optional_list(value: Any) -> tuple[Mapping[str, Any], ...] | None:
    return _mappings(value) if isinstance(value, list | tuple) else None


def _texts(value: Any) -> tuple[str, ...] | None:
    return tuple(str(v) for v in value) if isinstance(value, list | tuple) else None


def _integer(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _true(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


Text = Annotated[str, BeforeValidator(_text)]
"""A string field; anything else reads as ""."""
OptionalText = Annotated[str | None, BeforeValidator(_optional_text)]
"""A string field that may be absent (None); anything else reads as absent."""
Texts = Annotated[tuple[str, ...] | None, BeforeValidator(_texts)]
"""A list of strings that may be absent (None); anything else reads as absent."""
Integer = Annotated[int | None, BeforeValidator(_integer)]
"""An integer field that may be absent; anything else reads as absent."""
Flag = Annotated[bool | None, BeforeValidator(_true)]
"""A boolean field that may be absent; anything else reads as absent."""


# -- spec ----------------------------------------------------------------------------------------


class GroupRef(SpecModel):
    """spec.groupRef: the MysqlFailoverGroup in the order's namespace."""

    name: Text = ""


class Owner(SpecModel):
    """spec.owner: the Secret the owner's username and password are in, and its privileges."""

    secret_name: Text = ""
    privileges: Texts = None
    """None when the spec leaves them to the default."""


class Grant(SpecModel):
    """One of spec.grants: an existing MySQL user and its privileges on the schema."""

    username: Text = ""
    privileges: Texts = None


class MysqlDatabaseSpec(SpecModel):
    """spec of a MysqlDatabase."""

    group_ref: Annotated[GroupRef, BeforeValidator(_mapping)] = Field(default_factory=GroupRef)
    database_name: Text = ""
    character_set: OptionalText = None
    collation: OptionalText = None
    owner: Annotated[Owner, BeforeValidator(_mapping)] = Field(default_factory=Owner)
    grants: Annotated[tuple[Grant, ...], BeforeValidator(_mappings)] = ()
    deletion_policy: Text = ""
    """Retain or Delete; empty (Retain) when the spec does not say."""

    @property
    def deletes(self) -> bool:
        """Whether deleting the order drops what it created (only ``Delete`` does)."""
        return self.deletion_policy == "Delete"


# -- status --------------------------------------------------------------------------------------


class StatusCondition(ApiModel):
    """The Ready condition as tenantdb writes it; its time is kept as the string written."""

    type: Text = ""
    status: Text = ""
    reason: Text = ""
    message: Text = ""
    last_transition_time: Text = ""
    observed_generation: Integer = None


class MysqlDatabaseStatus(ApiModel):
    """status of a MysqlDatabase; tenantdb is its single writer."""

    phase: OptionalText = None
    observed_generation: Integer = None
    database_created: Flag = None
    owner_user: OptionalText = None
    pending_owner_user: OptionalText = None
    applied_grants: Texts = None
    active_site: OptionalText = None
    last_applied_hash: OptionalText = None
    message: OptionalText = None
    conditions: Annotated[tuple[StatusCondition, ...] | None, BeforeValidator(_optional_list)] = (
        None
    )

    def body(self) -> dict[str, Any]:
        """The status as written: camelCase, absent fields left out."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


# -- the order -----------------------------------------------------------------------------------


class MysqlDatabase(ApiModel):
    """A MysqlDatabase order as read from the API server."""

    api_version: Text = "shipstream.io/v1alpha1"
    kind: Text = "MysqlDatabase"
    metadata: Annotated[ObjectMeta, BeforeValidator(_mapping)] = Field(default_factory=ObjectMeta)
    spec: Annotated[MysqlDatabaseSpec, BeforeValidator(_mapping)] = Field(
        default_factory=MysqlDatabaseSpec
    )
    status: Annotated[MysqlDatabaseStatus, BeforeValidator(_mapping)] = Field(
        default_factory=MysqlDatabaseStatus
    )

    @property
    def may_touch_mysql(self) -> bool:
        """Whether deleting the order may send SQL: it created the schema, and either drops it
        (policy Delete) or retains one whose name a grant reads as a pattern (``_``), whose
        pattern grants it revokes (``teardown.plan_teardown``)."""
        if self.status.database_created is not True:
            return False
        return self.spec.deletes or "_" in self.spec.database_name


def read_order(raw: Mapping[str, Any]) -> MysqlDatabase:
    """The typed view of an order as stored (never fails on its spec or status)."""
    return MysqlDatabase.model_validate(raw)
