"""The fault suite's overlap check: which passes of an order wrote at the same time."""

from __future__ import annotations

from devstack.realkube import AuditEntry
from tests.faults.conftest import concurrent_writers, tenantdb_writers

ORDER = "MariaDBDatabase/management/tenant-a/app"


def _agent(pass_id: str) -> str:
    return f"tenantdb/1.0 (pass {pass_id}; {ORDER})"


def _write(second: int, pass_id: str, code: int = 200) -> AuditEntry:
    return AuditEntry(
        f"2026-12-04T02:00:{second:02d}.000000Z",
        "tenantdb",
        "patch",
        "secrets",
        "tenant-a",
        "app-credentials",
        "tenantdb",
        code,
        _agent(pass_id),
    )


def _read(second: int, pass_id: str) -> AuditEntry:
    return AuditEntry(
        f"2026-12-04T02:00:{second:02d}.000000Z",
        "tenantdb",
        "get",
        "secrets",
        "tenant-a",
        "app-credentials",
        "",
        200,
        _agent(pass_id),
    )


STALE, NEWER = "a" * 12, "b" * 12


def test_a_stale_pass_whose_only_write_lands_after_the_newer_pass_is_caught() -> None:
    # The stale pass read at 1 s, froze, and its one write landed at 9 s, after the newer
    # pass read at 5 s and wrote at 6 s: their writes never overlap, their passes do.
    writes = [_write(6, NEWER), _write(9, STALE)]
    reads = [_read(1, STALE), _read(5, NEWER)]
    assert concurrent_writers(tenantdb_writers(writes).spans) == []
    found = concurrent_writers(tenantdb_writers(writes, reads).spans)
    assert [(a.pass_id, b.pass_id) for a, b in found] == [(STALE, NEWER)]


def test_passes_one_after_another_do_not_overlap() -> None:
    writes = [_write(2, STALE), _write(3, STALE), _write(6, NEWER)]
    reads = [_read(1, STALE), _read(5, NEWER)]
    assert concurrent_writers(tenantdb_writers(writes, reads).spans) == []


def test_a_refused_write_of_a_stale_pass_does_not_make_it_a_writer_then() -> None:
    # Fenced: the stale pass's late write was refused (409), so its span ends at its last
    # write that landed, before the newer pass began.
    writes = [_write(2, STALE), _write(6, NEWER), _write(9, STALE, code=409)]
    reads = [_read(1, STALE), _read(5, NEWER), _read(10, STALE)]
    spans = tenantdb_writers(writes, reads).spans
    assert concurrent_writers(spans) == []
    assert [(s.pass_id, s.writes) for s in spans] == [(STALE, 1), (NEWER, 1)]
