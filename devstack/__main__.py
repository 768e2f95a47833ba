"""Run the devstack command line: `python -m devstack up --state-dir DIR`."""

import sys

from devstack.cli import main

sys.exit(main())
