"""docker-compose.yml, checked without a Docker engine: its services, that every command it runs
is one tenantdb (or the devstack) accepts, that it sets only known TENANTDB_* settings, and that
the worker can be scaled with `--scale worker=N`."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from devstack.cli import _parser as devstack_parser
from tests.integration.packaging.conftest import REPO_ROOT, known_settings, tenantdb_accepts

ROLES = ("watcher", "worker", "beat", "flower")


@pytest.fixture(scope="module")
def services() -> dict[str, dict[str, Any]]:
    compose = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())
    found: dict[str, dict[str, Any]] = compose["services"]
    return found


def _stages() -> set[str]:
    text = (REPO_ROOT / "Dockerfile").read_text()
    return set(re.findall(r"^FROM\s+\S+\s+AS\s+(\S+)", text, flags=re.MULTILINE | re.IGNORECASE))


def test_the_stack_has_every_part(services: dict[str, dict[str, Any]]) -> None:
    assert sorted(services) == sorted(["redis", "mariadb", "devstack", *ROLES])


def test_roles_run_tenantdb_commands_from_the_runtime_image(
    services: dict[str, dict[str, Any]],
) -> None:
    for role in ROLES:
        service = services[role]
        assert service["build"] == {"context": ".", "target": "runtime"}, role
        assert "entrypoint" not in service, f"{role} must keep the image's tenantdb entrypoint"
        assert service["command"][0] == role
        assert tenantdb_accepts(service["command"]), f"tenantdb {service['command']}"


def test_devstack_runs_from_the_dev_image(services: dict[str, dict[str, Any]]) -> None:
    devstack = services["devstack"]
    assert devstack["build"]["target"] == "dev"
    assert {"runtime", "dev"} <= _stages()
    command = devstack["command"]
    assert command[:3] == ["python", "-m", "devstack"]
    args = devstack_parser().parse_args(command[3:])
    assert (args.command, str(args.state_dir)) == ("up", "/state")
    assert "state:/state" in devstack["volumes"]
    # The stand-ins reach MariaDB in its own container, by its service name.
    assert (args.mariadb.host, args.mariadb.port) == ("mariadb", 3306)
    assert "mariadb" in devstack["depends_on"]


def test_only_known_settings_are_set(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        env = service.get("environment", {})
        assert isinstance(env, dict), name
        tenantdb_vars = {k for k in env if k.startswith("TENANTDB_")}
        assert tenantdb_vars - known_settings() == set(), name
        if name in ROLES:
            assert env["TENANTDB_REDIS_URL"].startswith("redis://redis:"), name


def test_kube_roles_read_the_devstack_kubeconfig(services: dict[str, dict[str, Any]]) -> None:
    # The devstack's API server listens on its container's loopback only.
    for role in ("watcher", "worker"):
        service = services[role]
        assert service["network_mode"] == "service:devstack"
        assert service["depends_on"]["devstack"]["condition"] == "service_healthy"
        assert "state:/state:ro" in service["volumes"]
    # Each reads the kubeconfig of its own chart account, never the devstack's admin one.
    kubeconfigs = {
        r: services[r]["environment"]["TENANTDB_KUBECONFIG"] for r in ("watcher", "worker")
    }
    assert kubeconfigs == {
        "watcher": "/state/tenantdb-watcher.kubeconfig",
        "worker": "/state/tenantdb.kubeconfig",
    }


def test_worker_scales(services: dict[str, dict[str, Any]]) -> None:
    worker = services["worker"]
    assert "container_name" not in worker
    assert "ports" not in worker
    assert "hostname" not in worker
    # Several workers share the devstack's network namespace, so none may listen on a fixed port.
    assert worker["environment"].get("TENANTDB_METRICS_PORT", "0") == "0"
    assert "deploy" not in worker or "replicas" not in worker["deploy"]


def test_redis_never_evicts_broker_keys(services: dict[str, dict[str, Any]]) -> None:
    command = services["redis"]["command"]
    assert command[command.index("--maxmemory-policy") + 1] == "noeviction"


def test_flower_is_published_on_loopback_only(services: dict[str, dict[str, Any]]) -> None:
    assert services["flower"]["ports"] == ["127.0.0.1:5555:5555"]
    flower = services["flower"]
    assert "--port=5555" in flower["command"]
    # Flower refuses to start without credentials unless it binds loopback, which a published
    # port cannot reach; the stack passes a local credential through the environment.
    assert flower["environment"]["TENANTDB_FLOWER_BASIC_AUTH"].startswith("${")
