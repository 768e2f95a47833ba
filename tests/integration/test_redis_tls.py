"""tenantdb reaches a Redis that takes only TLS and an ACL user, directly and through Sentinels
that take only TLS too: the work-queue client and the Celery broker both log in with the user
and the password file, verify the server against the CA file, and fail, naming no password,
without either.

A real ``redis-server`` and a real Sentinel (``redis-server --sentinel``) run on their TLS ports
only (no plaintext port), with certificates of this module's CA for 127.0.0.1; the default user
is off, so a connection without the ACL user's password is refused.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from kombu.exceptions import OperationalError

from devstack.ca import CertificateAuthority, Request
from tenantdb.adapters.celeryapp import build_celery_app
from tenantdb.adapters.redisclient import build_redis
from tenantdb.settings import Settings
from tests.e2e.conftest import free_port
from tests.support import stop_processes, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

USER = "tenantdb"
PASSWORD = "s3cret-Redis-pass"
MASTER = "tenantdb-tls"


@dataclass(frozen=True)
class TLSRedis:
    """A TLS-only Redis and a TLS-only Sentinel watching it."""

    redis_port: int
    sentinel_port: int
    ca_file: Path
    password_file: Path

    def settings(self, *, sentinel: bool, **changes: str) -> Settings:
        base: dict[str, str] = {
            "redis_url": f"rediss://127.0.0.1:{self.redis_port}/3",
            "redis_username": USER,
            "redis_password_file": str(self.password_file),
            "redis_tls_ca_file": str(self.ca_file),
            "redis_socket_timeout_seconds": "5",
            "key_prefix": "tls-test:",
        }
        if sentinel:
            base["redis_url"] = "rediss:///3"
            base["redis_sentinels"] = f"127.0.0.1:{self.sentinel_port}"
            base["redis_sentinel_master"] = MASTER
        return Settings(**{**base, **changes})  # type: ignore[arg-type]


def _tls_args(directory: Path, port: int) -> list[str]:
    return [
        "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
        "--tls-cert-file", str(directory / "server.pem"),
        "--tls-key-file", str(directory / "server.key"),
        "--tls-ca-cert-file", str(directory / "ca.pem"),
        "--tls-auth-clients", "no",
        "--dir", str(directory),
    ]  # fmt: skip


def _answers(port: int, ca: Path, **login: Any) -> bool:
    client = redis.Redis(
        host="127.0.0.1", port=port, ssl=True, ssl_ca_certs=str(ca), socket_timeout=1, **login
    )
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TLSRedis]:
    directory = tmp_path_factory.mktemp("redis-tls")
    ca = CertificateAuthority.generate("redis test CA")
    issued = ca.sign(
        Request(
            common_name="redis",
            ip_addresses=("127.0.0.1",),
            usages=("digital signature", "key encipherment", "server auth", "client auth"),
        )
    )
    (directory / "ca.pem").write_bytes(ca.cert_pem)
    (directory / "server.pem").write_bytes(issued.cert_pem)
    (directory / "server.key").write_bytes(issued.key_pem)
    password_file = directory / "password"
    password_file.write_text(PASSWORD + "\n")  # as a mounted Secret may end
    redis_port, sentinel_port = free_port(), free_port()
    procs: list[subprocess.Popen[bytes]] = []
    log = (directory / "servers.log").open("ab")
    try:
        server = [
            "redis-server", *_tls_args(directory, redis_port),
            "--save", "", "--appendonly", "no",
            "--user", "default", "off",
            "--user", USER, "on", f">{PASSWORD}", "~*", "&*", "+@all",
        ]  # fmt: skip
        procs.append(subprocess.Popen(server, stdout=log, stderr=subprocess.STDOUT))
        wait_for(
            lambda: _answers(redis_port, directory / "ca.pem", username=USER, password=PASSWORD),
            15,
            "the TLS Redis",
        )
        config = directory / "sentinel.conf"
        config.write_text(
            f"sentinel monitor {MASTER} 127.0.0.1 {redis_port} 1\n"
            f"sentinel auth-user {MASTER} {USER}\n"
            f"sentinel auth-pass {MASTER} {PASSWORD}\n"
            "tls-replication yes\n"
        )
        procs.append(
            subprocess.Popen(
                ["redis-server", str(config), "--sentinel", *_tls_args(directory, sentinel_port)],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
        wait_for(lambda: _answers(sentinel_port, directory / "ca.pem"), 15, "the TLS Sentinel")
        yield TLSRedis(redis_port, sentinel_port, directory / "ca.pem", password_file)
    finally:
        stop_processes(procs, grace=5)
        log.close()


@pytest.mark.parametrize("sentinel", [False, True], ids=["direct", "sentinel"])
def test_the_work_queue_reaches_a_tls_redis_with_its_acl_user(
    tls_redis: TLSRedis, sentinel: bool
) -> None:
    client = build_redis(tls_redis.settings(sentinel=sentinel))
    try:
        client.set("tls-test:probe", "ok", ex=30)
        assert client.get("tls-test:probe") == b"ok"
        assert client.acl_whoami() == USER
        pooled = client.connection_pool.get_connection()
        assert any("SSL" in cls.__name__ for cls in type(pooled).__mro__)
    finally:
        client.close()


@pytest.mark.parametrize("sentinel", [False, True], ids=["direct", "sentinel"])
def test_the_broker_carries_a_task_message_over_tls_with_its_acl_user(
    tls_redis: TLSRedis, sentinel: bool
) -> None:
    app = build_celery_app(tls_redis.settings(sentinel=sentinel))
    with app.connection_for_write() as conn:
        transport = type(conn.transport).__name__
        assert transport == ("SentinelTransport" if sentinel else "RedisTransport")
        assert type(conn.transport).__module__ == "tenantdb.adapters.broker"  # the guarded one
        name = f"tls-probe-{int(sentinel)}"
        queue = conn.SimpleQueue(name)
        client = build_redis(tls_redis.settings(sentinel=sentinel))
        try:
            queue.put({"order": "probe"})
            # The message waits in the Redis the work queue uses, under tenantdb's key prefix.
            assert client.llen(f"tls-test:{name}") == 1
            message = queue.get(timeout=10)
            assert message.payload == {"order": "probe"}
            message.ack()
            channel: Any = conn.default_channel
            pooled = channel.client.connection_pool.get_connection()
            assert any("SSL" in cls.__name__ for cls in type(pooled).__mro__)
        finally:
            queue.close()
            client.close()


@pytest.mark.parametrize("sentinel", [False, True], ids=["direct", "sentinel"])
def test_without_the_ca_the_server_is_not_trusted(tls_redis: TLSRedis, sentinel: bool) -> None:
    client = build_redis(tls_redis.settings(sentinel=sentinel, redis_tls_ca_file=""))
    try:
        with pytest.raises(redis.ConnectionError) as raised:
            client.ping()
    finally:
        client.close()
    # Directly, the handshake fails; through Sentinel, no Sentinel can be asked for the master.
    said = "No master found" if sentinel else "certificate verify failed"
    assert said in str(raised.value)
    assert PASSWORD not in str(raised.value)
    # The broker trusts the server no more than the work queue does.
    app = build_celery_app(tls_redis.settings(sentinel=sentinel, redis_tls_ca_file=""))
    with app.connection_for_write() as conn, pytest.raises(OperationalError) as refused:
        conn.ensure_connection(max_retries=1, interval_start=0)
    assert PASSWORD not in str(refused.value)


@pytest.mark.parametrize("sentinel", [False, True], ids=["direct", "sentinel"])
def test_without_the_password_redis_refuses_and_no_password_is_named(
    tls_redis: TLSRedis, sentinel: bool, tmp_path: Path
) -> None:
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-password")
    client = build_redis(tls_redis.settings(sentinel=sentinel, redis_password_file=str(wrong)))
    try:
        with pytest.raises(redis.AuthenticationError) as raised:
            client.ping()
    finally:
        client.close()
    assert "not-the-password" not in str(raised.value)
    assert PASSWORD not in str(raised.value)
