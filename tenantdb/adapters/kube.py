"""Kubernetes through the official client: one client per cluster, typed errors, one write path.

Every object tenantdb writes goes through server-side apply with the field manager ``tenantdb``
and ``force``, so tenantdb owns exactly the fields it applies: a field somebody else edits is
taken back, a field another manager adds stays, and a field tenantdb stops applying is removed.
Status goes through the ``/status`` subresource. Finalizers are changed with a merge patch that
carries the object's resourceVersion, so a concurrent change turns into a ``ConflictError``
instead of a lost update.

Requests are built from a small table of resources (``Resource``) and sent through the client's
``ApiClient.call_api``, one code path for built-in kinds and custom resources alike; responses
are plain dicts.

This module never decides anything about an order, and never puts an object's body in a log
line or an exception message: errors carry the cluster, the verb, the object's name and the
server's own message.
"""

from __future__ import annotations

import contextlib
import json
import socket
import weakref
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, cast

import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config import kube_config as kube_config_loader

from tenantdb.adapters import memfiles
from tenantdb.adapters.errors import SafeError
from tenantdb.adapters.useragent import user_agent
from tenantdb.core.kinds import KindIdentity, registered_identities

FIELD_MANAGER = "tenantdb"
APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"

Object = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Resource:
    """Where a kind is served: group, version, plural, and whether it is namespaced."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        """The apiVersion objects of this kind carry."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        """The REST path of the collection, or of one object when ``name`` is given."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace is not None:
            base = f"{base}/namespaces/{namespace}"
        base = f"{base}/{self.plural}"
        return f"{base}/{name}" if name is not None else base


SECRET = Resource("", "v1", "secrets", "Secret")
CONFIG_MAP = Resource("", "v1", "configmaps", "ConfigMap")
SERVICE_ACCOUNT = Resource("", "v1", "serviceaccounts", "ServiceAccount")
NAMESPACE = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
LEASE = Resource("coordination.k8s.io", "v1", "leases", "Lease")
EVENT = Resource("", "v1", "events", "Event")
CUSTOM_RESOURCE_DEFINITION = Resource(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    namespaced=False,
)

KNOWN_RESOURCES: tuple[Resource, ...] = (
    SECRET,
    CONFIG_MAP,
    SERVICE_ACCOUNT,
    NAMESPACE,
    LEASE,
    EVENT,
    CUSTOM_RESOURCE_DEFINITION,
)
"""The resources every role may meet; each kind registers its own (``register_resources``)."""

_BY_KIND = {(r.api_version, r.kind): r for r in KNOWN_RESOURCES}


def register_resources(*resources: Resource) -> tuple[Resource, ...]:
    """Make the resources a kind reads and writes known to ``resource_for``; returns them.

    A kind's adapter registers its children and the objects it reads when it is imported.
    """
    for resource in resources:
        _BY_KIND[(resource.api_version, resource.kind)] = resource
    return resources


def resource_of(identity: KindIdentity) -> Resource:
    """Where an order kind is served."""
    return Resource(identity.group, identity.version, identity.plural, identity.kind)


def resource_for(body: Mapping[str, Any]) -> Resource:
    """The resource of an object body, from its apiVersion and kind (order kinds included)."""
    api_version, kind = str(body.get("apiVersion")), str(body.get("kind"))
    found = _BY_KIND.get((api_version, kind))
    if found is not None:
        return found
    order = next(
        (i for i in registered_identities() if (i.api_version, i.kind) == (api_version, kind)),
        None,
    )
    if order is not None:
        return resource_of(order)
    raise ValueError(f"no resource is known for apiVersion {api_version!r} kind {kind!r}")


# -- errors ----------------------------------------------------------------------------------------


class KubeError(SafeError):
    """A request to a cluster failed. The message names the cluster, the verb and the object."""

    def __init__(self, cluster: str, verb: str, what: str, status: int, message: str) -> None:
        label = cluster or "management"
        super().__init__(f"{verb} {what} on cluster {label}: {message}")
        self.cluster = cluster
        self.status = status
        self.server_message = message


class NotFoundError(KubeError):
    """The object does not exist."""


class KindNotServedError(KubeError):
    """The cluster does not serve the kind (its CRD is not installed)."""


