"""The ``tenantdb`` command: run a process role, or act on one order from a shell.

Exit codes: 0 success (for ``reconcile --wait``: the order is Ready); 1 the command ran but the
outcome is not what was asked for (the order is not Ready, or the wait timed out); 2 bad input
(a malformed key, an unknown option, a refused setting), always with one line on standard
error; 3 a service tenantdb needs (Redis, the broker, a cluster) could not be reached.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from tenantdb.logs import configure_logging

if TYPE_CHECKING:
    from tenantdb.adapters.workqueue import WorkQueue
    from tenantdb.core.keys import OrderKey
    from tenantdb.core.report import OrderReport
    from tenantdb.settings import Settings

EXIT_OK = 0
EXIT_NOT_READY = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3
EXIT_UNREADABLE = 4

EXIT_CODES = """exit codes:
  0  done (for --wait: the order is Ready)
  1  the order is not Ready, or was not found
  2  bad input or settings: one line says which
  3  Redis or the broker cannot be reached
  4  a cluster cannot be read: one line per cluster says why"""


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"tenantdb: {message}\n")
        raise SystemExit(EXIT_USAGE)


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tenantdb",
        description=(
            "Tenant databases on Kubernetes: MariaDBDatabase and MysqlDatabase orders, served by"
            " a watcher, Celery workers and beat; reconcile and status are the operator's shell."
        ),
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"tenantdb {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    worker = sub.add_parser(
        "worker",
        help="run a Celery worker; options after -- go to `celery worker`",
        description="Run a Celery worker with tenantdb's app, e.g. `tenantdb worker -- -c 4`.",
    )
    worker.add_argument("celery_args", nargs=argparse.REMAINDER)
    sub.add_parser("watcher", help="turn cluster events into deduplicated reconciles")
    sub.add_parser("beat", help="sweep the timetables (one active replica)")
    flower = sub.add_parser("flower", help="run Flower on tenantdb's broker, behind basic auth")
    flower.add_argument("--port", type=int, default=5555)
    flower.add_argument("--address", default="0.0.0.0")  # noqa: S104 - a server's bind address
    flower.add_argument(
        "--unauthenticated-local",
        action="store_true",
        help="run without credentials, bound to 127.0.0.1 only",
    )

    reconcile = sub.add_parser(
        "reconcile",
        help="enqueue a reconcile of one order",
        description="Enqueue a pass of one order, deduplicated as the watcher's are.",
        epilog=(
            "examples:\n"
            "  tenantdb reconcile mariadbdatabase/tenant-a/app\n"
            "  tenantdb reconcile mysqldatabase/bloodraven/orders --force --wait 60\n"
            "  tenantdb reconcile mariadbdatabase/tenant-a/app@edge-1 --wait 30\n\n" + EXIT_CODES
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    reconcile.add_argument("key", help="KIND/NAMESPACE/NAME or KIND/NAMESPACE/NAME@CLUSTER")
    reconcile.add_argument(
        "--force", action="store_true", help="publish even when a pass is already pending"
    )
    reconcile.add_argument(
        "--wait",
        type=float,
        metavar="SECONDS",
        help="wait for the pass to finish, print the conditions; exit 0 when Ready, 1 when not",
    )

    status = sub.add_parser(
        "status",
        help="show orders: conditions, last pass, next due time",
        description=(
            "Show each order's Ready state and reason, why it is not Ready, its last pass and"
            " what happens next. The clusters come from TENANTDB_KUBECONFIG, else $KUBECONFIG,"
            " else ~/.kube/config, else the pod's ServiceAccount."
        ),
        epilog=(
            "examples:\n"
            "  tenantdb status\n"
            "  tenantdb status mysqldatabase/bloodraven/orders\n"
            "  tenantdb status --not-ready --namespace tenant-a\n"
            "  tenantdb status --kind mariadbdatabase --cluster edge-1 --json\n\n" + EXIT_CODES
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    status.add_argument("key", nargs="?", help="one order; all orders when left out")
    status.add_argument("--kind", help="only orders of this kind, e.g. mysqldatabase")
    status.add_argument("-n", "--namespace", help="only orders in this namespace")
    status.add_argument(
        "--cluster", help="only orders on this cluster (management for the management cluster)"
    )
    status.add_argument(
        "--not-ready", action="store_true", help="only orders that are not Ready (or unreadable)"
    )
    status.add_argument(
        "--json",
        action="store_true",
        help=f"print one JSON object: schemaVersion {STATUS_SCHEMA_VERSION}, orders, unreadable",
    )

    crds = sub.add_parser(
        "crds",
        help="install or upgrade tenantdb's CRDs (Helm installs them once and never upgrades)",
        description=(
            "Server-side apply the CRDs of every kind this tenantdb serves, as the field manager"
            " tenantdb: run it after an upgrade, before the new pods start."
        ),
        epilog=(
            "examples:\n"
            "  tenantdb crds apply\n"
            "  tenantdb crds apply --dry-run\n"
            "  tenantdb crds apply --cluster edge-1\n\n" + EXIT_CODES
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    crds.add_argument("action", choices=["apply"])
    crds.add_argument(
        "--cluster", default="management", help="the cluster to apply to (a kubeconfig context)"
    )
    crds.add_argument(
        "--dry-run", action="store_true", help="have the API server check them, change nothing"
    )

    demo = sub.add_parser("demo", help="run the whole stack locally with three example orders")
    demo.add_argument(
        "--until-ready",
        action="store_true",
        help="no live table; exit 0 once the orders that should be Ready are",
    )
    demo.add_argument("--timeout", type=float, default=180.0, metavar="SECONDS")
    demo.add_argument("--state-dir", default=".state/demo", help="where the demo keeps its files")

    devstack = sub.add_parser(
        "devstack", help="run the development stand-ins (not part of a production image)"
    )
    devstack.add_argument("devstack_args", nargs=argparse.REMAINDER)
    return parser


_SERVING = {"worker", "watcher", "beat", "flower", "reconcile", "status", "crds"}
"""The commands that run on tenantdb's settings, and log at their level."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tenantdb`` command and return its exit code."""
    args = _build_parser().parse_args(argv)
    configure_logging(logging.INFO)
    if args.command in _SERVING:
        try:
            settings = _settings()
            configure_logging(settings.log_level)
            _check_redis_access(settings)
        except _UsageError as exc:
            sys.stderr.write(f"tenantdb: {exc}\n")
            return EXIT_USAGE
    handlers: dict[str, Callable[[], int]] = {
        "worker": lambda: _worker(args.celery_args),
        "watcher": lambda: _role("watcher"),
        "beat": lambda: _role("workers.beat"),
        "flower": lambda: _flower(args.port, args.address, local=args.unauthenticated_local),
        "reconcile": lambda: _reconcile(args.key, force=args.force, wait=args.wait),
        "status": lambda: _status(
            args.key,
            as_json=args.json,
            filters=(args.kind, args.namespace, args.cluster, args.not_ready),
        ),
        "crds": lambda: _crds(args.cluster, dry_run=args.dry_run),
        "demo": lambda: _demo(
            Path(args.state_dir), until_ready=args.until_ready, timeout=args.timeout
        ),
        "devstack": lambda: _devstack(args.devstack_args),
    }
    try:
        return handlers[args.command]()
    except _UsageError as exc:
        sys.stderr.write(f"tenantdb: {exc}\n")
        return EXIT_USAGE


