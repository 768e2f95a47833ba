"""The devstack's API server answers as the real kube-apiserver does, request by request.

One devstack cluster and one real cluster (kube-apiserver, kube-controller-manager and etcd from
`make kube`, through devstack/realkube.py) serve the same CRDs: the chart's (MariaDBDatabase,
MysqlDatabase) and the devstack's ControlPlane. Every case sends the same HTTP requests to both
servers, on both at once, in a namespace of the same name, and records what comes back: status
codes, bodies (objects, lists and `Status` with its reason, message and details), `Warning`
headers, and the events of watches. The real server is the oracle: the two records must be
equal once normalised, and a failure shows the unified diff (`-` real, `+` devstack).

The cases cover the requests tenantdb, its watcher and the stand-in operators make: get (found,
absent, in a namespace that does not exist, paths no API serves), list with label and field
selectors (and the ones the server refuses), chunked lists and their continue tokens, lists at a
resourceVersion (exact, not older than, from a history that is gone), watches with bookmarks,
from `0`, ending at `timeoutSeconds`, and from a resourceVersion that is too old, server-side
apply (create, a conflict between two managers, forced takeover, managedFields), merge, JSON and
strategic merge patches, the status subresource, conflicts on create and on a stale update,
finalizers and deletion, delete preconditions and collections, core v1 Events, CRDs, RBAC
denials of a ServiceAccount and of an anonymous request, TokenRequest, TokenReview,
SelfSubjectReview, SelfSubjectAccessReview, and the CRD validation errors of bad orders.

Normalised, because two correct servers may differ there (see `conformance.Normaliser`): every
resourceVersion (numbers in messages too), uids (numbered by first appearance, so a uid that
recurs still has to recur), timestamps, JWTs, continue tokens, names made from `generateName`,
the order of managedFields entries (the real server sorts them by the second of the write), the
order of the ADDED events a watch from `0` starts with, and the order of a 422's causes when its
message lists them (the real server validates a custom resource's properties in Go map order,
which changes from one request to the next). A bookmark that only repeats the one before it is
dropped: whether one or two come before a timeout depends on where the real server's one-second
bookmark ticks fall.

Differences that cannot be made equal, and are left out of the comparison:
- The real server's history: the watch cache keeps each resource's events in memory from the
  moment it started watching etcd, and a compaction of etcd does not shorten it. A watch from a
  resourceVersion therefore gets 410 on the real server only when that resourceVersion is older
  than the resource's cache (here: the cache of a CRD created after it), while the devstack's
  history is one window shared by every kind, emptied by `Cluster.set_history`, in which a watch
  is too old only once an event of its own kind after its version has left. Lists at an
  exact resourceVersion and continue tokens expire on the real server once etcd is compacted
  and the cache has noticed (up to 15 s later); `Target.forget` does both.
- Whether and when a bookmark comes. The real server's cache of a kind moves on with no write
  of that kind (etcd's progress notifications, every ten minutes and whenever a consistent read
  of any kind asks for one), and a bookmark at the new resourceVersion follows; a client may not
  count on one either way. Bookmarks are therefore compared by what is promised: none unless
  asked for, none older than the events they follow, and one once the kind has moved on.
- What the kube-controller-manager adds: the real cluster fills every namespace with the
  `default` ServiceAccount and the `kube-root-ca.crt` ConfigMap, which the devstack does not.
  The cases never list ServiceAccounts or ConfigMaps in a namespace.
- A CRD's status right after it was created (the real server establishes it asynchronously).
- Time: the real server's informers and caches (RBAC bindings, ServiceAccounts, the 10 s cache
  of token reviews, garbage collection) catch up asynchronously, so a case waits for them
  (`Target.eventually`) where the devstack is at once; bookmarks are compared as events, not by
  when they come.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import urllib3
import yaml

from devstack import realkube
from devstack.crds import controlplane
from devstack.kube.server import ClusterServer
from tests.integration.conformance import (
    APPLY,
    JSON_PATCH,
    MERGE,
    STRATEGIC,
    Answer,
    Record,
    Target,
    compare,
    continue_rv,
    run_case,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]
CHART_CRDS = sorted((ROOT / "charts" / "tenantdb" / "crds").glob("*.yaml"))
GROUP = "c5c3.io"
ORDERS = "mariadbdatabases"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
GENERATE_PREFIX = "gen-"
ISSUER = realkube.SERVICE_ACCOUNT_ISSUER

Case = Callable[[Target, Record, str], None]
CASES: dict[str, Case] = {}


def case(fn: Case) -> Case:
    """Register a case: it runs on both servers and the records must agree."""
    CASES[fn.__name__.removeprefix("case_")] = fn
    return fn


# ------------------------------------------------------------------------------ paths, bodies


def secrets(ns: str, name: str = "") -> str:
    """The Secrets of a namespace, or one of them."""
    return f"/api/v1/namespaces/{ns}/secrets" + (f"/{name}" if name else "")


def orders(ns: str, name: str = "", sub: str = "") -> str:
    """The MariaDBDatabases of a namespace, one of them, or its subresource."""
    path = f"/apis/{GROUP}/v1alpha1/namespaces/{ns}/{ORDERS}"
    return path + (f"/{name}" if name else "") + (f"/{sub}" if sub else "")


def secret(name: str, labels: dict[str, str] | None = None, **data: str) -> dict[str, Any]:
    """A Secret body with `data` given in plain text."""
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "Secret", "metadata": meta}
    if data:
        body["data"] = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    return body


def order(name: str, control_plane: str = "cp", **spec: Any) -> dict[str, Any]:
    """A MariaDBDatabase body."""
    return {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "MariaDBDatabase",
        "metadata": {"name": name},
        "spec": {"controlPlaneRef": {"name": control_plane}, **spec},
    }


def service_account_token(t: Target, ns: str, name: str, rec: Record | None = None) -> str:
    """Create a ServiceAccount and return a token of it (recording both answers if asked)."""
    created = t.post(f"/api/v1/namespaces/{ns}/serviceaccounts", {"metadata": {"name": name}})
    issued = t.post(f"/api/v1/namespaces/{ns}/serviceaccounts/{name}/token", {"spec": {}})
    if rec is not None:
        rec("create serviceaccount", created)
        rec("token request", issued)
    token: str = issued.body["status"]["token"]
    # The real server resolves a token's ServiceAccount through an informer: wait for it.
    t.eventually(
        lambda: t.post("/apis/authentication.k8s.io/v1/selfsubjectreviews", {}, token=token),
        lambda a: a.code == 201,
    )
    return token


# ------------------------------------------------------------------------------ get


@case
def case_get(t: Target, rec: Record, ns: str) -> None:
    rec("create secret", t.post(secrets(ns), secret("s1", {"app": "a"}, user="u1"), {}))
    rec("get secret", t.get(secrets(ns, "s1")))
    rec("get absent secret", t.get(secrets(ns, "absent")))
    rec("get secret in absent namespace", t.get(secrets("cf-no-such-ns", "s1")))
    rec("list secrets in absent namespace", t.get(secrets("cf-no-such-ns")))
    rec("get absent namespace", t.get("/api/v1/namespaces/cf-no-such-ns"))
    rec("create order", t.post(orders(ns), order("o1")))
    rec("get order", t.get(orders(ns, "o1")))
    rec("get absent order", t.get(orders(ns, "absent")))
    rec("get order in absent namespace", t.get(orders("cf-no-such-ns", "o1")))
    rec("get unknown resource", t.get(f"/apis/{GROUP}/v1alpha1/namespaces/{ns}/nothings/x"))
    rec("get unknown group", t.get(f"/apis/nothing.example/v1/namespaces/{ns}/things/x"))
    rec("get order status", t.get(orders(ns, "o1", "status")))
    rec("create a namespace", t.post("/api/v1/namespaces", {"metadata": {"name": f"{ns}-x"}}))
    rec("get it", t.get(f"/api/v1/namespaces/{ns}-x"))


# ------------------------------------------------------------------------------ list


def _listed(answer: Answer) -> Any:
    """A list answer reduced to what a selector decides: the names, or the error."""
    if answer.code != 200:
        return answer.view()
    body = answer.body
    return {
        "kind": body.get("kind"),
        "apiVersion": body.get("apiVersion"),
        "metadata": body.get("metadata"),
        "names": [
            f"{i['metadata'].get('namespace', '')}/{i['metadata']['name']}" for i in body["items"]
        ],
    }


@case
def case_label_selectors(t: Target, rec: Record, ns: str) -> None:
    for name, labels in (
        ("a1", {"app": "a", "tier": "web"}),
        ("a2", {"app": "a"}),
        ("b1", {"app": "b", "tier": "db"}),
        ("n1", {}),
    ):
        t.post(secrets(ns), secret(name, labels))
    for selector in (
        "app=a",
        "app==a",
        "app!=a",
        "app in (a,b)",
        "app notin (a)",
        "tier",
        "!tier",
        "app=a,tier=web",
        "app in (a),!tier",
        "app in (a",
        "app=a=b",
        "app=(a)",
        "!app=a",
        "app in ()",
        "Bad Key=x",
        "app=" + "x" * 64,
        "a/b/c",
        "-bad",
        "example.com/app=a",
        "Example.com/app",
        "app>x",
        "app>1",
        "app in (a,b",
        "app notin",
        "app,",
        ",app",
        "app = a",
        "app in (a,,b)",
        "app=a!",
        "app=a,,tier",
    ):
        rec(
            f"list labelSelector {selector}",
            _listed(t.get(secrets(ns), {"labelSelector": selector})),
        )
    rec("list all the full list", t.get(secrets(ns), {"labelSelector": "app"}))


@case
def case_field_selectors(t: Target, rec: Record, ns: str) -> None:
    for name in ("f1", "f2"):
        t.post(secrets(ns), secret(name))
    t.post(orders(ns), order("o1"))
    t.post(orders(ns), order("o2"))
    for selector in (
        "metadata.name=f1",
        "metadata.name==f1",
        "metadata.name!=f1",
        f"metadata.namespace={ns}",
        f"metadata.namespace={ns},metadata.name=f2",
        "type=Opaque",
        "metadata.name=f1,metadata.name=f2",
        "spec.foo=bar",
        "metadata.labels=x",
        "metadata.name",
        "metadata.name in (f1)",
    ):
        rec(
            f"secrets fieldSelector {selector}",
            _listed(t.get(secrets(ns), {"fieldSelector": selector})),
        )
    rec(
        "all secrets by namespace field",
        _listed(t.get("/api/v1/secrets", {"fieldSelector": f"metadata.namespace={ns}"})),
    )
    for selector in ("metadata.name=o2", f"metadata.namespace={ns}", "spec.foo=bar", "status.x=1"):
        rec(
            f"orders fieldSelector {selector}",
            _listed(t.get(orders(ns), {"fieldSelector": selector})),
        )
    rec(
        "all orders by namespace field",
        _listed(
            t.get(f"/apis/{GROUP}/v1alpha1/{ORDERS}", {"fieldSelector": f"metadata.namespace={ns}"})
        ),
    )


@case
def case_chunked_list(t: Target, rec: Record, ns: str) -> None:
    for i in range(5):
        t.post(orders(ns), order(f"o{i}"))
    first = rec("first page", t.get(orders(ns), {"limit": "2"}))
    token = str(first.meta.get("continue", ""))
    rec("the token carries the list's resourceVersion", continue_rv(token) == first.rv)
    t.post(orders(ns), order("o9"))
    t.request("DELETE", orders(ns, "o3"))
    second = rec("second page", t.get(orders(ns), {"limit": "2", "continue": token}))
    rec("pages share the resourceVersion", second.rv == first.rv)
    third = rec(
        "last page", t.get(orders(ns), {"limit": "2", "continue": str(second.meta.get("continue"))})
    )
    rec("last page too", third.rv == first.rv)
    rec("with a label selector", t.get(orders(ns), {"limit": "1", "labelSelector": "!x"}))
    rec("limit 0 lists all", _listed(t.get(orders(ns), {"limit": "0"})))
    rec("bad continue token", t.get(orders(ns), {"limit": "2", "continue": "garbage"}))
    rec(
        "continue with a resourceVersion",
        t.get(orders(ns), {"continue": token, "resourceVersion": "1"}),
    )
    rec("secrets page", _listed(t.get(secrets(ns), {"limit": "1"})))


@case
def case_list_at_resource_version(t: Target, rec: Record, ns: str) -> None:
    before = t.post(orders(ns), order("o1"))
    t.post(orders(ns), order("o2"))
    listed = t.get(orders(ns))
    t.post(orders(ns), order("o3"))
    t.request(
        "PATCH", orders(ns, "o1"), {}, {"spec": {"deletionPolicy": "Delete"}}, content_type=MERGE
    )
    exact = t.get(orders(ns), {"resourceVersion": listed.rv, "resourceVersionMatch": "Exact"})
    rec("exact: the list as it was", exact)
    rec("exact: at the asked version", exact.rv == listed.rv)
    rec(
        "exact with a limit",
        t.get(
            orders(ns),
            {"resourceVersion": before.rv, "resourceVersionMatch": "Exact", "limit": "5"},
        ),
    )
    legacy = t.get(orders(ns), {"resourceVersion": listed.rv, "limit": "5"})
    rec("limit with a resourceVersion is exact", _listed(legacy))
    rec(
        "not older than",
        _listed(
            t.get(
                orders(ns), {"resourceVersion": listed.rv, "resourceVersionMatch": "NotOlderThan"}
            )
        ),
    )
    rec("resourceVersion 0", _listed(t.get(orders(ns), {"resourceVersion": "0"})))
    rec("match without a version", t.get(orders(ns), {"resourceVersionMatch": "Exact"}))
    rec(
        "unknown match",
        t.get(orders(ns), {"resourceVersion": listed.rv, "resourceVersionMatch": "Newest"}),
    )
    rec("not a version", t.get(orders(ns), {"resourceVersion": "abc"}))
    rec(
        "exact 0",
        t.get(orders(ns), {"resourceVersion": "0", "resourceVersionMatch": "Exact"}),
    )


# ------------------------------------------------------------------------------ watch


def _watch_events(t: Target, path: str, query: dict[str, str], timeout: float = 15.0) -> Any:
    stream = t.watch(path, query)
    stream.wait(timeout=timeout)
    events = stream.close()
    return {"code": stream.code, "events": events, "broken": stream.broken}


def _bookmarks_apart(events: list[Any]) -> tuple[list[Any], list[int]]:
    """A watch's events without its bookmarks, and the resourceVersions the bookmarks carried."""
    kept = [e for e in events if e.get("type") != "BOOKMARK"]
    marks = [int(e["object"]["metadata"]["resourceVersion"]) for e in events if e not in kept]
    return kept, marks


