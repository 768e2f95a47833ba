"""Rewrite the note a pass left for its steps, as someone who could write to Redis and seal what
they wrote would: the unit passes keep the note as text on their runtime, as Redis would."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol

Tamper = Callable[[dict[str, Any]], None]
"""A change made to the decoded note, in place."""


class HoldsNote(Protocol):
    """A unit pass's runtime: the note the entry left, as text."""

    note: str | None


def rewrite_note(runtime: HoldsNote, tamper: Tamper) -> None:
    """Decode the note the entry left, change it, and put it back for the steps to load."""
    assert runtime.note is not None, "the entry left no note"
    note = json.loads(runtime.note)
    tamper(note)
    runtime.note = json.dumps(note)