class _UsageError(Exception):
    """Bad input: one line, exit code 2."""


def _settings() -> Settings:
    from pydantic import ValidationError

    from tenantdb.settings import load_settings

    try:
        return load_settings()
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "settings"
        raise _UsageError(f"invalid setting {where}: {first['msg']}") from None


def _check_redis_access(settings: Settings) -> None:
    """A Redis password file that is set but unusable stops a role before it starts."""
    from tenantdb.adapters.redisclient import RedisAccessError, redis_access

    try:
        redis_access(settings)
    except RedisAccessError as exc:
        raise _UsageError(str(exc)) from None


def _parse_key(text: str) -> OrderKey:
    from tenantdb.core.keys import InvalidOrderKeyError, OrderKey

    try:
        return OrderKey.parse(text)
    except InvalidOrderKeyError as exc:
        raise _UsageError(str(exc)) from None


def _served_kinds(settings: Settings) -> None:
    from tenantdb.ops import load_kinds

    try:
        load_kinds(settings)
    except ImportError as exc:
        raise _UsageError(f"a module of TENANTDB_KIND_MODULES does not import: {exc}") from None


def _served_key(text: str, settings: Settings) -> OrderKey:
    """Parse a key and check its kind is served."""
    from tenantdb.core.kinds import UnknownKindError, identity_for

    key = _parse_key(text)
    _served_kinds(settings)
    try:
        identity_for(key)
    except UnknownKindError as exc:
        raise _UsageError(f"order key {text!r}: {exc.args[0]}") from None
    return key


