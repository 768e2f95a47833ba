"""The watcher: list and watch every watched kind on every engaged cluster, enqueue order keys.

One replica leads (a Redis lease) and runs a list-then-watch loop per (cluster, kind); every event
goes through the core mappers and update predicates to the order keys it concerns, and each key
goes to the work queue's deduplicating ``enqueue``. ``routes`` says what is watched where and how
it maps, ``loop`` is the list-then-watch loop, ``index`` the little state the mappers need, and
``process`` the supervisor and ``run_watcher``, which ``tenantdb watcher`` calls.

The watcher never decides anything about an order and never talks to OpenBao or SQL; it never
imports the workers or the tasks, and never logs an object's body.
"""

from watcher.process import Watcher, WatcherConfig, run_watcher

__all__ = ["Watcher", "WatcherConfig", "run_watcher"]
