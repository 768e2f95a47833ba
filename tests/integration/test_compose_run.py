"""docker-compose.yml run as compose would run it, without a container engine: each service's
command and environment as the file gives them (anchors merged, `${VAR:-default}` filled in),
the service names it addresses (`redis`, `mariadb`) and its `state` volume pointed at this
machine's Redis, MariaDB and a temporary directory, the devstack first and the roles once its
healthcheck holds. A MariaDBDatabase order then goes Ready, and Flower answers behind its login.

What compose alone decides (images, networks, restarts, the published port) is checked by the
static tests in packaging/test_compose.py.
"""

from __future__ import annotations

import base64
import os
import re
import secrets
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest
import redis
import yaml

from tenantdb.adapters.kube import client_from_kubeconfig
from tenantdb.adapters.mariadbdatabase import MARIADB_DATABASE
from tests.conftest import REDIS_URL
from tests.e2e.conftest import free_port
from tests.support import stop_processes, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
ROLES = ("watcher", "worker", "beat", "flower")
_DEFAULTED = re.compile(r"\$\{(\w+):-([^}]*)\}")


def _compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services: dict[str, Any] = loaded["services"]
    return services


def _here(text: str, state: Path, port: int) -> str:
    """A compose value as it reads on this machine: service names and the volume mapped."""
    text = _DEFAULTED.sub(lambda m: os.environ.get(m.group(1), m.group(2)), text)
    text = text.replace("redis://redis:6379/0", REDIS_URL).replace("mariadb:3306", "127.0.0.1:3306")
    text = text.replace("--port=5555", f"--port={port}")
    return re.sub(r"(^|=)/state\b", lambda m: m.group(1) + str(state), text)


class Compose:
    """The services of the file, started as processes."""

    def __init__(self, state: Path, logs: Path, prefix: str) -> None:
        self.services = _compose()
        self.state, self.logs, self.prefix = state, logs, prefix
        self.flower_port = free_port()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def argv(self, name: str) -> list[str]:
        command = [
            _here(str(a), self.state, self.flower_port) for a in self.services[name]["command"]
        ]
        if command[0] == "python":  # the dev image's interpreter
            return [sys.executable, *command[1:]]
        return [sys.executable, "-m", "tenantdb.cli", *command]  # the runtime image's entrypoint

    def env(self, name: str) -> dict[str, str]:
        given = {
            k: _here(str(v), self.state, self.flower_port)
            for k, v in (self.services[name].get("environment") or {}).items()
        }
        # The key prefix stays the file's in shape, made this test's own.
        given["TENANTDB_KEY_PREFIX"] = self.prefix
        return {
            "PATH": os.environ["PATH"],
            "HOME": str(self.state),
            "PYTHONPATH": str(REPO),
            **given,
        }

    def start(self, name: str) -> None:
        with (self.logs / f"{name}.log").open("ab") as out:
            self.procs[name] = subprocess.Popen(
                self.argv(name), cwd=REPO, env=self.env(name), stdout=out, stderr=subprocess.STDOUT
            )

    def healthy(self, name: str) -> bool:
        """The service's healthcheck as the file gives it (`test -s FILE` is all it uses)."""
        check = self.services[name]["healthcheck"]["test"]
        assert check[:3] == ["CMD", "test", "-s"], f"{name}: a healthcheck this test cannot run"
        path = Path(_here(check[3], self.state, self.flower_port))
        return path.exists() and path.stat().st_size > 0

    def stop(self) -> None:
        stop_processes(self.procs.values(), grace=30)


@pytest.fixture
def compose(tmp_path: Path, key_prefix: str, real_redis: redis.Redis) -> Iterator[Compose]:
    state, logs = tmp_path / "state", tmp_path / "logs"
    state.mkdir()
    logs.mkdir()
    running = Compose(state, logs, key_prefix)
    try:
        yield running
    finally:
        running.stop()


def test_the_compose_file_runs_as_written(compose: Compose) -> None:
    devstack = compose.services["devstack"]
    assert set(devstack["depends_on"]) == {"redis", "mariadb"}
    compose.start("devstack")
    wait_for(lambda: compose.healthy("devstack"), 90, "the devstack's healthcheck")
    for role in ROLES:
        assert set(compose.services[role]["depends_on"]) <= {"devstack", "redis"}, role
        compose.start(role)

    kube = client_from_kubeconfig(str(compose.state / "kubeconfig"), "management", "")
    name = f"compose-{secrets.token_hex(3)}"
    kube.create(
        {
            "apiVersion": "c5c3.io/v1alpha1",
            "kind": "MariaDBDatabase",
            "metadata": {"name": name, "namespace": "tenant-a"},
            "spec": {"controlPlaneRef": {"name": "cp", "namespace": "openstack"}},
        }
    )

    def ready() -> bool:
        order = kube.get_or_none(MARIADB_DATABASE, "tenant-a", name) or {}
        conditions = (order.get("status") or {}).get("conditions") or ()
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    try:
        wait_for(ready, 90, f"{name} to be Ready under the compose stack")
        user, _, password = compose.env("flower")["TENANTDB_FLOWER_BASIC_AUTH"].partition(":")
        login = base64.b64encode(f"{user}:{password}".encode()).decode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{compose.flower_port}/api/workers",
            headers={"Authorization": f"Basic {login}"},
        )

        def flower_answers() -> bool:
            try:
                with urllib.request.urlopen(request, timeout=5) as answer:  # noqa: S310 - http URL
                    return bool(answer.status == 200)
            except OSError:
                return False

        wait_for(flower_answers, 60, "Flower behind its login")
    finally:
        root = pymysql.connect(host="127.0.0.1", port=3306, user="root", password="")
        with root as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name.replace('-', '_')}`")
