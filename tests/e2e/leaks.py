"""The secret-leak scan of the e2e suite: no issued secret in any place tenantdb writes or serves.

Collecting. A `Recorder`, started before the platform, records every secret the devstack hands
out while it runs (so a secret that was rotated, revoked or deleted before the scan is still
looked for), and `collect` adds what the platform holds when the scan runs. Three classes:

- passwords: every value under a password-like key (`password`, `MYSQL_ROOT_PASSWORD`, …) of
  every Secret written to any cluster (the Secrets tenantdb delivered in the tenant namespaces,
  the ones ESO wrote from OpenBao, the MySQL group's credential Secrets in `bloodraven`, the
  owner Secrets of MysqlDatabase orders), every dynamic database password OpenBao generated,
  the passwords of OpenBao's engine connections and of the MySQL group's accounts;
- tokens: every OpenBao token (the root token, each login's token; the stand-in keeps them in
  `OpenBaoCore._tokens` and forgets them when they end), every ServiceAccount token the
  devstack API servers signed (`devstack.kube.auth.Tokens.issue`, which keeps none), each API
  server's admin token, the operator token file, and token-like keys of Secrets;
- private keys: every key the devstack CA or cert-manager's stand-in signed a certificate for
  (`CertificateAuthority.sign`, so the tls.key of every Secret cert-manager wrote and every
  client certificate's key), the devstack CA's key, the MySQL group's TLS keys, each API
  server's TLS key, the `*.key` files of the platform's state directory and the tls.key of every
  Secret.

Values shorter than `MIN_LENGTH` (8) characters, and empty ones, are ignored: an empty root
password or a test's `pw` would match all over any text, and proves nothing.

Scanning. Each secret is looked for as is, JSON-escaped when that differs (a PEM's newlines),
a PEM key's body also without its line breaks, and base64-encoded (standard and URL-safe, at
each of the three byte alignments, so it is found inside a longer base64 text too). The places
(see `redis_places`, `log_places`, `metrics_places`, `order_places`) are every Redis key and
value under the stack's prefix of every type, with the body of each Celery message decoded from
kombu's envelope beside its raw text, any result backend key, every log file of the stack's
processes, the /metrics page of each running process, and the status of every order of every
served kind and every Event on every cluster. A finding names the place and the secret's class
and origin, never the secret.
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import json
import subprocess
import threading
import urllib.error
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Protocol

import redis

from devstack.ca import CertificateAuthority, Issued
from devstack.kube.auth import Tokens
from devstack.kube.store import Store
from devstack.kubeclient import RemoteCluster
from devstack.openbao.core import OpenBaoCore, Token
from devstack.openbao.database import CredentialPlan, DatabaseMount
from devstack.platform import Platform
from devstack.upstream import RealOpenBao
from tenantdb.core.served import KINDS

PASSWORD = "password"
TOKEN = "token"
PRIVATE_KEY = "private key"
CLASSES = (PASSWORD, TOKEN, PRIVATE_KEY)
MIN_LENGTH = 8
"""Values shorter than this are not secrets the scan can look for without false alarms."""

_NOT_SECRET_KEYS = {"username", "user", "host", "port", "database", "ca.crt", "tls.crt"}


@dataclass(frozen=True)
class Secret:
    """One issued secret: its class, where it came from (a description) and its value."""

    kind: str
    origin: str
    value: str = field(repr=False)


class Secrets:
    """The secrets to look for, each value once (the first origin that named it wins)."""

    def __init__(self) -> None:
        self._by_value: dict[str, Secret] = {}
        self._lock = threading.Lock()

    def add(self, kind: str, origin: str, value: str | bytes | None) -> None:
        """Add a secret; values shorter than `MIN_LENGTH` characters are ignored."""
        if value is None:
            return
        text = value.decode(errors="replace") if isinstance(value, bytes) else value
        text = text.strip()
        if len(text) < MIN_LENGTH:
            return
        with self._lock:
            self._by_value.setdefault(text, Secret(kind, origin, text))

    def update(self, other: Secrets) -> None:
        """Add every secret of another set."""
        for secret in other:
            self.add(secret.kind, secret.origin, secret.value)

    def __iter__(self) -> Iterator[Secret]:
        with self._lock:
            return iter(list(self._by_value.values()))

    def __len__(self) -> int:
        return len(self._by_value)

    def counts(self) -> Counter[str]:
        """How many secrets of each class."""
        return Counter(secret.kind for secret in self)

    def add_secret_object(self, cluster: str, obj: Mapping[str, Any]) -> None:
        """Add the secret values of a Secret object (data base64, stringData plain)."""
        meta = obj.get("metadata") or {}
        where = f"Secret {meta.get('namespace', '')}/{meta.get('name', '')}@{cluster}"
        values: dict[str, str | bytes] = {}
        for key, encoded in (obj.get("data") or {}).items():
            try:
                values[key] = base64.b64decode(str(encoded))
            except ValueError:
                values[key] = str(encoded)
        values.update({k: str(v) for k, v in (obj.get("stringData") or {}).items()})
        for key, value in values.items():
            kind = secret_class(key, value)
            if kind is not None:
                self.add(kind, f"{where} {key}", value)


def secret_class(key: str, value: str | bytes) -> str | None:
    """The class of a Secret's key (None: not a secret, e.g. username, host, ca.crt)."""
    text = value.decode(errors="replace") if isinstance(value, bytes) else value
    lowered = key.lower()
    if "PRIVATE KEY-----" in text or lowered.endswith(".key") or lowered == "key":
        return PRIVATE_KEY
    if lowered in _NOT_SECRET_KEYS or lowered.endswith(("user", "username")):
        return None
    if "token" in lowered or "jwt" in lowered:
        return TOKEN
    if "password" in lowered or "secret" in lowered or lowered.endswith(("pass", "pwd")):
        return PASSWORD
    return None


