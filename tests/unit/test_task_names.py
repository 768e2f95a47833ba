"""The task names a worker registers are the ones the README documents: renaming one breaks
operators' routes and dashboards, so the list is pinned here."""

from __future__ import annotations

from typing import Any

import pytest

from tasks.scaffold import KindSpec, Step, declare_kind
from tenantdb.core.kinds import KindIdentity
from tenantdb.core.tasknames import Queue, queue_for
from workers.app import app

MARIADB_TASKS = {
    "tenantdb.reconcile.order",
    "tenantdb.reconcile.abort",
    "tenantdb.mariadbdatabase.provision.identity",
    "tenantdb.mariadbdatabase.provision.role",
    "tenantdb.mariadbdatabase.provision.database",
    "tenantdb.mariadbdatabase.provision.credentials",
    "tenantdb.mariadbdatabase.delivery.secret",
    "tenantdb.mariadbdatabase.teardown.openbao",
    "tenantdb.mariadbdatabase.teardown.eso",
    "tenantdb.mariadbdatabase.teardown.database",
    "tenantdb.mariadbdatabase.teardown.secret",
    "tenantdb.mariadbdatabase.teardown.finalize",
    "tenantdb.mysqldatabase.provision.apply",
    "tenantdb.mysqldatabase.teardown.drop",
}


def test_a_worker_registers_exactly_the_documented_tasks() -> None:
    app.loader.import_default_modules()
    # Other kinds' modules a test process imported register beside these; only ours are pinned.
    ours = {
        n
        for n in app.tasks
        if n.startswith(
            ("tenantdb.reconcile.", "tenantdb.mariadbdatabase.", "tenantdb.mysqldatabase.")
        )
    }
    assert ours == MARIADB_TASKS


def test_every_task_runs_on_the_queue_of_its_chain() -> None:
    for name in MARIADB_TASKS - {"tenantdb.reconcile.order", "tenantdb.reconcile.abort"}:
        assert queue_for(name) is Queue(name.split(".")[2])


def _noop(*_: object) -> None:
    raise AssertionError("never called")


def _spec(kind: str, steps: tuple[Step, ...]) -> KindSpec[Any, Any, Any, Any, Any]:
    identity = KindIdentity(
        f"{kind.lower()}s.example.test", "v1", kind, f"{kind.lower()}s", "f/t", "l/n", "l/ns", "l/c"
    )
    return KindSpec(
        identity,
        dict,
        dict,
        _noop,  # type: ignore[arg-type]
        _noop,  # type: ignore[arg-type]
        _noop,  # type: ignore[arg-type]
        _noop,  # type: ignore[arg-type]
        _noop,  # type: ignore[arg-type]
        _noop,  # type: ignore[arg-type]
        steps,
    )


def test_two_steps_of_one_chain_may_not_share_a_name() -> None:
    step = Step("same", Queue.PROVISION, _noop, dict)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="step names repeat"):
        declare_kind(_spec("Twice", (step, step)))


def test_a_step_whose_note_says_nothing_of_what_it_refuses_is_not_declared() -> None:
    step = Step("build", Queue.PROVISION, _noop, dict)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="the note of step build does not say what it refuses"):
        declare_kind(_spec("Unchecked", (step,)))
