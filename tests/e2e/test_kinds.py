"""A kind is a declaration: the toy Widget kind, one module of the tests, served end to end.

The workers and the watcher load ``tests.kinds.widget`` through TENANTDB_KIND_MODULES. Nothing
in tenantdb names the kind: the scaffold adds its finalizer, runs its plan, chains its step,
tears it down and releases it; the watcher watches it; the CLI reconciles and reports it by key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from devstack.platform import (
    OPERATOR_NAMESPACE,
    OPERATOR_SERVICE_ACCOUNT,
    WATCHER_SERVICE_ACCOUNT,
    WORKER_SERVICE_ACCOUNT,
)
from tenantdb.adapters.kube import CONFIG_MAP, CUSTOM_RESOURCE_DEFINITION, resource_of
from tests.e2e.conftest import Stack
from tests.kinds import widget
from tests.support import wait_for

# The Widget CRD and its grants are installed: a platform of its own.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.private_platform,
    pytest.mark.usefixtures("widget_grants"),
]

REPO = Path(__file__).resolve().parents[2]
WIDGET = resource_of(widget.IDENTITY)


@pytest.fixture
def stack_env() -> dict[str, str]:
    return {
        "TENANTDB_KIND_MODULES": "tests.kinds.widget",
        "TENANTDB_WATCH_UNSERVED_RETRY_SECONDS": "1",
    }


@pytest.fixture
def widget_grants(stack: Stack) -> None:
    """Grant tenantdb's ServiceAccount what the Widget kind needs, on every cluster, as an
    operator installing a kind module extends the chart's RBAC: the chart grants tenantdb's own
    kinds only."""
    rules = [
        {"apiGroups": [widget.IDENTITY.group], "resources": [widget.IDENTITY.plural],
         "verbs": ["get", "list", "watch", "update", "patch"]},
        {"apiGroups": [widget.IDENTITY.group],
         "resources": [f"{widget.IDENTITY.plural}/status", f"{widget.IDENTITY.plural}/finalizers"],
         "verbs": ["get", "update", "patch"]},
        {"apiGroups": [""], "resources": ["configmaps"],
         "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
    ]  # fmt: skip
    for endpoint in stack.platform.endpoints.values():
        endpoint.client.create(
            "clusterroles.rbac.authorization.k8s.io",
            {"metadata": {"name": "tenantdb-widgets"}, "rules": rules},
        )
        endpoint.client.create(
            "clusterrolebindings.rbac.authorization.k8s.io",
            {
                "metadata": {"name": "tenantdb-widgets"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "tenantdb-widgets",
                },
                # The watcher's and the worker's accounts on management, the one elsewhere.
                "subjects": [
                    {"kind": "ServiceAccount", "name": account, "namespace": OPERATOR_NAMESPACE}
                    for account in (
                        WATCHER_SERVICE_ACCOUNT,
                        WORKER_SERVICE_ACCOUNT,
                        OPERATOR_SERVICE_ACCOUNT,
                    )
                ],
            },
        )


def _message(stack: Stack, name: str) -> str | None:
    live = stack.kube().get_or_none(CONFIG_MAP, "tenant-a", f"{name}-widget")
    return None if live is None else (live.get("data") or {}).get("message")


def test_a_kind_declared_in_one_module_is_served_end_to_end(stack: Stack) -> None:
    kube = stack.kube()
    name = _order_widget(stack, "toy", "hello")

    wait_for(lambda: _message(stack, name) == "hello", 30, "the ConfigMap the Widget plans")
    order = wait_for(lambda: _built(stack, name), 30, "the Widget's status")
    assert widget.IDENTITY.finalizer in order["metadata"]["finalizers"]
    passes = stack.counter("worker-1", "tenantdb_reconcile_passes_total", kind="widget")
    passes += stack.counter("worker-2", "tenantdb_reconcile_passes_total", kind="widget")
    assert passes >= 1

    key = f"widget/tenant-a/{name}"
    status = stack.cli("status", key)
    assert status.returncode == 0, status.stderr
    assert key in status.stdout
    assert "Built" in status.stdout
    done = stack.cli("reconcile", key, "--wait", "30")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Ready=True Built: hello" in done.stdout

    kube.patch(WIDGET, "tenant-a", name, {"spec": {"message": "again"}})
    wait_for(lambda: _message(stack, name) == "again", 30, "the ConfigMap to follow the spec")

    kube.delete(WIDGET, "tenant-a", name)
    wait_for(lambda: kube.get_or_none(WIDGET, "tenant-a", name) is None, 30, "the teardown")
    assert _message(stack, name) is None, "the teardown removed the ConfigMap"


def test_a_deletion_goes_ahead_of_a_step_retrying_without_end(stack: Stack) -> None:
    kube = stack.kube()
    name = _order_widget(stack, "stuck", widget.REFUSED)
    task = "tenantdb.widget.provision.build"

    def retries() -> float:
        try:
            return sum(
                stack.counter(worker, "tenantdb_step_retries_total", task=task)
                for worker in ("worker-1", "worker-2")
            )
        except OSError:
            return 0.0  # a worker does not serve its metrics yet

    wait_for(lambda: retries() >= 2, 30, "the build step to retry")

    kube.delete(WIDGET, "tenant-a", name)
    wait_for(lambda: kube.get_or_none(WIDGET, "tenant-a", name) is None, 30, "the teardown")


def test_the_cli_refuses_a_key_of_a_kind_nothing_serves(stack: Stack) -> None:
    refused = stack.cli("reconcile", "gadget/tenant-a/x")
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        "tenantdb: order key 'gadget/tenant-a/x': kind 'gadget' is not served"
        " (known kinds: mariadbdatabase, mysqldatabase, widget)"
    ]


def _order_widget(stack: Stack, base: str, message: str) -> str:
    """Install the Widget CRD and order a Widget once the kind is served; its name."""
    kube = stack.kube()
    kube.create(widget.build_crd())
    wait_for(lambda: kube.get_or_none(CUSTOM_RESOURCE_DEFINITION, None, widget.IDENTITY.crd_name),
             10, "the Widget CRD")  # fmt: skip
    name = stack.name(base)
    body: dict[str, Any] = {
        "apiVersion": widget.IDENTITY.api_version,
        "kind": "Widget",
        "metadata": {"name": name, "namespace": "tenant-a"},
        "spec": {"message": message},
    }
    wait_for(lambda: _create(stack, body), 10, "the Widget kind to be served")
    return name


def _create(stack: Stack, body: dict[str, Any]) -> bool:
    from tenantdb.adapters.kube import KubeError

    try:
        stack.kube().create(body)
    except KubeError:
        return False
    return True


def _built(stack: Stack, name: str) -> dict[str, Any] | None:
    order = stack.kube().get_or_none(WIDGET, "tenant-a", name)
    conditions = ((order or {}).get("status") or {}).get("conditions") or ()
    return order if any(c.get("reason") == "Built" for c in conditions) else None
