"""Key material the TLS stack must read from a path, held in memory instead of on disk.

Python's ``ssl`` loads a client certificate and its key only from files, so the kubernetes
client writes a kubeconfig's ``client-key-data`` to a temporary file (removed at exit), and a
client certificate for OpenBao needs files too. A process killed with SIGKILL never removes
them, and the key stays on the node's disk. Here each one is an anonymous in-memory file
(``memfd_create``) named by ``/proc/self/fd/N``: it exists only while the process holds it, is
never on disk, and a forked worker child inherits it along with the path.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

SUPPORTED = sys.platform == "linux" and hasattr(os, "memfd_create")
"""Whether in-memory files exist here (Linux); elsewhere callers keep their temporary files."""


class MemoryFile:
    """One in-memory file and the path that opens it, for as long as it is not closed."""

    def __init__(self, name: str, content: bytes) -> None:
        """Create the file with ``content``; ``name`` only labels it in /proc."""
        self.fd = os.memfd_create(name, os.MFD_CLOEXEC)
        os.write(self.fd, content)
        self.path = f"/proc/self/fd/{self.fd}"

    def close(self) -> None:
        """Release the file; its path no longer opens."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def hold_in_memory(path: str, name: str) -> MemoryFile:
    """Move a file into memory: read it, remove it from disk, return the in-memory copy."""
    content = Path(path).read_bytes()
    held = MemoryFile(name, content)
    Path(path).unlink(missing_ok=True)
    return held
