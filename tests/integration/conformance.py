"""Sending the same HTTP requests to two Kubernetes API servers and comparing their answers.

Owns `Target` (one API server: its URL, how the admin authenticates, a second connection pool
that presents only a bearer token, and how to make the server forget its write history),
`Answer` (status code, body and warnings of one request), `Watch` (a watch stream read on a
thread of its own until it ends, enough events arrived or it is closed), `Record` (the labelled
steps one case observed on one server), `Normaliser` (placeholders for what legitimately
differs between two servers: resourceVersions, uids, timestamps, tokens, generated names and
continue tokens) and `compare`, which fails with a unified diff of the two normalised records.

Nothing here knows what a case checks: the cases in `test_conformance.py` drive a `Target` and
record what they see, step by step, identically on both servers.
"""

from __future__ import annotations

import base64
import contextlib
import difflib
import json
import queue
import re
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import urllib3

Query = Sequence[tuple[str, str]] | Mapping[str, str] | None

JSON = "application/json"
APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
_REQUEST_TIMEOUT = 30.0


@dataclass(frozen=True)
class Answer:
    """What the server answered one request with."""

    code: int
    body: Any
    warnings: tuple[str, ...] = ()

    def view(self) -> dict[str, Any]:
        """The answer as a record step: code, body, and warnings when there are any."""
        out: dict[str, Any] = {"code": self.code, "body": self.body}
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out

    @property
    def meta(self) -> dict[str, Any]:
        """The body's metadata (empty when there is none)."""
        meta = self.body.get("metadata") if isinstance(self.body, dict) else None
        return meta if isinstance(meta, dict) else {}

    @property
    def rv(self) -> str:
        """The body's metadata.resourceVersion."""
        return str(self.meta.get("resourceVersion") or "")


def _warnings(headers: Any) -> tuple[str, ...]:
    found: list[str] = []
    for value in headers.getlist("Warning") if hasattr(headers, "getlist") else []:
        # `299 - "text"`, several in one header are separated by commas outside quotes.
        found += [json.loads(text) for text in re.findall(r'299 - ("(?:[^"\\]|\\.)*")', value)]
    return tuple(found)


def _decode(data: bytes) -> Any:
    if not data:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return data.decode(errors="replace")


def _is_bookmark(event: Any) -> bool:
    return isinstance(event, dict) and event.get("type") == "BOOKMARK"


