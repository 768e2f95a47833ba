"""An order as its owner sees it: Ready with a working credential, repaired, refreshed, TLS.

Everything runs hands-free: the watcher turns the test's changes into passes, the workers run
them, beat brings orders back when they asked to wait. Nothing here enqueues by hand.
"""

from __future__ import annotations

import base64
import json

import pymysql
import pytest

from tenantdb.adapters.kube import SECRET
from tenantdb.core.mariadbdatabase.naming import compute_order_names
from tests.e2e.conftest import Stack
from tests.support import sql_login, wait_for

pytestmark = [pytest.mark.slow]

STATUS_FIELDS = {
    "conditions",
    "observedGeneration",
    "databaseName",
    "host",
    "port",
    "roleName",
    "credentialsRefreshedAt",
    "secretName",
    "secretKeys",
}


def test_an_order_is_ready_with_a_credential_for_its_schema_only(stack: Stack) -> None:
    name = stack.name("app-db")
    schema = name.replace("-", "_")
    stack.apply_order(name)
    order = stack.wait_ready(name)
    status = order["status"]
    assert set(status) == STATUS_FIELDS
    assert status["databaseName"] == schema
    assert (status["host"], status["port"]) == ("openstack-db.openstack.svc", 3306)
    assert status["secretName"] == f"{name}-credentials"
    assert status["secretKeys"] == ["host", "port", "database", "username", "password"]
    assert status["roleName"].startswith("order.openstack.")
    assert status["roleName"].endswith("-database")
    assert status["observedGeneration"] == order["metadata"]["generation"]
    reasons = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
    assert reasons == {
        "DatabaseReady": ("True", "DatabaseProvisioned"),
        "DeliveryReady": ("True", "Delivered"),
        "Ready": ("True", "AllReady"),
    }

    secret = stack.secret(f"{name}-credentials")
    assert secret is not None
    assert secret["username"].startswith("v-")
    assert secret["database"] == schema
    host, port = stack.real_address(secret["host"], secret["port"])
    assert (host, port) == ("127.0.0.1", 3306)
    with sql_login(secret["username"], secret["password"], schema) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE notes (id INT PRIMARY KEY, body TEXT)")
        cur.execute("INSERT INTO notes VALUES (1, 'hello')")
        conn.commit()
        cur.execute("SELECT body FROM notes WHERE id = 1")
        assert cur.fetchone() == ("hello",)
        cur.execute("SHOW DATABASES")
        visible = {row[0] for row in cur.fetchall()}
        assert visible == {"information_schema", schema}
        with pytest.raises(pymysql.err.OperationalError, match="denied"):
            cur.execute("CREATE TABLE mysql.intruder (id INT)")
    with pytest.raises(pymysql.err.OperationalError):
        sql_login(secret["username"], secret["password"], "mysql")


def _issued(stack: Stack, name: str) -> dict[str, str]:
    """The credential ESO holds for a management-cluster order (what tenantdb delivers)."""
    credentials = compute_order_names("", "tenant-a", name, "openstack").credentials
    return stack.secret(credentials, namespace="openstack") or {}


def test_the_delivered_secret_is_repaired_but_foreign_keys_stay(stack: Stack) -> None:
    name = stack.name("repair-db")
    stack.apply_order(name)
    stack.wait_ready(name)
    secret_name = f"{name}-credentials"
    kube = stack.kube()
    assert stack.secret(secret_name) is not None

    kube.patch(
        SECRET,
        "tenant-a",
        secret_name,
        {"data": {"password": base64.b64encode(b"guess").decode(), "note": "b3duZXI="}},
    )
    # ESO may read a second credential right after its first sync, and tenantdb then delivers
    # that one: the repair puts back whatever ESO holds at the time.
    wait_for(
        lambda: (
            (stack.secret(secret_name) or {}).get("password")
            == _issued(stack, name).get("password")
            != "guess"
        ),
        30,
        "the repair",
    )
    assert (stack.secret(secret_name) or {}).get("note") == "owner", "another manager's key stays"

    kube.delete(SECRET, "tenant-a", secret_name)
    wait_for(lambda: stack.secret(secret_name), 10, "the deleted Secret to come back")
    assert (stack.secret(secret_name) or {})["username"] == _issued(stack, name)["username"]


@pytest.mark.parametrize("cluster", ["", "edge-1"], ids=["management", "target"])
def test_a_secret_stripped_of_its_labels_and_edited_is_repaired_on_that_event(
    stack: Stack, cluster: str
) -> None:
    name = stack.name("stripped-db")
    stack.apply_order(name, cluster)
    stack.settle_credential(name, cluster)
    secret_name = f"{name}-credentials"
    good = stack.secret(secret_name, cluster)
    assert good is not None
    kube = stack.kube(cluster)
    labels = kube.get(SECRET, "tenant-a", secret_name)["metadata"]["labels"]

    # One write: the labels the watch selects on are gone, and the password is wrong.
    tampered = base64.b64encode(b"guess").decode()
    kube.patch(
        SECRET,
        "tenant-a",
        secret_name,
        {"metadata": {"labels": None}, "data": {"password": tampered}},
    )

    wait_for(
        lambda: (stack.secret(secret_name, cluster) or {}).get("password") == good["password"],
        30,
        "the repair on the Secret's own event (the next refresh is minutes away)",
    )
    assert kube.get(SECRET, "tenant-a", secret_name)["metadata"]["labels"] == labels


def test_a_forced_refresh_mints_a_new_user_and_logs_it_once(stack: Stack) -> None:
    name = stack.name("refresh-db")
    stack.apply_order(name)
    first = stack.settle_credential(name)
    first_user = (stack.secret(f"{name}-credentials") or {})["username"]

    def refreshes() -> list[str]:
        # Each worker logs to a file of its own: the lines are put in the order they were
        # written by their time, not by the file they are in.
        lines = [
            line
            for line in stack.logs_text().splitlines()
            if "delivered a refreshed database credential" in line and f"/{name}" in line
        ]
        return sorted(lines, key=lambda line: str(json.loads(line)["time"]))

    before = set(refreshes())
    after = stack.force_refresh(name, first)
    assert after["status"]["credentialsRefreshedAt"] > first["status"]["credentialsRefreshedAt"]
    # ESO may read a second credential right after the forced one (as after a first sync):
    # what counts is that each credential delivered is logged once, the last one included.
    stack.settle_credential(name)
    new = stack.secret(f"{name}-credentials") or {}
    with sql_login(new["username"], new["password"], name.replace("-", "_")):
        pass
    lines = [line for line in refreshes() if line not in before]
    users = [json.loads(line)["fields"]["username"] for line in lines]
    assert len(users) == len(set(users)), lines
    assert users[-1:] == [new["username"]], lines
    assert first_user not in users
