"""A Kubernetes API client over HTTPS, for the stand-in operators and the platform's seed.

Owns `KubeApi`, the Python surface the stand-in controllers are written against (objects by
resource name, `secrets` or `mariadbs.k8s.mariadb.com`; watches with bookmarks; ServiceAccount
tokens), `RemoteCluster`, which serves it over HTTPS to a kube-apiserver as a controller outside
the server does, and `ApiError`, the server's `Status` as an exception.

`RemoteCluster` resolves resource names through the server's discovery documents (cached, re-read
once when a name is unknown, as a CRD installed later needs), authenticates with a bearer token or
a client certificate, verifies the server against the CA it is given, sends its User-Agent, and
never logs a request or response body. `close` ends every open watch, so a controller blocked in
one stops at once.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import math
import ssl
import threading
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import urllib3

Obj = dict[str, Any]


@dataclass
class ApiError(Exception):
    """An error the server answers with a `Status` body."""

    code: int
    reason: str
    message: str
    details: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    list_meta: dict[str, Any] | None = None
    """The Status's own metadata (a 410 for an expired continue token carries one to go on)."""
    text: str | None = None
    """Sent as the whole body in plain text instead of a `Status`, as for a path no API serves."""

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def status(self) -> dict[str, Any]:
        """Return the `Status` object for the response body."""
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": dict(self.list_meta or {}),
            "status": "Failure",
            "message": self.message,
            "code": self.code,
        }
        if self.reason:
            body["reason"] = self.reason
        if self.details is not None:
            body["details"] = self.details
        return body


class KubeApi(Protocol):
    """One cluster's API, by resource name (`secrets`, `mariadbs.k8s.mariadb.com`)."""

    name: str
    watch_window: float
    """Seconds one watch stays open before the caller re-opens it from its last version."""

    def get(self, resource: str, name: str, namespace: str = "") -> Obj:
        """Read one object."""
        ...

    def list(
        self, resource: str, namespace: str | None = None, label_selector: str | None = None
    ) -> builtins.list[Obj]:
        """List objects."""
        ...

    def create(
        self, resource: str, body: Obj, namespace: str = "", manager: str = "devstack"
    ) -> Obj:
        """Create an object."""
        ...

    def apply(
        self,
        resource: str,
        body: Obj,
        namespace: str = "",
        manager: str = "devstack",
        force: bool = True,
    ) -> Obj:
        """Server-side apply an object."""
        ...

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
        """Patch an object."""
        ...

    def delete(self, resource: str, name: str, namespace: str = "") -> Obj:
        """Delete an object."""
        ...

    def watch(
        self,
        resource: str,
        namespace: str | None = None,
        resource_version: str | None = None,
        timeout: float | None = None,
        *,
        bookmarks: bool = False,
    ) -> Iterator[tuple[str, Obj]]:
        """Watch a resource."""
        ...

    def token_request(self, ns: str, name: str, body: Any) -> Obj:
        """The TokenRequest subresource of a ServiceAccount."""
        ...

    def issue_token(
        self, ns: str, name: str, audiences: builtins.list[str] | None = None, seconds: int = 3600
    ) -> str:
        """A ServiceAccount token."""
        ...


APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"
_TIMEOUT = urllib3.Timeout(connect=5.0, read=30.0)
_WATCH_READ_SLACK = 30.0
_THROTTLED_ATTEMPTS = 10


@dataclass(frozen=True)
class Resource:
    """Where one resource is served."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    def path(self, namespace: str = "", name: str = "", subresource: str = "") -> str:
        """The URL path of the collection, or of one object (and one of its subresources)."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        parts = [base]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{urllib.parse.quote(namespace)}")
        parts.append(self.plural)
        if name:
            parts.append(urllib.parse.quote(name))
        if subresource:
            parts.append(subresource)
        return "/".join(parts)

    @property
    def api_version(self) -> str:
        """The apiVersion of its objects."""
        return f"{self.group}/{self.version}" if self.group else self.version


