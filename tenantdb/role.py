"""What each long-running role does before it runs: its settings, its log level, a stop on
SIGTERM or SIGINT.

``tenantdb watcher`` and ``tenantdb beat`` check the settings, then replace themselves with the
role's own process (``python -m watcher``, ``python -m workers.beat``), as ``tenantdb worker``
does with Celery's: the command line never imports a role.
"""

from __future__ import annotations

import signal
import threading

from tenantdb.logs import configure_logging
from tenantdb.settings import Settings, load_settings


def stop_on_signals() -> threading.Event:
    """An event set by the first SIGTERM or SIGINT: the role winds down when it is set."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    return stop


def prepare() -> tuple[Settings, threading.Event]:
    """The role's settings, with logging set to their level, and its stop event."""
    settings = load_settings()
    configure_logging(settings.log_level)
    return settings, stop_on_signals()
