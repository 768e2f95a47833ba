"""`python -m demo --state-dir DIR [--until-ready] [--timeout S]`: tenantdb's demo on a devstack of
its own (see `demo`); `tenantdb demo` hands over to it. Exits 2 on a bad argument and 3 when the
stack cannot start."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from demo import DemoError, run_demo


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tenantdb demo", description="tenantdb on the devstack with three example orders"
    )
    parser.add_argument("--state-dir", required=True, type=Path, help="where the demo keeps files")
    parser.add_argument("--until-ready", action="store_true", help="exit 0 once the orders settle")
    parser.add_argument("--timeout", type=float, default=180.0, metavar="SECONDS")
    return parser


def _stop_on_signals() -> threading.Event:
    """An event that SIGINT (Ctrl-C) and SIGTERM set, so the demo stops what it started."""
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    return stop


def main(argv: list[str] | None = None) -> int:
    """Run the demo until its orders settle (``--until-ready``) or until Ctrl-C."""
    args = _parser().parse_args(argv)
    if args.timeout <= 0:
        print("tenantdb demo: --timeout takes a number of seconds above 0", file=sys.stderr)
        return 2
    try:
        return run_demo(
            args.state_dir.resolve(),
            until_ready=args.until_ready,
            timeout=args.timeout,
            stop=_stop_on_signals(),
        )
    except DemoError as exc:
        print(f"tenantdb demo: {exc}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    raise SystemExit(main())
