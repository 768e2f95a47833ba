"""The OpenBao stand-in's clock: wall time that may run faster than real time.

Owns the one notion of "now" that token and lease TTLs are measured against, so a test can watch a
48 h lease end in a second or two. Must never go backwards, and never be read from anywhere else in
the stand-in (a second clock would let a lease outlive its TTL).
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime


class ScaledClock:
    """Wall-clock seconds that advance `time_scale` times faster than real time.

    The clock starts at the real wall time and then runs on the monotonic clock, so timestamps
    look real and TTL arithmetic is immune to wall-clock steps.
    """

    def __init__(self, time_scale: float = 1.0) -> None:
        """Start the clock.

        Args:
            time_scale: How many simulated seconds pass per real second; must be positive.

        Raises:
            ValueError: The scale is not positive.
        """
        if time_scale <= 0:
            raise ValueError("time_scale must be positive")
        self.time_scale = time_scale
        self._wall_start = time.time()
        self._mono_start = time.monotonic()

    def now(self) -> float:
        """Return the simulated Unix time in seconds."""
        return self._wall_start + (time.monotonic() - self._mono_start) * self.time_scale

    def real_seconds(self, simulated_seconds: float) -> float:
        """Convert a simulated duration into the real time it takes to pass."""
        return max(0.0, simulated_seconds / self.time_scale)


def rfc3339(timestamp: float) -> str:
    """Format a Unix time the way OpenBao's JSON does (RFC 3339, UTC, nanoseconds)."""
    moment = datetime.fromtimestamp(timestamp, tz=UTC)
    nanos = round((timestamp - int(timestamp)) * 1e9) % 1_000_000_000
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{nanos:09d}Z"


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h|d)")
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
}


def parse_duration(value: object, field_name: str) -> int:
    """Read a TTL field the way OpenBao does: integer seconds, or a duration string like "72h".

    Args:
        value: The field as it arrived in the request body.
        field_name: The field's name, for the error message.

    Returns:
        Whole seconds.

    Raises:
        ValueError: The value is neither a number of seconds nor a duration string.
    """
    if isinstance(value, bool):
        raise ValueError(f"invalid value for {field_name}")
    if isinstance(value, int | float):
        return int(value)
    text = str(value).strip()
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if (
        text
        and (parts := _DURATION_PART.findall(text))
        and "".join(number + unit for number, unit in parts) == text
    ):
        return int(sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts))
    raise ValueError(f'invalid duration for {field_name}: "{text}"')
