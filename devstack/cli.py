"""The `devstack` command: run the platform in the foreground for tests and the demo.

Owns `python -m devstack up --state-dir DIR [--clusters management,edge-1] [--bare]
[--no-mysql-group] [--dead-group] [--mariadb HOST:PORT]`: start the platform
(`devstack.platform.start_platform`: an etcd and a kube-apiserver per cluster with the CRDs, and
unless `--bare` OpenBao, ESO and cert-manager onboarded as docs/operations.md says, the
mariadb-operator stand-in, the seed objects and the MySQL failover group on two real MariaDB
servers; `make kube` and `make install` build and install what it runs, and the command fails
with exit code 3 and one line naming the command to run when something is missing; the group is
left out with `--no-mysql-group`, and with a warning on stderr where the MariaDB server binaries
are not installed; `--dead-group` adds group `dead`, whose sites accept TCP and never answer),
write `DIR/kubeconfig` (one context per cluster, named like it), `DIR/env` and the other state
files, print one line beginning `devstack ready`, and stop cleanly on SIGINT or SIGTERM (which
drops the SQL users and schemas the platform created and stops the group's servers, see
`devstack.platform`). It must never print a token, and prints nothing on stdout before the ready
line.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from devstack.mariadb_operator.sql import Server
from devstack.mysql_group import binaries_present
from devstack.platform import start_platform
from devstack.realkube import RealKubeError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="devstack", description="A tenantdb platform on this machine."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="run the platform until interrupted")
    up.add_argument("--state-dir", required=True, type=Path, help="where kubeconfig is written")
    up.add_argument("--clusters", default="management", help="comma-separated cluster names")
    up.add_argument(
        "--bare",
        action="store_true",
        help="API servers with the CRDs only: no OpenBao, no operators, no seed objects",
    )
    up.add_argument(
        "--no-mysql-group",
        action="store_true",
        help="no MySQL failover group (it starts two real MariaDB servers)",
    )
    up.add_argument(
        "--dead-group",
        action="store_true",
        help="also a failover group `dead` whose sites accept TCP and never answer",
    )
    up.add_argument(
        "--mariadb",
        type=_address,
        default=Server(),
        metavar="HOST:PORT",
        help="the MariaDB the platform creates schemas and users on, as root with no"
        " password (default 127.0.0.1:3306; in docker compose, its mariadb service)",
    )
    return parser


def _address(text: str) -> Server:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return Server(host=host, port=int(port))


def _stop_on_signals() -> threading.Event:
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    return stop


def up(
    state_dir: Path,
    cluster_names: list[str],
    *,
    bare: bool = False,
    mysql_group: bool = True,
    dead_group: bool = False,
    mariadb: Server | None = None,
) -> int:
    """Serve the platform until SIGINT or SIGTERM; 3 when a part of it is missing or cannot
    start."""
    stop = _stop_on_signals()
    with_group = mysql_group and not bare
    if with_group and not binaries_present():
        print(
            "devstack: no MariaDB server binaries here; starting without the MySQL failover group",
            file=sys.stderr,
        )
        with_group = False
    try:
        platform = start_platform(
            state_dir,
            cluster_names,
            bare=bare,
            mariadb=mariadb,
            mysql_group=with_group,
            dead_group=dead_group and with_group,
        )
    except RealKubeError as exc:
        print(f"devstack: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 3
    try:
        urls = " ".join(f"{name}={e.url}" for name, e in platform.endpoints.items())
        extra = "" if platform.openbao is None else f" openbao={platform.openbao.url}"
        if platform.mysql_group is not None:
            for site in platform.mysql_group.sites:
                host, port = platform.mysql_group.address(site)
                extra += f" mysql-{site}={host}:{port}"
        print(
            f"devstack ready kubeconfig={platform.kubeconfig_path} env={platform.env_path} "
            f"{urls}{extra}",
            flush=True,
        )
        while not stop.wait(0.5):
            pass
    finally:
        platform.stop()
    print("devstack stopped", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m devstack`."""
    args = _parser().parse_args(argv)
    names = [n.strip() for n in str(args.clusters).split(",") if n.strip()]
    if not names:
        print("devstack: --clusters needs at least one name", file=sys.stderr)
        return 2
    if not args.bare and "management" not in names:
        print("devstack: --clusters needs a cluster named management", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    return up(
        args.state_dir,
        names,
        bare=args.bare,
        mysql_group=not args.no_mysql_group,
        dead_group=args.dead_group,
        mariadb=args.mariadb,
    )
