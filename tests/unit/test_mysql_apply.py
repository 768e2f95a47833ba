"""What one apply of a MysqlDatabase sends, decided from one look at the server."""

from __future__ import annotations

import pytest

from tenantdb.core.mysqldatabase import sql
from tenantdb.core.mysqldatabase.apply import (
    OWNER_PASSWORD,
    ApplyPlan,
    Claims,
    Observed,
    Records,
    Refusal,
    parse_observation,
    plan_apply,
    render_drop,
    usernames_to_observe,
)
from tenantdb.core.mysqldatabase.reasons import Phase, Reason
from tenantdb.core.mysqldatabase.sql import Dialect
from tenantdb.core.mysqldatabase.teardown import TeardownPlan, TeardownStep
from tenantdb.core.mysqldatabase.validation import GrantSpec, ValidSpec

MARIADB, MYSQL = Dialect.MARIADB, Dialect.MYSQL
ALL_MARIADB = frozenset(sql.SCHEMA_PRIVILEGES[MARIADB])
DEFAULTS = ("utf8mb4", "utf8mb4_unicode_ci")


def spec(
    owner: str = "acme_app",
    privileges: tuple[str, ...] = ("ALL PRIVILEGES",),
    grants: tuple[GrantSpec, ...] = (GrantSpec("maester", ("SELECT", "DELETE")),),
) -> ValidSpec:
    return ValidSpec("acme_wms", *DEFAULTS, owner, privileges, grants)


APPLIED = Records(True, "acme_app", "", ("acme_app", "maester"))
IN_PLACE = Observed(
    False,
    DEFAULTS,
    frozenset({"acme_app", "maester"}),
    {"acme_app": ALL_MARIADB, "maester": frozenset({"SELECT", "DELETE"})},
)


def plan(
    wanted: ValidSpec,
    records: Records,
    observed: Observed,
    *,
    repair: bool = False,
    claims: Claims | None = None,
    dialect: Dialect = MARIADB,
    reassert: bool = False,
) -> ApplyPlan | Refusal:
    return plan_apply(
        wanted,
        records,
        observed,
        dialect=dialect,
        group="main",
        site="dc1",
        claims=claims or Claims(frozenset({"root"})),
        repair=repair,
        reassert=reassert,
    )


def texts(result: ApplyPlan | Refusal) -> list[str]:
    assert isinstance(result, ApplyPlan), result
    return [s.template % tuple("?" for _ in s.params) for s in result.statements]


def test_a_new_order_creates_schema_and_owner_then_grants() -> None:
    empty = Observed(False, None, frozenset({"maester"}))
    assert texts(plan(spec(), Records(), empty)) == [
        "CREATE DATABASE IF NOT EXISTS `acme_wms` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci",
        "CREATE USER IF NOT EXISTS 'acme_app'@'%' IDENTIFIED BY ?",
        "GRANT ALL PRIVILEGES ON `acme\\_wms`.* TO 'acme_app'@'%'",
        "GRANT SELECT, DELETE ON `acme\\_wms`.* TO 'maester'@'%'",
    ]


def test_the_password_is_bound_from_the_secret_by_the_executor() -> None:
    result = plan(spec(), APPLIED, IN_PLACE)
    assert isinstance(result, ApplyPlan)
    secret = [s for s in result.statements if s.secret]
    assert [s.params for s in secret] == [(OWNER_PASSWORD,)]


def test_a_changed_input_reasserts_the_password_and_nothing_else() -> None:
    assert texts(plan(spec(), APPLIED, IN_PLACE)) == ["ALTER USER 'acme_app'@'%' IDENTIFIED BY ?"]


def test_a_server_that_matches_gets_no_statement_on_a_drift_check() -> None:
    assert texts(plan(spec(), APPLIED, IN_PLACE, repair=True)) == []


