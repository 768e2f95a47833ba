"""Which MySQL failover groups without spec.tls a worker may reach in plaintext, and what it
says about them at start: none by default."""

from __future__ import annotations

import logging

import pytest

from tenantdb.adapters.mysqladmin import plaintext_allowed, warn_about_plaintext
from tenantdb.settings import Settings


@pytest.mark.parametrize(
    ("require", "groups", "allowed"),
    [
        (True, "", False),
        (True, "tenants/main", True),
        (True, " other/main , tenants/main ", True),
        (True, "tenants/*", True),
        (True, "tenants/mai", False),
        (True, "tenants/main-2", False),
        (True, "*/main", False),  # a namespace wildcard only
        (True, "other/*", False),
        (False, "", True),
    ],
)
def test_plaintext_needs_the_group_or_its_namespace_named(
    require: bool, groups: str, allowed: bool
) -> None:
    settings = Settings(mysql_require_tls=require, mysql_plaintext_groups=groups)
    assert plaintext_allowed("tenants/main@3f2c", settings) is allowed


def test_by_default_no_group_is_reached_in_plaintext_and_nothing_is_said(
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = Settings(mysql_plaintext_groups="")
    assert settings.mysql_require_tls
    with caplog.at_level(logging.INFO):
        warn_about_plaintext(settings)
    assert caplog.records == []


def test_a_worker_names_at_start_every_group_it_may_reach_in_plaintext(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        warn_about_plaintext(Settings(mysql_plaintext_groups="b/*, a/main"))
        warn_about_plaintext(Settings(mysql_require_tls=False))
    first, second = (r.getMessage() for r in caplog.records)
    assert first.endswith("when they set no spec.tls: a/main, b/*")
    assert "TENANTDB_MYSQL_REQUIRE_TLS is false" in second
