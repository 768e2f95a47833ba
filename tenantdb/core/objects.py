"""Typed views of the Kubernetes objects every kind reads: metadata, conditions, Secrets; and
the few safe reads of an object still in its raw (dict) form.

Every model is frozen, speaks the API's camelCase names and ignores fields a newer server adds.
This module must never fetch or write anything, and must never let a Secret's data show up in a
repr.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class ApiModel(BaseModel):
    """An object, or part of one, as the API server returns it: unknown fields are ignored."""

    model_config = ConfigDict(
        frozen=True, extra="ignore", alias_generator=to_camel, populate_by_name=True
    )


class SpecModel(BaseModel):
    """A part of the order's own spec, as this version of tenantdb knows it.

    A field a newer version of the CRD added is left out when the order is read, so such an
    order is still served and torn down; the installed CRD prunes fields it does not declare,
    and the CRD tenantdb generates declares exactly these.
    """

    model_config = ConfigDict(
        frozen=True, extra="ignore", alias_generator=to_camel, populate_by_name=True
    )


class OwnerReference(ApiModel):
    """metadata.ownerReferences[]."""

    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None


class ObjectMeta(ApiModel):
    """The metadata fields a pass decides on."""

    name: str = ""
    namespace: str = ""
    uid: str = ""
    generation: int = 0
    resource_version: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    owner_references: tuple[OwnerReference, ...] = ()
    finalizers: tuple[str, ...] = ()
    deletion_timestamp: datetime | None = None
    creation_timestamp: datetime | None = None

    def controller_reference(self) -> OwnerReference | None:
        """Return the owner reference marked as controller, if any."""
        return next((ref for ref in self.owner_references if ref.controller), None)


class KubeObject(ApiModel):
    """Any object read only for its metadata (generators, ExternalSecrets in a list)."""

    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)


class ObservedCondition(ApiModel):
    """A condition another controller writes; only type, status, reason and message matter."""

    type: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""


class ConditionedStatus(ApiModel):
    """A status holding only conditions."""

    conditions: tuple[ObservedCondition, ...] = ()

    def is_true(self, condition_type: str) -> bool:
        """Report whether the condition of that type reads True."""
        return any(c.type == condition_type and c.status == "True" for c in self.conditions)


class Condition(ApiModel):
    """A metav1.Condition as tenantdb writes it on the order."""

    type: str
    status: str
    reason: str
    message: str = ""
    last_transition_time: datetime
    observed_generation: int | None = None


class Secret(ApiModel):
    """A core/v1 Secret; data holds base64 strings as the API returns them."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    type: str = ""
    data: dict[str, str] = Field(default_factory=dict, repr=False)

    def value(self, key: str) -> str:
        """Return one key decoded as UTF-8, or "" when it is absent or not base64 text."""
        return decode_secret_value(self.data.get(key))


def decode_secret_value(raw: Any) -> str:
    """One value of a Secret's ``data`` decoded as UTF-8; "" when absent or not base64 text."""
    if not raw or not isinstance(raw, str):
        return ""
    try:
        return base64.b64decode(raw, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return ""


def metadata_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """A raw object's metadata; empty when it has none or it is not a mapping."""
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def status_of(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a raw object's status; empty when it has none or it is not a mapping."""
    status = obj.get("status")
    return dict(status) if isinstance(status, Mapping) else {}


def generation_of(obj: Mapping[str, Any]) -> int:
    """A raw object's metadata.generation; 0 when absent or not an integer."""
    value = metadata_of(obj).get("generation")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
