"""Whoever can write to tenantdb's Redis cannot steer a write: a pass's note rewritten there, by
someone without the workers' note key (forged) or by editing a note a worker sealed (tampered),
runs nothing. The step that reads it ends at once, counted and logged, and the order is planned
afresh and converges."""

from __future__ import annotations

import datetime
import json
import re
import time

import pytest

from tenantdb.core.seal import SealKeys
from tests.faults.conftest import Faults, _audit_time, pass_name
from tests.support import wait_for

ATTACKER = SealKeys((b"a key the workers do not hold, 32+ bytes long",))
VICTIM_NAMESPACE = "kube-system"


def _steered(note: str, namespace: str) -> str:
    """The note with every mention of the order's namespace pointed at another one: what a
    forger would ask a step to write or delete there instead."""
    return re.sub(rf'"{re.escape(namespace)}"', json.dumps(VICTIM_NAMESPACE), note)


def _wait_for_note(faults: Faults, note_key: str) -> str:
    found: list[str] = []

    def left() -> bool:
        value = faults.client.get(note_key)
        if value is None:
            return False
        found.append(value.decode() if isinstance(value, bytes) else str(value))
        return True

    wait_for(left, 60, f"a note at {note_key}")
    return found[-1]


@pytest.mark.parametrize("faults", [{"queues": "reconcile"}], indirect=True)
@pytest.mark.timeout(180)
def test_a_forged_and_a_tampered_note_run_nothing_and_the_order_converges(
    faults: Faults,
) -> None:
    # The two workers serve only the entry, so each new order's chain waits in the provision
    # queue with its note in Redis; the note is rewritten there before a worker takes the step.
    prefix, client = faults.stack.prefix, faults.client
    rewritten: dict[str, str] = {}  # pass id -> how
    for how in ("forged", "tampered"):
        name = faults.create(f"note-{how}")
        key = faults.key(name)
        note_key = f"{prefix}note:{key}"
        stored = _wait_for_note(faults, note_key)
        token, expires, seal, note = stored.split("\n", 3)
        steered = _steered(note, key.namespace)
        assert steered != note
        if how == "forged":
            seal = ATTACKER.seal("note", str(key), token, expires, steered)
        client.set(note_key, f"{token}\n{expires}\n{seal}\n{steered}", keepttl=True)
        rewritten[pass_name(token)] = how
    at = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    faults.start_worker("worker-3", "provision,delivery,teardown")
    ended = time.monotonic()
    figures = faults.settle(
        "a forged and a tampered note in Redis", ended, 90, note="2 notes rewritten in Redis"
    )
    refused = faults.stack.counter(
        "worker-3", "tenantdb_notes_refused_total", note="pass", reason="Forged"
    )
    assert refused == 2, figures
    # The passes whose notes were rewritten wrote nothing once their step took them.
    steered_writes = [
        f"{e.verb} {e.resource} {e.namespace}/{e.name}"
        for e in faults.writes()
        if any(p in e.user_agent for p in rewritten) and _audit_time(e.time) >= at
    ]
    assert steered_writes == []
    victim = [
        e
        for e in faults.writes()
        if e.namespace == VICTIM_NAMESPACE and e.user_agent.startswith("tenantdb/")
    ]
    assert victim == []
    lines = [line for line in faults.log_lines("worker-3") if "was refused (Forged)" in line]
    assert len(lines) == 2
    assert not any(p in "".join(lines) for p in ("seal", "kube-system"))
