"""MysqlDatabase when a statement fails: every statement of an apply, a rotation and a drop.

A proxy in front of the group's primary (``devstack.mysql_group.cutter``) cuts tenantdb's
connection at one chosen statement, before the server runs it or after it ran and before its
answer arrives: to tenantdb both look like a failover. And the server refuses a password its
policy rejects. After each fault the order must converge with records that say the truth: no
schema claimed that the order did not create, no account recorded that does not exist (so a
foreign account of that name is later refused, never adopted), no DatabasePreExists dead end,
and the schema created exactly once.
"""

from __future__ import annotations

import json
import re
import signal
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis

from devstack.mysql_group.cutter import StatementCutter
from tenantdb.core.mysqldatabase.naming import IDENTITY
from tenantdb.core.seal import SealKeys
from tests.conftest import REDIS_URL
from tests.e2e.mysql_tenants import (
    GROUP,
    NS,
    Tenants,
    literal,
    platform_options,
    tenants,
)
from tests.faults.conftest import FIGURES, Figures
from tests.support import wait_for

# The failover group is moved, stopped and failed over: a platform of its own.
pytestmark = [pytest.mark.slow, pytest.mark.private_platform]

__all__ = ["platform_options", "tenants"]

PENDING = (15, 45)
"""When a Pending order (or a deferred drop) comes back: the test fast-forwards it."""


@pytest.fixture
def cutter(tenants: Tenants) -> Iterator[StatementCutter]:
    """The proxy, in front of the primary before any order connects to it."""
    group = tenants.group
    proxy = StatementCutter(group.address(group.primary)).start()
    services = Path(tenants.stack.platform.state_dir) / "services.json"
    mapping = json.loads(services.read_text())
    host, port = proxy.address
    mapping[tenants.stack.platform.mysql_service(group.primary)] = f"{host}:{port}"
    services.write_text(json.dumps(mapping))
    yield proxy
    proxy.stop()


def _cut(tenants: Tenants, cutter: StatementCutter, name: str, pattern: str, after: bool) -> None:
    """Wait for the armed cut, then bring the order's come-back forward."""
    assert cutter.fired.wait(30), f"no statement matched {pattern!r}"
    status = wait_for(
        lambda: (s := tenants.status(name)).get("phase") in ("Pending", "Deleting") and s,
        20,
        f"{name} to record the lost connection",
    )
    assert "DatabasePreExists" not in str(status)
    tenants.come_back_now(name, within=PENDING)


def _created(tenants: Tenants, db: str, site: str | None = None, since: Any = None) -> int:
    """How many CREATE DATABASE statements for ``db`` tenantdb's account sent (to the primary,
    or to ``site``; from the server time ``since`` on, when given)."""
    user = tenants.group.account("operator").username
    with tenants.root(site) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT COUNT(*) FROM mysql.general_log WHERE command_type = 'Query'"
            " AND user_host LIKE %s AND argument LIKE %s AND event_time >= %s",
            (f"{user}[{user}]%", f"CREATE DATABASE IF NOT EXISTS `{db}`%", since or EPOCH),
        )
        row = cur.fetchone()
    return int(row[0]) if row else 0


EPOCH = "1970-01-01"


def _server_now(tenants: Tenants, site: str) -> Any:
    with tenants.root(site) as conn, conn.cursor() as cur:
        cur.execute("SELECT NOW(6)")
        row = cur.fetchone()
    assert row is not None
    return row[0]


def _ready_and_true(tenants: Tenants, name: str, db: str, owner: str, password: str) -> None:
    status = tenants.ready(name)
    assert status["databaseCreated"] is True
    assert status["ownerUser"] == owner
    assert "pendingOwnerUser" not in status
    assert tenants.logs_in(owner, password)
    assert tenants.grants(owner) == {f"GRANT ALL PRIVILEGES ON `{literal(db)}`.* TO `{owner}`@`%`"}


def _owner_is(tenants: Tenants, name: str, owner: str) -> Callable[[], bool]:
    return lambda: tenants.status(name).get("ownerUser") == owner


