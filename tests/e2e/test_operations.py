"""Operating tenantdb: bursts, refreshes, a shell re-run, Flower, and no secret anywhere."""

from __future__ import annotations

import base64
import re
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import redis

from tenantdb.adapters.mariadbdatabase import CONTROL_PLANE, MARIADB_DATABASE
from tenantdb.core.keys import OrderKey
from tests.e2e.conftest import Stack, free_port, order_quiet
from tests.support import wait_for

pytestmark = [pytest.mark.slow]

WORKERS = ("worker-1", "worker-2")

LEASE_SECONDS = 120
"""The order lease of this module's stacks. A worker held (frozen) longer than its lease is
rightly taken for lost, and its order passed again; the burst test holds its workers for less."""


@pytest.fixture
def stack_env() -> dict[str, str]:
    return {"TENANTDB_LOCK_TTL_SECONDS": str(LEASE_SECONDS)}


def _passes(stack: Stack) -> float:
    return sum(
        stack.counter(name, "tenantdb_reconcile_passes_total", kind="mariadbdatabase")
        for name in WORKERS
    )


def _order_events(stack: Stack) -> float:
    return stack.counter(
        "watcher", "tenantdb_watch_events_total", kind="MariaDBDatabase", type="MODIFIED"
    )


def _at_rest(stack: Stack, client: redis.Redis, key: OrderKey) -> tuple[float, float]:
    """Wait until the order is quiet and neither the passes nor the watcher's events of the
    kind have moved for a second; return both counts then."""
    last: list[tuple[float, float]] = []

    def resting() -> tuple[float, float] | None:
        now = (_passes(stack), _order_events(stack))
        last.append(now)
        steady = len(last) > 5 and all(seen == now for seen in last[-6:])
        return now if steady and order_quiet(stack, client, key) else None

    counts: tuple[float, float] = wait_for(resting, 30, "the order to come to rest", interval=0.2)
    return counts


def test_a_burst_of_a_thousand_updates_costs_at_most_two_passes(
    stack: Stack, real_redis: redis.Redis
) -> None:
    name = stack.name("burst-db")
    key = OrderKey("mariadbdatabase", "tenant-a", name)
    stack.apply_order(name)
    stack.wait_ready(name)
    # Every event of the order's provisioning heard and served, so the passes and events
    # counted from here on are the burst's alone.
    before, heard = _at_rest(stack, real_redis, key)
    sequence = f"{stack.prefix}seq:{key}"
    counted = int(real_redis.hget(sequence, "events") or 0)
    kube = stack.kube()
    kube.patch(MARIADB_DATABASE, "tenant-a", name, {"metadata": {"annotations": {"n": "0"}}})
    # Hold the workers: whatever pass the first update started stays in flight while the
    # other 999 arrive.
    held = time.monotonic()
    with stack.workers_held():
        for i in range(1, 1000):
            kube.patch(
                MARIADB_DATABASE, "tenant-a", name, {"metadata": {"annotations": {"n": str(i)}}}
            )
        # Every update handed on by the watcher before the workers go on, so none of them
        # arrives after the pass the burst is worth has begun.
        wait_for(lambda: _order_events(stack) >= heard + 1000, 30, "the watcher to hear all")
        # Counted in Redis too: the pass that runs next sees every one of them. (No pending mark
        # need show it: while the first pass holds the order's lease, an event is only counted.)
        wait_for(
            lambda: int(real_redis.hget(sequence, "events") or 0) >= counted + 1000,
            10,
            "the watcher to enqueue all",
        )
    # Frozen past its lease, a pass is taken for lost and run again: a third pass that is right.
    assert time.monotonic() - held < LEASE_SECONDS, "the workers were held longer than a lease"
    wait_for(lambda: order_quiet(stack, real_redis, key), 30, "the burst to be worked off")
    passes = _passes(stack) - before
    assert 1 <= passes <= 2, f"{passes} passes for a burst of 1,000 updates"
    watched = stack.counter("watcher", "tenantdb_enqueue_total", result="deduped")
    assert watched >= 900, "the watcher's enqueues of the burst were deduplicated"


@pytest.mark.private_platform  # the ControlPlane changes
def test_a_target_cluster_order_picks_up_a_new_endpoint_from_the_control_planes_event(
    stack: Stack, real_redis: redis.Redis
) -> None:
    name = stack.name("moved-db")
    key = OrderKey("mariadbdatabase", "tenant-a", name, "edge-1")
    stack.apply_order(name, cluster="edge-1")
    stack.wait_ready(name, cluster="edge-1")
    refresh = real_redis.zscore(f"{stack.prefix}refresh", str(key))
    assert refresh is not None, "a converged target-cluster order is due for its 10-minute refresh"
    assert (stack.secret(f"{name}-credentials", cluster="edge-1") or {})["host"] == "127.0.0.1"
    wait_for(lambda: order_quiet(stack, real_redis, key), 10, "the order to be quiet")
    stack.kube().patch(
        CONTROL_PLANE,
        "openstack",
        "cp",
        {"spec": {"infrastructure": {"publishedDatabaseEndpoint": "localhost:3306"}}},
    )
    # The ControlPlane's event wakes the order on the target cluster: no refresh is waited for.
    wait_for(
        lambda: (
            (stack.secret(f"{name}-credentials", cluster="edge-1") or {}).get("host") == "localhost"
        ),
        15,
        "the ControlPlane's event to deliver the new endpoint",
    )
    # The step writes the Secret first and the order's status right after it.
    wait_for(
        lambda: (
            ((stack.order(name, cluster="edge-1") or {}).get("status") or {}).get("host")
            == "localhost"
        ),
        10,
        "the status to carry the new endpoint",
    )


