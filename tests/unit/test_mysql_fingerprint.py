"""lastAppliedHash moves with every input of an apply, and never digests a credential."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tenantdb.core.mysqldatabase.fingerprint import (
    AppliedInputs,
    compute_last_applied_hash,
    is_up_to_date,
)

BASE = AppliedInputs(
    spec={"groupRef": {"name": "main"}, "databaseName": "acme_wms", "owner": {"secretName": "o"}},
    active_site="dc1",
    secret_uid="uid-1",
    secret_resource_version="41",
    group_uid="group-1",
)


def test_the_hash_is_16_lowercase_hex_characters_and_stable() -> None:
    got = compute_last_applied_hash(BASE)
    assert len(got) == 16
    assert got == got.lower()
    assert int(got, 16) >= 0
    reordered = replace(BASE, spec=dict(reversed(list(BASE.spec.items()))))
    assert compute_last_applied_hash(reordered) == got, "key order does not matter"


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param(replace(BASE, secret_resource_version="42"), id="secret-revision"),
        pytest.param(replace(BASE, active_site="dc2"), id="failover"),
        pytest.param(replace(BASE, group_uid="group-2"), id="group-recreated"),
        pytest.param(replace(BASE, restore_token="t-1"), id="restore-completed"),
        pytest.param(replace(BASE, spec={**BASE.spec, "collation": "utf8mb4_bin"}), id="spec"),
    ],
)
def test_every_input_moves_the_hash(changed: AppliedInputs) -> None:
    assert compute_last_applied_hash(changed) != compute_last_applied_hash(BASE)


def test_only_a_ready_order_at_its_generation_with_the_same_inputs_skips_its_apply() -> None:
    now = compute_last_applied_hash(BASE)
    assert is_up_to_date(
        phase="Ready", last_applied_hash=now, observed_generation=3, generation=3, current=now
    )
    for phase, generation, stored in (("Pending", 3, now), ("Ready", 4, now), ("Ready", 3, "x")):
        assert not is_up_to_date(
            phase=phase,
            last_applied_hash=stored,
            observed_generation=3,
            generation=generation,
            current=now,
        )
