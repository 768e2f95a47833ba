"""A MySQL site that is there and never answers: it accepts TCP and says nothing.

This is what a hung server, a half-dead load balancer or a partitioned site looks like to a
client: the connect works at once, and then the server's greeting never comes, so the client
waits out its own timeout. A stopped server (the other dead-site case) refuses the connect
instead, which costs nothing; the two are different faults and both are tested.

Owns one listening socket on 127.0.0.1 at a free port and the connections it accepted, held
open (their bytes read and dropped) until ``stop``. It never writes a byte and never touches
anything but its own sockets.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading

HOST = "127.0.0.1"


class Blackhole:
    """A listener that accepts connections and never answers them."""

    def __init__(self) -> None:
        """Listen on a free loopback port (see ``address``); ``start`` begins accepting."""
        self._listener = socket.create_server((HOST, 0))
        self._listener.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="blackhole", daemon=True)
        self.accepted = 0
        """How many connections came in (for tests and the bench)."""

    @property
    def address(self) -> tuple[str, int]:
        """(host, port) to dial."""
        host, port = self._listener.getsockname()[:2]
        return str(host), int(port)

    def start(self) -> Blackhole:
        """Start accepting; returns itself."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Close the listener and every connection it holds."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        for key in list(self._selector.get_map().values()):
            with contextlib.suppress(OSError):
                key.fileobj.close()  # type: ignore[union-attr]
        self._selector.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            for key, _ in self._selector.select(timeout=0.2):
                sock: socket.socket = key.fileobj  # type: ignore[assignment]
                if sock is self._listener:
                    self._accept()
                else:
                    self._drain(sock)

    def _accept(self) -> None:
        with contextlib.suppress(BlockingIOError):
            conn, _ = self._listener.accept()
            conn.setblocking(False)
            self._selector.register(conn, selectors.EVENT_READ)
            self.accepted += 1

    def _drain(self, sock: socket.socket) -> None:
        try:
            data = sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # the client gave up: let the connection go
            self._selector.unregister(sock)
            sock.close()
