"""The onboarding blocks of docs/operations.md, which the real platform runs as they are written:
each is found, is valid bash, and passes its secrets by file or environment, never as an argument
a process listing or a log would show."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from devstack.upstream import onboarding_script

BLOCKS = ("openbao", "controlplane", "cert-manager")


@pytest.mark.parametrize("name", BLOCKS)
def test_each_block_is_there_and_is_valid_bash(name: str) -> None:
    script = onboarding_script(name)
    bash = shutil.which("bash") or "/bin/bash"
    checked = subprocess.run(
        [bash, "-n", "-c", script], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stderr
    assert script.strip(), f"the {name} block is empty"


@pytest.mark.parametrize("name", BLOCKS)
def test_no_block_puts_a_secret_on_a_command_line_or_prints_one(name: str) -> None:
    script = onboarding_script(name)
    assert not re.search(r"\becho\b|\bprintf\b|set -x", script)
    # The root password is read by bao from its file (`@file`), never expanded into argv.
    assert "MARIADB_ROOT_PASSWORD}" not in script
    assert "$MARIADB_ROOT_PASSWORD " not in script
    assert "$BAO_TOKEN" not in script


def test_a_missing_block_is_named() -> None:
    with pytest.raises(ValueError, match="onboarding:nothing"):
        onboarding_script("nothing")
