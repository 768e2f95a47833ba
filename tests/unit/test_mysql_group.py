"""A fenced group takes no tenant DDL; read-only and connection failures are transient."""

from __future__ import annotations

from typing import Any

import pytest

from tenantdb.core.mysqldatabase.errors import is_transient, may_have_run
from tenantdb.core.mysqldatabase.group import compute_active_site, compute_fence
from tenantdb.core.mysqldatabase.reasons import Reason


def _group(spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None) -> Any:
    return {"metadata": {"name": "main"}, "spec": spec or {}, "status": status or {}}


@pytest.mark.parametrize(
    ("group", "reason", "message"),
    [
        pytest.param(_group(), None, None, id="idle"),
        pytest.param(
            _group({"restoreInPlace": {"confirmToken": "t"}}),
            Reason.RESTORE_IN_PROGRESS,
            'group "main" is mid in-place restore (phase requested)',
            id="restore-requested",
        ),
        *(
            pytest.param(
                _group({"restoreInPlace": {"x": 1}}, {"restoreInPlace": {"phase": phase}}),
                Reason.RESTORE_IN_PROGRESS,
                f'group "main" is mid in-place restore (phase {phase})',
                id=f"restore-{phase}",
            )
            for phase in ("Preflight", "Fencing", "Restoring", "Resuming")
        ),
        *(
            pytest.param(
                _group({"restoreInPlace": {"x": 1}}, {"restoreInPlace": {"phase": phase}}),
                None,
                None,
                id=f"restore-done-{phase or 'empty'}",
            )
            for phase in ("", "Succeeded", "Failed")
        ),
        pytest.param(
            _group(status={"plannedFailover": {"phase": "Promoting"}}),
            Reason.PLANNED_FAILOVER_IN_PROGRESS,
            'group "main" is mid planned failover (phase Promoting)',
            id="failover-promoting",
        ),
        *(
            pytest.param(
                _group(status={"plannedFailover": {"phase": phase}}),
                None,
                None,
                id=f"failover-{phase}",
            )
            for phase in ("Deferred", "Succeeded", "Failed")
        ),
    ],
)
def test_a_group_is_fenced_while_a_restore_or_planned_failover_runs(
    group: Any, reason: Reason | None, message: str | None
) -> None:
    fence = compute_fence(group)
    if reason is None:
        assert fence is None
    else:
        assert fence is not None
        assert (fence.reason, fence.message) == (reason, message)


def test_the_active_site_is_read_off_the_groups_status() -> None:
    assert compute_active_site(_group(status={"activeSite": "dc2"})) == "dc2"
    assert compute_active_site(_group()) == ""


@pytest.mark.parametrize(
    ("code", "connection", "transient", "ran"),
    [
        pytest.param(1290, False, True, False, id="super-read-only"),
        pytest.param(1836, False, True, False, id="read-only-mode"),
        pytest.param(2013, False, True, True, id="lost-connection"),
        pytest.param(2003, False, True, True, id="cannot-connect"),
        pytest.param(None, True, True, True, id="socket-timeout"),
        pytest.param(1040, False, True, False, id="too-many-connections"),
        pytest.param(1205, False, True, False, id="lock-wait-timeout"),
        pytest.param(1213, False, True, False, id="deadlock"),
        pytest.param(1969, False, True, True, id="max-statement-time"),
        pytest.param(1064, False, False, False, id="syntax"),
        pytest.param(1044, False, False, False, id="access-denied"),
        pytest.param(1819, False, False, False, id="password-policy"),
    ],
)
def test_failures_are_transient_only_when_they_are_the_servers_state_or_the_connection(
    code: int | None, connection: bool, transient: bool, ran: bool
) -> None:
    assert is_transient(code, connection_failed=connection) is transient
    assert may_have_run(code, connection_failed=connection) is ran
