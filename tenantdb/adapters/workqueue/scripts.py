"""The Lua scripts: one file each, the work queue's in ``lua/`` and the other adapters' in
``tenantdb/adapters/lua/``, loaded by one function.

A script file may start with ``-- uses: NAME[, NAME]``: the shared functions it calls
(``now_ms``: the server's clock in milliseconds; ``lock_or_mark``: take a lock or mark the key
dirty). ``source`` puts each named file before the script, once, in the order they are needed,
so every script Redis runs is one self-contained text. The worker, the watcher, beat, the tests
and the bench all load the scripts through ``source`` (by way of ``WorkQueue``).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

LUA = Path(__file__).with_name("lua")
"""Where the scripts live, one ``NAME.lua`` each."""

ADAPTERS_LUA = Path(__file__).parent.parent / "lua"
"""Where the other adapters' scripts live (the group guard's, the schema index's, the leader
lease's), loaded by ``source`` too."""

_USES = re.compile(r"\A-- uses: ([a-z_, ]+)\n")


def _uses(text: str) -> list[str]:
    found = _USES.match(text)
    return [name.strip() for name in found.group(1).split(",")] if found else []


def _collect(folder: Path, name: str, order: list[str]) -> None:
    for used in _uses((folder / f"{name}.lua").read_text()):
        _collect(folder, used, order)
    if name not in order:
        order.append(name)


@functools.cache
def source(name: str, folder: Path = LUA) -> str:
    """The text Redis runs for script ``name``: the shared functions it uses, then its own.

    Raises:
        FileNotFoundError: there is no ``NAME.lua`` in ``folder`` (or a function it names has
            none).
    """
    order: list[str] = []
    _collect(folder, name, order)
    return "".join((folder / f"{part}.lua").read_text() for part in order)
