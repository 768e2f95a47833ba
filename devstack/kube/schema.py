"""Structural schemas of custom resources: pruning, defaulting and validation.

Owns what the real server does with a CRD's `openAPIV3Schema` on every write: drop unknown
fields, fill in defaults, and validate type, required, enum, pattern, lengths, bounds, item
counts, list uniqueness and the formats CRDs use, with the kube-openapi wording the real server
reports. CEL rules live in `devstack.kube.cel_rules`. It must never mutate a stored object: callers
pass a fresh copy.
"""

from __future__ import annotations

import base64
import copy
import ipaddress
import json
import re
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from devstack.kube.errors import FieldError, invalid, required

Schema = dict[str, Any]
_EMBEDDED_KEEP = ("apiVersion", "kind", "metadata")


def join(path: str, key: str) -> str:
    """Append a property to a field path the way `field.Path` prints it."""
    return f"{path}.{key}" if path else key


def index(path: str, i: int | str) -> str:
    """Append a list index or map key to a field path."""
    return f"{path}[{i}]"


def type_name(value: Any) -> str:
    """Name a JSON value's type as OpenAPI does."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


# ---------------------------------------------------------------- pruning


def prune(value: Any, schema: Schema, path: str = "", *, root: bool = False) -> list[str]:
    """Drop fields the schema does not declare; return their paths."""
    if isinstance(value, dict):
        return _prune_object(
            value, schema, path, root or bool(schema.get("x-kubernetes-embedded-resource"))
        )
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        dropped: list[str] = []
        for i, item in enumerate(value):
            dropped += prune(item, schema["items"], index(path, i))
        return dropped
    return []


def _prune_object(value: dict[str, Any], schema: Schema, path: str, keep_meta: bool) -> list[str]:
    props: dict[str, Schema] = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
    dropped: list[str] = []
    for key in list(value):
        if keep_meta and key in _EMBEDDED_KEEP and key not in props:
            continue
        child = props.get(key)
        if child is None and isinstance(extra, dict):
            child = extra
        if child is not None:
            dropped += prune(value[key], child, join(path, key))
        elif not (preserve or extra is True or (not props and extra is None and preserve)):
            dropped.append(join(path, key))
            del value[key]
    return dropped


# ---------------------------------------------------------------- defaulting


def apply_defaults(value: Any, schema: Schema) -> None:
    """Fill in `default` values in place, the way the real server defaults on write."""
    if isinstance(value, dict):
        _default_object(value, schema)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            apply_defaults(item, schema["items"])


def _default_object(value: dict[str, Any], schema: Schema) -> None:
    props: dict[str, Schema] = schema.get("properties") or {}
    for key, child in props.items():
        if key in value and value[key] is None and not child.get("nullable"):
            # Real servers prune a non-nullable null before defaulting.
            del value[key]
        if key not in value and "default" in child:
            value[key] = copy.deepcopy(child["default"])
        if key in value:
            apply_defaults(value[key], child)
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        for key in value:
            if key not in props:
                apply_defaults(value[key], extra)


# ---------------------------------------------------------------- validation


def _is_datetime(text: str) -> bool:
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return "T" in text or "t" in text


def _is_date(text: str) -> bool:
    return bool(re.fullmatch(r"\d{4}-\d{2}-\d{2}", text)) and _is_datetime(text + "T00:00:00Z")


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return len(text) == 36


def _is_byte(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except ValueError:
        return False
    return True


def _is_ip(text: str, version: int) -> bool:
    try:
        return ipaddress.ip_address(text).version == version
    except ValueError:
        return False


def _is_cidr(text: str) -> bool:
    try:
        ipaddress.ip_network(text, strict=False)
    except ValueError:
        return False
    return "/" in text


_HOSTNAME_RE = re.compile(
    r"^[a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?(\.[a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?)*$"
)

FORMATS: dict[str, Callable[[str], bool]] = {
    "date-time": _is_datetime,
    "datetime": _is_datetime,
    "date": _is_date,
    "uuid": _is_uuid,
    "byte": _is_byte,
    "ipv4": lambda t: _is_ip(t, 4),
    "ipv6": lambda t: _is_ip(t, 6),
    "cidr": _is_cidr,
    "hostname": lambda t: bool(_HOSTNAME_RE.match(t)) and len(t) <= 253,
}


def _type_ok(value: Any, expected: str) -> bool:
    actual = type_name(value)
    return actual == expected or (expected == "number" and actual == "integer")


def validate(value: Any, schema: Schema, path: str = "") -> list[FieldError]:
    """Validate a value against a structural schema; return every failure."""
    if value is None:
        if schema.get("nullable") or not schema.get("type"):
            return []
        return [_type_error(path, schema["type"], value)]
    if schema.get("x-kubernetes-int-or-string"):
        if not isinstance(value, int | str) or isinstance(value, bool):
            return [_type_error(path, "integer-or-string", value)]
        return _validate_scalar(value, schema, path)
    expected = schema.get("type")
    if expected and not _type_ok(value, expected):
        return [_type_error(path, expected, value)]
    errors = _validate_enum(value, schema, path)
    if isinstance(value, dict):
        return errors + _validate_object(value, schema, path)
    if isinstance(value, list):
        return errors + _validate_array(value, schema, path)
    return errors + _validate_scalar(value, schema, path)


def _type_error(path: str, expected: str, value: Any) -> FieldError:
    actual = type_name(value)
    return invalid(path, actual, f'{path} in body must be of type {expected}: "{actual}"')


def _validate_enum(value: Any, schema: Schema, path: str) -> list[FieldError]:
    allowed = schema.get("enum")
    if allowed is None or value in allowed:
        return []
    supported = ", ".join(json.dumps(v) for v in allowed)
    return [FieldError("FieldValueNotSupported", path, value, f"supported values: {supported}")]


def _validate_object(value: dict[str, Any], schema: Schema, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    props: dict[str, Schema] = schema.get("properties") or {}
    for key in schema.get("required") or []:
        if key not in value:
            errors.append(required(join(path, key)))
    for key, child in value.items():
        sub = props.get(key)
        if sub is None and isinstance(schema.get("additionalProperties"), dict):
            errors += validate(child, schema["additionalProperties"], index(path, key))
        elif sub is not None:
            errors += validate(child, sub, join(path, key))
    count = len(value)
    if "maxProperties" in schema and count > schema["maxProperties"]:
        errors.append(
            FieldError(
                "FieldValueTooMany",
                path,
                count,
                f"must have at most {schema['maxProperties']} items",
            )
        )
    if "minProperties" in schema and count < schema["minProperties"]:
        errors.append(
            invalid(
                path,
                count,
                f"{path} in body should have at least {schema['minProperties']} properties",
            )
        )
    return errors


def _validate_array(value: list[Any], schema: Schema, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        errors.append(
            FieldError(
                "FieldValueTooMany",
                path,
                len(value),
                f"must have at most {schema['maxItems']} items",
            )
        )
    if "minItems" in schema and len(value) < schema["minItems"]:
        errors.append(
            invalid(
                path, len(value), f"{path} in body should have at least {schema['minItems']} items"
            )
        )
    items = schema.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(value):
            errors += validate(item, items, index(path, i))
    errors += _validate_list_type(value, schema, path)
    return errors


def _validate_list_type(value: list[Any], schema: Schema, path: str) -> list[FieldError]:
    list_type = schema.get("x-kubernetes-list-type")
    keys: list[str] = schema.get("x-kubernetes-list-map-keys") or []
    seen: set[str] = set()
    errors: list[FieldError] = []
    for i, item in enumerate(value):
        if list_type == "set":
            marker = json.dumps(item, sort_keys=True)
        elif list_type == "map" and isinstance(item, dict):
            marker = json.dumps({k: item.get(k) for k in keys}, sort_keys=True)
        else:
            continue
        if marker in seen:
            dup = item if list_type == "set" else {k: item.get(k) for k in keys}
            errors.append(FieldError("FieldValueDuplicate", index(path, i), dup))
        seen.add(marker)
    return errors


def _validate_scalar(value: Any, schema: Schema, path: str) -> list[FieldError]:
    if isinstance(value, str):
        return _validate_string(value, schema, path)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _validate_number(value, schema, path)
    return []


def _validate_string(value: str, schema: Schema, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    length = len(value)
    if "maxLength" in schema and length > schema["maxLength"]:
        limit = schema["maxLength"]
        unit = "byte" if limit == 1 else "bytes"
        errors.append(
            FieldError("FieldValueTooLong", path, value, f"may not be more than {limit} {unit}")
        )
    if "minLength" in schema and length < schema["minLength"]:
        errors.append(
            invalid(
                path, value, f"{path} in body should be at least {schema['minLength']} chars long"
            )
        )
    pattern = schema.get("pattern")
    if pattern is not None and not re.search(pattern, value):
        errors.append(invalid(path, value, f"{path} in body should match '{pattern}'"))
    fmt = schema.get("format")
    check = FORMATS.get(fmt or "")
    if check is not None and not check(value):
        errors.append(invalid(path, value, f'{path} in body must be of type {fmt}: "{value}"'))
    return errors


def _validate_number(value: float, schema: Schema, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    low = schema.get("minimum")
    if low is not None:
        if schema.get("exclusiveMinimum") and value <= low:
            errors.append(invalid(path, value, f"{path} in body should be greater than {low}"))
        elif value < low:
            errors.append(
                invalid(path, value, f"{path} in body should be greater than or equal to {low}")
            )
    high = schema.get("maximum")
    if high is not None:
        if schema.get("exclusiveMaximum") and value >= high:
            errors.append(invalid(path, value, f"{path} in body should be less than {high}"))
        elif value > high:
            errors.append(
                invalid(path, value, f"{path} in body should be less than or equal to {high}")
            )
    step = schema.get("multipleOf")
    if step and value % step:
        errors.append(invalid(path, value, f"{path} in body should be a multiple of {step}"))
    return errors
