"""Quiet refreshes: when a refresh may trust the watches, and what a MariaDBDatabase pass then
does (the real scaffold and kind over the pass harness's world)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tenantdb.core.mariadbdatabase.models import MariaDBDatabase
from tenantdb.core.quiet import (
    QuietBasis,
    QuietLook,
    QuietVerdict,
    decide_quiet,
    may_record_basis,
)
from tests.unit.mdb_builders import World, make_control_plane, make_secret, target_world
from tests.unit.mdb_pass import PassRun, QuietBook, run_pass

NOW = 1_800_000_000.0
DAY = 86_400.0
BASIS = QuietBasis(touched=4, leader="term-a", at=NOW - 600)


@pytest.mark.parametrize(
    ("look", "full_every", "verdict"),
    [
        pytest.param(QuietLook(4, "term-a", BASIS), DAY, QuietVerdict.QUIET, id="quiet"),
        pytest.param(QuietLook(4, "term-a", BASIS), 0, QuietVerdict.OFF, id="turned-off"),
        pytest.param(QuietLook(4, "term-a", None), DAY, QuietVerdict.NO_BASIS, id="no-basis"),
        pytest.param(QuietLook(5, "term-a", BASIS), DAY, QuietVerdict.TOUCHED, id="touched"),
        pytest.param(QuietLook(4, None, BASIS), DAY, QuietVerdict.NO_WATCHER, id="no-watcher"),
        pytest.param(QuietLook(4, "term-b", BASIS), DAY, QuietVerdict.NEW_TERM, id="new-term"),
        pytest.param(QuietLook(4, "term-a", BASIS), 600, QuietVerdict.AGED, id="aged"),
        pytest.param(QuietLook(4, "term-a", replace(BASIS, at=NOW + 60)), DAY, QuietVerdict.AGED,
                     id="from-the-future"),
        pytest.param(QuietLook(0, "term-a", BASIS), DAY, QuietVerdict.TOUCHED,
                     id="count-lost-with-redis"),
    ],
)  # fmt: skip
def test_a_refresh_is_quiet_only_when_nothing_could_have_changed_unseen(
    look: QuietLook, full_every: float, verdict: QuietVerdict
) -> None:
    assert decide_quiet(look, now=NOW, full_every=full_every) is verdict


def test_a_basis_is_left_only_while_a_watcher_vouches_and_quiet_refreshes_are_on() -> None:
    assert may_record_basis(QuietLook(0, "term-a"), full_every=DAY)
    assert not may_record_basis(QuietLook(0, None), full_every=DAY)
    assert not may_record_basis(QuietLook(0, "term-a"), full_every=0)


# -- a MariaDBDatabase order over the pass harness ------------------------------------------------


def _status(run: PassRun) -> dict[str, Any]:
    return run.record.status.model_dump(mode="json", by_alias=True, exclude_none=True)


def _converged(world: World) -> World:
    """The world after the order's first pass wrote its status: nothing left to do."""
    world = replace(world, openbao_role="desired", children_live=True)
    first = run_pass(world)
    assert first.steps == ()
    stored = world.order.model_dump(mode="json", by_alias=True, exclude_none=True)
    return replace(
        world, order=MariaDBDatabase.model_validate({**stored, "status": _status(first)})
    )


def _reads(run: PassRun) -> int:
    """How many observations of the order's children the pass made."""
    return len(run.io.provisions) + len(run.io.deliveries)


def test_a_converged_pass_leaves_a_basis_and_the_next_refresh_only_checks_the_role() -> None:
    world, book = _converged(World()), QuietBook(touched=7)
    full = run_pass(world, book)
    assert full.reason == "AllReady"
    assert book.basis is not None
    assert book.basis.touched == 7
    assert book.basis.leader == "watcher-term-1"
    quiet = run_pass(world, book)
    assert quiet.reason == "Quiet"
    assert _reads(quiet) == 0
    assert quiet.io.records == []
    assert [role.role_name for role in quiet.io.role_checks] == [
        full.io.provisions[0].scope.names.role
    ]
    assert quiet.io.status_patches == []
    assert quiet.io.statuses == []


