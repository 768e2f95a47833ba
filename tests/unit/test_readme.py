"""The README's configuration table lists every setting with its real default."""

from __future__ import annotations

from pathlib import Path

import pytest

from tenantdb.settings import Settings

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


@pytest.mark.parametrize("name", sorted(Settings.model_fields))
def test_every_setting_is_documented_with_its_default(name: str) -> None:
    default = Settings.model_fields[name].default
    shown = "(empty)" if default == "" else f"`{default}`"
    assert f"| `TENANTDB_{name.upper()}` | {shown} |" in README
