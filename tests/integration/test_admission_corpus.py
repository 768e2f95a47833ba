"""The admission corpus, applied with kubectl against a devstack API server serving the chart's CRD.

Every case of `tests/fixtures/admission_corpus.py` goes through `kubectl create -f` (and, for an
update, `kubectl replace -f` of the new object over the stored one) in a namespace of its own:
a rejected case must fail with every expected substring, an admitted case must succeed.
"""

from __future__ import annotations

import copy
import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from devstack.platform import Platform, start_platform
from tests.fixtures.admission_corpus import CASES, CONTROL_PLANE_CASES, AdmissionCase

KUBECTL = str(Path(__file__).resolve().parents[2] / ".venv/bin/kubectl")


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    """API servers with the CRDs installed and nothing else."""
    running = start_platform(tmp_path_factory.mktemp("corpus"), ("management",), bare=True)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def core(bare: Platform) -> Iterator[client.CoreV1Api]:
    """CoreV1Api on the management cluster."""
    api = config.new_client_from_config(str(bare.kubeconfig_path), context="management")
    yield client.CoreV1Api(api)
    api.close()


def _kubectl(bare: Platform, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "KUBECONFIG": str(bare.kubeconfig_path),
        "KUBECACHEDIR": str(home / "kube-cache"),
        "HOME": str(home),
    }
    return subprocess.run(
        [KUBECTL, *args], capture_output=True, text=True, timeout=30, env=env, check=False
    )


def _write(directory: Path, stem: str, obj: dict[str, Any]) -> str:
    path = directory / f"{stem}.yaml"
    path.write_text(yaml.safe_dump(obj))
    return str(path)


@pytest.mark.parametrize("case", [*CASES, *CONTROL_PLANE_CASES], ids=lambda c: c.id)
def test_case(
    case: AdmissionCase,
    bare: Platform,
    core: client.CoreV1Api,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    home = tmp_path_factory.getbasetemp() / "kubectl-home"
    home.mkdir(exist_ok=True)
    namespace = f"corpus-{secrets.token_hex(4)}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    try:
        if case.old is None:
            result = _kubectl(
                bare, home, "-n", namespace, "create", "-f", _write(tmp_path, "case", case.obj)
            )
        else:
            stored = _kubectl(
                bare,
                home,
                "-n",
                namespace,
                "create",
                "-f",
                _write(tmp_path, "old", case.old),
                "-o",
                "json",
            )
            assert stored.returncode == 0, stored.stderr
            update = copy.deepcopy(case.obj)
            update["metadata"]["resourceVersion"] = json.loads(stored.stdout)["metadata"][
                "resourceVersion"
            ]
            result = _kubectl(
                bare, home, "-n", namespace, "replace", "-f", _write(tmp_path, "new", update)
            )
        if case.admitted:
            assert result.returncode == 0, result.stderr
        else:
            assert result.returncode != 0, result.stdout
            for expected in case.expect:
                assert expected in result.stderr
    finally:
        core.delete_namespace(namespace)