def test_a_drift_check_sends_only_what_drifted() -> None:
    dropped = Observed(False, None, IN_PLACE.users, {"maester": frozenset({"SELECT", "DELETE"})})
    assert texts(plan(spec(), APPLIED, dropped, repair=True)) == [
        "CREATE DATABASE IF NOT EXISTS `acme_wms` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci",
        "GRANT ALL PRIVILEGES ON `acme\\_wms`.* TO 'acme_app'@'%'",
    ]
    revoked = Observed(False, DEFAULTS, IN_PLACE.users, {"acme_app": ALL_MARIADB})
    assert texts(plan(spec(), APPLIED, revoked, repair=True)) == [
        "GRANT SELECT, DELETE ON `acme\\_wms`.* TO 'maester'@'%'"
    ]


def test_changed_defaults_alter_the_schema() -> None:
    moved = Observed(False, ("utf8mb3", "utf8mb3_general_ci"), IN_PLACE.users, IN_PLACE.held)
    assert texts(plan(spec(), APPLIED, moved, repair=True)) == [
        "ALTER DATABASE `acme_wms` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
    ]


def test_narrowing_grants_first_then_revokes_everything_else_it_holds() -> None:
    result = texts(plan(spec(privileges=("SELECT",)), APPLIED, IN_PLACE))
    assert result[0] == "ALTER USER 'acme_app'@'%' IDENTIFIED BY ?"
    revoke = result[1]
    assert revoke.startswith("REVOKE INSERT, UPDATE, DELETE, CREATE, DROP")
    for extra in ("CREATE ROUTINE", "ALTER ROUTINE", "CREATE VIEW", "DELETE HISTORY"):
        assert extra in revoke
    assert "SELECT" not in revoke.split(" ON ")[0]


def test_narrowing_from_nothing_held_grants_before_any_revoke() -> None:
    held = Observed(False, DEFAULTS, IN_PLACE.users, {"acme_app": frozenset({"INSERT"})})
    result = texts(plan(spec(privileges=("SELECT",), grants=()), APPLIED, held, repair=True))
    assert result == [
        "GRANT SELECT ON `acme\\_wms`.* TO 'acme_app'@'%'",
        "REVOKE INSERT ON `acme\\_wms`.* FROM 'acme_app'@'%'",
    ]


def test_a_grants_entry_removed_from_the_spec_is_revoked_never_dropped() -> None:
    result = texts(plan(spec(grants=()), APPLIED, IN_PLACE, repair=True))
    assert result == ["REVOKE ALL PRIVILEGES ON `acme\\_wms`.* FROM 'maester'@'%'"]
    assert not any("DROP USER" in t for t in result)


def test_mysql_renders_the_same_plan_with_its_tolerant_revoke() -> None:
    held = {"acme_app": frozenset(sql.SCHEMA_PRIVILEGES[MYSQL]), "maester": frozenset({"SELECT"})}
    observed = Observed(False, DEFAULTS, IN_PLACE.users, held)
    result = texts(plan(spec(grants=()), APPLIED, observed, repair=True, dialect=MYSQL))
    assert result == [
        "REVOKE IF EXISTS ALL PRIVILEGES ON `acme\\_wms`.* FROM 'maester'@'%' IGNORE UNKNOWN USER"
    ]


@pytest.mark.parametrize(
    ("records", "observed", "phase", "reason"),
    [
        pytest.param(
            APPLIED,
            Observed(True, DEFAULTS, IN_PLACE.users, IN_PLACE.held),
            Phase.PENDING,
            Reason.PRIMARY_UNAVAILABLE,
            id="read-only",
        ),
        pytest.param(
            Records(),
            Observed(False, DEFAULTS, frozenset({"maester"})),
            Phase.FAILED,
            Reason.DATABASE_PRE_EXISTS,
            id="schema-exists",
        ),
        pytest.param(
            Records(),
            Observed(False, None, frozenset({"acme_app", "maester"})),
            Phase.FAILED,
            Reason.PRE_EXISTING_OWNER_USER,
            id="owner-exists",
        ),
        pytest.param(
            APPLIED,
            Observed(False, DEFAULTS, frozenset({"acme_app"}), IN_PLACE.held),
            Phase.FAILED,
            Reason.GRANT_USER_MISSING,
            id="grant-user-missing",
        ),
    ],
)
def test_a_refusal_sends_nothing(
    records: Records, observed: Observed, phase: Phase, reason: Reason
) -> None:
    result = plan(spec(), records, observed)
    assert isinstance(result, Refusal)
    assert (result.phase, result.reason) == (phase, reason)