def test_reconcile_from_a_shell_waits_and_reports(stack: Stack) -> None:
    name = stack.name("shell-db")
    stack.apply_order(name)
    stack.wait_ready(name)
    done = stack.cli("reconcile", f"mariadbdatabase/tenant-a/{name}", "--wait", "30")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Ready=True AllReady" in done.stdout
    assert "DeliveryReady=True Delivered" in done.stdout

    refused = stack.cli("reconcile", "mariadbdatabase/tenant-a", "--wait", "5")
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1
    assert "expected KIND/NAMESPACE/NAME" in refused.stderr

    status = stack.cli("status", f"mariadbdatabase/tenant-a/{name}")
    assert status.returncode == 0
    assert "AllReady" in status.stdout


def test_a_forced_pass_over_a_ready_order_writes_nothing(stack: Stack) -> None:
    name = stack.name("quiet-db")
    stack.apply_order(name)
    stack.wait_ready(name)
    key = f"mariadbdatabase/tenant-a/{name}"
    assert stack.cli("reconcile", key, "--wait", "30").returncode == 0, "settled first"
    recorded = stack.record_writes()
    order = stack.order(name)

    done = stack.cli("reconcile", key, "--force", "--wait", "30")

    assert done.returncode == 0, done.stdout + done.stderr
    writes = [e for e in recorded() if e.field_manager == "tenantdb"]
    assert writes == [], "a pass over an order that is as desired must write nothing"
    again = stack.order(name)
    assert again is not None
    assert order is not None
    assert again["metadata"]["resourceVersion"] == order["metadata"]["resourceVersion"]


def test_the_audit_log_names_the_pass_and_order_of_each_write(stack: Stack) -> None:
    recorded = stack.record_writes()
    name = stack.name("audited-db")
    stack.apply_order(name)
    stack.wait_ready(name)

    # The test creates the order through tenantdb's own client, outside any pass.
    writes = [
        e
        for e in recorded()
        if e.field_manager == "tenantdb" and not (e.verb == "create" and e.name == name)
    ]
    assert writes, "tenantdb wrote the order's children"
    agent = re.compile(rf"tenantdb/\S+ \(pass ([0-9a-f]{{12}}); mariadbdatabase/tenant-a/{name}\)")
    named = [agent.fullmatch(e.user_agent) for e in writes]
    assert all(named), [(e.verb, e.resource, e.name, e.user_agent) for e in writes]
    passes = {m.group(1) for m in named if m}
    assert 1 <= len(passes) <= 4, "one pass per wake, not one per request"


def test_flower_answers_with_basic_auth_only_and_shows_the_chain_queues(stack: Stack) -> None:
    port = free_port()
    stack.start(
        "flower",
        "flower",
        "--port",
        str(port),
        "--address",
        "127.0.0.1",
        env={"TENANTDB_FLOWER_BASIC_AUTH": "ops:s3cret-e2e"},
    )

    def get(path: str, auth: str | None) -> tuple[int, str]:
        request = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
        if auth:
            request.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:  # noqa: S310 - loopback
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, ""
        except OSError:
            return 0, ""

    wait_for(lambda: get("/healthcheck", None)[0] == 200, 30, "Flower to answer")
    assert get("/", None)[0] == 401
    assert get("/", "ops:wrong")[0] == 401
    status, page = get("/broker", "ops:s3cret-e2e")
    assert status == 200
    for queue in ("reconcile", "provision", "delivery", "teardown"):
        assert queue in page


def test_no_password_or_token_shows_up_anywhere(stack: Stack, real_redis: redis.Redis) -> None:
    name = stack.name("secret-db")
    stack.apply_order(name)
    stack.wait_ready(name)
    secret = stack.secret(f"{name}-credentials") or {}
    stack.kube().delete(MARIADB_DATABASE, "tenant-a", name)
    wait_for(lambda: stack.order(name) is None, 40, "the deletion")
    env = stack.platform.env
    forbidden = {
        "delivered password": secret["password"],
        "OpenBao root token": env["DEVSTACK_OPENBAO_ROOT_TOKEN"],
        "ServiceAccount token": Path(env["TENANTDB_SERVICE_ACCOUNT_TOKEN_FILE"])
        .read_text()
        .strip(),
    }
    places = {"logs": stack.logs_text()}
    for process in ("watcher", *WORKERS, "beat"):
        places[f"{process} metrics"] = stack.metrics(process)
    places["redis"] = "\n".join(
        repr((name_, real_redis.dump(name_)))
        for name_ in real_redis.scan_iter(match=f"{stack.prefix}*", count=1000)
    )
    assert 'tenantdb_leader{role="beat"} 1.0' in places["beat metrics"]
    assert 'tenantdb_leader{role="watcher"} 1.0' in places["watcher metrics"]
    assert "tenantdb_due_keys" in places["beat metrics"]
    for what, value in forbidden.items():
        assert len(value) >= 8
        for where, text in places.items():
            assert value not in text, f"the {what} appears in the {where}"
