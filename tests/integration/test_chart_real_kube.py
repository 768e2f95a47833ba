"""The chart installed by `helm install` on real kube-apiservers, every object really created.

Two clusters from devstack/realkube.py, each with a kube-controller-manager: `management` gets
the management values with every optional object the chart renders there turned on (the
ServiceMonitors and the PrometheusRule, whose CRDs tests/fixtures/monitoring_crds.py stands in
for, two worker pools with their PodDisruptionBudgets, both NetworkPolicies, the dashboard,
Flower, a Sentinel Redis, a kubeconfig Secret and a projected OpenBao token), and `edge-1` the
target-cluster values
(Roles and RoleBindings in assigned and placed namespaces, and a ServiceAccount token Secret).
The Helm binary is the one `make kube` builds into tools/kube/bin (tools/kube/helm pins it); it
installs the chart's CRDs, then every template with server-side apply, no dry run.

The tests check that the release is deployed, that the chart's CRDs are Established, that every
object of the release's manifest reads back from the server with everything the chart set (the
server may add defaults, never drop or change a rendered field) and with Helm as its apply
manager, that the Helm binary renders what the chart tests render through helm_python, and that
the token controller fills in the target cluster's token Secret.

KEDA stays off: its ScaledObject and TriggerAuthentication need KEDA's CRDs, and a stand-in
that keeps `spec` as it comes would check nothing a real server checks.

The binaries come from `make kube`, which `make test` runs first; without them the tests fail
and say so.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from devstack import realkube
from devstack.chart import CHART_DIR, render_chart
from tests.fixtures.monitoring_crds import monitoring_crds

ROOT = Path(__file__).resolve().parents[2]
HELM = realkube.BIN_DIR / "helm"
HELM_MODULE = ROOT / "tools" / "kube" / "helm" / "go.mod"
KUBECTL = str(ROOT / ".venv" / "bin" / "kubectl")
CHART_CRDS = sorted((CHART_DIR / "crds").glob("*.yaml"))
RELEASE = "tdb"
NAMESPACE = "tenantdb-system"
MANAGEMENT = "management"
TARGET = "edge-1"
COMMAND_TIMEOUT = 60
CLUSTER_SCOPED = {
    "ClusterRole",
    "ClusterRoleBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
}

MANAGEMENT_VALUES: dict[str, Any] = {
    "imagePullSecrets": [{"name": "registry"}],
    "serviceAccount": {"annotations": {"example.com/owner": "platform"}},
    "redis": {
        "existingSecret": "tenantdb-redis",
        "sentinel": {"enabled": True, "hosts": ["sentinel-0:26379", "sentinel-1:26379"]},
    },
    "keyPrefix": "prod:",
    "openbao": {"role": "tenantdb", "tokenAudience": "openbao"},
    "kubeconfig": {
        "existingSecret": "tenantdb-clusters",
        "managementContext": "mgmt",
        "targetContexts": ["edge-1", "edge-2"],
    },
    "metrics": {
        "service": {"annotations": {"example.com/scrape": "true"}},
        "serviceMonitor": {"enabled": True, "labels": {"release": "prom"}},
        "prometheusRule": {
            "enabled": True,
            "labels": {"release": "prom"},
            "runbookUrl": "https://git.example.com/tenantdb/blob/v0.1.0/docs/operations.md",
        },
        "dashboard": {"enabled": True, "annotations": {"grafana_folder": "tenantdb"}},
    },
    "config": {"TENANTDB_TASK_TIME_LIMIT_SECONDS": 100, "TENANTDB_RESYNC_SECONDS": "0"},
    "worker": {
        "concurrency": 8,
        "pools": [
            {"name": "chains", "queues": ["reconcile", "provision", "teardown"]},
            {"name": "delivery", "queues": ["delivery"], "replicas": 1, "concurrency": 2},
        ],
        "extraArgs": ["-O", "fair"],
        "podDisruptionBudget": {"enabled": True, "maxUnavailable": "50%"},
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}
        ],
        "affinity": {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {
                                "matchLabels": {"app.kubernetes.io/component": "worker"}
                            },
                        },
                    }
                ]
            }
        },
    },
    "watcher": {"nodeSelector": {"kubernetes.io/os": "linux"}},
    "flower": {"enabled": True, "service": {"annotations": {"example.com/expose": "internal"}}},
    "keda": {"enabled": False},
    "networkPolicy": {
        "enabled": True,
        "metricsFrom": [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}],
        "flowerFrom": [{"podSelector": {"matchLabels": {"app": "ops-proxy"}}}],
        "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]}],
    },
    "podAnnotations": {"example.com/team": "databases"},
    "podLabels": {"example.com/tier": "control"},
}
TARGET_VALUES: dict[str, Any] = {
    "targetCluster": {
        "enabled": True,
        "assignedNamespaces": ["team-a", "team-b"],
        "placedNamespaces": ["openstack"],
        "createTokenSecret": True,
    }
}
VALUES = {MANAGEMENT: MANAGEMENT_VALUES, TARGET: TARGET_VALUES}
EXPECTED_KINDS = {
    MANAGEMENT: {
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "Service",
        "Deployment",
        "PodDisruptionBudget",
        "NetworkPolicy",
        "ServiceMonitor",
        "PrometheusRule",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    },
    TARGET: {
        "ServiceAccount",
        "Secret",
        "Role",
        "RoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    },
}

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


@dataclass(frozen=True)
class Installed:
    """One cluster with the release installed."""

    name: str
    kubeconfig: Path
    home: Path
    manifest: list[dict[str, Any]]
    """The release's objects, as `helm get manifest` prints them."""
    install_stderr: str
    """What `helm install` wrote to stderr, less client-go's own log of the watches it cancels:
    the server's warnings, if any."""


