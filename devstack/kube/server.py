"""HTTP front end of a simulated cluster: the paths, verbs and media types of the real API.

Owns routing (`/api`, `/apis`, discovery, OpenAPI, health, resource and subresource paths, and the
real server's two kinds of 404: a `Status` under the APIs it implements itself, plain text
elsewhere), bearer-token authentication (a request without credentials is `system:anonymous`, a
token that does not authenticate a 401), impersonation headers, authorizing every request before it
is routed (`devstack.kube.rbac` decides; `/devstack/counters` takes any valid token), query
parameters, content negotiation (JSON, YAML apply bodies, `as=Table` for kubectl), watch streaming
with chunked transfer, request counters, and serving several clusters from one process on free
ports. Every response leaves in one write, so Nagle and delayed ACKs never add 40 ms. It must never
hold the store lock while writing to a socket.
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

from devstack import counters
from devstack.kube import auth, discovery, errors, managed_fields, protobuf, rbac, tls
from devstack.kube.api import APPLY, MERGE, WriteOptions, now_text
from devstack.kube.cluster import Cluster, WatchRequest
from devstack.kube.errors import ApiError
from devstack.kube.kinds import AUTHORIZATION_GROUP, RBAC_GROUP, Kind

_EXTRA_HEADER = "impersonate-extra-"


@dataclass
class Response:
    """A complete response."""

    code: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Route:
    """A resource request after parsing the path."""

    kind: Kind
    version: str
    namespace: str | None
    name: str = ""
    subresource: str = ""


def _flag(query: dict[str, str], name: str) -> bool:
    return query.get(name, "").lower() in ("true", "1")


class Handler(BaseHTTPRequestHandler):
    """One connection; HTTP/1.1 keep-alive."""

    protocol_version = "HTTP/1.1"
    server: ClusterHTTPServer

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: request lines may carry names tests consider private."""

    def do_GET(self) -> None:
        """Serve GET."""
        self._serve("GET")

    def do_POST(self) -> None:
        """Serve POST."""
        self._serve("POST")

    def do_PUT(self) -> None:
        """Serve PUT."""
        self._serve("PUT")

    def do_PATCH(self) -> None:
        """Serve PATCH."""
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        """Serve DELETE."""
        self._serve("DELETE")

    # ------------------------------------------------------------ plumbing

    @property
    def cluster(self) -> Cluster:
        """The cluster this server fronts."""
        return self.server.cluster

    def _serve(self, method: str) -> None:
        parts = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            user = self._impersonate(self._authenticate(parts.path))
            result: Response | Iterator[bytes]
            if parts.path == counters.PATH:
                result = self._counters(method)
            else:
                attrs = rbac.request_attributes(user, method, parts.path, query)
                self._authorize(attrs)
                result = self._dispatch(method, parts.path, query, raw, attrs)
        except ApiError as exc:
            if exc.text is not None:
                plain = {"Content-Type": "text/plain; charset=utf-8", **exc.headers}
                result = Response(exc.code, exc.text.encode(), plain)
            else:
                result = Response(exc.code, exc.status(), exc.headers)
        if isinstance(result, Response):
            self._send(result)
        else:
            self._stream(result)

    def _authenticate(self, path: str) -> auth.User:
        # As the real server: a request without credentials is `system:anonymous` (RBAC then
        # decides, and lets it read /version and the health checks), one with a token that
        # does not authenticate is a 401 whatever it asks for. The counters need a token.
        header = self.headers.get("Authorization", "")
        token = header[7:].strip() if header.lower().startswith("bearer ") else ""
        if not header and path != counters.PATH:
            return auth.User("system:anonymous", "", ("system:unauthenticated",))
        try:
            return self.cluster.authenticate(token)
        except auth.TokenError as exc:
            raise errors.unauthorized() from exc

    def _impersonate(self, user: auth.User) -> auth.User:
        name = self.headers.get("Impersonate-User", "")
        groups = self.headers.get_all("Impersonate-Group") or []
        uid = self.headers.get("Impersonate-Uid", "")
        extra: dict[str, list[str]] = {}
        for key, value in self.headers.items():
            if key.lower().startswith(_EXTRA_HEADER):
                extra.setdefault(unquote(key[len(_EXTRA_HEADER) :].lower()), []).append(value)
        if not name:
            if groups or uid or extra:
                raise errors.internal_error(
                    "requested impersonation of groups, a uid or extras without impersonating a "
                    "user"
                )
            return user
        return self.cluster.authorizer.impersonate(user, name, list(groups), uid, extra)

    def _authorize(self, attrs: rbac.Attributes) -> None:
        decision = self.cluster.authorizer.authorize(attrs)
        if decision.allowed:
            return
        self.cluster.record_denial(attrs, self.headers.get("User-Agent", ""))
        if attrs.resource_request:
            group = f".{attrs.group}" if attrs.group else ""
            sub = f"/{attrs.subresource}" if attrs.subresource else ""
            client = counters.client_of(self.headers.get("User-Agent", ""))
            self.cluster.count(attrs.verb, f"{attrs.resource}{group}{sub}", client)
        raise rbac.forbidden(attrs, decision.reason)

    def _send(self, response: Response) -> None:
        body = (
            response.body
            if isinstance(response.body, bytes)
            else json.dumps(response.body).encode()
        )
        phrase = HTTPStatus(response.code).phrase
        headers = {
            "Content-Type": "application/json",
            **response.headers,
            "Content-Length": str(len(body)),
        }
        head = f"HTTP/1.1 {response.code} {phrase}\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in headers.items()
        )
        self.wfile.write(head.encode("latin-1") + b"\r\n" + body)

    def _stream(self, events: Iterator[bytes]) -> None:
        head = (
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
            "Cache-Control: no-cache, private\r\n\r\n"
        )
        self.wfile.write(head.encode())
        try:
            for chunk in events:
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            if self.cluster.abrupt_kill:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True

    def _counters(self, method: str) -> Response:
        if method == "DELETE":
            self.cluster.reset_counters()
        elif method != "GET":
            raise errors.method_not_allowed()
        return Response(200, {"cluster": self.cluster.name, **self.cluster.requests.snapshot()})

    # ------------------------------------------------------------ routing

    def _dispatch(
        self, method: str, path: str, query: dict[str, str], raw: bytes, attrs: rbac.Attributes
    ) -> Response | Iterator[bytes]:
        static = self._static(path)
        if static is not None:
            if method != "GET":
                raise errors.method_not_allowed()
            return Response(200, static)
        route = self._route(path)
        return self._resource(method, route, query, raw, attrs)

    def _static(self, path: str) -> Any:
        path = path.rstrip("/") or "/"
        kinds = self.cluster.registry.kinds()
        if path == "/version":
            return discovery.KUBE_VERSION
        if path in ("/healthz", "/livez", "/readyz"):
            return b"ok"
        if path == "/api":
            host = self.server.server_address[0]
            text = host.decode() if isinstance(host, bytes) else host
            return discovery.api_versions(f"{text}:{self.server.server_address[1]}")
        if path == "/apis":
            return discovery.api_group_list(kinds)
        if path == "/openapi/v2":
            return discovery.openapi_v2(kinds)
        if path == "/openapi/v3":
            return discovery.openapi_v3_index(kinds)
        if path.startswith("/openapi/v3/"):
            return self._openapi_v3(path[len("/openapi/v3/") :])
        return self._discovery(path.strip("/").split("/"))

    def _openapi_v3(self, key: str) -> Any:
        parts = key.split("/")
        group, version = (
            ("", parts[1]) if parts[0] == "api" else (parts[1], parts[2] if len(parts) > 2 else "")
        )
        doc = discovery.openapi_v3(self.cluster.registry.kinds(), group, version)
        if doc is None:
            raise errors.page_not_found()
        return doc

    def _discovery(self, seg: list[str]) -> Any:
        kinds = self.cluster.registry.kinds()
        if seg[0] == "api" and len(seg) == 2:
            return discovery.resource_list(kinds, "", seg[1]) or _raise(errors.page_not_found())
        if seg[0] == "apis" and len(seg) == 2:
            return discovery.api_group(kinds, seg[1]) or _raise(errors.no_handler())
        if seg[0] == "apis" and len(seg) == 3:
            return discovery.resource_list(kinds, seg[1], seg[2]) or _raise(_not_served(seg[1]))
        return None

    def _route(self, path: str) -> Route:
        seg = [s for s in path.split("/") if s]
        if len(seg) >= 3 and seg[0] == "api":
            group, version, rest = "", seg[1], seg[2:]
        elif len(seg) >= 4 and seg[0] == "apis":
            group, version, rest = seg[1], seg[2], seg[3:]
        elif seg and seg[0] == "api":
            raise errors.page_not_found()
        else:
            raise errors.no_handler()
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        kind = self.cluster.registry.lookup(group, version, rest[0])
        if kind is None or len(rest) > 3 or (namespace is not None and not kind.namespaced):
            raise _not_served(group)
        route = Route(
            kind,
            version,
            namespace,
            rest[1] if len(rest) > 1 else "",
            rest[2] if len(rest) > 2 else "",
        )
        if route.subresource and route.subresource not in kind.subresources:
            raise errors.page_not_found()
        return route

    # ------------------------------------------------------------ resources

    def _options(self, query: dict[str, str], route: Route, user: auth.User) -> WriteOptions:
        authorizer = self.cluster.authorizer

        def grants(kind: Kind, new: dict[str, Any], old: dict[str, Any] | None) -> None:
            authorizer.confirm_grant(user, kind.plural, new, old)

        return WriteOptions(
            user=user.name,
            field_manager=query.get("fieldManager", ""),
            user_agent=self.headers.get("User-Agent", ""),
            dry_run=bool(query.get("dryRun")),
            force=_flag(query, "force"),
            field_validation=query.get("fieldValidation") or "Warn",
            grants=grants if route.kind.group == RBAC_GROUP else None,
        )

    def _resource(
        self, method: str, route: Route, query: dict[str, str], raw: bytes, attrs: rbac.Attributes
    ) -> Response | Iterator[bytes]:
        kind = route.kind
        verb = _verb(method, route, query)
        resource = kind.resource + (f"/{route.subresource}" if route.subresource else "")
        self.cluster.count(verb, resource, counters.client_of(self.headers.get("User-Agent", "")))
        if verb not in kind.verbs and not route.subresource:
            raise errors.method_not_allowed()
        if verb == "watch":
            return self._watch(route, query)
        if verb in ("get", "list"):
            return self._audited_read(verb, route, query, attrs)
        if kind.kind == "SelfSubjectReview":
            return Response(201, _self_subject_review(attrs.user))
        if kind.group == AUTHORIZATION_GROUP:
            body = self._body(raw)
            review = self.cluster.authorizer.review(
                kind.kind, route.namespace or "", body, attrs.user
            )
            meta = {k: v for k, v in review["metadata"].items() if k != "creationTimestamp"}
            asked = {"spec": (body or {}).get("spec") or {}} if isinstance(body, dict) else {}
            owned = managed_fields.created_entries(
                asked,
                {"spec": {}},
                self._options(query, route, attrs.user).manager(),
                "",
                (f"{AUTHORIZATION_GROUP}/v1", now_text()),
            )
            if owned:
                meta["managedFields"] = owned
            return Response(201, {**review, "metadata": meta})
        if verb == "patch" and self._content_type() == APPLY and not route.subresource:
            self._authorize_apply_create(route, attrs)
        opts = self._options(query, route, attrs.user)
        response = self._write(verb, route, query, raw, opts)
        if opts.warnings:
            response.headers["Warning"] = ", ".join(f"299 - {json.dumps(w)}" for w in opts.warnings)
        return response

    def _content_type(self) -> str:
        return self.headers.get("Content-Type", "").split(";")[0].strip()

    def _authorize_apply_create(self, route: Route, attrs: rbac.Attributes) -> None:
        # An apply that creates the object is also a create, and is refused as the real server
        # refuses it: the Status carries the authorizer's reason, which may be empty.
        with self.cluster.store.lock:
            exists = self.cluster.store.get(route.kind.key, route.namespace or "", route.name)
        if exists is not None:
            return
        decision = self.cluster.authorizer.authorize(replace(attrs, verb="create"))
        if not decision.allowed:
            raise errors.access_denied(attrs.resource, attrs.group, attrs.name, decision.reason)

    def _audited_read(
        self, verb: str, route: Route, query: dict[str, str], attrs: rbac.Attributes
    ) -> Response:
        code = 200
        try:
            return self._read(verb, route, query)
        except ApiError as exc:
            code = exc.code
            raise
        finally:
            self.cluster.api.audit_read(
                verb,
                route.kind,
                route.namespace or "",
                route.name,
                attrs.user.name,
                self.headers.get("User-Agent", ""),
                code,
            )

    def _read(self, verb: str, route: Route, query: dict[str, str]) -> Response:
        # Plain reads are served from each object's cached JSON, never from a copy of the store;
        # only kubectl's Table view needs the objects themselves.
        api, kind, version = self.cluster.api, route.kind, route.version
        table = self._table_mode()
        if verb == "get":
            if not table:
                return Response(
                    200, api.get_encoded(kind, version, route.namespace or "", route.name)[0]
                )
            obj = api.get(kind, version, route.namespace or "", route.name)
            return self._table(
                route, [obj], {"resourceVersion": obj["metadata"]["resourceVersion"]}
            )
        selection = (
            route.namespace,
            query.get("labelSelector"),
            query.get("fieldSelector"),
            int(query.get("limit") or 0),
            query.get("continue"),
        )
        at, match = query.get("resourceVersion", ""), query.get("resourceVersionMatch", "")
        if not table:
            return Response(
                200,
                api.list_encoded(
                    kind, version, *selection, resource_version=at, resource_version_match=match
                ),
            )
        listed = api.list(
            kind, version, *selection, resource_version=at, resource_version_match=match
        )
        return self._table(route, listed["items"], listed["metadata"])

    def _table_mode(self) -> bool:
        return "as=Table" in self.headers.get("Accept", "")

    def _table(self, route: Route, objects: list[Any], meta: dict[str, Any]) -> Response:
        return Response(200, discovery.table(route.kind, route.version, objects, meta, "Metadata"))

    def _body(self, raw: bytes) -> Any:
        if not raw:
            return None
        if "protobuf" in self.headers.get("Content-Type", ""):
            try:
                return protobuf.decode(raw)
            except protobuf.ProtobufError as exc:
                accepted = ["application/json", "application/yaml"]
                raise errors.unsupported_media_type("", accepted) from exc
        try:
            return json.loads(raw)
        except ValueError:
            if self._content_type() == MERGE:
                raise errors.bad_request("invalid JSON patch") from None
        try:
            return yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise errors.bad_request(f"error decoding request body: {exc}") from exc

    def _write(
        self, verb: str, route: Route, query: dict[str, str], raw: bytes, opts: WriteOptions
    ) -> Response:
        body = self._body(raw)
        kind, version, ns = route.kind, route.version, route.namespace or ""
        api = self.cluster.api
        if route.subresource == "token":
            return Response(201, self.cluster.token_request(ns, route.name, body, opts.manager()))
        if kind.kind == "TokenReview":
            return Response(201, self.cluster.token_review(body, opts.manager()))
        if verb == "create":
            return Response(201, api.create(kind, version, ns, body, opts))
        if verb == "update":
            return Response(
                200, api.update(kind, version, ns, route.name, body, opts, route.subresource)
            )
        if verb == "patch":
            content_type = self._content_type()
            obj, created = api.patch(
                kind, version, ns, route.name, content_type, body, opts, route.subresource
            )
            return Response(201 if created else 200, obj)
        options = body if isinstance(body, dict) else {}
        if query.get("propagationPolicy"):
            options["propagationPolicy"] = query["propagationPolicy"]
        if verb == "delete":
            return Response(200, api.delete(kind, version, ns, route.name, opts, options))
        return Response(
            200,
            api.delete_collection(
                kind,
                version,
                route.namespace,
                query.get("labelSelector"),
                query.get("fieldSelector"),
                opts,
                options,
            ),
        )

    def _watch(self, route: Route, query: dict[str, str]) -> Iterator[bytes]:
        name_selector = f"metadata.name={route.name}" if route.name else None
        field_selector = (
            ",".join(s for s in (query.get("fieldSelector"), name_selector) if s) or None
        )
        timeout = query.get("timeoutSeconds")
        request = WatchRequest(
            route.kind,
            route.version,
            route.namespace,
            query.get("labelSelector"),
            field_selector,
            query.get("resourceVersion"),
            float(timeout) if timeout else None,
            _flag(query, "allowWatchBookmarks"),
            _flag(query, "sendInitialEvents"),
        )
        table = self._table_mode()
        events = self.cluster.watch_events(request, None if table else self.cluster.api.encoded)
        return self._encode_events(route, events, table)

    def _encode_events(
        self, route: Route, events: Iterator[dict[str, Any]], table: bool
    ) -> Iterator[bytes]:
        first = True
        for event in events:
            if table and event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                obj = event["object"]
                event = {
                    "type": event["type"],
                    "object": discovery.table(
                        route.kind,
                        route.version,
                        [obj],
                        {"resourceVersion": obj["metadata"]["resourceVersion"]},
                        "Metadata",
                        columns=first,
                    ),
                }
                first = False
            obj = event["object"]
            if isinstance(obj, bytes):
                yield b'{"type": "' + event["type"].encode() + b'", "object": ' + obj + b"}\n"
            else:
                yield json.dumps(event).encode() + b"\n"