def _gone(tenants: Tenants, name: str) -> Callable[[], bool]:
    return lambda: tenants.get(name) is None


def _statements(kind: str, db: str, owner: str, grantee: str, rotated: str) -> list[str]:
    on = re.escape(f"`{literal(db)}`.*")
    return {
        "apply": [
            rf"^CREATE DATABASE IF NOT EXISTS `{db}`",
            rf"^CREATE USER IF NOT EXISTS '{owner}'",
            rf"^GRANT ALL PRIVILEGES ON {on} TO '{owner}'",
            rf"^GRANT SELECT ON {on} TO '{grantee}'",
        ],
        "rotation": [
            rf"^CREATE USER IF NOT EXISTS '{rotated}'",
            rf"^GRANT ALL PRIVILEGES ON {on} TO '{rotated}'",
            rf"^REVOKE ALL PRIVILEGES ON {on} FROM '{owner}'",
            rf"^DROP USER IF EXISTS '{owner}'",
        ],
        "drop": [
            rf"^REVOKE ALL PRIVILEGES ON {on} FROM '{grantee}'",
            rf"^REVOKE ALL PRIVILEGES ON {on} FROM '{owner}'",
            rf"^DROP DATABASE IF EXISTS `{db}`",
            rf"^DROP USER IF EXISTS '{owner}'",
        ],
    }[kind]


def _cases() -> list[tuple[int, bool]]:
    return [(index, after) for index in range(4) for after in (False, True)]


def test_a_connection_lost_at_any_statement_of_an_apply_converges_with_true_records(
    tenants: Tenants, cutter: StatementCutter
) -> None:
    grantee = tenants.name("maester")
    tenants.sql(f"CREATE USER '{grantee}'@'%' IDENTIFIED BY 'maester-pw'")
    for case, (index, after) in enumerate(_cases()):
        name, db, owner = f"tenant-a{case}", tenants.name(f"a{case}_wms"), tenants.name(f"a{case}")
        pattern = _statements("apply", db, owner, grantee, "")[index]
        tenants.owner_secret(f"a{case}-owner", owner, "first-pw")
        cutter.arm(pattern, after=after)
        tenants.order(name, db, f"a{case}-owner", grants=((grantee, ["SELECT"]),))
        _cut(tenants, cutter, name, pattern, after)
        _ready_and_true(tenants, name, db, owner, "first-pw")
        assert _created(tenants, db) == 1, (pattern, after)
    assert tenants.grants(grantee) == {
        f"GRANT SELECT ON `{literal(tenants.name(f'a{c}_wms'))}`.* TO `{grantee}`@`%`"
        for c in range(len(_cases()))
    }


def test_a_connection_lost_at_any_statement_of_a_rotation_converges_to_the_new_owner(
    tenants: Tenants, cutter: StatementCutter
) -> None:
    grantee = tenants.name("maester")
    tenants.sql(f"CREATE USER '{grantee}'@'%' IDENTIFIED BY 'maester-pw'")
    for case, (index, after) in enumerate(_cases()):
        name, db = f"tenant-r{case}", tenants.name(f"r{case}_wms")
        owner, rotated = tenants.name(f"r{case}"), tenants.name(f"r{case}n")
        tenants.owner_secret(f"r{case}-owner", owner, "first-pw")
        tenants.order(name, db, f"r{case}-owner", grants=((grantee, ["SELECT"]),))
        tenants.ready(name)
        pattern = _statements("rotation", db, owner, grantee, rotated)[index]
        cutter.arm(pattern, after=after)
        tenants.owner_secret(f"r{case}-owner", rotated, "second-pw")
        _cut(tenants, cutter, name, pattern, after)
        wait_for(_owner_is(tenants, name, rotated), 40, f"{rotated} to own {name}")
        _ready_and_true(tenants, name, db, rotated, "second-pw")
        assert not tenants.user_exists(owner), (pattern, after)


