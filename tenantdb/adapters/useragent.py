"""The User-Agent tenantdb sends to every API server and to OpenBao.

A real API server's audit log and OpenBao's request log show it, so an operator can tell
tenantdb's requests from everyone else's (kubectl, other controllers) without knowing its token.
"""

from __future__ import annotations

from importlib import metadata


def _version() -> str:
    try:
        return metadata.version("tenantdb")
    except metadata.PackageNotFoundError:
        return "0+unknown"


USER_AGENT = f"tenantdb/{_version()}"
