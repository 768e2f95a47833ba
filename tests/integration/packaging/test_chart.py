"""The Helm chart, rendered and linted by the real Helm engine (helm-python-sdk, Helm v4).

Built-in kinds are checked against the Kubernetes OpenAPI schemas that kubernetes-validate ships
(offline); the KEDA and Prometheus-operator kinds, which it has no schema for, are checked field by
field here. The devstack API server's own checks are in test_chart_apiserver.py.
"""

from __future__ import annotations

from typing import Any

import helm_python
import kubernetes_validate
import pytest
import yaml
from helm_python import Chart
from helm_python.errors import HelmRenderError

from tenantdb.adapters.workqueue import WorkQueueKeys
from tenantdb.core.served import build_crds
from tests.integration.packaging.conftest import (
    CHART_DIR,
    NAMESPACE,
    RELEASE,
    Manifest,
    by_kind,
    known_settings,
    named,
    render,
    tenantdb_accepts,
)

KUBE_VERSION = "1.30.0"
FULL = f"{RELEASE}-tenantdb"
QUEUES = ["reconcile", "provision", "delivery", "teardown"]

ALL_ON: dict[str, Any] = {
    "redis": {
        "existingSecret": "tenantdb-redis",
        "sentinel": {"enabled": True, "hosts": ["sentinel-0:26379", "sentinel-1:26379"]},
    },
    "keyPrefix": "prod:",
    "keda": {"enabled": True, "passwordSecret": "redis-password", "maxReplicas": 20},
    "metrics": {
        "serviceMonitor": {"enabled": True, "labels": {"release": "prom"}},
        "prometheusRule": {
            "enabled": True,
            "labels": {"release": "prom"},
            "runbookUrl": "https://docs.example.com/tenantdb/0.1.0/operations",
        },
        "dashboard": {"enabled": True},
    },
    "kubeconfig": {
        "existingSecret": "tenantdb-clusters",
        "managementContext": "mgmt",
        "targetContexts": ["edge-1", "edge-2"],
    },
    "openbao": {"role": "tenantdb", "tokenAudience": "openbao"},
    "flower": {"enabled": True},
    "config": {"TENANTDB_TASK_TIME_LIMIT_SECONDS": 100, "TENANTDB_RESYNC_SECONDS": "0"},
    "worker": {"concurrency": 8, "queues": ["provision", "teardown"], "extraArgs": ["-O", "fair"]},
    "networkPolicy": {
        "metricsFrom": [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}],
        "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]}],
    },
}
TARGET: dict[str, Any] = {
    "targetCluster": {
        "enabled": True,
        "assignedNamespaces": ["team-a", "team-b"],
        "placedNamespaces": ["openstack"],
        "createTokenSecret": True,
    }
}
POOLS: dict[str, Any] = {
    "worker": {
        "concurrency": 2,
        "pools": [
            {"name": "entry", "queues": ["reconcile", "provision", "teardown"], "replicas": 3},
            {
                "name": "delivery",
                "queues": ["delivery"],
                "concurrency": 8,
                "resources": {"requests": {"cpu": "500m"}},
                "podDisruptionBudget": {"enabled": False},
            },
        ],
    },
}

CASES = {"defaults": {}, "all-on": ALL_ON, "target-cluster": TARGET, "pools": POOLS}


@pytest.fixture(scope="module")
def default_objects(chart: Chart) -> list[Manifest]:
    return render(chart)


@pytest.fixture(scope="module")
def all_on(chart: Chart) -> list[Manifest]:
    return render(chart, ALL_ON)


def _containers(objects: list[Manifest]) -> dict[str, Manifest]:
    return {
        dep["metadata"]["name"]: dep["spec"]["template"]["spec"]["containers"][0]
        for dep in by_kind(objects, "Deployment")
    }


def _pod_labels(deployment: Manifest) -> dict[str, str]:
    labels: dict[str, str] = deployment["spec"]["template"]["metadata"]["labels"]
    return labels


def _rules(role: Manifest) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def _grants(group: str, resources: str, verbs: str) -> set[tuple[str, str, str]]:
    return {(group, r, v) for r in resources.split(",") for v in verbs.split(",")}


# ---------------------------------------------------------------- Helm's own checks


@pytest.mark.parametrize("values", CASES.values(), ids=CASES.keys())
def test_lint_strict_reports_no_warning(values: dict[str, Any]) -> None:
    report = helm_python.lint(
        CHART_DIR, values, strict=True, namespace=NAMESPACE, kube_version=f"v{KUBE_VERSION}"
    )
    # Severity 1 is INFO ("icon is recommended"); 2 and above are warnings and errors.
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert (problems, report["errors"]) == ([], [])


def test_rendered_crds_are_the_generated_files(chart: Chart) -> None:
    crds = {c["filename"]: c["data"] for c in chart.crds}
    files = sorted((CHART_DIR / "crds").glob("*.yaml"))
    assert sorted(crds) == [f"{chart.name}/crds/{f.name}" for f in files]
    for path in files:
        assert crds[f"{chart.name}/crds/{path.name}"] == path.read_text()
    # The files themselves are what the core's CRD builder produces.
    loaded = [yaml.safe_load(text) for text in crds.values()]
    assert {crd["metadata"]["name"]: crd for crd in loaded} == build_crds()