class ConflictError(KubeError):
    """The object exists already, changed since it was read, or has a field owned by another."""


class ForbiddenError(KubeError):
    """tenantdb's identity may not do this."""


class InvalidError(KubeError):
    """The server rejected the object (422), with the server's causes in the message."""


class UnavailableError(KubeError):
    """The cluster did not answer, or answered with a server error; worth retrying."""


def _classify(exc: ApiException, cluster: str, verb: str, what: str) -> KubeError:
    status = int(exc.status or 0)
    body: dict[str, Any] = {}
    try:
        parsed = json.loads(exc.body) if exc.body else {}
        body = parsed if isinstance(parsed, dict) else {}
    except (TypeError, ValueError):
        body = {}
    message = str(body.get("message") or exc.reason or f"HTTP {status}")
    kinds: dict[int, type[KubeError]] = {
        403: ForbiddenError,
        409: ConflictError,
        422: InvalidError,
    }
    if status == 404:
        # A missing object names itself in the Status details; a missing resource type does not.
        details = body.get("details") or {}
        kind: type[KubeError] = NotFoundError if details.get("name") else KindNotServedError
    elif status in kinds:
        kind = kinds[status]
    elif status == 0 or status >= 500 or status == 429:
        kind = UnavailableError
    else:
        kind = KubeError
    return kind(cluster, verb, what, status, message)


# -- the client ------------------------------------------------------------------------------------


