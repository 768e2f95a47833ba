"""The devstack's env file reads back as a shell reads it: quoted values lose their quotes."""

from __future__ import annotations

import shlex
from pathlib import Path

from devstack.platform import read_env


def test_values_a_shell_would_unquote_read_back_as_written(tmp_path: Path) -> None:
    values = {
        "PLAIN": "/var/lib/devstack/kubeconfig",
        "GLOB": "bloodraven/*",
        "SPACED": "a b",
        "NONE": "",
    }
    env = tmp_path / "env"
    env.write_text("# devstack\n" + "".join(f"{k}={shlex.quote(v)}\n" for k, v in values.items()))
    assert read_env(env) == values