@pytest.mark.parametrize(
    ("values", "where"),
    [
        ({"worker": {"concurrency": 0}}, "/worker/concurrency"),
        ({"worker": {"queues": ["celery"]}}, "/worker/queues/0"),
        ({"metrics": {"port": 70000}}, "/metrics/port"),
        ({"redis": {"url": "http://redis:6379"}}, "/redis/url"),
        ({"redis": {"sentinel": {"enabled": True}}}, "/redis/sentinel/hosts"),
        ({"config": {"REDIS_URL": "redis://x"}}, "REDIS_URL"),
        ({"config": {"TENANTDB_KEY_PREFIX": "x:"}}, "TENANTDB_KEY_PREFIX"),
        ({"watcher": {"replica": 3}}, "/watcher"),
        ({"targetCluster": {"enabled": True}}, "/targetCluster/assignedNamespaces"),
    ],
    ids=[
        "concurrency",
        "queue",
        "port",
        "url-scheme",
        "sentinel-hosts",
        "config-name",
        "config-managed",
        "typo",
        "target",
    ],
)
def test_schema_rejects_a_bad_value(chart: Chart, values: dict[str, Any], where: str) -> None:
    with pytest.raises(helm_python.HelmValuesError) as caught:
        chart.validate_schema(values)
    assert where in str(caught.value)
    with pytest.raises(helm_python.HelmValuesError):
        render(chart, values)


@pytest.mark.parametrize("values", CASES.values(), ids=CASES.keys())
def test_schema_accepts_the_documented_values(chart: Chart, values: dict[str, Any]) -> None:
    chart.validate_schema(values)


# ---------------------------------------------------------------- structure


@pytest.mark.parametrize("values", CASES.values(), ids=CASES.keys())
def test_builtin_kinds_match_the_kubernetes_schemas(chart: Chart, values: dict[str, Any]) -> None:
    custom = {"ScaledObject", "TriggerAuthentication", "ServiceMonitor", "PrometheusRule"}
    for obj in render(chart, values):
        if obj["kind"] in custom:
            continue
        try:
            kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            where = "/".join(str(p) for p in exc.path)
            pytest.fail(f"{obj['kind']} {obj['metadata']['name']}: {where}: {exc.message}")


def test_defaults_render_the_management_install(default_objects: list[Manifest]) -> None:
    kinds = sorted({obj["kind"] for obj in default_objects})
    assert kinds == [
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "Deployment",
        "NetworkPolicy",
        "PodDisruptionBudget",
        "Secret",
        "Service",
        "ServiceAccount",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ]
    # Flower stays off until its credentials Secret exists: a default install mounts nothing
    # the chart does not create.
    assert sorted(d["metadata"]["name"] for d in by_kind(default_objects, "Deployment")) == [
        f"{FULL}-{role}" for role in ("beat", "watcher", "worker")
    ]
    # The one Secret is the workers' note keys, mounted by the workers only.
    assert [s["metadata"]["name"] for s in by_kind(default_objects, "Secret")] == [
        f"{FULL}-note-keys"
    ]
    mounting = {
        d["metadata"]["name"]
        for d in by_kind(default_objects, "Deployment")
        for v in d["spec"]["template"]["spec"]["volumes"]
        if (v.get("secret") or {}).get("secretName") == f"{FULL}-note-keys"
    }
    assert mounting == {f"{FULL}-worker"}


def test_each_role_runs_a_tenantdb_command(all_on: list[Manifest]) -> None:
    containers = _containers(all_on)
    for name, container in containers.items():
        assert "command" not in container, f"{name} must keep the image's tenantdb entrypoint"
        assert tenantdb_accepts(container["args"]), f"{name}: tenantdb {container['args']}"
    assert containers[f"{FULL}-watcher"]["args"] == ["watcher"]
    assert containers[f"{FULL}-beat"]["args"] == ["beat"]
    assert containers[f"{FULL}-flower"]["args"][0] == "flower"
    worker = containers[f"{FULL}-worker"]["args"]
    assert worker[:2] == ["worker", "--"]
    assert "--concurrency=8" in worker
    assert "--queues=provision,teardown" in worker
    assert worker[-2:] == ["-O", "fair"]


@pytest.mark.parametrize("values", [{}, ALL_ON], ids=["defaults", "all-on"])
def test_every_variable_is_a_tenantdb_setting(chart: Chart, values: dict[str, Any]) -> None:
    objects = render(chart, values)
    names = set(named(objects, "ConfigMap", FULL)["data"])
    for container in _containers(objects).values():
        names |= {env["name"] for env in container.get("env", [])}
    assert names - known_settings() == set()


