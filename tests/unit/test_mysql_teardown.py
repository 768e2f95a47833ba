"""Deleting a MysqlDatabase removes only what it created and no sibling still needs."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tenantdb.core.mysqldatabase.group import Fence
from tenantdb.core.mysqldatabase.reasons import Reason
from tenantdb.core.mysqldatabase.teardown import (
    Sibling,
    TeardownObservation,
    TeardownPlan,
    TeardownStep,
    plan_after_drop,
    plan_teardown,
)

OBS = TeardownObservation(
    policy="Delete",
    database_name="acme_wms",
    database_created=True,
    owner_user="acme_app",
    pending_owner_user="",
    owner_secret="acme-owner",
    grants=("maester",),
    group_present=True,
    group="main",
    active_site="dc1",
    fence=None,
    reserved=frozenset({"root", "bloodraven"}),
)


def _reasons(obs: TeardownObservation) -> list[str]:
    return [event.reason for event in plan_teardown(obs).events]


def test_a_deletable_order_revokes_first_then_drops_its_schema_and_its_owner() -> None:
    plan = plan_teardown(OBS)
    assert plan.step is TeardownStep.DROP
    assert plan.drop_database
    assert plan.revoke == ("maester", "acme_app")
    assert plan.drop_users == ("acme_app",), "a grants[] principal is never dropped"
    assert plan.stamp_deleting


@pytest.mark.parametrize(
    ("obs", "step", "reason"),
    [
        pytest.param(replace(OBS, policy="Retain"), TeardownStep.DROP, "DatabaseRetained",
                     id="retain"),
        pytest.param(replace(OBS, policy="delete"), TeardownStep.DROP, "DatabaseRetained",
                     id="near-miss-is-retain"),
        pytest.param(replace(OBS, policy=""), TeardownStep.DROP, "DatabaseRetained",
                     id="empty-is-retain"),
        pytest.param(replace(OBS, policy="Retain", database_name="acmewms"), TeardownStep.RELEASE,
                     "DatabaseRetained", id="retain-no-pattern"),
        pytest.param(replace(OBS, policy="Retain", group_present=False), TeardownStep.RELEASE,
                     "DatabaseRetained", id="retain-group-gone"),
        pytest.param(replace(OBS, policy="Retain", fence=Fence(Reason.RESTORE_IN_PROGRESS, "r")),
                     TeardownStep.DEFER, "DatabaseDropDeferred", id="retain-fenced"),
        pytest.param(replace(OBS, database_created=False), TeardownStep.RELEASE,
                     "DatabaseDropSkipped", id="never-applied"),
        pytest.param(replace(OBS, group_present=False), TeardownStep.RELEASE,
                     "DatabaseCleanupSkipped", id="group-gone"),
        pytest.param(replace(OBS, active_site=""), TeardownStep.DEFER, "DatabaseDropDeferred",
                     id="no-active-site"),
        pytest.param(replace(OBS, fence=Fence(Reason.RESTORE_IN_PROGRESS, "restoring")),
                     TeardownStep.DEFER, "DatabaseDropDeferred", id="fenced"),
        pytest.param(replace(OBS, reserved=None), TeardownStep.DEFER, "DatabaseDropDeferred",
                     id="reserved-unreadable"),
    ],
)  # fmt: skip
def test_nothing_is_dropped_unless_every_check_allows_it(
    obs: TeardownObservation, step: TeardownStep, reason: str
) -> None:
    plan = plan_teardown(obs)
    assert plan.step is step
    assert [e.reason for e in plan.events] == [reason]
    assert not plan.drop_database
    assert plan.drop_users == ()


def test_retain_says_what_it_left() -> None:
    (event,) = plan_teardown(replace(OBS, policy="Retain")).events
    assert event.message == (
        'deletionPolicy=Retain: database "acme_wms" and user "acme_app" left untouched in MySQL'
    )


def test_retain_revokes_only_the_grants_its_name_makes_a_pattern_of() -> None:
    plan = plan_teardown(replace(OBS, policy="Retain", pending_owner_user="acme_app2"))
    assert plan.step is TeardownStep.DROP
    assert plan.revoke_patterns == ("acme_app", "acme_app2", "maester")
    assert (plan.revoke, plan.drop_database, plan.drop_users) == ((), False, ())
    assert plan.stamp_deleting


def test_a_sibling_declaring_the_schema_keeps_it_and_its_grants() -> None:
    sibling = Sibling("tenant-z", "acme_wms", "z-owner", "z_app")
    plan = plan_teardown(replace(OBS, siblings=(sibling,)))
    assert plan.step is TeardownStep.DROP
    assert not plan.drop_database
    assert plan.revoke == ()
    assert plan.drop_users == ("acme_app",)
    assert _reasons(replace(OBS, siblings=(sibling,))) == ["DatabaseDropSkipped"]


@pytest.mark.parametrize(
    ("sibling", "reason"),
    [
        pytest.param(Sibling("z", "z_db", "acme-owner", None), "DatabaseDropSkipped",
                     id="same-owner-secret"),
        pytest.param(Sibling("z", "z_db", "z-owner", "acme_app"), "DatabaseDropSkipped",
                     id="same-owner-user"),
        pytest.param(Sibling("z", "z_db", "z-owner", "z_app", frozenset({"acme_app"})),
                     "OwnerUserDropSkipped", id="granted-by-a-sibling"),
        pytest.param(Sibling("z", "z_db", "z-owner", "z_app", pending_owner_user="acme_app"),
                     "DatabaseDropSkipped", id="a-sibling-rotating-to-it"),
        pytest.param(Sibling("z", "z_db", "z-owner", None, secret_user="acme_app"),
                     "DatabaseDropSkipped", id="an-unreconciled-sibling-whose-secret-names-it"),
    ],
)  # fmt: skip
def test_an_owner_a_sibling_still_claims_is_not_dropped(sibling: Sibling, reason: str) -> None:
    obs = replace(OBS, siblings=(sibling,))
    plan = plan_teardown(obs)
    assert plan.drop_database
    assert plan.drop_users == ()
    assert [e.reason for e in plan.events] == [reason]


def test_a_deleting_sibling_claims_nothing() -> None:
    sibling = Sibling("z", "acme_wms", "acme-owner", "acme_app", deleting=True)
    plan = plan_teardown(replace(OBS, siblings=(sibling,)))
    assert plan.drop_database
    assert plan.drop_users == ("acme_app",)


def test_an_owner_that_became_a_group_principal_is_never_dropped() -> None:
    obs = replace(OBS, reserved=frozenset({"acme_app"}))
    plan = plan_teardown(obs)
    assert plan.drop_users == ()
    assert _reasons(obs) == ["OwnerUserReservedSkipped"]


def test_an_interrupted_rotation_drops_both_accounts_it_recorded() -> None:
    plan = plan_teardown(replace(OBS, pending_owner_user="acme_app2"))
    assert plan.drop_users == ("acme_app", "acme_app2")


def test_nothing_left_to_drop_releases_without_a_connection() -> None:
    sibling = Sibling("z", "acme_wms", "acme-owner", "acme_app")
    plan = plan_teardown(replace(OBS, siblings=(sibling,)))
    assert plan.step is TeardownStep.RELEASE


_DROPPED = TeardownPlan(
    TeardownStep.DROP, database="acme_wms", drop_database=True, drop_users=("acme_app",)
)


@pytest.mark.parametrize(
    ("active_site", "reasons", "release"),
    [
        pytest.param("dc1", ["DatabaseDropped"], True, id="the-group-as-it-was"),
        pytest.param(None, ["DatabaseCleanupSkipped"], True, id="the-group-vanished"),
        pytest.param("dc2", ["DatabaseDropDeferred"], False, id="the-primary-moved"),
    ],
)
def test_a_drop_that_ran_is_judged_by_the_group_read_after_it(
    active_site: str | None, reasons: list[str], release: bool
) -> None:
    judged = plan_after_drop(_DROPPED, "dc1", active_site)
    assert [e.reason for e in judged.events] == reasons
    assert judged.release is release
