"""OpenBao unreachable for a while: what was delivered stays, a deletion waits for it."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tenantdb.adapters.kube import SECRET
from tenantdb.adapters.mariadbdatabase import MARIADB_DATABASE
from tests.faults.conftest import NAMESPACE, Faults
from tests.support import wait_for

# OpenBao is suspended: a platform of its own.
pytestmark = [pytest.mark.slow, pytest.mark.private_platform]

TEARDOWN = "tenantdb.mariadbdatabase.teardown.openbao"


def _delivered(faults: Faults, name: str) -> tuple[dict[str, Any], str]:
    secret = faults.stack.kube().get(SECRET, NAMESPACE, f"{name}-credentials")
    return dict(secret.get("data") or {}), str(secret["metadata"]["resourceVersion"])


@pytest.mark.timeout(150)
def test_an_openbao_outage_keeps_secrets_and_holds_a_deletion(faults: Faults) -> None:
    names = [faults.create(f"bao{n}") for n in range(3)]
    faults.wait_all_ready(60)
    faults.wait_quiet(names, 20)
    delivered = {name: _delivered(faults, name) for name in names}
    doomed, kept = names[-1], names[:-1]
    openbao = faults.stack.platform.openbao
    assert openbao is not None
    openbao.suspend()
    try:
        faults.delete(doomed)
        # Events on the orders that stay: their passes run during the outage.
        for name in kept:
            faults.stack.kube().patch(
                MARIADB_DATABASE, NAMESPACE, name, {"metadata": {"annotations": {"outage": "1"}}}
            )
        wait_for(
            lambda: faults.counter("tenantdb_step_retries_total", task=TEARDOWN) >= 3,
            60,
            "the held teardown to retry three times",
        )
        wait_for(
            lambda: not any(faults.pending(n) for n in kept), 20, "the passes over the kept orders"
        )
        held = faults.stack.order(doomed)
        during = {name: _delivered(faults, name) for name in kept}
    finally:
        openbao.resume()
    ended = time.monotonic()
    assert held is not None, "the deleted order is held while OpenBao is down"
    assert held["metadata"].get("deletionTimestamp"), held["metadata"]
    assert held["metadata"].get("finalizers"), "the finalizer is kept during the outage"
    for name in kept:
        assert during[name] == delivered[name], f"{name}'s Secret changed while OpenBao was down"
    retries = faults.counter("tenantdb_step_retries_total", task=TEARDOWN)
    faults.settle(
        "openbao down, a deletion held", ended, 60, note=f"teardown retries={retries:.0f}"
    )
    assert faults.stack.secret(f"{doomed}-credentials") is None
    for name in kept:
        assert _delivered(faults, name)[0] == delivered[name][0]