def test_worker_settings_reach_the_pods(all_on: list[Manifest]) -> None:
    data = named(all_on, "ConfigMap", FULL)["data"]
    assert data["TENANTDB_KEY_PREFIX"] == "prod:"
    assert data["TENANTDB_REDIS_SENTINELS"] == "sentinel-0:26379,sentinel-1:26379"
    assert data["TENANTDB_REDIS_SENTINEL_MASTER"] == "mymaster"
    assert data["TENANTDB_METRICS_PORT"] == "9090"
    assert data["TENANTDB_OPENBAO_ROLE"] == "tenantdb"
    assert data["TENANTDB_TARGET_CONTEXTS"] == "edge-1,edge-2"
    assert data["TENANTDB_TASK_TIME_LIMIT_SECONDS"] == "100"
    worker = named(all_on, "Deployment", f"{FULL}-worker")["spec"]["template"]["spec"]
    container = worker["containers"][0]
    redis_url = {e["name"]: e for e in container["env"]}["TENANTDB_REDIS_URL"]
    assert redis_url["valueFrom"]["secretKeyRef"] == {"name": "tenantdb-redis", "key": "url"}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in worker["volumes"]}
    kubeconfig_dir = data["TENANTDB_KUBECONFIG"].rsplit("/", 1)[0]
    assert volumes[mounts[kubeconfig_dir]]["secret"]["secretName"] == "tenantdb-clusters"
    token_dir = data["TENANTDB_SERVICE_ACCOUNT_TOKEN_FILE"].rsplit("/", 1)[0]
    projected = volumes[mounts[token_dir]]["projected"]["sources"][0]["serviceAccountToken"]
    assert projected["audience"] == "openbao"


@pytest.mark.parametrize("values", [{}, ALL_ON], ids=["defaults", "all-on"])
def test_pods_run_non_root_on_a_read_only_root(chart: Chart, values: dict[str, Any]) -> None:
    for dep in by_kind(render(chart, values), "Deployment"):
        pod = dep["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        tmp = next(v for v in pod["volumes"] if v["name"] == "tmp")
        assert "emptyDir" in tmp
        for container in pod["containers"]:
            sc = container["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True
            assert sc["allowPrivilegeEscalation"] is False
            assert sc["capabilities"]["drop"] == ["ALL"]
            assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]  # noqa: S108


def test_replicas_and_rollout_per_role(default_objects: list[Manifest]) -> None:
    spec = {d["metadata"]["name"]: d["spec"] for d in by_kind(default_objects, "Deployment")}
    assert spec[f"{FULL}-watcher"]["replicas"] == 2
    assert spec[f"{FULL}-worker"]["replicas"] == 2
    assert spec[f"{FULL}-beat"]["replicas"] == 2, "beat elects a leader: a standby waits"
    pdb = named(default_objects, "PodDisruptionBudget", f"{FULL}-worker")["spec"]
    worker_labels = spec[f"{FULL}-worker"]["template"]["metadata"]["labels"]
    assert pdb["selector"]["matchLabels"].items() <= worker_labels.items()
    for name, deployment in spec.items():
        assert deployment["selector"]["matchLabels"].items() <= (
            deployment["template"]["metadata"]["labels"].items()
        ), name


def test_probes_hit_ports_the_container_declares(all_on: list[Manifest]) -> None:
    for name, container in _containers(all_on).items():
        ports = {p["name"] for p in container.get("ports", [])}
        probes = [container[p] for p in ("livenessProbe", "readinessProbe") if p in container]
        assert probes, f"{name} has no probe"
        for probe in probes:
            assert probe["httpGet"]["port"] in ports, name
    flower = _containers(all_on)[f"{FULL}-flower"]
    assert flower["readinessProbe"]["httpGet"]["path"] == "/healthcheck"
    # Each role's /livez answers from its work (a stalled sweep, watch or consumer loop), where
    # /metrics would answer as long as the metrics thread does.
    for role in ("beat", "watcher", "worker"):
        container = _containers(all_on)[f"{FULL}-{role}"]
        for probe in ("livenessProbe", "readinessProbe"):
            assert container[probe]["httpGet"]["path"] == "/livez", (role, probe)


def test_flower_reads_basic_auth_from_a_mounted_secret(all_on: list[Manifest]) -> None:
    pod = named(all_on, "Deployment", f"{FULL}-flower")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    auth_file = env["TENANTDB_FLOWER_BASIC_AUTH_FILE"]
    directory, key = auth_file.rsplit("/", 1)
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == directory)
    secret = next(v for v in pod["volumes"] if v["name"] == mount["name"])["secret"]
    assert secret["secretName"] == f"{FULL}-flower-auth"
    assert secret["items"] == [{"key": key, "path": key}]
    assert not any("basic" in str(arg).lower() for arg in container["args"])