class KubeClient:
    """The requests tenantdb makes to one cluster."""

    def __init__(self, api: k8s.ApiClient, cluster: str = "", timeout: float = 30.0) -> None:
        """Wrap an ``ApiClient`` of one cluster; ``cluster`` is "" for the management cluster."""
        self.api = api
        # The User-Agent goes with each request (it names the pass being served); the client's
        # default headers would override it.
        api.default_headers.pop("User-Agent", None)
        self.cluster = cluster
        self.timeout = timeout

    def _call(
        self,
        verb: str,
        what: str,
        method: str,
        path: str,
        *,
        query: list[tuple[str, Any]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Object:
        headers = {
            "Accept": "application/json",
            "Content-Type": content_type,
            "User-Agent": user_agent(),
        }
        try:
            result = self.api.call_api(
                path,
                method,
                query_params=query or [],
                header_params=headers,
                body=body,
                response_types_map={200: "object", 201: "object", 202: "object"},
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
                _preload_content=True,
                _request_timeout=self.timeout,
            )
        except ApiException as exc:
            raise _classify(exc, self.cluster, verb, what) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise UnavailableError(
                self.cluster, verb, what, 0, f"no answer ({type(exc).__name__})"
            ) from None
        return cast(Object, result or {})

    @staticmethod
    def _what(resource: Resource, namespace: str | None, name: str | None) -> str:
        where = f"{namespace}/" if namespace and resource.namespaced else ""
        return f"{resource.plural}.{resource.group or 'core'} {where}{name or ''}".rstrip()

    def get(self, resource: Resource, namespace: str | None, name: str) -> Object:
        """Read one object. Raises ``NotFoundError`` when it is absent."""
        return self._call(
            "get",
            self._what(resource, namespace, name),
            "GET",
            resource.path(namespace, name),
        )

    def get_or_none(self, resource: Resource, namespace: str | None, name: str) -> Object | None:
        """Read one object, or None when it is absent."""
        try:
            return self.get(resource, namespace, name)
        except NotFoundError:
            return None

    def list_objects(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        page: int = 500,
    ) -> list[Object]:
        """List objects, page by page, across all namespaces when ``namespace`` is None."""
        return list(self.iter_list(resource, namespace, label_selector=label_selector, page=page))

    def iter_list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        page: int = 500,
    ) -> Iterator[Object]:
        """Yield listed objects, fetching ``page`` at a time."""
        token: str | None = None
        while True:
            query: list[tuple[str, Any]] = [("limit", page)]
            if label_selector:
                query.append(("labelSelector", label_selector))
            if token:
                query.append(("continue", token))
            result = self._call(
                "list",
                self._what(resource, namespace, None),
                "GET",
                resource.path(namespace),
                query=query,
            )
            for item in result.get("items") or []:
                item.setdefault("apiVersion", resource.api_version)
                item.setdefault("kind", resource.kind)
                yield item
            token = (result.get("metadata") or {}).get("continue") or None
            if not token:
                return

    def list_with_version(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page: int = 500,
    ) -> tuple[list[Object], str]:
        """List objects page by page; return them and the resourceVersion to watch from.

        The first page's resourceVersion is the list's snapshot; a watch from it replays anything
        that changed while later pages were read, so nothing falls between the list and the watch.

        Raises:
            GoneError: a continue token outlived the server's history; list again from the start.
        """
        items: list[Object] = []
        version = ""
        token: str | None = None
        what = self._what(resource, namespace, None)
        while True:
            query: list[tuple[str, Any]] = [("limit", page)]
            if label_selector:
                query.append(("labelSelector", label_selector))
            if field_selector:
                query.append(("fieldSelector", field_selector))
            if token:
                query.append(("continue", token))
            try:
                result = self._call("list", what, "GET", resource.path(namespace), query=query)
            except KubeError as exc:
                if exc.status == 410:
                    raise GoneError(exc.cluster, "list", what, 410, exc.server_message) from None
                raise
            for item in result.get("items") or []:
                item.setdefault("apiVersion", resource.api_version)
                item.setdefault("kind", resource.kind)
                items.append(item)
            meta = result.get("metadata") or {}
            version = version or str(meta.get("resourceVersion") or "")
            token = meta.get("continue") or None
            if not token:
                return items, version

    def watch(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        resource_version: str,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
        connect_timeout: float = 10.0,
        read_timeout: float = 90.0,
    ) -> WatchStream:
        """Open a watch with bookmarks from ``resource_version``.

        Args:
            resource: the kind to watch.
            namespace: one namespace, or None for all.
            resource_version: where to start; events after it are sent.
            label_selector: only objects it selects (an object that stops matching is DELETED).
            field_selector: only objects whose fields it selects (e.g. ``metadata.name=x``).
            timeout_seconds: the server ends the stream after this long.
            connect_timeout: seconds to connect.
            read_timeout: seconds without a byte after which the stream counts as dead; longer
                than the server's bookmark interval, so a healthy idle stream never trips it.

        Raises:
            GoneError: the resourceVersion is too old (HTTP 410).
            KindNotServedError: the cluster does not serve the kind.
            UnavailableError: the cluster did not answer.
        """
        what = self._what(resource, namespace, None)
        query: list[tuple[str, Any]] = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", timeout_seconds),
            ("resourceVersion", resource_version),
        ]
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        try:
            response = self.api.call_api(
                resource.path(namespace),
                "GET",
                query_params=query,
                header_params={"Accept": "application/json", "User-Agent": user_agent()},
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
                _preload_content=False,
                _request_timeout=(connect_timeout, read_timeout),
            )
        except ApiException as exc:
            error = _classify(exc, self.cluster, "watch", what)
            if error.status == 410:
                raise GoneError(self.cluster, "watch", what, 410, error.server_message) from None
            raise error from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise UnavailableError(
                self.cluster, "watch", what, 0, f"no answer ({type(exc).__name__})"
            ) from None
        return WatchStream(response, self.cluster, what)

    def apply(self, body: Object, *, status: bool = False, dry_run: bool = False) -> Object:
        """Server-side apply ``body`` as tenantdb, forcing ownership of every field it sets.

        Args:
            body: the whole intent: apiVersion, kind, metadata.name (and namespace), the fields.
            status: apply to the ``/status`` subresource.
            dry_run: ask the server to validate without persisting.
        """
        resource = resource_for(body)
        meta = body.get("metadata") or {}
        namespace, name = meta.get("namespace"), str(meta.get("name"))
        path = resource.path(namespace, name) + ("/status" if status else "")
        query: list[tuple[str, Any]] = [("fieldManager", FIELD_MANAGER), ("force", "true")]
        if dry_run:
            query.append(("dryRun", "All"))
        verb = "apply status of" if status else "apply"
        return self._call(
            verb,
            self._what(resource, namespace, name),
            "PATCH",
            path,
            query=query,
            body=body,
            content_type=APPLY_PATCH,
        )

    def patch(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        patch: Any,
        *,
        content_type: str = MERGE_PATCH,
        status: bool = False,
    ) -> Object:
        """Patch one object (or its ``/status``) with a merge patch or another patch type."""
        return self._call(
            "patch status of" if status else "patch",
            self._what(resource, namespace, name),
            "PATCH",
            resource.path(namespace, name) + ("/status" if status else ""),
            query=[("fieldManager", FIELD_MANAGER)],
            body=patch,
            content_type=content_type,
        )

    def write_status(
        self,
        resource: Resource,
        read: Object,
        compute: Callable[[Mapping[str, Any]], Mapping[str, Any]],
        check: Callable[[], None],
    ) -> Object:
        """Patch an object's status, guarded by the resourceVersion it was read at.

        A status patch without it could land after a newer pass's: a pass that lost its lease
        between its last check and its write would overwrite what the next pass wrote. With it, a
        conflict means the object changed since the read; it is read again, ``check`` confirms the
        caller still holds its lease (so no newer pass has written since), and ``compute`` turns
        the status read into the patch once more. Returns the object as written, or as read again
        when there is nothing left to write.

        Args:
            resource: the object's kind.
            read: the object as the caller read it.
            compute: the status patch to send over a status as stored; empty when none is needed.
            check: raises when the caller's lease is gone.

        Raises:
            ConflictError: the object changed again between the second read and its write.
        """
        meta = read.get("metadata") or {}
        namespace, name = meta.get("namespace"), str(meta.get("name", ""))

        def send(stored: Object) -> Object:
            patch = compute(stored.get("status") or {})
            if not patch:
                return stored
            version = (stored.get("metadata") or {})["resourceVersion"]
            body = {"metadata": {"resourceVersion": version}, "status": dict(patch)}
            return self.patch(resource, namespace, name, body, status=True)

        try:
            return send(read)
        except ConflictError:
            again = self.get(resource, namespace, name)
            check()
            return send(again)

    def create(self, body: Object) -> Object:
        """Create an object; ``ConflictError`` when one of that name exists."""
        resource = resource_for(body)
        meta = body.get("metadata") or {}
        namespace = meta.get("namespace")
        return self._call(
            "create",
            self._what(resource, namespace, str(meta.get("name"))),
            "POST",
            resource.path(namespace),
            query=[("fieldManager", FIELD_MANAGER)],
            body=body,
        )

    def set_finalizers(self, obj: Object, finalizers: list[str]) -> Object:
        """Replace the finalizers; ``ConflictError`` when the object changed since it was read."""
        resource = resource_for(obj)
        meta = obj["metadata"]
        patch = {"metadata": {"finalizers": finalizers, "resourceVersion": meta["resourceVersion"]}}
        return self.patch(resource, meta.get("namespace"), meta["name"], patch)

    def delete(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        *,
        propagation: str = "Background",
        uid: str = "",
    ) -> bool:
        """Delete one object; return False when it was already absent.

        With ``uid`` only that object is deleted: one of another uid under the name (made since
        the caller read it) is left, and counts as absent.
        """
        body: dict[str, Any] = {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "propagationPolicy": propagation,
        }
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            self._call(
                "delete",
                self._what(resource, namespace, name),
                "DELETE",
                resource.path(namespace, name),
                body=body,
            )
        except NotFoundError:
            return False
        except ConflictError:
            if not uid:
                raise
            return False  # the object meant is gone; another bears its name now
        return True