def test_the_grant_user_message_says_grants_never_create_users() -> None:
    result = plan(spec(), APPLIED, Observed(False, DEFAULTS, frozenset({"acme_app"})))
    assert isinstance(result, Refusal)
    assert result.message.startswith("MySQL user \"maester\" does not exist at host '%'")
    assert result.message.endswith("spec.grants[] never creates users")


def test_an_owner_recorded_as_pending_is_this_orders_own() -> None:
    records = Records(True, "acme_app", "acme_app_v2", ("acme_app", "maester"))
    users = frozenset({"acme_app", "acme_app_v2", "maester"})
    observed = Observed(False, DEFAULTS, users, IN_PLACE.held)
    assert isinstance(plan(spec(owner="acme_app_v2"), records, observed), ApplyPlan)


def test_a_username_rotation_creates_the_new_owner_before_dropping_the_old() -> None:
    result = plan(spec(owner="acme_app_v2"), APPLIED, IN_PLACE)
    statements = texts(result)
    create = statements.index("CREATE USER IF NOT EXISTS 'acme_app_v2'@'%' IDENTIFIED BY ?")
    drop = statements.index("DROP USER IF EXISTS 'acme_app'@'%'")
    revoke = statements.index("REVOKE ALL PRIVILEGES ON `acme\\_wms`.* FROM 'acme_app'@'%'")
    assert create < revoke < drop
    assert isinstance(result, ApplyPlan)
    assert [e.reason for e in result.events] == ["OwnerUserRotated"]


@pytest.mark.parametrize(
    ("claims", "wanted", "event"),
    [
        pytest.param(
            Claims(frozenset({"acme_app"})), spec(owner="acme_app_v2"), "OwnerUserReservedSkipped"
        ),
        pytest.param(
            Claims(frozenset(), {"acme_app": "tenant-b"}),
            spec(owner="acme_app_v2"),
            "OwnerUserDropSkipped",
        ),
        pytest.param(
            Claims(frozenset()),
            spec(owner="acme_app_v2", grants=(GrantSpec("acme_app", ("SELECT",)),)),
            "OwnerUserDropSkipped",
        ),
    ],
)
def test_a_previous_owner_someone_else_needs_is_not_dropped(
    claims: Claims, wanted: ValidSpec, event: str
) -> None:
    observed = Observed(
        False, DEFAULTS, frozenset({"acme_app", "maester"}), {"acme_app": ALL_MARIADB}
    )
    result = plan(wanted, APPLIED, observed, claims=claims)
    assert isinstance(result, ApplyPlan)
    assert not any("DROP USER" in t for t in texts(result))
    assert [e.reason for e in result.events] == [event]


def test_an_abandoned_rotation_target_goes_first() -> None:
    records = Records(True, "acme_app", "acme_app_v2", ("acme_app", "maester"))
    users = frozenset({"acme_app", "acme_app_v2", "maester"})
    observed = Observed(False, DEFAULTS, users, IN_PLACE.held)
    result = plan(spec(owner="acme_app_v3"), records, observed)
    statements = texts(result)
    assert statements[0] == "DROP USER IF EXISTS 'acme_app_v2'@'%'"
    assert isinstance(result, ApplyPlan)
    assert "abandoned owner rotation target" in result.events[0].message


def test_the_observation_reads_schema_accounts_and_privileges() -> None:
    rows = [
        ("read_only", "0", ""),
        ("schema", "utf8mb4", "utf8mb4_unicode_ci"),
        ("user", "acme_app", ""),
        ("privilege", "'acme_app'@'%'", "SELECT"),
        ("privilege", "'acme_app'@'%'", "INSERT"),
        ("privilege", "'other'@'10.0.0.1'", "SELECT"),
        ("unescaped", "'maester'@'%'", "SELECT"),
    ]
    observed = parse_observation(rows)
    assert not observed.read_only
    assert observed.schema == DEFAULTS
    assert observed.users == {"acme_app"}
    assert observed.held == {"acme_app": {"SELECT", "INSERT"}}
    assert observed.unescaped == {"maester": {"SELECT"}}
    assert parse_observation([("read_only", 1, "")]).read_only


