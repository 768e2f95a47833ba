"""The ``tenantdb`` command's handling of bad input: one line on stderr and exit code 2."""

from __future__ import annotations

from pathlib import Path

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


def test_flower_refuses_to_start_without_credentials(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tenantdb.settings import load_settings

    monkeypatch.delenv("TENANTDB_FLOWER_BASIC_AUTH", raising=False)
    monkeypatch.delenv("TENANTDB_FLOWER_BASIC_AUTH_FILE", raising=False)
    load_settings.cache_clear()
    try:
        assert main(["flower"]) == EXIT_USAGE
    finally:
        load_settings.cache_clear()
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "Flower needs credentials" in err
    assert "--unauthenticated-local" in err


def test_an_unknown_log_level_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tenantdb.settings import load_settings

    monkeypatch.setenv("TENANTDB_LOG_LEVEL", "LOUD")
    load_settings.cache_clear()
    try:
        assert main(["status", "mariadbdatabase/tenant-a/app"]) == EXIT_USAGE
    finally:
        load_settings.cache_clear()
    err = capsys.readouterr().err
    assert err.startswith("tenantdb: invalid setting log_level: Input should be 'DEBUG'")
    assert err.count("\n") == 1


def test_a_worker_runs_celery_without_gossip_and_mingle_and_keeps_the_callers_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os

    from tenantdb.settings import load_settings

    started: list[list[str]] = []

    def execv(path: str, argv: list[str]) -> None:
        started.append(argv)
        raise SystemExit(0)

    monkeypatch.setattr(os, "execv", execv)
    monkeypatch.setenv("TENANTDB_METRICS_PORT", "0")
    load_settings.cache_clear()
    try:
        with pytest.raises(SystemExit):
            main(["worker", "--", "-c", "4", "--without-gossip", "-Q", "provision"])
    finally:
        load_settings.cache_clear()
    (argv,) = started
    celery = argv[argv.index("worker") + 1 :]
    assert celery.count("--without-gossip") == 1
    assert "--without-mingle" in celery
    assert celery[-4:] == ["-c", "4", "-Q", "provision"]
    assert any(a.startswith("--loglevel=") for a in celery)


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"tenantdb {version('tenantdb')}"


@pytest.mark.parametrize("command", ["status", "reconcile"])
def test_the_help_shows_examples_and_exit_codes(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    shown = capsys.readouterr().out
    assert "examples:" in shown
    assert f"tenantdb {command} " in shown
    assert "4  a cluster cannot be read" in shown


@pytest.mark.parametrize(
    ("argv", "handed"),
    [
        pytest.param(
            ["demo", "--until-ready", "--timeout", "90", "--state-dir", "/state/demo"],
            ["-m", "demo", "--state-dir", "/state/demo", "--timeout", "90", "--until-ready"],
            id="demo",
        ),
        pytest.param(
            ["devstack", "up", "--state-dir", "/state/devstack"],
            ["-m", "devstack", "up", "--state-dir", "/state/devstack"],
            id="devstack",
        ),
    ],
)
def test_demo_and_devstack_hand_over_to_their_programs_in_the_checkout(
    argv: list[str], handed: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Neither ships with tenantdb: the command replaces itself with the program, the source
    # checkout on its path, so production code never imports them.
    import os
    import sys
    from pathlib import Path

    started: list[tuple[list[str], dict[str, str]]] = []

    def execve(path: str, args: list[str], env: dict[str, str]) -> None:
        started.append((args, env))
        raise SystemExit(0)

    monkeypatch.setattr(os, "execve", execve)
    with pytest.raises(SystemExit):
        main(argv)
    ((args, env),) = started
    assert args == [sys.executable, *handed]
    checkout = str(Path(__file__).resolve().parents[2])
    assert env["PYTHONPATH"].split(os.pathsep)[0] == checkout


@pytest.mark.parametrize(
    ("content", "complaint"),
    [
        pytest.param(None, "TENANTDB_NOTE_KEYS_FILE is not set", id="unset"),
        pytest.param("", "holds no key", id="empty"),
        pytest.param("# only a comment\n", "holds no key", id="comment-only"),
        pytest.param("short-key\n", "note key 1 is 9 bytes; a key is at least 32", id="short"),
    ],
)
def test_a_worker_refuses_to_start_without_usable_note_keys(
    content: str | None,
    complaint: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tenantdb.settings import load_settings

    path = tmp_path / "keys"
    if content is None:
        monkeypatch.delenv("TENANTDB_NOTE_KEYS_FILE", raising=False)
    else:
        path.write_text(content)
        monkeypatch.setenv("TENANTDB_NOTE_KEYS_FILE", str(path))
    load_settings.cache_clear()
    try:
        assert main(["worker"]) == EXIT_USAGE
    finally:
        load_settings.cache_clear()
    err = capsys.readouterr().err
    assert err.startswith("tenantdb: ")
    assert complaint in err
    assert err.count("\n") == 1
    if content:
        assert content.strip() not in err.replace(str(path), "")


@pytest.mark.parametrize("role", ["worker", "watcher", "beat", "status"])
def test_a_redis_password_file_that_cannot_be_read_stops_a_role_with_one_line(
    role: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tenantdb.settings import load_settings

    missing = tmp_path / "redis-password"
    monkeypatch.setenv("TENANTDB_REDIS_PASSWORD_FILE", str(missing))
    load_settings.cache_clear()
    try:
        assert main([role]) == EXIT_USAGE
    finally:
        load_settings.cache_clear()
    err = capsys.readouterr().err
    assert (
        err
        == f"tenantdb: cannot read the Redis password file {missing}: No such file or directory\n"
    )
