"""The ``tenantdb`` command's handling of bad input: one line on stderr and exit code 2."""

from __future__ import annotations

import pytest

from tenantdb.cli import EXIT_USAGE, main


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        pytest.param(["reconcile", "not-a-key"], "order key 'not-a-key'", id="malformed-key"),
        pytest.param(["reconcile", "mariadbdatabase/a/b@"], "empty cluster", id="empty-cluster"),
        pytest.param(["launch"], "invalid choice: 'launch'", id="unknown-command"),
        pytest.param([], "the following arguments are required", id="no-command"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    argv: list[str], complaint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    assert code == EXIT_USAGE
    err = capsys.readouterr().err
    assert complaint in err
    assert err.count("\n") == 1
    assert err.startswith("tenantdb: ")