# -- recording what the devstack hands out ----------------------------------------------------


class Recorder:
    """Records every secret the devstack issues while it is started (a context manager).

    It wraps, for the whole process, `Tokens.issue` (ServiceAccount tokens the devstack signs),
    `RemoteCluster.token_request` (tokens any API server issued to the platform or a stand-in),
    `OpenBaoCore._issue_token` (OpenBao tokens), `DatabaseMount.plan_credentials` (dynamic
    database passwords), `CertificateAuthority.sign` and `generate` (private keys) and
    `Store.put` (every Secret written to a devstack cluster) and the writes of `RemoteCluster`
    (every Secret the platform or a stand-in wrote to any cluster, a real one included).
    Several recorders may run at once.
    """

    _active: ClassVar[list[Recorder]] = []
    _originals: ClassVar[dict[tuple[type, str], Any]] = {}
    _guard = threading.Lock()

    def __init__(self) -> None:
        self.secrets = Secrets()
        self.secret_writes: list[tuple[int, dict[str, Any]]] = []
        """Every Secret written while recording: (id of the cluster's store, the Secret)."""

    def start(self) -> Recorder:
        with Recorder._guard:
            if not Recorder._active:
                _install()
            Recorder._active.append(self)
        return self

    def stop(self) -> None:
        with Recorder._guard:
            if self in Recorder._active:
                Recorder._active.remove(self)
            if not Recorder._active:
                _uninstall()

    def __enter__(self) -> Recorder:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _record(kind: str, origin: str, value: str | bytes | None) -> None:
    for recorder in list(Recorder._active):
        recorder.secrets.add(kind, origin, value)


