"""A TCP proxy in front of a MySQL server that cuts a connection at a chosen statement.

The fault it makes is the one a client can never tell apart from a failover: the connection is
gone while a statement was in flight. ``arm(pattern, after=False)`` cuts the next statement
whose text matches before the server sees it (it did not run); ``after=True`` lets the server
run it and cuts the connection before its answer reaches the client (it ran, and the client
cannot know). Either way the client reads a lost connection (2013).

Owns one listening socket on 127.0.0.1 at a free port, and per client connection one upstream
connection and two pump threads. It reads the client's packets to find statements: a command
packet starts with sequence number 0, and COM_QUERY (0x03) carries the statement's text. The
text is matched and never logged or kept (it may carry a password); TLS connections are not
looked into, so it serves plaintext groups only.
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
from dataclasses import dataclass, field

HOST = "127.0.0.1"
COM_QUERY = 0x03


@dataclass
class _Armed:
    pattern: re.Pattern[str]
    after: bool


@dataclass
class _Link:
    client: socket.socket
    server: socket.socket
    swallow: threading.Event = field(default_factory=threading.Event)
    closed: threading.Event = field(default_factory=threading.Event)

    def close(self) -> None:
        self.closed.set()
        for sock in (self.client, self.server):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()


class StatementCutter:
    """Forward connections to ``upstream``; cut one at the statement ``arm`` names."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        """Listen on a free loopback port (see ``address``); ``start`` begins forwarding."""
        self.upstream = upstream
        self._listener = socket.create_server((HOST, 0))
        self._armed: _Armed | None = None
        self._lock = threading.Lock()
        self._links: list[_Link] = []
        self._stop = threading.Event()
        self.fired = threading.Event()
        """Set once an armed cut happened (``arm`` clears it)."""

    @property
    def address(self) -> tuple[str, int]:
        """(host, port) to dial instead of the server."""
        host, port = self._listener.getsockname()[:2]
        return str(host), int(port)

    def start(self) -> StatementCutter:
        """Start accepting; returns itself."""
        threading.Thread(target=self._accept, name="cutter", daemon=True).start()
        return self

    def arm(self, pattern: str, *, after: bool) -> None:
        """Cut the next statement matching ``pattern`` (a regex searched in its text), before
        the server runs it or, with ``after``, once it ran and before its answer is read."""
        with self._lock:
            self._armed = _Armed(re.compile(pattern, re.IGNORECASE | re.DOTALL), after)
            self.fired.clear()

    def disarm(self) -> None:
        """Forget an armed cut that has not happened."""
        with self._lock:
            self._armed = None

    def stop(self) -> None:
        """Close the listener and every connection."""
        self._stop.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        for link in list(self._links):
            link.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=5)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            link = _Link(client, server)
            self._links.append(link)
            threading.Thread(target=self._upward, args=(link,), daemon=True).start()
            threading.Thread(target=self._downward, args=(link,), daemon=True).start()

    def _take(self, text: str) -> _Armed | None:
        with self._lock:
            armed = self._armed
            if armed is None or not armed.pattern.search(text):
                return None
            self._armed = None
            return armed

    def _upward(self, link: _Link) -> None:
        buffer = b""
        try:
            while not link.closed.is_set():
                data = link.client.recv(65536)
                if not data:
                    break
                buffer += data
                while len(buffer) >= 4:
                    size = int.from_bytes(buffer[:3], "little")
                    if len(buffer) < 4 + size:
                        break
                    packet, buffer = buffer[: 4 + size], buffer[4 + size :]
                    armed = self._command(packet)
                    if armed is not None and not armed.after:
                        self.fired.set()
                        return
                    if armed is not None:
                        link.swallow.set()
                    link.server.sendall(packet)
        except OSError:
            pass
        finally:
            if not link.swallow.is_set():
                link.close()

    def _command(self, packet: bytes) -> _Armed | None:
        if packet[3] != 0 or len(packet) < 5 or packet[4] != COM_QUERY:
            return None
        return self._take(packet[5:].decode("utf-8", errors="replace"))

    def _downward(self, link: _Link) -> None:
        try:
            while not link.closed.is_set():
                data = link.server.recv(65536)
                if not data:
                    break
                if link.swallow.is_set():  # the statement ran: its answer never arrives
                    self.fired.set()
                    break
                link.client.sendall(data)
        except OSError:
            pass
        finally:
            link.close()
