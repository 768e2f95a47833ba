"""kubectl against the devstack.

get, get -w, apply, apply --server-side, edit, patch, delete, explain, and `devstack up`.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes import config as kube_config

from devstack.kube.managed_fields import LAST_APPLIED
from devstack.tests.kube.conftest import DB_CRD, KUBECTL, Kubectl

DB = """
apiVersion: c5c3.io/v1alpha1
kind: MariaDBDatabase
metadata:
  name: orders
  namespace: {ns}
spec:
  databaseName: orders
"""


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_apply_get_patch_edit_delete_custom_resource(
    kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    crd = tmp_path / "crd.yaml"
    crd.write_text(yaml.safe_dump(DB_CRD))
    assert "serverside-applied" in _ok(kubectl("apply", "--server-side", "-f", str(crd)))
    assert "created" in _ok(kubectl("apply", "-f", "-", stdin=DB.format(ns=namespace)))
    assert "unchanged" in _ok(kubectl("apply", "-f", "-", stdin=DB.format(ns=namespace)))
    table = _ok(kubectl("-n", namespace, "get", "mdb"))
    assert table.split("\n")[0].split() == ["NAME", "DATABASE", "READY", "AGE"]
    assert table.split("\n")[1].split()[:2] == ["orders", "orders"]
    _ok(
        kubectl(
            "-n",
            namespace,
            "patch",
            "mdb",
            "orders",
            "--type",
            "merge",
            "-p",
            '{"spec":{"sizeGi":5}}',
        )
    )
    editor = tmp_path / "editor.sh"
    editor.write_text("#!/bin/sh\nsed -i 's/sizeGi: 5/sizeGi: 6/' \"$1\"\n")
    editor.chmod(0o755)
    assert "edited" in _ok(
        kubectl("-n", namespace, "edit", "mdb", "orders", extra_env={"KUBE_EDITOR": str(editor)})
    )
    got = json.loads(_ok(kubectl("-n", namespace, "get", "mdb", "orders", "-o", "json")))
    assert got["spec"]["sizeGi"] == 6
    assert got["metadata"]["generation"] == 3
    refused = kubectl(
        "-n",
        namespace,
        "patch",
        "mdb",
        "orders",
        "--type",
        "merge",
        "-p",
        '{"spec":{"engine":"mysql"}}',
    )
    assert refused.returncode != 0
    assert "spec: Invalid value: engine is immutable" in refused.stderr
    assert "deleted" in _ok(kubectl("-n", namespace, "delete", "mdb", "orders"))
    assert "No resources found" in kubectl("-n", namespace, "get", "mdb").stderr


def test_apply_and_strategic_patch_builtins(
    kubectl: Kubectl, core: client.CoreV1Api, namespace: str
) -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s", "namespace": namespace},
        "stringData": {"a": "b"},
    }
    _ok(kubectl("apply", "-f", "-", stdin=yaml.safe_dump(secret)))
    _ok(kubectl("-n", namespace, "patch", "secret", "s", "-p", '{"metadata":{"labels":{"x":"y"}}}'))
    assert core.read_namespaced_secret("s", namespace).metadata.labels == {"x": "y"}
    listing = _ok(kubectl("-n", namespace, "get", "secrets"))
    assert listing.split("\n")[1].split()[:3] == ["s", "Opaque", "1"]


def test_server_side_apply_conflict_is_reported(kubectl: Kubectl, namespace: str) -> None:
    cm: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": namespace},
        "data": {"k": "one"},
    }
    _ok(
        kubectl(
            "apply",
            "--server-side",
            "--field-manager",
            "first",
            "-f",
            "-",
            stdin=yaml.safe_dump(cm),
        )
    )
    cm["data"]["k"] = "two"
    clash = kubectl(
        "apply", "--server-side", "--field-manager", "second", "-f", "-", stdin=yaml.safe_dump(cm)
    )
    assert clash.returncode != 0
    assert 'conflict with "first": .data.k' in clash.stderr
    _ok(
        kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager",
            "second",
            "-f",
            "-",
            stdin=yaml.safe_dump(cm),
        )
    )


def test_server_side_apply_takes_over_what_a_client_side_apply_set(
    kubectl: Kubectl, namespace: str, db_crd: Any
) -> None:
    order = DB.format(ns=namespace) + "  sizeGi: 5\n"
    assert "created" in _ok(kubectl("apply", "-f", "-", stdin=order))

    edited = order.replace("sizeGi: 5", "sizeGi: 7")
    assert "serverside-applied" in _ok(kubectl("apply", "--server-side", "-f", "-", stdin=edited))

    shown = kubectl("-n", namespace, "get", "mdb", "orders", "-o", "json", "--show-managed-fields")
    got = json.loads(_ok(shown))
    assert got["spec"]["sizeGi"] == 7
    fields = {e["manager"]: json.dumps(e["fieldsV1"]) for e in got["metadata"]["managedFields"]}
    assert "f:sizeGi" in fields["kubectl"]
    assert "f:sizeGi" not in fields["kubectl-client-side-apply"], "the field changed hands"
    last = json.loads(got["metadata"]["annotations"][LAST_APPLIED])
    assert last["spec"]["sizeGi"] == 7, "the annotation follows kubectl's server-side apply"


def test_server_side_apply_still_conflicts_over_a_field_changed_since_the_client_side_apply(
    kubectl: Kubectl, namespace: str, db_crd: Any
) -> None:
    order = DB.format(ns=namespace) + "  sizeGi: 3\n"
    _ok(kubectl("apply", "-f", "-", stdin=order))
    patch = '{"spec":{"sizeGi":4}}'
    _ok(kubectl("-n", namespace, "patch", "mdb", "orders", "--type", "merge", "-p", patch))

    clash = kubectl(
        "apply", "--server-side", "-f", "-", stdin=order.replace("sizeGi: 3", "sizeGi: 5")
    )

    assert clash.returncode != 0
    assert 'conflict with "kubectl-patch"' in clash.stderr
    assert ".spec.sizeGi" in clash.stderr


def test_get_watch_prints_changes(
    kubeconfig_path: Path, core: client.CoreV1Api, namespace: str, tmp_path: Path
) -> None:
    core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="first"))
    )
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig_path),
        "KUBECACHEDIR": str(tmp_path / "watch-cache"),
        "HOME": str(tmp_path),
    }
    args = [KUBECTL, "-n", namespace, "get", "configmaps", "-w", "--output-watch-events"]
    lines: queue.Queue[str] = queue.Queue()
    with subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    ) as proc:

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.put(line)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            assert lines.get(timeout=15).split()[:2] == ["EVENT", "NAME"]
            assert lines.get(timeout=15).split()[:2] == ["ADDED", "first"]
            core.create_namespaced_config_map(
                namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="second"))
            )
            assert lines.get(timeout=15).split()[:2] == ["ADDED", "second"]
            core.delete_namespaced_config_map("first", namespace)
            assert lines.get(timeout=15).split()[:2] == ["DELETED", "first"]
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=10)
            reader.join(timeout=5)


def test_explain_builtin_and_custom(kubectl: Kubectl, db_crd: Any) -> None:
    out = _ok(kubectl("explain", "mariadbdatabases.spec.databaseName"))
    assert "Database name." in out
    assert "KIND:       Secret" in _ok(kubectl("explain", "secrets"))


def test_devstack_up_writes_kubeconfig_and_stops_on_sigterm(tmp_path: Path) -> None:
    args = [
        sys.executable,
        "-m",
        "devstack",
        "up",
        "--state-dir",
        str(tmp_path),
        "--clusters",
        "management,edge-1",
    ]
    with subprocess.Popen(args, stdout=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().startswith("devstack ready")
            config = yaml.safe_load((tmp_path / "kubeconfig").read_text())
            assert [c["name"] for c in config["contexts"]] == ["management", "edge-1"]
            for context in ("management", "edge-1"):
                with kube_config.new_client_from_config(
                    str(tmp_path / "kubeconfig"), context=context
                ) as api:
                    names = [n.metadata.name for n in client.CoreV1Api(api).list_namespace().items]
                assert "default" in names
        finally:
            proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0


def test_kubectl_create_sends_protobuf_for_builtins(
    kubectl: Kubectl, core: client.CoreV1Api
) -> None:
    _ok(kubectl("create", "namespace", "made-by-kubectl"))
    ns = "made-by-kubectl"
    _ok(kubectl("-n", ns, "create", "secret", "generic", "s", "--from-literal=user=app"))
    _ok(kubectl("-n", ns, "create", "configmap", "c", "--from-literal=k=v"))
    _ok(kubectl("-n", ns, "create", "serviceaccount", "robot"))
    token = _ok(kubectl("-n", ns, "create", "token", "robot", "--audience", "vault")).strip()
    assert token.count(".") == 2
    assert core.read_namespaced_secret("s", ns).data == {"user": "YXBw"}
    assert core.read_namespaced_config_map("c", ns).data == {"k": "v"}
