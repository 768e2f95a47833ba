"""The worker app for work-queue tests: tenantdb's own app plus a recording pass for ``probe``.

Worker processes started by the tests load it with ``-A tests.integration.workqueue_app``. The
pass records in Redis, under the test's key prefix, when it starts (with its process id), whether
another pass of the same key was running, and when it completes; it can be held at its start until
the test lets it go, so a test can act while a pass is running.
"""

from __future__ import annotations

import os
from functools import lru_cache

import redis

from tasks.reconcile import PassContext, PassOutcome, register_pass
from tenantdb.settings import load_settings
from workers.app import app

__all__ = ["app"]

HOLD_SECONDS = 60


@lru_cache(maxsize=1)
def _redis() -> redis.Redis:
    return redis.Redis.from_url(load_settings().redis_url)


def probe_keys(prefix: str, key: str) -> dict[str, str]:
    """The Redis keys the probe pass records under, for one order key."""
    base = f"{prefix}probe:"
    return {
        "running": f"{base}running:{key}",
        "started": f"{base}started:{key}",
        "completed": f"{base}completed:{key}",
        "overlaps": f"{base}overlaps",
        "hold": f"{base}hold",
        "go": f"{base}go",
    }


def probe_pass(ctx: PassContext) -> PassOutcome:
    """Record the pass; wait for the test's go when it asked to hold passes."""
    settings = load_settings()
    client = _redis()
    keys = probe_keys(settings.key_prefix, str(ctx.key))
    lease_ms = int(settings.lock_ttl_seconds * 1000)
    if not client.set(keys["running"], os.getpid(), nx=True, px=lease_ms):
        client.incr(keys["overlaps"])
    client.rpush(keys["started"], os.getpid())
    if client.get(keys["hold"]):
        client.blpop([keys["go"]], timeout=HOLD_SECONDS)
    ctx.guard.check()
    client.incr(keys["completed"])
    client.delete(keys["running"])
    return PassOutcome("Probed")


register_pass("probe", probe_pass)
