"""Kubernetes API errors as the real kube-apiserver words them.

Owns the `Status` bodies for 400/401/403/404/405/409/410/415/422/500 and the field-error formatting
of `k8s.io/apimachinery/pkg/util/validation/field`. It must never invent a wording the real server
does not use: a client that parses these messages against the devstack has to keep working
against a real cluster.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from devstack.kubeclient import ApiError as ApiError

_TYPE_TEXT = {
    "FieldValueRequired": "Required value",
    "FieldValueInvalid": "Invalid value",
    "FieldValueNotSupported": "Unsupported value",
    "FieldValueTooLong": "Too long",
    "FieldValueTooMany": "Too many",
    "FieldValueForbidden": "Forbidden",
    "FieldValueDuplicate": "Duplicate value",
    "FieldValueTypeInvalid": "Invalid value",
}
_NO_VALUE = {"FieldValueRequired", "FieldValueTooLong", "FieldValueForbidden"}


class Verbatim(str):
    """A bad value already printed as Go prints it (a struct, a pointer): shown as it is."""


def format_value(value: Any) -> str:
    """Render a bad value the way Go's field errors print it."""
    if isinstance(value, Verbatim):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if value is None:
        return "null"
    return json.dumps(value, separators=(",", ":"))


@dataclass(frozen=True)
class FieldError:
    """One field-level validation failure (`field.Error`)."""

    reason: str
    field: str
    value: Any = None
    detail: str = ""
    show_value: bool = True

    def body(self) -> str:
        """Return the error text without the field path (`ErrorBody`)."""
        text = _TYPE_TEXT[self.reason]
        if self.reason not in _NO_VALUE and self.show_value:
            text = f"{text}: {format_value(self.value)}"
        if self.detail:
            text = f"{text}: {self.detail}"
        return text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"


def required(path: str, detail: str = "") -> FieldError:
    """Build a `Required value` error."""
    return FieldError("FieldValueRequired", path, detail=detail)


def invalid(path: str, value: Any, detail: str) -> FieldError:
    """Build an `Invalid value` error."""
    return FieldError("FieldValueInvalid", path, value, detail)


def forbidden(path: str, detail: str) -> FieldError:
    """Build a `Forbidden` error."""
    return FieldError("FieldValueForbidden", path, detail=detail)


def _qualified(resource: str, group: str) -> str:
    return f"{resource}.{group}" if group else resource


def _details(name: str, group: str, kind: str) -> dict[str, Any]:
    # Go's `omitempty`: an empty name or group is left out.
    details: dict[str, Any] = {"name": name} if name else {}
    if group:
        details["group"] = group
    if kind:
        details["kind"] = kind
    return details


def not_found(resource: str, group: str, name: str) -> ApiError:
    """404: `secrets "x" not found`."""
    return ApiError(
        404,
        "NotFound",
        f'{_qualified(resource, group)} "{name}" not found',
        _details(name, group, resource),
    )


def already_exists(resource: str, group: str, name: str) -> ApiError:
    """409: `secrets "x" already exists`."""
    return ApiError(
        409,
        "AlreadyExists",
        f'{_qualified(resource, group)} "{name}" already exists',
        _details(name, group, resource),
    )


def conflict(resource: str, group: str, name: str, why: str) -> ApiError:
    """409: `Operation cannot be fulfilled on secrets "x": <why>`."""
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(resource, group)} "{name}": {why}',
        _details(name, group, resource),
    )


STALE = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def invalid_object(kind: str, group: str, name: str, errors: list[FieldError]) -> ApiError:
    """422 with one cause per field error: `Secret "x" is invalid: ...`.

    The message lists each distinct error once (Go's aggregate drops repeats); the causes keep
    every one, as the real server's do.
    """
    texts = list(dict.fromkeys(str(e) for e in errors))
    joined = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    details = _details(name, group, kind)
    details["causes"] = [
        {"reason": e.reason, "message": e.body(), "field": e.field} for e in errors
    ]
    return ApiError(
        422, "Invalid", f'{_qualified(kind, group)} "{name}" is invalid: {joined}', details
    )


def bad_request(message: str) -> ApiError:
    """400 BadRequest."""
    return ApiError(400, "BadRequest", message)


def forbidden_error(resource: str, group: str, name: str, why: str) -> ApiError:
    """403: `secrets "x" is forbidden: <why>`."""
    return ApiError(
        403,
        "Forbidden",
        f'{_qualified(resource, group)} "{name}" is forbidden: {why}',
        _details(name, group, resource),
    )


def access_denied(resource: str, group: str, name: str, why: str) -> ApiError:
    """403 as the authorization layer words it.

    `secrets "x" is forbidden: <why>` for a named object, `secrets is forbidden: <why>` for a
    collection, and `forbidden: <why>` for a path that is not a resource; the details leave out
    what is empty, as Go's `omitempty` does.
    """
    if not resource:
        message = f"forbidden: {why}"
    elif not name:
        message = f"{_qualified(resource, group)} is forbidden: {why}"
    else:
        message = f'{_qualified(resource, group)} "{name}" is forbidden: {why}'
    details = {k: v for k, v in (("name", name), ("group", group), ("kind", resource)) if v}
    return ApiError(403, "Forbidden", message, details)


def not_supported(path: str, value: Any, supported: list[str]) -> FieldError:
    """Build an `Unsupported value` error listing the values the field takes."""
    listed = ", ".join(json.dumps(v) for v in supported)
    return FieldError("FieldValueNotSupported", path, value, f"supported values: {listed}")


def unauthorized() -> ApiError:
    """401 for a missing or unknown bearer token."""
    return ApiError(401, "Unauthorized", "Unauthorized")


def internal_error(message: str) -> ApiError:
    """500 InternalError."""
    return ApiError(
        500,
        "InternalError",
        f"Internal error occurred: {message}",
        {"causes": [{"message": message}]},
    )


def gone(message: str) -> ApiError:
    """410 Expired."""
    return ApiError(410, "Expired", message)


def method_not_allowed() -> ApiError:
    """405 for a verb the resource does not serve."""
    return ApiError(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
        {},
    )


def unsupported_media_type(content_type: str, accepted: list[str]) -> ApiError:
    """415 for a patch type the resource does not take."""
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{', '.join(accepted)}",
    )


def page_not_found() -> ApiError:
    """404 for a path under an API group the server serves that names no resource."""
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def no_handler() -> ApiError:
    """404 for a path no API serves (an unknown group or version, or a custom resource the
    group does not have): the real server answers in plain text there, not with a `Status`."""
    return ApiError(404, "NotFound", "404 page not found", text="404 page not found\n")
