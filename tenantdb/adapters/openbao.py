"""OpenBao through hvac: log in as tenantdb's Kubernetes-auth role, manage order roles, revoke.

A session logs in at the server and mount of the ControlPlane's secret store with the pod's
ServiceAccount token, read afresh at every login because the kubelet rotates it in place, and
with the ControlPlane namespace's shared client certificate for mutual TLS.

Each thread keeps its connections to a server, per client certificate (a channel), for the next
session that comes within ``CHANNEL_IDLE_SECONDS``, so a busy worker does not pay a TLS
handshake per pass. A channel closes when it sat idle that long (well inside any server's idle
timeout), when a session on it failed, or when more than ``CHANNELS`` are open. The
certificate's PEMs are held in in-memory files for the channel's life (the TLS stack reads
paths; ``tenantdb.adapters.memfiles``), so nothing of the key reaches a disk, even when the
process is killed.

A channel also keeps the token of its last login (per auth mount and role) for the sessions
that follow within ``token_reuse`` seconds of that login (at most half the token's TTL), so a
busy worker logs in about once a minute rather than once a pass. A session that finds the kept
token too old revokes it and logs in afresh; a channel that closes idle revokes its token
first, and so does a session that fails on an answer from OpenBao. A request for which OpenBao
refuses a kept token (403: the token was revoked, or its policies no longer allow it) logs in
afresh once and is made again (the refused token revoked), so only a fresh token's refusal is
an answer. A token never leaves the memory of the thread that logged in: a channel that fails
without an answer (OpenBao unreachable), or a process that ends, leaves its token to expire with
its TTL. With ``token_reuse`` 0 every session logs in and revokes its own token on the way out.

Errors come out as ``OpenBaoError`` in the shape ``openbao: <status> on <METHOD> <path>: <errors>``
with OpenBao's own error texts, and never carry the JWT, the token or a key. Every request is
timed and its failures counted by operation (``tenantdb.adapters.metrics.OPENBAO_OPERATIONS``);
a role or lease that is not there is an answer, not a failure. A redirect is refused, never
followed, so no token is ever sent to an address the secret store does not name.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import hvac
import hvac.exceptions
import requests

from tenantdb.adapters import memfiles
from tenantdb.adapters.errors import SafeError
from tenantdb.adapters.metrics import openbao_request
from tenantdb.adapters.useragent import USER_AGENT
from tenantdb.logs import redact

log = logging.getLogger(__name__)

DATABASE_MOUNT = "database/mariadb"
DEFAULT_TIMEOUT = 30.0
CHANNELS = 8
"""How many channels (server and client certificate) a thread keeps open at most."""
RETIRE_TIMEOUT = 2.0
"""How long revoking a retired channel's token may take before it is left to expire."""
CHANNEL_IDLE_SECONDS = 30.0
"""How long a channel may sit unused before the next session opens a new one. OpenBao's
listener closes idle connections after 5 minutes by default; a much shorter limit here keeps a
session from meeting a connection the server is closing."""


