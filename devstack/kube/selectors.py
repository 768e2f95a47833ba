"""Label and field selectors for list and watch.

Owns parsing and matching of `labelSelector` (=, ==, !=, in, notin, gt, lt, exists, !exists, with
the real lexer's tokens and error wording, and the validation of label keys and values) and
`fieldSelector` (=, ==, != on metadata.name, metadata.namespace and a kind's extra fields, with
backslash escapes). It must never accept a selector the real server rejects without saying so: a
bad selector is a 400.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from devstack.kube.errors import bad_request

_SPECIAL = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")
_KEYWORDS = {
    ")": ")",
    ",": ",",
    "!": "!",
    "==": "==",
    "=": "=",
    ">": "gt",
    "<": "lt",
    "in": "in",
    "!=": "!=",
    "notin": "notin",
    "(": "(",
}
_BINARY = "in, notin, =, ==, !=, gt, lt"
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_SUBDOMAIN_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"


def _regex_error(message: str, fmt: str, *examples: str) -> str:
    listed = "".join((" or " if i else "") + f"'{e}', " for i, e in enumerate(examples))
    return f"{message} (e.g. {listed}regex used for validation is '{fmt}')"


_KEY_MESSAGE = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character"
)


def label_key_errors(key: str) -> list[str]:
    """What is wrong with a label key (a qualified name), worded as the real server words it."""
    parts = key.split("/")
    problems: list[str] = []
    if len(parts) > 2:
        return [
            "a valid label key "
            + _regex_error(_KEY_MESSAGE, _LABEL_NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            problems.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                problems.append("prefix part must be no more than 253 bytes")
            if not _DNS_SUBDOMAIN.match(prefix):
                problems.append(
                    "prefix part "
                    + _regex_error(
                        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                        "characters, '-' or '.', and must start and end with an alphanumeric "
                        "character",
                        _DNS_SUBDOMAIN_FMT,
                        "example.com",
                    )
                )
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > 63:
        problems.append("name part must be no more than 63 bytes")
    if not _LABEL_NAME.match(name):
        problems.append(
            "name part "
            + _regex_error(_KEY_MESSAGE, _LABEL_NAME_FMT, "MyName", "my.name", "123-abc")
        )
    return problems


def label_value_errors(value: str) -> list[str]:
    """What is wrong with a label value, worded as the real server words it."""
    problems = []
    if len(value) > 63:
        problems.append("must be no more than 63 bytes")
    if not _LABEL_VALUE.match(value):
        problems.append(
            _regex_error(
                "a valid label must be an empty string or consist of alphanumeric characters, "
                "'-', '_' or '.', and must start and end with an alphanumeric character",
                f"({_LABEL_NAME_FMT})?",
                "MyValue",
                "my_value",
                "12345",
            )
        )
    return problems


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
        if self.op in ("=", "==", "in"):
            return present and value in self.values
        if self.op in ("gt", "lt"):
            try:
                have, want = int(str(value)), int(next(iter(self.values)))
            except ValueError:
                return False
            return present and (have > want if self.op == "gt" else have < want)
        # `!=` and `notin` match objects that lack the key, as the real server does.
        return not present or value not in self.values


class SelectorError(Exception):
    """A label selector the parser refuses; the text is the real server's."""


