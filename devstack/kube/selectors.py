"""Label and field selectors for list and watch.

Owns parsing and matching of `labelSelector` (=, ==, !=, in, notin, exists, !exists) and
`fieldSelector` (=, ==, != on metadata.name, metadata.namespace and a kind's extra fields). It must
never accept a selector the real server rejects without saying so: a bad selector is a 400.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from devstack.kube.errors import ApiError, bad_request

_SET_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9./_-]+)\s*(?:(notin|in)\s*\(([^)]*)\)\s*)?$")
_EQ_RE = re.compile(r"^\s*([A-Za-z0-9./_-]+)\s*(==|!=|=)\s*([A-Za-z0-9._-]*)\s*$")


@dataclass(frozen=True)
class Requirement:
    """One term of a selector."""

    key: str
    op: str
    values: frozenset[str]

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Tell whether a label map satisfies this term."""
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        # `!=` and `notin` match objects that lack the key, as the real server does.
        return not present or value not in self.values


def _split_terms(text: str) -> list[str]:
    terms: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return [t for t in terms if t.strip()]


def _parse_term(term: str) -> Requirement:
    eq = _EQ_RE.match(term)
    if eq:
        key, op, value = eq.groups()
        return Requirement(key, "!=" if op == "!=" else "=", frozenset([value]))
    match = _SET_RE.match(term)
    if not match:
        raise bad_request(
            f"unable to parse requirement: found '{term.strip()}', "
            "expected: in, notin, =, ==, !=, gt, lt"
        )
    negate, key, set_op, values = match.groups()
    if set_op:
        if negate:
            raise bad_request(f"unable to parse requirement: found '{term.strip()}'")
        items = frozenset(v.strip() for v in values.split(",") if v.strip())
        return Requirement(key, set_op, items)
    return Requirement(key, "!exists" if negate else "exists", frozenset())


def parse_label_selector(text: str | None) -> list[Requirement]:
    """Parse a `labelSelector` query value; empty means everything."""
    if not text:
        return []
    return [_parse_term(t) for t in _split_terms(text)]


def labels_match(reqs: list[Requirement], obj: Mapping[str, Any]) -> bool:
    """Tell whether an object's labels satisfy every term."""
    if not reqs:
        return True
    labels = obj.get("metadata", {}).get("labels") or {}
    return all(r.matches(labels) for r in reqs)


FieldGetter = Callable[[Mapping[str, Any]], str]

_BASE_FIELDS: dict[str, FieldGetter] = {
    "metadata.name": lambda o: str(o.get("metadata", {}).get("name", "")),
    "metadata.namespace": lambda o: str(o.get("metadata", {}).get("namespace", "")),
}


@dataclass(frozen=True)
class FieldTerm:
    """One `field=value` or `field!=value` term."""

    getter: FieldGetter
    value: str
    negate: bool


def parse_field_selector(text: str | None, extra: Mapping[str, FieldGetter]) -> list[FieldTerm]:
    """Parse a `fieldSelector`; only metadata.name, metadata.namespace and `extra` are known."""
    if not text:
        return []
    known = {**_BASE_FIELDS, **extra}
    terms: list[FieldTerm] = []
    for raw in text.split(","):
        match = re.match(r"^\s*([A-Za-z0-9._-]+)\s*(==|!=|=)\s*(.*?)\s*$", raw)
        if not match:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{raw}'")
        name, op, value = match.groups()
        if name not in known:
            raise ApiError(400, "BadRequest", f"field label not supported: {name}")
        terms.append(FieldTerm(known[name], value, op == "!="))
    return terms


def fields_match(terms: list[FieldTerm], obj: Mapping[str, Any]) -> bool:
    """Tell whether an object satisfies every field term."""
    return all((t.getter(obj) == t.value) != t.negate for t in terms)
