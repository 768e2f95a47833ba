"""Request and reply shapes of the OpenBao stand-in's HTTP API.

Owns the envelope every 200 answer carries, the `{"errors": [...]}` error shape with its status
code, and the random identifiers (base62) the API hands out. Must never put a secret into an error
message: errors travel to clients and to logs.
"""

from __future__ import annotations

import secrets
import string
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

BASE62 = string.ascii_letters + string.digits

JSON = dict[str, Any]


def base62(length: int) -> str:
    """Return a random base62 string, as OpenBao's lease and token suffixes are."""
    return "".join(secrets.choice(BASE62) for _ in range(length))


class ApiError(Exception):
    """An answer with an error status and OpenBao's `errors` list."""

    def __init__(self, status: int, *errors: str) -> None:
        """Build the error.

        Args:
            status: The HTTP status.
            *errors: The messages of the `errors` list (none for a bare 404).
        """
        super().__init__("; ".join(errors) or str(status))
        self.status = status
        self.errors = list(errors)


def bad_request(message: str) -> ApiError:
    """Return the 400 OpenBao answers for a `logical.ErrorResponse`."""
    return ApiError(400, message)


def permission_denied() -> ApiError:
    """Return OpenBao's 403."""
    return ApiError(403, "permission denied")


def not_found() -> ApiError:
    """Return the 404 with an empty `errors` list that an absent read gets."""
    return ApiError(404)


def unsupported_path(path: str) -> ApiError:
    """Return the 404 for a path no handler serves."""
    return ApiError(404, f'no handler for route "{path}". route entry not found.')


@dataclass(frozen=True)
class Request:
    """One API request after the HTTP layer has decoded it.

    Attributes:
        operation: read, list, create, update or delete (create vs update is settled later).
        path: The path after `/v1/`, without a trailing slash.
        data: The JSON body merged with the query parameters.
        token: The client token, empty when none was sent.
    """

    operation: str
    path: str
    data: Mapping[str, Any]
    token: str


@dataclass
class Reply:
    """What a handler answers: 204 when `body` is None, else 200 with that JSON.

    Attributes:
        data: The `data` member of the envelope.
        auth: The `auth` member (logins).
        lease_id: The lease of a dynamic secret.
        lease_duration: Its TTL in seconds.
        renewable: Whether the lease can be renewed.
        warnings: Warnings to pass along.
        raw: A body to send as is, without the envelope (sys/health, sys/mounts).
        status: The HTTP status of a raw body.
    """

    data: JSON | None = None
    auth: JSON | None = None
    lease_id: str = ""
    lease_duration: int = 0
    renewable: bool = False
    warnings: list[str] | None = None
    raw: JSON | None = None
    status: int = 200
    empty: bool = field(default=False)

    @classmethod
    def no_content(cls) -> Reply:
        """Return the reply of a write that answers nothing (HTTP 204)."""
        return cls(empty=True, status=204)

    def body(self) -> JSON | None:
        """Return the JSON body to send, or None for 204."""
        if self.empty:
            return None
        if self.raw is not None:
            return self.raw
        return {
            "request_id": str(uuid.uuid4()),
            "lease_id": self.lease_id,
            "renewable": self.renewable,
            "lease_duration": self.lease_duration,
            "data": self.data,
            "wrap_info": None,
            "warnings": self.warnings,
            "auth": self.auth,
        }
