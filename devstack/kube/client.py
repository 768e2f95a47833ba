"""The Python surface of a cluster's API that the stand-in operators and the seed use.

Owns `KubeApi`, the protocol both the in-process `Cluster` and `RemoteCluster` (HTTPS to any API
server) provide: objects by resource name, watches with bookmarks, and ServiceAccount tokens.
Code written against it runs unchanged on the devstack's API server and on a real one.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator
from typing import Any, Protocol

Obj = dict[str, Any]


class KubeApi(Protocol):
    """One cluster's API, by resource name (`secrets`, `mariadbs.k8s.mariadb.com`)."""

    name: str
    watch_window: float
    """Seconds one watch stays open before the caller re-opens it from its last version."""

    def get(self, resource: str, name: str, namespace: str = "") -> Obj:
        """Read one object."""
        ...

    def list(
        self, resource: str, namespace: str | None = None, label_selector: str | None = None
    ) -> builtins.list[Obj]:
        """List objects."""
        ...

    def create(
        self, resource: str, body: Obj, namespace: str = "", manager: str = "devstack"
    ) -> Obj:
        """Create an object."""
        ...

    def apply(
        self,
        resource: str,
        body: Obj,
        namespace: str = "",
        manager: str = "devstack",
        force: bool = True,
    ) -> Obj:
        """Server-side apply an object."""
        ...

    def patch(
        self,
        resource: str,
        name: str,
        patch: Any,
        namespace: str = "",
        *,
        subresource: str = "",
        patch_type: str = "application/merge-patch+json",
        manager: str = "devstack",
    ) -> Obj:
        """Patch an object."""
        ...

    def delete(self, resource: str, name: str, namespace: str = "") -> Obj:
        """Delete an object."""
        ...

    def watch(
        self,
        resource: str,
        namespace: str | None = None,
        resource_version: str | None = None,
        timeout: float | None = None,
        *,
        bookmarks: bool = False,
    ) -> Iterator[tuple[str, Obj]]:
        """Watch a resource."""
        ...

    def token_request(self, ns: str, name: str, body: Any) -> Obj:
        """The TokenRequest subresource of a ServiceAccount."""
        ...

    def issue_token(
        self, ns: str, name: str, audiences: builtins.list[str] | None = None, seconds: int = 3600
    ) -> str:
        """A ServiceAccount token."""
        ...