def test_every_account_the_apply_touches_is_observed_once() -> None:
    records = Records(True, "acme_old", "acme_pending", ("acme_old", "gone_grant"))
    assert usernames_to_observe(spec(), records) == (
        "acme_app",
        "maester",
        "acme_old",
        "acme_pending",
        "gone_grant",
    )


def test_a_drop_revokes_what_is_held_then_drops_schema_then_owner() -> None:
    decided = TeardownPlan(
        TeardownStep.DROP,
        database="acme_wms",
        drop_database=True,
        revoke=("maester", "ghost", "acme_app"),
        drop_users=("acme_app",),
    )
    statements = render_drop(decided, IN_PLACE, MARIADB)
    assert [s.template for s in statements] == [
        "REVOKE ALL PRIVILEGES ON `acme\\_wms`.* FROM 'maester'@'%%'",
        "REVOKE ALL PRIVILEGES ON `acme\\_wms`.* FROM 'acme_app'@'%%'",
        "DROP DATABASE IF EXISTS `acme_wms`",
        "DROP USER IF EXISTS 'acme_app'@'%%'",
    ]
    kept = TeardownPlan(TeardownStep.DROP, database="acme_wms", drop_users=("acme_app",))
    assert [s.template for s in render_drop(kept, IN_PLACE, MARIADB)] == [
        "DROP USER IF EXISTS 'acme_app'@'%%'"
    ]


def test_a_grant_an_earlier_version_left_under_the_unescaped_name_is_replaced_without_a_gap() -> (
    None
):
    legacy = Observed(
        False,
        DEFAULTS,
        IN_PLACE.users,
        {"maester": frozenset({"SELECT", "DELETE"})},
        {"acme_app": ALL_MARIADB, "maester": frozenset({"SELECT", "DELETE"})},
    )
    result = texts(plan(spec(), APPLIED, legacy, repair=True))
    # The escaped grant comes first, so the owner holds its privileges at every moment.
    assert result == [
        "GRANT ALL PRIVILEGES ON `acme\\_wms`.* TO 'acme_app'@'%'",
        "REVOKE ALL PRIVILEGES ON `acme_wms`.* FROM 'acme_app'@'%'",
        "REVOKE ALL PRIVILEGES ON `acme_wms`.* FROM 'maester'@'%'",
    ]
    retired = texts(plan(spec(grants=()), APPLIED, legacy, repair=True))
    assert "REVOKE ALL PRIVILEGES ON `acme\\_wms`.* FROM 'maester'@'%'" in retired
    assert "REVOKE ALL PRIVILEGES ON `acme_wms`.* FROM 'maester'@'%'" in retired


def test_a_drop_revokes_the_unescaped_grant_rows_too() -> None:
    legacy = Observed(False, DEFAULTS, IN_PLACE.users, {}, {"acme_app": ALL_MARIADB})
    decided = TeardownPlan(
        TeardownStep.DROP,
        database="acme_wms",
        drop_database=True,
        revoke=("acme_app",),
        drop_users=("acme_app",),
    )
    assert [s.template for s in render_drop(decided, legacy, MARIADB)] == [
        "REVOKE ALL PRIVILEGES ON `acme_wms`.* FROM 'acme_app'@'%%'",
        "DROP DATABASE IF EXISTS `acme_wms`",
        "DROP USER IF EXISTS 'acme_app'@'%%'",
    ]