def client_from_kubeconfig(path: str, context: str, cluster: str) -> KubeClient:
    """A client for one context of a kubeconfig file, with a configuration of its own.

    Key material the kubeconfig carries inline is held in memory, not in temporary files that a
    killed process would leave behind (``tenantdb.adapters.memfiles``).
    """
    configuration = k8s.Configuration()
    k8s_config.load_kube_config(
        config_file=path, context=context, client_configuration=configuration, persist_config=False
    )
    held = _hold_key_material(configuration)
    api = k8s.ApiClient(configuration)
    for file in held:
        weakref.finalize(api, file.close)  # the files live exactly as long as the client
    return KubeClient(api, cluster)


def _hold_key_material(configuration: k8s.Configuration) -> list[memfiles.MemoryFile]:
    if not memfiles.SUPPORTED:
        return []
    held = []
    written = kube_config_loader._temp_files  # what the loader wrote from inline *-data fields
    by_path = {name: content for content, name in written.items()}
    for attribute in ("key_file", "cert_file", "ssl_ca_cert"):
        path = getattr(configuration, attribute, None)
        if not path or path not in by_path:
            continue
        file = memfiles.hold_in_memory(path, f"tenantdb-{attribute}")
        held.append(file)
        # The loader hands a cached path out again for the same content: forget the file.
        del written[by_path[path]]
        setattr(configuration, attribute, file.path)
    return held