def _self_subject_review(user: auth.User) -> dict[str, Any]:
    return {
        "kind": "SelfSubjectReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"creationTimestamp": now_text()},
        "status": {"userInfo": user.to_json()},
    }


def _raise(error: ApiError) -> Any:
    raise error


def _not_served(group: str) -> ApiError:
    """The 404 of a resource path nothing serves: a `Status` from the API of a group the server
    itself implements (core, `*.k8s.io` and the other dotless groups), plain text from anywhere
    else (custom resource groups, unknown groups)."""
    if not group or "." not in group or group.endswith(".k8s.io"):
        return errors.page_not_found()
    return errors.no_handler()


def _verb(method: str, route: Route, query: dict[str, str]) -> str:
    if method == "GET":
        if _flag(query, "watch"):
            return "watch"
        return "get" if route.name else "list"
    if method == "POST":
        return "create"
    if method == "PUT":
        return "update"
    if method == "PATCH":
        return "patch"
    return "delete" if route.name else "deletecollection"


class ClusterHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server bound to one cluster."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(
        self, address: tuple[str, int], cluster: Cluster, context: ssl.SSLContext | None
    ) -> None:
        self.cluster = cluster
        self.context = context
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        super().__init__(address, Handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        """Accept a connection; with TLS the handshake happens on the handler thread."""
        sock, address = super().get_request()
        if self.context is not None:
            sock = self.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        with self._open_lock:
            self._open.add(sock)
        return sock, address

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Say nothing of a client that dropped its connection (a real API server logs nothing
        for it either); print anything else as the standard server does."""
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        """Forget a finished connection."""
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def drop_connections(self) -> None:
        """Cut every open connection, as a dying API server does to its keep-alive clients."""
        with self._open_lock:
            open_now, self._open = self._open, set()
        for sock in open_now:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


class ClusterServer:
    """A running simulated cluster: a `Cluster` served over HTTP on 127.0.0.1."""

    def __init__(
        self, name: str, host: str = "127.0.0.1", port: int = 0, *, tls_enabled: bool = True
    ) -> None:
        self.cluster = Cluster(name)
        self.tls = tls.material() if tls_enabled else None
        context = self.tls.server_context() if self.tls else None
        self._http = ClusterHTTPServer((host, port), self.cluster, context)
        self._thread = threading.Thread(
            target=self._http.serve_forever, args=(0.05,), name=f"devstack-kube-{name}", daemon=True
        )

    @property
    def name(self) -> str:
        """The cluster's name (`management`, `edge-1`, …)."""
        return self.cluster.name

    @property
    def url(self) -> str:
        """Base URL of the API server."""
        host, port = self._http.server_address[:2]
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{host!s}:{port}"

    @property
    def ca_pem(self) -> bytes | None:
        """The CA certificate clients verify the server with (None without TLS)."""
        return self.tls.ca_pem if self.tls else None

    @property
    def token(self) -> str:
        """The admin bearer token."""
        return self.cluster.admin_token

    def start(self) -> ClusterServer:
        """Start serving in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and end open watches."""
        self.cluster.close()
        self._http.shutdown()
        self._http.server_close()
        self._http.drop_connections()


def _cluster_entry(server: ClusterServer) -> dict[str, str]:
    entry = {"server": server.url}
    if server.tls is not None:
        entry["certificate-authority-data"] = server.tls.ca_data
    return entry


def start_clusters(names: list[str], host: str = "127.0.0.1") -> dict[str, ClusterServer]:
    """Start one server per cluster name on free ports."""
    return {name: ClusterServer(name, host).start() for name in names}


def kubeconfig(servers: dict[str, ClusterServer], current: str | None = None) -> dict[str, Any]:
    """A kubeconfig with one context per cluster, named like the cluster, using bearer tokens."""
    names = list(servers)
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [{"name": n, "cluster": _cluster_entry(servers[n])} for n in names],
        "users": [{"name": f"{n}-admin", "user": {"token": servers[n].token}} for n in names],
        "contexts": [
            {"name": n, "context": {"cluster": n, "user": f"{n}-admin", "namespace": "default"}}
            for n in names
        ],
        "current-context": current or (names[0] if names else ""),
    }