@pytest.mark.parametrize(
    ("declared", "reported"),
    [
        pytest.param(("utf8", "utf8_general_ci"), ("utf8mb3", "utf8mb3_general_ci"), id="utf8"),
        pytest.param(("UTF8MB4", "utf8mb4_Unicode_CI"), DEFAULTS, id="case"),
        pytest.param(("utf8mb3", "utf8mb3_bin"), ("utf8", "utf8_bin"), id="older-server"),
    ],
)
def test_a_character_set_alias_is_no_drift(
    declared: tuple[str, str], reported: tuple[str, str]
) -> None:
    wanted = ValidSpec("acme_wms", *declared, "acme_app", ("ALL PRIVILEGES",), ())
    observed = Observed(False, reported, frozenset({"acme_app"}), {"acme_app": ALL_MARIADB})
    assert texts(plan(wanted, APPLIED, observed, repair=True)) == []


def test_narrowing_revokes_a_privilege_the_tables_do_not_know() -> None:
    newer = Observed(
        False,
        DEFAULTS,
        frozenset({"acme_app"}),
        {"acme_app": ALL_MARIADB | {"SHOW CREATE ROUTINE"}},
    )
    result = texts(plan(spec(privileges=("SELECT",), grants=()), APPLIED, newer, repair=True))
    assert len(result) == 1
    assert result[0].endswith("SHOW CREATE ROUTINE ON `acme\\_wms`.* FROM 'acme_app'@'%'")


def test_a_drift_check_after_a_lost_lease_sets_the_password_again() -> None:
    # A pass that lost its lease may have sent an older password after a newer pass ran.
    assert texts(plan(spec(), APPLIED, IN_PLACE, repair=True)) == []
    assert texts(plan(spec(), APPLIED, IN_PLACE, repair=True, reassert=True)) == [
        "ALTER USER 'acme_app'@'%' IDENTIFIED BY ?"
    ]


FOREIGN_ROWS = [
    ("foreign", "'stranger'@'10.0.%'", "acme\\_wms"),  # the schema's name, another host
    ("foreign", "'reporting'@'%'", "acme%"),  # a pattern that matches it
    ("foreign", "'root'@'localhost'", "acme%"),  # the server's own account: never touched
]


def test_the_observation_reads_every_foreign_grant_row_on_the_schema() -> None:
    observed = parse_observation([("schema", *DEFAULTS), *FOREIGN_ROWS])
    assert observed.foreign == (
        sql.ForeignGrant("reporting", "%", "acme%"),
        sql.ForeignGrant("root", "localhost", "acme%"),
        sql.ForeignGrant("stranger", "10.0.%", "acme\\_wms"),
    )
    assert observed.held == {}


def test_a_new_schema_first_takes_every_foreign_grant_row_that_matches_it() -> None:
    fresh = parse_observation([("read_only", "0", ""), ("user", "maester", ""), *FOREIGN_ROWS])
    result = texts(plan(spec(), Records(), fresh))
    assert result[:3] == [
        "REVOKE ALL PRIVILEGES ON `acme%`.* FROM ?@?",
        "REVOKE ALL PRIVILEGES ON `acme\\_wms`.* FROM ?@?",
        "CREATE DATABASE IF NOT EXISTS `acme_wms` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci",
    ]
    assert isinstance(outcome := plan(spec(), Records(), fresh), ApplyPlan)
    assert [s.params for s in outcome.statements[:2]] == [
        ("reporting", "%"),
        ("stranger", "10.0.%"),
    ]


def test_a_drift_check_revokes_a_foreign_row_granted_since() -> None:
    drifted = Observed(
        False, DEFAULTS, IN_PLACE.users, IN_PLACE.held, {}, (sql.ForeignGrant("x", "%", "acme%"),)
    )
    assert texts(plan(spec(), APPLIED, drifted, repair=True)) == [
        "REVOKE ALL PRIVILEGES ON `acme%`.* FROM ?@?"
    ]


def test_a_foreign_row_that_cannot_be_revoked_safely_refuses_the_schema() -> None:
    odd = Observed(
        False, None, frozenset({"maester"}), {}, {}, (sql.ForeignGrant("x", "%", "a b"),)
    )
    refused = plan(spec(), Records(), odd)
    assert isinstance(refused, Refusal)
    assert (refused.phase, refused.reason) == (Phase.FAILED, Reason.DATABASE_NAME_CONFLICT)
    assert "cannot be revoked by tenantdb" in refused.message