def in_cluster_client() -> KubeClient:
    """A client for the management cluster from the pod's ServiceAccount."""
    configuration = k8s.Configuration()
    k8s_config.load_incluster_config(client_configuration=configuration)
    api = k8s.ApiClient(configuration)
    return KubeClient(api, "")


def kubeconfig_contexts(path: str) -> list[str]:
    """The context names of a kubeconfig file."""
    contexts, _ = k8s_config.list_kube_config_contexts(config_file=path)
    return [str(c["name"]) for c in contexts]


# -- list-then-watch -------------------------------------------------------------------------------


class GoneError(KubeError):
    """The resourceVersion is older than the server's history (410): list again, then watch."""


class WatchTimeoutError(UnavailableError):
    """A watch stream sent nothing, not even a bookmark, within the client's read timeout."""


WATCH_EVENT_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK"})


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One event of a watch stream: its type, the raw object, and the object's resourceVersion."""

    type: str
    obj: Object
    resource_version: str


class WatchStream:
    """An open watch response, read line by line; ``close`` may be called from another thread."""

    def __init__(self, response: Any, cluster: str, what: str) -> None:
        """Wrap an unread streaming response of a ``watch=true`` request."""
        self._response = response
        self._cluster = cluster
        self._what = what
        self._closed = False

    def __iter__(self) -> Iterator[WatchEvent]:
        """Yield events until the server ends the stream (see ``events``)."""
        return self.events()

    def events(self) -> Generator[WatchEvent, None, None]:
        """Yield events until the server ends the stream; closing the generator releases it.

        Raises:
            GoneError: the server answered an ERROR event with code 410.
            WatchTimeoutError: nothing arrived within the read timeout.
            UnavailableError: the connection broke or the server sent an error or garbage.
        """
        from kubernetes.watch.watch import iter_resp_lines

        try:
            for line in iter_resp_lines(self._response):
                if not line:
                    continue
                event = self._parse(line)
                if event is not None:
                    yield event
        except urllib3.exceptions.ReadTimeoutError:
            if not self._closed:
                raise WatchTimeoutError(
                    self._cluster, "watch", self._what, 0, "no event within the read timeout"
                ) from None
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            if not self._closed:
                raise UnavailableError(
                    self._cluster, "watch", self._what, 0, f"stream broke ({type(exc).__name__})"
                ) from None
        finally:
            self._release()

    def _parse(self, line: str) -> WatchEvent | None:
        try:
            event = json.loads(line)
        except ValueError:
            raise UnavailableError(
                self._cluster, "watch", self._what, 0, "unreadable event in the stream"
            ) from None
        kind = str(event.get("type", "")) if isinstance(event, dict) else ""
        obj = event.get("object") if isinstance(event, dict) else None
        obj = obj if isinstance(obj, dict) else {}
        if kind == "ERROR":
            code = int(obj.get("code") or 0)
            message = str(obj.get("message") or f"HTTP {code}")
            error = GoneError if code == 410 else UnavailableError if code >= 500 else KubeError
            raise error(self._cluster, "watch", self._what, code, message)
        if kind not in WATCH_EVENT_TYPES:
            return None
        rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        return WatchEvent(kind, obj, rv)

    def close(self) -> None:
        """End the stream; a reader blocked in the socket returns at once."""
        self._closed = True
        connection = getattr(self._response, "connection", None)
        sock = getattr(connection, "sock", None)
        if sock is not None:
            # Shutting the socket down wakes a thread blocked in recv (an SSL read holds locks
            # that close() would wait for); the reader then releases the response itself.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _release(self) -> None:
        with contextlib.suppress(Exception):
            self._response.close()
            self._response.release_conn()

    def __enter__(self) -> WatchStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
        self._release()
