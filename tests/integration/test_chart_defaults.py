"""`helm install` with the chart's defaults, on a real kube-apiserver whose
kube-controller-manager turns the Deployments into Pods. Nothing but the defaults is refused
before anything is created: tenantdb's Redis needs credentials. With the one Secret an installer
must create (the Redis password) named, every Secret, ConfigMap and ServiceAccount a Pod needs
exists, so no Pod waits for an object nobody creates, and the release notes tell the installer
what to do next.

No scheduler or kubelet runs, so the Pods stay Pending: what they would pull and reach (the
image, Redis) is named in the notes, not tried here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devstack import realkube
from devstack.chart import CHART_DIR
from tests.integration.test_chart_real_kube import (
    HELM,
    KUBECTL,
    NAMESPACE,
    RELEASE,
    _must,
    _run,
    require_binaries,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

WORKLOADS = ("deployment-controller", "replicaset-controller")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[realkube.RealKube]:
    require_binaries()
    started = realkube.start_real_clusters(
        tmp_path_factory.mktemp("defaults"),
        ("management",),
        controller_manager=True,
        extra_controllers=WORKLOADS,
    )
    yield started
    started.stop()


def _kubectl(kubeconfig: Path, home: Path, *args: str) -> Any:
    out = _must([KUBECTL, "--kubeconfig", str(kubeconfig), *args, "-o", "json"], home, kubeconfig)
    return json.loads(out)


def _required(ref: dict[str, Any] | None, kind: str, key: str = "name") -> set[tuple[str, str]]:
    if not ref or ref.get("optional"):
        return set()
    return {(kind, ref.get(key) or ref["name"])}


def _needs(pod: dict[str, Any]) -> set[tuple[str, str]]:
    """Every (kind, name) a Pod cannot start without."""
    spec = pod["spec"]
    found = {("serviceaccounts", spec["serviceAccountName"])}
    for volume in spec.get("volumes", ()):
        for source in [volume, *(volume.get("projected") or {}).get("sources", ())]:
            found |= _required(source.get("secret"), "secrets", "secretName")
            found |= _required(source.get("configMap"), "configmaps")
    for container in [*spec.get("initContainers", ()), *spec["containers"]]:
        for source in container.get("envFrom", ()):
            found |= _required(source.get("secretRef"), "secrets")
            found |= _required(source.get("configMapRef"), "configmaps")
        for env in container.get("env", ()):
            value_from = env.get("valueFrom") or {}
            found |= _required(value_from.get("secretKeyRef"), "secrets")
            found |= _required(value_from.get("configMapKeyRef"), "configmaps")
    return found


def test_a_default_install_leaves_no_pod_waiting_for_an_object_nobody_creates(
    cluster: realkube.RealKube, tmp_path: Path
) -> None:
    kubeconfig = cluster["management"].kubeconfig
    home = tmp_path / "home"
    home.mkdir()
    helm = [str(HELM), "--kubeconfig", str(kubeconfig), "--namespace", NAMESPACE]
    install = [*helm, "install", RELEASE, str(CHART_DIR), "--create-namespace"]
    # Nothing but the defaults: Helm refuses, before it creates anything, and says what to set.
    refused = _run(install, home, kubeconfig)
    assert refused.returncode != 0
    assert "redis.auth.passwordSecret" in refused.stderr
    assert _run([*helm, "status", RELEASE], home, kubeconfig).returncode != 0
    # The one thing an installer must add: the Secret with the Redis password, named.
    kubectl = [KUBECTL, "--kubeconfig", str(kubeconfig)]
    _must([*kubectl, "create", "namespace", NAMESPACE], home, kubeconfig)
    _must(
        [*kubectl, "-n", NAMESPACE, "create", "secret",
         "generic", "tenantdb-redis", "--from-literal=password=not-a-real-one"],
        home,
        kubeconfig,
    )  # fmt: skip
    notes = _must([*install, "--set", "redis.auth.passwordSecret=tenantdb-redis"], home, kubeconfig)
    # The notes say what to check first and how to look at orders; Flower is off by default
    # and they say how to turn it on.
    assert "What to check first:" in notes
    assert f"exec deploy/{RELEASE}-tenantdb-worker -- tenantdb status" in notes
    assert "flower.enabled=true" in notes

    deployments = _kubectl(kubeconfig, home, "-n", NAMESPACE, "get", "deployments")["items"]
    assert sorted(d["metadata"]["name"] for d in deployments) == [
        f"{RELEASE}-tenantdb-{role}" for role in ("beat", "watcher", "worker")
    ]
    wanted = sum(d["spec"]["replicas"] for d in deployments)
    deadline = time.monotonic() + 90
    while True:
        pods = _kubectl(
            kubeconfig,
            home,
            "-n",
            NAMESPACE,
            "get",
            "pods",
            "-l",
            f"app.kubernetes.io/instance={RELEASE}",
        )["items"]
        if len(pods) >= wanted:
            break
        if time.monotonic() > deadline:
            events = _kubectl(kubeconfig, home, "-n", NAMESPACE, "get", "events")["items"]
            pytest.fail(
                f"{len(pods)} of {wanted} Pods created; events: "
                + "; ".join(str(e.get("message")) for e in events[-10:])
            )
        time.sleep(0.5)

    missing = []
    for pod in pods:
        for kind, name in sorted(_needs(pod)):
            done = _kubectl(kubeconfig, home, "-n", NAMESPACE, "get", kind, "--ignore-not-found")
            names = {o["metadata"]["name"] for o in done.get("items", ())}
            if name not in names:
                missing.append(f"{pod['metadata']['name']} needs {kind}/{name}")
    assert missing == []