@pytest.mark.parametrize("values", [{}, ALL_ON], ids=["defaults", "all-on"])
def test_services_select_pods_that_serve_their_ports(chart: Chart, values: dict[str, Any]) -> None:
    objects = render(chart, values)
    deployments = by_kind(objects, "Deployment")
    for service in by_kind(objects, "Service"):
        selector = service["spec"]["selector"].items()
        pods = [
            d["spec"]["template"]
            for d in deployments
            if selector <= d["spec"]["template"]["metadata"]["labels"].items()
        ]
        assert pods, f"{service['metadata']['name']} selects no pod"
        for port in service["spec"]["ports"]:
            for pod in pods:
                declared = {p["name"] for p in pod["spec"]["containers"][0].get("ports", [])}
                assert port["targetPort"] in declared, service["metadata"]["name"]
    metrics = named(objects, "Service", f"{FULL}-metrics")
    selected = [
        d["metadata"]["name"]
        for d in deployments
        if metrics["spec"]["selector"].items() <= _pod_labels(d).items()
    ]
    assert sorted(selected) == [f"{FULL}-{r}" for r in ("beat", "watcher", "worker")]


# ---------------------------------------------------------------- RBAC


def test_management_rbac_splits_reading_from_writing(default_objects: list[Manifest]) -> None:
    watcher = _rules(named(default_objects, "ClusterRole", f"{FULL}-watcher"))
    worker = _rules(named(default_objects, "ClusterRole", f"{FULL}-worker"))
    # The watcher lists and watches, nothing more.
    assert {verb for _, _, verb in watcher} == {"list", "watch"}
    assert _grants("", "secrets", "list,watch") <= watcher
    assert _grants("c5c3.io", "mariadbdatabases,controlplanes", "list,watch") <= watcher
    # Every object a pass reads is watched, so that a change to it wakes the orders reading it.
    assert (
        _grants("k8s.mariadb.com", "databases,mariadbs", "list,watch")
        | _grants("external-secrets.io", "externalsecrets,secretstores", "list,watch")
        | _grants("external-secrets.io", "clustersecretstores", "list,watch")
        | _grants("generators.external-secrets.io", "vaultdynamicsecrets", "list,watch")
        | _grants("", "serviceaccounts", "list,watch")
        | _grants("cert-manager.io", "certificates", "list,watch")
    ) <= watcher
    # The shared ServiceAccount and Certificate are watched by name only.
    watcher_rules = named(default_objects, "ClusterRole", f"{FULL}-watcher")["rules"]
    by_name = {
        r["resources"][0]: r.get("resourceNames")
        for r in watcher_rules
        if r["resources"] in (["serviceaccounts"], ["certificates"])
    }
    assert by_name == {
        "serviceaccounts": ["order-db-creds"],
        "certificates": ["order-db-openbao-client"],
    }
    # The worker writes what a pass touches and watches nothing.
    expected = (
        _grants("c5c3.io", "mariadbdatabases", "get,list,patch")
        | _grants("c5c3.io", "mariadbdatabases/status", "patch")
        | _grants("c5c3.io", "mariadbdatabases/finalizers", "update")
        | _grants("k8s.mariadb.com", "databases", "get,list,create,patch,delete")
        | _grants("c5c3.io", "controlplanes", "get")
        | _grants("k8s.mariadb.com", "mariadbs", "get")
        | _grants("external-secrets.io", "secretstores,clustersecretstores", "get")
        | _grants("", "serviceaccounts", "get,create,patch")
        | _grants("cert-manager.io", "certificates", "get,create,patch")
        | _grants("generators.external-secrets.io", "vaultdynamicsecrets", "get,create,patch")
        | _grants("external-secrets.io", "externalsecrets", "get,create,patch,delete")
        | _grants("", "secrets", "get,create,patch,delete")
    )
    assert expected - worker == set()
    assert {r for r in worker if r[2] == "watch"} == set()
    assert not {("", "secrets", "list")} & worker
    # The shared ServiceAccount is the only one the worker may read or patch.
    named_rules = named(default_objects, "ClusterRole", f"{FULL}-worker")["rules"]
    accounts = [r for r in named_rules if r["resources"] == ["serviceaccounts"]]
    assert {tuple(r["verbs"]): r.get("resourceNames") for r in accounts} == {
        ("create",): None,
        ("get", "patch"): ["order-db-creds"],
    }
    for rules in (watcher, worker):
        # Orders are never created or deleted by tenantdb, and nothing else is granted.
        assert not {("c5c3.io", "mariadbdatabases", v) for v in ("create", "delete")} & rules
        assert {r for r in rules if r[1] in {"leases", "pods", "*"} or r[2] == "*"} == set()
        assert {r for r in rules if r[1].endswith("/token") or r[0].startswith("rbac")} == set()
    for role in ("watcher", "worker"):
        binding = named(default_objects, "ClusterRoleBinding", f"{FULL}-{role}")
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": f"{FULL}-{role}", "namespace": NAMESPACE}
        ]


