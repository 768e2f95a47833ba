"""A TCP proxy on loopback that can stop forwarding without closing anything, or cut everything.

It stands between tenantdb's processes and Redis to play a network that goes silent: a node
that died without a RST, a partition, a switch dropping packets; or between the watcher and an
API server, whose connections (the watches among them) it can ``cut``, as a load balancer
restarting or a node going away does. While it is ``silent`` it
accepts connections and reads nothing and sends nothing on any of them, so every request a
client makes waits for an answer that never comes, until the client's own timeouts end it.
When it ``speaks`` again, whatever is still open flows on, bytes delayed and never lost or
reordered, as TCP delivers after a partition heals; connections that clients gave up on close.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import threading
from types import TracebackType
from typing import Self


class SilentProxy:
    """Forwards 127.0.0.1:<port> to ``upstream`` until told to fall silent."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._speaking = threading.Event()
        self._speaking.set()
        self._closed = threading.Event()
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.accepted = 0
        """Connections accepted so far."""

    @property
    def url(self) -> str:
        """The Redis URL that goes through the proxy."""
        return f"redis://127.0.0.1:{self.port}/0"

    def __enter__(self) -> Self:
        self._spawn(self._accept, "proxy accept")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def silence(self) -> None:
        """Stop forwarding in both directions; every connection stays open."""
        self._speaking.clear()

    def speak(self) -> None:
        """Forward again what is still open."""
        self._speaking.set()

    def connections(self) -> int:
        """How many connections are open through the proxy now."""
        with self._lock:
            return len(self._sockets) // 2

    def cut(self, *, abrupt: bool) -> int:
        """Close every open connection at once, in both directions, with a RST when
        ``abrupt`` and an orderly FIN otherwise, silent or not; new connections are served as
        before (held while silent). How many were cut."""
        with self._lock:
            sockets = list(self._sockets)
            self._sockets.clear()
        for sock in sockets:
            with contextlib.suppress(OSError):
                if abrupt:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                else:
                    sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        return len(sockets) // 2

    def close(self) -> None:
        self._closed.set()
        self._speaking.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.close()
        for thread in self._threads:
            thread.join(timeout=5)

    def _spawn(self, target: object, name: str, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)  # type: ignore[arg-type]
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self.accepted += 1
            self._spawn(self._connect, "proxy connection", client)

    def _connect(self, client: socket.socket) -> None:
        # A connection made while silent is held open unanswered, not dialled upstream yet.
        self._speaking.wait()
        if self._closed.is_set():
            client.close()
            return
        try:
            upstream = socket.create_connection(self.upstream, timeout=5)
        except OSError:
            client.close()
            return
        with self._lock:
            self._sockets.update((client, upstream))
        self._pump(client, upstream)

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        peers = {client: upstream, upstream: client}
        with selectors.DefaultSelector() as selector:
            for sock in peers:
                sock.setblocking(True)
                selector.register(sock, selectors.EVENT_READ, data=sock)
            try:
                while not self._closed.is_set():
                    # Silent: read nothing, so nothing is sent on either side.
                    self._speaking.wait()
                    if client.fileno() < 0 or upstream.fileno() < 0:
                        return  # cut
                    for ready, _ in selector.select(timeout=0.2):
                        if not self._speaking.is_set():
                            break
                        source: socket.socket = ready.data
                        data = source.recv(65536)
                        if not data:
                            return
                        peers[source].sendall(data)
            except OSError:
                return
            finally:
                with self._lock:
                    for sock in peers:
                        self._sockets.discard(sock)
                        with contextlib.suppress(OSError):
                            sock.close()
