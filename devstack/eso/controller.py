"""The ExternalSecret controller of the ESO stand-in, for generator-backed ExternalSecrets.

Owns what External Secrets Operator does to the ExternalSecrets tenantdb writes: run each
`dataFrom[].sourceRef.generatorRef` (a `VaultDynamicSecret` in the same namespace), write the
target Secret (data keys from the generator's result; template labels and annotations; an owner
reference to the ExternalSecret under `creationPolicy: Owner`; the `reconcile.external-secrets.io`
markers), and record `status.refreshTime`, `status.syncedResourceVersion`, `status.binding` and a
Ready condition (`SecretSynced`, or False/`SecretSyncedError` with the reason).

A sync runs when the Secret is missing or was edited (its data no longer matches the data-hash
annotation), when the ExternalSecret's generation, labels or annotations changed (so a new
`force-sync` annotation value refreshes at once), and every `refreshInterval` (divided by the
devstack's time scale) under `refreshPolicy: Periodic`, the default. Every sync mints a new
credential; none is ever revoked. The Secret goes with its owner through garbage collection.

It must never put a generated value or a token in a status, an event or a log line. Deliberately
left out: SecretStore-backed `data`/`dataFrom` (refused with SecretSyncedError), the template
engine (`template.data`, `templateFrom`), rewrites, `deletionPolicy` Delete/Merge, sync windows,
events, and the PushSecret and ClusterExternalSecret kinds.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import threading
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from devstack.eso import vault
from devstack.kubeclient import ApiError, KubeApi
from devstack.reconciler import (
    Controller,
    Key,
    Obj,
    condition,
    get_or_none,
    meta,
    now_text,
    owner_keys,
    parse_go_duration,
    parse_time,
)

log = logging.getLogger(__name__)

EXTERNAL_SECRETS = "externalsecrets.external-secrets.io"
GENERATORS = "vaultdynamicsecrets.generators.external-secrets.io"
SECRETS = "secrets"
MANAGER = "external-secrets"
MANAGED_LABEL = "reconcile.external-secrets.io/managed"
DATA_HASH = "reconcile.external-secrets.io/data-hash"
DEFAULT_REFRESH = 3600.0
_RETRY = 2.0
GET_SECRET_DATA_FAILED = "could not get secret data from provider"  # noqa: S105 - a message
"""The Ready condition's message when a generator or provider failed, ESO's wording."""


class SyncError(Exception):
    """A sync failed; the message goes into the Ready condition."""


def _hash(value: object) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def synced_resource_version(es: Obj) -> str:
    """ESO's `<generation>-<hash of labels and annotations>` marker of what was synced."""
    m = meta(es)
    return f"{m.get('generation', 0)}-{_hash([m.get('labels') or {}, m.get('annotations') or {}])}"


def _generator_refs(es: Obj) -> list[Obj]:
    refs = []
    for entry in (es.get("spec") or {}).get("dataFrom") or []:
        ref = (entry.get("sourceRef") or {}).get("generatorRef")
        if ref:
            refs.append(ref)
    return refs


def _generators_used(es: Obj) -> set[str]:
    """The names of the VaultDynamicSecrets an ExternalSecret's `dataFrom` runs."""
    return {
        str(ref.get("name", ""))
        for ref in _generator_refs(es)
        if ref.get("kind") == "VaultDynamicSecret"
    }