def test_a_connection_lost_at_any_statement_of_a_drop_still_drops_only_what_it_made(
    tenants: Tenants, cutter: StatementCutter
) -> None:
    grantee = tenants.name("maester")
    tenants.sql(f"CREATE USER '{grantee}'@'%' IDENTIFIED BY 'maester-pw'")
    for case, (index, after) in enumerate(_cases()):
        name, db, owner = f"tenant-d{case}", tenants.name(f"d{case}_wms"), tenants.name(f"d{case}")
        tenants.owner_secret(f"d{case}-owner", owner, "first-pw")
        tenants.order(
            name, db, f"d{case}-owner", grants=((grantee, ["SELECT"]),), deletionPolicy="Delete"
        )
        tenants.ready(name)
        pattern = _statements("drop", db, owner, grantee, "")[index]
        cutter.arm(pattern, after=after)
        tenants.delete(name)
        _cut(tenants, cutter, name, pattern, after)
        wait_for(_gone(tenants, name), 40, f"{name} to go")
        assert not tenants.schema_exists(db), (pattern, after)
        assert not tenants.user_exists(owner), (pattern, after)
    assert tenants.user_exists(grantee)  # grants[] principals are never dropped
    assert tenants.grants(grantee) == set()


def test_a_password_the_server_refuses_records_no_owner_and_adopts_no_account_later(
    tenants: Tenants,
) -> None:
    primary = tenants.group.primary
    tenants.sql("INSTALL SONAME 'simple_password_check'", site=primary)
    try:
        db, owner = tenants.name("weak_wms"), tenants.name("weak")
        tenants.owner_secret("weak-owner", owner, "pw")
        tenants.order("tenant-weak", db, "weak-owner")
        status = tenants.condition("tenant-weak", "MySQLError")
        assert "1819" in status["message"]  # the password does not satisfy the policy
        assert "pw" not in status["message"].replace("password", "")
        # The schema's statement ran, the owner's never did: only the schema is recorded.
        assert status.get("databaseCreated") is True
        assert not status.get("ownerUser")
        assert not tenants.user_exists(owner)
        # A foreign account of that name made meanwhile is refused, never adopted.
        tenants.sql(f"CREATE USER '{owner}'@'%' IDENTIFIED BY 'Foreign-Passw0rd!'", site=primary)
        tenants.come_back_now("tenant-weak", within=(55, 65))
        tenants.condition("tenant-weak", "PreExistingOwnerUser")
        assert tenants.logs_in(owner, "Foreign-Passw0rd!")
        # Once that account is gone and the Secret's password passes, the order goes Ready.
        tenants.sql(f"DROP USER '{owner}'@'%'", site=primary)
        tenants.owner_secret("weak-owner", owner, "Strong-Passw0rd!")
        _ready_and_true(tenants, "tenant-weak", db, owner, "Strong-Passw0rd!")
    finally:
        tenants.sql("UNINSTALL SONAME 'simple_password_check'", site=primary)


# -- the fault suite's MysqlDatabase row ---------------------------------------------------------


@pytest.fixture
def stack_env() -> dict[str, str]:
    """A short first circuit, so a primary stopped for a few seconds is tried again soon."""
    return {"TENANTDB_MYSQL_CIRCUIT_SECONDS": "3"}


def _kill_worker(tenants: Tenants, name: str) -> None:
    """SIGKILL a worker and its pool at once, as a node losing the pod would, and start it again."""
    stack = tenants.stack
    stack.signal_tree(name, signal.SIGKILL)
    stack.procs.pop(name).wait()
    stack.start_worker(name)


_APPLY_LINE = re.compile(
    r"Task tenantdb\.mysqldatabase\.provision\.apply\[(?P<id>[0-9a-f-]+)\] (?P<what>\w+)"
)


def _log_size(tenants: Tenants, name: str) -> int:
    path = tenants.stack.logs / f"{name}.log"
    return path.stat().st_size if path.exists() else 0


def _applying(tenants: Tenants, name: str, since: int) -> bool:
    """Whether the worker received an apply step it has not finished, in the life whose log
    starts at byte ``since``."""
    open_steps: set[str] = set()
    with (tenants.stack.logs / f"{name}.log").open("rb") as handle:
        handle.seek(since)
        text = handle.read().decode(errors="replace")
    for match in _APPLY_LINE.finditer(text):
        if match["what"] == "received":
            open_steps.add(match["id"])
        else:
            open_steps.discard(match["id"])
    return bool(open_steps)


