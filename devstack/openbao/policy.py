"""ACL policies of the OpenBao stand-in: the HCL subset, templated paths and the path matcher.

Owns parsing a policy body (HCL `path "<glob>" { capabilities = [...] }` blocks, or the same
structure as JSON), resolving identity templates in path names for one token, and deciding which
capabilities a set of policies grants on a request path, with OpenBao's precedence between
overlapping globs. Pure: no I/O, no clock, no server state.

Must never grant anything on a path a policy does not name, and never let a rule whose template
cannot be resolved for the token match at all (OpenBao drops such rules).

Deliberately left out compared with OpenBao: the parameter constraints (`allowed_parameters`,
`denied_parameters`, `required_parameters`) and the wrapping TTL bounds are refused at write time
rather than enforced, and templates reach only the entity id and name, and each alias's name and
metadata.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

CAPABILITIES = frozenset(
    {"create", "read", "update", "patch", "delete", "list", "sudo", "deny", "subscribe"}
)

_TEMPLATE = re.compile(r"\{\{\s*([^{}]+?)\s*\}\}")
_ALIAS_FIELD = re.compile(r"^identity\.entity\.aliases\.([^.]+)\.(name|metadata\.(.+))$")
_ENTITY_METADATA = re.compile(r"^identity\.entity\.metadata\.(.+)$")


class PolicyError(ValueError):
    """A policy body that this stand-in cannot accept."""


@dataclass(frozen=True)
class Identity:
    """What templated policy paths may read about the token's caller.

    Attributes:
        entity_id: The entity's id.
        entity_name: The entity's name.
        entity_metadata: The entity's own metadata.
        aliases: Per auth mount accessor, the alias name and its metadata.
    """

    entity_id: str = ""
    entity_name: str = ""
    entity_metadata: Mapping[str, str] = field(default_factory=dict)
    aliases: Mapping[str, tuple[str, Mapping[str, str]]] = field(default_factory=dict)


@dataclass(frozen=True)
class PathRule:
    """One `path` block as written: the (maybe templated) path and its capabilities."""

    path: str
    capabilities: frozenset[str]


@dataclass(frozen=True)
class Policy:
    """A named ACL policy: its source text and the rules parsed from it."""

    name: str
    text: str
    rules: tuple[PathRule, ...]


# --- parsing -------------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<comment>\#[^\n]*|//[^\n]*|/\*.*?\*/)
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<number>-?\d+(?:\.\d+)?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_\-]*)
  | (?P<punct>[{}\[\]=,:])
    """,
    re.VERBOSE | re.DOTALL,
)


