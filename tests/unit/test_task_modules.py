"""Each kind's presence in ``tasks/`` conducts and declares, and stays small enough to read.

A kind's task module reads through its I/O, calls a pure decision of its core and carries out
what that returns; decisions on observed state belong in core, where they are table-tested, and
I/O sequences in the kind's adapter. The size and the branches of the module say whether that
still holds.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 300
MAX_BRANCHES = 10

KIND_TASK_MODULES = [
    pytest.param(("tasks/mariadbdatabase.py",), id="MariaDBDatabase"),
    pytest.param(("tasks/mysqldatabase.py",), id="MysqlDatabase"),
]
"""Each kind's modules in ``tasks/``: all of them count together, however the kind splits them."""


def count_branches(source: str) -> int:
    """The decisions a module makes: its ``if`` statements, conditional expressions and
    ``match`` cases."""
    tree = ast.parse(source)
    return sum(isinstance(n, ast.If | ast.IfExp | ast.match_case) for n in ast.walk(tree))


@pytest.mark.parametrize(
    ("source", "branches"),
    [
        pytest.param("x = 1\n", 0, id="none"),
        pytest.param("if a:\n    pass\nelif b:\n    pass\n", 2, id="if-and-elif"),
        pytest.param("y = 1 if a else 2\n", 1, id="conditional-expression"),
        pytest.param(
            "match a:\n    case 1:\n        pass\n    case _:\n        pass\n", 2, id="match"
        ),
        pytest.param("for x in y:\n    pass\ntry:\n    pass\nexcept E:\n    pass\n", 0, id="loops"),
    ],
)
def test_the_branches_counted_are_the_decisions(source: str, branches: int) -> None:
    assert count_branches(source) == branches


@pytest.mark.parametrize("paths", KIND_TASK_MODULES)
def test_a_kinds_task_modules_only_conduct(paths: tuple[str, ...]) -> None:
    sources = [(ROOT / path).read_text(encoding="utf-8") for path in paths]
    lines = sum(len(source.splitlines()) for source in sources)
    branches = sum(count_branches(source) for source in sources)
    assert lines <= MAX_LINES, f"{paths}: {lines} lines; move decisions to core, I/O to adapters"
    assert branches <= MAX_BRANCHES, f"{paths}: {branches} branches; move decisions to core"