def _env(home: Path, kubeconfig: Path) -> dict[str, str]:
    """Only what Helm and kubectl need, every cache and config directory under `home`."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "KUBECONFIG": str(kubeconfig),
        "KUBECACHEDIR": str(home / "kube-cache"),
        "HELM_CACHE_HOME": str(home / "helm-cache"),
        "HELM_CONFIG_HOME": str(home / "helm-config"),
        "HELM_DATA_HOME": str(home / "helm-data"),
    }


def _run(command: list[str], home: Path, kubeconfig: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        env=_env(home, kubeconfig),
        cwd=home,
        check=False,
    )


def _must(command: list[str], home: Path, kubeconfig: Path) -> str:
    done = _run(command, home, kubeconfig)
    if done.returncode != 0:
        pytest.fail(f"{' '.join(command[:3])} failed ({done.returncode}):\n{done.stderr}")
    return done.stdout


def _wait_established(kubectl: list[str], crds: Path, home: Path, kubeconfig: Path) -> None:
    """Wait for freshly created CRDs to be Established. ``kubectl wait`` fails at once, rather
    than waiting, on a CRD the server has not given any condition yet; that answer is asked
    again until the deadline."""
    command = [*kubectl, "wait", "--for=condition=Established", "--timeout=60s", "-f", str(crds)]
    deadline = time.monotonic() + 60
    while True:
        done = _run(command, home, kubeconfig)
        if done.returncode == 0:
            return
        if ".status.conditions accessor error" not in done.stderr or time.monotonic() > deadline:
            pytest.fail(f"kubectl wait for the CRDs failed ({done.returncode}):\n{done.stderr}")
        time.sleep(0.2)


def _install(kube: realkube.RealKube, name: str, home: Path) -> Installed:
    kubeconfig = kube[name].kubeconfig
    home.mkdir(parents=True, exist_ok=True)
    kubectl = [KUBECTL, "--kubeconfig", str(kubeconfig)]
    if name == MANAGEMENT:
        crds = home / "monitoring-crds.yaml"
        crds.write_text(yaml.safe_dump_all(monitoring_crds()))
        _must([*kubectl, "create", "-f", str(crds)], home, kubeconfig)
        _wait_established(kubectl, crds, home, kubeconfig)
    else:
        target = TARGET_VALUES["targetCluster"]
        for namespace in (*target["assignedNamespaces"], *target["placedNamespaces"]):
            _must([*kubectl, "create", "namespace", namespace], home, kubeconfig)
    values = home / "values.yaml"
    values.write_text(json.dumps(VALUES[name], indent=2))
    helm = [str(HELM), "--kubeconfig", str(kubeconfig), "--namespace", NAMESPACE]
    install = [*helm, "install", RELEASE, str(CHART_DIR), "--create-namespace"]
    done = _run([*install, "--values", str(values)], home, kubeconfig)
    if done.returncode != 0:
        pytest.fail(f"helm install on {name} failed ({done.returncode}):\n{done.stderr}")
    manifest = _must([*helm, "get", "manifest", RELEASE], home, kubeconfig)
    return Installed(
        name,
        kubeconfig,
        home,
        [doc for doc in yaml.safe_load_all(manifest) if doc],
        _server_warnings(done.stderr),
    )


def _server_warnings(stderr: str) -> str:
    """What Helm wrote to stderr, less client-go's own log of a watch it cancelled itself when
    it was done waiting for the CRDs (a line of the client's, not the server's)."""
    return "".join(
        line
        for line in stderr.splitlines(keepends=True)
        if not ("reflector.go" in line and "context canceled" in line)
    )


def require_binaries() -> None:
    """Fail, naming them, when the real API server's binaries or Helm are not built."""
    missing = realkube.missing_binaries()
    if not os.access(HELM, os.X_OK):
        missing.append("helm")
    if missing:
        pytest.fail(f"{', '.join(missing)} not built in tools/kube/bin; run `make kube`")


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[realkube.RealKube]:
    """Both clusters running; their logs stay in the pytest temporary directory."""
    require_binaries()
    started = realkube.start_real_clusters(
        tmp_path_factory.mktemp("realkube"), (MANAGEMENT, TARGET), controller_manager=True
    )
    yield started
    started.stop()