WORKER_DEFAULTS = ("--without-gossip", "--without-mingle")
"""Celery worker options ``tenantdb worker`` always passes."""


def _worker(celery_args: list[str]) -> int:
    from tenantdb.adapters.notekeys import read_note_keys
    from tenantdb.core.seal import SealKeyError

    settings = _settings()
    try:
        keys = read_note_keys(settings.note_keys_file)
    except SealKeyError as exc:
        raise _UsageError(str(exc)) from None
    if keys is None:
        raise _UsageError(
            "TENANTDB_NOTE_KEYS_FILE is not set: a worker seals the notes it leaves in Redis"
            " with the keys in that file (a mounted Secret; see docs/operations.md)"
        )
    extra = celery_args[1:] if celery_args[:1] == ["--"] else celery_args
    if settings.metrics_port:
        # Prefork children write their samples here; the parent serves them all.
        directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR") or tempfile.mkdtemp(
            prefix="tenantdb-metrics-"
        )
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory, exist_ok=True)
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory
    if not any(a == "-l" or a.startswith(("--loglevel", "-l")) for a in extra):
        extra = [f"--loglevel={settings.log_level}", *extra]
    # Gossip and mingle exchange worker state over the broker for features tenantdb does not use
    # (revokes, clock sync between workers): each worker would only add broker traffic, and after
    # a broker outage gossip failed to restart. Remote control (Flower, `inspect`) stays.
    extra = [*WORKER_DEFAULTS, *(a for a in extra if a not in WORKER_DEFAULTS)]
    argv = [sys.executable, "-m", "celery", "-A", "workers.app", "worker", *extra]
    os.execv(sys.executable, argv)  # noqa: S606 - replaces this process with the worker


def _role(module: str) -> NoReturn:
    # The role runs in a process of its own, as the worker does: the command never imports it.
    argv = [sys.executable, "-m", module]
    os.execv(sys.executable, argv)  # noqa: S606 - replaces this process with the role


def _flower(port: int, address: str, *, local: bool) -> int:
    settings = _settings()
    env = dict(os.environ)
    credentials = settings.flower_basic_auth
    if settings.flower_basic_auth_file:
        with open(settings.flower_basic_auth_file, encoding="utf-8") as handle:
            credentials = handle.read().strip()
    if credentials:
        # Through the environment, not argv: argv shows in every process listing.
        env["FLOWER_BASIC_AUTH"] = credentials
    elif local:
        address = "127.0.0.1"
        env["FLOWER_UNAUTHENTICATED_API"] = "true"
    else:
        raise _UsageError(
            "Flower needs credentials: set TENANTDB_FLOWER_BASIC_AUTH (user:password) or"
            " TENANTDB_FLOWER_BASIC_AUTH_FILE, or pass --unauthenticated-local"
        )
    argv = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "workers.app:flower",
        "flower",
        f"--port={port}",
        f"--address={address}",
    ]
    os.execve(sys.executable, argv, env)  # noqa: S606