def test_a_quiet_pass_comes_back_when_the_full_pass_would_have() -> None:
    world, book = _converged(target_world()), QuietBook()
    full = run_pass(world, book)
    assert full.requeue_after == 600.0
    quiet = run_pass(world, book)
    assert (quiet.reason, quiet.requeue_after) == ("Quiet", 600.0)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        pytest.param({"touched": 8}, "an event was counted for the order", id="touched"),
        pytest.param({"leader": "watcher-term-2"}, "another watcher term", id="new-term"),
        pytest.param({"leader": None}, "no watcher leads", id="no-watcher"),
        pytest.param({"full_every": 1e-9}, "the basis is older than the period", id="aged"),
    ],
)
def test_a_refresh_reads_in_full_when_the_watches_cannot_vouch(
    change: dict[str, Any], why: str
) -> None:
    world, book = _converged(World()), QuietBook(touched=7)
    run_pass(world, book)
    for field, value in change.items():
        setattr(book, field, value)
    again = run_pass(world, book)
    assert again.reason == "AllReady", why
    assert again.io.provisions
    assert again.io.deliveries
    assert again.io.role_checks == []


def test_a_role_that_drifted_is_found_by_the_quiet_check_and_repaired_by_a_full_pass() -> None:
    world, book = _converged(World()), QuietBook()
    run_pass(world, book)
    drifted = replace(world, openbao_role="drifted")
    repaired = run_pass(drifted, book)
    assert len(repaired.io.role_checks) == 1
    assert repaired.steps[0] == "role"
    assert book.basis is None
    assert book.forgotten == 1
    # The next refresh reads in full, and leaves a basis again once nothing is left to do.
    again = run_pass(world, book)
    assert again.reason == "AllReady"
    assert book.basis is not None


def test_a_full_pass_with_writes_leaves_no_basis_and_forgets_the_old_one() -> None:
    world, book = _converged(World()), QuietBook()
    run_pass(world, book)
    book.touched += 1  # say, the delivered Secret was edited
    edited = replace(world, children_live=False)
    run = run_pass(edited, book)
    assert run.steps != ()
    assert book.basis is None
    assert book.forgotten == 1


@pytest.mark.parametrize(
    "world",
    [
        pytest.param(replace(World(), openbao_role="absent"), id="role-missing"),
        pytest.param(
            World(
                cp=make_control_plane(
                    database={
                        "clusterRef": {"name": "openstack-db"},
                        "tls": {"mode": "require", "caBundleSecretRef": {"name": "db-ca"}},
                    }
                ),
                ca_bundle=make_secret("db-ca", "default", {"ca.crt": "PEM-CA"}),
                openbao_role="desired",
                children_live=True,
            ),
            id="tls-ca-bundle-unwatched",
        ),
        pytest.param(replace(World(), openbao_role="unobserved", children_live=True),
                     id="openbao-unreachable"),
    ],
)  # fmt: skip
def test_a_pass_that_leaves_anything_unconfirmed_leaves_no_basis(world: World) -> None:
    book = QuietBook()
    run_pass(world, book)
    run = run_pass(world, book)
    assert book.basis is None
    assert run.reason != "Quiet"


def test_a_basis_whose_note_does_not_read_costs_a_full_pass_not_an_error() -> None:
    world, book = _converged(World()), QuietBook()
    run_pass(world, book)
    book.note = '{"check":{"role":"not a role"},"requeue":null}'
    run = run_pass(world, book)
    assert run.reason == "AllReady"
    assert book.note is not None
    assert '"role_name"' in book.note


def test_quiet_refreshes_turned_off_leave_no_basis() -> None:
    world, book = _converged(World()), QuietBook(full_every=0)
    run_pass(world, book)
    assert book.basis is None
    assert run_pass(world, book).reason == "AllReady"
