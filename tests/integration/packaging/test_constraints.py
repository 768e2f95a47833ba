"""constraints.txt, the lock every install goes through: it pins each dependency pyproject.toml
declares (the runtime ones and the dev extra), and each the devstack's devstack/pyproject.toml
declares (its runtime ones and its test extra), to one version that the declared range allows,
so a lock that drifted from either pyproject fails here rather than in an image build."""

from __future__ import annotations

import ast
import importlib.metadata
import sys
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
    lines: list[str] = []
    for pyproject, extra in (("pyproject.toml", "dev"), ("devstack/pyproject.toml", "test")):
        project = tomllib.loads((REPO_ROOT / pyproject).read_text())["project"]
        lines += list(project["dependencies"]) + list(project["optional-dependencies"][extra])
    return [Requirement(line) for line in lines]


def test_every_declared_dependency_is_pinned_inside_its_range() -> None:
    pins = _pins()
    for requirement in _declared():
        pinned = pins.get(canonicalize_name(requirement.name))
        assert pinned is not None, f"{requirement.name} is declared but not in constraints.txt"
        assert requirement.specifier.contains(pinned, prereleases=True), (
            f"constraints.txt pins {requirement.name}=={pinned}, outside {requirement}"
        )


def test_the_packages_themselves_are_not_pinned() -> None:
    assert "tenantdb" not in _pins()
    assert "tenantdb-devstack" not in _pins()


PRODUCT = ("tenantdb", "tasks", "workers", "watcher")
"""The packages an image installs; devstack, bench and tests are not among them."""


def _imported_modules() -> dict[str, str]:
    """Every top-level module the product imports, to a file importing it."""
    found: dict[str, str] = {}
    for package in PRODUCT:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    found.setdefault(name.partition(".")[0], str(path.relative_to(REPO_ROOT)))
    return found


def test_every_third_party_module_the_product_imports_is_a_declared_dependency() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    declared = {canonicalize_name(Requirement(line).name) for line in project["dependencies"]}
    distributions = importlib.metadata.packages_distributions()
    undeclared = []
    for module, where in sorted(_imported_modules().items()):
        if module in sys.stdlib_module_names or module in PRODUCT or module == "__future__":
            continue
        owners = {canonicalize_name(d) for d in distributions.get(module, ())}
        if not owners & declared:
            undeclared.append(f"{module} (imported in {where}, from {sorted(owners) or '?'})")
    assert undeclared == []