def test_each_role_runs_as_its_own_account_and_only_api_clients_mount_a_token(
    chart: Chart,
) -> None:
    default_objects = render(chart, {"flower": {"enabled": True}})
    accounts = {a["metadata"]["name"]: a for a in by_kind(default_objects, "ServiceAccount")}
    assert sorted(accounts) == [f"{FULL}-{r}" for r in ("beat", "flower", "watcher", "worker")]
    for role in ("watcher", "worker", "beat", "flower"):
        pod = named(default_objects, "Deployment", f"{FULL}-{role}")["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] == f"{FULL}-{role}"
        api_client = role in ("watcher", "worker")
        assert pod["automountServiceAccountToken"] is api_client, role
        assert accounts[f"{FULL}-{role}"].get("automountServiceAccountToken", True) is api_client
        projected = [v for v in pod["volumes"] if "projected" in v]
        # Only the worker logs in to OpenBao, with a token of OpenBao's audience.
        if role == "worker":
            [token] = projected
            source = token["projected"]["sources"][0]["serviceAccountToken"]
            assert source["audience"] == "openbao"
        else:
            assert projected == [], role
    bound = {
        s["name"] for b in by_kind(default_objects, "ClusterRoleBinding") for s in b["subjects"]
    }
    assert bound == {f"{FULL}-watcher", f"{FULL}-worker"}


def test_admission_policy_matches_the_writing_account(chart: Chart) -> None:
    for values, account in (({}, f"{FULL}-worker"), (TARGET, FULL)):
        objects = render(chart, values)
        policy = named(objects, "ValidatingAdmissionPolicy", f"{FULL}-writes")["spec"]
        [condition] = policy["matchConditions"]
        user = f"system:serviceaccount:{NAMESPACE}:{account}"
        assert condition["expression"] == f"request.userInfo.username == '{user}'"
        binding = named(objects, "ValidatingAdmissionPolicyBinding", f"{FULL}-writes")["spec"]
        assert binding == {"policyName": f"{FULL}-writes", "validationActions": ["Deny"]}
    assert (
        by_kind(render(chart, {"admissionPolicy": {"enabled": False}}), "ValidatingAdmissionPolicy")
        == []
    )


def test_target_cluster_mode_renders_only_the_access_it_grants(chart: Chart) -> None:
    objects = render(chart, TARGET)
    assert sorted({o["kind"] for o in objects}) == [
        "Role",
        "RoleBinding",
        "Secret",
        "ServiceAccount",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ]
    orders = {
        r["metadata"]["namespace"]: _rules(r)
        for r in by_kind(objects, "Role")
        if r["metadata"]["name"].endswith("-orders")
    }
    assert sorted(orders) == ["team-a", "team-b"]
    for rules in orders.values():
        assert rules == (
            _grants("c5c3.io", "mariadbdatabases", "get,list,watch,patch")
            | _grants("c5c3.io", "mariadbdatabases/status", "patch")
            | _grants("c5c3.io", "mariadbdatabases/finalizers", "update")
            | _grants("", "secrets", "get,list,watch,create,patch,delete")
            | _grants("", "events", "get,create,patch")
        )
    reads = [r for r in by_kind(objects, "Role") if r["metadata"]["name"].endswith("-keystone")]
    assert [(r["metadata"]["namespace"], _rules(r)) for r in reads] == [
        (
            "openstack",
            _grants("k8s.mariadb.com", "databases", "get,list,watch,create,patch,delete")
            | _grants("k8s.mariadb.com", "mariadbs", "get,list,watch")
            | _grants("", "secrets", "get"),
        )
    ]
    for binding in by_kind(objects, "RoleBinding"):
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": FULL, "namespace": NAMESPACE}
        ]
    token = named(objects, "Secret", f"{FULL}-token")
    assert token["type"] == "kubernetes.io/service-account-token"
    assert token["metadata"]["annotations"]["kubernetes.io/service-account.name"] == FULL


# ---------------------------------------------------------------- optional kinds


def test_keda_scales_workers_on_each_queue_list(all_on: list[Manifest]) -> None:
    scaled = named(all_on, "ScaledObject", f"{FULL}-worker")
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    spec = scaled["spec"]
    target = spec["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", f"{FULL}-worker")
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (1, 20)
    # KEDA owns the replica count, so the Deployment must not fight it.
    assert "replicas" not in named(all_on, "Deployment", f"{FULL}-worker")["spec"]
    triggers = spec["triggers"]
    assert [t["metadata"]["listName"] for t in triggers] == ["prod:provision", "prod:teardown"]
    auth = named(all_on, "TriggerAuthentication", f"{FULL}-redis")
    assert auth["spec"]["secretTargetRef"] == [
        {"parameter": "password", "name": "redis-password", "key": "password"}
    ]
    for trigger in triggers:
        assert trigger["type"] == "redis-sentinel"
        assert trigger["metadata"]["addresses"] == "sentinel-0:26379,sentinel-1:26379"
        assert trigger["metadata"]["sentinelMaster"] == "mymaster"
        assert all(isinstance(v, str) for v in trigger["metadata"].values())
        assert trigger["authenticationRef"] == {"name": auth["metadata"]["name"]}