def _tokenize(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            line = text.count("\n", 0, pos) + 1
            raise PolicyError(f"failed to parse policy: unexpected character at line {line}")
        pos = match.end()
        kind = match.lastgroup or ""
        if kind in ("ws", "comment"):
            continue
        value = match.group()
        if kind == "string":
            value = json.loads(value)
        tokens.append((kind, value))
    return tokens


class _Parser:
    """A recursive-descent parser for the HCL subset policies use."""

    def __init__(self, text: str) -> None:
        self._tokens = _tokenize(text)
        self._pos = 0

    def _peek(self) -> tuple[str, str] | None:
        return self._tokens[self._pos] if self._pos < len(self._tokens) else None

    def _take(self, kind: str, value: str | None = None) -> str:
        token = self._peek()
        if token is None or token[0] != kind or (value is not None and token[1] != value):
            wanted = value or kind
            raise PolicyError(f"failed to parse policy: expected {wanted}")
        self._pos += 1
        return token[1]

    def parse(self) -> list[tuple[str, dict[str, object]]]:
        blocks: list[tuple[str, dict[str, object]]] = []
        while self._peek() is not None:
            keyword = self._take("ident")
            if keyword != "path":
                raise PolicyError(f'failed to parse policy: invalid key "{keyword}"')
            name = self._take("string")
            blocks.append((name, self._object()))
        return blocks

    def _object(self) -> dict[str, object]:
        self._take("punct", "{")
        body: dict[str, object] = {}
        while (token := self._peek()) is not None and token != ("punct", "}"):
            key = self._take(token[0]) if token[0] in ("ident", "string") else self._take("ident")
            self._take("punct", "=")
            body[key] = self._value()
            if self._peek() == ("punct", ","):
                self._pos += 1
        self._take("punct", "}")
        return body

    def _value(self) -> object:
        token = self._peek()
        if token == ("punct", "["):
            self._pos += 1
            items: list[object] = []
            while self._peek() != ("punct", "]"):
                items.append(self._value())
                if self._peek() == ("punct", ","):
                    self._pos += 1
            self._take("punct", "]")
            return items
        if token == ("punct", "{"):
            return self._object()
        if token is not None and token[0] in ("string", "number", "ident"):
            self._pos += 1
            return token[1]
        raise PolicyError("failed to parse policy: expected a value")


def _blocks_from_json(text: str) -> list[tuple[str, dict[str, object]]]:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PolicyError(f"failed to parse policy: {exc.msg}") from exc
    paths = document.get("path") if isinstance(document, dict) else None
    if not isinstance(paths, dict):
        raise PolicyError('failed to parse policy: a JSON policy needs a "path" object')
    blocks: list[tuple[str, dict[str, object]]] = []
    for name, body in paths.items():
        if not isinstance(body, dict):
            raise PolicyError(f'failed to parse policy: path "{name}" is not an object')
        blocks.append((str(name), body))
    return blocks


def _rule_from_block(path: str, body: Mapping[str, object]) -> PathRule:
    unknown = sorted(set(body) - {"capabilities"})
    if unknown:
        raise PolicyError(
            f'path "{path}": {", ".join(unknown)} not supported by this OpenBao stand-in'
        )
    raw = body.get("capabilities", [])
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        raise PolicyError(f'path "{path}": capabilities must be a list of strings')
    capabilities = frozenset(str(item).lower() for item in raw)
    invalid = sorted(capabilities - CAPABILITIES)
    if invalid:
        raise PolicyError(f'path "{path}": invalid capability "{invalid[0]}"')
    path = path.removeprefix("/")
    glob_body = path[:-1] if path.endswith("*") else path
    if "*" in glob_body:
        raise PolicyError(f'path "{path}": "*" is only allowed at the end of a path')
    if any("+" in seg and seg != "+" for seg in glob_body.split("/")):
        raise PolicyError(f'path "{path}": "+" must be a whole path segment')
    return PathRule(path=path, capabilities=capabilities)


def parse_policy(name: str, text: str) -> Policy:
    """Parse a policy body written in HCL or JSON.

    Args:
        name: The policy's name.
        text: The policy body.

    Returns:
        The parsed policy.

    Raises:
        PolicyError: The body is not in the supported subset.
    """
    stripped = text.strip()
    blocks = _blocks_from_json(stripped) if stripped.startswith("{") else _Parser(text).parse()
    return Policy(
        name=name, text=text, rules=tuple(_rule_from_block(path, body) for path, body in blocks)
    )


# --- templates -----------------------------------------------------------------------------------


def _resolve_parameter(parameter: str, identity: Identity) -> str | None:
    if parameter == "identity.entity.id":
        return identity.entity_id or None
    if parameter == "identity.entity.name":
        return identity.entity_name or None
    if match := _ENTITY_METADATA.match(parameter):
        return identity.entity_metadata.get(match.group(1))
    if match := _ALIAS_FIELD.match(parameter):
        alias = identity.aliases.get(match.group(1))
        if alias is None:
            return None
        alias_name, metadata = alias
        return alias_name if match.group(2) == "name" else metadata.get(match.group(3) or "")
    return None


def resolve_template(path: str, identity: Identity | None) -> str | None:
    """Resolve the identity templates in a policy path.

    Args:
        path: A policy path, maybe holding `{{identity...}}` parameters.
        identity: The caller's identity, or None for a token without an entity.

    Returns:
        The path with every parameter replaced, or None when one cannot be resolved (or resolves
        to a value that would widen the path), in which case the rule does not apply.
    """
    if "{{" not in path:
        return path
    if identity is None:
        return None
    unresolved = False

    def substitute(match: re.Match[str]) -> str:
        nonlocal unresolved
        value = _resolve_parameter(match.group(1), identity)
        # A value that carries glob or separator characters would let the caller reach paths the
        # template author never meant, so such a rule is dropped rather than widened.
        if not value or any(ch in value for ch in "*+/"):
            unresolved = True
            return ""
        return value

    resolved = _TEMPLATE.sub(substitute, path)
    return None if unresolved else resolved


# --- matching ------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1024)
def _pattern_regex(pattern: str) -> re.Pattern[str]:
    glob = pattern.endswith("*")
    body = pattern[:-1] if glob else pattern
    parts = ["[^/]+" if segment == "+" else re.escape(segment) for segment in body.split("/")]
    return re.compile("/".join(parts) + (".*" if glob else ""), re.DOTALL)


def path_matches(pattern: str, path: str) -> bool:
    """Return whether a resolved policy path covers a request path.

    Args:
        pattern: A policy path: exact, with `+` segments, and/or ending in `*`.
        path: The request path, without the `/v1/` prefix.

    Returns:
        Whether the pattern covers the path.
    """
    return _pattern_regex(pattern).fullmatch(path) is not None


def _first_wildcard(pattern: str) -> int:
    positions = [pos for pos in (pattern.find("+"), pattern.find("*")) if pos >= 0]
    return min(positions) if positions else len(pattern)


def _priority(pattern: str) -> tuple[int, int, int, int, str]:
    """Order overlapping patterns as OpenBao does: the larger tuple wins."""
    return (
        _first_wildcard(pattern),
        0 if pattern.endswith("*") else 1,
        -pattern.split("/").count("+"),
        len(pattern),
        pattern,
    )


def granted_capabilities(
    policies: Iterable[Policy], path: str, identity: Identity | None
) -> frozenset[str]:
    """Compute the capabilities a set of policies grants on one request path.

    Rules naming the same resolved path are merged across policies (a `deny` among them wins);
    then an exact rule beats every glob, and among globs the most specific one applies alone.

    Args:
        policies: The token's policies (not including the root policy).
        path: The request path, without the `/v1/` prefix.
        identity: The caller's identity for templated paths.

    Returns:
        The granted capabilities; empty when nothing applies or the rule denies.
    """
    merged: dict[str, set[str]] = {}
    for policy in policies:
        for rule in policy.rules:
            resolved = resolve_template(rule.path, identity)
            if resolved is not None and path_matches(resolved, path):
                merged.setdefault(resolved, set()).update(rule.capabilities)
    if not merged:
        return frozenset()
    best = path if path in merged else max(merged, key=_priority)
    capabilities = merged[best]
    return frozenset() if "deny" in capabilities else frozenset(capabilities)