def _wrap(owner: type, name: str, after: Callable[[Any, Any, tuple[Any, ...]], None]) -> None:
    original = owner.__dict__[name]
    Recorder._originals[(owner, name)] = original
    function = original.__func__ if isinstance(original, classmethod) else original

    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = function(self, *args, **kwargs)
        with contextlib.suppress(Exception):  # recording must never break the devstack
            after(self, result, args)
        return result

    wrapper.__wrapped__ = function  # type: ignore[attr-defined]
    setattr(owner, name, classmethod(wrapper) if isinstance(original, classmethod) else wrapper)


def _install() -> None:
    def sa_token(_: Any, result: tuple[str, int], args: tuple[Any, ...]) -> None:
        ns, name = (*args, "?", "?")[:2]
        _record(TOKEN, f"ServiceAccount token of {ns}/{name}", result[0])

    def bao_token(_: Any, result: Token, __: tuple[Any, ...]) -> None:
        _record(TOKEN, f"OpenBao token ({result.display_name}, {result.path})", result.id)

    def db_password(_: Any, result: CredentialPlan, __: tuple[Any, ...]) -> None:
        _record(PASSWORD, f"OpenBao dynamic credential of role {result.role.name}", result.password)

    def signed_key(_: Any, result: Issued, __: tuple[Any, ...]) -> None:
        _record(PRIVATE_KEY, "a key the devstack CA signed a certificate for", result.key_pem)

    def ca_key(_: Any, result: CertificateAuthority, __: tuple[Any, ...]) -> None:
        _record(PRIVATE_KEY, "a devstack CA's key", result.key_pem)

    def stored(store: Store, result: dict[str, Any], args: tuple[Any, ...]) -> None:
        if args and args[0] == "/secrets":
            copy = {k: dict(v) if isinstance(v, dict) else v for k, v in result.items()}
            for recorder in list(Recorder._active):
                recorder.secret_writes.append((id(store), copy))

    _wrap(Tokens, "issue", sa_token)
    _wrap(RemoteCluster, "token_request", _requested_token)
    for method in ("create", "apply", "patch"):
        _wrap(RemoteCluster, method, _remote_write)
    _wrap(OpenBaoCore, "_issue_token", bao_token)
    _wrap(DatabaseMount, "plan_credentials", db_password)
    _wrap(CertificateAuthority, "sign", signed_key)
    _wrap(CertificateAuthority, "generate", ca_key)
    _wrap(Store, "put", stored)


def _requested_token(client: RemoteCluster, result: dict[str, Any], args: tuple[Any, ...]) -> None:
    ns, name = (*args, "?", "?")[:2]
    where = f"ServiceAccount token of {ns}/{name} on {client.name}"
    _record(TOKEN, where, (result.get("status") or {}).get("token"))


def _remote_write(client: RemoteCluster, result: dict[str, Any], args: tuple[Any, ...]) -> None:
    if args and args[0] == "secrets":
        copy = {k: dict(v) if isinstance(v, dict) else v for k, v in result.items()}
        for recorder in list(Recorder._active):
            recorder.secret_writes.append((id(client), copy))


def _uninstall() -> None:
    for (owner, name), original in Recorder._originals.items():
        setattr(owner, name, original)
    Recorder._originals.clear()


# -- what the platform holds -----------------------------------------------------------------


def collect(platform: Platform, recorder: Recorder | None = None) -> Secrets:
    """Every secret the platform issued or holds (see the module), while it still runs."""
    found = Secrets()
    if recorder is not None:
        found.update(recorder.secrets)
        names = {id(server.cluster.store): name for name, server in platform.servers.items()}
        names |= {id(e.client): name for name, e in platform.endpoints.items()}
        for store, obj in list(recorder.secret_writes):
            found.add_secret_object(names.get(store, "another platform's cluster"), obj)
    _collect_api_servers(platform, found)
    if platform.ca is not None:
        found.add(PRIVATE_KEY, "the devstack CA's key", platform.ca.key_pem)
    _collect_openbao(platform, found)
    _collect_mysql_group(platform, found)
    if platform.operator_token_file.exists():
        found.add(TOKEN, "the operator token file", platform.operator_token_file.read_text())
    for path in sorted(platform.state_dir.glob("*.key")):
        found.add(PRIVATE_KEY, f"state file {path.name}", path.read_bytes())
    return found