def _in_flight(
    tenants: Tenants, workers: tuple[str, ...], lives: dict[str, int], seconds: float
) -> str:
    """The first worker seen with an apply step in flight within ``seconds``, or ""."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = next((w for w in workers if _applying(tenants, w, lives[w])), "")
        if found:
            return found
        time.sleep(0.02)
    return ""


def _bring_forward(tenants: Tenants) -> None:
    """Move every order's come-back to now (Pending waits 15-45 s; the test need not)."""
    client = redis.Redis.from_url(REDIS_URL)
    try:
        due = f"{tenants.stack.prefix}due"
        keys: list[Any] = client.zrange(due, 0, -1)
        if keys:
            client.zadd(due, dict.fromkeys(keys, 0))
    finally:
        client.close()


def _all_settled(tenants: Tenants, orders: dict[str, tuple[str, str]]) -> bool:
    _bring_forward(tenants)
    return all(tenants.status(n).get("phase") == "Ready" for n in orders)


def _scores(client: redis.Redis, table: str) -> list[tuple[str, float]]:
    """A sorted set's members (decoded) and their scores."""
    entries: list[Any] = client.zrange(table, 0, -1, withscores=True)
    return [(str(member), float(score)) for member, score in entries]


def _unsettled(tenants: Tenants, orders: dict[str, tuple[str, str]]) -> str:
    """What each order not Ready says of itself, and what tenantdb's Redis holds for it."""
    client = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    prefix = tenants.stack.prefix
    try:
        out = []
        for name in orders:
            status = tenants.status(name)
            if status.get("phase") == "Ready":
                continue
            said = "; ".join(
                f"{c.get('type')}={c.get('status')} {c.get('reason')}: {c.get('message')}"
                for c in status.get("conditions", [])
            )
            held = {
                k.removeprefix(prefix): client.type(k)
                for k in client.scan_iter(f"{prefix}*{name}*", count=1000)
            }
            scores = {
                f"{table} {member}": score
                for table in ("dirty", "due")
                for member, score in _scores(client, f"{prefix}{table}")
                if member.endswith(f"/{name}")
            }
            out.append(f"{name}: phase={status.get('phase')} [{said}] redis={held} {scores}")
        return f"{len(out)} not Ready: " + " | ".join(out)
    finally:
        client.close()


def _false_records(tenants: Tenants, orders: dict[str, tuple[str, str]]) -> list[str]:
    """Orders whose records say what the servers do not hold (or hold what they do not say)."""
    out = []
    for name, (db, owner) in orders.items():
        status = tenants.status(name)
        if (status.get("databaseCreated") is True) != tenants.schema_exists(db):
            out.append(f"{name}: databaseCreated={status.get('databaseCreated')}")
        if (status.get("ownerUser") == owner) != tenants.user_exists(owner):
            out.append(f"{name}: ownerUser={status.get('ownerUser')}")
        if not tenants.logs_in(owner, "first-pw"):
            out.append(f"{name}: the owner cannot log in")
    return out


@dataclass(frozen=True)
class _Restart:
    """A site stopped and started again, and what its general log held just before the stop."""

    site: str
    before: dict[str, int]  # CREATE DATABASE statements per schema ordered by then
    since: Any  # the machine's clock (as the servers read it) just before the site started


