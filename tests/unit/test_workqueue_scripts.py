"""The work queue's Lua scripts are files, each put together with the functions it uses."""

from __future__ import annotations

from pathlib import Path

import pytest

from tenantdb.adapters.workqueue.base import SCRIPTS
from tenantdb.adapters.workqueue.scripts import LUA, source

SHARED = {"now_ms", "lock_or_mark"}


def test_every_script_and_every_shared_function_has_its_file_and_no_file_is_left_over() -> None:
    assert {path.stem for path in LUA.glob("*.lua")} == set(SCRIPTS) | SHARED


def test_a_script_gets_each_function_it_uses_once_and_before_it_is_called() -> None:
    begin = source("begin")
    # begin uses lock_or_mark, which uses now_ms: both come first, each once.
    assert begin.count("local function now_ms()") == 1
    assert begin.count("local function lock_or_mark(") == 1
    assert begin.index("local function now_ms()") < begin.index("local function lock_or_mark(")
    assert begin.index("local function lock_or_mark(") < begin.index("redis.call('DEL', KEYS[3])")


def test_a_script_that_uses_nothing_is_its_file_alone() -> None:
    assert source("extend") == (LUA / "extend.lua").read_text()
    assert "now_ms" not in source("claim_due")


def test_every_script_that_reads_the_clock_defines_it() -> None:
    for name in SCRIPTS:
        text = source(name)
        if "now_ms()" in text:
            assert "local function now_ms()" in text, name


def test_a_function_named_without_a_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "broken.lua").write_text("-- uses: now_ms, nowhere\nreturn 1\n")
    (tmp_path / "now_ms.lua").write_text((LUA / "now_ms.lua").read_text())
    with pytest.raises(FileNotFoundError, match=r"nowhere\.lua"):
        source("broken", tmp_path)
