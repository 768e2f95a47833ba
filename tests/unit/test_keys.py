"""Order keys: the one string form, and clear refusals of everything else."""

from __future__ import annotations

import pytest

from tenantdb.core.keys import InvalidOrderKeyError, OrderKey
from tenantdb.core.tasknames import RECONCILE_ORDER, Queue, queue_for


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "mariadbdatabase/tenant-a/workflow-db",
            OrderKey("mariadbdatabase", "tenant-a", "workflow-db"),
            id="management-cluster",
        ),
        pytest.param(
            "mariadbdatabase/tenant-a/workflow-db@edge-1",
            OrderKey("mariadbdatabase", "tenant-a", "workflow-db", cluster="edge-1"),
            id="target-cluster",
        ),
        pytest.param(
            "mysqldatabase/ns/app.v1",
            OrderKey("mysqldatabase", "ns", "app.v1"),
            id="dotted-object-name",
        ),
    ],
)
def test_parse_round_trips(text: str, expected: OrderKey) -> None:
    assert OrderKey.parse(text) == expected
    assert str(expected) == text


def test_management_cluster_is_the_empty_cluster() -> None:
    assert OrderKey.parse("mariadbdatabase/a/b").on_management
    assert not OrderKey.parse("mariadbdatabase/a/b@edge-1").on_management


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        pytest.param("", "expected KIND/NAMESPACE/NAME", id="empty"),
        pytest.param("mariadbdatabase/tenant-a", "expected KIND/NAMESPACE/NAME", id="two-parts"),
        pytest.param("mariadbdatabase/a/b/c", "expected KIND/NAMESPACE/NAME", id="four-parts"),
        pytest.param("MariaDBDatabase/a/b", "kind 'MariaDBDatabase'", id="upper-case-kind"),
        pytest.param("mariadbdatabase//b", "namespace ''", id="empty-namespace"),
        pytest.param("mariadbdatabase/Tenant/b", "namespace 'Tenant'", id="upper-case-namespace"),
        pytest.param("mariadbdatabase/a/", "name ''", id="empty-name"),
        pytest.param("mariadbdatabase/a/b_c", "name 'b_c'", id="underscore-in-name"),
        pytest.param("mariadbdatabase/a/b@", "empty cluster", id="empty-cluster"),
        pytest.param("mariadbdatabase/a/b@Edge", "cluster 'Edge'", id="upper-case-cluster"),
        pytest.param("mariadbdatabase/a/b@e@f", "cluster 'e@f'", id="two-ats"),
        pytest.param("mariadbdatabase/a/" + "x" * 254, "is not a valid object name", id="too-long"),
        pytest.param("mariadbdatabase/a/b\n", "name 'b\\n'", id="trailing-newline-name"),
        pytest.param("mariadbdatabase/a/b@edge\n", "cluster 'edge\\n'", id="trailing-newline"),
        pytest.param("mariadbdatabase\n/a/b", "kind 'mariadbdatabase\\n'", id="newline-kind"),
        pytest.param("mariadbdatabase/a\n/b", "namespace 'a\\n'", id="newline-namespace"),
    ],
)
def test_parse_rejects_with_a_clear_message(text: str, complaint: str) -> None:
    with pytest.raises(InvalidOrderKeyError) as caught:
        OrderKey.parse(text)
    message = str(caught.value)
    assert complaint in message
    assert message.startswith(f"order key {text!r}")


def test_constructing_an_invalid_key_fails() -> None:
    with pytest.raises(InvalidOrderKeyError, match="namespace"):
        OrderKey("mariadbdatabase", "Bad Namespace", "x")


def test_keys_sort_and_hash_by_value() -> None:
    a = OrderKey.parse("mariadbdatabase/a/x")
    assert {a, OrderKey.parse("mariadbdatabase/a/x")} == {a}
    assert sorted([OrderKey.parse("mariadbdatabase/b/x"), a])[0] == a


@pytest.mark.parametrize(
    ("name", "queue"),
    [
        pytest.param(RECONCILE_ORDER, Queue.RECONCILE, id="entry"),
        pytest.param("tenantdb.mariadbdatabase.provision.role", Queue.PROVISION, id="provision"),
        pytest.param("tenantdb.mariadbdatabase.delivery.secret", Queue.DELIVERY, id="delivery"),
        pytest.param(
            "tenantdb.mysqldatabase.teardown.schema", Queue.TEARDOWN, id="another-kinds-teardown"
        ),
        pytest.param("tenantdb.reconcile.abort", Queue.RECONCILE, id="abort"),
    ],
)
def test_task_names_route_to_their_chain_queue(name: str, queue: Queue) -> None:
    assert queue_for(name) is queue


@pytest.mark.parametrize(
    "name",
    [
        "celery.chord_unlock",
        "tenantdb.nochain.step",
        "tenantdb.provision",
        "tenantdb.mariadbdatabase.nochain.step",
        "tenantdb.a.b.provision.c",
    ],
)
def test_unknown_task_names_have_no_queue(name: str) -> None:
    with pytest.raises(ValueError, match=r"tenantdb\.<kind>\.<chain>\.<step>"):
        queue_for(name)
