"""One simulated cluster: its API, controllers, tokens, counters and watches, usable from Python.

Owns the `Cluster` object other stand-ins run beside (same process): `get`/`list`/`watch`/
`create`/`apply`/`patch`/`delete` by resource name, watches as the real watch cache serves them
(started before the first event, bookmarks only once the kind has moved past what the watch has
shown), ServiceAccount token issuing and TokenReview, the RBAC authorizer (with the bootstrap
policy every cluster starts with), request counters, the audit log switch, the watch-history window
and killing open watches. The HTTP front end is `devstack.kube.server`. It must never be imported
by production code.
"""

from __future__ import annotations

import builtins
import json
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from devstack.counters import RequestCounters
from devstack.kube import auth, errors, managed_fields, rbac
from devstack.kube.api import (
    APPLY,
    Api,
    Registry,
    WriteOptions,
    now_text,
    parse_resource_version,
)
from devstack.kube.controllers import Controllers
from devstack.kube.kinds import RBAC_GROUP, Kind
from devstack.kube.selectors import (
    fields_match,
    labels_match,
    parse_field_selector,
    parse_label_selector,
)
from devstack.kube.store import Event, Obj, Store
from devstack.realkube import AuditEntry

AUTHENTICATION_GROUP = "authentication.k8s.io"
_AUTHENTICATION_V1 = f"{AUTHENTICATION_GROUP}/v1"
Presenter = Callable[[Obj, Kind, str], Any]
"""How a watch shows a stored object: a copy (`Api.present`) or its JSON (`Api.encoded`)."""


@dataclass(frozen=True)
class WatchRequest:
    """What one watch asks for."""

    kind: Kind
    version: str
    namespace: str | None
    label_selector: str | None = None
    field_selector: str | None = None
    resource_version: str | None = None
    timeout: float | None = None
    bookmarks: bool = False
    send_initial_events: bool = False


@dataclass(frozen=True)
class Denial:
    """A request the authorizer refused, and the User-Agent that sent it."""

    attrs: rbac.Attributes
    user_agent: str