def _created_twice(
    tenants: Tenants, orders: dict[str, tuple[str, str]], restart: _Restart
) -> list[str]:
    """Schemas tenantdb sent no CREATE DATABASE for, or sent it twice to one site.

    The general log holds what a server received, refused statements too: a CREATE DATABASE
    that the old primary refused (read-only, mid-failover) and the new one then ran counts once
    on each. Once one ran, the schema is seen (and replicated), so no site gets a second.

    A server's log table is not a record across its own stop: what it receives while shutting
    down can go unlogged, and the CSV table it logs to can lose rows when the server repairs it
    on start. So the restarted site counts what its log held before the stop plus what it
    logged once back, and a schema not yet created when the stop began may have been created
    in that gap, unseen: for those only "never twice" is checked.
    """
    out = []
    for db, _ in orders.values():
        counts = [
            restart.before.get(db, 0) + _created(tenants, db, site, restart.since)
            if site == restart.site
            else _created(tenants, db, site)
            for site in tenants.group.sites
        ]
        unseen_gap = restart.before.get(db) == 0  # ordered before the stop, not yet created
        if (sum(counts) == 0 and not unseen_gap) or max(counts) > 1:
            out.append(f"{db}: CREATE DATABASE per site {counts}")
    return out


@pytest.mark.timeout(420)
def test_kills_a_stopped_primary_and_a_planned_failover_lose_no_order_and_record_no_lie(
    tenants: Tenants,
) -> None:
    orders: dict[str, tuple[str, str]] = {}

    def create(prefix: str, count: int) -> None:
        for i in range(count):
            name, db, owner = (
                f"{prefix}-{i}",
                tenants.name(f"{prefix}{i}_wms"),
                tenants.name(f"{prefix}{i}"),
            )
            tenants.owner_secret(f"{name}-owner", owner, "first-pw")
            tenants.order(name, db, f"{name}-owner")
            orders[name] = (db, owner)

    started = time.monotonic()
    # 1. Workers killed with SIGKILL while an apply step is in flight on them, five times.
    workers = ("worker-1", "worker-2")
    lives = {w: 0 for w in workers}  # where each worker's current life starts in its log
    mid_apply = 0
    for round_ in range(5):
        # Six applies can all finish between two looks on a fast machine: another six then.
        victim = ""
        for batch in "abcd":
            create(f"k{round_}{batch}", 6)
            victim = _in_flight(tenants, workers, lives, 10)
            if victim:
                break
        assert victim, "no apply step was ever seen in flight"
        mid_apply += _applying(tenants, victim, lives[victim])
        lives[victim] = _log_size(tenants, victim)
        _kill_worker(tenants, victim)
    # 2. The primary stopped while applies are in flight, then started again.
    primary = tenants.group.primary
    create("s", 8)
    time.sleep(0.1)
    before = {db: _created(tenants, db, primary) for db, _ in orders.values()}
    tenants.group.stop_site(primary)
    time.sleep(3)
    # A restarted server forgets SET GLOBAL, so the general log the counts below read is on from
    # its start: a statement a worker sends the moment it answers is counted too.
    # The sites share this machine's clock: the replica's reads the instant before the start.
    back = _server_now(tenants, next(s for s in tenants.group.sites if s != primary))
    tenants.group.start_site(primary, general_log=True)
    restart = _Restart(primary, before, back)
    wait_for(
        lambda: _all_settled(tenants, orders),
        150,
        "every order Ready after the faults",
        lambda: _unsettled(tenants, orders),
    )
    # 3. A planned failover to the other site while 50 orders are being applied.
    target = next(s for s in tenants.group.sites if s != primary)
    create("f", 50)
    tenants.stack.platform.cluster().patch(
        "mysqlfailovergroups.shipstream.io",
        GROUP,
        {"metadata": {"annotations": {"bloodraven.shipstream.io/planned-failover": target}}},
        NS,
        manager="test",
    )
    wait_for(lambda: tenants.group.primary == target, 60, f"{target} to be the primary")
    wait_for(
        lambda: _all_settled(tenants, orders),
        150,
        "every order Ready after the failover",
        lambda: _unsettled(tenants, orders),
    )
    converged = time.monotonic() - started
    assert all(tenants.status(n)["activeSite"] in tenants.group.sites for n in orders)
    false_records = _false_records(tenants, orders)
    twice = _created_twice(tenants, orders, restart)
    FIGURES.append(
        Figures(
            scenario="MysqlDatabase: kills, primary stopped, failover",
            converge_seconds=converged,
            passes=sum(
                tenants.stack.counter(w, "tenantdb_reconcile_passes_total", kind="mysqldatabase")
                for w in ("worker-1", "worker-2")
            ),
            **_outcome(tenants, orders),
            note=f"{mid_apply}/5 kills mid-apply, false records={len(false_records)},"
            f" schemas created twice on a site or never={len(twice)}",
        )
    )
    assert false_records == []
    assert twice == []