class ExternalSecrets:
    """The ExternalSecret controller of one cluster."""

    def __init__(self, cluster: KubeApi, *, time_scale: float = 1.0) -> None:
        """Bind to a cluster; refresh intervals are divided by `time_scale`."""
        self.cluster = cluster
        self.time_scale = time_scale
        # Which ExternalSecrets use which generator, per namespace, kept from the ExternalSecret
        # watch as ESO's informer index is: a generator's event costs the same beside ten
        # ExternalSecrets as beside ten thousand. An entry the watch missed the deletion of only
        # costs a reconcile that finds nothing.
        self._users: dict[tuple[str, str], set[str]] = {}
        self._uses: dict[tuple[str, str], set[str]] = {}
        self._index_lock = threading.Lock()
        self.controller = Controller(f"external-secrets-{cluster.name}", self._reconcile)
        self.controller.watch(cluster, EXTERNAL_SECRETS, self._own_key)
        self.controller.watch(cluster, SECRETS, self._owner_of_secret)
        self.controller.watch(cluster, GENERATORS, self._users_of_generator)

    def start(self) -> None:
        """Start the controller."""
        self.controller.start()

    @property
    def controllers(self) -> tuple[Controller, ...]:
        """The controllers this stand-in runs."""
        return (self.controller,)

    def stop(self) -> None:
        """Stop the controller."""
        self.controller.stop()

    # ------------------------------------------------------------ mapping

    def _own_key(self, event: str, obj: Obj) -> Iterable[Key]:
        m = meta(obj)
        namespace, name = str(m.get("namespace", "")), str(m.get("name", ""))
        self._index(namespace, name, set() if event == "DELETED" else _generators_used(obj))
        return [Key(self.cluster.name, namespace, name)]

    def _index(self, namespace: str, name: str, generators: set[str]) -> None:
        """Record that ExternalSecret ``name`` uses ``generators`` now (none once deleted)."""
        with self._index_lock:
            for gone in self._uses.pop((namespace, name), set()) - generators:
                users = self._users.get((namespace, gone), set())
                users.discard(name)
                if not users:
                    self._users.pop((namespace, gone), None)
            for generator in generators:
                self._users.setdefault((namespace, generator), set()).add(name)
            if generators:
                self._uses[(namespace, name)] = generators

    def _owner_of_secret(self, event: str, obj: Obj) -> Iterable[Key]:
        return owner_keys(self.cluster.name, obj, "ExternalSecret")

    def _users_of_generator(self, event: str, obj: Obj) -> Iterable[Key]:
        m = meta(obj)
        ns = str(m.get("namespace", ""))
        with self._index_lock:
            users = sorted(self._users.get((ns, str(m.get("name", ""))), ()))
        return [Key(self.cluster.name, ns, name) for name in users]

    # ------------------------------------------------------------ reconcile

    def _interval(self, es: Obj) -> float:
        text = (es.get("spec") or {}).get("refreshInterval")
        try:
            return parse_go_duration(str(text)) if text is not None else DEFAULT_REFRESH
        except ValueError:
            return DEFAULT_REFRESH

    def _due_in(self, es: Obj) -> float | None:
        """Seconds until the next periodic refresh; None when there is none."""
        spec = es.get("spec") or {}
        interval = self._interval(es)
        if (spec.get("refreshPolicy") or "Periodic") != "Periodic" or interval <= 0:
            return None
        last = parse_time((es.get("status") or {}).get("refreshTime"))
        if last is None:
            return 0.0
        due = last + timedelta(seconds=interval / self.time_scale)
        return (due - datetime.now(UTC)).total_seconds()

    def _needs_sync(self, es: Obj, secret: Obj | None) -> str | None:
        spec = es.get("spec") or {}
        status = es.get("status") or {}
        policy = spec.get("refreshPolicy") or "Periodic"
        creation = (spec.get("target") or {}).get("creationPolicy") or "Owner"
        if creation in ("Owner", "Orphan") and (secret is None or not _secret_intact(secret)):
            return "the target Secret is missing or was changed"
        if status.get("refreshTime") is None:
            return "never synced"
        if policy == "CreatedOnce":
            return None
        if status.get("syncedResourceVersion") != synced_resource_version(es):
            return "the ExternalSecret changed"
        due = self._due_in(es)
        if due is not None and due <= 0:
            return "refresh interval elapsed"
        return None

    def _reconcile(self, key: Key) -> float | None:
        es = get_or_none(self.cluster, EXTERNAL_SECRETS, key.name, key.namespace)
        if es is None or meta(es).get("deletionTimestamp"):
            return None
        target = str(((es.get("spec") or {}).get("target") or {}).get("name") or key.name)
        secret = get_or_none(self.cluster, SECRETS, target, key.namespace)
        why = self._needs_sync(es, secret)
        if why is None:
            due = self._due_in(es)
            return None if due is None else max(0.05, due)
        started = datetime.now(UTC)
        try:
            data = self._generate(key, es)
        except (SyncError, vault.GeneratorError) as exc:
            # ESO's condition names the step that failed; the cause goes to its log.
            log.warning("ExternalSecret %s/%s: %s", key.namespace, key.name, exc)
            self._record(key, es, ok=False, message=GET_SECRET_DATA_FAILED)
            return _RETRY
        try:
            self._write_secret(key, es, target, secret, data)
        except SyncError as exc:
            self._record(key, es, ok=False, message=str(exc))
            return _RETRY
        log.info("synced ExternalSecret %s/%s (%s)", key.namespace, key.name, why)
        self._record(key, es, ok=True, message="secret synced", refreshed=started, target=target)
        fresh = get_or_none(self.cluster, EXTERNAL_SECRETS, key.name, key.namespace)
        due = self._due_in(fresh) if fresh is not None else None
        return None if due is None else max(0.05, due)

    def _generate(self, key: Key, es: Obj) -> dict[str, str]:
        spec = es.get("spec") or {}
        if spec.get("data") or any(
            not (entry.get("sourceRef") or {}).get("generatorRef")
            for entry in spec.get("dataFrom") or []
        ):
            raise SyncError("the devstack ESO serves only dataFrom[].sourceRef.generatorRef")
        values: dict[str, str] = {}
        for ref in _generator_refs(es):
            if ref.get("kind") != "VaultDynamicSecret":
                raise SyncError(f"generator kind {ref.get('kind')} is not served by the devstack")
            name = str(ref.get("name", ""))
            generator = get_or_none(self.cluster, GENERATORS, name, key.namespace)
            if generator is None:
                raise SyncError(
                    f'error retrieving generator: VaultDynamicSecret "{name}" not found'
                )
            values.update(vault.generate(self.cluster, key.namespace, generator.get("spec") or {}))
        return values

    def _write_secret(
        self, key: Key, es: Obj, target: str, secret: Obj | None, values: dict[str, str]
    ) -> None:
        target_spec = (es.get("spec") or {}).get("target") or {}
        creation = target_spec.get("creationPolicy") or "Owner"
        if creation == "None":
            return
        if creation == "Merge" and secret is None:
            raise SyncError(f'secret "{target}" not found; creationPolicy is Merge')
        es_meta = meta(es)
        if secret is not None and creation == "Owner":
            for ref in meta(secret).get("ownerReferences") or []:
                if ref.get("controller") and ref.get("uid") != es_meta.get("uid"):
                    raise SyncError(
                        f'target "{target}" is owned by another {ref.get("kind", "object")}'
                    )
        data = {k: base64.b64encode(v.encode()).decode("ascii") for k, v in values.items()}
        template = target_spec.get("template") or {}
        template_meta = template.get("metadata") or {}
        body: Obj = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": target,
                "namespace": key.namespace,
                "labels": {**(template_meta.get("labels") or {}), MANAGED_LABEL: "true"},
                "annotations": {**(template_meta.get("annotations") or {}), DATA_HASH: _hash(data)},
            },
            "data": data,
        }
        if secret is None:
            body["type"] = template.get("type") or "Opaque"
        if creation == "Owner":
            body["metadata"]["ownerReferences"] = [
                {
                    "apiVersion": "external-secrets.io/v1",
                    "kind": "ExternalSecret",
                    "name": key.name,
                    "uid": es_meta.get("uid"),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ]
        try:
            self.cluster.apply(SECRETS, body, key.namespace, manager=MANAGER)
        except ApiError as exc:
            raise SyncError(f"could not write the target Secret: {exc.message}") from exc

    def _record(
        self,
        key: Key,
        es: Obj,
        *,
        ok: bool,
        message: str,
        refreshed: datetime | None = None,
        target: str = "",
    ) -> None:
        status = es.get("status") or {}
        previous = status.get("conditions") or []
        reason = "SecretSynced" if ok else "SecretSyncedError"
        ready = condition("Ready", ok, reason, message, previous)
        patch: Obj = {"conditions": [ready]}
        if refreshed is not None:
            patch["refreshTime"] = now_text(refreshed)
            patch["syncedResourceVersion"] = synced_resource_version(es)
            patch["binding"] = {"name": target}
        if not ok and previous == [ready]:
            return
        try:
            self.cluster.patch(
                EXTERNAL_SECRETS,
                key.name,
                {"status": patch},
                key.namespace,
                subresource="status",
                manager=MANAGER,
            )
        except ApiError as exc:
            if exc.code != 404:
                raise


def _secret_intact(secret: Obj) -> bool:
    annotations = meta(secret).get("annotations") or {}
    return annotations.get(DATA_HASH) == _hash(secret.get("data") or {})