def test_keda_without_sentinel_uses_the_redis_list_scaler(chart: Chart) -> None:
    objects = render(chart, {"keda": {"enabled": True}})
    triggers = named(objects, "ScaledObject", f"{FULL}-worker")["spec"]["triggers"]
    lists = [*WorkQueueKeys("tenantdb:").broker_lists("reconcile")]
    lists += [f"tenantdb:{q}" for q in QUEUES if q != "reconcile"]
    assert len(lists) == len(QUEUES) + 1, "the reconcile queue's refreshes are counted too"
    assert [(t["type"], t["metadata"]["listName"]) for t in triggers] == [
        ("redis", name) for name in lists
    ]
    assert all(t["metadata"]["address"] == "redis:6379" for t in triggers)
    assert all(t["metadata"]["enableTLS"] == "false" for t in triggers)
    # KEDA logs in with the password tenantdb's roles read, unless given its own.
    auth = named(objects, "TriggerAuthentication", f"{FULL}-redis")
    assert auth["spec"]["secretTargetRef"] == [
        {"parameter": "password", "name": "tenantdb-redis", "key": "password"}
    ]
    assert all(t["authenticationRef"] == {"name": f"{FULL}-redis"} for t in triggers)
    tls = render(chart, {"keda": {"enabled": True}, "redis": {"url": "rediss://redis:6380/0"}})
    triggers = named(tls, "ScaledObject", f"{FULL}-worker")["spec"]["triggers"]
    assert all(t["metadata"]["enableTLS"] == "true" for t in triggers)


def test_a_redis_without_credentials_renders_nothing_and_says_what_to_set(chart: Chart) -> None:
    with pytest.raises(HelmRenderError) as refused:
        render(chart, credentials=False)
    said = str(refused.value)
    assert "redis.auth.passwordSecret" in said
    assert "redis.existingSecret" in said
    assert "redis.auth.required=false" in said
    # Each way of giving credentials renders, and so does saying nothing else reaches Redis.
    for values in (
        {"redis": {"existingSecret": "tenantdb-redis-url"}},
        {"redis": {"url": "redis://:pw@redis:6379/0"}},
        {"redis": {"auth": {"passwordSecret": "redis"}}},
        {"redis": {"auth": {"required": False}}},
    ):
        assert by_kind(render(chart, values, credentials=False), "Deployment"), values
    # A target cluster's release runs no Pod that reaches Redis.
    target = {"targetCluster": {"enabled": True, "assignedNamespaces": ["team-a"]}}
    assert by_kind(render(chart, target, credentials=False), "Role")


def _env(container: Manifest) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env", ())}


def test_every_role_reads_the_redis_password_and_ca_from_mounted_secrets(chart: Chart) -> None:
    objects = render(
        chart,
        {
            "flower": {"enabled": True},
            "redis": {
                "url": "rediss://redis.example:6380/0",
                "auth": {
                    "username": "tenantdb",
                    "passwordSecret": "redis-auth",
                    "passwordSecretKey": "redis-password",
                },
                "tls": {"caSecret": "redis-ca"},
            },
        },
        credentials=False,
    )
    deployments = by_kind(objects, "Deployment")
    assert {d["metadata"]["name"] for d in deployments} >= {
        f"{FULL}-{role}" for role in ("watcher", "worker", "beat", "flower")
    }
    for deployment in deployments:
        pod = deployment["spec"]["template"]["spec"]
        container = pod["containers"][0]
        env = _env(container)
        assert set(env) <= known_settings() | {"FLOWER_UNAUTHENTICATED_API"}
        assert env["TENANTDB_REDIS_USERNAME"] == "tenantdb"
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        for setting, secret, key in (
            ("TENANTDB_REDIS_PASSWORD_FILE", "redis-auth", "redis-password"),
            ("TENANTDB_REDIS_TLS_CA_FILE", "redis-ca", "ca.crt"),
        ):
            directory, _, file = env[setting].rpartition("/")
            volume = volumes[mounts[directory]]["secret"]
            assert volume["secretName"] == secret, deployment["metadata"]["name"]
            assert volume["items"] == [{"key": key, "path": file}]
        assert "TENANTDB_REDIS_PASSWORD" not in env  # never the password itself


def test_service_monitors_scrape_the_metrics_and_flower_ports(all_on: list[Manifest]) -> None:
    scraped: set[tuple[str, str]] = set()
    for monitor in by_kind(all_on, "ServiceMonitor"):
        assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
        assert monitor["metadata"]["labels"]["release"] == "prom"
        assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
        selector = monitor["spec"]["selector"]["matchLabels"].items()
        services = [
            s for s in by_kind(all_on, "Service") if selector <= s["metadata"]["labels"].items()
        ]
        assert len(services) == 1, monitor["metadata"]["name"]
        ports = {port["name"] for port in services[0]["spec"]["ports"]}
        for endpoint in monitor["spec"]["endpoints"]:
            assert endpoint["port"] in ports
            scraped.add((services[0]["metadata"]["name"], endpoint["port"]))
    assert scraped == {(f"{FULL}-metrics", "metrics"), (f"{FULL}-flower", "http")}
    names = {m["metadata"]["name"] for m in by_kind(all_on, "ServiceMonitor")}
    assert names == {f"{FULL}-{role}" for role in ("watcher", "worker", "beat", "flower")}


