"""What the MySQL server itself costs per new MysqlDatabase as its accounts grow.

A new order's apply is one look and three writes (CREATE DATABASE, CREATE USER, GRANT). On
MariaDB each account statement does work that grows with the accounts the server holds, so beside
a large fleet the server, not tenantdb, may bound how fast new orders go Ready. This measures that
bound on its own: no Kubernetes, no Celery, only the statements tenantdb sends.

Starts a throwaway mariadbd (the devstack's, MariaDB from the machine's packages), fills it with
N accounts, each with a schema and a schema grant as a Ready order leaves them, and then applies
``--orders`` new orders from one and from two connections at once (tenantdb's two worker
processes). Each new order is planned by `tenantdb.core.mysqldatabase.apply.plan_apply` from the
look `observe_query` returns, exactly as a worker plans it, and run on the server.

Figures per size and connection count: the median time of one order's look, of each of its
writes and of the three together, and the orders per second the server kept, also as a ratio to
the same figure beside the fewest accounts. Each figure is the median over ``--runs``.

Usage: .venv/bin/python -m bench.server_accounts [--sizes 0,100,1000,10000] [--orders 200]
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pymysql

from devstack.mysql_group.servers import MariaDBServer
from tenantdb.core.mysqldatabase import sql
from tenantdb.core.mysqldatabase.apply import (
    OWNER_PASSWORD,
    ApplyPlan,
    Claims,
    Records,
    parse_observation,
    plan_apply,
    usernames_to_observe,
)
from tenantdb.core.mysqldatabase.validation import ValidSpec, validate_spec

Figures = dict[str, Any]


@contextmanager
def mariadb() -> Iterator[MariaDBServer]:
    """A throwaway mariadbd in a temporary directory, stopped at the end."""
    with tempfile.TemporaryDirectory(prefix="bench-accounts-") as directory:
        server = MariaDBServer.create("accounts", Path(directory), server_id=1)
        server.start()
        try:
            yield server
        finally:
            server.stop()


def connect(server: MariaDBServer) -> pymysql.connections.Connection[Any]:
    """Root over the server's socket, autocommit as tenantdb's admin connections."""
    return pymysql.connect(
        unix_socket=str(server.spec.socket), user="root", autocommit=True, charset="utf8mb4"
    )


class Admin:
    """One connection as a worker holds it: the dialect, privilege columns and case folding
    read once."""

    def __init__(self, server: MariaDBServer) -> None:
        """Connect and ask what a new admin connection asks."""
        self.connection = connect(server)
        with self.connection.cursor() as cursor:
            cursor.execute(sql.CONNECTION_CHECK.template)
            version, _, columns, folds_case = cursor.fetchone()
        self.dialect = sql.detect_dialect(str(version))
        self.columns = sql.schema_privilege_columns(str(columns or "").split(","))
        self.folds_case = str(folds_case or "0") != "0"

    def look(self, spec: ValidSpec) -> Any:
        """The look a step takes before it writes."""
        statement = sql.observe_query(
            spec.database_name,
            usernames_to_observe(spec, Records()),
            self.dialect,
            self.columns,
            folds_case=self.folds_case,
        )
        with self.connection.cursor() as cursor:
            cursor.execute(statement.template, statement.params)
            return parse_observation(cursor.fetchall())

    def run(self, plan: ApplyPlan, password: str) -> dict[str, float]:
        """The plan's statements, the owner's password bound where the plan holds its place;
        the seconds each took, by its first two words (`CREATE USER`)."""
        took: dict[str, float] = {}
        with self.connection.cursor() as cursor:
            for statement in plan.statements:
                params = tuple(password if p == OWNER_PASSWORD else p for p in statement.params)
                start = time.perf_counter()
                cursor.execute(statement.template, params)
                verb = " ".join(statement.template.split(" ", 2)[:2])
                took[verb] = took.get(verb, 0.0) + time.perf_counter() - start
        return took

    def close(self) -> None:
        """Close the connection."""
        self.connection.close()


def new_spec(name: str) -> ValidSpec:
    """A new order's spec as the fleet bench orders it: schema `name`, owner `name_app`."""
    return validate_spec(
        database_name=name,
        character_set=None,
        collation=None,
        owner_username=f"{name}_app",
        owner_privileges=None,
        grants=(),
    )


