"""The HTTP(S) listener of the OpenBao stand-in and the handle the devstack starts it with.

Owns the listener (plain HTTP, or TLS that can require and verify client certificates), decoding
requests into the core's shape (`/v1/` paths, LIST and `?list=true`, the `X-Vault-Token` header,
JSON bodies), encoding replies and errors in OpenBao's JSON shapes, and the `OpenBaoServer` life
cycle. Must never log a token, a request body or a response body, and must send each response in
one write (separate header and body writes stall ~40 ms per request on loopback: Nagle against
delayed ACK).
"""

from __future__ import annotations

import json
import logging
import socket
import ssl
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from devstack import counters
from devstack.openbao.api import ApiError, Request
from devstack.openbao.clock import ScaledClock
from devstack.openbao.core import OpenBaoCore
from devstack.openbao.database import MariaDBEndpoint
from devstack.openbao.kubeauth import TokenReviewer

log = logging.getLogger(__name__)

_MAX_BODY = 32 * 1024 * 1024
_OPERATIONS = {"GET": "read", "HEAD": "read", "LIST": "list", "POST": "write", "PUT": "write"}


@dataclass(frozen=True)
class TLSConfig:
    """The listener's TLS material.

    Attributes:
        cert_file: PEM server certificate (chain).
        key_file: PEM private key of the server certificate.
        client_ca_file: PEM CA bundle; when set, every client must present a certificate that
            chains to it (`tls_require_and_verify_client_cert`).
    """

    cert_file: str
    key_file: str
    client_ca_file: str | None = None

    def server_context(self) -> ssl.SSLContext:
        """Build the server-side SSL context."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert_file, self.key_file)
        if self.client_ca_file:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(self.client_ca_file)
        return context


class _Listener(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        core: OpenBaoCore,
        tls: ssl.SSLContext | None,
        requests: counters.RequestCounters,
    ) -> None:
        self.core = core
        self.tls = tls
        self.requests = requests
        self.connections: set[socket.socket] = set()
        self.accepted = 0
        self.connections_lock = threading.Lock()
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Refused handshakes (no client certificate) and dropped connections are routine.
        log.debug("connection from %s ended with an error", client_address, exc_info=True)

    def close_connections(self) -> None:
        with self.connections_lock:
            for connection in list(self.connections):
                try:
                    connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    log.debug("connection already closed")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    timeout = 120
    server: _Listener

    def setup(self) -> None:
        if self.server.tls is not None:
            raw: socket.socket = self.request
            raw.settimeout(10)
            # The handshake runs here, on the connection's own thread, so a client that stalls
            # or is refused never holds up the accept loop.
            self.request = self.server.tls.wrap_socket(raw, server_side=True)
        with self.server.connections_lock:
            self.server.connections.add(self.request)
            self.server.accepted += 1
        super().setup()

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            with self.server.connections_lock:
                self.server.connections.discard(self.request)
            if self.server.tls is not None:
                # wrap_socket detached the accepted socket, so the server's own close misses
                # this one.
                self.request.close()

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        self._serve()

    def do_HEAD(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()

    def do_LIST(self) -> None:
        self._serve()

    def _serve(self) -> None:
        path = urlsplit(self.path).path
        if path == counters.PATH:
            self._counters()
            return
        client = counters.client_of(self.headers.get("User-Agent", ""))
        self.server.requests.count(client, self.command, path)
        try:
            reply = self.server.core.handle(self._decode())
            self._send(reply.status, reply.body())
        except ApiError as exc:
            self._send(exc.status, {"errors": exc.errors})
        except Exception:
            log.exception("unexpected error serving %s %s", self.command, urlsplit(self.path).path)
            self._send(500, {"errors": ["internal error"]})

    def _counters(self) -> None:
        # Behind the listener's TLS (and its client-certificate check) like every other path.
        if self.command == "DELETE":
            self.server.requests.reset()
        elif self.command != "GET":
            self._send(405, {"errors": ["unsupported operation"]})
            return
        self._send(200, self.server.requests.snapshot())

    def _decode(self) -> Request:
        url = urlsplit(self.path)
        if not url.path.startswith("/v1/"):
            raise ApiError(404, f'no handler for route "{url.path}"')
        query = dict(parse_qsl(url.query))
        length = int(self.headers.get("Content-Length") or 0)
        if length > _MAX_BODY:
            raise ApiError(413, "request body too large")
        raw = self.rfile.read(length) if length else b""
        body: dict[str, Any] = {}
        if raw.strip():
            try:
                parsed = json.loads(raw)
            except ValueError as exc:
                raise ApiError(400, "failed to parse JSON input") from exc
            if not isinstance(parsed, dict):
                raise ApiError(400, "failed to parse JSON input: not an object")
            body = parsed
        operation = _OPERATIONS.get(self.command, "delete" if self.command == "DELETE" else "")
        if not operation:
            raise ApiError(405, "unsupported operation")
        if operation == "read" and query.get("list", "").lower() in ("true", "1"):
            operation = "list"
        token = self.headers.get("X-Vault-Token") or ""
        authorization = self.headers.get("Authorization") or ""
        if not token and authorization.lower().startswith("bearer "):
            token = authorization[7:].strip()
        return Request(
            operation=operation,
            path=unquote(url.path).removeprefix("/v1/").strip("/"),
            data={**query, **body},
            token=token,
        )

    def _send(self, status: int, body: dict[str, Any] | None) -> None:
        payload = b"" if body is None else json.dumps(body).encode()
        try:
            reason = HTTPStatus(status).phrase
        except ValueError:
            reason = ""
        head = [
            f"HTTP/1.1 {status} {reason}",
            f"Date: {self.date_time_string()}",
            "Cache-Control: no-store",
            f"Content-Length: {len(payload)}",
        ]
        if body is not None:
            head.append("Content-Type: application/json")
        wire = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1")
        if self.command != "HEAD":
            wire += payload
        self.wfile.write(wire)
        self.log_request(status, len(payload))


class OpenBaoServer:
    """An OpenBao API subset on a local port, backed by the real MariaDB for the database engine.

    Use `start()` and `stop()` (or a `with` block). `stop()` revokes every lease it issued, so
    the SQL users it created are dropped.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        tls: TLSConfig | None = None,
        time_scale: float = 1.0,
        token_reviewer: TokenReviewer | None = None,
        mariadb: MariaDBEndpoint | None = None,
        kubernetes_mounts: Iterable[str] = (),
        database_mounts: Iterable[str] = (),
    ) -> None:
        """Configure the server (nothing listens until `start()`).

        Args:
            host: The address to bind.
            port: The port to bind; 0 picks a free one.
            tls: TLS material; None serves plain HTTP.
            time_scale: How many simulated seconds pass per real second (token and lease TTLs).
            token_reviewer: Validates Kubernetes-auth JWTs; None asks the API server each auth
                mount's `config` names.
            mariadb: Where every database connection really dials; None dials each connection's
                `connection_url` address.
            kubernetes_mounts: Kubernetes auth mounts enabled from the start (else enable them
                through `sys/auth/<path>`).
            database_mounts: Database engine mounts enabled from the start (else through
                `sys/mounts/<path>`).
        """
        self._address = (host, port)
        self._tls = tls
        self.core = OpenBaoCore(
            ScaledClock(time_scale),
            token_reviewer,
            mariadb,
            kubernetes_mounts=kubernetes_mounts,
            database_mounts=database_mounts,
        )
        self.requests = counters.RequestCounters(verb="method", resource="path")
        self._listener: _Listener | None = None
        self._port: int | None = None
        self._thread: threading.Thread | None = None

    @property
    def root_token(self) -> str:
        """The root token."""
        return self.core.root_token

    @property
    def port(self) -> int:
        """The bound port (after `start()`)."""
        if self._port is None:
            raise RuntimeError("the server was never started")
        return self._port

    @property
    def url(self) -> str:
        """The base URL clients use, e.g. `https://127.0.0.1:8200`."""
        scheme = "https" if self._tls else "http"
        return f"{scheme}://{self._address[0]}:{self.port}"

    def start(self) -> OpenBaoServer:
        """Bind, serve on a background thread and start the expiry of tokens and leases."""
        self._listen(self._address)
        self.core.start()
        return self

    def _listen(self, address: tuple[str, int]) -> None:
        context = self._tls.server_context() if self._tls else None
        self._listener = _Listener(address, self.core, context, self.requests)
        self._port = int(self._listener.server_address[1])
        self._thread = threading.Thread(
            target=self._listener.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="openbao-listener",
            daemon=True,
        )
        self._thread.start()

    def connections_accepted(self) -> int:
        """How many client connections the listener has taken since it last started listening
        (each one a TLS handshake under TLS)."""
        if self._listener is None:
            return 0
        with self._listener.connections_lock:
            return self._listener.accepted

    def drop_connections(self) -> None:
        """Close every open client connection, as a server's idle timeout or a restart of a
        load balancer in front of it would, and go on listening."""
        if self._listener is not None:
            self._listener.close_connections()

    def suspend(self) -> None:
        """Go unreachable, as an outage would, keeping every token, role and lease."""
        if self._listener is not None:
            self._listener.shutdown()
            self._listener.close_connections()
            self._listener.server_close()
            self._listener = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def resume(self) -> None:
        """Listen again on the same port after `suspend()`."""
        self._listen((self._address[0], self.port))

    def stop(self) -> list[str]:
        """Stop listening, revoke every lease (dropping its SQL user) and end the threads.

        Returns:
            The ids of leases whose users could not be dropped (logged as warnings too).
        """
        self.suspend()
        return self.core.stop()

    def __enter__(self) -> OpenBaoServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