@case
def case_watch_with_bookmarks(t: Target, rec: Record, ns: str) -> None:
    elsewhere = f"{ns}-b"
    t.post("/api/v1/namespaces", {"metadata": {"name": elsewhere}})
    t.post(secrets(ns), secret("before", {"app": "w"}))
    rv = t.get(secrets(ns)).rv
    t.post(secrets(ns), secret("w1", {"app": "w"}, k="1"))
    t.request("PATCH", secrets(ns, "w1"), {}, {"data": {"k": "Mg=="}}, content_type=MERGE)
    t.post(secrets(ns), secret("w2", {"app": "w"}))
    t.request(
        "PATCH", secrets(ns, "w2"), {}, {"metadata": {"labels": {"app": "x"}}}, content_type=MERGE
    )
    t.request("DELETE", secrets(ns, "w1"))
    query = {"resourceVersion": rv, "allowWatchBookmarks": "true", "timeoutSeconds": "3"}
    watches = {
        "every event": {**query},
        "selected: leaving the selection is DELETED": {**query, "labelSelector": "app=w"},
        "one object by field selector": {**query, "fieldSelector": "metadata.name=w2"},
        "without bookmarks": {k: v for k, v in query.items() if k != "allowWatchBookmarks"},
    }
    # Whether a quiet watch gets a bookmark is the server's choice, not a promise: the real
    # server's cache of a kind moves on with no write of it (etcd's progress notifications,
    # which its consistent reads of any kind ask for too), and a bookmark follows. What is
    # promised: never a bookmark before an event it would skip, and none when not asked for.
    quiet = {
        label: t.watch(secrets(ns), q if i == 0 else {**q, "allowWatchBookmarks": "false"})
        for i, (label, q) in enumerate(watches.items())
    }
    last = 0
    for label, stream in quiet.items():
        stream.wait(timeout=10)
        events, marks = _bookmarks_apart(stream.close())
        rec(label, {"code": stream.code, "events": events, "broken": stream.broken})
        # The watch of every event ends with the delete: the newest write of the kind here.
        last = last or max(int(e["object"]["metadata"]["resourceVersion"]) for e in events)
        rec(
            "a bookmark in a quiet watch is no older than its events", all(m >= last for m in marks)
        )
    # A write of the same kind elsewhere moves the kind's cache on: now a bookmark comes,
    # shortly before the timeout, no older than that write.
    opened = {label: t.watch(secrets(ns), q) for label, q in watches.items()}
    moved = int(t.post(secrets(elsewhere), secret("elsewhere")).rv)
    for label, stream in opened.items():
        stream.wait(timeout=10)
        raw = stream.close()
        events, marks = _bookmarks_apart(raw)
        rec(f"{label}, after a write elsewhere", {"code": stream.code, "events": events})
        rec("what a bookmark holds", [e for e in raw if e.get("type") == "BOOKMARK"][:1])
        rec(
            "bookmarks: how many came (none unless asked), and none older than the write",
            (min(len(marks), 1), all(m >= moved for m in marks)),
        )


