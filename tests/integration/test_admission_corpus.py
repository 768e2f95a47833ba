"""The admission corpus on a real kube-apiserver serving tenantdb's CRDs.

The server serves the chart's MariaDBDatabase CRD and the devstack's ControlPlane CRD
(devstack/crds/controlplane.py), as one cluster of devstack/realkube.py. Every case of
`tests/fixtures/admission_corpus.py` goes through `kubectl create -f` (and, for an update,
`kubectl replace -f` of the new object over the stored one) in a namespace of its own. An
admitted case must be admitted; a rejected case must be rejected with every expected substring
in kubectl's error, and the same request sent again through the official client (field
validation Strict, as kubectl asks for it) must be refused too, with a 400 or 422 `Status`.

The binaries come from `make kube`, which `make test` runs first; without them the tests fail
and say so.
"""

from __future__ import annotations

import copy
import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from devstack import crds, realkube
from devstack.crds import controlplane
from devstack.kubeclient import RemoteCluster
from tests.fixtures.admission_corpus import CASES, CONTROL_PLANE_CASES, AdmissionCase

KUBECTL = str(Path(__file__).resolve().parents[2] / ".venv/bin/kubectl")
CONTEXT = "management"
SERVED = [crds.mariadbdatabase_crd(), controlplane.control_plane()]
PLURALS = {c["spec"]["names"]["kind"]: c["spec"]["names"]["plural"] for c in SERVED}

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


@dataclass(frozen=True)
class Server:
    """One API server the corpus runs against, as kubectl and the official client reach it."""

    name: str
    kubeconfig: Path
    api: client.ApiClient


@dataclass(frozen=True)
class Outcome:
    """What one server answered a case with."""

    returncode: int
    stderr: str
    status: dict[str, Any] | None
    """The `Status` of the rejection, from the same request sent again; None when admitted."""


def _real_kube(workdir: Path) -> realkube.RealKube:
    missing = [n for n in realkube.missing_binaries() if n != "kube-controller-manager"]
    if missing:
        pytest.fail(f"{', '.join(missing)} not built in tools/kube/bin; run `make kube`")
    started = realkube.start_real_clusters(workdir, (CONTEXT,))
    try:
        remote = RemoteCluster(
            CONTEXT,
            started[CONTEXT].server,
            ca_pem=started.ca_pem,
            client_cert=(str(started.pki.admin_cert), str(started.pki.admin_key)),
        )
        try:
            crds.install(remote, SERVED)
            crds.wait_established(remote, SERVED)
        finally:
            remote.close()
    except BaseException:
        started.stop()
        raise
    return started


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The real server, serving the CRDs."""
    real = _real_kube(tmp_path_factory.mktemp("realkube"))
    try:
        path = real[CONTEXT].kubeconfig
        api = config.new_client_from_config(str(path), context=CONTEXT)
        try:
            yield Server("real", path, api)
        finally:
            api.close()
    finally:
        real.stop()


def _kubectl(server: Server, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "KUBECONFIG": str(server.kubeconfig),
        "KUBECACHEDIR": str(cwd.parent / f"kube-cache-{server.name}"),
        "HOME": str(cwd),
    }
    return subprocess.run(
        [KUBECTL, "--context", CONTEXT, *args],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
        cwd=cwd,
        check=False,
    )


def _write(directory: Path, stem: str, obj: dict[str, Any]) -> str:
    """Write `obj` as `<stem>.yaml` and return the relative name kubectl quotes in errors."""
    (directory / f"{stem}.yaml").write_text(yaml.safe_dump(obj))
    return f"{stem}.yaml"


def _status_of(server: Server, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
    """Send `obj` again, as a create or (with a resourceVersion) a replace; return the Status
    the server refuses it with."""
    api = client.CustomObjectsApi(server.api)
    group, version = obj["apiVersion"].split("/")
    plural = PLURALS[obj["kind"]]
    try:
        if obj["metadata"].get("resourceVersion"):
            api.replace_namespaced_custom_object(
                group,
                version,
                namespace,
                plural,
                obj["metadata"]["name"],
                obj,
                field_validation="Strict",
            )
        else:
            api.create_namespaced_custom_object(
                group, version, namespace, plural, obj, field_validation="Strict"
            )
    except ApiException as exc:
        status: dict[str, Any] = json.loads(exc.body)
        return status
    pytest.fail(f"{server.name} admitted the second time what kubectl saw refused: {obj}")


def _attempt(server: Server, case: AdmissionCase, namespace: str, cwd: Path) -> Outcome:
    cwd.mkdir(parents=True, exist_ok=True)
    client.CoreV1Api(server.api).create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace))
    )
    try:
        sent = case.obj
        if case.old is None:
            result = _kubectl(
                server, cwd, "-n", namespace, "create", "-f", _write(cwd, "case", sent)
            )
        else:
            old = _write(cwd, "old", case.old)
            stored = _kubectl(server, cwd, "-n", namespace, "create", "-f", old, "-o", "json")
            assert stored.returncode == 0, f"{server.name}: {stored.stderr}"
            sent = copy.deepcopy(case.obj)
            sent["metadata"]["resourceVersion"] = json.loads(stored.stdout)["metadata"][
                "resourceVersion"
            ]
            result = _kubectl(
                server, cwd, "-n", namespace, "replace", "-f", _write(cwd, "new", sent)
            )
        status = None if result.returncode == 0 else _status_of(server, namespace, sent)
        return Outcome(result.returncode, result.stderr, status)
    finally:
        client.CoreV1Api(server.api).delete_namespace(namespace)


@pytest.mark.parametrize("case", [*CASES, *CONTROL_PLANE_CASES], ids=lambda c: c.id)
def test_case(case: AdmissionCase, server: Server, tmp_path: Path) -> None:
    namespace = f"corpus-{secrets.token_hex(4)}"
    outcome = _attempt(server, case, namespace, tmp_path / server.name)
    if case.admitted:
        assert outcome.returncode == 0, f"refused: {outcome.stderr}"
        return
    assert outcome.returncode != 0, "admitted"
    missing = [e for e in case.expect if e not in outcome.stderr]
    assert missing == [], f"kubectl said: {outcome.stderr}"
    assert outcome.status is not None, "the official client's request was admitted"
    assert outcome.status["code"] in (400, 422), outcome.status
