"""Redis and broker connections: a plain URL, or Sentinels following a master."""

from __future__ import annotations

from tenantdb.adapters.redisclient import broker_connection, sentinel_hosts
from tenantdb.settings import Settings


def test_without_sentinels_the_broker_is_the_redis_url() -> None:
    settings = Settings(redis_url="redis://r:6379/2")
    assert sentinel_hosts(settings) == []
    assert broker_connection(settings) == ("redis://r:6379/2", {})


def test_sentinels_list_every_host_with_the_master_name() -> None:
    settings = Settings(
        redis_url="redis://:pw@ignored:6379/3",
        redis_sentinels="s1:26379, s2:26380",
        redis_sentinel_master="tenantdb",
    )
    assert sentinel_hosts(settings) == [("s1", 26379), ("s2", 26380)]
    url, options = broker_connection(settings)
    assert url == "sentinel://:pw@s1:26379/3;sentinel://:pw@s2:26380/3"
    assert options == {"master_name": "tenantdb"}


def test_an_explicit_broker_url_wins_over_sentinels() -> None:
    settings = Settings(redis_sentinels="s1:26379", broker_url="redis://broker:6379/0")
    assert broker_connection(settings) == ("redis://broker:6379/0", {})