@case
def case_watch_from_zero_and_timeout(t: Target, rec: Record, ns: str) -> None:
    t.post(orders(ns), order("z2"))
    t.post(orders(ns), order("z1"))
    # The state a watch from 0 starts with comes as ADDED events in no promised order: the real
    # server sends them as its watch cache's store yields them, sometimes in the order of writes,
    # sometimes not. Compared by name, so only the events themselves must agree.
    initial = _watch_events(t, orders(ns), {"resourceVersion": "0", "timeoutSeconds": "1"})
    initial["events"] = sorted(
        initial["events"],
        key=lambda e: (e.get("type", ""), e.get("object", {}).get("metadata", {}).get("name", "")),
    )
    rec("from 0: the current objects as ADDED", initial)
    rv = t.get(orders(ns)).rv
    rec(
        "nothing happens: ends at timeoutSeconds",
        _watch_events(t, orders(ns), {"resourceVersion": rv, "timeoutSeconds": "1"}),
    )
    rec(
        "not a version",
        _watch_events(t, orders(ns), {"resourceVersion": "abc", "timeoutSeconds": "1"}),
    )
    rec(
        "refused field selector",
        _watch_events(t, orders(ns), {"fieldSelector": "spec.x=1", "timeoutSeconds": "1"}),
    )


