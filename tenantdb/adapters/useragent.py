"""The User-Agent tenantdb sends to every API server and to OpenBao.

A real API server's audit log and OpenBao's request log show it, so an operator can tell
tenantdb's requests from everyone else's (kubectl, other controllers) without knowing its token.
A request a pass makes names the pass and its order as well, e.g.
``tenantdb/1.2.0 (pass 3f2a9c01b7e4; mariadbdatabase/edge-1/tenant-a/orders)``: the audit log
then shows which pass of which order wrote what, and that no two passes of one order wrote at once.
The pass is named by its public name (a digest of its lease token), never the token.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from importlib import metadata


def _version() -> str:
    try:
        return metadata.version("tenantdb")
    except metadata.PackageNotFoundError:
        return "0+unknown"


USER_AGENT = f"tenantdb/{_version()}"

_CURRENT: ContextVar[str] = ContextVar("tenantdb_user_agent", default=USER_AGENT)


def user_agent() -> str:
    """The User-Agent of a request made now: tenantdb's, with the pass being served if any."""
    return _CURRENT.get()


@contextmanager
def serving(order: str, name: str) -> Iterator[None]:
    """Name the pass ``name`` of ``order`` in the User-Agent of every request made meanwhile."""
    reset = _CURRENT.set(f"{USER_AGENT} (pass {name}; {order})")
    try:
        yield
    finally:
        _CURRENT.reset(reset)
