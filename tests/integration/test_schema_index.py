"""The schema index and its claims on a real Redis: what the watcher writes, when a pass may
trust it, and the first-come claim two orders asking for one schema at once race for."""

from __future__ import annotations

import threading

import redis

from tenantdb.adapters.schemaindex import CLAIM_SECONDS, SchemaIndex

SLOT = ("shared-mariadb", "app_db")


def _leading(client: redis.Redis, key_prefix: str, term: str = "term-1") -> SchemaIndex:
    client.set(f"{key_prefix}leader:watcher", term)
    return SchemaIndex(client, key_prefix)


def test_an_index_no_watch_marked_whole_is_not_trusted(
    real_redis: redis.Redis, key_prefix: str
) -> None:
    index = _leading(real_redis, key_prefix)
    index.write_many("", "keystone", {SLOT: ["a-database"]})
    assert index.holders("", "keystone", SLOT) is None


def test_a_namespace_or_cluster_wide_mark_of_the_leader_makes_it_trusted(
    real_redis: redis.Redis, key_prefix: str
) -> None:
    index = _leading(real_redis, key_prefix)
    index.write_many("", "keystone", {SLOT: ["b-database", "a-database"]})
    index.mark_synced("", "", "term-1")
    assert index.holders("", "keystone", SLOT) == ["a-database", "b-database"]
    assert index.holders("", "keystone", ("shared-mariadb", "other_db")) == []
    index.mark_unsynced("", "")
    index.write_many("edge-1", "keystone", {SLOT: ["c-database"]})
    index.mark_synced("edge-1", "keystone", "term-1")
    assert index.holders("edge-1", "keystone", SLOT) == ["c-database"]
    assert index.holders("", "keystone", SLOT) is None


def test_a_mark_of_another_leader_or_an_interrupted_watch_is_not_trusted(
    real_redis: redis.Redis, key_prefix: str
) -> None:
    index = _leading(real_redis, key_prefix, term="term-2")
    index.write_many("", "keystone", {SLOT: ["a-database"]})
    index.mark_synced("", "keystone", "term-1")
    assert index.holders("", "keystone", SLOT) is None
    index.mark_synced("", "keystone", "term-2")
    assert index.holders("", "keystone", SLOT) == ["a-database"]
    index.mark_unsynced("", "keystone")
    assert index.holders("", "keystone", SLOT) is None
    real_redis.delete(f"{key_prefix}leader:watcher")
    index.mark_synced("", "keystone", "term-2")
    assert index.holders("", "keystone", SLOT) is None


def test_a_relist_replaces_every_field_of_the_namespaces_it_covers(
    real_redis: redis.Redis, key_prefix: str
) -> None:
    index = _leading(real_redis, key_prefix)
    index.write_many("", "keystone", {SLOT: ["gone-database"]})
    index.write_many("", "old-keystone", {SLOT: ["gone-too"]})
    index.replace("", ["keystone", "old-keystone"], {"keystone": {SLOT: {"a-database"}}})
    index.mark_synced("", "", "term-1")
    assert index.holders("", "keystone", SLOT) == ["a-database"]
    assert index.holders("", "old-keystone", SLOT) == []
    index.write_many("", "keystone", {SLOT: []})
    assert index.holders("", "keystone", SLOT) == []


def test_the_first_claim_wins_and_the_other_learns_its_database_cr(
    real_redis: redis.Redis, key_prefix: str
) -> None:
    index = SchemaIndex(real_redis, key_prefix)
    assert index.claim("", "keystone", SLOT, "order-a", "a-database") is None
    assert index.claim("", "keystone", SLOT, "order-b", "b-database") == "a-database"
    # The holder's next pass renews its own claim rather than finding it taken.
    assert index.claim("", "keystone", SLOT, "order-a", "a-database") is None
    (key,) = real_redis.keys(f"{key_prefix}schemas:claim:*")
    assert 0 < real_redis.ttl(key) <= CLAIM_SECONDS
    # Another order's release leaves the claim; the holder's frees it.
    index.release("", "keystone", SLOT, "order-b")
    assert index.claim("", "keystone", SLOT, "order-b", "b-database") == "a-database"
    index.release("", "keystone", SLOT, "order-a")
    assert index.claim("", "keystone", SLOT, "order-b", "b-database") is None


def test_claims_are_per_mariadb_namespace_and_cluster(
    real_redis: redis.Redis, key_prefix: str
) -> None:
    index = SchemaIndex(real_redis, key_prefix)
    assert index.claim("", "keystone", SLOT, "order-a", "a-database") is None
    assert index.claim("", "keystone", ("another-mariadb", "app_db"), "order-b", "b") is None
    assert index.claim("", "keystone-2", SLOT, "order-b", "b") is None
    assert index.claim("edge-1", "keystone", SLOT, "order-b", "b") is None


def test_of_many_orders_claiming_at_once_exactly_one_wins(
    real_redis: redis.Redis, key_prefix: str
) -> None:
    index = SchemaIndex(real_redis, key_prefix)
    start = threading.Barrier(8)
    answers: dict[str, str | None] = {}

    def claim(n: int) -> None:
        start.wait()
        answers[f"order-{n}"] = index.claim("", "keystone", SLOT, f"order-{n}", f"db-{n}")

    threads = [threading.Thread(target=claim, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [order for order, other in answers.items() if other is None]
    assert len(winners) == 1
    winner_cr = "db-" + winners[0].removeprefix("order-")
    assert {other for other in answers.values() if other is not None} == {winner_cr}
