"""A MySQL failover group of real MariaDB servers: dc1 the primary, dc2 its replica.

Owns the group's servers and topology: `MysqlGroup.start(directory)` starts one server per site
(see `servers`), creates the group-level accounts on the primary with passwords random per
start (they replicate), and makes every other site a read-only GTID replica of it, as user
`replicator`. The failover primitives the controller runs (fence, position, wait, promote,
repoint) and the test controls (stop and start a site, connect, reset to the initial topology,
drop what tenants created) all take the group's lock, so a failover step, a reset and a restart
never interleave. The group remembers which site is primary; it never decides to fail over by
itself.

With `start(..., tls=True)` (or a `CertificateAuthority` to issue from) every site serves TLS
with a certificate of its own for the names of the group's object (see `tls`; off by default).
The servers still accept plaintext, and the group's own connections (`connect`, the replication
links) stay plaintext unless a caller passes `ssl…` options to `connect`.

It must never touch a server it did not start, and never log a password. Deliberately left out:
unplanned failover (a stopped primary stays primary until a planned failover or `reset`),
semi-synchronous replication, more than one replication domain, and repairing a replica whose
data diverged (`reset` raises instead).
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import pymysql

from devstack.ca import CertificateAuthority
from devstack.mysql_group import replication
from devstack.mysql_group.replication import Account
from devstack.mysql_group.servers import MariaDBServer, ServerError
from devstack.mysql_group.tls import DEFAULT_GROUP, DEFAULT_NAMESPACE, GroupTLS, write_files

SITES = ("dc1", "dc2")
INITIAL_PRIMARY = "dc1"
REPLICATION_TIMEOUT = 15.0
_CONNECT_TIMEOUT = 5


class GroupError(RuntimeError):
    """The group cannot reach or restore the topology asked for."""


def _remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def _prepare_servers(
    base: Path, names: Sequence[str], material: GroupTLS | None
) -> dict[str, MariaDBServer]:
    servers: dict[str, MariaDBServer] = {}
    for index, site in enumerate(names, start=1):
        files = (
            None
            if material is None
            else write_files(base / site / "tls", material.sites[site], material.ca_pem)
        )
        servers[site] = MariaDBServer.create(site, base, server_id=index, tls=files)
    return servers


class MysqlGroup:
    """Real MariaDB servers, one per site, in a primary/replica topology."""

    def __init__(
        self,
        servers: Mapping[str, MariaDBServer],
        accounts: Mapping[str, Account],
        directory: Path,
        tls: GroupTLS | None = None,
    ) -> None:
        """Wrap servers that `start` prepared; use `MysqlGroup.start` instead."""
        self.servers = dict(servers)
        self.accounts = dict(accounts)
        self.directory = directory
        self.tls = tls
        """The sites' TLS material when they serve TLS, else None."""
        self.lock = threading.RLock()
        self.startup_seconds = 0.0
        self._primary = next(iter(self.servers))
        self._reset_hook: Callable[[], None] | None = None
        self._stopped = False
        self._remove_directory: weakref.finalize[Any, Any] | None = None

    # ------------------------------------------------------------ life cycle

    @classmethod
    def start(
        cls,
        directory: Path | str | None = None,
        sites: Sequence[str] = SITES,
        *,
        tls: bool | CertificateAuthority = False,
        name: str = DEFAULT_GROUP,
        namespace: str = DEFAULT_NAMESPACE,
    ) -> MysqlGroup:
        """Start the servers, create the accounts, and set up replication from the first site.

        Args:
            directory: Where the sites' data directories go (`DIR/<site>/data`; none of them
                may exist yet); a temporary directory, removed at `stop`, when None.
            sites: Site names; the first starts as the primary.
            tls: False for plaintext only; True to serve TLS with certificates of a CA
                generated here; a CA to issue the sites' certificates from. The PEMs go into
                0600 files `DIR/<site>/tls/{tls.crt,tls.key,ca.crt}`.
            name: The MysqlFailoverGroup's name the certificates are issued for.
            namespace: Its namespace.

        Raises:
            ValueError: Fewer than two sites, or a site's data directory exists already.
            ServerError: A server could not be initialised or started.
            GroupError: Replication did not catch up.
        """
        started = time.monotonic()
        names = list(dict.fromkeys(sites))
        if len(names) < 2:
            raise ValueError("a failover group needs at least two sites")
        remove = directory is None
        base = (
            Path(tempfile.mkdtemp(prefix="devstack-mysql-group-"))
            if directory is None
            else Path(directory)
        )
        base.mkdir(parents=True, exist_ok=True)
        used = [site for site in names if (base / site / "data").exists()]
        if used:
            raise ValueError(f"{base} already holds data of the sites {', '.join(used)}")
        try:
            issuer = tls if isinstance(tls, CertificateAuthority) else None
            material = (
                None
                if tls is False
                else GroupTLS.issue(names, issuer, group=name, namespace=namespace)
            )
            servers = _prepare_servers(base, names, material)
        except BaseException:
            if remove:
                _remove(base)
            raise
        group = cls(servers, replication.group_accounts(), base, material)
        if remove:
            group._remove_directory = weakref.finalize(group, _remove, base)
        try:
            group._start_servers(names)
            group._bootstrap(names[0])
        except BaseException:
            group.stop()
            raise
        group.startup_seconds = time.monotonic() - started
        return group

    def _start_servers(self, names: Sequence[str]) -> None:
        failures: list[BaseException] = []

        def run(name: str) -> None:
            try:
                self.servers[name].start(read_only=name != names[0])
            except BaseException as exc:
                failures.append(exc)

        threads = [threading.Thread(target=run, args=(name,), daemon=True) for name in names]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failures:
            raise failures[0]

    def _bootstrap(self, primary: str) -> None:
        # A fresh install: root logs in over TCP without a password until the accounts exist.
        with self._session(primary, password="") as conn:
            replication.create_accounts(conn, self.accounts)
            position = replication.binlog_position(conn)
        self._primary = primary
        for site in self.servers:
            if site == primary:
                continue
            # The wait runs on the passwordless session: a new login as root needs the password
            # only once the replica has applied the accounts, and may come before or after that.
            with self._session(site, password="") as conn:
                replication.replicate_from(conn, *self.address(primary), self.replicator)
                caught_up = replication.wait_for_position(conn, position, REPLICATION_TIMEOUT)
            if not caught_up:
                raise GroupError(f"{site} did not catch up with the new group's accounts")

    def stop(self) -> None:
        """Stop every server; remove the directory when `start` made it."""
        with self.lock:
            if self._stopped:
                return
            self._stopped = True
            self._reset_hook = None
            for server in self.servers.values():
                server.stop()
            if self._remove_directory is not None:
                self._remove_directory()

    def __enter__(self) -> MysqlGroup:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ------------------------------------------------------------ accessors

    @property
    def sites(self) -> tuple[str, ...]:
        """The site names, the initial primary first."""
        return tuple(self.servers)

    @property
    def primary(self) -> str:
        """The site that is primary now."""
        return self._primary

    @property
    def root_password(self) -> str:
        """The password of root (on '%' and 'localhost')."""
        return self.accounts["root"].password

    @property
    def replicator(self) -> Account:
        """The replication account."""
        return self.accounts["replication"]

    def account(self, role: str) -> Account:
        """A group-level account by role: root, operator, app, readonly, monitor, backup,
        replication."""
        return self.accounts[role]

    def password_of(self, username: str) -> str | None:
        """The password of a group-level account by login name; None for other users."""
        return next((a.password for a in self.accounts.values() if a.username == username), None)

    def address(self, site: str) -> tuple[str, int]:
        """(host, port) of a site's server."""
        return self._server(site).address

    def is_running(self, site: str) -> bool:
        """Whether a site's server process is up."""
        return self._server(site).running

    def _server(self, site: str) -> MariaDBServer:
        try:
            return self.servers[site]
        except KeyError:
            known = ", ".join(self.servers)
            raise KeyError(f"no site {site!r} in this group (sites: {known})") from None

    def connect(
        self,
        site: str,
        user: str = "root",
        password: str | bytes | None = None,
        database: str | None = None,
        **options: Any,
    ) -> Any:
        """A PyMySQL connection (autocommit) to a site over TCP.

        The password defaults to the group account's of that login (empty for other users). It
        is plaintext unless `options` name a PyMySQL `ssl…` option: PyMySQL's default
        "preferred" TLS would build an unverified SSLContext per connect to a TLS group.
        """
        host, port = self.address(site)
        settings: dict[str, Any] = {
            "autocommit": True,
            "connect_timeout": _CONNECT_TIMEOUT,
            "read_timeout": 60,
            "write_timeout": 60,
            **options,
        }
        if not any(key.startswith("ssl") for key in options):
            settings["ssl_disabled"] = True
        return pymysql.connect(
            host=host,
            port=port,
            user=user,
            password=(self.password_of(user) or "") if password is None else password,
            database=database,
            **settings,
        )

    def _session(self, site: str, password: str | None = None) -> Any:
        return self.connect(site, "root", password)

    def topology(self) -> dict[str, dict[str, Any]]:
        """Each running site's role as the servers report it: read_only, replicating from."""
        out: dict[str, dict[str, Any]] = {}
        with self.lock:
            for site in self.servers:
                if not self.is_running(site):
                    out[site] = {"running": False}
                    continue
                with self._session(site) as conn:
                    status = replication.replica_status(conn)
                    out[site] = {
                        "running": True,
                        "read_only": replication.read_only(conn),
                        "source_port": int(status["Master_Port"]) if status else None,
                        "io_running": (status or {}).get("Slave_IO_Running"),
                        "sql_running": (status or {}).get("Slave_SQL_Running"),
                    }
        return out

    # ------------------------------------------------------------ test controls

    def stop_site(self, site: str) -> None:
        """Stop a site's server cleanly (its data stays)."""
        with self.lock:
            self._server(site).stop()

    def start_site(self, site: str, *, general_log: bool = False) -> None:
        """Start a stopped site's server again with its data (a replica comes back read-only
        and resumes replicating); with `general_log`, recording every statement it receives."""
        with self.lock:
            self._server(site).start(read_only=site != self._primary, general_log=general_log)

    def bind(self, hook: Callable[[], None] | None) -> None:
        """Set what `reset` runs once the servers are back (the platform clears the group
        object's failover state with it); None unbinds."""
        with self.lock:
            self._reset_hook = hook

    def reset(self, timeout: float = REPLICATION_TIMEOUT) -> None:
        """Restore the initial topology: every site running, dc1 (the first site) the writable
        primary, every other site its read-only replica and caught up; then run the bound hook.

        Raises:
            GroupError: A replica does not replicate or catch up (its data diverged).
        """
        first = self.sites[0]
        with self.lock:
            for site in self.servers:
                self.start_site(site)
            if self._primary != first:
                self.switchover(first, timeout)
            with self._session(first) as conn:
                replication.set_read_only(conn, False)
            for site in self.servers:
                if site != first:
                    self._ensure_replica(site, first)
            if not self.wait_replicated(timeout):
                raise GroupError(f"the replicas did not catch up with {first}: {self.topology()}")
            hook = self._reset_hook
            if hook is not None:
                hook()

    def _ensure_replica(self, site: str, primary: str) -> None:
        _, port = self.address(primary)
        with self._session(site) as conn:
            replication.set_read_only(conn, True)
            if replication.replicating(replication.replica_status(conn), port):
                return
            replication.replicate_from(conn, *self.address(primary), self.replicator)

    def drop_tenant_objects(self, timeout: float = REPLICATION_TIMEOUT) -> list[str]:
        """Drop every non-system schema and every user but the group-level and system ones,
        on the primary (the drops replicate); return what was dropped."""
        keep = {a.username for a in self.accounts.values()}
        with self.lock, self._session(self._primary) as conn:
            dropped = replication.drop_tenant_objects(conn, keep)
        self.wait_replicated(timeout)
        return dropped

    def wait_replicated(self, timeout: float = REPLICATION_TIMEOUT) -> bool:
        """Wait until every running replica has applied what the primary's binlog holds."""
        with self.lock:
            if not self.is_running(self._primary):
                return False
            position = self.position(self._primary)
            deadline = time.monotonic() + timeout
            for site in self.servers:
                if site == self._primary or not self.is_running(site):
                    continue
                if not self.wait_for(site, position, max(0.0, deadline - time.monotonic())):
                    return False
        return True

    # ------------------------------------------------------------ failover primitives

    def fence(self, site: str, on: bool = True) -> None:
        """Turn read_only on (or off) on a site."""
        with self.lock, self._session(site) as conn:
            replication.set_read_only(conn, on)

    def read_only(self, site: str) -> bool:
        """Whether a site is read-only."""
        with self.lock, self._session(site) as conn:
            return replication.read_only(conn)

    def position(self, site: str) -> str:
        """A site's gtid_binlog_pos."""
        with self.lock, self._session(site) as conn:
            return replication.binlog_position(conn)

    def wait_for(self, site: str, position: str, timeout: float) -> bool:
        """Wait until a site has applied a GTID position; False on timeout."""
        with self.lock, self._session(site) as conn:
            return replication.wait_for_position(conn, position, timeout)

    def promote(self, site: str) -> None:
        """Stop a site's replication, forget it, make it writable; it is the primary now."""
        with self.lock, self._session(site) as conn:
            replication.promote(conn)
            self._primary = site

    def repoint(self, site: str, primary: str) -> None:
        """Make a site a read-only replica of `primary`."""
        with self.lock, self._session(site) as conn:
            replication.replicate_from(conn, *self.address(primary), self.replicator)

    def switchover(self, target: str, timeout: float = REPLICATION_TIMEOUT) -> None:
        """A planned switch in one call: fence the primary, wait, promote `target`, repoint.

        Raises:
            GroupError: The target did not catch up (the old primary is writable again).
        """
        with self.lock:
            old = self._primary
            if target == old:
                return
            self.fence(old)
            if not self.wait_for(target, self.position(old), timeout):
                self.fence(old, on=False)
                raise GroupError(f"{target} did not catch up with {old} within {timeout:g} s")
            self.promote(target)
            for site in self.servers:
                if site != target:
                    self.repoint(site, target)


__all__ = ["INITIAL_PRIMARY", "SITES", "GroupError", "MysqlGroup", "ServerError"]
