"""A devstack MariaDB server starting leaves other servers' temporary tables alone.

A MariaDB server removes every `#sql*` file in its tmpdir when it starts. With the default
tmpdir (/tmp) shared by every server on the machine, each group site a test started removed the
temporary tables the machine's own MariaDB was using, and its statement failed with "Error on
delete of '/tmp/#sql-temptable-….MAI'". Each devstack server keeps its own tmpdir.
"""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path

from devstack.mysql_group.servers import MariaDBServer


def test_a_site_starting_leaves_the_shared_tmp_dirs_temporary_tables(tmp_path: Path) -> None:
    other = Path(tempfile.gettempdir()) / f"#sql-temptable-probe-{uuid.uuid4().hex}.MAI"
    other.write_bytes(b"another server's temporary table")
    server = MariaDBServer.create("dc1", tmp_path, 1)
    try:
        server.start()
        assert server.running
        assert other.exists(), "the server removed another server's temporary table"
    finally:
        server.stop()
        other.unlink(missing_ok=True)
