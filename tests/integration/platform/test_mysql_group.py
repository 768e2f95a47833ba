"""The MySQL failover group: two real MariaDB servers, GTID replication from dc1 to dc2, the
group's accounts behind their Secrets, and planned failovers driven through the official client.

The servers start once per session (`mysql_servers`); this module's platform reuses them, and
every test starts from the initial topology (`reset`) and leaves no tenant schema or user.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest
from kubernetes import client

from devstack.mysql_group import ANNOTATION, MysqlGroup
from devstack.platform import Platform, start_platform
from tests.support import wait_for

from .conftest import decoded, suffix

NS = "bloodraven"
GROUP = ("shipstream.io", "v1alpha1", NS, "mysqlfailovergroups", "main")
READ_ONLY_ERROR = 1290
FAILOVER_DEADLINE = 30.0


@pytest.fixture(scope="module")
def platform(
    tmp_path_factory: pytest.TempPathFactory, mysql_servers: MysqlGroup
) -> Iterator[Platform]:
    """A platform on management only, with the session's failover group."""
    running = start_platform(
        tmp_path_factory.mktemp("mysql-group"),
        ("management",),
        mysql_group=mysql_servers,
    )
    yield running
    running.stop()


@pytest.fixture(autouse=True)
def initial_topology(platform: Platform, mysql_servers: MysqlGroup) -> Iterator[MysqlGroup]:
    """Start each test from dc1 primary, dc2 replica; drop what the test created."""
    mysql_servers.reset()
    yield mysql_servers
    mysql_servers.reset()
    mysql_servers.drop_tenant_objects()


def _group(custom: client.CustomObjectsApi) -> dict[str, Any]:
    obj: dict[str, Any] = custom.get_namespaced_custom_object(*GROUP)
    return obj


def _phase(obj: dict[str, Any]) -> str:
    return str(((obj.get("status") or {}).get("plannedFailover") or {}).get("phase") or "")


def _request_failover(custom: client.CustomObjectsApi, site: str) -> None:
    custom.patch_namespaced_custom_object(*GROUP, {"metadata": {"annotations": {ANNOTATION: site}}})


def _scalar(conn: Any, query: str, *args: Any) -> Any:
    with conn.cursor() as cursor:
        cursor.execute(query, args or None)
        row = cursor.fetchone()
    return row[0] if row else None


def _execute(conn: Any, *statements: str) -> None:
    with conn.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def _rows(group: MysqlGroup, site: str, table: str) -> list[int]:
    with group.connect(site) as conn, conn.cursor() as cursor:
        cursor.execute(f"SELECT id FROM {table} ORDER BY id")  # noqa: S608 - the test's table
        return [int(row[0]) for row in cursor.fetchall()]


def _write_error(
    group: MysqlGroup, site: str, table: str, value: int, user: str = "app"
) -> int | None:
    """Insert a row (as `app` unless told); the server's error code, or None when it went
    through."""
    try:
        with group.connect(site, user) as conn:
            _execute(conn, f"INSERT INTO {table} VALUES ({int(value)})")  # noqa: S608 - ours
    except pymysql.MySQLError as exc:
        return int(exc.args[0])
    return None


def _table(group: MysqlGroup) -> str:
    schema = f"g_{suffix()}"
    with group.connect(group.primary, "app") as conn:
        _execute(
            conn,
            f"CREATE DATABASE {schema}",
            f"CREATE TABLE {schema}.t (id INT PRIMARY KEY)",
            f"INSERT INTO {schema}.t VALUES (1)",  # noqa: S608 - the schema the test names
        )
    return f"{schema}.t"


def _events(core: client.CoreV1Api, reason: str) -> list[Any]:
    listed = core.list_namespaced_event(
        NS,
        field_selector=(
            f"involvedObject.kind=MysqlFailoverGroup,involvedObject.name=main,reason={reason}"
        ),
    )
    return list(listed.items)


# ------------------------------------------------------------ the seed