def _lex(text: str) -> list[tuple[str, str]]:
    """Split a label selector into (token, literal) pairs as the real lexer does; the token of
    an identifier is "id", of the end "end"."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos] in _WHITESPACE:
            pos += 1
        if pos >= len(text):
            tokens.append(("end", ""))
            return tokens
        if text[pos] in _SPECIAL:
            buffer, found = "", ""
            while pos < len(text) and text[pos] in _SPECIAL:
                if buffer + text[pos] in _KEYWORDS:
                    buffer += text[pos]
                    found = buffer
                    pos += 1
                elif found:
                    break
                else:
                    buffer += text[pos]
                    pos += 1
            if not found:
                tokens.append(("error", f"error expected: keyword found '{buffer}'"))
            else:
                tokens.append((_KEYWORDS[found], found))
            continue
        start = pos
        while pos < len(text) and text[pos] not in _SPECIAL and text[pos] not in _WHITESPACE:
            pos += 1
        word = text[start:pos]
        tokens.append((_KEYWORDS.get(word, "id") if word in ("in", "notin") else "id", word))


class _Parser:
    def __init__(self, text: str) -> None:
        self.items = _lex(text)
        self.pos = 0

    def peek(self, values: bool = True) -> tuple[str, str]:
        tok, lit = self.items[self.pos]
        return ("id" if values and tok in ("in", "notin") else tok), lit

    def take(self, values: bool = True) -> tuple[str, str]:
        found = self.peek(values)
        self.pos += 1
        return found

    def parse(self) -> list[Requirement]:
        out: list[Requirement] = []
        while True:
            tok, lit = self.peek()
            if tok == "end":
                return out
            if tok not in ("id", "!"):
                raise SelectorError(f"found '{lit}', expected: !, identifier, or 'end of string'")
            try:
                out.append(self.requirement())
            except SelectorError as exc:
                raise SelectorError(f"unable to parse requirement: {exc}") from None
            tok, lit = self.take()
            if tok == "end":
                return out
            if tok != ",":
                raise SelectorError(f"found '{lit}', expected: ',' or 'end of string'")
            after, text = self.peek()
            if after not in ("id", "!"):
                raise SelectorError(f"found '{text}', expected: identifier after ','")

    def requirement(self) -> Requirement:
        tok, key = self.take()
        negated = tok == "!"
        if negated:
            tok, key = self.take()
        if tok != "id":
            raise SelectorError(f"found '{key}', expected: identifier")
        problems = label_key_errors(key)
        if problems:
            raise SelectorError(f"<nil>: Invalid value: {json.dumps(key)}: {'; '.join(problems)}")
        if negated:
            return _requirement(key, "!exists", [])
        if self.peek()[0] in ("end", ","):
            return _requirement(key, "exists", [])
        op, lit = self.take(values=False)
        if op not in ("in", "notin", "=", "==", "!=", "gt", "lt"):
            raise SelectorError(f"found '{lit}', expected: {_BINARY}")
        values = self.set_values() if op in ("in", "notin") else self.exact_value()
        return _requirement(key, op, sorted(values))

    def set_values(self) -> set[str]:
        tok, lit = self.take()
        if tok != "(":
            raise SelectorError(f"found '{lit}' expected: '('")
        tok, lit = self.peek()
        if tok == ")":
            self.take()
            return {""}
        if tok not in ("id", ","):
            raise SelectorError(f"found '{lit}', expected: ',', ')' or identifier")
        values = self.identifiers()
        if self.take()[0] != ")":
            raise SelectorError(f"found '{lit}', expected: ')'")
        return values

    def identifiers(self) -> set[str]:
        values: set[str] = set()
        while True:
            tok, lit = self.take()
            if tok == "id":
                values.add(lit)
                after, text = self.peek()
                if after == ",":
                    continue
                if after == ")":
                    return values
                raise SelectorError(f"found '{text}', expected: ',' or ')'")
            if tok == ",":
                if not values:
                    values.add("")
                after, _ = self.peek()
                if after in (")", ","):
                    values.add("")
                if after == ")":
                    return values
                continue
            raise SelectorError(f"found '{lit}', expected: ',', or identifier")

    def exact_value(self) -> set[str]:
        if self.peek()[0] in ("end", ","):
            return {""}
        tok, lit = self.take()
        if tok == "id":
            return {lit}
        raise SelectorError(f"found '{lit}', expected: identifier")


def _requirement(key: str, op: str, values: list[str]) -> Requirement:
    problems: list[str] = []
    if op in ("gt", "lt"):
        for i, value in enumerate(values):
            try:
                int(value)
            except ValueError:
                problems.append(
                    f"values[{i}]: Invalid value: {json.dumps(value)}: for 'Gt', 'Lt' operators, "
                    "the value must be an integer"
                )
    for i, value in enumerate(values):
        found = label_value_errors(value)
        if found:
            problems.append(
                f"values[{i}][{key}]: Invalid value: {json.dumps(value)}: {'; '.join(found)}"
            )
    if problems:
        raise SelectorError(problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]")
    return Requirement(key, op, frozenset(values))


def parse_label_selector(text: str | None) -> list[Requirement]:
    """Parse a `labelSelector` query value as the real server does; empty means everything.

    Raises:
        ApiError: 400 with the real parser's words for a selector it refuses.
    """
    if not text:
        return []
    try:
        return _Parser(text).parse()
    except SelectorError as exc:
        raise bad_request(str(exc)) from None


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


def _split_field_terms(text: str) -> list[str]:
    terms, start, escaped = [], 0, False
    for i, ch in enumerate(text):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _split_field_term(term: str) -> tuple[str, str, str] | None:
    for i in range(len(term)):
        for op in ("!=", "==", "="):
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op) :]
    return None


def _unescape_field_value(value: str) -> str:
    if not any(c in value for c in "\\,="):
        return value
    out, escaped = [], False
    for ch in value:
        if escaped:
            if ch not in "\\,=":
                raise bad_request(f"invalid field selector: invalid escape sequence: \\{ch}")
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in ",=":
            raise bad_request(f"invalid field selector: unescaped character in value: {ord(ch)}")
        else:
            out.append(ch)
    if escaped:
        raise bad_request("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def parse_field_selector(text: str | None, extra: Mapping[str, FieldGetter]) -> list[FieldTerm]:
    """Parse a `fieldSelector` as the real server does (terms sorted, `\\` escapes `\\`, `,`
    and `=` in values); only metadata.name, metadata.namespace and `extra` are known fields."""
    if not text:
        return []
    known = {**_BASE_FIELDS, **extra}
    terms: list[FieldTerm] = []
    for raw in sorted(_split_field_terms(text)):
        if not raw:
            continue
        split = _split_field_term(raw)
        if split is None:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{raw}'")
        name, op, value = split
        terms.append(FieldTerm(known.get(name, _unknown), _unescape_field_value(value), op == "!="))
        if name not in known:
            raise bad_request(f"field label not supported: {name}")
    return terms


def _unknown(obj: Mapping[str, Any]) -> str:
    return ""


def fields_match(terms: list[FieldTerm], obj: Mapping[str, Any]) -> bool:
    """Tell whether an object satisfies every field term."""
    return all((t.getter(obj) == t.value) != t.negate for t in terms)
