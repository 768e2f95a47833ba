"""The secret-leak scan: a full lifecycle at DEBUG, with Flower, leaves no issued secret behind.

Every e2e test's stack is scanned at teardown (``tests.e2e.conftest``); this test makes the scan
as hard to pass as the stack allows: every tenantdb process logs at DEBUG
(``TENANTDB_LOG_LEVEL=DEBUG``), Flower runs on the stack's broker, and the lifecycle covers
delivery, a forced credential refresh and a deletion of a MariaDBDatabase and a MysqlDatabase
order with an owner rotation. Flower's API answers are scanned with everything else, and the
secrets the scan looks for must come from each of the platform's real sources (the watch of every
Secret, a Secret rotated or deleted before the scan included, OpenBao's raw audit device, the state
directory). The first tests show the scanner finds a planted secret, and read OpenBao's audit
events and a state directory as the platform writes them.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import redis

from devstack.mysql_group import MysqlGroup
from tenantdb.adapters.mariadbdatabase import MARIADB_DATABASE
from tests.e2e import leaks
from tests.e2e.conftest import Stack, _scan_for_leaks, free_port
from tests.e2e.mysql_tenants import Tenants, order_with_grant
from tests.support import wait_for

# -- the scanner finds what is there -------------------------------------------------------


PLANTED = "planted-Secret-value-0123456789"


def _planted() -> leaks.Secrets:
    found = leaks.Secrets()
    found.add(leaks.PASSWORD, "the planted password", PLANTED)
    found.add(leaks.PASSWORD, "too short to look for", "pw")
    return found


@pytest.mark.parametrize("encode", [str, lambda s: base64.b64encode(s.encode()).decode()])
def test_the_scanner_finds_a_planted_secret_in_redis_and_in_a_log(
    real_redis: redis.Redis, key_prefix: str, tmp_path: Path, encode: Any
) -> None:
    real_redis.set(f"{key_prefix}note:x", json.dumps({"note": f"a {encode(PLANTED)} b"}))
    real_redis.hset(f"{key_prefix}h", "f", "clean")
    (tmp_path / "worker-1.log").write_text(f'{{"m": "one"}}\n{{"m": "x{encode(PLANTED)}y"}}\n')
    places = leaks.redis_places(real_redis, key_prefix) + leaks.log_places(tmp_path)
    findings = leaks.scan(_planted(), places)
    assert [str(f.place) for f in findings] == [
        f"Redis string {key_prefix}note:x value",
        "log worker-1.log line 2",
    ]
    assert all(f.kind == leaks.PASSWORD and f.origin == "the planted password" for f in findings)
    assert {f.form for f in findings} == {"as is" if encode is str else "base64"}
    report = leaks.describe(findings, _planted())
    assert PLANTED not in report
    assert "worker-1.log line 2" in report


def test_the_scanner_decodes_celery_messages_and_finds_base64_at_any_alignment(
    real_redis: redis.Redis, key_prefix: str
) -> None:
    body = base64.b64encode(json.dumps([[f"key-{PLANTED}"], {}, {}]).encode()).decode()
    envelope = {"body": body, "properties": {"body_encoding": "base64"}, "headers": {}}
    real_redis.lpush(f"{key_prefix}provision", json.dumps(envelope))
    real_redis.hset(f"{key_prefix}unacked", "tag", json.dumps([envelope, "", "provision"]))
    places = leaks.redis_places(real_redis, key_prefix)
    findings = leaks.scan(_planted(), places)
    decoded = [f for f in findings if "message body" in f.place and f.form == "as is"]
    assert {f.place.split(" (")[0] for f in decoded} == {
        f"Redis list {key_prefix}provision entry 0",
        f"Redis hash {key_prefix}unacked field tag",
    }
    # The raw envelope holds the secret inside a longer base64 text, at some alignment.
    assert any(f.form == "base64" and "message body" not in f.place for f in findings)
    for lead in ("", "a", "ab", "abc"):
        text = base64.b64encode((lead + PLANTED + "tail").encode()).decode()
        assert leaks.scan(_planted(), [leaks.Place("p", text)]), lead
    pem = "\n".join(
        (
            "-----BEGIN PRIVATE KEY-----",
            "MIGHAgEAMBMGByqG",
            "AwEHBG0wawIB",
            "-----END PRIVATE KEY-----",
        )
    )
    keys = leaks.Secrets()
    keys.add(leaks.PRIVATE_KEY, "a key", pem)
    assert leaks.scan(keys, [leaks.Place("p", json.dumps({"k": pem}))])[0].form == "JSON-escaped"
    assert (
        leaks.scan(keys, [leaks.Place("p", "x MIGHAgEAMBMGByqGAwEHBG0wawIB")])[0].form == "PEM body"
    )


def _audit(kind: str, path: str, **parts: Any) -> dict[str, Any]:
    """One event of OpenBao's raw audit device, as `log_raw` writes it."""
    request = {"path": path, **parts.pop("request", {})}
    return {"type": kind, "request": request, **parts}


