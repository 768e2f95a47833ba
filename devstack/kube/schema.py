"""Structural schemas of custom resources: pruning, defaulting and validation.

Owns what the real server does with a CRD's `openAPIV3Schema` on every write: drop unknown
fields, fill in defaults, and validate type, required, enum, pattern, lengths, bounds, item
counts, list uniqueness and the formats CRDs use, with the error types, wording and order of
kube-openapi and the real server's list-type check. CEL rules live in `devstack.kube.cel_rules`.
It must never mutate a stored object: callers pass a fresh copy.
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
    if actual == expected or (expected == "number" and actual == "integer"):
        return True
    # A float that holds a whole number passes as an integer, as Go's JSON numbers do.
    return expected == "integer" and isinstance(value, float) and value.is_integer()


_BLOCKING = frozenset(
    {
        "FieldValueNotSupported",
        "FieldValueRequired",
        "FieldValueTooLong",
        "FieldValueTooMany",
        "FieldValueTypeInvalid",
    }
)


def blocks_rules(errors: list[FieldError]) -> bool:
    """Whether the real server skips a CRD's CEL rules after these schema errors (an enum,
    required, length, count or type failure leaves the rules unchecked)."""
    return any(e.reason in _BLOCKING for e in errors)


def validate(value: Any, schema: Schema, path: str = "") -> list[FieldError]:
    """Validate a value against a structural schema; return every failure.

    The failures come in the real server's order: the OpenAPI validation of the whole tree
    first, then the uniqueness of `x-kubernetes-list-type` set and map lists.
    """
    return _validate(value, schema, path) + list_type_errors(value, schema, path)


def _validate(value: Any, schema: Schema, path: str) -> list[FieldError]:
    """kube-openapi's validator chain: type, string, format, number, array, enum, object; each
    runs when it applies to the value's own kind, whatever the type check said."""
    if schema.get("x-kubernetes-int-or-string"):
        expected = "integer,string"
        type_ok = isinstance(value, int | str) and not isinstance(value, bool)
    else:
        expected = str(schema.get("type") or "")
        type_ok = not expected or _type_ok(value, expected)
    if value is None:
        if expected and not schema.get("nullable"):
            return [_type_error(path, expected, value), *_validate_enum(value, schema, path)]
        return _validate_enum(value, schema, path)
    errors: list[FieldError] = []
    if not type_ok:
        errors.append(_type_error(path, expected, value))
    if isinstance(value, str):
        errors += _validate_string(value, schema, path)
        errors += _validate_format(value, schema, path)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        errors += _validate_number(value, schema, path)
    elif isinstance(value, list):
        errors += _validate_array(value, schema, path)
    errors += _validate_enum(value, schema, path)
    if isinstance(value, dict):
        errors += _validate_object(value, schema, path)
    return errors


def _type_error(path: str, expected: str, value: Any) -> FieldError:
    actual = type_name(value)
    return FieldError(
        "FieldValueTypeInvalid",
        path,
        actual,
        f"{path} in body must be of type {expected}: {go_quote(actual)}",
    )


def go_quote(text: str) -> str:
    """Quote a string the way Go's `%q` does (strconv.Quote)."""
    out = ['"']
    for char in text:
        code = ord(char)
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif char in _GO_ESCAPES:
            out.append(_GO_ESCAPES[char])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif not char.isprintable():
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


_GO_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
}


def _validate_enum(value: Any, schema: Schema, path: str) -> list[FieldError]:
    allowed = schema.get("enum")
    if not allowed or any(_same(value, v) for v in allowed):
        return []
    # Go quotes each allowed value, a non-string one as its JSON text.
    supported = ", ".join(go_quote(v if isinstance(v, str) else json.dumps(v)) for v in allowed)
    return [FieldError("FieldValueNotSupported", path, value, f"supported values: {supported}")]


def _same(value: Any, allowed: Any) -> bool:
    if isinstance(value, bool) or isinstance(allowed, bool):
        return type(value) is type(allowed) and value == allowed
    return bool(value == allowed)