def _collect_api_servers(platform: Platform, found: Secrets) -> None:
    """The API servers' own credentials and keys, and every Secret they hold now."""
    for name, server in platform.servers.items():
        found.add(TOKEN, f"admin token of cluster {name}", server.cluster.admin_token)
        if server.tls is not None:
            found.add(PRIVATE_KEY, f"TLS key of API server {name}", server.tls.key_pem)
    if platform.real is not None:
        pki = platform.real.pki
        found.add(PRIVATE_KEY, "the real API servers' serving key", pki.serving_key.read_bytes())
        found.add(PRIVATE_KEY, "the real API servers' admin key", pki.admin_key.read_bytes())
        for name, real in platform.real.clusters.items():
            key = real.service_account_key.read_bytes()
            found.add(PRIVATE_KEY, f"service-account signing key of {name}", key)
    for name, endpoint in platform.endpoints.items():
        for obj in endpoint.client.list("secrets"):
            found.add_secret_object(name, obj)


def _collect_real_openbao(openbao: RealOpenBao, found: Secrets) -> None:
    """Every token and password a real OpenBao handed out, from its raw audit device."""
    found.add(TOKEN, "OpenBao root token", openbao.root_token)
    for event in openbao.audit_events(raw=True):
        if event.get("type") != "response":
            continue
        path = (event.get("request") or {}).get("path", "")
        answer = event.get("response") or {}
        token = (answer.get("auth") or {}).get("client_token")
        if token:
            found.add(TOKEN, f"OpenBao token ({path})", token)
        password = (answer.get("data") or {}).get("password")
        if isinstance(password, str):
            found.add(PASSWORD, f"OpenBao dynamic credential ({path})", password)


def _collect_openbao(platform: Platform, found: Secrets) -> None:
    """The tokens OpenBao holds and its engine connections' passwords."""
    if platform.openbao is None:
        return
    if isinstance(platform.openbao, RealOpenBao):
        _collect_real_openbao(platform.openbao, found)
        return
    core = platform.openbao.core
    found.add(TOKEN, "OpenBao root token", core.root_token)
    for token in list(core._tokens.values()):
        found.add(TOKEN, f"OpenBao token ({token.display_name}, {token.path})", token.id)
    for mount_path, mount in list(core._db_mounts.items()):
        for conn_name, connection in list(mount.connections.items()):
            found.add(PASSWORD, f"OpenBao {mount_path} connection {conn_name}", connection.password)


def _collect_mysql_group(platform: Platform, found: Secrets) -> None:
    """The MySQL group's account passwords and TLS keys."""
    group = platform.mysql_group
    if group is None:
        return
    for role, account in group.accounts.items():
        found.add(PASSWORD, f"MySQL group account {role}", account.password)
    if group.tls is not None:
        found.add(PRIVATE_KEY, "the MySQL group's CA key", group.tls.ca.key_pem)
        found.add(PRIVATE_KEY, "the MySQL group's TLS key", group.tls.group_pair.key_pem)
        for site, issued in group.tls.sites.items():
            found.add(PRIVATE_KEY, f"the MySQL group's TLS key of {site}", issued.key_pem)


# -- needles ---------------------------------------------------------------------------------


def _aligned_base64(data: bytes) -> set[str]:
    """Base64 fragments of `data` that any base64 text holding it contains, at each alignment."""
    out = {base64.b64encode(data).decode()}
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + data).decode()
        start = (offset * 4 + 2) // 3
        end = (offset + len(data)) // 3 * 4
        if end - start >= MIN_LENGTH:
            out.add(encoded[start:end])
    return out | {n.replace("+", "-").replace("/", "_").rstrip("=") for n in out}