def test_openbao_secrets_come_from_the_raw_audit_device() -> None:
    jwt = "eyJhbGciOiJSUzI1NiJ9.service-account.jwt"
    events = [
        _audit(
            "request",
            "database/mariadb/config/keystone-openstack",
            request={"client_token": "root-token-0123456789", "data": {"password": ""}},
        ),
        _audit(
            "request",
            "auth/kubernetes/management/login",
            request={"data": {"jwt": jwt, "role": "order-db"}},
        ),
        _audit(
            "response",
            "auth/kubernetes/management/login",
            response={"auth": {"client_token": "s.login-token-0123", "accessor": "accessor-123"}},
        ),
        _audit(
            "response",
            "database/mariadb/creds/order.openstack.x",
            response={"data": {"username": "v-order-openstack-x", "password": "dyn-Pass-0123"}},
        ),
        _audit(
            "request",
            "auth/kubernetes/management/config",
            request={"data": {"token_reviewer_jwt": "reviewer.jwt.0123", "kubernetes_host": "h"}},
        ),
    ]
    found = leaks.Secrets()
    leaks.openbao_secrets("root-token-0123456789", events, found)
    by_value = {s.value: s for s in found}
    assert set(by_value) == {
        "root-token-0123456789",
        jwt,
        "s.login-token-0123",
        "dyn-Pass-0123",
        "reviewer.jwt.0123",
    }, "neither an accessor, a user name, a host nor an empty password"
    assert by_value["root-token-0123456789"].origin == "OpenBao root token"
    assert by_value[jwt].kind == leaks.TOKEN
    assert by_value[jwt].origin.startswith("ServiceAccount token sent to auth/kubernetes/")
    login = by_value["s.login-token-0123"]
    assert (login.kind, login.origin) == (
        leaks.TOKEN,
        "OpenBao token (auth/kubernetes/management/login)",
    )
    credential = by_value["dyn-Pass-0123"]
    assert credential.kind == leaks.PASSWORD
    assert "dynamic credential" in credential.origin


def test_state_files_give_keys_tokens_passwords_and_kubeconfig_credentials(tmp_path: Path) -> None:
    (tmp_path / "kube" / "pki").mkdir(parents=True)
    (tmp_path / "kube" / "pki" / "admin.key").write_text("-----BEGIN PRIVATE KEY-----\nAAAA\n")
    (tmp_path / "kube" / "pki" / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\nBBBB\n")
    (tmp_path / "c5c3-operator.token").write_text("operator-token-0123\n")
    (tmp_path / "mariadb-root.password").write_text("root-password-0123")
    (tmp_path / "services.json").write_text('{"password": "not-a-state-secret"}')
    config = {
        "users": [
            {"name": "edge-1-tenantdb-worker", "user": {"token": "worker-token-0123"}},
            {
                "name": "admin",
                "user": {"client-key-data": base64.b64encode(b"client-key-0123").decode()},
            },
        ]
    }
    (tmp_path / "tenantdb.kubeconfig").write_text(json.dumps(config))
    found = leaks.Secrets()
    leaks.state_files(tmp_path, found)
    assert {(s.kind, s.value) for s in found} == {
        (leaks.PRIVATE_KEY, "-----BEGIN PRIVATE KEY-----\nAAAA"),
        (leaks.TOKEN, "operator-token-0123"),
        (leaks.PASSWORD, "root-password-0123"),
        (leaks.TOKEN, "worker-token-0123"),
        (leaks.PRIVATE_KEY, "client-key-0123"),
    }
    origins = {s.value: s.origin for s in found}
    assert origins["worker-token-0123"] == (
        "ServiceAccount token of edge-1-tenantdb-worker in tenantdb.kubeconfig"
    )
    assert origins["-----BEGIN PRIVATE KEY-----\nAAAA"] == "state file kube/pki/admin.key"


# -- the lifecycle at DEBUG, with Flower ----------------------------------------------------


@pytest.fixture
def platform_options(mysql_group: MysqlGroup) -> dict[str, Any]:
    return {"mysql_group": mysql_group}


@pytest.fixture
def stack_env() -> dict[str, str]:
    return {"TENANTDB_LOG_LEVEL": "DEBUG"}


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=15) as answer:  # noqa: S310 - http only
            return int(answer.status), str(answer.read().decode(errors="replace"))
    except urllib.error.HTTPError as error:
        return int(error.code), str(error.read().decode(errors="replace"))


def _start_flower(stack: Stack) -> str:
    port = free_port()
    stack.start(
        "flower",
        "flower",
        "--unauthenticated-local",
        f"--port={port}",
        env={"FLOWER_LOGGING": "debug"},
    )
    # Flower serves its own /metrics on its port; the teardown scan reads it there.
    stack.metrics_ports["flower"] = port
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return _get(f"{url}/healthcheck")[0] == 200
        except OSError:
            return False

    wait_for(up, 30, "Flower to answer")
    return url


