"""The one mark an error carries when its message is safe to show.

A log line, a status message or a task result may quote an error only when tenantdb wrote its
message itself and keeps it free of credentials; every such error derives from ``SafeError``.
Any other exception (a validation error of a Secret, say) may quote what it failed on, so only
its type is shown.
"""

from __future__ import annotations


class SafeError(Exception):
    """An error whose message tenantdb wrote and keeps free of credentials."""