class Cluster:
    """A simulated Kubernetes cluster held in memory."""

    watch_window = 0.5
    """Seconds a stand-in's watch stays open (in process, re-opening one costs nothing)."""

    def __init__(self, name: str, *, history: int = 10_000) -> None:
        self.name = name
        self._denials: builtins.list[Denial] = []
        self._denials_lock = threading.Lock()
        self.store = Store(history)
        self.registry = Registry()
        self.api = Api(self.store, self.registry)
        self.controllers = Controllers(self.api)
        self.tokens = auth.Tokens()
        self.authorizer = rbac.Authorizer(self.store)
        self.bookmark_interval = 60.0
        self.abrupt_kill = False
        self.requests = RequestCounters()
        for body in rbac.bootstrap_policy():
            self.create(f"{body['kind'].lower()}s.{RBAC_GROUP}", body, manager="kube-apiserver")
        self.controllers.start()

    # ------------------------------------------------------------ test and benchmark controls

    @property
    def admin_token(self) -> str:
        """The bearer token the kubeconfig carries."""
        return self.tokens.admin_token

    def set_history(self, events: int) -> None:
        """Keep only the last `events` changes for watches: a watch of a kind whose events after
        its resourceVersion were dropped gets 410."""
        self.store.set_history(events)

    def kill_watches(self, *, abrupt: bool = False) -> None:
        """End every open watch: cleanly (end of stream) or by dropping the connection."""
        self.abrupt_kill = abrupt
        self.store.kill_watches()

    def record_denial(self, attrs: rbac.Attributes, user_agent: str) -> None:
        """Remember a request the authorizer refused (403), for `denials`."""
        with self._denials_lock:
            self._denials.append(Denial(attrs, user_agent))

    def denials(self) -> builtins.list[Denial]:
        """Every request answered 403 by the authorizer so far."""
        with self._denials_lock:
            return list(self._denials)

    def enable_audit(self, enabled: bool = True) -> None:
        """Start or stop recording writes in `audit_log` and reads in `read_log`."""
        self.api.audit_enabled = enabled

    @property
    def audit_log(self) -> list[AuditEntry]:
        """Writes recorded since the audit log was enabled."""
        return list(self.api.audit_log)

    @property
    def read_log(self) -> list[AuditEntry]:
        """Gets and lists recorded since the audit log was enabled, with their status codes."""
        return list(self.api.read_log)

    def count(self, verb: str, resource: str, client: str = "unknown") -> None:
        """Count one request by the client that sent it, its verb and its resource."""
        self.requests.count(client, verb, resource)

    def counters(self) -> dict[tuple[str, str], int]:
        """Requests so far by (verb, resource), e.g. ("get", "secrets"), all clients added up."""
        return self.requests.by_verb_and_resource()

    def reset_counters(self) -> None:
        """Forget the request counts."""
        self.requests.reset()

    def wait_idle(self, timeout: float = 5.0) -> bool:
        """Wait for garbage collection and namespace cleanup to catch up."""
        return self.controllers.wait_idle(timeout)

    def close(self) -> None:
        """Stop background work and end open watches."""
        self.kill_watches()
        self.controllers.stop()

    # ------------------------------------------------------------ Python API

    def kind(self, resource: str) -> Kind:
        """Find a kind by plural, `plural.group`, singular, Kind or short name."""
        return self.registry.find(resource)

    def get(self, resource: str, name: str, namespace: str = "") -> Obj:
        """Read one object."""
        kind = self.kind(resource)
        return self.api.get(kind, kind.storage_version, namespace, name)

    def list(
        self, resource: str, namespace: str | None = None, label_selector: str | None = None
    ) -> builtins.list[Obj]:
        """List objects of a kind."""
        kind = self.kind(resource)
        return list(self.api.list(kind, kind.storage_version, namespace, label_selector)["items"])

    def create(
        self, resource: str, body: Obj, namespace: str = "", manager: str = "devstack"
    ) -> Obj:
        """Create an object."""
        kind = self.kind(resource)
        return self.api.create(
            kind, kind.storage_version, namespace, body, WriteOptions(field_manager=manager)
        )

    def apply(
        self,
        resource: str,
        body: Obj,
        namespace: str = "",
        manager: str = "devstack",
        force: bool = True,
    ) -> Obj:
        """Server-side apply an object as `manager`."""
        kind = self.kind(resource)
        name = str(body.get("metadata", {}).get("name", ""))
        opts = WriteOptions(field_manager=manager, force=force)
        return self.api.patch(kind, kind.storage_version, namespace, name, APPLY, body, opts)[0]

    def patch(
        self,
        resource: str,
        name: str,
        patch: Any,
        namespace: str = "",
        *,
        subresource: str = "",
        patch_type: str = "application/merge-patch+json",
        manager: str = "devstack",
    ) -> Obj:
        """Patch an object (merge patch unless told otherwise)."""
        kind = self.kind(resource)
        opts = WriteOptions(field_manager=manager)
        return self.api.patch(
            kind, kind.storage_version, namespace, name, patch_type, patch, opts, subresource
        )[0]

    def delete(self, resource: str, name: str, namespace: str = "") -> Obj:
        """Delete an object."""
        kind = self.kind(resource)
        return self.api.delete(
            kind, kind.storage_version, namespace, name, WriteOptions(field_manager="devstack")
        )

    def watch(
        self,
        resource: str,
        namespace: str | None = None,
        resource_version: str | None = None,
        timeout: float | None = None,
        *,
        bookmarks: bool = False,
    ) -> Iterator[tuple[str, Obj]]:
        """Watch a kind: yield (type, object) until `timeout` passes or watches are killed.

        With `bookmarks`, BOOKMARK events (only a resourceVersion) come too; an expired
        resourceVersion arrives as an ERROR event carrying the `Status`, as on the wire.
        """
        kind = self.kind(resource)
        request = WatchRequest(
            kind,
            kind.storage_version,
            namespace,
            resource_version=resource_version,
            timeout=timeout,
            bookmarks=bookmarks,
        )
        for event in self.watch_events(request):
            yield str(event["type"]), event["object"]

    # ------------------------------------------------------------ tokens

    def token_request(self, ns: str, name: str, body: Any, manager: str = "") -> Obj:
        """Issue a ServiceAccount token (the TokenRequest subresource); `manager` is the field
        manager the answer's managedFields name (none when empty)."""
        sa = self.api.get(self.kind("serviceaccounts"), "v1", ns, name)
        spec = (body or {}).get("spec") or {}
        seconds = int(spec.get("expirationSeconds") or 3600)
        if seconds < 600:
            raise errors.invalid_object(
                "TokenRequest",
                AUTHENTICATION_GROUP,
                "",
                [
                    errors.invalid(
                        "spec.expirationSeconds",
                        seconds,
                        "may not specify a duration less than 10 minutes",
                    )
                ],
            )
        audiences = list(spec.get("audiences") or [])
        token, expires = self.tokens.issue(ns, name, sa["metadata"]["uid"], audiences, seconds)
        stamp = now_text()
        meta: dict[str, Any] = {
            "name": name,
            "namespace": ns,
            "uid": sa["metadata"]["uid"],
            "creationTimestamp": stamp,
        }
        if manager:
            asked = {**spec, "expirationSeconds": seconds}
            owned = managed_fields.created_entries(
                {"spec": asked}, {"spec": {}}, manager, "token", (_AUTHENTICATION_V1, stamp)
            )
            if owned:
                meta["managedFields"] = owned
        return {
            "kind": "TokenRequest",
            "apiVersion": _AUTHENTICATION_V1,
            "metadata": meta,
            "spec": {
                "audiences": audiences or list(auth.DEFAULT_AUDIENCES),
                "expirationSeconds": seconds,
                "boundObjectRef": spec.get("boundObjectRef"),
            },
            "status": {
                "token": token,
                "expirationTimestamp": datetime.fromtimestamp(expires, UTC).strftime(
                    "%Y-%m-%dT%H:%M:%SZ"
                ),
            },
        }

    def issue_token(
        self, ns: str, name: str, audiences: builtins.list[str] | None = None, seconds: int = 3600
    ) -> str:
        """Issue a ServiceAccount token from Python."""
        body = {"spec": {"audiences": audiences or [], "expirationSeconds": seconds}}
        return str(self.token_request(ns, name, body)["status"]["token"])

    def authenticate(self, token: str) -> auth.User:
        """Resolve a bearer token to a user.

        Raises:
            auth.TokenError: the token does not authenticate.
        """
        if token and token == self.tokens.admin_token:
            return auth.ADMIN
        claims = self.tokens.claims(token)
        if not auth.audience_match(claims, []):
            raise auth.TokenError("invalid bearer token, token audiences don't match")
        return self._service_account_user(claims)

    def authorize(
        self,
        user: auth.User,
        verb: str,
        resource: str,
        namespace: str = "",
        name: str = "",
        subresource: str = "",
    ) -> bool:
        """Tell whether a user may act on a resource (by plural, `plural.group` or short name).

        `auth.service_account_user(ns, name)` is the user a ServiceAccount's tokens carry.
        """
        kind = self.kind(resource)
        attrs = rbac.Attributes(user, verb, namespace, kind.group, kind.plural, subresource, name)
        return self.authorizer.authorize(attrs).allowed

    def _service_account_user(self, claims: dict[str, Any]) -> auth.User:
        user = auth.user_from_claims(claims)
        ns, name = user.name.split(":")[2:4]
        sa = self.store.get("/serviceaccounts", ns, name)
        if sa is None:
            raise auth.TokenError(f'invalid bearer token, serviceaccounts "{name}" not found')
        if sa["metadata"]["uid"] != user.uid:
            raise auth.TokenError(
                f"invalid bearer token, service account UID ({user.uid}) does not match "
                f"claim ({sa['metadata']['uid']})"
            )
        return user

    def token_review(self, body: Any, manager: str = "") -> Obj:
        """Answer a TokenReview; `manager` is the field manager the answer's managedFields name
        (none when empty).

        Raises:
            ApiError: 400 for a review without a token.
        """
        spec = (body or {}).get("spec") or {}
        if not spec.get("token"):
            raise errors.bad_request("token is required for TokenReview in authentication")
        wanted = list(spec.get("audiences") or [])
        status: dict[str, Any]
        try:
            claims = self.tokens.claims(str(spec.get("token", "")))
            matched = auth.audience_match(claims, wanted)
            if not matched:
                raise auth.TokenError(
                    f"{auth.INVALID}, token audiences {_go_strings(claims.get('aud'))} is invalid "
                    f"for the target audiences {_go_strings(wanted or auth.DEFAULT_AUDIENCES)}"
                )
            user = self._service_account_user(claims)
            status = {"authenticated": True, "user": user.to_json(), "audiences": matched}
        except auth.TokenError as exc:
            # One authenticator's refusal comes as a list; no authenticator at all, bare.
            text = str(exc)
            status = {"user": {}, "error": text if text == auth.INVALID else f"[{text}]"}
        meta: dict[str, Any] = {}
        if manager:
            owned = managed_fields.created_entries(
                {"spec": spec}, {"spec": {}}, manager, "", (_AUTHENTICATION_V1, now_text())
            )
            if owned:
                meta["managedFields"] = owned
        return {
            "kind": "TokenReview",
            "apiVersion": _AUTHENTICATION_V1,
            "metadata": meta,
            "spec": {k: v for k, v in spec.items() if k != "token"}
            | {"token": spec.get("token", "")},
            "status": status,
        }

    # ------------------------------------------------------------ watch

    def watch_events(
        self, req: WatchRequest, present: Presenter | None = None
    ) -> Iterator[dict[str, Any]]:
        """Start a watch and return its events (`{"type", "object"}`) as the real server streams
        them.

        The watch starts before this returns (its selectors parsed, its resourceVersion read,
        its place in the history taken), so a request the server refuses raises here, before
        any event, and nothing written after the call is missed. Objects are shown through
        ``present`` (default: `Api.present`, a private copy); the HTTP front end passes
        `Api.encoded` and gets each object's shared JSON instead.

        Bookmarks come as the real watch cache sends them: shortly before the timeout and then
        every `bookmark_interval`, and only when the kind's watch cache has reached a
        resourceVersion beyond what the watch has already been shown.

        Raises:
            ApiError: 400 for a selector the server refuses, 500 for a resourceVersion that is
                not a number.
        """
        show = present or self.api.present
        labels = parse_label_selector(req.label_selector)
        fields = parse_field_selector(req.field_selector, req.kind.field_selectors)
        if req.resource_version and not req.send_initial_events:
            try:
                parse_resource_version(req.resource_version)
            except ValueError as exc:
                raise errors.ApiError(500, "", str(exc)) from None
        timeout = req.timeout if req.timeout is not None else random.uniform(1800, 3600)  # noqa: S311 - spread, not secrecy
        started = time.monotonic()
        with self.store.lock:
            epoch = self.store.kill_epoch
            start = self._watch_start(req)
            seen = self.store.kind_changed(req.kind.key)
        return self._stream(
            req, start, (labels, fields), show, (started, started + timeout, epoch, seen)
        )

    def _stream(
        self,
        req: WatchRequest,
        start: tuple[int, builtins.list[Obj]] | dict[str, Any],
        selectors: tuple[Any, Any],
        show: Presenter,
        clock: tuple[float, float, int, int],
    ) -> Iterator[dict[str, Any]]:
        if isinstance(start, dict):
            yield start
            return
        started, deadline, epoch, seen = clock
        cursor, initial = start
        labels, fields = selectors
        for obj in initial:
            if labels_match(labels, obj) and fields_match(fields, obj):
                yield {"type": "ADDED", "object": show(obj, req.kind, req.version)}
        if req.send_initial_events and req.bookmarks:
            yield self._bookmark(req, cursor, initial_end=True)
        shown = max(cursor, seen)
        yield from self._follow(req, cursor, (started, deadline, epoch, shown), selectors, show)

    def _watch_start(self, req: WatchRequest) -> tuple[int, builtins.list[Obj]] | dict[str, Any]:
        rv = req.resource_version
        key = req.kind.key
        if req.send_initial_events or not rv:
            # A consistent start: the watch cache first catches up with the latest version.
            self.store.catch_up(key)
            return self.store.rv, self.store.items(key, req.namespace)
        if rv == "0":
            return self.store.kind_rv(key) or self.store.rv, self.store.items(key, req.namespace)
        cursor = int(rv)
        if self.store.events_after(cursor, key) is None:
            return _error_event(
                errors.gone(f"too old resource version: {cursor} ({self.store.oldest_rv(key)})")
            )
        return cursor, []

    def _next_bookmark(self, now: float, deadline: float) -> float | None:
        """When the real watch cache next bookmarks a watch: a `bookmark_interval` from now, or
        2 s before its deadline if that is sooner, never in the past."""
        due = min(now + self.bookmark_interval, deadline - 2.0)
        return due if due >= now else None

    def _follow(
        self,
        req: WatchRequest,
        cursor: int,
        clock: tuple[float, float, int, int],
        selectors: tuple[Any, Any],
        show: Presenter,
    ) -> Iterator[dict[str, Any]]:
        started, deadline, epoch, shown = clock
        next_bookmark = self._next_bookmark(started, deadline) if req.bookmarks else None
        while True:
            wake = deadline if next_bookmark is None else min(deadline, next_bookmark)
            news = self._changes(req, cursor, epoch, wake)
            if news is None:
                return
            events, cursor, reached = news
            if events is None:
                yield _error_event(
                    errors.gone(
                        f"too old resource version: {cursor} ({self.store.oldest_rv(req.kind.key)})"
                    )
                )
                return
            for event in events:
                out = self._translate(req, event, selectors, show)
                if out is not None:
                    yield out
            now = time.monotonic()
            if next_bookmark is not None and now >= next_bookmark:
                if reached > shown:
                    yield self._bookmark(req, reached)
                next_bookmark = self._next_bookmark(now, deadline)
            if now >= deadline:
                return

    def _changes(
        self, req: WatchRequest, cursor: int, epoch: int, wake: float
    ) -> tuple[builtins.list[Event] | None, int, int] | None:
        """Wait until something is written after `cursor` or `wake` comes; return the events
        since `cursor` (None when the history lost some), the new cursor and the version the
        kind's watch cache has reached; None once the watches are killed."""
        with self.store.lock:
            while self.store.rv == cursor and self.store.kill_epoch == epoch:
                remaining = wake - time.monotonic()
                if remaining <= 0:
                    break
                self.store.changed.wait(remaining)
            if self.store.kill_epoch != epoch:
                return None
            events = self.store.events_after(cursor, req.kind.key)
            if events is None:
                return None, cursor, 0
            return events, self.store.rv, self.store.kind_rv(req.kind.key)

    def _bookmark(self, req: WatchRequest, rv: int, *, initial_end: bool = False) -> dict[str, Any]:
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return {
            "type": "BOOKMARK",
            "object": {
                "kind": req.kind.kind,
                "apiVersion": req.kind.api_version(req.version),
                "metadata": meta,
            },
        }

    def _translate(
        self, req: WatchRequest, event: Event, selectors: tuple[Any, Any], show: Presenter
    ) -> dict[str, Any] | None:
        if event.key != req.kind.key or (
            req.namespace is not None and event.namespace != req.namespace
        ):
            return None
        labels, fields = selectors

        def matches(obj: Obj | None) -> bool:
            return obj is not None and labels_match(labels, obj) and fields_match(fields, obj)

        now_in, was_in = matches(event.obj), matches(event.old)
        if event.type == "DELETED":
            kind_of = "DELETED" if now_in else None
        elif event.type == "ADDED" or not was_in:
            kind_of = "ADDED" if now_in else None
        else:
            kind_of = "MODIFIED" if now_in else "DELETED"
        if kind_of is None:
            return None
        shown = event.obj
        if kind_of == "DELETED" and event.type != "DELETED" and event.old is not None:
            # An object leaving the selection: as the real watch cache does, the DELETED event
            # carries the object as it was (what the watcher selected), at the change's version.
            # Shown as a fresh copy: a cached encoding is keyed by name and resourceVersion,
            # which this old content shares with the object as it is now.
            version = (event.obj.get("metadata") or {}).get("resourceVersion")
            shown = {**event.old, "metadata": {**event.old["metadata"], "resourceVersion": version}}
            return {"type": kind_of, "object": self.api.present(shown, req.kind, req.version)}
        return {"type": kind_of, "object": show(shown, req.kind, req.version)}


def _go_strings(values: Any) -> str:
    """A list of strings as Go's `%q` prints a []string: `["a" "b"]`."""
    items = [values] if isinstance(values, str) else list(values or [])
    return "[" + " ".join(json.dumps(str(v)) for v in items) + "]"


def _error_event(error: errors.ApiError) -> dict[str, Any]:
    return {"type": "ERROR", "object": error.status()}
