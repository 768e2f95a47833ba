"""The admission corpus on the devstack's API server and on a real kube-apiserver, the real one
being the oracle.

Both servers serve the chart's MariaDBDatabase CRD and the devstack's ControlPlane CRD
(devstack/crds/controlplane.py): the devstack a bare platform, the real server one cluster of
devstack/realkube.py with the same CRDs installed. Every case of
`tests/fixtures/admission_corpus.py` goes, on each server, through `kubectl create -f` (and, for
an update, `kubectl replace -f` of the new object over the stored one) in a namespace of its
own, named alike on both. An admitted case must be admitted by both. A rejected case must be
rejected by both with every expected substring, kubectl must print the same error for both, and
the 422 `Status` each server answers the same request with (sent again through the official
client, field validation Strict as kubectl asks for it) must be the same JSON document on both:
message, reason, code and every cause, nothing normalised (only the order of an object's keys,
which JSON does not carry, may differ).

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
from devstack.platform import Platform, start_platform
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
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Server]]:
    """The real server first (the oracle), then the devstack's, both serving the CRDs."""
    real = _real_kube(tmp_path_factory.mktemp("realkube"))
    devstack: Platform | None = None
    apis: list[client.ApiClient] = []
    try:
        devstack = start_platform(tmp_path_factory.mktemp("corpus"), (CONTEXT,), bare=True)
        found: list[Server] = []
        for name, path in (
            ("real", real[CONTEXT].kubeconfig),
            ("devstack", devstack.kubeconfig_path),
        ):
            api = config.new_client_from_config(str(path), context=CONTEXT)
            apis.append(api)
            found.append(Server(name, path, api))
        yield found
    finally:
        for api in apis:
            api.close()
        if devstack is not None:
            devstack.stop()
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
def test_case(case: AdmissionCase, servers: list[Server], tmp_path: Path) -> None:
    namespace = f"corpus-{secrets.token_hex(4)}"
    real, devstack = (
        _attempt(server, case, namespace, tmp_path / server.name) for server in servers
    )
    for name, outcome in (("real", real), ("devstack", devstack)):
        if case.admitted:
            assert outcome.returncode == 0, f"{name} refused it: {outcome.stderr}"
        else:
            assert outcome.returncode != 0, f"{name} admitted it"
            missing = [e for e in case.expect if e not in outcome.stderr]
            assert missing == [], f"{name} said: {outcome.stderr}"
    assert devstack.stderr == real.stderr
    assert devstack.status == real.status
