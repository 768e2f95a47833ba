"""Real MariaDB server processes for the devstack's MySQL failover group.

Owns starting and stopping `mariadbd` processes (the machine's own binaries, MariaDB 10.11): each
site gets a data directory of its own (a copy of one initialised template, made once per process
with `mariadb-install-db` and cached), a free TCP port on 127.0.0.1 picked at its first start and
kept across restarts, a Unix socket, a server-id, a binary log with GTIDs (`log_slave_updates`,
row format) and a relay log. Servers run with `--no-defaults`, so no option file of the machine
leaks in, and with `--user=root` when the process is root, as mariadbd demands. A site whose spec
names TLS files (see `tls`) also runs with `--ssl-cert`, `--ssl-key` and `--ssl-ca`: it then
offers TLS to every client, and still accepts plaintext ones.

Stopping sends SIGTERM (mariadbd then shuts down cleanly), waits, and kills after a timeout. No
process may be left behind: every running server has a `weakref.finalize` that stops it when its
object is collected or the interpreter exits (finalizers run at exit like atexit hooks), and
servers are spawned from one long-lived daemon thread through `setpriv --pdeathsig TERM`, so
that even a killed devstack (SIGKILL runs no Python) takes its servers with it.

It must never touch the machine's own MariaDB (127.0.0.1:3306 is never chosen, and no option
file or socket of it is read) and never write outside the directories it is given or the
temporary template. Deliberately left out: requiring TLS, client certificates, other storage
engines' tuning, and durability
(`innodb_flush_log_at_trx_commit=2`, `sync_binlog=0`: the data is throwaway).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import queue
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devstack.mysql_group.tls import TLSFiles

MARIADBD = Path("/usr/sbin/mariadbd")
INSTALL_DB = Path("/usr/bin/mariadb-install-db")
SETPRIV = Path("/usr/bin/setpriv")
HOST = "127.0.0.1"
RESERVED_PORTS = frozenset({3306})
START_TIMEOUT = 30.0
STOP_TIMEOUT = 30.0
_REDO_LOG = "8M"
_SOCKET_LIMIT = 100
_TEMPLATE_LOCK = threading.Lock()
_template: Path | None = None


class ServerError(RuntimeError):
    """A MariaDB server could not be initialised, started or stopped."""


def binaries_present() -> bool:
    """Whether this machine has the MariaDB server binaries the group needs."""
    return all(os.access(path, os.X_OK) for path in (MARIADBD, INSTALL_DB))


def _user_args() -> list[str]:
    return ["--user=root"] if os.geteuid() == 0 else []


def _remove_template(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def template_datadir() -> Path:
    """The initialised data directory every site is copied from (made once per process).

    Raises:
        ServerError: mariadb-install-db failed.
    """
    global _template
    with _TEMPLATE_LOCK:
        if _template is not None and (_template / "mysql").is_dir():
            return _template
        if not binaries_present():
            raise ServerError(f"the MariaDB server binaries ({MARIADBD}, {INSTALL_DB}) are missing")
        parent = Path(tempfile.mkdtemp(prefix="devstack-mariadb-template-"))
        atexit.register(_remove_template, parent)
        datadir = parent / "data"
        scratch = parent / "tmp"
        scratch.mkdir()
        command = [
            str(INSTALL_DB),
            "--no-defaults",
            f"--datadir={datadir}",
            *_user_args(),
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            "--skip-name-resolve",
            f"--innodb-log-file-size={_REDO_LOG}",
        ]
        # A server starting removes every `#sql*` file in its tmpdir, which defaults to /tmp:
        # another server's temporary tables there would vanish under it. Each has its own.
        done = subprocess.run(  # noqa: S603 - fixed binary, arguments built here
            command,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={**os.environ, "TMPDIR": str(scratch)},
        )
        if done.returncode != 0:
            tail = "\n".join((done.stderr or done.stdout).splitlines()[-5:])
            raise ServerError(f"mariadb-install-db failed ({done.returncode}): {tail}")
        _template = datadir
        return datadir


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on now (never 3306)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((HOST, 0))
            port = int(probe.getsockname()[1])
        if port not in RESERVED_PORTS:
            return port


def _greets(port: int) -> bool:
    """Whether a MySQL server answers on the port (its handshake, or an error packet)."""
    try:
        with socket.create_connection((HOST, port), timeout=1.0) as conn:
            header = conn.recv(5)
    except OSError:
        return False
    return len(header) == 5 and header[4] in (10, 0xFF)


# ------------------------------------------------------------ spawning


class _Launcher:
    """One daemon thread that forks every server, so that their parent-death signal fires only
    when the process ends (the kernel sends it when the forking thread exits)."""

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[Callable[[], Any], queue.Queue[Any]]] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def run(self, job: Callable[[], Any]) -> Any:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._loop, name="devstack-mariadb-launcher", daemon=True
                )
                self._thread.start()
        answer: queue.Queue[Any] = queue.Queue(maxsize=1)
        self._jobs.put((job, answer))
        result = answer.get()
        if isinstance(result, BaseException):
            raise result
        return result

    def _loop(self) -> None:
        while True:
            job, answer = self._jobs.get()
            try:
                answer.put(job())
            except Exception as exc:  # handed to the caller, which raises it
                answer.put(exc)


_LAUNCHER = _Launcher()


def _spawn(command: Sequence[str], log: Path) -> subprocess.Popen[bytes]:
    argv = list(command)
    if os.access(SETPRIV, os.X_OK):
        argv = [str(SETPRIV), "--pdeathsig", "TERM", "--", *argv]

    def start() -> subprocess.Popen[bytes]:
        with open(log, "ab") as sink:
            return subprocess.Popen(  # noqa: S603 - fixed binaries, arguments built here
                argv,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=sink,
                start_new_session=True,
            )

    proc: subprocess.Popen[bytes] = _LAUNCHER.run(start)
    return proc


def _terminate(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM, wait, then SIGKILL: what `stop` and the finalizers do."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait(timeout=10)


# ------------------------------------------------------------ one server


@dataclass(frozen=True)
class ServerSpec:
    """Where one site's server lives: its name, data directory, server-id, socket and, when it
    serves TLS, its certificate files."""

    name: str
    datadir: Path
    server_id: int
    socket: Path
    tls: TLSFiles | None = None
    options: tuple[str, ...] = ()
    """More mariadbd options (``--lower-case-table-names=1``), after the ones every site has."""


class MariaDBServer:
    """One real mariadbd: started from a copy of the template, restartable with its data."""

    def __init__(self, spec: ServerSpec) -> None:
        """Bind to a site's directories; nothing runs until `start`."""
        self.spec = spec
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self._lock = threading.RLock()

    @classmethod
    def create(
        cls,
        name: str,
        directory: Path,
        server_id: int,
        tls: TLSFiles | None = None,
        options: tuple[str, ...] = (),
    ) -> MariaDBServer:
        """Prepare a site under `directory/name` from the template (copied once); with `tls`,
        the server serves that certificate; `options` are more mariadbd options."""
        datadir = directory / name / "data"
        if not (datadir / "mysql").is_dir():
            datadir.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(template_datadir(), datadir, symlinks=True)
        sock = directory / name / "mysqld.sock"
        if len(str(sock)) > _SOCKET_LIMIT:
            short = Path(tempfile.mkdtemp(prefix="devstack-mdb-"))
            atexit.register(_remove_template, short)
            sock = short / f"{name}.sock"
        return cls(ServerSpec(name, datadir, server_id, sock, tls, options))

    @property
    def name(self) -> str:
        """The site this server serves."""
        return self.spec.name

    @property
    def address(self) -> tuple[str, int]:
        """(host, port) of the TCP listener (port 0 before the first start)."""
        return HOST, self.port

    @property
    def running(self) -> bool:
        """Whether the process is alive."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        """The process id while running."""
        return self._proc.pid if self.running and self._proc is not None else None

    @property
    def error_log(self) -> Path:
        """mariadbd's error log (start-up and shutdown notes, never a password)."""
        return self.spec.datadir.parent / "error.log"

    def _command(self, read_only: bool, general_log: bool) -> list[str]:
        d = self.spec.datadir
        # Its own tmpdir: a server starting removes every `#sql*` file in its tmpdir, so one
        # in /tmp would remove the temporary tables of every other server using /tmp.
        scratch = d.parent / "tmp"
        scratch.mkdir(exist_ok=True)
        return [
            str(MARIADBD),
            "--no-defaults",
            *_user_args(),
            f"--datadir={d}",
            f"--tmpdir={scratch}",
            f"--port={self.port}",
            f"--bind-address={HOST}",
            f"--socket={self.spec.socket}",
            f"--pid-file={d.parent / 'mysqld.pid'}",
            f"--log-error={self.error_log}",
            f"--server-id={self.spec.server_id}",
            f"--log-bin={d / 'binlog'}",
            "--log-slave-updates",
            "--binlog-format=ROW",
            f"--relay-log={d / 'relay'}",
            f"--report-host={HOST}",
            f"--report-port={self.port}",
            "--slave-net-timeout=10",
            "--skip-name-resolve",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_unicode_ci",
            f"--innodb-log-file-size={_REDO_LOG}",
            "--innodb-buffer-pool-size=32M",
            "--innodb-flush-log-at-trx-commit=2",
            "--sync-binlog=0",
            "--max-connections=200",
            f"--read-only={'ON' if read_only else 'OFF'}",
            *(["--general-log=ON", "--log-output=TABLE"] if general_log else []),
            *self._tls_args(),
            *self.spec.options,
        ]

    def _tls_args(self) -> list[str]:
        files = self.spec.tls
        if files is None:
            return []
        return [f"--ssl-cert={files.cert}", f"--ssl-key={files.key}", f"--ssl-ca={files.ca}"]

    def start(
        self, *, read_only: bool = False, general_log: bool = False, timeout: float = START_TIMEOUT
    ) -> None:
        """Start the server (a no-op while it runs) and wait until it accepts connections.

        A replica starts with `read_only` on, so that nothing writes to it before it is fenced.
        `general_log` records every statement it receives in `mysql.general_log` from its first
        connection on (a `SET GLOBAL` after the start would miss what comes before it).

        Raises:
            ServerError: It exited or did not answer within `timeout` seconds.
        """
        with self._lock:
            if self.running:
                return
            first = self.port == 0
            for _attempt in range(3 if first else 1):
                if first:
                    self.port = free_port()
                try:
                    self._start_once(read_only, general_log, timeout)
                    return
                except ServerError:
                    if not first or "already in use" not in self._log_tail():
                        raise
            raise ServerError(f"{self.name}: no free port could be bound")

    def _start_once(self, read_only: bool, general_log: bool, timeout: float) -> None:
        proc = _spawn(self._command(read_only, general_log), self.error_log)
        self._proc = proc
        self._finalizer = weakref.finalize(self, _terminate, proc, STOP_TIMEOUT)
        deadline = time.monotonic() + timeout
        while not _greets(self.port):
            if proc.poll() is not None:
                self._forget()
                raise ServerError(
                    f"{self.name}: mariadbd exited with {proc.returncode}: {self._log_tail()}"
                )
            if time.monotonic() >= deadline:
                _terminate(proc, STOP_TIMEOUT)
                self._forget()
                raise ServerError(f"{self.name}: mariadbd did not answer within {timeout:g} s")
            time.sleep(0.02)

    def _forget(self) -> None:
        if self._finalizer is not None:
            self._finalizer.detach()
        self._finalizer = None
        self._proc = None

    def _log_tail(self, lines: int = 5) -> str:
        try:
            text = self.error_log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return " | ".join(text.strip().splitlines()[-lines:])

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Stop the server cleanly (SIGTERM), killing it after `timeout` seconds."""
        with self._lock:
            proc = self._proc
            if proc is None:
                return
            _terminate(proc, timeout)
            self._forget()