def _validate_object(value: dict[str, Any], schema: Schema, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    count = len(value)
    if "minProperties" in schema and count < schema["minProperties"]:
        errors.append(
            invalid(
                path,
                count,
                f"{path} in body should have at least {schema['minProperties']} properties",
            )
        )
    if "maxProperties" in schema and count > schema["maxProperties"]:
        errors.append(
            FieldError(
                "FieldValueTooMany",
                path,
                count,
                f"must have at most {schema['maxProperties']} items",
            )
        )
    props: dict[str, Schema] = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        for key, child in value.items():
            if key not in props:
                errors += _validate(child, extra, join(path, key))
    for key, child in value.items():
        if key in props:
            errors += _validate(child, props[key], join(path, key))
    for key in schema.get("required") or []:
        if key not in value:
            errors.append(required(join(path, key)))
    return errors


def _validate_array(value: list[Any], schema: Schema, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    items = schema.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(value):
            errors += _validate(item, items, index(path, i))
    if "minItems" in schema and len(value) < schema["minItems"]:
        errors.append(
            invalid(
                path, len(value), f"{path} in body should have at least {schema['minItems']} items"
            )
        )
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        errors.append(
            FieldError(
                "FieldValueTooMany",
                path,
                len(value),
                f"must have at most {schema['maxItems']} items",
            )
        )
    return errors


def list_type_errors(value: Any, schema: Schema, path: str = "") -> list[FieldError]:
    """Duplicates in `x-kubernetes-list-type` set and map lists, anywhere in the tree: one error
    at the second occurrence of each repeated item (or key)."""
    errors: list[FieldError] = []
    if isinstance(value, dict):
        props: dict[str, Schema] = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key, child in value.items():
                errors += list_type_errors(child, extra, index(path, key))
        for key, child in value.items():
            if key in props:
                errors += list_type_errors(child, props[key], join(path, key))
    elif isinstance(value, list):
        errors += _duplicates(value, schema, path)
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                errors += list_type_errors(item, items, index(path, i))
    return errors


def _duplicates(value: list[Any], schema: Schema, path: str) -> list[FieldError]:
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "map":
        for i, item in enumerate(value):
            if item is not None and not isinstance(item, dict):
                return [
                    invalid(index(path, i), item, "must be an object for an array of list-type map")
                ]
        keys: list[str] = schema.get("x-kubernetes-list-map-keys") or []
        markers = [
            {k: item[k] for k in sorted(keys) if k in item} if isinstance(item, dict) else {}
            for item in value
        ]
    elif list_type == "set":
        markers = list(value)
    else:
        return []
    seen: dict[str, int] = {}
    errors: list[FieldError] = []
    for i, marker in enumerate(markers):
        text = json.dumps([type_name(marker), marker], sort_keys=True)
        seen[text] = seen.get(text, 0) + 1
        if seen[text] == 2:
            errors.append(FieldError("FieldValueDuplicate", index(path, i), marker))
    return errors


def _validate_string(value: str, schema: Schema, path: str) -> list[FieldError]:
    """maxLength, minLength, pattern: the first that fails is the only error."""
    length = len(value)
    if "maxLength" in schema and length > schema["maxLength"]:
        limit = schema["maxLength"]
        unit = "byte" if limit == 1 else "bytes"
        return [
            FieldError("FieldValueTooLong", path, value, f"may not be more than {limit} {unit}")
        ]
    if "minLength" in schema and length < schema["minLength"]:
        return [
            invalid(
                path, value, f"{path} in body should be at least {schema['minLength']} chars long"
            )
        ]
    pattern = schema.get("pattern")
    if pattern is not None and not re.search(pattern, value):
        return [invalid(path, value, f"{path} in body should match '{pattern}'")]
    return []


def _validate_format(value: str, schema: Schema, path: str) -> list[FieldError]:
    fmt = schema.get("format")
    check = FORMATS.get(fmt or "")
    if check is None or check(value):
        return []
    return [
        FieldError(
            "FieldValueTypeInvalid",
            path,
            value,
            f"{path} in body must be of type {fmt}: {go_quote(value)}",
        )
    ]


def _validate_number(value: float, schema: Schema, path: str) -> list[FieldError]:
    """multipleOf, maximum, minimum, each checked."""
    errors: list[FieldError] = []
    step = schema.get("multipleOf")
    if step and value % step:
        errors.append(invalid(path, value, f"{path} in body should be a multiple of {step}"))
    high = schema.get("maximum")
    if high is not None:
        if schema.get("exclusiveMaximum") and value >= high:
            errors.append(invalid(path, value, f"{path} in body should be less than {high}"))
        elif value > high:
            errors.append(
                invalid(path, value, f"{path} in body should be less than or equal to {high}")
            )
    low = schema.get("minimum")
    if low is not None:
        if schema.get("exclusiveMinimum") and value <= low:
            errors.append(invalid(path, value, f"{path} in body should be greater than {low}"))
        elif value < low:
            errors.append(
                invalid(path, value, f"{path} in body should be greater than or equal to {low}")
            )
    return errors