def test_the_seed_is_a_group_on_dc1_with_its_credential_secrets(
    platform: Platform, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    obj = _group(custom)
    assert [(s["name"], s["role"]) for s in obj["spec"]["sites"]] == [
        ("dc1", "primary-candidate"),
        ("dc2", "primary-candidate"),
    ]
    assert obj["spec"]["credentials"] == {
        "operatorSecret": "main-operator",
        "appSecret": "main-app",
        "readOnlySecret": "main-readonly",
        "monitorSecret": "main-monitor",
        "backupSecret": "main-backup",
    }
    assert obj["status"]["activeSite"] == "dc1"
    operator = core.read_namespaced_secret("main-operator", NS)
    assert operator.type == "Opaque"
    assert set(operator.data) == {
        "username",
        "password",
        "MYSQL_ROOT_PASSWORD",
        "MYSQL_REPLICATION_USER",
        "MYSQL_REPLICATION_PASSWORD",
    }
    assert decoded(operator, "MYSQL_REPLICATION_USER") == b"replicator"
    for name in ("main-app", "main-readonly", "main-monitor", "main-backup"):
        assert set(core.read_namespaced_secret(name, NS).data) == {"username", "password"}


def test_services_json_maps_both_sites_to_their_servers(
    platform: Platform, mysql_servers: MysqlGroup
) -> None:
    services = json.loads((platform.state_dir / "services.json").read_text())
    for site in ("dc1", "dc2"):
        host, port = mysql_servers.address(site)
        key = f"mysql-main-{site}-internal.bloodraven.svc.cluster.local:3306"
        assert services[key] == f"{host}:{port}"
        assert host == "127.0.0.1"
        assert port != 3306
    assert mysql_servers.address("dc1") != mysql_servers.address("dc2")


def test_the_credential_users_log_in_with_their_secrets_passwords(
    core: client.CoreV1Api, mysql_servers: MysqlGroup
) -> None:
    expected = {
        "main-operator": ("INSERT", "SUPER", "CREATE USER", "WITH GRANT OPTION"),
        "main-app": ("INSERT", "SUPER", "CREATE USER"),
        "main-readonly": ("SELECT, PROCESS, SHOW DATABASES, SHOW VIEW ON *.*",),
        "main-monitor": ("PROCESS", "BINLOG MONITOR", "SLAVE MONITOR"),
        "main-backup": ("SELECT, RELOAD, LOCK TABLES, SHOW VIEW, EVENT, TRIGGER ON *.*",),
    }
    for name, wanted in expected.items():
        secret = core.read_namespaced_secret(name, NS)
        user, password = decoded(secret, "username").decode(), decoded(secret, "password").decode()
        for site in ("dc1", "dc2"):
            with mysql_servers.connect(site, user, password) as conn:
                assert _scalar(conn, "SELECT CURRENT_USER()") == f"{user}@%"
                grants = " ".join(_scalar(conn, f"SHOW GRANTS FOR '{user}'@'%'").split())
                assert all(grant in grants for grant in wanted), (name, grants)
                if name in ("main-app", "main-operator"):
                    # Neither may write through read_only: the replica's fence is the server's.
                    assert "READ_ONLY ADMIN" not in grants
        with pytest.raises(pymysql.MySQLError) as refused:
            mysql_servers.connect("dc1", user, password + "x")
        assert refused.value.args[0] == 1045
    operator = core.read_namespaced_secret("main-operator", NS)
    with mysql_servers.connect(
        "dc1", "root", decoded(operator, "MYSQL_ROOT_PASSWORD").decode()
    ) as conn:
        assert _scalar(conn, "SELECT CURRENT_USER()") == "root@%"
    with pytest.raises(pymysql.MySQLError):
        mysql_servers.connect("dc1", "root", "")
    with mysql_servers.connect(
        "dc2", "replicator", decoded(operator, "MYSQL_REPLICATION_PASSWORD").decode()
    ) as conn:
        assert "REPLICATION SLAVE" in _scalar(conn, "SHOW GRANTS")


# ------------------------------------------------------------ replication


def test_a_row_written_on_the_primary_appears_on_the_replica(mysql_servers: MysqlGroup) -> None:
    table = _table(mysql_servers)
    assert _write_error(mysql_servers, "dc1", table, 2) is None
    wait_for(lambda: _rows(mysql_servers, "dc2", table) == [1, 2], what="the row on dc2")
    status = mysql_servers.topology()["dc2"]
    assert status["source_port"] == mysql_servers.address("dc1")[1]
    assert (status["io_running"], status["sql_running"]) == ("Yes", "Yes")
    with mysql_servers.connect("dc2") as conn:
        assert _scalar(conn, "SELECT @@server_id") != 1
        assert _scalar(conn, "SELECT @@gtid_slave_pos")


def test_the_replica_refuses_writes(mysql_servers: MysqlGroup) -> None:
    table = _table(mysql_servers)
    assert mysql_servers.wait_replicated()
    assert not mysql_servers.read_only("dc1")
    assert mysql_servers.read_only("dc2")
    assert _write_error(mysql_servers, "dc2", table, 5) == READ_ONLY_ERROR
    assert _write_error(mysql_servers, "dc2", table, 5, user="bloodraven") == READ_ONLY_ERROR
    assert _write_error(mysql_servers, "dc1", table, 5) is None
    wait_for(lambda: _rows(mysql_servers, "dc2", table) == [1, 5], what="dc1's write on dc2")


def test_a_site_stops_and_comes_back_with_its_data(mysql_servers: MysqlGroup) -> None:
    table = _table(mysql_servers)
    assert mysql_servers.wait_replicated()
    mysql_servers.stop_site("dc2")
    assert not mysql_servers.is_running("dc2")
    with pytest.raises(pymysql.MySQLError) as down:
        mysql_servers.connect("dc2")
    assert down.value.args[0] == 2003
    assert _write_error(mysql_servers, "dc1", table, 2) is None
    mysql_servers.start_site("dc2")
    assert mysql_servers.read_only("dc2")
    wait_for(lambda: _rows(mysql_servers, "dc2", table) == [1, 2], what="dc2 catching up")

    mysql_servers.stop_site("dc1")
    mysql_servers.start_site("dc1")
    assert not mysql_servers.read_only("dc1")
    assert _rows(mysql_servers, "dc1", table) == [1, 2]
    assert _write_error(mysql_servers, "dc1", table, 3) is None
    wait_for(
        lambda: _rows(mysql_servers, "dc2", table) == [1, 2, 3],
        seconds=15,
        what="dc2 reconnecting to the restarted primary",
    )


# ------------------------------------------------------------ planned failover


def _watch_phases(
    custom: client.CustomObjectsApi, fence: dict[str, Any], group: MysqlGroup, table: str
) -> list[str]:
    """Poll the group until its failover ends; record each phase once, and what the old
    primary did with a write while the group was Draining."""
    seen: list[str] = []
    deadline = time.monotonic() + FAILOVER_DEADLINE
    while time.monotonic() < deadline:
        phase = _phase(_group(custom))
        if phase and (not seen or seen[-1] != phase):
            seen.append(phase)
            if phase == "Draining":
                fence["dc1_read_only"] = group.read_only("dc1")
                fence["dc1_write"] = _write_error(group, "dc1", table, 7)
        if phase in ("Succeeded", "Failed"):
            return seen
        time.sleep(0.02)
    pytest.fail(f"the failover did not end; phases seen: {seen}")


@pytest.mark.slow
def test_a_planned_failover_moves_the_primary_to_dc2_and_replication_turns_round(
    custom: client.CustomObjectsApi, core: client.CoreV1Api, mysql_servers: MysqlGroup
) -> None:
    table = _table(mysql_servers)
    assert mysql_servers.wait_replicated()
    fence: dict[str, Any] = {}
    _request_failover(custom, "dc2")
    phases = _watch_phases(custom, fence, mysql_servers, table)
    assert phases == ["Pending", "Draining", "WaitingForLag", "Promoting", "Resuming", "Succeeded"]
    assert fence == {"dc1_read_only": True, "dc1_write": READ_ONLY_ERROR}

    obj = _group(custom)
    assert obj["status"]["activeSite"] == "dc2"
    assert obj["status"]["lastFailoverTarget"] == "dc2"
    assert obj["status"]["plannedFailover"]["targetSite"] == "dc2"
    assert ANNOTATION not in (obj["metadata"].get("annotations") or {})
    assert mysql_servers.primary == "dc2"
    assert mysql_servers.read_only("dc1")
    assert not mysql_servers.read_only("dc2")
    assert _write_error(mysql_servers, "dc1", table, 8) == READ_ONLY_ERROR
    assert _write_error(mysql_servers, "dc2", table, 9) is None
    wait_for(lambda: _rows(mysql_servers, "dc1", table) == [1, 9], what="dc2's write on dc1")
    status = mysql_servers.topology()["dc1"]
    assert status["source_port"] == mysql_servers.address("dc2")[1]
    assert mysql_servers.topology()["dc2"]["source_port"] is None

    started, succeeded = (
        _events(core, "PlannedFailoverStarted"),
        _events(core, "PlannedFailoverSucceeded"),
    )
    assert [e.type for e in started + succeeded] == ["Normal", "Normal"]
    assert succeeded[0].involved_object.uid == obj["metadata"]["uid"]
    assert "dc2" in succeeded[0].message

    mysql_servers.reset()
    obj = _group(custom)
    assert obj["status"]["activeSite"] == "dc1"
    assert "plannedFailover" not in obj["status"]
    assert "lastFailoverTarget" not in obj["status"]
    assert mysql_servers.primary == "dc1"
    assert not mysql_servers.read_only("dc1")
    assert mysql_servers.read_only("dc2")
    assert _write_error(mysql_servers, "dc1", table, 10) is None
    wait_for(lambda: _rows(mysql_servers, "dc2", table) == [1, 9, 10], what="dc1 primary again")


@pytest.mark.parametrize(
    ("site", "why"),
    [
        pytest.param("dc9", 'site "dc9" is not a site of MysqlFailoverGroup "main"', id="unknown"),
        pytest.param("dc1", 'site "dc1" is already the active site', id="active"),
    ],
)
def test_a_failover_to_an_unknown_or_the_active_site_fails_and_touches_nothing(
    custom: client.CustomObjectsApi,
    core: client.CoreV1Api,
    mysql_servers: MysqlGroup,
    site: str,
    why: str,
) -> None:
    before = mysql_servers.topology()
    known = {
        e.metadata.name
        for reason in ("PlannedFailoverFailed", "PlannedFailoverStarted")
        for e in _events(core, reason)
    }
    _request_failover(custom, site)
    obj = wait_for(
        lambda: (lambda o: o if _phase(o) == "Failed" else None)(_group(custom)),
        what="the Failed phase",
    )
    failover = obj["status"]["plannedFailover"]
    assert failover["targetSite"] == site
    assert why in failover["message"]
    assert obj["status"]["activeSite"] == "dc1"
    assert "lastFailoverTarget" not in obj["status"]
    assert ANNOTATION not in (obj["metadata"].get("annotations") or {})
    assert mysql_servers.topology() == before
    assert mysql_servers.primary == "dc1"
    failed = [e for e in _events(core, "PlannedFailoverFailed") if e.metadata.name not in known]
    assert [(e.type, e.source.component) for e in failed] == [("Warning", "bloodraven")]
    assert why in failed[0].message
    assert all(e.metadata.name in known for e in _events(core, "PlannedFailoverStarted"))


def test_a_failover_to_a_stopped_site_fails_before_fencing(
    custom: client.CustomObjectsApi, mysql_servers: MysqlGroup
) -> None:
    mysql_servers.stop_site("dc2")
    _request_failover(custom, "dc2")
    obj = wait_for(
        lambda: (lambda o: o if _phase(o) == "Failed" else None)(_group(custom)),
        what="the Failed phase",
    )
    assert 'site "dc2" is not running' in obj["status"]["plannedFailover"]["message"]
    assert not mysql_servers.read_only("dc1")


def test_reset_and_cleanup_restore_the_initial_group(
    custom: client.CustomObjectsApi, mysql_servers: MysqlGroup
) -> None:
    table = _table(mysql_servers)
    user = f"tenant_{suffix()}"
    with mysql_servers.connect("dc1") as conn:
        _execute(conn, f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'")
    mysql_servers.switchover("dc2")
    custom.patch_namespaced_custom_object_status(
        *GROUP,
        {"status": {"activeSite": "dc2", "plannedFailover": {"phase": "Failed", "message": "x"}}},
    )
    mysql_servers.stop_site("dc1")
    mysql_servers.reset()
    obj = _group(custom)
    assert obj["status"] == {"activeSite": "dc1"}
    topology = mysql_servers.topology()
    assert topology["dc1"]["read_only"] is False
    assert topology["dc2"]["source_port"] == mysql_servers.address("dc1")[1]

    dropped = mysql_servers.drop_tenant_objects()
    assert table.split(".")[0] in dropped
    assert f"{user}@%" in dropped
    for site in ("dc1", "dc2"):
        with mysql_servers.connect(site) as conn:
            users = set(_all(conn, "SELECT User FROM mysql.user"))
            schemas = set(_all(conn, "SHOW DATABASES"))
        assert user not in users
        assert {"root", "bloodraven", "app", "readonly", "monitor", "backup", "replicator"} <= users
        assert schemas == {"information_schema", "mysql", "performance_schema", "sys"}


def _all(conn: Any, query: str) -> list[str]:
    with conn.cursor() as cursor:
        cursor.execute(query)
        return [str(row[0]) for row in cursor.fetchall()]


def test_a_group_of_its_own_lives_in_its_directory_and_stops_without_leftovers(
    tmp_path: Path,
) -> None:
    with MysqlGroup.start(tmp_path / "group") as group:
        pids = [group.servers[site].pid for site in group.sites]
        assert all(pids)
        assert (tmp_path / "group" / "dc1" / "data" / "mysql").is_dir()
        assert (tmp_path / "group" / "dc2" / "data" / "mysql").is_dir()
        with group.connect("dc1") as conn:
            assert _scalar(conn, "SELECT @@server_id") == 1
            assert _scalar(conn, "SELECT @@log_bin") == 1
    assert not any(Path(f"/proc/{pid}").exists() for pid in pids)
    assert (tmp_path / "group" / "dc1" / "data").is_dir()


def test_a_phase_written_by_someone_else_is_left_alone(
    platform: Platform, custom: client.CustomObjectsApi, mysql_servers: MysqlGroup
) -> None:
    written = {"plannedFailover": {"phase": "Draining", "targetSite": "dc2"}}
    custom.patch_namespaced_custom_object_status(*GROUP, {"status": written})
    assert platform.bloodraven is not None
    time.sleep(2 * platform.bloodraven.phase_seconds)
    assert platform.bloodraven.failovers.wait_idle()
    assert _group(custom)["status"]["plannedFailover"] == written["plannedFailover"]
    assert not mysql_servers.read_only("dc1")
    assert mysql_servers.primary == "dc1"