def _reconcile(text: str, *, force: bool, wait: float | None) -> int:
    from redis import RedisError

    from tenantdb.adapters.clusters import load_cluster_config
    from tenantdb.ops import UNREADABLE_ERRORS, is_ready, read_order, wait_for_pass

    settings = _settings()
    key = _served_key(text, settings)
    if wait is not None and wait <= 0:
        raise _UsageError("--wait takes a number of seconds above 0")
    if wait is not None:
        _check_cluster_configured(settings)
    queue = _workqueue(settings)
    try:
        published = queue.enqueue(key, force=force)
        events, _ = queue.progress(key)
    except (RedisError, OSError) as exc:
        sys.stderr.write(f"tenantdb: cannot reach Redis or the broker: {type(exc).__name__}\n")
        return EXIT_UNAVAILABLE
    print(f"{key}: {'enqueued' if published else 'already pending; this pass covers it'}")
    if wait is None:
        return EXIT_OK
    registry = load_cluster_config(settings).registry
    try:
        outcome = wait_for_pass(queue, key, events, wait, lambda: read_order(registry, key))
    except UNREADABLE_ERRORS as exc:
        sys.stderr.write(f"tenantdb: cannot read the order: {exc}\n")
        return EXIT_UNREADABLE
    if outcome.order is None:
        print(f"{key}: not found on its cluster")
        return EXIT_NOT_READY
    for condition in (outcome.order.get("status") or {}).get("conditions") or ():
        print(
            f"  {condition.get('type')}={condition.get('status')}"
            f" {condition.get('reason')}: {condition.get('message')}"
        )
    if not outcome.finished:
        print(f"{key}: the pass did not finish within {wait:g} s")
        return EXIT_NOT_READY
    return EXIT_OK if is_ready(outcome.order) else EXIT_NOT_READY


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tenantdb")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def _check_cluster_configured(settings: Settings) -> None:
    """Refuse in one line when no kubeconfig was found and this is not a pod; otherwise let
    an unreachable cluster be said once, by the command, not by each of the client's retries."""
    # The Kubernetes client resets the "urllib3" logger's level whenever it builds a client.
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    if not settings.kubeconfig and not os.environ.get("KUBERNETES_SERVICE_HOST"):
        raise _UsageError(
            "no cluster configured: set TENANTDB_KUBECONFIG or KUBECONFIG, or create"
            " ~/.kube/config (in a pod, its ServiceAccount is used)"
        )


def _cluster_label(cluster: str) -> str:
    return cluster or "management"


def _status(
    text: str | None,
    *,
    as_json: bool,
    filters: tuple[str | None, str | None, str | None, bool] = (None, None, None, False),
) -> int:
    from redis import RedisError

    from tenantdb.adapters.clusters import load_cluster_config
    from tenantdb.ops import StatusFilter, gather_status

    settings = _settings()
    keys = [_served_key(text, settings)] if text else None
    if keys is None:
        _served_kinds(settings)
    kind, namespace, cluster, not_ready = filters
    where = StatusFilter(
        kind.lower() if kind else None,
        namespace,
        None if cluster is None else ("" if cluster == "management" else cluster),
        not_ready,
    )
    _check_cluster_configured(settings)
    try:
        registry = load_cluster_config(settings).registry
        report = gather_status(
            registry, _workqueue(settings), keys, where, settings.management_namespace_list
        )
    except (RedisError, OSError) as exc:
        sys.stderr.write(f"tenantdb: cannot reach Redis: {type(exc).__name__}\n")
        return EXIT_UNAVAILABLE
    for problem in sorted(registry.skipped.values()):
        sys.stderr.write(f"tenantdb: skipped cluster {problem}\n")
    if as_json:
        print(json.dumps(_status_document(report.rows, report.unreadable), indent=2))
    else:
        _print_table(report.rows)
    for name, problem in sorted(report.unreadable.items()):
        sys.stderr.write(f"tenantdb: cluster {_cluster_label(name)} cannot be read: {problem}\n")
    return EXIT_UNREADABLE if report.unreadable else EXIT_OK


