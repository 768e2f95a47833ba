"""The path of a pass, from what its entry observed: one table for the whole flow."""

from __future__ import annotations

import pytest

from tenantdb.core.mariadbdatabase.gates import (
    AdmissionDecision,
    AdmissionObservation,
    plan_admission,
)
from tenantdb.core.mariadbdatabase.models import MariaDBDatabase
from tenantdb.core.paths import (
    LegPath,
    OrderPath,
    classify_admission,
    classify_order,
    classify_plan,
)
from tests.unit.mdb_builders import make_control_plane, make_order


@pytest.mark.parametrize(
    ("order", "path"),
    [
        pytest.param(None, OrderPath.GONE, id="gone"),
        pytest.param(make_order(), OrderPath.ADMIT, id="live"),
        pytest.param(make_order(finalizers=()), OrderPath.ADMIT, id="live-without-finalizer"),
        pytest.param(make_order(deleting=True), OrderPath.TEARDOWN, id="deleting-with-finalizer"),
        pytest.param(
            make_order(deleting=True, finalizers=("someone.else/keep",)),
            OrderPath.RELEASED,
            id="deleting-finalizer-released",
        ),
    ],
)
def test_an_order_takes_its_path(order: MariaDBDatabase | None, path: OrderPath) -> None:
    assert classify_order(order) is path


def _admit(order: MariaDBDatabase, cluster: str = "", *, cp: bool = True) -> AdmissionDecision:
    return plan_admission(
        AdmissionObservation(order, cluster, make_control_plane() if cp else None)
    )


@pytest.mark.parametrize(
    ("admission", "path"),
    [
        pytest.param(_admit(make_order()), None, id="admitted-goes-on-to-plan"),
        pytest.param(_admit(make_order(finalizers=())), LegPath.ADD_FINALIZER, id="finalizer"),
        pytest.param(_admit(make_order(), cp=False), LegPath.GATED, id="control-plane-missing"),
        pytest.param(_admit(make_order(), "x" * 64), LegPath.GATED, id="cluster-name-too-long"),
    ],
)
def test_the_gates_add_the_finalizer_stop_or_let_the_pass_plan(
    admission: AdmissionDecision, path: LegPath | None
) -> None:
    assert classify_admission(admission) is path


@pytest.mark.parametrize(
    ("steps", "converged", "path"),
    [
        pytest.param((), True, LegPath.UP_TO_DATE, id="up-to-date"),
        pytest.param((), False, LegPath.WAITING, id="waiting-with-nothing-to-write"),
        pytest.param(("database",), False, LegPath.CHAIN, id="writes-then-waits"),
        pytest.param(("role", "delivery"), True, LegPath.CHAIN, id="writes-then-delivers"),
    ],
)
def test_a_plan_with_a_write_runs_as_a_chain(
    steps: tuple[str, ...], converged: bool, path: LegPath
) -> None:
    assert classify_plan(steps, converged) is path