def apply_new(admin: Admin, spec: ValidSpec) -> dict[str, float]:
    """Plan and apply one new order; the seconds of its look and of each write."""
    start = time.perf_counter()
    observed = admin.look(spec)
    looked = time.perf_counter() - start
    plan = plan_apply(
        spec,
        Records(),
        observed,
        dialect=admin.dialect,
        group="bench",
        site="a",
        claims=Claims(frozenset()),
    )
    if not isinstance(plan, ApplyPlan):
        raise RuntimeError(f"{spec.database_name}: refused: {plan.message}")
    return {"look": looked, **admin.run(plan, secrets.token_urlsafe(18))}


def fill(server: MariaDBServer, start: int, total: int) -> None:
    """Fleet accounts `fill_<i>` for i in [start, total), each with its schema and grant."""
    if start >= total:
        return
    admin = Admin(server)
    try:
        for i in range(start, total):
            apply_new(admin, new_spec(f"fill_{i}"))
    finally:
        admin.close()


def measure(server: MariaDBServer, size: int, orders: int, clients: int) -> Figures:
    """Apply ``orders`` new orders from ``clients`` connections at once; drop them after."""
    names = [f"new_{size}_{clients}_{i}" for i in range(orders)]
    admins = [Admin(server) for _ in range(clients)]
    parts: list[dict[str, float]] = []
    lock = threading.Lock()

    def work(admin: Admin, mine: Sequence[str]) -> None:
        for name in mine:
            took = apply_new(admin, new_spec(name))
            with lock:
                parts.append(took)

    threads = [
        threading.Thread(target=work, args=(admin, names[i::clients]))
        for i, admin in enumerate(admins)
    ]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    took = time.perf_counter() - start
    with admins[0].connection.cursor() as cursor:
        for name in names:
            for statement in (sql.drop_user(f"{name}_app"), sql.drop_database(name)):
                cursor.execute(statement.template, statement.params)
    for admin in admins:
        admin.close()
    if len(parts) != orders:
        raise RuntimeError(f"{orders - len(parts)} of {orders} new orders failed")
    writes = [sum(v for k, v in p.items() if k != "look") for p in parts]
    return {
        "accounts": size,
        "clients": clients,
        "orders": orders,
        **{
            f"{_slug(part)}_ms_p50": 1000 * statistics.median(p[part] for p in parts)
            for part in PARTS
        },
        "writes_ms_p50": 1000 * statistics.median(writes),
        "orders_per_s": orders / took,
    }


PARTS = ("look", "CREATE DATABASE", "CREATE USER", "GRANT ALL")
"""What a new order's apply does, in order: the look, then its three writes."""


def _slug(part: str) -> str:
    return part.lower().replace(" ", "_")


def render(rows: list[Figures]) -> str:
    """A markdown table; each throughput also as a ratio to that beside the fewest accounts."""
    base = {r["clients"]: r["orders_per_s"] for r in rows if r["accounts"] == rows[0]["accounts"]}
    lines = [
        "| accounts | connections | look | CREATE DATABASE | CREATE USER | GRANT | writes"
        " | orders/s | vs fewest |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = r["orders_per_s"] / base[r["clients"]]
        parts = " | ".join(f"{r[f'{_slug(p)}_ms_p50']:.2f} ms" for p in PARTS)
        lines.append(
            f"| {r['accounts']:,} | {r['clients']} | {parts} | {r['writes_ms_p50']:.2f} ms"
            f" | {r['orders_per_s']:.0f} | {ratio:.2f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the sizes in turn on one server (each fill adds to the last) and print the table."""
    parser = argparse.ArgumentParser(prog="python -m bench.server_accounts")
    parser.add_argument("--sizes", default="0,100,1000,10000", help="accounts beside, ascending")
    parser.add_argument("--orders", type=int, default=200, help="new orders per measurement")
    parser.add_argument("--runs", type=int, default=3, help="measurements per size (median)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    rows: list[Figures] = []
    with mariadb() as server:
        filled = 0
        for size in sizes:
            fill(server, filled, size)
            filled = size
            for clients in (1, 2):
                runs = [measure(server, size, args.orders, clients) for _ in range(args.runs)]
                row = dict(runs[0])
                for key in row:
                    if key.endswith(("_ms_p50", "_per_s")):
                        row[key] = statistics.median(r[key] for r in runs)
                rows.append(row)
                print(
                    f"bench: {size:,} accounts, {clients} connection(s):"
                    f" {row['orders_per_s']:.0f} orders/s",
                    file=sys.stderr,
                    flush=True,
                )
    print(render(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
