"""Settings: defaults, the environment, and refusal of an unsafe visibility timeout."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tenantdb.settings import Settings


def test_environment_overrides_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TENANTDB_KEY_PREFIX", "other:")
    monkeypatch.setenv("TENANTDB_REDIS_URL", "redis://redis.example:6379/2")
    settings = Settings()
    assert settings.key_prefix == "other:"
    assert settings.effective_broker_url == "redis://redis.example:6379/2"


def test_broker_defaults_to_the_work_queue_redis() -> None:
    assert Settings().effective_broker_url == Settings().redis_url
    assert Settings(broker_url="redis://b:1/0").effective_broker_url == "redis://b:1/0"


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param({"visibility_timeout_seconds": 100}, id="below-time-limit"),
        pytest.param(
            {"visibility_timeout_seconds": 400, "retry_backoff_max_seconds": 400},
            id="equal-to-backoff-cap",
        ),
        pytest.param(
            {"visibility_timeout_seconds": 400, "retry_backoff_max_seconds": 300},
            id="below-backoff-plus-time-limit",
        ),
    ],
)
def test_visibility_timeout_must_cover_the_longest_step(overrides: dict[str, int]) -> None:
    with pytest.raises(ValidationError, match="VISIBILITY_TIMEOUT_SECONDS must exceed"):
        Settings(**overrides)  # type: ignore[arg-type]