class OpenBaoError(SafeError):
    """An OpenBao request failed; ``status`` is the HTTP status, or None for a transport error."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status

    @property
    def permission_denied(self) -> bool:
        """Whether OpenBao answered 403: a missing login role or policy."""
        return self.status == 403


@dataclass(frozen=True, slots=True)
class ClientCertificate:
    """The PEMs of the shared client certificate; the key never shows in a repr."""

    ca_crt: bytes
    tls_crt: bytes
    tls_key: bytes = field(repr=False)


def _error(exc: Exception, method: str, path: str) -> OpenBaoError:
    if isinstance(exc, hvac.exceptions.VaultError):
        status = _status_of(exc)
        errors = [str(e) for e in (exc.errors or []) if str(e)]
        text = "; ".join(errors) or str(exc.text or "").strip() or "<no error body>"
        # OpenBao's own words, which could quote a token: they go into conditions and logs.
        return OpenBaoError(f"openbao: {status} on {method} {path}: {redact(text)}", status)
    return OpenBaoError(f"openbao: {method} {path}: {type(exc).__name__}")


def _refuse_redirect(response: requests.Response, *args: Any, **kwargs: Any) -> None:
    """Fail a request OpenBao answers with a redirect, rather than hand it back as an answer.

    A redirect is never followed: it could send the login's ServiceAccount token, or a token,
    to another address (plain http included) that the SecretStore did not name.
    """
    if response.is_redirect:
        response.close()  # its connection goes now, not whenever the answer is collected
        path = urlsplit(response.request.url or "").path
        raise OpenBaoError(
            f"openbao: {response.status_code} on {response.request.method} {path}: a redirect"
            " to another address, which tenantdb does not follow",
            response.status_code,
        )


def _login(client: hvac.Client, role: str, jwt: str, mount: str) -> tuple[str, float]:
    """Log in at Kubernetes auth's `mount` as `role` with `jwt`; the client token and its
    TTL in seconds (0 when the answer gives none)."""
    login_path = f"/v1/auth/{mount}/login"
    try:
        with openbao_request("login"):
            answer = client.auth.kubernetes.login(role, jwt, mount_point=mount)
            auth = (answer or {}).get("auth") or {}
            token = auth.get("client_token")
            if not token:
                raise OpenBaoError(
                    f"openbao: POST {login_path}: the answer carries no client token"
                )
    except (hvac.exceptions.VaultError, requests.RequestException, OSError) as exc:
        raise _error(exc, "POST", login_path) from None
    try:
        ttl = float(auth.get("lease_duration") or 0)
    except (TypeError, ValueError):
        ttl = 0.0
    return str(token), ttl


def _status_of(exc: hvac.exceptions.VaultError) -> int:
    statuses = {
        hvac.exceptions.InvalidRequest: 400,
        hvac.exceptions.Unauthorized: 401,
        hvac.exceptions.Forbidden: 403,
        hvac.exceptions.InvalidPath: 404,
        hvac.exceptions.RateLimitExceeded: 429,
        hvac.exceptions.InternalServerError: 500,
        hvac.exceptions.BadGateway: 502,
        hvac.exceptions.VaultNotInitialized: 501,
        hvac.exceptions.VaultDown: 503,
    }
    for kind, status in statuses.items():
        if isinstance(exc, kind):
            return status
    return 0


class OpenBaoSession:
    """A logged-in client; use through ``open_session``, which logs in and revokes."""

    def __init__(self, client: hvac.Client, relogin: Callable[[], None] | None = None) -> None:
        """Wrap a logged-in hvac client. ``relogin`` is given while the client's token is one
        an earlier session logged in with: it logs in afresh, for a request that token was
        refused."""
        self._client = client
        self._relogin = relogin

    def _do(self, method: str, path: str, call: Callable[[], Any]) -> Any:
        try:
            try:
                return call()
            except hvac.exceptions.Forbidden:
                if self._relogin is None:
                    raise
                relogin, self._relogin = self._relogin, None
                relogin()
                return call()
        except (hvac.exceptions.VaultError, requests.RequestException, OSError) as exc:
            raise _error(exc, method, path) from None

    def read_role(self, name: str) -> dict[str, Any] | None:
        """Read a database role's ``data``; None when it does not exist."""

        def read() -> Any:
            try:
                return self._client.secrets.database.read_role(name, mount_point=DATABASE_MOUNT)
            except hvac.exceptions.InvalidPath:
                return _ABSENT

        with openbao_request("read_role"):
            answer = self._do("GET", f"/v1/{DATABASE_MOUNT}/roles/{name}", read)
        if answer is _ABSENT:
            return None
        return cast(dict[str, Any], (answer or {}).get("data") or {})

    def read_auth_role(self, mount: str, name: str) -> dict[str, Any] | None:
        """Read a Kubernetes-auth role's ``data`` (its bindings and token TTLs); None when it
        does not exist or this token may not read it (logged: the policy predates the read)."""
        path = f"auth/{mount}/role/{name}"

        def read() -> Any:
            try:
                return self._client.read(path)
            except hvac.exceptions.InvalidPath:
                return _ABSENT

        with openbao_request("read_auth_role"):
            try:
                answer = self._do("GET", f"/v1/{path}", read)
            except OpenBaoError as exc:
                if exc.status != 403:
                    raise
                log.warning(
                    "tenantdb may not read the OpenBao auth role %s, so it cannot check that its"
                    " tokens outlive the credentials ESO reads with them; give the operator's"
                    " policy read on it (docs/operations.md)",
                    path,
                )
                return None
        if answer is _ABSENT or not answer:
            return None
        return cast(dict[str, Any], answer.get("data") or {})

    def write_role(self, name: str, body: Mapping[str, Any]) -> None:
        """Create or replace a database role from its request body."""
        with openbao_request("write_role"):
            self._do(
                "POST",
                f"/v1/{DATABASE_MOUNT}/roles/{name}",
                lambda: self._client.secrets.database.create_role(
                    name,
                    db_name=body["db_name"],
                    creation_statements=list(body["creation_statements"]),
                    revocation_statements=list(body.get("revocation_statements") or ()),
                    default_ttl=body.get("default_ttl"),
                    max_ttl=body.get("max_ttl"),
                    mount_point=DATABASE_MOUNT,
                ),
            )

    def delete_role(self, name: str) -> None:
        """Delete a database role; an absent one counts as deleted."""
        with openbao_request("delete_role"):
            try:
                self._do(
                    "DELETE",
                    f"/v1/{DATABASE_MOUNT}/roles/{name}",
                    lambda: self._client.secrets.database.delete_role(
                        name, mount_point=DATABASE_MOUNT
                    ),
                )
            except OpenBaoError as exc:
                if exc.status != 404:
                    raise

    def revoke_role_leases(self, name: str) -> None:
        """Revoke every lease issued from the role's creds path, which drops its SQL users."""
        prefix = f"{DATABASE_MOUNT}/creds/{name}"
        with openbao_request("revoke_leases"):
            try:
                self._do(
                    "POST",
                    f"/v1/sys/leases/revoke-prefix/{prefix}",
                    lambda: self._client.sys.revoke_prefix(prefix),
                )
            except OpenBaoError as exc:
                if exc.status != 404:
                    raise

    def revoke_self(self) -> None:
        """Revoke this session's token; a failure is logged, not raised."""
        try:
            with openbao_request("revoke_token"):
                self._client.auth.token.revoke_self()
        except (hvac.exceptions.VaultError, requests.RequestException, OSError) as exc:
            log.info(
                "revoking tenantdb's OpenBao token failed: %s",
                _error(exc, "POST", "/v1/auth/token/revoke-self"),
            )