def _crds(cluster: str, *, dry_run: bool) -> int:
    from tenantdb.adapters.clusters import ClusterUnavailableError, load_cluster_config
    from tenantdb.adapters.kube import KubeError
    from tenantdb.core.served import build_crds

    settings = _settings()
    _check_cluster_configured(settings)
    name = "" if cluster == "management" else cluster
    try:
        client = load_cluster_config(settings).registry.get(name)
    except ClusterUnavailableError as exc:
        raise _UsageError(str(exc)) from None
    for crd_name, crd in build_crds().items():
        try:
            client.apply(crd, dry_run=dry_run)
        except KubeError as exc:
            sys.stderr.write(f"tenantdb: {exc}\n")
            return EXIT_UNREADABLE
        print(f"customresourcedefinition {crd_name} {'checked' if dry_run else 'applied'}")
    return EXIT_OK


STATUS_SCHEMA_VERSION = 1
"""The version of ``tenantdb status --json``'s document; a field removed or changed raises it."""


def _status_document(rows: list[OrderReport], unreadable: dict[str, str]) -> dict[str, object]:
    from tenantdb.core.keys import OrderKey

    orders = []
    for row in rows:
        key = OrderKey.parse(row.key)
        parts = {
            "kind": key.kind,
            "namespace": key.namespace,
            "name": key.name,
            "cluster": _cluster_label(key.cluster),
        }
        orders.append({**parts, **asdict(row)})
    return {
        "schemaVersion": STATUS_SCHEMA_VERSION,
        "orders": orders,
        "unreadable": {_cluster_label(c): why for c, why in sorted(unreadable.items())},
    }


def _print_table(rows: list[OrderReport]) -> None:
    header = ("ORDER", "READY", "REASON", "DATABASE", "LAST PASS", "NEXT")
    table = [header] + [
        (r.key, r.ready or "-", r.reason or "-", r.database or "-", r.last_pass or "-", r.next)
        for r in rows
    ]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(header) - 1)]
    for row in table:
        cells = [str(cell).ljust(width) for cell, width in zip(row, widths, strict=False)]
        print("  ".join([*cells, str(row[-1])]).rstrip())
    for r in rows:
        if r.why:
            print(f"{r.key}: {r.why}")


def _demo(state: Path, *, until_ready: bool, timeout: float) -> int:
    # The demo drives tenantdb on the devstack, so it imports both and ships in neither: it runs
    # from the source checkout, as a program of its own that this command hands over to.
    if timeout <= 0:
        raise _UsageError("--timeout takes a number of seconds above 0")
    argv = ["--state-dir", str(state.resolve()), "--timeout", f"{timeout:g}"]
    argv = [*argv, "--until-ready"] if until_ready else argv
    return _hand_over("demo", argv, installable=False)


def _workqueue(settings: Settings) -> WorkQueue:
    from tenantdb.ops import build_workqueue

    return build_workqueue(settings)


def _devstack(devstack_args: list[str]) -> int:
    extra = devstack_args[1:] if devstack_args[:1] == ["--"] else devstack_args
    return _hand_over("devstack", extra, installable=True)


def _hand_over(program: str, args: list[str], *, installable: bool) -> int:
    # The devstack (a distribution of its own) and the demo are programs that production images
    # do not ship; these commands only hand over to them, so production code never imports them.
    # A source checkout keeps both beside the tenantdb package and is preferred; the devstack may
    # also be installed on its own, the demo (which is no distribution) may not.
    env = dict(os.environ)
    checkout = Path(__file__).resolve().parent.parent
    if (checkout / program / "__main__.py").is_file():
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(checkout), env.get("PYTHONPATH")]))
    elif not installable:
        raise _UsageError(f"the {program} runs from a source checkout of tenantdb only")
    elif importlib.util.find_spec(program) is None:
        raise _UsageError(f"the {program} is not installed with this tenantdb")
    os.execve(sys.executable, [sys.executable, "-m", program, *args], env)  # noqa: S606


if __name__ == "__main__":
    raise SystemExit(main())