def test_network_policy_opens_only_the_serving_ports(all_on: list[Manifest]) -> None:
    policies = {p["metadata"]["name"]: p["spec"] for p in by_kind(all_on, "NetworkPolicy")}
    engine, flower = policies[f"{FULL}-engine"], policies[f"{FULL}-flower"]
    assert [p["port"] for rule in engine["ingress"] for p in rule["ports"]] == ["metrics"]
    assert engine["ingress"][0]["from"] == ALL_ON["networkPolicy"]["metricsFrom"]
    assert engine["policyTypes"] == ["Ingress", "Egress"]
    assert [p["port"] for rule in flower["ingress"] for p in rule["ports"]] == ["http"]
    assert flower["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "flower"


def test_network_policy_admits_only_the_selected_peers_by_default(chart: Chart) -> None:
    flower_on = render(chart, {"flower": {"enabled": True}})
    policies = {p["metadata"]["name"]: p["spec"] for p in by_kind(flower_on, "NetworkPolicy")}
    [metrics] = policies[f"{FULL}-engine"]["ingress"]
    assert metrics["from"] == [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
        }
    ]
    [flower] = policies[f"{FULL}-flower"]["ingress"]
    assert flower["from"] == [
        {"podSelector": {"matchLabels": {"tenantdb.c5c3.io/flower-client": "true"}}}
    ]
    # An empty list admits no one (an ingress rule without `from` would admit everyone).
    closed = render(
        chart, {"flower": {"enabled": True}, "networkPolicy": {"metricsFrom": [], "flowerFrom": []}}
    )
    for policy in by_kind(closed, "NetworkPolicy"):
        assert policy["spec"]["ingress"] == [], policy["metadata"]["name"]


def test_values_file_is_plain_yaml_the_schema_accepts(chart: Chart) -> None:
    values = yaml.safe_load((CHART_DIR / "values.yaml").read_text())
    chart.validate_schema(values)
    assert values["worker"]["queues"] == QUEUES


BROKER = {"secretKeyRef": {"name": "b", "key": "url"}}
EXTRAS: dict[str, Any] = {
    "flower": {"enabled": True},
    "extraEnv": [{"name": "TENANTDB_BROKER_URL", "valueFrom": BROKER}],
    "extraVolumes": [{"name": "targets", "secret": {"secretName": "tenantdb-targets"}}],
    "extraVolumeMounts": [
        {"name": "targets", "mountPath": "/etc/tenantdb/targets", "readOnly": True}
    ],
    "config": {"TENANTDB_KUBECONFIG_DIR": "/etc/tenantdb/targets"},
    "priorityClassName": "platform-critical",
    "topologySpreadConstraints": [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
        }
    ],
}


def test_extra_env_volumes_priority_and_spread_reach_every_role(chart: Chart) -> None:
    chart.validate_schema(EXTRAS)
    objects = render(chart, EXTRAS)
    deployments = by_kind(objects, "Deployment")
    assert len(deployments) == 4
    for deployment in deployments:
        name = deployment["metadata"]["name"]
        pod = deployment["spec"]["template"]["spec"]
        container = pod["containers"][0]
        assert EXTRAS["extraEnv"][0] in container["env"], name
        assert EXTRAS["extraVolumeMounts"][0] in container["volumeMounts"], name
        assert EXTRAS["extraVolumes"][0] in pod["volumes"], name
        assert pod["priorityClassName"] == "platform-critical", name
        [spread] = pod["topologySpreadConstraints"]
        # Each role spreads its own pods: the selector is filled in with its pod labels.
        assert spread["labelSelector"]["matchLabels"].items() <= _pod_labels(deployment).items()
        assert spread["topologyKey"] == "topology.kubernetes.io/zone"
    with pytest.raises(Exception, match="mountPath"):
        chart.validate_schema({"extraVolumeMounts": [{"name": "targets"}]})


# ---------------------------------------------------------------- worker pools


def _args(deployment: Manifest) -> list[str]:
    args: list[str] = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    return args