@pytest.fixture(scope="module")
def installed(
    kube: realkube.RealKube, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Installed]:
    """The release installed on both clusters, by cluster name."""
    base = tmp_path_factory.mktemp("helm")
    return {name: _install(kube, name, base / name) for name in (MANAGEMENT, TARGET)}


def _helm(cluster: Installed, *args: str) -> str:
    command = [str(HELM), "--kubeconfig", str(cluster.kubeconfig), "--namespace", NAMESPACE]
    return _must([*command, *args], cluster.home, cluster.kubeconfig)


def _kubectl_json(cluster: Installed, *args: str) -> Any:
    out = _must(
        [KUBECTL, "--kubeconfig", str(cluster.kubeconfig), *args, "-o", "json"],
        cluster.home,
        cluster.kubeconfig,
    )
    return json.loads(out)


def _differences(rendered: Any, stored: Any, path: str = "") -> list[str]:
    """Where `stored` lacks or changes something `rendered` has (extra stored fields are fine)."""
    if isinstance(rendered, dict):
        if not isinstance(stored, dict):
            return [f"{path or '.'}: {stored!r} is no object"]
        found: list[str] = []
        for key, value in rendered.items():
            if key not in stored:
                found.append(f"{path}.{key}: dropped")
            else:
                found += _differences(value, stored[key], f"{path}.{key}")
        return found
    if isinstance(rendered, list):
        if not isinstance(stored, list) or len(stored) != len(rendered):
            return [f"{path}: {stored!r} is not the {len(rendered)} items rendered"]
        found = []
        for i, (mine, theirs) in enumerate(zip(rendered, stored, strict=True)):
            found += _differences(mine, theirs, f"{path}[{i}]")
        return found
    if rendered != stored:
        return [f"{path}: rendered {rendered!r}, stored {stored!r}"]
    return []


