"""The worker app for work-queue tests: tenantdb's own app plus recording passes.

``probe`` is a pass that runs in its entry task; ``probechain`` hands its pass to a chain of two
steps run by the product's own step runner, so the tests can watch the chain's fence.

Worker processes started by the tests load it with ``-A tests.integration.workqueue_app``. The
pass records in Redis, under the test's key prefix, when it starts (with its process id, and in
the order passes of every key started), whether
another pass of the same key was running, and when it completes; it can be held at its start until
the test lets it go, so a test can act while a pass is running.
"""

from __future__ import annotations

import os
from functools import lru_cache

import redis

from tasks.chain import Handoff, StepContext, StepResult, StepTask, run_step
from tasks.reconcile import PassContext, PassOutcome, register_pass
from tasks.runtime import AnyTask
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
        "fail": f"{base}fail:{key}",
        "order": f"{base}order",
    }


def probe_pass(ctx: PassContext) -> PassOutcome:
    """Record the pass; wait for the test's go when it asked to hold passes, then fail as often
    as it asked."""
    settings = load_settings()
    client = _redis()
    keys = probe_keys(settings.key_prefix, str(ctx.key))
    lease_ms = int(settings.lock_ttl_seconds * 1000)
    if not client.set(keys["running"], os.getpid(), nx=True, px=lease_ms):
        client.incr(keys["overlaps"])
    client.rpush(keys["started"], os.getpid())
    client.rpush(keys["order"], str(ctx.key))
    if client.get(keys["hold"]):
        client.blpop([keys["go"]], timeout=HOLD_SECONDS)
    if client.get(keys["fail"]) and client.decr(keys["fail"]) >= 0:
        client.delete(keys["running"])
        raise RuntimeError("the probe fails as the test asked")
    ctx.guard.check()
    client.incr(keys["completed"])
    client.delete(keys["running"])
    return PassOutcome("Probed")


register_pass("probe", probe_pass)


# -- a kind whose pass goes on in a two-step chain -------------------------------------------------

CHAIN_STEP = "tests.probechain.step"


def chain_keys(prefix: str) -> dict[str, str]:
    """The Redis keys the probe chain records under, for every order of the test."""
    base = f"{prefix}probechain:"
    names = ("entries", "steps", "writes:1", "writes:2", "done", "args", "hold", "go")
    return {name: f"{base}{name}" for name in names}


def _two_steps(second: str) -> PassOutcome:
    """Hand the pass to probe step 1, then to the step named ``second``."""
    return PassOutcome("Chained", handoff=Handoff((CHAIN_STEP, second)))


def probechain_pass(ctx: PassContext) -> PassOutcome:
    """Count the pass and hand it to the two probe steps, as a kind's provision chain does."""
    _redis().incr(chain_keys(load_settings().key_prefix)["entries"])
    return _two_steps(CHAIN_STEP)


@app.task(name=CHAIN_STEP, bind=True, max_retries=None, base=StepTask)
def probe_step(self: AnyTask, key: str, name: str, step: int) -> dict[str, str]:
    """Record the step and its write; step 1 waits for the test's go while it is asked to hold."""

    def body(ctx: StepContext) -> StepResult:
        client = _redis()
        keys = chain_keys(load_settings().key_prefix)
        client.rpush(keys["steps"], f"{step}:{key}")
        client.hset(keys["args"], mapping={"key": key, "name": name})
        if step == 1 and client.get(keys["hold"]):
            client.blpop([keys["go"]], timeout=HOLD_SECONDS)
        ctx.guard.check()
        client.incr(keys[f"writes:{step}"])
        if step == 2:
            client.sadd(keys["done"], key)
        return StepResult(f"Step{step}", done=step == 2)

    return run_step(self, key, name, step, body)


register_pass("probechain", probechain_pass)


# -- a chain whose second step runs on another queue ----------------------------------------------

DELIVERY_STEP = "tenantdb.probehandover.delivery.step"
"""Routed by its name to the delivery queue, as a kind's delivery steps are."""


def probehandover_pass(ctx: PassContext) -> PassOutcome:
    """Hand the pass to a step on the reconcile queue that hands over to one on delivery."""
    return _two_steps(DELIVERY_STEP)


@app.task(name=DELIVERY_STEP, bind=True, max_retries=None, base=StepTask)
def delivery_step(self: AnyTask, key: str, name: str, step: int) -> dict[str, str]:
    """The last step: record that it ran and end the pass."""

    def body(ctx: StepContext) -> StepResult:
        ctx.guard.check()
        _redis().sadd(chain_keys(load_settings().key_prefix)["done"], key)
        return StepResult("Delivered", done=True)

    return run_step(self, key, name, step, body)


register_pass("probehandover", probehandover_pass)