def test_each_worker_pool_is_a_deployment_of_its_own_queues(chart: Chart) -> None:
    objects = render(chart, POOLS)
    names = {d["metadata"]["name"] for d in by_kind(objects, "Deployment")}
    assert {f"{FULL}-worker-entry", f"{FULL}-worker-delivery"} <= names
    assert f"{FULL}-worker" not in names, "the single Deployment would consume every queue too"
    entry = named(objects, "Deployment", f"{FULL}-worker-entry")
    delivery = named(objects, "Deployment", f"{FULL}-worker-delivery")
    assert "--queues=reconcile,provision,teardown" in _args(entry)
    assert "--queues=delivery" in _args(delivery)
    # What a pool leaves out comes from worker: concurrency, and resources' other fields.
    concurrency = [
        next(a for a in _args(d) if a.startswith("--concurrency")) for d in (entry, delivery)
    ]
    assert concurrency == ["--concurrency=2", "--concurrency=8"]
    assert (entry["spec"]["replicas"], delivery["spec"]["replicas"]) == (3, 2)
    resources = delivery["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert resources == {"requests": {"cpu": "500m"}, "limits": {"memory": "1Gi"}}
    # Celery names the worker by pool, so Flower tells the pools apart.
    assert "--hostname=worker-delivery@%h" in _args(delivery)
    # Each Deployment selects only its own pods: two ReplicaSets never fight over one pod.
    for one, other in ((entry, delivery), (delivery, entry)):
        selector = one["spec"]["selector"]["matchLabels"]
        own = one["spec"]["template"]["metadata"]["labels"]
        theirs = other["spec"]["template"]["metadata"]["labels"]
        assert selector.items() <= own.items()
        assert not selector.items() <= theirs.items()
    budgets = [b["metadata"]["name"] for b in by_kind(objects, "PodDisruptionBudget")]
    assert budgets == [f"{FULL}-worker-entry"]
    budget = named(objects, "PodDisruptionBudget", f"{FULL}-worker-entry")
    assert budget["spec"]["selector"] == entry["spec"]["selector"]


def test_keda_scales_each_pool_on_its_own_queues(chart: Chart) -> None:
    objects = render(chart, {**POOLS, "keda": {"enabled": True}})
    scaled = {o["spec"]["scaleTargetRef"]["name"]: o for o in by_kind(objects, "ScaledObject")}
    assert set(scaled) == {f"{FULL}-worker-entry", f"{FULL}-worker-delivery"}
    lists = {
        name: [t["metadata"]["listName"] for t in obj["spec"]["triggers"]]
        for name, obj in scaled.items()
    }
    assert lists[f"{FULL}-worker-delivery"] == ["tenantdb:delivery"]
    assert lists[f"{FULL}-worker-entry"] == [
        *WorkQueueKeys("tenantdb:").broker_lists("reconcile"),
        "tenantdb:provision",
        "tenantdb:teardown",
    ]
    assert all("replicas" not in named(objects, "Deployment", name)["spec"] for name in scaled)


@pytest.mark.parametrize(
    ("pools", "says"),
    [
        (
            [{"name": "entry", "queues": ["reconcile", "provision", "teardown"]}],
            "no pool consumes the delivery queue",
        ),
        (
            [
                {"name": "a", "queues": ["reconcile", "provision"]},
                {"name": "a", "queues": ["delivery", "teardown"]},
            ],
            'two pools are named "a"',
        ),
    ],
    ids=["queue-unserved", "name-twice"],
)
def test_pools_that_would_strand_orders_are_refused(
    chart: Chart, pools: list[dict[str, Any]], says: str
) -> None:
    with pytest.raises(helm_python.HelmRenderError) as caught:
        render(chart, {"worker": {"pools": pools}})
    assert says in str(caught.value)


def test_the_schema_wants_a_name_and_queues_for_each_pool(chart: Chart) -> None:
    for pool in (
        {"queues": ["delivery"]},
        {"name": "Delivery", "queues": ["delivery"]},
        {"name": "d", "queues": ["mail"]},
        {"name": "d", "queues": ["delivery"], "x": 1},
    ):
        with pytest.raises(helm_python.HelmValuesError):
            chart.validate_schema({"worker": {"pools": [pool]}})


def test_a_release_bound_per_namespace_grants_nothing_namespaced_cluster_wide(
    chart: Chart,
) -> None:
    objects = render(chart, {"rbac": {"namespaces": ["team-a", "cp-ns"]}})
    role_bindings = by_kind(objects, "RoleBinding")
    assert sorted(
        (b["metadata"]["namespace"], b["roleRef"]["name"]) for b in role_bindings
    ) == sorted(
        (ns, f"{FULL}-{role}") for ns in ("team-a", "cp-ns") for role in ("watcher", "worker")
    )
    cluster_bindings = by_kind(objects, "ClusterRoleBinding")
    assert sorted(b["roleRef"]["name"] for b in cluster_bindings) == [
        f"{FULL}-watcher-cluster",
        f"{FULL}-worker-cluster",
    ]
    for binding in cluster_bindings:
        role = named(objects, "ClusterRole", binding["roleRef"]["name"])
        # A cluster-wide binding holds only what no namespace can hold.
        assert {r for rule in role["rules"] for r in rule["resources"]} == {"clustersecretstores"}
    config = named(objects, "ConfigMap", FULL)["data"]
    assert config["TENANTDB_MANAGEMENT_NAMESPACES"] == "team-a,cp-ns"
    assert "TENANTDB_MANAGEMENT_NAMESPACES" in known_settings()
    # Without namespaces, the one cluster-wide binding per role, as before.
    whole = render(chart)
    assert sorted(b["roleRef"]["name"] for b in by_kind(whole, "ClusterRoleBinding")) == [
        f"{FULL}-watcher",
        f"{FULL}-worker",
    ]
    assert by_kind(whole, "RoleBinding") == []
    assert "TENANTDB_MANAGEMENT_NAMESPACES" not in named(whole, "ConfigMap", FULL)["data"]
