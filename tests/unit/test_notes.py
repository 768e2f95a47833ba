"""What a pass carries to its steps: the order without what can make it large, and a bound."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tasks.chain import NOTE_LIMIT_BYTES, NoteTooLargeError, note_text
from tasks.runtime import describe_error
from tasks.scaffold import note_order


def _order(**metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "c5c3.io/v1alpha1",
        "kind": "MariaDBDatabase",
        "metadata": {
            "name": "db",
            "namespace": "tenant-a",
            "uid": "u-1",
            "resourceVersion": "42",
            "generation": 3,
            "finalizers": ["c5c3.io/mariadbdatabase"],
            "labels": {"team": "a"},
            **metadata,
        },
        "spec": {"controlPlaneRef": {"name": "cp"}, "databaseName": "orders"},
        "status": {"phase": "Ready"},
    }


@dataclass(frozen=True)
class _Note:
    order: dict[str, Any]


def test_a_note_carries_the_order_without_its_annotations_and_managed_fields() -> None:
    raw = _order(
        annotations={"huge": "x" * 200_000},
        managedFields=[{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
    )
    carried = note_order(raw)
    assert "annotations" not in carried["metadata"]
    assert "managedFields" not in carried["metadata"]
    assert carried["spec"] == raw["spec"]
    assert carried["status"] == raw["status"]
    for field in ("name", "namespace", "uid", "resourceVersion", "generation", "finalizers"):
        assert carried["metadata"][field] == raw["metadata"][field]
    assert "annotations" in raw["metadata"], "the order as read is left as it was"
    assert len(note_text(_Note(carried))) < 2_000


def test_a_note_past_the_limit_is_refused_with_its_size_and_nothing_of_its_content() -> None:
    secretish = "s3cr3t-" * (NOTE_LIMIT_BYTES // 7 + 1)
    with pytest.raises(NoteTooLargeError) as refused:
        note_text(_Note(_order() | {"spec": {"blob": secretish}}))
    said = describe_error(refused.value)
    assert str(NOTE_LIMIT_BYTES) in said
    assert str(refused.value.size) in said
    assert "s3cr3t" not in said


def test_a_note_just_under_the_limit_is_kept() -> None:
    small = _Note(_order())
    room = NOTE_LIMIT_BYTES - len(note_text(small)) - len(',"pad":""') - 20
    text = note_text(_Note(_order() | {"pad": "p" * room}))
    assert len(text) <= NOTE_LIMIT_BYTES
