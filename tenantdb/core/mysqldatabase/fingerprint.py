"""status.lastAppliedHash: what an apply depended on, so an unchanged order issues no SQL.

SHA-256 over the spec (as JSON with sorted keys), the group's active site, the owner Secret's
UID and resourceVersion, the group's UID and, when the group finished an in-place restore, the
token it used, each on a line of its own; lowercase hex, the first 16 characters. The Secret's
bytes are never digested: status is readable by callers, and a digest of a password would let
them check guesses offline. A change of the Secret's content moves its resourceVersion anyway.
Pure.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

HASH_LENGTH = 16


@dataclass(frozen=True, slots=True)
class AppliedInputs:
    """Everything an apply of the order depended on; never a credential."""

    spec: Mapping[str, Any]
    active_site: str
    secret_uid: str
    secret_resource_version: str
    group_uid: str
    restore_token: str | None = None


def compute_last_applied_hash(inputs: AppliedInputs) -> str:
    """The 16-hex-character fingerprint of one apply's inputs."""
    spec = json.dumps(inputs.spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    lines = [
        f"spec={spec}",
        f"activeSite={inputs.active_site}",
        f"secret={inputs.secret_uid}/{inputs.secret_resource_version}",
        f"group={inputs.group_uid}",
    ]
    if inputs.restore_token is not None:
        lines.append(f"restore={inputs.restore_token}")
    text = "".join(f"{line}\n" for line in lines)
    return hashlib.sha256(text.encode()).hexdigest()[:HASH_LENGTH]


def is_up_to_date(
    *,
    phase: str,
    last_applied_hash: str,
    observed_generation: int | None,
    generation: int,
    current: str,
) -> bool:
    """Whether the order may skip its apply: Ready, at this generation, with the same inputs."""
    return phase == "Ready" and last_applied_hash == current and observed_generation == generation