def needles(secret: Secret) -> dict[str, str]:
    """The forms the scan looks for: text to search → the form's name."""
    value = secret.value
    forms: dict[str, str] = {value: "as is"}
    escaped = json.dumps(value)[1:-1]
    if escaped != value:
        forms.setdefault(escaped, "JSON-escaped")
    if "-----BEGIN" in value:
        body = "".join(line for line in value.splitlines() if not line.startswith("-----"))
        forms.setdefault(body, "PEM body")
    for variant in _aligned_base64(value.encode()):
        forms.setdefault(variant, "base64")
    return forms


# -- places ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Place:
    """One text to scan and the name a finding gives it."""

    name: str
    text: str


class StackLike(Protocol):
    """What the scan needs of `tests.e2e.conftest.Stack`."""

    platform: Platform
    prefix: str
    logs: Path
    procs: dict[str, subprocess.Popen[bytes]]
    metrics_ports: dict[str, int]

    def metrics(self, name: str) -> str: ...


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return str(value)


def decoded_bodies(text: str) -> list[str]:
    """The bodies of the kombu messages in a text (a message, or a list holding one), decoded."""
    try:
        parsed = json.loads(text)
    except ValueError:
        return []
    out: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            body = node.get("body")
            encoding = (node.get("properties") or {}).get("body_encoding")
            if isinstance(body, str) and encoding == "base64":
                try:
                    out.append(base64.b64decode(body).decode(errors="replace"))
                except ValueError:
                    out.append(body)
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(parsed)
    return out


def _glob_escape(text: str) -> str:
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in text)


def redis_places(client: redis.Redis, prefix: str) -> list[Place]:
    """Every key and value under the prefix (every type), and any result backend key.

    Each value that holds a kombu message (a queue's entries, `unacked`) gives a second place,
    its body decoded.
    """
    places: list[Place] = []
    names: set[bytes] = set()
    for pattern in (f"{_glob_escape(prefix)}*", "celery-task-meta-*", "celery-taskset-meta-*"):
        names.update(client.scan_iter(match=pattern, count=1000))
    for raw in sorted(names):
        key = _text(raw)
        kind = _text(client.type(raw))
        for where, text in [("key name", key), *_redis_entries(client, raw, kind)]:
            places.append(Place(f"Redis {kind} {key} {where}", text))
            for number, body in enumerate(decoded_bodies(text)):
                places.append(Place(f"Redis {kind} {key} {where} (message body {number})", body))
    return places


def _redis_entries(client: redis.Redis, raw: bytes, kind: str) -> list[tuple[str, str]]:
    """The entries of one key's value: (where in the value, text)."""
    if kind == "string":
        return [("value", _text(client.get(raw) or b""))]
    if kind == "hash":
        fields: dict[Any, Any] = client.hgetall(raw)
        named = [(f"field name {i}", _text(k)) for i, k in enumerate(fields)]
        return named + [(f"field {_text(k)}", _text(v)) for k, v in fields.items()]
    if kind == "list":
        values: list[Any] = client.lrange(raw, 0, -1)
        return [(f"entry {i}", _text(v)) for i, v in enumerate(values)]
    if kind == "set":
        members: set[Any] = client.smembers(raw)
        return [(f"member {i}", _text(v)) for i, v in enumerate(sorted(members))]
    if kind == "zset":
        scored: list[Any] = client.zrange(raw, 0, -1, withscores=True)
        return [(f"member {i}", f"{_text(v)} {score}") for i, (v, score) in enumerate(scored)]
    if kind == "stream":
        stream: list[Any] = client.xrange(raw) or []
        return [
            (f"entry {_text(i)}", " ".join(f"{_text(k)}={_text(v)}" for k, v in f.items()))
            for i, f in stream
        ]
    return []


def log_places(logs: Path) -> list[Place]:
    """Every log file of the stack's processes."""
    return [
        Place(f"log {path.name}", path.read_text(errors="replace"))
        for path in sorted(logs.glob("*.log"))
    ]


