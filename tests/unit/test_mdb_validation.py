"""The reconciler's own schema-name checks (the CRD may be bypassed or altered)."""

from __future__ import annotations

import pytest

from tenantdb.core.mariadbdatabase.reasons import Reason
from tenantdb.core.mariadbdatabase.validation import (
    classify_database_name,
    is_cluster_name_too_long,
)


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        pytest.param("app_db", None, id="valid"),
        pytest.param("A" * 64, None, id="64-chars"),
        pytest.param("Custom_DB", None, id="mixed-case"),
        pytest.param("", Reason.DATABASE_NAME_INVALID, id="empty"),
        pytest.param("a" * 65, Reason.DATABASE_NAME_INVALID, id="65-chars"),
        pytest.param("a%b", Reason.DATABASE_NAME_INVALID, id="percent"),
        pytest.param("a`b", Reason.DATABASE_NAME_INVALID, id="backtick"),
        pytest.param("a.b", Reason.DATABASE_NAME_INVALID, id="dot"),
        pytest.param("a-b", Reason.DATABASE_NAME_INVALID, id="dash"),
        pytest.param("a\nb", Reason.DATABASE_NAME_INVALID, id="newline"),
        pytest.param("mysql", Reason.DATABASE_NAME_RESERVED, id="mysql"),
        pytest.param("MySQL", Reason.DATABASE_NAME_RESERVED, id="mysql-any-case"),
        pytest.param("information_schema", Reason.DATABASE_NAME_RESERVED, id="information-schema"),
        pytest.param("PERFORMANCE_SCHEMA", Reason.DATABASE_NAME_RESERVED, id="performance-schema"),
        pytest.param("sys", Reason.DATABASE_NAME_RESERVED, id="sys"),
    ],
)
def test_classify_database_name(name: str, reason: Reason | None) -> None:
    refusal = classify_database_name(name)
    assert (refusal.reason if refusal else None) == reason


def test_refusal_messages() -> None:
    invalid = classify_database_name("a-b")
    reserved = classify_database_name("MySQL")
    assert invalid is not None
    assert reserved is not None
    assert invalid.message == (
        'database name "a-b" is not a MySQL identifier of 1 to 64 characters from [A-Za-z0-9_]; '
        "delete and re-create the order with another databaseName"
    )
    assert reserved.message == (
        'database name "MySQL" is a MariaDB system schema; delete and re-create the order with '
        "another databaseName"
    )


@pytest.mark.parametrize(
    ("cluster", "too_long"),
    [
        pytest.param("", False, id="management"),
        pytest.param("c" * 63, False, id="63"),
        pytest.param("c" * 64, True, id="64"),
    ],
)
def test_cluster_name_length(cluster: str, too_long: bool) -> None:
    assert is_cluster_name_too_long(cluster) is too_long