class RemoteCluster:
    """One API server reached over HTTPS."""

    watch_window = 30.0
    """Seconds a controller's watch stays open before it is re-opened from its last version."""

    def __init__(
        self,
        name: str,
        url: str,
        *,
        ca_pem: str | bytes | None,
        token: str | None = None,
        client_cert: tuple[str, str] | None = None,
        user_agent: str = "devstack/0.1",
    ) -> None:
        """Name the cluster (`Key.cluster` and log lines carry it) and say how to reach it."""
        self.name = name
        self.url = url.rstrip("/")
        context = ssl.create_default_context()
        if ca_pem:
            text = ca_pem.decode() if isinstance(ca_pem, bytes) else ca_pem
            context.load_verify_locations(cadata=text)
        if client_cert is not None:
            context.load_cert_chain(*client_cert)
        self._headers = {"User-Agent": user_agent, "Accept": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._http = urllib3.PoolManager(maxsize=64, ssl_context=context, retries=False)
        self._resources: dict[str, Resource] = {}
        self._lock = threading.Lock()
        self._streams: set[urllib3.BaseHTTPResponse] = set()
        self._closed = False

    # ------------------------------------------------------------ transport

    def _request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Any:
        url = self.url + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        headers = dict(self._headers)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        for attempt in range(_THROTTLED_ATTEMPTS):
            answer = self._http.request(method, url, body=data, headers=headers, timeout=_TIMEOUT)
            if answer.status != 429 or attempt == _THROTTLED_ATTEMPTS - 1:
                break
            # As client-go does: a 429 (a CRD's storage starting, priority and fairness) says
            # when to come back.
            time.sleep(min(float(answer.headers.get("Retry-After") or 1), 1.0))
        if answer.status >= 400:
            raise _error(answer.status, answer.data)
        return json.loads(answer.data) if answer.data else {}

    def close(self) -> None:
        """End every open watch and every pooled connection; later watches end at once."""
        with self._lock:
            self._closed = True
            streams = list(self._streams)
        for stream in streams:
            # The stream may end on its own thread at the same moment: its connection is then
            # back in the pool, or its socket gone.
            with contextlib.suppress(OSError, RuntimeError, ValueError):
                stream.shutdown()
        self._http.clear()

    # ------------------------------------------------------------ discovery

    def resource(self, name: str) -> Resource:
        """Resolve `plural` or `plural.group` (a core plural first) through discovery.

        Raises:
            ApiError: 404 when the server serves no such resource.
        """
        with self._lock:
            found = self._resources.get(name)
        if found is not None:
            return found
        plural, _, group = name.partition(".")
        for resource in self._discover(group, bool(group)):
            if resource.plural == plural:
                with self._lock:
                    self._resources[name] = resource
                return resource
        raise ApiError(404, "NotFound", "the server could not find the requested resource")

    def _discover(self, group: str, grouped: bool) -> list[Resource]:
        versions: list[str] = []
        if not grouped:
            versions.append("/api/v1")
        else:
            groups = self._request("GET", "/apis").get("groups") or []
            for entry in groups:
                if entry.get("name") == group:
                    preferred = (entry.get("preferredVersion") or {}).get("groupVersion")
                    versions.append(f"/apis/{preferred}")
        found: list[Resource] = []
        for path in versions:
            listing = self._request("GET", path)
            group_version = str(listing.get("groupVersion") or "v1")
            api_group, _, version = group_version.rpartition("/")
            for entry in listing.get("resources") or []:
                if "/" in str(entry.get("name", "")):
                    continue
                found.append(
                    Resource(
                        api_group,
                        version,
                        str(entry["name"]),
                        str(entry.get("kind", "")),
                        bool(entry.get("namespaced")),
                    )
                )
        return found

    # ------------------------------------------------------------ the Cluster surface

    def get(self, resource: str, name: str, namespace: str = "") -> Obj:
        """Read one object."""
        r = self.resource(resource)
        result: Obj = self._request("GET", r.path(namespace, name))
        return result

    def list(
        self, resource: str, namespace: str | None = None, label_selector: str | None = None
    ) -> builtins.list[Obj]:
        """List objects of a resource (every namespace when `namespace` is None)."""
        r = self.resource(resource)
        query = {"labelSelector": label_selector} if label_selector else None
        listing = self._request("GET", r.path(namespace or ""), query=query)
        items: builtins.list[Obj] = []
        for item in listing.get("items") or []:
            # As kubectl shows them: a list's items carry no kind of their own on the wire.
            items.append({"apiVersion": r.api_version, "kind": r.kind, **item})
        return items

    def create(
        self, resource: str, body: Obj, namespace: str = "", manager: str = "devstack"
    ) -> Obj:
        """Create an object."""
        r = self.resource(resource)
        namespace = namespace or str((body.get("metadata") or {}).get("namespace") or "")
        full = {"apiVersion": r.api_version, "kind": r.kind, **body}
        result: Obj = self._request(
            "POST", r.path(namespace), query={"fieldManager": manager}, body=full
        )
        return result

    def apply(
        self,
        resource: str,
        body: Obj,
        namespace: str = "",
        manager: str = "devstack",
        force: bool = True,
    ) -> Obj:
        """Server-side apply an object as `manager`."""
        r = self.resource(resource)
        name = str((body.get("metadata") or {}).get("name", ""))
        namespace = namespace or str((body.get("metadata") or {}).get("namespace") or "")
        query = {"fieldManager": manager, **({"force": "true"} if force else {})}
        full = {"apiVersion": r.api_version, "kind": r.kind, **body}
        result: Obj = self._request(
            "PATCH", r.path(namespace, name), query=query, body=full, content_type=APPLY
        )
        return result

    def patch(
        self,
        resource: str,
        name: str,
        patch: Any,
        namespace: str = "",
        *,
        subresource: str = "",
        patch_type: str = MERGE,
        manager: str = "devstack",
    ) -> Obj:
        """Patch an object (merge patch unless told otherwise)."""
        r = self.resource(resource)
        if patch_type == APPLY and isinstance(patch, dict):
            patch = {"apiVersion": r.api_version, "kind": r.kind, **patch}
        result: Obj = self._request(
            "PATCH",
            r.path(namespace, name, subresource),
            query={"fieldManager": manager},
            body=patch,
            content_type=patch_type,
        )
        return result

    def delete(self, resource: str, name: str, namespace: str = "") -> Obj:
        """Delete an object (its finalizers may keep it until they are removed)."""
        r = self.resource(resource)
        result: Obj = self._request("DELETE", r.path(namespace, name))
        return result

    def watch(
        self,
        resource: str,
        namespace: str | None = None,
        resource_version: str | None = None,
        timeout: float | None = None,
        *,
        bookmarks: bool = False,
    ) -> Iterator[tuple[str, Obj]]:
        """Watch a resource: yield (type, object) until the server ends the watch at `timeout`,
        or `close` is called. An expired resourceVersion arrives as an ERROR event."""
        r = self.resource(resource)
        query = {"watch": "true"}
        if resource_version:
            query["resourceVersion"] = resource_version
        if timeout is not None:
            query["timeoutSeconds"] = str(max(1, math.ceil(timeout)))
        if bookmarks:
            query["allowWatchBookmarks"] = "true"
        url = f"{self.url}{r.path(namespace or '')}?{urllib.parse.urlencode(query)}"
        read = (timeout or 3600.0) + _WATCH_READ_SLACK
        answer = self._http.request(
            "GET",
            url,
            headers=self._headers,
            preload_content=False,
            timeout=urllib3.Timeout(connect=5.0, read=read),
        )
        try:
            if answer.status >= 400:
                raise _error(answer.status, answer.read())
            with self._lock:
                if self._closed:
                    return
                self._streams.add(answer)
            for line in answer:
                if line.strip():
                    event = json.loads(line)
                    yield str(event["type"]), event["object"]
        except (urllib3.exceptions.ProtocolError, urllib3.exceptions.ReadTimeoutError, OSError):
            if not self._closed:
                raise
        finally:
            with self._lock:
                self._streams.discard(answer)
            with contextlib.suppress(OSError):
                answer.release_conn()

    # ------------------------------------------------------------ tokens

    def token_request(self, ns: str, name: str, body: Any) -> Obj:
        """Ask the TokenRequest API for a ServiceAccount token."""
        r = self.resource("serviceaccounts")
        full = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", **(body or {})}
        result: Obj = self._request("POST", r.path(ns, name, "token"), body=full)
        return result

    def issue_token(
        self, ns: str, name: str, audiences: builtins.list[str] | None = None, seconds: int = 3600
    ) -> str:
        """A ServiceAccount token from the TokenRequest API."""
        spec: Obj = {"expirationSeconds": seconds}
        if audiences:
            spec["audiences"] = audiences
        return str(self.token_request(ns, name, {"spec": spec})["status"]["token"])


def _error(code: int, raw: bytes) -> ApiError:
    """The server's `Status` as an `ApiError` (a body that is no Status keeps its first line)."""
    try:
        status = json.loads(raw)
    except ValueError:
        status = None
    if not isinstance(status, dict) or status.get("kind") != "Status":
        text = raw.decode(errors="replace").strip().splitlines()
        return ApiError(code, "Unknown", text[0] if text else f"HTTP {code}")
    return ApiError(
        code,
        str(status.get("reason") or "Unknown"),
        str(status.get("message") or ""),
        status.get("details"),
    )
