"""Orders created at the same moment for one schema on one MariaDB: exactly one gets it.

The collision guard finds a schema taken in the index the watcher keeps, which lags the API
server by a watch event; two orders asking at once would both find it free there. The first to
claim the schema creates; every other is refused with DatabaseCollision before it has a role
or a Database CR, and gets the schema once the holder is deleted.
"""

from __future__ import annotations

from functools import partial

import pytest

from tenantdb.adapters.mariadbdatabase import DATABASE, MARIADB_DATABASE
from tenantdb.core.mariadbdatabase.naming import compute_order_names
from tenantdb.core.mariadbdatabase.provision import compute_database_slot
from tests.e2e.conftest import Stack, at_once, schema_exists, wait_settled
from tests.support import wait_for

pytestmark = [pytest.mark.slow]

ORDERS_PER_SCHEMA = 3


def _reason(stack: Stack, name: str) -> str:
    return str(stack.condition(name, "DatabaseReady").get("reason", ""))


def _carriers(stack: Stack, schema: str) -> list[str]:
    """The Database CRs in Keystone's namespace that carry ``schema`` on the shared MariaDB."""
    found = stack.kube().list_objects(DATABASE, "openstack")
    slots = {d["metadata"]["name"]: compute_database_slot(d) for d in found}
    return sorted(name for name, slot in slots.items() if slot is not None and slot[1] == schema)


def test_of_orders_created_at_once_for_one_schema_exactly_one_gets_it(stack: Stack) -> None:
    schema = f"race_{stack.suffix}"
    names = [stack.name(f"race-{n}") for n in range(ORDERS_PER_SCHEMA)]
    stack.kube()  # the client is built once, before the threads share it
    at_once([partial(stack.apply_order, name, databaseName=schema) for name in names])
    reasons = wait_settled(
        lambda name: _reason(stack, name), names, ("DatabaseProvisioned", "DatabaseCollision"), 60
    )
    winners = [name for name, reason in reasons.items() if reason == "DatabaseProvisioned"]
    assert len(winners) == 1, reasons
    (winner,) = winners
    stack.wait_ready(winner)
    losers = [name for name in names if name != winner]
    for loser in losers:
        condition = stack.condition(loser, "DatabaseReady")
        assert condition["message"].startswith(f'database "{schema}" is already in use')
        refused = compute_order_names("", "tenant-a", loser, "openstack")
        assert not stack.role_exists(refused.role), f"{loser} got a role on the schema"
    winner_cr = compute_order_names("", "tenant-a", winner, "openstack").database_cr
    assert _carriers(stack, schema) == [winner_cr]
    assert schema_exists(schema)

    # The schema stays the winner's for as long as its order lives; once it is deleted (its
    # Database CR with it), a refused order that is reconciled again gets the schema.
    stack.kube().delete(MARIADB_DATABASE, "tenant-a", winner)
    wait_for(lambda: stack.order(winner) is None, 40, f"{winner} to be deleted")
    wait_for(lambda: _carriers(stack, schema) == [], 30, "the winner's Database CR to go")
    heir = losers[0]
    done = stack.cli("reconcile", f"mariadbdatabase/tenant-a/{heir}")
    assert done.returncode == 0, done.stderr
    stack.wait_ready(heir, seconds=60)
    heir_cr = compute_order_names("", "tenant-a", heir, "openstack").database_cr
    assert _carriers(stack, schema) == [heir_cr]