class Watch:
    """One watch stream, read on a thread into a list of decoded events."""

    def __init__(self, response: urllib3.BaseHTTPResponse) -> None:
        self.code = response.status
        self.events: list[Any] = []
        self.ended = threading.Event()
        self.broken: str | None = None
        self._response = response
        self._arrived: queue.Queue[None] = queue.Queue()
        if response.status != 200:
            self.events.append({"status": response.status, "body": _decode(response.read())})
            response.release_conn()
            self.ended.set()
            return
        self._thread = threading.Thread(target=self._read, name="conformance-watch", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for line in self._response:
                if line.strip():
                    self.events.append(_decode(line))
                    self._arrived.put(None)
        except Exception as exc:  # a stream cut by close() ends here too
            if not self.ended.is_set():
                self.broken = type(exc).__name__
        finally:
            self.ended.set()
            self._arrived.put(None)

    def wait(self, count: int | None = None, timeout: float = 10.0) -> list[Any]:
        """Wait until `count` events arrived (or, without `count`, until the stream ends), at
        most `timeout` seconds; return the events so far."""
        deadline = time.monotonic() + timeout
        while not self.ended.is_set() and (count is None or len(self.events) < count):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            with contextlib.suppress(queue.Empty):
                self._arrived.get(timeout=remaining)
        return list(self.events)

    def close(self) -> list[Any]:
        """End the stream from this side and return every event read, a bookmark that only
        repeats the one before it left out (how many the real server sends before a timeout
        depends on where its one-second bookmark ticks fall)."""
        if not self.ended.is_set():
            self.ended.set()
            with contextlib.suppress(Exception):
                self._response.shutdown()
            self._thread.join(timeout=5)
        with contextlib.suppress(Exception):
            self._response.release_conn()
        kept: list[Any] = []
        for event in self.events:
            if not (kept and event == kept[-1] and _is_bookmark(event)):
                kept.append(event)
        return kept


@dataclass
class Target:
    """One API server the cases run against."""

    name: str
    url: str
    admin: urllib3.PoolManager
    """Authenticates as a member of `system:masters` (with `admin_headers`)."""
    plain: urllib3.PoolManager
    """Verifies the server and presents no client certificate: for bearer tokens."""
    admin_headers: dict[str, str] = field(default_factory=dict)
    forget: Callable[[], None] = lambda: None
    """Make the server drop its history (watch window, old list snapshots)."""

    def _url(self, path: str, query: Query) -> str:
        pairs = list(query.items()) if isinstance(query, Mapping) else list(query or [])
        return f"{self.url}{path}" + (f"?{urlencode(pairs)}" if pairs else "")

    def _pool_and_headers(
        self, token: str | None, content_type: str | None, extra: Mapping[str, str] | None
    ) -> tuple[urllib3.PoolManager, dict[str, str]]:
        headers = {"Accept": JSON, "User-Agent": "conformance/1.0"}
        if content_type:
            headers["Content-Type"] = content_type
        if token is None:
            pool = self.admin
            headers.update(self.admin_headers)
        else:
            pool = self.plain
            if token:
                headers["Authorization"] = f"Bearer {token}"
        headers.update(extra or {})
        return pool, headers

    def request(
        self,
        method: str,
        path: str,
        query: Query = None,
        body: Any = None,
        *,
        content_type: str | None = None,
        token: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        """Send one request; `token` None means as the admin, "" means anonymous."""
        data: bytes | None = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            content_type = content_type or JSON
        pool, sent = self._pool_and_headers(token, content_type, headers)
        response = pool.request(
            method,
            self._url(path, query),
            body=data,
            headers=sent,
            timeout=urllib3.Timeout(connect=5.0, read=_REQUEST_TIMEOUT),
            retries=False,
        )
        return Answer(response.status, _decode(response.data), _warnings(response.headers))

    def get(self, path: str, query: Query = None, *, token: str | None = None) -> Answer:
        """GET as the admin (or with `token`)."""
        return self.request("GET", path, query, token=token)

    def post(
        self, path: str, body: Any, query: Query = None, *, token: str | None = None
    ) -> Answer:
        """POST a JSON body as the admin (or with `token`)."""
        return self.request("POST", path, query, body, token=token)

    def put(self, path: str, body: Any, query: Query = None) -> Answer:
        """PUT a JSON body as the admin."""
        return self.request("PUT", path, query, body)

    def patch(self, path: str, body: Any, content_type: str, query: Query = None) -> Answer:
        """PATCH as the admin with a patch type of `content_type`."""
        return self.request("PATCH", path, query, body, content_type=content_type)

    def delete(self, path: str, body: Any = None, query: Query = None) -> Answer:
        """DELETE as the admin, with DeleteOptions as the body when given."""
        return self.request("DELETE", path, query, body)

    def watch(
        self, path: str, query: Query = None, *, token: str | None = None, read: float = 30.0
    ) -> Watch:
        """Open a watch (`watch=1` is added) and start reading it."""
        pairs = list(query.items()) if isinstance(query, Mapping) else list(query or [])
        pool, headers = self._pool_and_headers(token, None, None)
        response = pool.request(
            "GET",
            self._url(path, [("watch", "1"), *pairs]),
            headers=headers,
            preload_content=False,
            timeout=urllib3.Timeout(connect=5.0, read=read),
            retries=False,
        )
        return Watch(response)

    def eventually(
        self, attempt: Callable[[], Answer], done: Callable[[Answer], bool], timeout: float = 20.0
    ) -> Answer:
        """Repeat `attempt` until `done` holds for its answer (the real server's caches and
        controllers catch up asynchronously); returns the last answer either way."""
        deadline = time.monotonic() + timeout
        while True:
            answer = attempt()
            if done(answer) or time.monotonic() > deadline:
                return answer
            time.sleep(0.1)


class Record:
    """The steps one case observed on one server, in order."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, Any]] = []

    def __call__(self, label: str, value: Any) -> Any:
        """Record `value` (an `Answer` is recorded as its view) under `label`; returns it."""
        self.steps.append((label, value.view() if isinstance(value, Answer) else value))
        return value


# ------------------------------------------------------------------------------ normalising

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})")
_JWT = re.compile(r"eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")
_DIGITS = re.compile(r"\d+")
_RV_IN_TEXT = (
    re.compile(r"too old resource version: \d+ \(\d+\)"),
    re.compile(r"ResourceVersion in precondition: \d+, ResourceVersion in object meta: \d+"),
    re.compile(r"resource version: \d+"),
    re.compile(r"resourceVersion \d+"),
    re.compile(r"ResourceVersion in the precondition \(\d+\)"),
    re.compile(r"ResourceVersion in record \(\d+\)"),
)
_RV_KEYS = frozenset({"resourceVersion"})
_CONTINUE_KEYS = frozenset({"continue"})


class Normaliser:
    """Replaces what two correct servers may answer differently with placeholders.

    uids become `<uid:N>` numbered by first appearance, so a uid that recurs (an owner
    reference, a precondition, a TokenReview's user) recurs as the same placeholder; every
    resourceVersion becomes `<rv>`; timestamps `<time>`; JWTs `<token>`; continue tokens
    `<continue>`; a name generated from a `generateName` prefix `<prefix><generated>`.
    managedFields entries are put in a fixed order (the real server orders them by operation,
    then by the second they were written, which depends on timing), and so are the causes of a
    422 whose message lists them (see `_sorted_causes`).
    """

    def __init__(self, generate_prefixes: Iterable[str] = ()) -> None:
        self._uids: dict[str, str] = {}
        self._generated = [
            re.compile(rf"^({re.escape(p)})[a-z0-9]{{5}}$") for p in generate_prefixes
        ]

    def _uid(self, match: re.Match[str]) -> str:
        return self._uids.setdefault(match.group(0), f"<uid:{len(self._uids) + 1}>")

    def text(self, value: str) -> str:
        """Normalise one string."""
        value = _UUID.sub(self._uid, value)
        value = _TIME.sub("<time>", value)
        value = _JWT.sub("<token>", value)
        for pattern in _RV_IN_TEXT:
            value = pattern.sub(lambda m: _DIGITS.sub("<rv>", m.group(0)), value)
        for generated in self._generated:
            value = generated.sub(r"\1<generated>", value)
        return value

    def __call__(self, value: Any, key: str = "") -> Any:
        """Normalise a decoded JSON value (the key it sits under picks a rule)."""
        if isinstance(value, dict):
            value = _sorted_causes(value)
            return {k: self(v, k) for k, v in value.items()}
        if isinstance(value, list):
            if key == "managedFields":
                value = sorted(value, key=_managed_order)
            return [self(v) for v in value]
        if isinstance(value, str):
            if key in _RV_KEYS and value.isdigit() and value != "0":
                return "<rv>"
            if key in _CONTINUE_KEYS and value:
                return "<continue>"
            return self.text(value)
        return value


def _sorted_causes(status: dict[str, Any]) -> dict[str, Any]:
    """A 422 `Status` with its causes in a fixed order, when its message lists exactly those
    causes: the real server validates a custom resource's properties in Go map order, so the
    order of several field errors differs from one request to the next. A message that does not
    list its causes is left as it is (a difference there still shows)."""
    details = status.get("details")
    causes = details.get("causes") if isinstance(details, dict) else None
    message = status.get("message")
    if (
        status.get("kind") != "Status"
        or not isinstance(message, str)
        or not isinstance(causes, list)
    ):
        return status
    texts = list(dict.fromkeys(f"{c.get('field')}: {c.get('message')}" for c in causes))
    listed = "[" + ", ".join(texts) + "]"
    if len(texts) < 2 or not message.endswith(listed):
        return status
    ordered = sorted(causes, key=lambda c: json.dumps(c, sort_keys=True))
    again = list(dict.fromkeys(f"{c.get('field')}: {c.get('message')}" for c in ordered))
    head = message[: -len(listed)]
    return {
        **status,
        "message": head + "[" + ", ".join(again) + "]",
        "details": {**dict(details or {}), "causes": ordered},
    }


def _managed_order(entry: Any) -> tuple[str, ...]:
    if not isinstance(entry, dict):
        return ("",)
    return tuple(
        str(entry.get(k, "")) for k in ("manager", "operation", "subresource", "apiVersion")
    )


def continue_rv(token: str) -> str:
    """The resourceVersion a continue token carries (both servers encode it in base64 JSON)."""
    with contextlib.suppress(ValueError, TypeError):
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        return str(data.get("rv", ""))
    return ""


# ------------------------------------------------------------------------------ comparing


def run_case(case: Callable[[Target, Record], None], target: Target) -> Record:
    """Run a case against one server; an exception ends the record as its last step."""
    record = Record()
    try:
        case(target, record)
    except Exception:  # shown in the diff instead of hiding the other server
        record("exception", traceback.format_exc(limit=3).splitlines()[-1])
    return record


def render(record: Record, normalise: Normaliser) -> list[str]:
    """The record as lines of indented JSON, one block per step."""
    lines: list[str] = []
    for label, value in record.steps:
        lines.append(f"## {label}")
        lines += json.dumps(normalise(value), indent=2, sort_keys=True).splitlines()
    return lines


def compare(
    expected: Record,
    actual: Record,
    *,
    oracle: str = "real",
    candidate: str = "devstack",
    generate_prefixes: Iterable[str] = (),
) -> str:
    """An empty string when the two records agree once normalised, else a unified diff."""
    prefixes = list(generate_prefixes)
    want = render(expected, Normaliser(prefixes))
    got = render(actual, Normaliser(prefixes))
    if want == got:
        return ""
    return "\n".join(difflib.unified_diff(want, got, oracle, candidate, lineterm="", n=6))
