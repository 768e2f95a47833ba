"""`tenantdb crds apply`: the CRDs of every served kind, server-side applied, on the devstack's
API server and on a real kube-apiserver (the oracle of how server-side apply treats a CRD). Helm
installs a chart's CRDs once and never upgrades them; this is the upgrade path."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from devstack import realkube
from tenantdb.adapters.kube import CUSTOM_RESOURCE_DEFINITION, KubeClient, client_from_kubeconfig
from tenantdb.cli import EXIT_OK, EXIT_USAGE
from tenantdb.core.served import build_crds

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Iterator[Path]:
    """A real management cluster without tenantdb's CRDs, and an admin kubeconfig for it."""
    missing = realkube.missing_binaries()
    if missing:
        pytest.fail(f"{', '.join(missing)} not built in tools/kube/bin; run `make kube`")
    real = realkube.start_real_clusters(tmp_path / "real", ("management",))
    try:
        yield real["management"].kubeconfig
    finally:
        real.stop()


def _crds(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENANTDB_")}
    return subprocess.run(
        [sys.executable, "-m", "tenantdb.cli", "crds", *args],
        cwd=REPO,
        env={**env, "PYTHONPATH": str(REPO), "TENANTDB_KUBECONFIG": str(kubeconfig)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _client(kubeconfig: Path) -> KubeClient:
    current = yaml.safe_load(kubeconfig.read_text())["current-context"]
    return client_from_kubeconfig(str(kubeconfig), current, "")


def test_crds_apply_installs_and_upgrades_the_served_crds(kubeconfig: Path) -> None:
    wanted = build_crds()
    client = _client(kubeconfig)

    checked = _crds(kubeconfig, "apply", "--dry-run")
    assert checked.returncode == EXIT_OK, checked.stderr
    assert all(client.get_or_none(CUSTOM_RESOURCE_DEFINITION, None, n) is None for n in wanted)

    done = _crds(kubeconfig, "apply")
    assert done.returncode == EXIT_OK, done.stderr
    assert done.stdout.splitlines() == [f"customresourcedefinition {n} applied" for n in wanted]

    # An older CRD on the server (a printer column less) is brought to this tenantdb's.
    name = next(iter(wanted))
    stored = client.get(CUSTOM_RESOURCE_DEFINITION, None, name)
    columns = stored["spec"]["versions"][0]["additionalPrinterColumns"]
    older = {
        "spec": {
            "versions": [{**stored["spec"]["versions"][0], "additionalPrinterColumns": columns[:1]}]
        }
    }
    client.patch(CUSTOM_RESOURCE_DEFINITION, None, name, older)
    again = _crds(kubeconfig, "apply")
    assert again.returncode == EXIT_OK, again.stderr
    stored = client.get(CUSTOM_RESOURCE_DEFINITION, None, name)
    expected = wanted[name]["spec"]["versions"][0]["additionalPrinterColumns"]
    assert [c["name"] for c in stored["spec"]["versions"][0]["additionalPrinterColumns"]] == [
        c["name"] for c in expected
    ]

    unknown = _crds(kubeconfig, "apply", "--cluster", "nowhere")
    assert unknown.returncode == EXIT_USAGE
    assert unknown.stderr.count("\n") == 1
