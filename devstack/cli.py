"""The `devstack` command: run simulated clusters in the foreground for tests and the demo.

Owns `python -m devstack up --state-dir DIR [--clusters management,edge-1]`: start one API server
per cluster, write `DIR/kubeconfig` (one context per cluster, named like it, with bearer tokens and
the CA), print one line beginning `devstack ready`, and stop cleanly on SIGINT or SIGTERM. It must
never print a token.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

import yaml

from devstack.kube import kubeconfig, start_clusters


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="devstack", description="Stand-ins for a tenantdb environment."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="run simulated clusters until interrupted")
    up.add_argument("--state-dir", required=True, type=Path, help="where kubeconfig is written")
    up.add_argument("--clusters", default="management", help="comma-separated cluster names")
    return parser


def _write_kubeconfig(path: Path, content: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(content)


def up(state_dir: Path, cluster_names: list[str]) -> int:
    """Serve the clusters until SIGINT or SIGTERM."""
    state_dir.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    servers = start_clusters(cluster_names)
    try:
        path = state_dir / "kubeconfig"
        _write_kubeconfig(path, yaml.safe_dump(kubeconfig(servers)))
        urls = " ".join(f"{name}={server.url}" for name, server in servers.items())
        print(f"devstack ready kubeconfig={path} {urls}", flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        for server in servers.values():
            server.stop()
    print("devstack stopped", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m devstack`."""
    args = _parser().parse_args(argv)
    names = [n.strip() for n in str(args.clusters).split(",") if n.strip()]
    if not names:
        print("devstack: --clusters needs at least one name", file=sys.stderr)
        return 2
    return up(args.state_dir, names)
