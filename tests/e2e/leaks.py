"""The secret-leak scan of the e2e suite: no issued secret in any place tenantdb writes or serves.

Collecting. A `Recorder` is started before a test gets its platform; while it runs it records
what the platform hands out, so that a secret rotated, revoked or deleted before the scan is
still looked for, and `collect` adds what the platform holds when the scan runs. The sources:

- Secrets, on every cluster: from the moment the platform is lent to the test
  (`Recorder.watch`), the recorder lists and
  then watches Secrets through each cluster's context of the platform's admin `kubeconfig`, so
  it sees every version of every Secret any writer stores, deleted ones included: the Secrets
  tenantdb delivers to the tenant namespaces, the ones ESO writes from OpenBao (the dynamic
  database passwords), the ones cert-manager writes (each certificate's `tls.key`, and the
  temporary next-private-key Secrets it deletes once a certificate is issued), the MySQL
  group's credential Secrets in `bloodraven`, the owner Secrets of MysqlDatabase orders (a
  rotated one's earlier versions too). `collect` lists every Secret of every cluster again. A
  Secret's value counts when its key is password-, token- or key-like (`secret_class`).
- OpenBao: its root token, and its raw file audit device (`audit-raw.log`, `log_raw = "true"`,
  declared in the server's configuration before its first start, see `devstack.upstream`),
  which holds every request and response unhashed since then: each token a response handed out
  (`auth.client_token`: the logins of ESO and of tenantdb's worker, revoked and expired ones
  included), each token a request presented, each password a response returned (the dynamic
  database credentials of the `creds` reads), and what requests sent in: the engine
  connection's root password (the MariaDB root password, often empty), the token reviewer's JWT
  and the ServiceAccount JWT of every Kubernetes login.
- ServiceAccount tokens: those the test process requests while recording
  (`RemoteCluster.token_request`: the platform's start, a test's own), the tokens of every
  kubeconfig under the platform's state directory (tenantdb's worker and watcher, on each
  cluster), its `*.token` files (the worker's token of OpenBao's audience, OpenBao's root
  token), and the JWTs presented to OpenBao (above).
- private keys: each key the devstack CA signs a certificate for and each CA key generated while
  recording (`CertificateAuthority.sign` and `generate`), the devstack CA's key, the MySQL
  group's TLS keys, every `*.key` file under the state directory (the API servers' serving and
  admin keys, each cluster's service-account signing key, OpenBao's listener and admin client
  keys, the CA's key file cert-manager's onboarding reads, OpenBao's unseal key), the
  `client-key-data` of every kubeconfig there, and key-like Secret values.
- passwords, besides the above: the state directory's `*.password` files, the MariaDB root
  password and the MySQL group's account passwords.

What a real platform does not let the recorder see:

- A ServiceAccount token a kube-apiserver issues to another process (ESO's TokenRequests for
  `order-db-creds`, `kubectl create token` in OpenBao's onboarding) stays with that process: the
  API server keeps no issued token, and its audit log (level Metadata) holds no request or
  response body. Such a token is looked for once it has been presented to OpenBao (a login's
  `jwt`, the reviewer's `token_reviewer_jwt`); one never presented there is not.
- The key of the CA `devstack.realkube` generates for the API servers' certificates is kept
  nowhere: it is recorded only when the platform starts while a recorder runs (a private
  platform, or a shared one started for the test), not for a platform started earlier.
- The keys cert-manager generates are not signed by `CertificateAuthority.sign`: they are known
  from the Secrets alone (the watch sees the temporary ones too).
- A Secret written and deleted before the platform was lent to the test is not seen; the places
  scanned (the test's own Redis key prefix, logs and processes) came after it.

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
import os
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
import yaml

from devstack.ca import CertificateAuthority, Issued
from devstack.kubeclient import RemoteCluster
from devstack.platform import Platform
from devstack.upstream import RealOpenBao
from tenantdb.adapters.kube import (
    SECRET,
    GoneError,
    KubeClient,
    WatchStream,
    client_from_kubeconfig,
)
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


# -- recording what the platform hands out ---------------------------------------------------


class Recorder:
    """Records the secrets a platform hands out while it is started (a context manager).

    While any recorder runs, these are wrapped for the whole process:
    `CertificateAuthority.sign` and `generate` (the keys the devstack CA signs, the CAs
    generated), `RemoteCluster.token_request` (the ServiceAccount tokens the test process asks
    any API server for). `watch` starts recording a platform's Secrets once the test has it.
    Several recorders may run at once; each watches for itself. `collect` refuses a recorder
    that has not watched the platform it is asked about.
    """

    _active: ClassVar[list[Recorder]] = []
    _originals: ClassVar[dict[tuple[type, str], Any]] = {}
    _guard = threading.Lock()

    def __init__(self) -> None:
        self.secrets = Secrets()
        """What the wrapped calls handed out."""
        self.stored = Secrets()
        """The secret values of every version of every Secret the watches saw."""
        self._watches: dict[int, list[_SecretWatch]] = {}
        self._failures: dict[int, str] = {}
        self._lock = threading.Lock()

    def start(self) -> Recorder:
        with Recorder._guard:
            if not Recorder._active:
                _install()
            Recorder._active.append(self)
        return self

    def stop(self) -> None:
        """Stop recording: unwrap (when no other recorder runs) and end every watch."""
        with Recorder._guard:
            if self in Recorder._active:
                Recorder._active.remove(self)
            if not Recorder._active:
                _uninstall()
        with self._lock:
            watches = [w for group in self._watches.values() for w in group]
        for watch in watches:
            watch.stop()

    def watch(self, platform: Platform) -> None:
        """Record every Secret of every cluster of the platform from now on: each cluster's
        Secrets are listed before this returns, then watched from that list's version (once per
        platform; a failure is kept for `collect` to report)."""
        with self._lock:
            if id(platform) in self._watches:
                return
            self._watches[id(platform)] = []
        try:
            for name in platform.names:
                client = client_from_kubeconfig(str(platform.kubeconfig_path), name, name)
                watch = _SecretWatch(name, client, self.stored)
                with self._lock:
                    self._watches[id(platform)].append(watch)
                watch.start()
        except Exception as exc:  # told by `collect`: recording must never break the platform
            with self._lock:
                self._failures[id(platform)] = f"{type(exc).__name__}: {exc}"

    def watching(self, platform: Platform) -> str | None:
        """Why the recorder has not recorded the platform's Secrets since it was lent to the
        test (None: it has)."""
        with self._lock:
            if id(platform) not in self._watches:
                return "the recorder never watched the platform's Secrets"
            return self._failures.get(id(platform))

    def __enter__(self) -> Recorder:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class _SecretWatch:
    """The Secrets of one cluster: listed, then watched from the list's version, every version
    of every Secret added to `found` (relisted when the version is gone)."""

    def __init__(self, cluster: str, client: KubeClient, found: Secrets) -> None:
        self.cluster = cluster
        self.client = client
        self.found = found
        self._version = ""
        self._stream: WatchStream | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._follow, name=f"leak-recorder-{cluster}", daemon=True
        )

    def start(self) -> None:
        """List the Secrets now; watch them on a thread of its own from then on."""
        self._list()
        self._thread.start()

    def stop(self) -> None:
        """End the watch and wait for its thread."""
        self._stopping.set()
        with self._lock:
            stream = self._stream
        if stream is not None:
            stream.close()
        if self._thread.is_alive():
            self._thread.join(10)
        with contextlib.suppress(Exception):
            self.client.api.rest_client.pool_manager.clear()

    def _list(self) -> None:
        items, self._version = self.client.list_with_version(SECRET)
        for obj in items:
            self.found.add_secret_object(self.cluster, obj)

    def _follow(self) -> None:
        while not self._stopping.is_set():
            try:
                self._watch_once()
            except GoneError:
                self._version = ""
            except Exception:  # an API server restarting or stopped: try again until told
                self._stopping.wait(0.5)

    def _watch_once(self) -> None:
        if not self._version:
            self._list()
        stream = self.client.watch(SECRET, resource_version=self._version, timeout_seconds=60)
        with self._lock:
            self._stream = stream
        try:
            if self._stopping.is_set():
                return
            for event in stream:
                if event.type != "BOOKMARK":
                    self.found.add_secret_object(self.cluster, event.obj)
                self._version = event.resource_version or self._version
        finally:
            with self._lock:
                self._stream = None
            stream.close()


def _record(kind: str, origin: str, value: str | bytes | None) -> None:
    for recorder in list(Recorder._active):
        recorder.secrets.add(kind, origin, value)


def _wrap(owner: type, name: str, after: Callable[[Any, Any, tuple[Any, ...]], None]) -> None:
    original = owner.__dict__[name]
    Recorder._originals[(owner, name)] = original
    function = original.__func__ if isinstance(original, classmethod) else original

    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = function(self, *args, **kwargs)
        with contextlib.suppress(Exception):  # recording must never break the platform
            after(self, result, args)
        return result

    wrapper.__wrapped__ = function  # type: ignore[attr-defined]
    setattr(owner, name, classmethod(wrapper) if isinstance(original, classmethod) else wrapper)


def _install() -> None:
    def signed_key(_: Any, result: Issued, __: tuple[Any, ...]) -> None:
        _record(PRIVATE_KEY, "a key the devstack CA signed a certificate for", result.key_pem)

    def ca_key(_: Any, result: CertificateAuthority, __: tuple[Any, ...]) -> None:
        _record(PRIVATE_KEY, "a CA's key generated while recording", result.key_pem)

    _wrap(CertificateAuthority, "sign", signed_key)
    _wrap(CertificateAuthority, "generate", ca_key)
    _wrap(RemoteCluster, "token_request", _requested_token)


def _requested_token(client: RemoteCluster, result: dict[str, Any], args: tuple[Any, ...]) -> None:
    ns, name = (*args, "?", "?")[:2]
    where = f"ServiceAccount token of {ns}/{name} on {client.name}"
    _record(TOKEN, where, (result.get("status") or {}).get("token"))


def _uninstall() -> None:
    for (owner, name), original in Recorder._originals.items():
        setattr(owner, name, original)
    Recorder._originals.clear()


# -- what the platform holds -----------------------------------------------------------------


def collect(platform: Platform, recorder: Recorder | None = None) -> Secrets:
    """Every secret the platform issued or holds (see the module), while it still runs.

    Raises:
        RuntimeError: The recorder has not watched the platform's Secrets since the test got
            it, so a Secret deleted meanwhile would not be looked for.
    """
    found = Secrets()
    if isinstance(platform.openbao, RealOpenBao):
        openbao_secrets(platform.openbao.root_token, platform.openbao.audit_events(raw=True), found)
    if recorder is not None:
        missing = recorder.watching(platform)
        if missing is not None:
            raise RuntimeError(f"the secret-leak scan cannot trust its record: {missing}")
        found.update(recorder.secrets)
    if platform.ca is not None:
        found.add(PRIVATE_KEY, "the devstack CA's key", platform.ca.key_pem)
    _collect_mysql_group(platform, found)
    found.add(PASSWORD, "the MariaDB root password", platform.mariadb.password)
    state_files(platform.state_dir, found)
    if recorder is not None:
        found.update(recorder.stored)
    for name, endpoint in platform.endpoints.items():
        for obj in endpoint.client.list("secrets"):
            found.add_secret_object(name, obj)
    return found


_OPENBAO_FIELDS = {
    "password": PASSWORD,
    "jwt": TOKEN,
    "token_reviewer_jwt": TOKEN,
    "token": TOKEN,
    "client_token": TOKEN,
    "private_key": PRIVATE_KEY,
}
"""The fields of OpenBao requests' and responses' data that hold a secret."""


def openbao_secrets(root_token: str, events: Iterable[Mapping[str, Any]], found: Secrets) -> None:
    """OpenBao's root token and what its raw audit device's events show (see the module)."""
    found.add(TOKEN, "OpenBao root token", root_token)
    for event in events:
        request = event.get("request") or {}
        path = str(request.get("path", ""))
        if event.get("type") == "response":
            answer = event.get("response") or {}
            auth = answer.get("auth") or {}
            found.add(TOKEN, f"OpenBao token ({path})", auth.get("client_token"))
            wrap = answer.get("wrap_info") or {}
            found.add(TOKEN, f"OpenBao wrapping token ({path})", wrap.get("token"))
            _openbao_fields(found, answer.get("data"), f"returned by {path}")
        else:
            found.add(TOKEN, f"OpenBao token presented to {path}", request.get("client_token"))
            _openbao_fields(found, request.get("data"), f"sent to {path}")


def _openbao_fields(found: Secrets, data: Any, where: str) -> None:
    if not isinstance(data, Mapping):
        return
    for key, value in data.items():
        kind = _OPENBAO_FIELDS.get(str(key))
        if kind is None or not isinstance(value, str):
            continue
        if kind == PASSWORD and "/creds/" in where:
            origin = f"OpenBao dynamic credential {where}"
        elif str(key).endswith("jwt"):
            origin = f"ServiceAccount token {where} ({key})"
        else:
            origin = f"OpenBao {key} {where}"
        found.add(kind, origin, value)


_STATE_FILES = {".key": PRIVATE_KEY, ".token": TOKEN, ".password": PASSWORD}
"""The secret files of a platform's state directory, by the end of their names."""


def state_files(directory: Path, found: Secrets) -> None:
    """The secret files under a platform's state directory (`*.key`, `*.token`, `*.password`)
    and the tokens and client keys of every kubeconfig there."""
    for root, _, names in os.walk(directory):
        for name in sorted(names):
            path = Path(root, name)
            where = path.relative_to(directory)
            try:
                if name.endswith("kubeconfig"):
                    _kubeconfig_secrets(path.read_text(), str(where), found)
                elif path.suffix in _STATE_FILES:
                    found.add(_STATE_FILES[path.suffix], f"state file {where}", path.read_bytes())
            except (OSError, ValueError, yaml.YAMLError):
                continue  # a file going away, or one that is no kubeconfig


def _kubeconfig_secrets(text: str, where: str, found: Secrets) -> None:
    config = yaml.safe_load(text) or {}
    for entry in config.get("users") or []:
        user = entry.get("user") or {}
        name = entry.get("name", "?")
        found.add(TOKEN, f"ServiceAccount token of {name} in {where}", user.get("token"))
        key = user.get("client-key-data")
        if key:
            found.add(PRIVATE_KEY, f"client key of {name} in {where}", base64.b64decode(key))


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