_ABSENT = object()
"""What a read answers for a path OpenBao does not have."""


@dataclass(slots=True)
class _KeptToken:
    """A token a channel logged in with, and until when (monotonic) sessions may use it."""

    token: str = field(repr=False)
    until: float


class _Channel:
    """The kept-alive connections to one server with one client certificate, the in-memory
    PEM files they are opened with, and the token of its last login per auth mount and role."""

    def __init__(self, key: tuple[str, str], cert: ClientCertificate | None) -> None:
        self.key = key
        self._files = ExitStack()
        self.cert, self.verify = self._files.enter_context(_tls_files(cert))
        self.session = requests.Session()
        self.session.cert, self.session.verify = self.cert, self.verify
        self.session.headers["User-Agent"] = USER_AGENT
        self.session.hooks["response"].append(_refuse_redirect)
        self.used = time.monotonic()
        self.tokens: dict[tuple[str, str], _KeptToken] = {}
        self.timeout = DEFAULT_TIMEOUT

    def client(self, token: str | None = None) -> hvac.Client:
        """An hvac client over this channel's connections, with ``token``."""
        client = hvac.Client(
            url=self.key[0],
            cert=self.cert,
            verify=self.verify,
            timeout=self.timeout,
            allow_redirects=False,
            session=self.session,
        )
        if token is not None:
            client.token = token
        return client

    def revoke_tokens(self) -> None:
        """Revoke the tokens this channel keeps; a failure is logged, not raised."""
        for kept in self.tokens.values():
            OpenBaoSession(self.client(kept.token)).revoke_self()
        self.tokens.clear()

    def close(self) -> None:
        self.tokens.clear()
        self.session.close()
        self._files.close()


class _Channels(threading.local):
    """The channels of one thread, oldest use first: a session and its connections are never
    shared between threads, and a forked child (a prefork pool process) starts with none."""

    def __init__(self) -> None:
        self.open: OrderedDict[tuple[str, str], _Channel] = OrderedDict()


_CHANNELS = _Channels()


def _forget_channels() -> None:
    """In a forked child: the parent's connections are not this process's to use."""
    _CHANNELS.open = OrderedDict()


os.register_at_fork(after_in_child=_forget_channels)


def _channel(server: str, cert: ClientCertificate | None) -> _Channel:
    """This thread's channel to ``server`` with ``cert``, opened when there is none that was
    used within ``CHANNEL_IDLE_SECONDS``."""
    digest = hashlib.sha256()
    for pem in (cert.ca_crt, cert.tls_crt, cert.tls_key) if cert is not None else ():
        digest.update(len(pem).to_bytes(8, "big") + pem)
    key = (server, digest.hexdigest())
    channels = _CHANNELS.open
    now = time.monotonic()
    for stale in [c for c in channels.values() if now - c.used > CHANNEL_IDLE_SECONDS]:
        _retire_channel(stale)
    channel = channels.get(key)
    if channel is None:
        channel = channels[key] = _Channel(key, cert)
        while len(channels) > CHANNELS:
            _retire_channel(next(iter(channels.values())))
    channels.move_to_end(key)
    return channel


def _close_channel(channel: _Channel) -> None:
    if _CHANNELS.open.get(channel.key) is channel:
        del _CHANNELS.open[channel.key]
    channel.close()


