"""The seals on what a pass leaves in Redis, on the real Redis: a note a worker left opens, one
written by whoever else can write to Redis (without the key) is refused, counted and logged."""

from __future__ import annotations

import itertools
import json
import logging
import time

import pytest
import redis
from prometheus_client import REGISTRY

from tenantdb.adapters.workqueue import Lease, NoteKeysMissingError, NoteRefusedError, WorkQueue
from tenantdb.core.keys import OrderKey
from tenantdb.core.quiet import QuietBasis
from tenantdb.core.seal import SealKeys

KEY = OrderKey.parse("mariadbdatabase/tenant-a/app")
OLD = "o" * 32
NEW = "n" * 32
NOTE = '{"plan":{"actions":[]}}'


def _queue(client: redis.Redis, prefix: str, *keys: str) -> WorkQueue:
    sealing = SealKeys.parse("\n".join(keys)) if keys else None
    return WorkQueue(client, lambda _: None, prefix=prefix, seal_keys=sealing)


def _refused(note: str, reason: str) -> float:
    value = REGISTRY.get_sample_value(
        "tenantdb_notes_refused_total", {"note": note, "reason": reason}
    )
    return value or 0.0


def _stored(client: redis.Redis, key: str) -> str:
    value = client.get(key)
    assert isinstance(value, bytes)
    return value.decode()


def _lease(queue: WorkQueue) -> Lease:
    lease = queue.acquire(KEY)
    assert lease is not None
    return lease


def test_a_note_a_worker_sealed_opens_and_one_rewritten_in_redis_is_refused(
    real_redis: redis.Redis, key_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    queue = _queue(real_redis, key_prefix, NEW)
    lease = _lease(queue)
    queue.save_note(lease, NOTE, 60_000)
    assert queue.load_note(lease) == NOTE
    stored = _stored(real_redis, f"{key_prefix}note:{KEY}")
    token, expires, seal, note = stored.split("\n", 3)
    assert (token, note) == (lease.token, NOTE)
    assert NEW not in stored  # the key never reaches Redis

    tampered = note.replace("[]", '[{"delete":"Secret/kube-system/admin"}]')
    cases = {
        "Forged": f"{token}\n{expires}\n{seal}\n{tampered}",  # the note changed, the seal kept
        "Unsealed": f"{token}\n{tampered}",  # the layout of a note without a seal
    }
    forged = _queue(real_redis, key_prefix, "x" * 32)  # a key the workers do not hold
    forged.save_note(lease, tampered, 60_000)
    cases["Forged by another key"] = _stored(real_redis, f"{key_prefix}note:{KEY}")
    for case, value in cases.items():
        reason = case.split()[0]
        before = _refused("pass", reason)
        real_redis.set(f"{key_prefix}note:{KEY}", value)
        with caplog.at_level(logging.WARNING), pytest.raises(NoteRefusedError) as refusal:
            queue.load_note(lease)
        assert refusal.value.reason == reason, case
        assert _refused("pass", reason) == before + 1, case
        assert tampered not in str(refusal.value)
        assert tampered not in caplog.text
        assert seal not in caplog.text
    assert "a pass note in Redis was refused (Forged)" in caplog.text


def test_a_sealed_note_past_its_time_is_refused_and_another_pass_s_is_not_read(
    real_redis: redis.Redis, key_prefix: str
) -> None:
    queue = _queue(real_redis, key_prefix, NEW)
    lease = _lease(queue)
    queue.save_note(lease, NOTE, 1)
    # Redis may keep the key a moment past its TTL; the seal's own time ends it regardless.
    real_redis.pexpire(f"{key_prefix}note:{KEY}", 60_000)
    time.sleep(0.01)
    with pytest.raises(NoteRefusedError) as refusal:
        queue.load_note(lease)
    assert refusal.value.reason == "Expired"
    queue.save_note(lease, NOTE, 60_000)
    other = Lease(lease.key, "another-pass-token", lease.started)
    assert queue.load_note(other) is None  # another pass's note is no note of this pass


def test_keys_rotate_in_three_rollouts_without_refusing_a_note_in_flight(
    real_redis: redis.Redis, key_prefix: str
) -> None:
    # Rollout 1 adds the new key second, rollout 2 moves it first, rollout 3 drops the old one;
    # during each, workers of the step before and after share the notes.
    stages = [(OLD,), (OLD, NEW), (NEW, OLD), (NEW,)]
    for before, after in itertools.pairwise(stages):
        for writer, reader in ((before, after), (after, before)):
            queue = _queue(real_redis, key_prefix, *writer)
            lease = _lease(queue)
            queue.save_note(lease, NOTE, 60_000)
            assert _queue(real_redis, key_prefix, *reader).load_note(lease) == NOTE
            queue.release(lease)
    lease = _lease(_queue(real_redis, key_prefix, OLD))
    _queue(real_redis, key_prefix, OLD).save_note(lease, NOTE, 60_000)
    with pytest.raises(NoteRefusedError):
        _queue(real_redis, key_prefix, NEW).load_note(lease)


def test_a_queue_without_keys_leaves_no_note_and_trusts_none(
    real_redis: redis.Redis, key_prefix: str
) -> None:
    queue = _queue(real_redis, key_prefix)
    lease = _lease(queue)
    with pytest.raises(NoteKeysMissingError, match="TENANTDB_NOTE_KEYS_FILE"):
        queue.save_note(lease, NOTE, 60_000)
    _queue(real_redis, key_prefix, NEW).save_note(lease, NOTE, 60_000)
    with pytest.raises(NoteKeysMissingError):
        queue.load_note(lease)


def test_a_quiet_basis_not_sealed_by_a_worker_is_no_basis(
    real_redis: redis.Redis, key_prefix: str
) -> None:
    queue = _queue(real_redis, key_prefix, NEW)
    basis = QuietBasis(0, "leader-token", time.time())
    queue.record_quiet(KEY, basis, '{"a":1}', 60_000)
    assert queue.look_quiet(KEY)[0].basis == basis
    stored = json.loads(_stored(real_redis, f"{key_prefix}quiet:{KEY}"))
    for reason, value in (
        ("Forged", {**stored, "note": '{"a":2}'}),
        ("Forged", {**stored, "touched": 7}),
        ("Unsealed", {k: v for k, v in stored.items() if k != "seal"}),
    ):
        before = _refused("quiet", reason)
        real_redis.set(f"{key_prefix}quiet:{KEY}", json.dumps(value))
        look, note = queue.look_quiet(KEY)
        assert (look.basis, note) == (None, None)
        assert _refused("quiet", reason) == before + 1
