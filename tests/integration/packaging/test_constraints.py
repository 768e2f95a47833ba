"""constraints.txt, the lock every install goes through: it pins each dependency pyproject.toml
declares (the runtime ones and the dev extra) to one version that the declared range allows, so a
lock that drifted from pyproject fails here rather than in an image build."""

from __future__ import annotations

import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.integration.packaging.conftest import REPO_ROOT


def _pins() -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for raw in (REPO_ROOT / "constraints.txt").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, version = line.partition("==")
        assert sep, f"constraints.txt line is not an exact pin: {line!r}"
        key = canonicalize_name(name)
        assert key not in pins, f"{name} is pinned twice"
        pins[key] = Version(version)
    return pins


def _declared() -> list[Requirement]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    lines = list(project["dependencies"]) + list(project["optional-dependencies"]["dev"])
    return [Requirement(line) for line in lines]


def test_every_declared_dependency_is_pinned_inside_its_range() -> None:
    pins = _pins()
    for requirement in _declared():
        pinned = pins.get(canonicalize_name(requirement.name))
        assert pinned is not None, f"{requirement.name} is declared but not in constraints.txt"
        assert requirement.specifier.contains(pinned, prereleases=True), (
            f"constraints.txt pins {requirement.name}=={pinned}, outside {requirement}"
        )


def test_the_package_itself_is_not_pinned() -> None:
    assert "tenantdb" not in _pins()
