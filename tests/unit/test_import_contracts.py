"""Every module of the layers is named in the import contracts: one kind's, or generic.

`make lint` checks the contracts; this keeps them complete, so a new module cannot slip past
them by being named in none.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LAYERS = ("tenantdb/core", "tenantdb/adapters", "tasks", "watcher")
REGISTRY = {"tenantdb.core.served"}
"""The one place that names every kind (``KINDS``: identity, CRD, modules, access), by design."""


def _contracts() -> dict[str, dict[str, list[str]]]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    found = config["tool"]["importlinter"]["contracts"]
    return {contract["name"]: contract for contract in found}


def _modules() -> set[str]:
    found = set()
    for layer in LAYERS:
        for path in (REPO / layer).iterdir():
            if path.name.startswith("_"):
                continue
            if path.suffix == ".py" or (path / "__init__.py").exists():
                found.add(f"{layer}/{path.stem}".replace("/", "."))
    return found


def test_every_module_is_one_kinds_or_generic() -> None:
    contracts = _contracts()
    mysql = set(
        contracts["MysqlDatabase never reaches MariaDBDatabase, in any layer"]["source_modules"]
    )
    mariadb = set(
        contracts["MariaDBDatabase never reaches MysqlDatabase, in any layer"]["source_modules"]
    )
    generic = set(contracts["Generic modules never reach a kind"]["source_modules"])
    assert not mysql & mariadb
    assert not generic & (mysql | mariadb)
    unnamed = _modules() - mysql - mariadb - generic - REGISTRY
    assert not unnamed, f"name these in the import contracts of pyproject.toml: {sorted(unnamed)}"


def test_the_kinds_forbid_each_other_and_generic_modules_forbid_both() -> None:
    contracts = _contracts()
    mysql = contracts["MysqlDatabase never reaches MariaDBDatabase, in any layer"]
    mariadb = contracts["MariaDBDatabase never reaches MysqlDatabase, in any layer"]
    generic = contracts["Generic modules never reach a kind"]
    assert set(mysql["forbidden_modules"]) == set(mariadb["source_modules"])
    assert set(mariadb["forbidden_modules"]) == set(mysql["source_modules"])
    assert set(generic["forbidden_modules"]) == set(mysql["source_modules"]) | set(
        mariadb["source_modules"]
    )


def test_the_devstack_and_the_product_never_import_each_other() -> None:
    # Two distributions in one repository: the packages tenantdb's wheel ships on one side, the
    # devstack (devstack/pyproject.toml) on the other; a new product package joins both lists.
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    shipped = {
        name.rstrip("*") for name in config["tool"]["setuptools"]["packages"]["find"]["include"]
    }
    contracts = _contracts()
    devstack = contracts["The devstack is a distribution of its own: it never imports tenantdb"]
    product = contracts["Production code never imports the devstack"]
    assert devstack["source_modules"] == ["devstack"]
    assert set(devstack["forbidden_modules"]) == shipped
    assert set(product["source_modules"]) == shipped
    assert product["forbidden_modules"] == ["devstack"]
