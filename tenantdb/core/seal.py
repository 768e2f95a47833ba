"""Seals: what proves that a note tenantdb reads back from Redis was left by one of its workers.

A pass leaves its chain's steps a note in Redis (the observation and plan they act on), and a
converged pass leaves a quiet basis. Whoever can write to that Redis could otherwise write a note
of their own and have a step run it. So every note carries an HMAC-SHA256 seal over the note and
what it is bound to (its purpose, the order key, the pass's token, when it expires), made with a
key the workers read from a file (a mounted Secret) and Redis never holds.

The key file holds one key a line (blank lines and ``#`` comments are skipped): the first seals,
every one opens. Keys rotate without downtime in three rollouts: add the new key as the second
line, then move it first, then drop the old one. A seal names its key by a short id (the first
four bytes of the key's SHA-256), so opening tries one key, not all.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

MIN_KEY_BYTES = 32
"""The shortest key a key file may hold (256 bits, the size of the HMAC's hash)."""


class SealKeyError(ValueError):
    """A key file that cannot seal: no key, or a key too short. The message names no key."""


def _key_id(key: bytes) -> str:
    return hashlib.sha256(key).digest()[:4].hex()


def _message(parts: tuple[str, ...]) -> bytes:
    # Each part is length-prefixed, so no two different part lists make the same message.
    return b"".join(f"{len(p.encode())}:".encode() + p.encode() for p in parts)


@dataclass(frozen=True)
class SealKeys:
    """The keys of a key file: the first seals, every one opens."""

    keys: tuple[bytes, ...]

    def __post_init__(self) -> None:
        if not self.keys:
            raise SealKeyError("the note key file holds no key")
        for number, key in enumerate(self.keys, start=1):
            if len(key) < MIN_KEY_BYTES:
                raise SealKeyError(
                    f"note key {number} is {len(key)} bytes; a key is at least {MIN_KEY_BYTES}"
                )

    @classmethod
    def parse(cls, text: str) -> SealKeys:
        """The keys of a key file's text; ``SealKeyError`` when it holds none or a short one."""
        lines = (line.strip() for line in text.splitlines())
        return cls(tuple(line.encode() for line in lines if line and not line.startswith("#")))

    def seal(self, *parts: str) -> str:
        """The seal of ``parts`` under the first key: ``<key id>:<hex HMAC>``."""
        key = self.keys[0]
        mac = hmac.new(key, _message(parts), hashlib.sha256).hexdigest()
        return f"{_key_id(key)}:{mac}"

    def opens(self, seal: str, *parts: str) -> bool:
        """Whether ``seal`` is the seal of ``parts`` under one of the keys."""
        key_id, _, mac = seal.partition(":")
        for key in self.keys:
            if _key_id(key) == key_id:
                expected = hmac.new(key, _message(parts), hashlib.sha256).hexdigest()
                if hmac.compare_digest(expected, mac):
                    return True
        return False
