"""CEL `x-kubernetes-validations` rules of CRD schemas, evaluated as the real server does.

Owns binding `self` and `oldSelf` (with the Kubernetes escaping of property names such as
`__namespace__`, `__dash__` and `__dot__`), transition rules that run only when an old value
correlates (or always with `optionalOldSelf`), `message`, `messageExpression`, `fieldPath` and
`reason`, skipping every rule when the schema validation already failed with an error that
blocks them, and the real wording: `<path>: Invalid value: <message>` for a rule on an object or
a list, `<path>: Invalid value: <value>: <message>` on a scalar, and `<path>: Invalid value:
"object": <error> evaluating rule: <rule>` when a rule fails to evaluate. Uses the
`common-expression-language` package (`import cel`), which supports optionals.

Deliberately left out: cost budgets, ratcheting of unchanged invalid values, the Kubernetes
extension libraries (quantity, URL, IP/CIDR, `format`, authorizer) and the `.?` syntax.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

import cel
from cel import stdlib

from devstack.kube.errors import FieldError
from devstack.kube.schema import Schema, blocks_rules, index, join, validate

_RESERVED = frozenset(
    [
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    ]
)
_IDENT = re.compile(r"^[_a-zA-Z][_a-zA-Z0-9]*$")
_OLD_SELF = re.compile(r"\boldSelf\b")
_MISSING: Any = object()


def escape_property(name: str) -> str | None:
    """Escape a property name for CEL; None when it cannot be reached from CEL."""
    if name in _RESERVED:
        return f"__{name}__"
    escaped = (
        name.replace("__", "__underscores__")
        .replace(".", "__dot__")
        .replace("-", "__dash__")
        .replace("/", "__slash__")
    )
    return escaped if _IDENT.match(escaped) else None


def to_cel(value: Any, schema: Schema) -> Any:
    """Convert a JSON value to what CEL sees: declared properties escaped, maps left alone."""
    if isinstance(value, dict):
        props: dict[str, Schema] = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        out: dict[str, Any] = {}
        for key, child in value.items():
            if key in props:
                name = escape_property(key)
                if name is not None:
                    out[name] = to_cel(child, props[key])
            else:
                out[key] = to_cel(child, extra if isinstance(extra, dict) else {})
        return out
    if isinstance(value, list):
        items = schema.get("items")
        return [to_cel(v, items if isinstance(items, dict) else {}) for v in value]
    return value


_lock = threading.Lock()
_programs: dict[str, Any] = {}
_FUNCTIONS: dict[str, Any] = {
    name: func for library in stdlib.EXTENSIONS.values() for name, func in library.items()
}


def _program(expr: str) -> Any:
    with _lock:
        prog = _programs.get(expr)
        if prog is None:
            prog = cel.compile(expr)
            _programs[expr] = prog
        return prog


def _evaluate(expr: str, variables: dict[str, Any]) -> Any:
    ctx = cel.Context(variables=variables, functions=_FUNCTIONS)
    return _program(expr).execute(ctx)


def compile_error(expr: str) -> str | None:
    """Return a compile error for a rule, or None when it parses."""
    try:
        _program(expr)
    except (ValueError, RuntimeError) as exc:
        return str(exc)
    return None


@dataclass(frozen=True)
class _Node:
    value: Any
    old: Any
    schema: Schema
    path: str


UNCHECKED = (
    "some validation rules were not checked because the object was invalid; correct the "
    "existing errors to complete validation"
)


def has_rules(schema: Schema) -> bool:
    """Whether any node of the schema carries `x-kubernetes-validations`."""
    if schema.get("x-kubernetes-validations"):
        return True
    children = list((schema.get("properties") or {}).values())
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            children.append(schema[key])
    return any(has_rules(child) for child in children)


def check(
    value: Any,
    old: Any,
    schema: Schema,
    path: str = "",
    *,
    schema_errors: list[FieldError] | None = None,
) -> list[FieldError]:
    """Run every CEL rule in the schema tree; `old` is None on create.

    As the real server does, the rules are not run when the object failed its schema with an
    enum, required, length, count or type error: the one error returned then says so (a schema
    without rules returns none). `schema_errors` are the errors the schema validation of the
    same object found; when not given, the object (`metadata` left out) is validated here.
    """
    if not has_rules(schema):
        return []
    if schema_errors is None:
        body = value
        if not path and isinstance(value, dict):
            body = {k: v for k, v in value.items() if k != "metadata"}
        schema_errors = validate(body, schema, path)
    if blocks_rules(schema_errors):
        return [FieldError("FieldValueInvalid", "<nil>", None, UNCHECKED)]
    errors: list[FieldError] = []
    _walk(_Node(value, _MISSING if old is None else old, schema, path), errors)
    return errors


def _walk(node: _Node, errors: list[FieldError]) -> None:
    if node.value is None:
        return
    for rule in node.schema.get("x-kubernetes-validations") or []:
        error = _run_rule(rule, node)
        if error is not None:
            errors.append(error)
    for child in _children(node):
        _walk(child, errors)


def _children(node: _Node) -> list[_Node]:
    value, old, schema = node.value, node.old, node.schema
    out: list[_Node] = []
    if isinstance(value, dict):
        props: dict[str, Schema] = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        old_map = old if isinstance(old, dict) else {}
        for key, child in value.items():
            sub = props.get(key) or (extra if isinstance(extra, dict) else None)
            if sub is None:
                continue
            path = join(node.path, key) if key in props else index(node.path, key)
            out.append(_Node(child, old_map.get(key, _MISSING), sub, path))
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        olds = _correlate_list(value, old, schema)
        for i, item in enumerate(value):
            out.append(_Node(item, olds[i], schema["items"], index(node.path, i)))
    return out


def _correlate_list(value: list[Any], old: Any, schema: Schema) -> list[Any]:
    keys: list[str] = schema.get("x-kubernetes-list-map-keys") or []
    if schema.get("x-kubernetes-list-type") != "map" or not isinstance(old, list) or not keys:
        return [_MISSING] * len(value)
    by_key = {tuple(repr(o.get(k)) for k in keys): o for o in old if isinstance(o, dict)}
    return [
        by_key.get(tuple(repr(v.get(k)) for k in keys), _MISSING)
        if isinstance(v, dict)
        else _MISSING
        for v in value
    ]


def _run_rule(rule: dict[str, Any], node: _Node) -> FieldError | None:
    expr = str(rule.get("rule", ""))
    transition = bool(_OLD_SELF.search(expr))
    optional_old = bool(rule.get("optionalOldSelf"))
    if transition and node.old is _MISSING and not optional_old:
        return None
    variables: dict[str, Any] = {"self": to_cel(node.value, node.schema)}
    if transition:
        old_cel = None if node.old is _MISSING else to_cel(node.old, node.schema)
        if optional_old:
            variables["oldSelf"] = (
                cel.OptionalValue.none() if old_cel is None else cel.OptionalValue.of(old_cel)
            )
        else:
            variables["oldSelf"] = old_cel
    try:
        result = _evaluate(expr, variables)
    except (KeyError, IndexError, TypeError, ValueError, RuntimeError) as exc:
        # An evaluation error is reported at the rule's node, its fieldPath not applied.
        return FieldError(
            "FieldValueInvalid",
            node.path or "<nil>",
            str(node.schema.get("type") or ""),
            f"{_describe(exc)} evaluating rule: {expr}",
        )
    if result is True:
        return None
    path = (node.path + str(rule.get("fieldPath") or "")).lstrip(".") or "<nil>"
    return _error(rule, path, node, _message(rule, variables, expr))


def _describe(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"no such key: {exc.args[0] if exc.args else ''}"
    return str(exc)


def _message(rule: dict[str, Any], variables: dict[str, Any], expr: str) -> str:
    message_expr = rule.get("messageExpression")
    if message_expr:
        try:
            text = _evaluate(str(message_expr), variables)
        except (KeyError, IndexError, TypeError, ValueError, RuntimeError):
            text = None
        if isinstance(text, str) and text.strip():
            return text
    message = rule.get("message")
    if message:
        return str(message)
    return f"failed rule: {expr}"


def _error(rule: dict[str, Any], path: str, node: _Node, message: str) -> FieldError:
    """A failed rule's error: its value is the node's own for a scalar, left out for an object
    or a list (`Invalid value: <message>`)."""
    reason = str(rule.get("reason") or "FieldValueInvalid")
    shown = node.schema.get("type") not in ("object", "array")
    if reason == "FieldValueForbidden":
        return FieldError("FieldValueForbidden", path, detail=message)
    if reason == "FieldValueRequired":
        return FieldError("FieldValueRequired", path, detail=message)
    if reason == "FieldValueDuplicate":
        return FieldError("FieldValueDuplicate", path, node.value, show_value=shown)
    return FieldError("FieldValueInvalid", path, node.value, message, show_value=shown)
