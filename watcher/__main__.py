"""``python -m watcher``: the watcher role, as ``tenantdb watcher`` starts it."""

from __future__ import annotations

from tenantdb.role import prepare
from watcher.process import run_watcher

if __name__ == "__main__":
    run_watcher(*prepare())