def metrics_places(stack: StackLike) -> tuple[list[Place], list[str]]:
    """The /metrics page of each running process; and the processes whose page did not answer."""
    places: list[Place] = []
    missed: list[str] = []
    for name, proc in sorted(stack.procs.items()):
        if proc.poll() is not None or name not in stack.metrics_ports:
            continue
        try:
            places.append(Place(f"metrics of {name}", stack.metrics(name)))
        except (OSError, urllib.error.URLError):
            missed.append(f"metrics of {name}")
    return places, missed


def order_places(platform: Platform) -> list[Place]:
    """The status of every order of every served kind, and every Event, on every cluster."""
    places: list[Place] = []
    for cluster_name, endpoint in platform.endpoints.items():
        cluster = endpoint.client
        for served in KINDS:
            identity = served.identity
            try:
                orders = cluster.list(f"{identity.plural}.{identity.group}")
            except Exception:  # noqa: S112 - a kind this cluster does not serve
                continue
            for order in orders:
                meta = order.get("metadata") or {}
                where = f"{identity.kind} {meta.get('namespace')}/{meta.get('name')}@{cluster_name}"
                status = json.dumps(order.get("status") or {}, sort_keys=True)
                places.append(Place(f"status of {where}", status))
        for event in cluster.list("events"):
            meta = event.get("metadata") or {}
            where = f"{meta.get('namespace')}/{meta.get('name')}@{cluster_name}"
            places.append(Place(f"Event {where}", json.dumps(event, sort_keys=True)))
    return places


def live_places(stack: StackLike) -> tuple[list[Place], list[str]]:
    """The places that need the processes and the platform up: metrics, orders, Events."""
    places, missed = metrics_places(stack)
    return places + order_places(stack.platform), missed


def stored_places(stack: StackLike, client: redis.Redis) -> list[Place]:
    """The places that stay after the processes stop: Redis and the log files."""
    return redis_places(client, stack.prefix) + log_places(stack.logs)


# -- scanning --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    """A secret found in a place: where (with the line), its class, origin and form."""

    place: str
    kind: str
    origin: str
    form: str

    def __str__(self) -> str:
        return f"{self.place}: a {self.kind} ({self.origin}), {self.form}"


def scan(secrets: Iterable[Secret], places: Iterable[Place]) -> list[Finding]:
    """Look for every secret, in every form (see `needles`), in every place."""
    listed = list(places)
    starts: list[int] = []
    chunks: list[str] = []
    offset = 0
    for place in listed:
        starts.append(offset)
        chunks.append(place.text)
        offset += len(place.text) + 1
    whole = "\0".join(chunks)
    found: dict[tuple[str, str, str], Finding] = {}
    for secret in secrets:
        for needle, form in needles(secret).items():
            at = whole.find(needle)
            while at >= 0:
                index = bisect.bisect_right(starts, at) - 1
                place = listed[index]
                local = at - starts[index]
                where = place.name
                if "\n" in place.text:
                    where += f" line {place.text.count(chr(10), 0, local) + 1}"
                key = (where, secret.origin, secret.kind)
                found.setdefault(key, Finding(where, secret.kind, secret.origin, form))
                at = whole.find(needle, at + 1)
    return sorted(found.values(), key=lambda f: (f.place, f.kind, f.origin))


def describe(findings: list[Finding], secrets: Secrets, missed: Iterable[str] = ()) -> str:
    """A readable report of the findings (never a secret)."""
    counts = secrets.counts()
    lines = [
        f"secret-leak scan: {len(findings)} finding(s) for"
        f" {', '.join(f'{counts[c]} {c}s' for c in CLASSES)}:"
    ]
    lines += [f"  - {finding}" for finding in findings]
    skipped = list(missed)
    if skipped:
        lines.append(f"  (not scanned: {', '.join(skipped)})")
    return "\n".join(lines)
