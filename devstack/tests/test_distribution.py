"""The devstack's distribution (devstack/pyproject.toml) ships every package of the devstack and
none of its tests, and declares every third-party module the devstack and its tests import."""

from __future__ import annotations

import ast
import importlib.metadata
import sys
import tomllib
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

HERE = Path(__file__).resolve().parents[1]
"""The devstack's directory: the distribution's root and the import package `devstack` alike."""
TESTS = HERE / "tests"


def _project() -> dict[str, Any]:
    return tomllib.loads((HERE / "pyproject.toml").read_text())


def _is_test(path: Path) -> bool:
    return path == TESTS or TESTS in path.parents


def _declared(*extras: str) -> set[str]:
    project = _project()["project"]
    lines = list(project["dependencies"])
    for extra in extras:
        lines += project["optional-dependencies"][extra]
    return {canonicalize_name(Requirement(line).name) for line in lines}


def _imported(paths: list[Path]) -> dict[str, str]:
    """Every top-level module the files import, to a file importing it."""
    found: dict[str, str] = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.partition(".")[0], str(path.relative_to(HERE)))
    return found


def _undeclared(paths: list[Path], declared: set[str]) -> list[str]:
    distributions = importlib.metadata.packages_distributions()
    undeclared = []
    for module, where in sorted(_imported(paths).items()):
        if module in sys.stdlib_module_names or module in {"devstack", "__future__"}:
            continue
        owners = {canonicalize_name(d) for d in distributions.get(module, ())}
        if not owners & declared:
            undeclared.append(f"{module} (imported in {where}, from {sorted(owners) or '?'})")
    return undeclared


def test_every_package_of_the_devstack_ships_and_its_tests_do_not() -> None:
    on_disk = {
        ".".join(("devstack", *init.parent.relative_to(HERE).parts))
        for init in HERE.rglob("__init__.py")
        if not _is_test(init.parent)
    }
    assert set(_project()["tool"]["setuptools"]["packages"]) == on_disk


def test_every_third_party_module_the_devstack_imports_is_a_dependency() -> None:
    sources = [path for path in sorted(HERE.rglob("*.py")) if not _is_test(path)]
    assert _undeclared(sources, _declared()) == []


def test_every_third_party_module_its_tests_import_is_in_the_test_extra() -> None:
    assert _undeclared(sorted(TESTS.rglob("*.py")), _declared("test")) == []
