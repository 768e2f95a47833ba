"""The secret-leak scan: a full lifecycle at DEBUG, with Flower, leaves no issued secret behind.

Every e2e test's stack is scanned at teardown (``tests.e2e.conftest``); this test makes the scan
as hard to pass as the stack allows: every tenantdb process logs at DEBUG
(``TENANTDB_LOG_LEVEL=DEBUG``), Flower runs on the stack's broker, and the lifecycle covers
delivery, a forced credential refresh and a deletion of a MariaDBDatabase and a MysqlDatabase
order with an owner rotation. Flower's API answers are scanned with everything else. The first
tests show the scanner finds a planted secret.
"""

from __future__ import annotations

import base64
import json
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
@pytest.mark.real_server
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
    found = leaks.collect(stack.platform, stack.leak_recorder)
    counts = found.counts()
    assert all(counts[kind] > 0 for kind in leaks.CLASSES), counts
    origins = {secret.origin for secret in found}
    assert any("dynamic credential" in o for o in origins), origins
    assert any(o.startswith("ServiceAccount token") for o in origins), origins
    assert any(o.startswith("OpenBao token") for o in origins), origins
    assert any("leak-owner" in o for o in origins), origins
    # The logs really are at DEBUG, and every place the scan claims was there to scan.
    for name in ("watcher", "worker-1"):
        assert '"level": "debug"' in (stack.logs / f"{name}.log").read_text(), name
    for name in ("watcher", "worker-1", "worker-2", "beat", "flower"):
        assert (stack.logs / f"{name}.log").stat().st_size > 0, name
    assert len(answers) > 5
    leaked = _scan_for_leaks(stack, real_redis, answers)
    assert leaked is None, leaked
