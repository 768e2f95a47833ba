"""Core v1 Events through the official client and kubectl: create, field selectors, patch, get."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from devstack.tests.kube.conftest import Kubectl


def _event(
    name: str, namespace: str, reason: str, kind: str = "ConfigMap", **extra: str
) -> client.CoreV1Event:
    now = datetime.now(UTC).replace(microsecond=0)
    return client.CoreV1Event(
        metadata=client.V1ObjectMeta(name=name, namespace=namespace),
        involved_object=client.V1ObjectReference(
            api_version="v1",
            kind=kind,
            name=extra.get("object", "settings"),
            namespace=extra.get("object_namespace", namespace),
            uid=extra.get("uid", "00000000-0000-0000-0000-000000000001"),
        ),
        reason=reason,
        message=extra.get("message", f"{reason} happened"),
        type=extra.get("type", "Normal"),
        source=client.V1EventSource(component="tester"),
        first_timestamp=now,
        last_timestamp=now,
        count=1,
    )


def test_events_are_served_with_field_selectors_and_patches(
    core: client.CoreV1Api, namespace: str
) -> None:
    created = core.create_namespaced_event(namespace, _event("a.1", namespace, "Started"))
    assert created.metadata.uid
    assert created.involved_object.name == "settings"
    assert created.source.component == "tester"
    core.create_namespaced_event(
        namespace, _event("a.2", namespace, "Failed", type="Warning", uid="u-2")
    )
    core.create_namespaced_event(
        namespace, _event("b.1", namespace, "Started", kind="Secret", object="creds")
    )

    def names(selector: str) -> list[str]:
        listed = core.list_namespaced_event(namespace, field_selector=selector)
        return sorted(e.metadata.name for e in listed.items)

    assert names("involvedObject.kind=ConfigMap") == ["a.1", "a.2"]
    assert names("involvedObject.name=creds") == ["b.1"]
    assert names(f"involvedObject.namespace={namespace}") == ["a.1", "a.2", "b.1"]
    assert names("involvedObject.uid=u-2") == ["a.2"]
    assert names("reason=Started,involvedObject.kind=ConfigMap") == ["a.1"]
    assert names("type=Warning") == ["a.2"]
    assert names("type!=Warning") == ["a.1", "b.1"]
    with pytest.raises(ApiException) as unknown:
        core.list_namespaced_event(namespace, field_selector="involvedObject.colour=red")
    assert unknown.value.status == 400

    patched = core.patch_namespaced_event("a.1", namespace, {"count": 2, "message": "again"})
    assert (patched.count, patched.message) == (2, "again")
    assert core.read_namespaced_event("a.1", namespace).count == 2
    everywhere = client.CoreV1Api(core.api_client).list_event_for_all_namespaces(
        field_selector="involvedObject.name=creds"
    )
    assert [e.metadata.name for e in everywhere.items] == ["b.1"]


def test_an_event_about_an_object_elsewhere_is_refused(
    core: client.CoreV1Api, namespace: str
) -> None:
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_event(
            namespace, _event("c.1", namespace, "Started", object_namespace="elsewhere")
        )
    assert refused.value.status == 422
    assert "does not match event.namespace" in json.loads(refused.value.body)["message"]


def test_kubectl_gets_events(core: client.CoreV1Api, namespace: str, kubectl: Kubectl) -> None:
    core.create_namespaced_event(
        namespace, _event("d.1", namespace, "Provisioned", message="schema created")
    )
    result = kubectl("-n", namespace, "get", "events")
    assert result.returncode == 0, result.stderr
    header, row = result.stdout.splitlines()[:2]
    assert header.split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert row.split()[1:] == ["Normal", "Provisioned", "configmap/settings", "schema", "created"]
    short = kubectl("-n", namespace, "get", "ev", "-o", "name")
    assert short.stdout.split() == ["event/d.1"], short.stderr
    wide = kubectl("-n", namespace, "get", "events", "-o", "wide")
    assert "tester" in wide.stdout, wide.stderr
    selected = kubectl(
        "-n", namespace, "get", "events", "--field-selector", "reason=Other", "-o", "json"
    )
    assert json.loads(selected.stdout)["items"] == [], selected.stderr