def _outcome(tenants: Tenants, orders: Iterable[str]) -> dict[str, Any]:
    """The figures of a MysqlDatabase fault row that come from its orders: how many there
    are, how many are gone, how many are not Ready (no audit log is read for them)."""
    names = list(orders)
    return {
        "writing_passes": 0,
        "orders": len(names),
        "lost": sum(1 for n in names if tenants.get(n) is None),
        "unconverged": sum(1 for n in names if tenants.status(n).get("phase") != "Ready"),
        "concurrent": 0,
        "unattributed": 0,
    }


def _wait_for_value(client: redis.Redis, key: str) -> str:
    found: list[str] = []

    def stored() -> bool:
        value = client.get(key)
        if isinstance(value, bytes):
            found.append(value.decode())
        return bool(found)

    wait_for(stored, 60, f"a value at {key}")
    return found[-1]


def _start_worker(tenants: Tenants, name: str, queues: str) -> None:
    stack = tenants.stack
    stack.start(
        name, "worker", "--", "-c", "2", "-n", f"{name}-{stack.suffix}@%h",
        "-Q", queues, "--without-mingle", "--without-gossip",
    )  # fmt: skip


@pytest.mark.timeout(240)
def test_a_forged_and_a_tampered_note_send_no_statement_and_the_orders_converge(
    tenants: Tenants,
) -> None:
    # Only the entry is served at first, so each new order's apply step waits in the provision
    # queue with its note in Redis; the note is rewritten there, as whoever reaches Redis
    # could, to make the step create and grant an account of the attacker's. Then the apply
    # step is served.
    stack, client = tenants.stack, redis.Redis.from_url(REDIS_URL)
    for worker in ("worker-1", "worker-2"):
        stack.kill(worker)
    _start_worker(tenants, "worker-entry", "reconcile")
    attacker = tenants.name("attacker")
    orders: dict[str, str] = {}
    started = time.monotonic()
    try:
        for how in ("forged", "tampered"):
            name, db = f"note-{how}", tenants.name(f"note_{how}")
            tenants.owner_secret(f"{name}-owner", tenants.name(f"note_{how}_app"), "first-pw")
            tenants.order(name, db, f"{name}-owner")
            orders[name] = db
            note_key = f"{stack.prefix}note:{IDENTITY.key(NS, name)}"
            stored = _wait_for_value(client, note_key)
            token, expires, seal, note = stored.split("\n", 3)
            steered = json.loads(note)
            steered["spec"]["owner_username"] = attacker
            steered["spec"]["database_name"] = tenants.name("attacker_db")
            text = json.dumps(steered)
            if how == "forged":
                forger = SealKeys((b"a key the workers do not hold, 32+ bytes long",))
                seal = forger.seal("note", str(IDENTITY.key(NS, name)), token, expires, text)
            client.set(note_key, f"{token}\n{expires}\n{seal}\n{text}", keepttl=True)
        _start_worker(tenants, "worker-steps", "provision,delivery,teardown")
        for name, db in orders.items():
            tenants.ready(name)
            assert tenants.schema_exists(db)
    finally:
        client.close()
    refused = stack.counter(
        "worker-steps", "tenantdb_notes_refused_total", note="pass", reason="Forged"
    )
    sent = tenants.sent_since(0)
    steered_statements = [s for s in sent if attacker in s or "attacker_db" in s]
    FIGURES.append(
        Figures(
            scenario="MysqlDatabase: a forged and a tampered note in Redis",
            converge_seconds=time.monotonic() - started,
            passes=stack.counter("worker-entry", "tenantdb_reconcile_passes_total"),
            **_outcome(tenants, orders),
            note=f"{int(refused)} notes refused, {len(steered_statements)} statements they asked",
        )
    )
    assert refused == 2
    assert steered_statements == []
    assert not tenants.user_exists(attacker)