def _ident(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return "/".join(p for p in (obj["kind"], meta.get("namespace", ""), meta["name"]) if p)


CLUSTERS = pytest.mark.parametrize("cluster", [MANAGEMENT, TARGET])


def test_helm_is_the_pinned_release(tmp_path: Path) -> None:
    if not os.access(HELM, os.X_OK):
        pytest.fail(f"helm not built in {realkube.BIN_DIR}; run `make kube`")
    pinned = re.search(r"^require helm\.sh/helm/v4 (v\S+)$", HELM_MODULE.read_text(), re.M)
    assert pinned is not None
    version = _must(
        [str(HELM), "version", "--template", "{{.Version}}"], tmp_path, tmp_path / "none"
    )
    assert version == pinned.group(1)


@CLUSTERS
def test_release_is_deployed(installed: dict[str, Installed], cluster: str) -> None:
    target = installed[cluster]
    status = json.loads(_helm(target, "status", RELEASE, "-o", "json"))
    assert status["info"]["status"] == "deployed"
    assert EXPECTED_KINDS[cluster] <= {obj["kind"] for obj in target.manifest}


@CLUSTERS
def test_server_sent_no_warnings(installed: dict[str, Installed], cluster: str) -> None:
    assert installed[cluster].install_stderr == ""


@CLUSTERS
@pytest.mark.parametrize("path", CHART_CRDS, ids=[p.name for p in CHART_CRDS])
def test_chart_crds_are_established(
    installed: dict[str, Installed], cluster: str, path: Path
) -> None:
    target = installed[cluster]
    name = yaml.safe_load(path.read_text())["metadata"]["name"]
    stored = _kubectl_json(target, "get", f"customresourcedefinitions/{name}")
    conditions = {c["type"]: c["status"] for c in stored["status"]["conditions"]}
    assert conditions.get("Established") == "True", conditions
    assert conditions.get("NamesAccepted") == "True", conditions


@CLUSTERS
def test_every_object_reads_back_as_rendered(installed: dict[str, Installed], cluster: str) -> None:
    target = installed[cluster]
    listing = target.home / "release.yaml"
    # Helm puts the objects the chart leaves without a namespace into the release's; kubectl
    # drops the namespace of a cluster-scoped one.
    listing.write_text(
        yaml.safe_dump_all(
            [
                {**obj, "metadata": {"namespace": NAMESPACE, **obj["metadata"]}}
                for obj in target.manifest
            ]
        )
    )
    stored = _kubectl_json(target, "get", "-f", str(listing), "--show-managed-fields")["items"]
    assert [(o["kind"], o["metadata"]["name"]) for o in stored] == [
        (o["kind"], o["metadata"]["name"]) for o in target.manifest
    ]
    problems: list[str] = []
    for rendered, live in zip(target.manifest, stored, strict=True):
        if live["kind"] not in CLUSTER_SCOPED and "namespace" not in rendered["metadata"]:
            rendered = {**rendered, "metadata": {"namespace": NAMESPACE, **rendered["metadata"]}}
        problems += [f"{_ident(live)} {d}" for d in _differences(rendered, live)]
        managers = {
            (m["manager"], m["operation"]) for m in live["metadata"].get("managedFields", [])
        }
        if ("helm", "Apply") not in managers:
            problems.append(f"{_ident(live)}: not server-side applied by helm: {managers}")
    assert problems == []


@CLUSTERS
def test_helm_renders_what_the_chart_tests_render(
    installed: dict[str, Installed], cluster: str
) -> None:
    ours = render_chart(VALUES[cluster], release=RELEASE, namespace=NAMESPACE)
    assert sorted(map(_ident, installed[cluster].manifest)) == sorted(map(_ident, ours))
    by_ident = {_ident(obj): _unkeyed(obj) for obj in ours}
    for obj in installed[cluster].manifest:
        assert _unkeyed(obj) == by_ident[_ident(obj)], _ident(obj)


NOTE_KEYS = f"Secret/{RELEASE}-tenantdb-note-keys"


def _unkeyed(obj: dict[str, Any]) -> dict[str, Any]:
    """The object with the note keys' random value replaced by its length."""
    if _ident(obj) != NOTE_KEYS:
        return obj
    data = {k: len(base64.b64decode(v)) for k, v in obj["data"].items()}
    return {**obj, "data": data}


def test_the_note_keys_the_chart_made_are_kept_on_an_upgrade(
    installed: dict[str, Installed],
) -> None:
    cluster = installed[MANAGEMENT]
    name = NOTE_KEYS.rsplit("/", 1)[1]
    made = _kubectl_json(cluster, "get", "secret", name, "--namespace", NAMESPACE)["data"]["keys"]
    assert len(base64.b64decode(made)) == 64
    _helm(
        cluster, "upgrade", RELEASE, str(CHART_DIR), "--values", str(cluster.home / "values.yaml")
    )
    kept = _kubectl_json(cluster, "get", "secret", name, "--namespace", NAMESPACE)["data"]["keys"]
    assert kept == made  # a new key would refuse every note of the passes in flight


def test_target_token_secret_is_filled_in(installed: dict[str, Installed]) -> None:
    target = installed[TARGET]
    secret = next(o for o in target.manifest if o["kind"] == "Secret")
    deadline = time.monotonic() + 30
    while True:
        stored = _kubectl_json(
            target, "get", "secret", secret["metadata"]["name"], "--namespace", NAMESPACE
        )
        if {"token", "ca.crt", "namespace"} <= set(stored.get("data") or {}):
            break
        if time.monotonic() > deadline:
            pytest.fail(f"the token controller left {secret['metadata']['name']} empty: {stored}")
        time.sleep(0.2)


# ---------------------------------------------------------------- what each account may do

FULL = f"{RELEASE}-tenantdb"


def _can_i_list(cluster: Installed, account: str, namespace: str) -> set[tuple[str, str, str]]:
    """The resource rows of `kubectl auth can-i --list` for a ServiceAccount of the release:
    (resource, resource names, verbs), as the real authorizer reports them."""
    user = f"system:serviceaccount:{NAMESPACE}:{account}"
    out = _must(
        [KUBECTL, "--kubeconfig", str(cluster.kubeconfig), "auth", "can-i", "--list",
         f"--as={user}", "--namespace", namespace, "--no-headers"],
        cluster.home,
        cluster.kubeconfig,
    )  # fmt: skip
    rows: set[tuple[str, str, str]] = set()
    for line in out.splitlines():
        match = re.fullmatch(r"(\S+)\s+\[(.*?)\]\s+\[(.*?)\]\s+\[(.*?)\]", line.strip())
        if match and match.group(2) == "":  # the non-resource URL rows are every user's
            rows.add((match.group(1), match.group(3), match.group(4)))
    return rows


# What every authenticated account holds (system:basic-user and the like), which no chart grant
# adds to or takes from.
EVERYONE = {
    ("selfsubjectreviews.authentication.k8s.io", "", "create"),
    ("selfsubjectaccessreviews.authorization.k8s.io", "", "create"),
    ("selfsubjectrulesreviews.authorization.k8s.io", "", "create"),
    ("clustertrustbundles.certificates.k8s.io", "", "get list watch"),
}
WATCHER_CAN = EVERYONE | {
    ("mariadbdatabases.c5c3.io", "", "list watch"),
    ("mysqldatabases.shipstream.io", "", "list watch"),
    ("controlplanes.c5c3.io", "", "list watch"),
    ("secrets", "", "list watch"),
    ("externalsecrets.external-secrets.io", "", "list watch"),
    ("vaultdynamicsecrets.generators.external-secrets.io", "", "list watch"),
    ("databases.k8s.mariadb.com", "", "list watch"),
    ("mariadbs.k8s.mariadb.com", "", "list watch"),
    ("secretstores.external-secrets.io", "", "list watch"),
    ("clustersecretstores.external-secrets.io", "", "list watch"),
    ("serviceaccounts", "order-db-creds", "list watch"),
    ("certificates.cert-manager.io", "order-db-openbao-client", "list watch"),
    ("mysqlfailovergroups.shipstream.io", "", "list watch"),
}
WORKER_CAN = EVERYONE | {
    ("mariadbdatabases.c5c3.io", "", "get list patch"),
    ("mariadbdatabases.c5c3.io/status", "", "patch"),
    ("mariadbdatabases.c5c3.io/finalizers", "", "update"),
    ("mysqldatabases.shipstream.io", "", "get list patch"),
    ("mysqldatabases.shipstream.io/status", "", "patch"),
    ("mysqlfailovergroups.shipstream.io", "", "get"),
    ("events", "", "get create patch"),
    ("controlplanes.c5c3.io", "", "get"),
    ("mariadbs.k8s.mariadb.com", "", "get"),
    ("secretstores.external-secrets.io", "", "get"),
    ("clustersecretstores.external-secrets.io", "", "get"),
    ("databases.k8s.mariadb.com", "", "get list create patch delete"),
    ("externalsecrets.external-secrets.io", "", "get list create patch delete"),
    ("vaultdynamicsecrets.generators.external-secrets.io", "", "get list create patch delete"),
    ("certificates.cert-manager.io", "", "get create patch"),
    ("serviceaccounts", "", "create"),
    ("serviceaccounts", "order-db-creds", "get patch"),
    ("secrets", "", "get create patch delete"),
}
TARGET_ASSIGNED_CAN = EVERYONE | {
    ("mariadbdatabases.c5c3.io", "", "get list watch patch"),
    ("mariadbdatabases.c5c3.io/status", "", "patch"),
    ("mariadbdatabases.c5c3.io/finalizers", "", "update"),
    ("secrets", "", "get list watch create patch delete"),
    ("events", "", "get create patch"),
}
TARGET_PLACED_CAN = EVERYONE | {
    ("databases.k8s.mariadb.com", "", "get list watch create patch delete"),
    ("mariadbs.k8s.mariadb.com", "", "get list watch"),
    ("secrets", "", "get"),
}


@pytest.mark.parametrize(
    ("cluster", "account", "namespace", "expected"),
    [
        (MANAGEMENT, f"{FULL}-watcher", "tenant-a", WATCHER_CAN),
        (MANAGEMENT, f"{FULL}-worker", "tenant-a", WORKER_CAN),
        (MANAGEMENT, f"{FULL}-worker", "kube-system", WORKER_CAN),
        (MANAGEMENT, f"{FULL}-beat", NAMESPACE, EVERYONE),
        (MANAGEMENT, f"{FULL}-flower", NAMESPACE, EVERYONE),
        (TARGET, FULL, "team-a", TARGET_ASSIGNED_CAN),
        (TARGET, FULL, "openstack", TARGET_PLACED_CAN),
        (TARGET, FULL, "kube-system", EVERYONE),
    ],
    ids=["watcher", "worker", "worker-anywhere", "beat", "flower", "target-assigned",
         "target-placed", "target-elsewhere"],
)  # fmt: skip
def test_each_account_can_do_exactly_what_is_pinned(
    installed: dict[str, Installed],
    cluster: str,
    account: str,
    namespace: str,
    expected: set[tuple[str, str, str]],
) -> None:
    assert _can_i_list(installed[cluster], account, namespace) == expected


def _write_as(
    cluster: Installed, account: str, body: dict[str, Any], *, create: bool = False
) -> subprocess.CompletedProcess[str]:
    """Server-side apply `body` (or, with `create`, POST it) as a ServiceAccount of the release."""
    user = f"system:serviceaccount:{NAMESPACE}:{account}"
    source = cluster.home / "object.json"
    source.write_text(json.dumps(body))
    verb = ["create"] if create else ["apply", "--server-side"]
    return _run(
        [KUBECTL, "--kubeconfig", str(cluster.kubeconfig), *verb, "--field-manager=tenantdb",
         f"--as={user}", "-f", str(source)],
        cluster.home,
        cluster.kubeconfig,
    )  # fmt: skip


def _refused_once_in_force(
    cluster: Installed, account: str, body: dict[str, Any], *, create: bool = False
) -> subprocess.CompletedProcess[str]:
    """Write `body` as `account` until the admission policy refuses it (a new policy takes a
    moment to reach the server's admission chain); fail if it never does."""
    deadline = time.monotonic() + 30
    while True:
        done = _write_as(cluster, account, body, create=create)
        if done.returncode != 0 or time.monotonic() > deadline:
            return done
        # Accepted before the policy was in force: remove it and try again.
        meta = body["metadata"]
        _run(
            [KUBECTL, "--kubeconfig", str(cluster.kubeconfig), "delete", body["kind"].lower(),
             meta["name"], "--namespace", meta["namespace"], "--wait=false"],
            cluster.home,
            cluster.kubeconfig,
        )  # fmt: skip
        time.sleep(0.5)


ORDER_LABEL = "c5c3.io/mariadbdatabase-name"
"""The label every Secret tenantdb delivers carries: its order's name."""


def _secret(
    name: str,
    namespace: str,
    kind: str,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "annotations": annotations or {}}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": kind}


@pytest.mark.parametrize(
    ("cluster", "account", "namespace"),
    [(MANAGEMENT, f"{FULL}-worker", "kube-system"), (TARGET, FULL, "team-a")],
    ids=["management", "target"],
)
def test_the_writing_account_cannot_mint_a_token_through_a_secret(
    installed: dict[str, Installed], cluster: str, account: str, namespace: str
) -> None:
    """RBAC lets the writing account create Secrets; the admission policy keeps it from
    creating the one kind of Secret the token controller fills in with a ServiceAccount's
    token, while the Opaque Secrets tenantdb delivers still pass."""
    on = installed[cluster]
    token = _secret("minted", namespace, "kubernetes.io/service-account-token",
                    annotations={"kubernetes.io/service-account.name": "default"})  # fmt: skip
    refused = _refused_once_in_force(on, account, token)
    assert refused.returncode != 0
    assert "tenantdb writes Opaque Secrets only" in refused.stderr, refused.stderr
    delivered = _write_as(
        on, account, _secret("delivered", namespace, "Opaque", labels={ORDER_LABEL: "app-db"})
    )
    assert delivered.returncode == 0, delivered.stderr


def _as(cluster: Installed, account: str, *args: str) -> subprocess.CompletedProcess[str]:
    user = f"system:serviceaccount:{NAMESPACE}:{account}"
    return _run(
        [KUBECTL, "--kubeconfig", str(cluster.kubeconfig), f"--as={user}", *args],
        cluster.home,
        cluster.kubeconfig,
    )


def test_the_writing_account_changes_and_deletes_only_the_secrets_it_delivers(
    installed: dict[str, Installed],
) -> None:
    """RBAC lets the worker patch and delete any Secret of the namespaces it delivers to; the
    admission policy holds it to the ones that carry an order's name label."""
    on, account, namespace = installed[MANAGEMENT], f"{FULL}-worker", "kube-system"
    kubectl = [KUBECTL, "--kubeconfig", str(on.kubeconfig), "--namespace", namespace]
    for name in ("someone-elses", "labelled-later"):
        made = _run([*kubectl, "create", "secret", "generic", name, "--from-literal=k=v"],
                    on.home, on.kubeconfig)  # fmt: skip
        assert made.returncode == 0, made.stderr
    refusal = "tenantdb changes and deletes only the Secrets it delivers"
    deadline = time.monotonic() + 30
    while True:  # a policy just installed takes a moment to reach the admission chain
        deleted = _as(on, account, "delete", "secret", "someone-elses", "-n", namespace)
        if deleted.returncode != 0 or time.monotonic() > deadline:
            break
        _run([*kubectl, "create", "secret", "generic", "someone-elses", "--from-literal=k=v"],
             on.home, on.kubeconfig)  # fmt: skip
        time.sleep(0.5)
    assert refusal in deleted.stderr, deleted.stderr
    patch = json.dumps({"data": {"k": "ZXZpbA=="}})
    patched = _as(on, account, "patch", "secret", "someone-elses", "-n", namespace, "-p", patch)
    assert refusal in patched.stderr, patched.stderr
    # Labelling someone else's Secret first does not make it tenantdb's to change.
    label = json.dumps({"metadata": {"labels": {ORDER_LABEL: "app-db"}}})
    relabelled = _as(on, account, "patch", "secret", "labelled-later", "-n", namespace, "-p", label)
    assert refusal in relabelled.stderr, relabelled.stderr
    ours = _secret("app-db-credentials", namespace, "Opaque", labels={ORDER_LABEL: "app-db"})
    assert _write_as(on, account, ours).returncode == 0
    changed = _as(
        on, account, "patch", "secret", "app-db-credentials", "-n", namespace, "-p", patch
    )
    assert changed.returncode == 0, changed.stderr
    gone = _as(on, account, "delete", "secret", "app-db-credentials", "-n", namespace)
    assert gone.returncode == 0, gone.stderr


def test_the_worker_writes_no_service_account_but_the_shared_one(
    installed: dict[str, Installed],
) -> None:
    on = installed[MANAGEMENT]
    account = f"{FULL}-worker"

    def service_account(name: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": "kube-system"},
        }

    # RBAC lets the worker create any ServiceAccount (a create cannot be narrowed by name).
    refused = _refused_once_in_force(on, account, service_account("anyone"), create=True)
    assert refused.returncode != 0
    assert "tenantdb writes no ServiceAccount but order-db-creds" in refused.stderr, refused.stderr
    shared = _write_as(on, account, service_account("order-db-creds"))
    assert shared.returncode == 0, shared.stderr