def _retire_channel(channel: _Channel) -> None:
    """Close a channel that is no longer wanted (idle, or one too many); revoke its tokens on
    its way out, as its last session would have, waiting at most ``RETIRE_TIMEOUT`` for the
    answer (the session that retires it has its own work to do)."""
    try:
        channel.timeout = min(channel.timeout, RETIRE_TIMEOUT)
        channel.revoke_tokens()
    finally:
        _close_channel(channel)


@contextmanager
def _tls_files(
    cert: ClientCertificate | None,
) -> Iterator[tuple[tuple[str, str] | None, str | bool]]:
    if cert is None:
        yield None, True
        return
    if memfiles.SUPPORTED:
        pems = (("ca.crt", cert.ca_crt), ("tls.crt", cert.tls_crt), ("tls.key", cert.tls_key))
        files = {name: memfiles.MemoryFile(f"tenantdb-openbao-{name}", pem) for name, pem in pems}
        try:
            yield (files["tls.crt"].path, files["tls.key"].path), files["ca.crt"].path
        finally:
            for file in files.values():
                file.close()
        return
    with tempfile.TemporaryDirectory(prefix="tenantdb-openbao-") as tmp:
        os.chmod(tmp, 0o700)
        paths = {}
        pems = (("ca.crt", cert.ca_crt), ("tls.crt", cert.tls_crt), ("tls.key", cert.tls_key))
        for name, pem in pems:
            path = Path(tmp) / name
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(pem)
            paths[name] = str(path)
        yield (paths["tls.crt"], paths["tls.key"]), paths["ca.crt"]


@contextmanager
def open_session(
    server: str,
    mount: str,
    role: str,
    read_jwt: Callable[[], str],
    cert: ClientCertificate | None,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    token_reuse: float = 0.0,
) -> Iterator[OpenBaoSession]:
    """Yield a logged-in session: with the token this thread's channel keeps for ``mount`` and
    ``role`` while it is younger than ``token_reuse`` seconds, else after a login with
    Kubernetes auth.

    Args:
        server: OpenBao's address, e.g. ``https://openbao.shared-services.svc:8200``.
        mount: the Kubernetes auth mount, e.g. ``kubernetes/management``.
        role: the auth role tenantdb logs in as.
        read_jwt: returns the ServiceAccount token; called at every login.
        cert: the client certificate for mutual TLS, or None for plain HTTP.
        timeout: per-request timeout in seconds.
        token_reuse: how long after a login later sessions may use its token (capped at half
            the token's TTL); 0 logs in for this session alone and revokes at its end.

    Raises:
        OpenBaoError: the server is not https (the token is never sent in the clear), or
            reading the token or logging in failed.
    """
    if urlsplit(server).scheme != "https":
        # The address comes from a SecretStore: whoever can edit it must not be able to point
        # tenantdb's ServiceAccount token at a plain-HTTP listener.
        raise OpenBaoError(
            f"openbao: refusing to log in to {server!r}: OpenBao must be reached over https"
        )
    channel = _channel(server, cert)
    channel.timeout = timeout
    slot = (mount, role)
    try:
        kept = channel.tokens.get(slot)
        if kept is not None and time.monotonic() >= kept.until:
            del channel.tokens[slot]
            OpenBaoSession(channel.client(kept.token)).revoke_self()
            kept = None
        client = channel.client(None if kept is None else kept.token)

        def log_in() -> None:
            channel.tokens.pop(slot, None)
            client.token, ttl = _login(client, role, _read_jwt(read_jwt), mount)
            if token_reuse > 0:
                keep = min(token_reuse, ttl / 2) if ttl > 0 else token_reuse
                channel.tokens[slot] = _KeptToken(client.token, time.monotonic() + keep)

        def log_in_again() -> None:
            refused = client.token
            log_in()
            OpenBaoSession(channel.client(refused)).revoke_self()

        if kept is None:
            log_in()
        session = OpenBaoSession(client, relogin=None if kept is None else log_in_again)
        try:
            yield session
        finally:
            if slot not in channel.tokens:
                session.revoke_self()
    except BaseException as exc:
        if isinstance(exc, OpenBaoError) and exc.status is not None:
            # OpenBao answered: the kept token can still be revoked before the channel goes.
            channel.revoke_tokens()
        # Whatever failed may have left a connection half-read: the next session starts afresh.
        _close_channel(channel)
        raise
    channel.used = time.monotonic()


def _read_jwt(read_jwt: Callable[[], str]) -> str:
    try:
        return read_jwt().strip()
    except OSError as exc:
        raise OpenBaoError(
            f"reading the ServiceAccount token tenantdb logs in with: {type(exc).__name__}"
        ) from None