def _flower_answers(url: str) -> list[leaks.Place]:
    places: list[leaks.Place] = []
    status, tasks = _get(f"{url}/api/tasks")
    assert status == 200, tasks
    listed = json.loads(tasks)
    assert listed, "Flower saw no task"
    places.append(leaks.Place("Flower /api/tasks", tasks))
    for task_id in sorted(listed)[:200]:
        status, info = _get(f"{url}/api/task/info/{task_id}")
        places.append(leaks.Place(f"Flower /api/task/info/{task_id} ({status})", info))
    for path in ("/api/workers?refresh=1", "/api/queues/length", "/api/task/types", "/metrics"):
        status, text = _get(f"{url}{path}")
        places.append(leaks.Place(f"Flower {path} ({status})", text))
    return places


def _mariadb_lifecycle(stack: Stack) -> None:
    name = stack.name("leak-db")
    stack.apply_order(name)
    first = stack.wait_ready(name)
    # A forced refresh: ESO fetches a new credential and tenantdb delivers it.
    stack.force_refresh(name, first)
    stack.kube().delete(MARIADB_DATABASE, "tenant-a", name)
    wait_for(lambda: stack.order(name) is None, 40, "the MariaDBDatabase order to be gone")


def _mysql_lifecycle(tenants: Tenants) -> None:
    name, _, owner, _ = order_with_grant(tenants, "leak")
    tenants.owner_secret("leak-owner", owner, "second-owner-password")
    wait_for(lambda: tenants.logs_in(owner, "second-owner-password"), 30, "the rotated owner")
    tenants.delete(name)
    wait_for(lambda: tenants.get(name) is None, 40, "the MysqlDatabase order to be gone")


@pytest.mark.slow
@pytest.mark.private_platform  # with a failover group of its own
def test_a_full_lifecycle_at_debug_with_flower_leaks_no_secret(
    stack: Stack, mysql_group: MysqlGroup, real_redis: redis.Redis
) -> None:
    flower = _start_flower(stack)
    tenants = Tenants(stack, mysql_group)
    try:
        _mariadb_lifecycle(stack)
        _mysql_lifecycle(tenants)
        # Let Flower take in the last events, then read its answers.
        time.sleep(2)
        answers = _flower_answers(flower)
    finally:
        tenants.close()
        mysql_group.drop_tenant_objects()
    recorder = stack.leak_recorder
    assert recorder is not None
    assert recorder.watching(stack.platform) is None
    deleted = _deleted_secret(stack, recorder)
    found = leaks.collect(stack.platform, recorder)
    counts = found.counts()
    assert all(counts[kind] > 0 for kind in leaks.CLASSES), counts
    by_value = {secret.value: secret for secret in found}
    origins = {secret.origin for secret in found}
    # OpenBao's raw audit device: the dynamic passwords, the login tokens of ESO and tenantdb,
    # and the ServiceAccount tokens they logged in with.
    assert any(o.startswith("OpenBao dynamic credential returned by") for o in origins), origins
    assert any(o.startswith("OpenBao token (auth/kubernetes/") for o in origins), origins
    assert any(o.startswith("ServiceAccount token") for o in origins), origins
    # The watch: the owner's password before its rotation, a Secret deleted before the scan, and
    # the keys cert-manager generated, which only its Secrets hold.
    assert "leak-owner" in by_value["first-pw"].origin
    assert by_value[deleted].origin.startswith("Secret tenant-a/leak-deleted-")
    assert any(s.kind == leaks.PRIVATE_KEY and s.origin.startswith("Secret ") for s in found), (
        origins
    )
    # The state directory: a service-account signing key, which no CA signed.
    assert "state file kube/management/service-account.key" in origins, origins
    # The logs really are at DEBUG, and every place the scan claims was there to scan.
    for name in ("watcher", "worker-1"):
        assert '"level": "debug"' in (stack.logs / f"{name}.log").read_text(), name
    for name in ("watcher", "worker-1", "worker-2", "beat", "flower"):
        assert (stack.logs / f"{name}.log").stat().st_size > 0, name
    assert len(answers) > 5
    leaked = _scan_for_leaks(stack, real_redis, answers)
    assert leaked is None, leaked


def _deleted_secret(stack: Stack, recorder: leaks.Recorder) -> str:
    """Write a Secret and delete it again; return its password once the recorder has it."""
    cluster = stack.platform.cluster()
    name = stack.name("leak-deleted")
    password = secrets.token_urlsafe(16)
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "tenant-a"},
        "stringData": {"password": password},
    }
    cluster.create("secrets", body, "tenant-a")
    cluster.delete("secrets", name, "tenant-a")
    wait_for(
        lambda: any(s.value == password for s in recorder.stored), 10, "the recorder to see it"
    )
    return password