@case
def case_gone_history(t: Target, rec: Record, ns: str) -> None:
    for name in ("s1", "s2", "s3"):
        t.post(secrets(ns), secret(name))
    page = t.get(secrets(ns), {"limit": "1"})
    token = str(page.meta.get("continue", ""))
    # A kind of this case's own, whose watch cache starts after `page` was listed.
    group = f"{ns}.conformance.example"
    t.post(CRD_PATH, _widget_crd(group))
    _wait_served(t, f"/apis/{group}/v1/widgets")
    widgets = f"/apis/{group}/v1/namespaces/{ns}/widgets"
    for name in ("w1", "w2"):
        t.post(widgets, {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": name}})
    t.post(secrets(ns), secret("s4"))
    t.forget()
    gone = t.eventually(
        lambda: t.get(secrets(ns), {"limit": "1", "continue": token}),
        lambda a: a.code == 410,
        timeout=30,
    )
    rec("continue after the history is gone", gone)
    rest = t.get(secrets(ns), {"limit": "5", "continue": str(gone.meta.get("continue", ""))})
    rec("the inconsistent continue token lists the rest", _listed(rest))
    rec(
        "exact at a version no longer kept",
        t.get(widgets, {"resourceVersion": page.rv, "resourceVersionMatch": "Exact"}),
    )
    rec(
        "watch from before the kind's cache",
        _watch_events(t, widgets, {"resourceVersion": page.rv, "timeoutSeconds": "1"}),
    )
    rec(
        "not older than an old version lists what is there",
        _listed(t.get(widgets, {"resourceVersion": page.rv})),
    )
    t.delete(f"{CRD_PATH}/widgets.{group}")


@case
def case_custom_resource_definition(t: Target, rec: Record, ns: str) -> None:
    group = f"{ns}.conformance.example"
    made = t.post(CRD_PATH, _widget_crd(group))
    # Its status is the real server's to fill in asynchronously: compared without it.
    body = {k: v for k, v in made.body.items() if k != "status"} if made.code == 201 else made.body
    rec("create a CRD", {"code": made.code, "body": body})
    rec("create it again", t.post(CRD_PATH, _widget_crd(group)))
    bad = _widget_crd(group)
    bad["metadata"]["name"] = f"gadgets.{group}"
    rec("name not plural.group", t.post(CRD_PATH, bad))
    _wait_served(t, f"/apis/{group}/v1/widgets")
    t.delete(f"{CRD_PATH}/widgets.{group}")


def _widget_crd(group: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


def _wait_served(t: Target, path: str, timeout: float = 30.0) -> None:
    answer = t.eventually(lambda: t.get(path), lambda a: a.code == 200, timeout)
    if answer.code != 200:
        raise AssertionError(f"{path} is not served on {t.name}: {answer.code} {answer.body}")


# ------------------------------------------------------------------------------ writes


@case
def case_server_side_apply(t: Target, rec: Record, ns: str) -> None:
    body = order("o1", deletionPolicy="Retain")
    apply = orders(ns, "o1")
    rec("create by apply", t.patch(apply, body, APPLY, {"fieldManager": "alice"}))
    rec("the same apply again", t.patch(apply, body, APPLY, {"fieldManager": "alice"}))
    takeover = order("o1", deletionPolicy="Delete")
    rec("another manager conflicts", t.patch(apply, takeover, APPLY, {"fieldManager": "bob"}))
    two = order("o1", "cp2", deletionPolicy="Delete", databaseName="db_x")
    rec("two conflicts", t.patch(apply, two, APPLY, {"fieldManager": "bob"}))
    rec("the same value is shared", t.patch(apply, body, APPLY, {"fieldManager": "carol"}))
    rec(
        "force takes over",
        t.patch(apply, takeover, APPLY, {"fieldManager": "bob", "force": "true"}),
    )
    rec("alice gives her fields up", t.patch(apply, order("o1"), APPLY, {"fieldManager": "alice"}))
    rec("no field manager", t.patch(apply, body, APPLY))
    rec(
        "name differs from the URL",
        t.patch(orders(ns, "other"), body, APPLY, {"fieldManager": "alice"}),
    )
    rec(
        "no apiVersion and kind",
        t.patch(apply, {"metadata": {"name": "o1"}}, APPLY, {"fieldManager": "alice"}),
    )
    rec(
        "apply status",
        t.patch(
            orders(ns, "o1", "status"),
            {**order("o1"), "status": {"databaseName": "db_o1", "observedGeneration": 1}},
            APPLY,
            {"fieldManager": "tenantdb", "force": "true"},
        ),
    )
    rec(
        "dry run",
        t.patch(
            orders(ns, "o2"), order("o2"), APPLY, {"fieldManager": "tenantdb", "dryRun": "All"}
        ),
    )
    rec("dry run stored nothing", t.get(orders(ns, "o2")))
    rec(
        "apply a secret",
        t.patch(
            secrets(ns, "s1"),
            {**secret("s1", {"app": "x"}, password="p"), "type": "Opaque"},
            APPLY,
            {"fieldManager": "tenantdb", "force": "true"},
        ),
    )
    rec(
        "another manager on the secret",
        t.patch(secrets(ns, "s1"), secret("s1", password="q"), APPLY, {"fieldManager": "eso"}),
    )
    rec(
        "yaml body",
        t.request(
            "PATCH",
            orders(ns, "o3"),
            {"fieldManager": "alice"},
            yaml.safe_dump(order("o3")).encode(),
            content_type=APPLY,
        ),
    )


@case
def case_apply_with_a_resource_version(t: Target, rec: Record, ns: str) -> None:
    # tenantdb fences its applies with the resourceVersion its pass read: an object that changed
    # since is refused, and one read absent is created only while it still is absent.
    manager = {"fieldManager": "tenantdb", "force": "true"}
    unreachable = "18446744073709551615"

    def with_version(name: str, version: str, value: str = "p") -> dict[str, Any]:
        body = {**secret(name, password=value), "type": "Opaque"}
        return {**body, "metadata": {**body["metadata"], "resourceVersion": version}}

    rec(
        "an absent object is created whatever the version",
        t.patch(secrets(ns, "f1"), with_version("f1", unreachable), APPLY, manager),
    )
    created = t.get(secrets(ns, "f1"))
    rec(
        "a present object at another version is refused",
        t.patch(secrets(ns, "f1"), with_version("f1", unreachable, "q"), APPLY, manager),
    )
    rec(
        "at its version it is applied",
        t.patch(secrets(ns, "f1"), with_version("f1", created.rv, "q"), APPLY, manager),
    )
    rec(
        "at the version it had before that write it is refused",
        t.patch(secrets(ns, "f1"), with_version("f1", created.rv, "r"), APPLY, manager),
    )
    rec(
        "a version that is not a number",
        t.patch(secrets(ns, "f2"), with_version("f2", "x"), APPLY, manager),
    )
    rec(
        "a merge patch with a version on an absent object",
        t.patch(secrets(ns, "f3"), {"metadata": {"resourceVersion": created.rv}}, MERGE),
    )


@case
def case_patches(t: Target, rec: Record, ns: str) -> None:
    t.post(orders(ns), order("o1"))
    path = orders(ns, "o1")
    rec("merge patch of the spec", t.patch(path, {"spec": {"deletionPolicy": "Delete"}}, MERGE))
    rec(
        "merge patch of a label",
        t.patch(path, {"metadata": {"labels": {"a": "1"}}}, MERGE, {"fieldManager": "labeller"}),
    )
    rec(
        "json patch",
        t.patch(
            path, [{"op": "add", "path": "/metadata/annotations", "value": {"x": "y"}}], JSON_PATCH
        ),
    )
    rec(
        "json patch test fails",
        t.patch(
            path, [{"op": "test", "path": "/spec/deletionPolicy", "value": "Retain"}], JSON_PATCH
        ),
    )
    rec(
        "json patch removes what is not there",
        t.patch(path, [{"op": "remove", "path": "/spec/nothing"}], JSON_PATCH),
    )
    rec("json patch not a list", t.patch(path, {"op": "add"}, JSON_PATCH))
    rec("strategic merge on a custom resource", t.patch(path, {"spec": {}}, STRATEGIC))
    rec("unknown patch type", t.patch(path, {"spec": {}}, "application/x-something"))
    rec(
        "stale resourceVersion",
        t.patch(path, {"metadata": {"resourceVersion": "1"}, "spec": {}}, MERGE),
    )
    rec("patch of an absent object", t.patch(orders(ns, "absent"), {"spec": {}}, MERGE))
    rec("not json", t.request("PATCH", path, {}, b"{not json", content_type=MERGE))
    t.post(secrets(ns), secret("s1", a="1"))
    rec(
        "strategic merge on a secret",
        t.patch(
            secrets(ns, "s1"),
            {"data": {"b": "Mg=="}, "metadata": {"finalizers": ["x/y"]}},
            STRATEGIC,
        ),
    )
    rec(
        "merge patch drops a key",
        t.patch(secrets(ns, "s1"), {"data": {"a": None}, "metadata": {"finalizers": None}}, MERGE),
    )


@case
def case_status_subresource(t: Target, rec: Record, ns: str) -> None:
    body = {**order("o1"), "status": {"databaseName": "ignored"}}
    created = rec("create drops the status", t.post(orders(ns), body))
    status = {"databaseName": "db", "observedGeneration": 1}
    rec(
        "status patch changes only the status",
        t.patch(
            orders(ns, "o1", "status"),
            {"spec": {"deletionPolicy": "Delete"}, "status": status},
            MERGE,
        ),
    )
    rec(
        "main resource ignores the status",
        t.patch(
            orders(ns, "o1"),
            {"spec": {"deletionPolicy": "Delete"}, "status": {"databaseName": "x"}},
            MERGE,
        ),
    )
    current = t.get(orders(ns, "o1"))
    replaced = {**current.body, "status": {"databaseName": "put"}}
    rec("put status", t.put(orders(ns, "o1", "status"), replaced))
    stale = {**replaced, "metadata": {**replaced["metadata"], "resourceVersion": created.rv}}
    rec("put status with a stale resourceVersion", t.put(orders(ns, "o1", "status"), stale))
    rec(
        "status patch with the current resourceVersion",
        t.patch(
            orders(ns, "o1", "status"),
            {"metadata": {"resourceVersion": t.get(orders(ns, "o1")).rv}, "status": {"host": "h"}},
            MERGE,
        ),
    )
    rec(
        "invalid status",
        t.patch(orders(ns, "o1", "status"), {"status": {"conditions": [{"type": "Ready"}]}}, MERGE),
    )
    rec(
        "status of an absent object", t.patch(orders(ns, "absent", "status"), {"status": {}}, MERGE)
    )
    t.post(secrets(ns), secret("s1"))
    rec("secrets have no status", t.patch(secrets(ns, "s1") + "/status", {"status": {}}, MERGE))


@case
def case_create_and_update_conflicts(t: Target, rec: Record, ns: str) -> None:
    rec("create", t.post(secrets(ns), secret("s1", a="1")))
    rec("create again", t.post(secrets(ns), secret("s1", a="2")))
    rec("create an order", t.post(orders(ns), order("o1")))
    rec("create the order again", t.post(orders(ns), order("o1")))
    rec("create in an absent namespace", t.post(secrets("cf-no-such-ns"), secret("s1")))
    mismatched = {**secret("s2"), "metadata": {"name": "s2", "namespace": "elsewhere"}}
    rec("body namespace differs", t.post(secrets(ns), mismatched))
    generated = {**secret(""), "metadata": {"generateName": GENERATE_PREFIX}}
    rec("generateName", t.post(secrets(ns), generated))
    rec("no name", t.post(secrets(ns), secret("")))
    rec("bad name", t.post(secrets(ns), secret("Not_A_Name")))
    rec("create with fieldManager", t.post(orders(ns), order("o2"), {"fieldManager": "maker"}))
    rec("create dry run", t.post(orders(ns), order("o3"), {"dryRun": "All"}))
    rec(
        "strict: unknown field",
        t.post(orders(ns), {**order("o4"), "extra": 1}, {"fieldValidation": "Strict"}),
    )
    rec("warn: unknown field", t.post(orders(ns), {**order("o5"), "extra": 1}))
    rec(
        "ignore: unknown field",
        t.post(orders(ns), {**order("o6"), "extra": 1}, {"fieldValidation": "Ignore"}),
    )
    current = t.get(secrets(ns, "s1")).body
    rec("update", t.put(secrets(ns, "s1"), {**current, "data": {"a": "Mw=="}}))
    rec("update with the stale resourceVersion", t.put(secrets(ns, "s1"), {**current, "data": {}}))
    unversioned = {k: v for k, v in current.items() if k != "metadata"}
    unversioned["metadata"] = {"name": "s1"}
    rec("secret update without a resourceVersion", t.put(secrets(ns, "s1"), unversioned))
    rec("order update without a resourceVersion", t.put(orders(ns, "o1"), order("o1")))
    rec("update of an absent secret", t.put(secrets(ns, "absent"), secret("absent")))
    rec("name differs from the URL", t.put(secrets(ns, "s1"), secret("other")))
    rec(
        "update changes the immutable type",
        t.put(secrets(ns, "s1"), {**secret("s1"), "type": "x/y"}),
    )


@case
def case_finalizers(t: Target, rec: Record, ns: str) -> None:
    body = order("o1")
    body["metadata"]["finalizers"] = ["tenantdb.c5c3.io/teardown"]
    rv = t.get(orders(ns)).rv
    rec("create with a finalizer", t.post(orders(ns), body))
    deleted = rec("delete", t.delete(orders(ns, "o1")))
    rec("delete again", t.delete(orders(ns, "o1")))
    rec("still there", t.get(orders(ns, "o1")))
    rec(
        "no new finalizer while deleting",
        t.patch(
            orders(ns, "o1"),
            {"metadata": {"finalizers": ["a/b", "tenantdb.c5c3.io/teardown"]}},
            MERGE,
        ),
    )
    rec(
        "spec changes while deleting",
        t.patch(orders(ns, "o1"), {"spec": {"deletionPolicy": "Delete"}}, MERGE),
    )
    version = t.get(orders(ns, "o1")).rv
    rec(
        "finalizer removed with the resourceVersion",
        t.patch(
            orders(ns, "o1"), {"metadata": {"finalizers": [], "resourceVersion": version}}, MERGE
        ),
    )
    rec("gone", t.get(orders(ns, "o1")))
    rec(
        "events",
        _watch_events(t, orders(ns), {"resourceVersion": rv, "timeoutSeconds": "1"}),
    )
    rec("deleted answered the object", deleted.body.get("kind"))


@case
def case_delete(t: Target, rec: Record, ns: str) -> None:
    created = t.post(secrets(ns), secret("s1"))
    uid = str(created.meta["uid"])
    wrong_uid = {"preconditions": {"uid": str(uuid.uuid4())}}
    rec("wrong uid", t.delete(secrets(ns, "s1"), wrong_uid))
    rec(
        "stale resourceVersion",
        t.delete(secrets(ns, "s1"), {"preconditions": {"resourceVersion": "1"}}),
    )
    both = {"preconditions": {"uid": uid, "resourceVersion": created.rv}}
    rec("matching preconditions", t.delete(secrets(ns, "s1"), both))
    rec("delete an absent secret", t.delete(secrets(ns, "s1")))
    t.post(orders(ns), order("o1"))
    rec("delete an order", t.delete(orders(ns, "o1")))
    t.post(orders(ns), order("o2"))
    rec(
        "foreground",
        t.delete(
            orders(ns, "o2"),
            {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground"},
        ),
    )
    rec(
        "foreground finishes",
        t.eventually(lambda: t.get(orders(ns, "o2")), lambda a: a.code == 404),
    )
    t.post(secrets(ns), secret("s2"))
    rec("dry run", t.delete(secrets(ns, "s2"), None, {"dryRun": "All"}))
    rec("dry run kept it", t.get(secrets(ns, "s2")).code)
    rec("bad propagation policy", t.delete(secrets(ns, "s2"), {"propagationPolicy": "Sideways"}))
    t.post(secrets(ns), secret("c1", {"set": "x"}))
    t.post(secrets(ns), secret("c2", {"set": "x"}))
    rec("delete collection", t.delete(secrets(ns), None, {"labelSelector": "set=x"}))
    rec("collection gone", _listed(t.get(secrets(ns), {"labelSelector": "set=x"})))


@case
def case_events(t: Target, rec: Record, ns: str) -> None:
    made = t.post(orders(ns), order("o1"))
    stamp = "2026-01-02T03:04:05Z"
    involved = {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "MariaDBDatabase",
        "name": "o1",
        "namespace": ns,
        "uid": made.meta.get("uid", ""),
        "resourceVersion": made.rv,
    }
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "o1.17a2b3c4d5e6f708", "namespace": ns},
        "involvedObject": involved,
        "reason": "Provisioned",
        "message": "the database is there",
        "type": "Normal",
        "source": {"component": "conformance"},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "reportingComponent": "conformance",
        "reportingInstance": "conformance-1",
    }
    events = f"/api/v1/namespaces/{ns}/events"
    rec("record an event", t.post(events, body, {"fieldManager": "conformance"}))
    rec("by involved object", _listed(t.get(events, {"fieldSelector": "involvedObject.name=o1"})))
    rec("by reason", _listed(t.get(events, {"fieldSelector": "reason=Provisioned,type=Normal"})))
    elsewhere = {**body, "involvedObject": {**involved, "namespace": "other"}}
    elsewhere["metadata"] = {"name": "o1.2", "namespace": ns}
    rec("involved object elsewhere", t.post(events, elsewhere))
    rec("no involved object", t.post(events, {"metadata": {"name": "o1.3"}, "reason": "x"}))


# ------------------------------------------------------------------------------ identity


@case
def case_rbac_denials(t: Target, rec: Record, ns: str) -> None:
    token = service_account_token(t, ns, "robot")
    t.post(secrets(ns), secret("s1"))
    t.post(orders(ns), order("o1"))
    as_robot: list[tuple[str, str, str, Any]] = [
        ("get secret", "GET", secrets(ns, "s1"), None),
        ("list secrets", "GET", secrets(ns), None),
        ("list secrets everywhere", "GET", "/api/v1/secrets", None),
        ("create secret", "POST", secrets(ns), secret("s2")),
        ("delete secret", "DELETE", secrets(ns, "s1"), None),
        ("get namespace", "GET", f"/api/v1/namespaces/{ns}", None),
        ("list namespaces", "GET", "/api/v1/namespaces", None),
        ("get order", "GET", orders(ns, "o1"), None),
        ("create order", "POST", orders(ns), order("o2")),
        ("patch order status", "PATCH", orders(ns, "o1", "status"), {"status": {}}),
        ("get crd", "GET", f"{CRD_PATH}/{ORDERS}.{GROUP}", None),
        ("create namespace", "POST", "/api/v1/namespaces", {"metadata": {"name": f"{ns}-r"}}),
        ("list orders everywhere", "GET", f"/apis/{GROUP}/v1alpha1/{ORDERS}", None),
        ("get a path that is no resource", "GET", "/metrics", None),
        ("get version", "GET", "/version", None),
    ]
    for label, method, path, body in as_robot:
        sent = t.request(
            method, path, None, body, token=token, content_type=MERGE if method == "PATCH" else None
        )
        rec(label, sent if label != "get version" else sent.code)
    for label, path in (("watch secrets", secrets(ns)), ("watch namespaces", "/api/v1/namespaces")):
        watch = t.watch(path, {"timeoutSeconds": "1"}, token=token)
        rec(label, {"code": watch.code, "events": watch.wait(timeout=5)})
        watch.close()
    rec("bad token", t.get(secrets(ns), token="not-a-token"))
    rec("anonymous", t.get(secrets(ns), token=""))
    rec("anonymous version", t.get("/version", token="").code)
    rec(
        "apply create",
        t.request(
            "PATCH",
            orders(ns, "o3"),
            {"fieldManager": "robot"},
            order("o3"),
            content_type=APPLY,
            token=token,
        ),
    )
    t.post(
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
        {
            "metadata": {"name": "read-secrets"},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}],
        },
    )
    t.post(
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
        {
            "metadata": {"name": "robot-reads"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "read-secrets",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": ns}],
        },
    )
    granted = t.eventually(lambda: t.get(secrets(ns, "s1"), token=token), lambda a: a.code == 200)
    rec("granted get", granted.code)
    rec("still no delete", t.request("DELETE", secrets(ns, "s1"), token=token))
    rec("still not elsewhere", t.get(secrets("default"), token=token))


@case
def case_tokens(t: Target, rec: Record, ns: str) -> None:
    token = service_account_token(t, ns, "robot", rec)
    review = "/apis/authentication.k8s.io/v1/tokenreviews"
    sa = f"/api/v1/namespaces/{ns}/serviceaccounts"
    rec("review a good token", t.post(review, {"spec": {"token": token}}))
    rec(
        "review with its audience",
        t.post(review, {"spec": {"token": token, "audiences": [ISSUER]}}),
    )
    rec(
        "review with another audience",
        t.post(review, {"spec": {"token": token, "audiences": ["other"]}}),
    )
    rec("review garbage", t.post(review, {"spec": {"token": "garbage"}}))
    rec("review a forged token", t.post(review, {"spec": {"token": token[:-4] + "AAAA"}}))
    rec("review nothing", t.post(review, {"spec": {}}))
    scoped = t.post(
        f"{sa}/robot/token", {"spec": {"audiences": ["vault"], "expirationSeconds": 600}}
    )
    rec("token for an audience", scoped)
    scoped_token = str(scoped.body["status"]["token"])
    rec(
        "reviewed for that audience",
        t.post(review, {"spec": {"token": scoped_token, "audiences": ["vault"]}}),
    )
    rec("reviewed for the default audience", t.post(review, {"spec": {"token": scoped_token}}))
    rec("used against the API", t.get(secrets(ns), token=scoped_token))
    rec("too short", t.post(f"{sa}/robot/token", {"spec": {"expirationSeconds": 60}}))
    rec("absent service account", t.post(f"{sa}/nobody/token", {"spec": {}}))
    rec(
        "self subject review",
        t.post("/apis/authentication.k8s.io/v1/selfsubjectreviews", {}, token=token),
    )
    t.delete(f"{sa}/robot")
    rec(
        "token of a deleted service account",
        t.eventually(
            lambda: t.post(review, {"spec": {"token": token}}),
            lambda a: not (a.body.get("status") or {}).get("authenticated"),
        ),
    )


@case
def case_access_reviews(t: Target, rec: Record, ns: str) -> None:
    token = service_account_token(t, ns, "robot")
    t.post(
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
        {
            "metadata": {"name": "order-reader"},
            "rules": [{"apiGroups": [GROUP], "resources": [ORDERS], "verbs": ["get", "watch"]}],
        },
    )
    t.post(
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
        {
            "metadata": {"name": "robot-reads-orders"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "order-reader",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": ns}],
        },
    )
    path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"

    def ask(attrs: dict[str, Any], who: str | None = token) -> Answer:
        return t.post(path, {"spec": {"resourceAttributes": attrs}}, token=who)

    allowed = {"namespace": ns, "verb": "get", "group": GROUP, "resource": ORDERS}
    t.eventually(
        lambda: ask(allowed), lambda a: (a.body.get("status") or {}).get("allowed") is True
    )
    rec("allowed", ask(allowed))
    rec("denied verb", ask({**allowed, "verb": "delete"}))
    rec("denied elsewhere", ask({**allowed, "namespace": "default"}))
    rec("denied cluster-wide", ask({"verb": "list", "resource": "namespaces"}))
    rec("admin may", ask(allowed, None))
    # Only system:discovery grants /api: where several bindings allow, the real server names the
    # first one its informer happens to list.
    rec(
        "non-resource",
        t.post(
            path,
            {"spec": {"nonResourceAttributes": {"path": "/api", "verb": "get"}}},
            token=token,
        ),
    )
    rec("empty", t.post(path, {"spec": {}}, token=token))


# ------------------------------------------------------------------------------ validation


@case
def case_order_validation(t: Target, rec: Record, ns: str) -> None:
    bad: list[tuple[str, dict[str, Any]]] = [
        ("no spec", {k: v for k, v in order("v1").items() if k != "spec"}),
        ("empty control plane name", order("v2", "")),
        ("unknown deletion policy", order("v3", deletionPolicy="Sometimes")),
        ("bad database name", order("v4", databaseName="no-dashes")),
        ("two problems", order("v5", "", deletionPolicy="Sometimes")),
        ("wrong type", order("v6", databaseName=5)),
        ("name not an identifier", order("v.7")),
        ("name too long for a label", order("v" * 64, databaseName="db")),
        ("database name too long", order("v9", databaseName="d" * 65)),
        (
            "unknown field strictly",
            {**order("v10"), "spec": {"controlPlaneRef": {"name": "cp", "x": 1}}},
        ),
    ]
    for label, body in bad:
        rec(label, t.post(orders(ns), body, {"fieldValidation": "Strict"}))
    control_planes = f"/apis/{GROUP}/v1alpha1/namespaces/{ns}/controlplanes"
    endpoint = {"infrastructure": {"publishedDatabaseEndpoint": "no port"}}
    rec(
        "control plane with a bad endpoint",
        t.post(
            control_planes,
            {
                "apiVersion": f"{GROUP}/v1alpha1",
                "kind": "ControlPlane",
                "metadata": {"name": "cp"},
                "spec": endpoint,
            },
        ),
    )
    t.post(orders(ns), order("ok"))
    rec(
        "immutable control plane",
        t.patch(orders(ns, "ok"), {"spec": {"controlPlaneRef": {"name": "other"}}}, MERGE),
    )
    rec(
        "immutable database name",
        t.patch(orders(ns, "ok"), {"spec": {"databaseName": "other_db"}}, MERGE),
    )


# ------------------------------------------------------------------------------ fixtures


def devstack_target(server: ClusterServer) -> Target:
    """A devstack server, its admin by bearer token."""
    ca = (server.ca_pem or b"").decode()
    cluster = server.cluster

    def forget() -> None:
        cluster.set_history(0)
        cluster.set_history(10_000)

    return Target(
        "devstack",
        server.url,
        urllib3.PoolManager(ca_cert_data=ca),
        urllib3.PoolManager(ca_cert_data=ca),
        {"Authorization": f"Bearer {server.token}"},
        forget,
    )


def real_target(server: str, pki: realkube.Pki, etcd_url: str) -> Target:
    """A real API server, its admin by client certificate, and its etcd for compaction."""
    etcd = urllib3.PoolManager()

    def etcd_call(path: str, body: dict[str, Any]) -> Any:
        answer = etcd.request("POST", f"{etcd_url}{path}", body=json.dumps(body).encode())
        if answer.status != 200:
            raise AssertionError(f"etcd {path}: {answer.status} {answer.data!r}")
        return json.loads(answer.data)

    def forget() -> None:
        # Compact as kube-apiserver does: record the revision under `compact_rev_key` (the API
        # server watches it), then compact etcd's history up to it.
        key = base64.b64encode(b"compact_rev_key").decode()
        revision = etcd_call("/v3/kv/range", {"key": key})["header"]["revision"]
        value = base64.b64encode(str(revision).encode()).decode()
        etcd_call("/v3/kv/put", {"key": key, "value": value})
        etcd_call("/v3/kv/compaction", {"revision": str(revision), "physical": True})

    return Target(
        "real",
        server,
        urllib3.PoolManager(
            ca_certs=str(pki.ca_cert), cert_file=str(pki.admin_cert), key_file=str(pki.admin_key)
        ),
        urllib3.PoolManager(ca_certs=str(pki.ca_cert)),
        {},
        forget,
    )


def served_crds() -> list[dict[str, Any]]:
    """The CRDs both servers serve: the chart's and the ControlPlane."""
    chart = [yaml.safe_load(path.read_text()) for path in CHART_CRDS]
    return [*chart, *(factory() for factory in controlplane.CRDS)]


def install_crds(t: Target) -> None:
    """Create the CRDs on a server and wait until each is served."""
    for crd in served_crds():
        answer = t.post(CRD_PATH, crd)
        if answer.code not in (201, 409):
            raise AssertionError(f"CRD {crd['metadata']['name']} on {t.name}: {answer.body}")
    for crd in served_crds():
        spec = crd["spec"]
        version = next(v["name"] for v in spec["versions"] if v["served"])
        _wait_served(t, f"/apis/{spec['group']}/{version}/{spec['names']['plural']}")


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """A real cluster with its controller manager, serving the CRDs."""
    missing = realkube.missing_binaries()
    if missing:
        pytest.fail(f"{', '.join(missing)} not built in tools/kube/bin; run `make kube`")
    kube = realkube.start_real_clusters(
        tmp_path_factory.mktemp("conformance"), ["conformance"], controller_manager=True
    )
    try:
        target = real_target(kube["conformance"].server, kube.pki, kube.etcd_url)
        install_crds(target)
        yield target
    finally:
        kube.stop()


@pytest.fixture(scope="module")
def devstack() -> Iterator[Target]:
    """A devstack cluster serving the same CRDs."""
    server = ClusterServer("conformance").start()
    try:
        target = devstack_target(server)
        install_crds(target)
        yield target
    finally:
        server.stop()


def run_on_both(real: Target, devstack: Target, fn: Case) -> str:
    """Run one case on both servers at once, each in a fresh namespace of the same name;
    return the diff of the normalised records (empty when they agree)."""
    ns = f"cf-{uuid.uuid4().hex[:8]}"

    def one(target: Target) -> Record:
        made = target.post("/api/v1/namespaces", {"metadata": {"name": ns}})
        if made.code != 201:
            raise AssertionError(f"namespace {ns} on {target.name}: {made.body}")
        return run_case(lambda t, rec: fn(t, rec, ns), target)

    with ThreadPoolExecutor(max_workers=2) as pool:
        oracle, candidate = pool.map(one, (real, devstack))
    return compare(oracle, candidate, generate_prefixes=[GENERATE_PREFIX])


@pytest.mark.parametrize("name", list(CASES))
def test_same_answers(real: Target, devstack: Target, name: str) -> None:
    started = time.monotonic()
    diff = run_on_both(real, devstack, CASES[name])
    if diff:
        pytest.fail(
            f"case {name} ({time.monotonic() - started:.1f}s): the devstack answers otherwise "
            f"than the real server (- real, + devstack):\n{diff}",
            pytrace=False,
        )
