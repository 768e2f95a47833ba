"""The path of a pass, from what its entry observed: one table for the whole flow of every kind."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tenantdb.core.mariadbdatabase.gates import AdmissionObservation, plan_admission
from tenantdb.core.objects import ObjectMeta
from tenantdb.core.pass_path import PassFacts, PassPath, Verdict, decide_path, observe_order
from tests.unit.mdb_builders import make_control_plane, make_order

OURS = "example.test/teardown"
LIVE = PassFacts(found=True, holds_finalizer=True)
GO = Verdict(add_finalizer=False, proceed=True)


@pytest.mark.parametrize(
    ("facts", "path"),
    [
        pytest.param(PassFacts(found=False), PassPath.GONE, id="gone"),
        pytest.param(
            PassFacts(found=True, deleting=True, holds_finalizer=True),
            PassPath.TEARDOWN,
            id="deleting-with-finalizer",
        ),
        pytest.param(
            PassFacts(found=True, deleting=True), PassPath.RELEASED, id="deleting-released"
        ),
        pytest.param(LIVE, PassPath.ADMIT, id="live-runs-the-gates"),
        pytest.param(
            PassFacts(found=True, verdict=Verdict(add_finalizer=True, proceed=False)),
            PassPath.ADD_FINALIZER,
            id="gates-ask-for-the-finalizer",
        ),
        pytest.param(
            PassFacts(found=True, holds_finalizer=True, verdict=Verdict(True, False)),
            PassPath.GATED,
            id="finalizer-already-written-so-the-gate-answer-stands",
        ),
        pytest.param(
            PassFacts(found=True, verdict=Verdict(add_finalizer=False, proceed=False)),
            PassPath.GATED,
            id="a-gate-before-the-finalizer-stops-the-pass",
        ),
        pytest.param(
            PassFacts(found=True, holds_finalizer=True, verdict=GO), PassPath.PLAN, id="plan"
        ),
        pytest.param(
            PassFacts(True, False, True, GO, steps=(), converged=True),
            PassPath.UP_TO_DATE,
            id="up-to-date",
        ),
        pytest.param(
            PassFacts(True, False, True, GO, steps=(), converged=False),
            PassPath.WAITING,
            id="waiting-with-nothing-to-write",
        ),
        pytest.param(
            PassFacts(True, False, True, GO, steps=("database",)),
            PassPath.CHAIN,
            id="writes-then-waits",
        ),
        pytest.param(
            PassFacts(True, False, True, GO, steps=("role", "secret"), converged=True),
            PassPath.CHAIN,
            id="writes-then-delivers",
        ),
    ],
)
def test_a_pass_takes_the_path_its_facts_give(facts: PassFacts, path: PassPath) -> None:
    assert decide_path(facts) is path


@pytest.mark.parametrize(
    ("meta", "facts"),
    [
        pytest.param(None, PassFacts(found=False), id="not-found"),
        pytest.param(ObjectMeta(name="a"), PassFacts(found=True), id="new"),
        pytest.param(
            ObjectMeta(name="a", finalizers=(OURS,)),
            PassFacts(found=True, holds_finalizer=True),
            id="ours",
        ),
        pytest.param(
            ObjectMeta(name="a", finalizers=("else/keep",), deletion_timestamp=datetime.now(UTC)),
            PassFacts(found=True, deleting=True),
            id="deleting-someone-elses",
        ),
    ],
)
def test_an_orders_metadata_gives_its_first_facts(
    meta: ObjectMeta | None, facts: PassFacts
) -> None:
    assert observe_order(meta, OURS) == facts


def test_mariadb_gates_ask_for_the_finalizer_only_past_the_namespace_assignment() -> None:
    new = make_order(finalizers=())
    admitted = plan_admission(AdmissionObservation(new, "", make_control_plane()))
    refused = plan_admission(AdmissionObservation(new, "", None))
    assert admitted.add_finalizer
    assert not refused.add_finalizer
    assert not refused.outcome.proceed
