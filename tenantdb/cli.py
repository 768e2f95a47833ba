"""The ``tenantdb`` command: run a process role, or act on one order from a shell.

Exit codes: 0 success; 1 the command ran but the outcome is not what was asked for; 2 bad input
(a malformed key, an unknown option), always with one line on standard error; 3 a service tenantdb
needs (Redis, the broker) could not be reached.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tenantdb.adapters.workqueue import WorkQueue

EXIT_OK = 0
EXIT_NOT_READY = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"tenantdb: {message}\n")
        raise SystemExit(EXIT_USAGE)


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tenantdb", description="Tenant databases on Kubernetes.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    worker = sub.add_parser(
        "worker",
        help="run a Celery worker; further options go to `celery worker`",
        description="Run a Celery worker with tenantdb's app. Options after `--` go to celery.",
    )
    worker.add_argument("celery_args", nargs=argparse.REMAINDER)

    sub.add_parser("beat", help="run the due-set sweep")

    reconcile = sub.add_parser("reconcile", help="enqueue a reconcile of one order")
    reconcile.add_argument("key", help="KIND/NAMESPACE/NAME or KIND/NAMESPACE/NAME@CLUSTER")
    reconcile.add_argument(
        "--force", action="store_true", help="publish even when a pass is already pending"
    )

    devstack = sub.add_parser(
        "devstack", help="run the development stand-ins (not part of a production image)"
    )
    devstack.add_argument("devstack_args", nargs=argparse.REMAINDER)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tenantdb`` command and return its exit code."""
    args = _build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    if args.command == "worker":
        return _worker(args.celery_args)
    if args.command == "beat":
        return _beat()
    if args.command == "reconcile":
        return _reconcile(args.key, force=args.force)
    return _devstack(args.devstack_args)


def _worker(celery_args: list[str]) -> int:
    extra = celery_args[1:] if celery_args[:1] == ["--"] else celery_args
    argv = [sys.executable, "-m", "celery", "-A", "workers.app", "worker", *extra]
    os.execv(sys.executable, argv)  # noqa: S606 - replaces this process with the worker


def _beat() -> int:
    import redis

    from tenantdb.adapters.leader import LeaderLease
    from tenantdb.settings import load_settings
    from workers.beat import run_beat

    settings = load_settings()
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    lease = LeaderLease(
        redis.Redis.from_url(settings.redis_url), "beat", prefix=settings.key_prefix
    )
    campaign = threading.Thread(target=lease.run, args=(stop,), name="beat-lease", daemon=True)
    campaign.start()
    run_beat(
        _workqueue(),
        stop,
        interval=settings.beat_interval_seconds,
        refresh_cycle=settings.refresh_cycle_seconds,
        is_active=lambda: lease.is_leader,
    )
    campaign.join(timeout=5)
    return EXIT_OK


def _reconcile(text: str, *, force: bool) -> int:
    from redis import RedisError

    from tenantdb.core.keys import InvalidOrderKeyError, OrderKey

    try:
        key = OrderKey.parse(text)
    except InvalidOrderKeyError as exc:
        sys.stderr.write(f"tenantdb: {exc}\n")
        return EXIT_USAGE
    try:
        published = _workqueue().enqueue(key, force=force)
    except (RedisError, OSError) as exc:
        sys.stderr.write(f"tenantdb: cannot reach Redis or the broker: {type(exc).__name__}\n")
        return EXIT_UNAVAILABLE
    print(f"{key}: {'enqueued' if published else 'already pending (use --force to publish again)'}")
    return EXIT_OK


def _workqueue() -> WorkQueue:
    import redis

    from tenantdb.adapters.celeryapp import build_celery_app, make_publisher
    from tenantdb.adapters.workqueue import WorkQueue
    from tenantdb.settings import load_settings

    settings = load_settings()
    return WorkQueue(
        redis.Redis.from_url(settings.redis_url),
        make_publisher(build_celery_app(settings)),
        prefix=settings.key_prefix,
        lock_ttl=settings.lock_ttl_seconds,
        pending_ttl=settings.pending_ttl_seconds,
    )


def _devstack(devstack_args: list[str]) -> int:
    # The devstack is a separate program that production images do not ship; the command only
    # hands over to it, so production code never imports it.
    if importlib.util.find_spec("devstack") is None:
        sys.stderr.write("tenantdb: the devstack is not installed with this tenantdb\n")
        return EXIT_USAGE
    extra = devstack_args[1:] if devstack_args[:1] == ["--"] else devstack_args
    os.execv(sys.executable, [sys.executable, "-m", "devstack", *extra])  # noqa: S606


if __name__ == "__main__":
    raise SystemExit(main())
