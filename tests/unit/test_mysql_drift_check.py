"""The drift check's I/O sequence (``check_drift``) and the admin login a worker process reuses
for it, over fake I/O and a real work queue on fakeredis: when the check looks, on which login,
what it claims and gives back, and what it reads from Kubernetes."""

from __future__ import annotations

import base64
from typing import Any, cast

import fakeredis
import pytest

from tenantdb.adapters import mysqldatabase as mysql
from tenantdb.adapters.clusters import ClusterRegistry
from tenantdb.adapters.kube import KubeClient
from tenantdb.adapters.mysqladmin import AdminError, GroupBusyError
from tenantdb.adapters.mysqldatabase import MysqlOrders, check_drift
from tenantdb.adapters.workqueue import WorkQueue
from tenantdb.core.mysqldatabase.passes import (
    REASSERT,
    VERIFY,
    Drift,
    QuietCheck,
    compose_quiet_check,
    decide_gate,
)
from tests.unit.mysql_pass import KEY, World, WorldIO, make_group, run_pass
from tests.unit.test_mysql_pass import APPLIED_ROWS


def _check(world: World) -> QuietCheck:
    check = _check_or_none(world)
    assert check is not None
    return check


def _ready_world() -> World:
    """A world whose order a real pass applied: Ready, and the primary as the apply left it."""
    world = World()
    assert run_pass(world).reason == "Applied"
    world.rows = list(APPLIED_ROWS)
    return world


def _queue() -> WorkQueue:
    return WorkQueue(fakeredis.FakeRedis(), lambda _: None, prefix="tenantdb-test:")


@pytest.mark.parametrize("quiet", [False, True], ids=["full", "quiet"])
def test_a_check_not_due_looks_at_nothing(quiet: bool) -> None:
    world, queue = _ready_world(), _queue()
    io = WorldIO(world)
    queue.claim_period(VERIFY, KEY, 60_000)
    assert check_drift(io, queue, KEY, _check(world), quiet=quiet) is Drift.NOT_DUE
    assert io.sessions == []


def test_an_order_whose_inputs_moved_has_no_check() -> None:
    world, queue = World(), _queue()
    assert _check_or_none(world) is None
    assert check_drift(WorldIO(world), queue, KEY, None, quiet=False) is None
    assert queue.claim_period(VERIFY, KEY, 1000), "nothing was claimed"


def _check_or_none(world: World) -> QuietCheck | None:
    gate = decide_gate(mysql.read_gates(WorldIO(world), KEY, mysql.fetched(world.order)))
    return compose_quiet_check(world.order, gate)


@pytest.mark.parametrize("quiet", [False, True], ids=["full", "quiet"])
def test_a_due_check_that_finds_the_order_as_applied_claims_the_period(quiet: bool) -> None:
    world, queue = _ready_world(), _queue()
    io = WorldIO(world)
    assert check_drift(io, queue, KEY, _check(world), quiet=quiet) is Drift.VERIFIED
    assert io.reused == [quiet], "a full pass reads the login afresh, a quiet one reuses it"
    assert [len(s.queries) for s in io.sessions] == [1]
    assert io.sent == []
    assert not queue.claim_period(VERIFY, KEY, 1000), "the period is claimed"


@pytest.mark.parametrize(
    ("rows", "error"),
    [
        pytest.param([r for r in APPLIED_ROWS if r[0] != "user"], None, id="drift"),
        pytest.param(APPLIED_ROWS, AdminError("gone", code=2013, transient=True), id="down"),
        pytest.param(APPLIED_ROWS, GroupBusyError("busy"), id="busy"),
        pytest.param(APPLIED_ROWS, mysql.CredentialError("no login"), id="no-login"),
    ],
)
def test_what_a_check_does_not_confirm_a_quiet_refresh_gives_back_to_a_full_pass(
    rows: list[tuple[Any, ...]], error: BaseException | None
) -> None:
    world, queue = _ready_world(), _queue()
    world.rows, world.open_error = list(rows), error
    check = _check(world)
    assert check_drift(WorldIO(world), queue, KEY, check, quiet=True) is Drift.UNVERIFIED
    assert queue.claim_period(VERIFY, KEY, 1000), "the quiet check gave the period back"
    queue.release_period(VERIFY, KEY)
    assert check_drift(WorldIO(world), queue, KEY, check, quiet=False) is Drift.UNVERIFIED
    assert not queue.claim_period(VERIFY, KEY, 1000), "the full pass keeps it: its step repairs"


def test_a_password_to_set_again_goes_to_the_full_pass_which_takes_it() -> None:
    world, queue = _ready_world(), _queue()
    io = WorldIO(world)
    check = _check(world)
    queue.claim_period(REASSERT, KEY, 60_000)
    assert check_drift(io, queue, KEY, check, quiet=True) is Drift.REASSERT
    assert queue.holds_period(REASSERT, KEY), "left for the full pass"
    assert queue.claim_period(VERIFY, KEY, 1000), "the quiet check claimed nothing"
    queue.release_period(VERIFY, KEY)
    assert check_drift(io, queue, KEY, check, quiet=False) is Drift.REASSERT
    assert not queue.holds_period(REASSERT, KEY), "taken by the full pass"
    assert io.sessions == [], "no look: the apply step sets the password"


class _Secrets:
    """A cluster's Secrets for ``MysqlOrders``: counts each read."""

    def __init__(self, secrets: dict[str, dict[str, str]]) -> None:
        self.secrets = secrets
        self.reads: list[str] = []

    def get_or_none(self, resource: Any, namespace: str, name: str) -> dict[str, Any] | None:
        self.reads.append(name)
        values = self.secrets.get(name)
        if values is None:
            return None
        data = {k: base64.b64encode(v.encode()).decode() for k, v in values.items()}
        return {"metadata": {"name": name, "namespace": namespace, "uid": name}, "data": data}


def _orders(secrets: dict[str, dict[str, str]]) -> tuple[MysqlOrders, _Secrets]:
    cluster = _Secrets(secrets)
    return MysqlOrders(ClusterRegistry({"": lambda: cast(KubeClient, cluster)})), cluster


def test_a_quiet_check_reuses_the_login_read_lately_and_a_full_pass_reads_it_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    orders, cluster = _orders(
        {
            "main-operator": {"username": "bloodraven", "password": "op-pw"},
            "main-tls": {"ca.crt": "CA"},
        }
    )
    group = make_group(tls=True)

    target, login = orders.admin(KEY, group, "dc1")
    assert cluster.reads == ["main-operator", "main-tls"]
    assert (login.user, target.ca_pem, target.site) == ("bloodraven", b"CA", "dc1")
    assert orders.admin(KEY, group, "dc1", reuse=True) == (target, login)
    assert cluster.reads == ["main-operator", "main-tls"], "reused: nothing read"

    orders.admin(KEY, group, "dc1")
    assert len(cluster.reads) == 4, "a full pass reads the login afresh"
    orders.admin(KEY, group, "dc2", reuse=True)
    assert len(cluster.reads) == 6, "another site is another login"

    monkeypatch.setattr(mysql, "LOGIN_REUSE_SECONDS", 0.0)
    cluster.secrets["main-operator"]["password"] = "rotated"
    assert orders.admin(KEY, group, "dc1", reuse=True)[1].password == "rotated"
    assert len(cluster.reads) == 8, "too old to reuse"
