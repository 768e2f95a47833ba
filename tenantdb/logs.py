"""JSON-lines logging for every tenantdb process.

One JSON object per line: time, level, logger, message, and the order key and fields a caller
passes with ``extra={"order": ..., "fields": {...}}``. Callers never pass a password, a token or
an object body; as a last guard, field names that look like credentials are masked, and a
message's PEM private keys and JSON Web Tokens are replaced. Libraries that log whole response
bodies at DEBUG (the kubernetes client: every Secret it reads) are held at INFO whatever the
process's level, so ``--loglevel=DEBUG`` never writes a delivered password or a key.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime
from typing import Any

_MASKED = ("password", "token", "secret", "jwt", "key")
# Loggers that write response bodies at DEBUG; they never go below INFO.
BODY_LOGGERS = ("kubernetes.client.rest",)
_PRIVATE_KEY = re.compile(
    r"-----BEGIN ([A-Z ]*)PRIVATE KEY-----.*?-----END \1PRIVATE KEY-----", re.DOTALL
)
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")
# OpenBao's service, batch and recovery tokens (`s.`, `b.`, `r.`), and Vault's (`hvs.`, `hvb.`,
# `hvr.`), which OpenBao still accepts: a prefix and a long body, base62 or URL-safe base64
# (`-` and `_` too), taken whole so no part of one is left behind.
_OPENBAO_TOKEN = re.compile(r"\b(?:hv)?[sbr]\.[A-Za-z0-9_-]{20,}")
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JSONFormatter(logging.Formatter):
    """Format a record as one JSON object."""

    def format(self, record: logging.LogRecord) -> str:
        """Render the record, its order key and its fields."""
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        order = getattr(record, "order", None)
        if order:
            line["order"] = str(order)
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            line["fields"] = {k: _mask(k, v) for k, v in fields.items()}
        for name, value in vars(record).items():
            if name not in _STANDARD and name not in ("order", "fields") and name not in line:
                line[name] = _mask(name, value)
        if record.exc_info and record.exc_info[0] is not None:
            line["error"] = record.exc_info[0].__name__
        return json.dumps(line, default=str)


def redact(text: str) -> str:
    """A message with PEM private keys, JSON Web Tokens and OpenBao tokens replaced."""
    text = _PRIVATE_KEY.sub("<private key>", text)
    return _OPENBAO_TOKEN.sub("<token>", _JWT.sub("<token>", text))


def _mask(name: str, value: Any) -> Any:
    lowered = name.lower()
    if any(word in lowered for word in _MASKED) and lowered != "username":
        return "***"
    return value


def configure_logging(level: int | str = logging.INFO) -> None:
    """Send every logger's records to standard error as JSON lines."""
    handler = logging.StreamHandler()
    handler.setFormatter(JSONFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in BODY_LOGGERS:
        logging.getLogger(name).setLevel(max(logging.INFO, root.getEffectiveLevel()))
