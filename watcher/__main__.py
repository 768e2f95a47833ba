"""``python -m watcher``: the watcher role, as ``tenantdb watcher`` starts it.

The watcher's entry point names the route module of every served kind (``KINDS``), so the
generic modules of the watcher name none.
"""

from __future__ import annotations

from tenantdb.core.served import route_modules
from tenantdb.role import prepare
from watcher.process import run_watcher

if __name__ == "__main__":
    run_watcher(*prepare(), route_modules=route_modules())
