"""tenantdb's own OpenBao adapter (hvac underneath) against the stand-in, over mutual TLS.

What the engine relies on: a session logs in with the ServiceAccount token read afresh and the
client certificate, reads and writes the order role, revokes the role's leases (dropping its SQL
users) and deletes it, and revokes its own token on the way out; failures carry OpenBao's status
and messages but never the token or the JWT; no key file reaches the disk. Sessions that follow
each other keep their TLS connection, and one the server dropped costs the next session nothing.
"""

from __future__ import annotations

import http.server
import multiprocessing
import ssl
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import hvac.exceptions
import pytest

from devstack.openbao.bootstrap import KUBE_MOUNT, OPERATOR_POLICY, OPERATOR_ROLE
from devstack.openbao.pki import LocalPKI
from devstack.tests.openbao.openbao_support import Platform, sql_user_exists
from tenantdb.adapters.openbao import (
    ClientCertificate,
    OpenBaoError,
    OpenBaoSession,
    open_session,
)
from tenantdb.adapters.openbao import _error as openbao_error
from tenantdb.core.mariadbdatabase.openbao import build_role, should_write_role


def _leftover_key_dirs() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("tenantdb-openbao-*")}


def test_a_session_writes_the_role_once_and_removes_it_with_its_users(
    tls_platform: Platform,
    pki: LocalPKI,
    client_certificate: ClientCertificate,
    schemas: Callable[[], str],
) -> None:
    schema = schemas()
    role = f"order.{tls_platform.cp_namespace}.adapter-0000-database"
    desired = build_role(schema, tls_platform.tenant.keystone_namespace)
    reads: list[str] = []

    def read_jwt() -> str:
        jwt = tls_platform.reviewer.issue("c5c3-system", "c5c3-operator")
        reads.append(jwt)
        return jwt

    before = _leftover_key_dirs()
    args = (tls_platform.server.url, KUBE_MOUNT, "c5c3-operator", read_jwt, client_certificate)
    with open_session(*args) as session:
        assert session.read_role(role) is None
        session.write_role(role, desired.to_request())
        assert not should_write_role(session.read_role(role), desired)
    with open_session(*args) as session:
        assert not should_write_role(session.read_role(role), desired)
    assert len(reads) == 2, "the token is read afresh at every login"
    assert _leftover_key_dirs() == before, "no key file is left on disk"

    generator = tls_platform.client(
        cert=(pki.client.cert_file, pki.client.key_file), verify=pki.ca_file
    )
    generator.auth.kubernetes.login(
        "order-db",
        tls_platform.reviewer.issue(tls_platform.cp_namespace, "order-db-creds"),
        mount_point=KUBE_MOUNT,
    )
    username = generator.secrets.database.generate_credentials(
        role, mount_point="database/mariadb"
    )["data"]["username"]
    assert sql_user_exists(username)

    with open_session(*args) as session:
        session.revoke_role_leases(role)
        session.delete_role(role)
        session.delete_role(role)  # absent counts as deleted
        assert session.read_role(role) is None
    assert not sql_user_exists(username)


def _session_args(platform: Platform, cert: ClientCertificate) -> tuple[object, ...]:
    def read_jwt() -> str:
        return platform.reviewer.issue("c5c3-system", "c5c3-operator")

    return (platform.server.url, KUBE_MOUNT, "c5c3-operator", read_jwt, cert)


def test_sessions_in_a_row_keep_one_tls_connection_and_log_in_each_time(
    tls_platform: Platform, client_certificate: ClientCertificate
) -> None:
    args = _session_args(tls_platform, client_certificate)
    server = tls_platform.server
    before = _calls(tls_platform)
    accepted = server.connections_accepted()
    for _ in range(3):
        with open_session(*args) as session:  # type: ignore[arg-type]
            assert session.read_role("order.absent.x-0000-database") is None
    assert server.connections_accepted() - accepted <= 1, "each session made a TLS connection"
    calls = _calls(tls_platform) - before
    assert calls["login"] == 3, "every session logs in"
    assert calls["revoke-self"] == 3, "every session revokes its own token"


def _calls(platform: Platform) -> Counter[str]:
    """The OpenBao requests served so far, by the last part of their path."""
    out: Counter[str] = Counter()
    for row in platform.server.requests.snapshot()["requests"]:
        out[row["path"].rsplit("/", 1)[-1]] += row["count"]
    return out


def test_a_forked_child_opens_its_own_connection_and_leaves_the_parents_alone(
    tls_platform: Platform, client_certificate: ClientCertificate
) -> None:
    args = _session_args(tls_platform, client_certificate)
    server = tls_platform.server
    with open_session(*args) as session:  # type: ignore[arg-type]
        assert session.read_role("order.absent.x-0000-database") is None
    accepted = server.connections_accepted()
    # As a prefork pool child is forked from a worker that already talked to OpenBao. The
    # stand-in's token reviewer lives in this process: the child's token is issued here.
    jwt = tls_platform.reviewer.issue("c5c3-system", "c5c3-operator")
    child_args = (*args[:3], lambda: jwt, *args[4:])
    child = multiprocessing.get_context("fork").Process(target=_one_session, args=(child_args,))
    child.start()
    child.join(30)
    assert child.exitcode == 0, "the child's session failed"
    assert server.connections_accepted() == accepted + 1, "the child used the parent's connection"
    with open_session(*args) as session:  # type: ignore[arg-type]
        assert session.read_role("order.absent.x-0000-database") is None
    assert server.connections_accepted() == accepted + 1, "the parent lost its connection"


def _one_session(args: tuple[object, ...]) -> None:
    with open_session(*args) as session:  # type: ignore[arg-type]
        session.read_role("order.absent.x-0000-database")


def test_a_connection_the_server_dropped_costs_the_next_session_nothing(
    tls_platform: Platform, client_certificate: ClientCertificate
) -> None:
    args = _session_args(tls_platform, client_certificate)
    with open_session(*args) as session:  # type: ignore[arg-type]
        assert session.read_role("order.absent.x-0000-database") is None
    tls_platform.server.drop_connections()
    with open_session(*args) as session:  # type: ignore[arg-type]
        assert session.read_role("order.absent.x-0000-database") is None


def test_a_denied_login_is_a_403_without_the_jwt(
    tls_platform: Platform, client_certificate: ClientCertificate
) -> None:
    jwt = tls_platform.reviewer.issue("tenant-a", "intruder")
    session = open_session(
        tls_platform.server.url, KUBE_MOUNT, "c5c3-operator", lambda: jwt, client_certificate
    )
    with pytest.raises(OpenBaoError) as denied:
        session.__enter__()
    assert denied.value.permission_denied
    assert str(denied.value).startswith("openbao: 403 on POST /v1/auth/kubernetes/management/login")
    assert jwt not in str(denied.value)


def test_a_role_the_connection_does_not_allow_is_a_400(
    tls_platform: Platform, client_certificate: ClientCertificate, schemas: Callable[[], str]
) -> None:
    role = "order.elsewhere.x-0000-database"
    args = (
        tls_platform.server.url,
        KUBE_MOUNT,
        "c5c3-operator",
        lambda: tls_platform.reviewer.issue("c5c3-system", "c5c3-operator"),
        client_certificate,
    )
    body = build_role(schemas(), tls_platform.tenant.keystone_namespace).to_request()
    with open_session(*args) as session, pytest.raises(OpenBaoError) as refused:
        session.write_role(role, body)
    assert refused.value.status == 400
    assert not refused.value.permission_denied
    assert str(refused.value) == (
        f'openbao: 400 on POST /v1/database/mariadb/roles/{role}: "{role}" is not an allowed role'
    )


def test_an_unreachable_server_is_a_transport_error(client_certificate: ClientCertificate) -> None:
    session = open_session(
        "https://127.0.0.1:9", KUBE_MOUNT, "c5c3-operator", lambda: "jwt", client_certificate
    )
    with pytest.raises(OpenBaoError, match=r"^openbao: POST /v1/auth/.*/login: ConnectionError"):
        session.__enter__()


def test_a_plain_http_server_never_sees_the_token(make_platform: Callable[..., Platform]) -> None:
    plain = make_platform()
    assert plain.server.url.startswith("http://")
    reads: list[str] = []

    def read_jwt() -> str:
        reads.append("read")
        return plain.reviewer.issue("c5c3-system", "c5c3-operator")

    session = open_session(plain.server.url, KUBE_MOUNT, "c5c3-operator", read_jwt, None)
    with pytest.raises(OpenBaoError, match="OpenBao must be reached over https"):
        session.__enter__()
    assert reads == [], "the token was not even read"


Answer = Callable[[http.server.BaseHTTPRequestHandler], None]


class _Listener:
    """A loopback HTTP(S) server that answers every request with `answer` and keeps its path."""

    def __init__(self, answer: Answer, tls: ssl.SSLContext | None = None) -> None:
        self.seen: list[str] = []
        listener = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _any(self) -> None:
                listener.seen.append(self.path)
                answer(self)

            do_GET = do_POST = do_PUT = _any  # noqa: N815 (the names http.server calls)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_port
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_redirect_is_refused_and_the_token_never_follows_it(
    pki: LocalPKI, client_certificate: ClientCertificate
) -> None:
    plain = _Listener(lambda handler: handler.send_error(404))

    def redirect(handler: http.server.BaseHTTPRequestHandler) -> None:
        handler.send_response(307)
        handler.send_header("Location", f"http://127.0.0.1:{plain.port}{handler.path}")
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(pki.server.cert_file, pki.server.key_file)
    redirecting = _Listener(redirect, tls)
    try:
        session = open_session(
            f"https://127.0.0.1:{redirecting.port}",
            KUBE_MOUNT,
            "c5c3-operator",
            lambda: "the-serviceaccount-jwt",
            client_certificate,
        )
        with pytest.raises(OpenBaoError) as refused:
            session.__enter__()
    finally:
        redirecting.stop()
        plain.stop()
    assert redirecting.seen == [f"/v1/auth/{KUBE_MOUNT}/login"]
    assert plain.seen == [], "nothing, the token least of all, went where the redirect pointed"
    assert refused.value.status == 307
    assert str(refused.value) == (
        f"openbao: 307 on POST /v1/auth/{KUBE_MOUNT}/login: a redirect to another address,"
        " which tenantdb does not follow"
    )


def test_a_token_in_openbao_s_own_error_text_is_replaced() -> None:
    token = "s.Xk2ZGfFqEhQzVw3mN8pRtY4b"
    exc = hvac.exceptions.Forbidden(errors=[f"token {token} has been revoked"])
    error = openbao_error(exc, "GET", "/v1/database/mariadb/roles/x")
    assert str(error) == (
        "openbao: 403 on GET /v1/database/mariadb/roles/x: token <token> has been revoked"
    )


def _reusing(
    platform: Platform, cert: ClientCertificate, seconds: float
) -> Callable[[], AbstractContextManager[OpenBaoSession]]:
    """Open sessions that keep the token of a login for ``seconds``, as a worker does."""
    args = _session_args(platform, cert)
    return lambda: open_session(*args, token_reuse=seconds)  # type: ignore[arg-type]


def _kept_token_then_policy_moved(
    platform: Platform, cert: ClientCertificate, *, allow: bool
) -> Callable[[], AbstractContextManager[OpenBaoSession]]:
    """A session opener whose token was kept before the operator's auth role moved to a new
    policy (allowing as much as the old one, or nothing)."""
    session = _reusing(platform, cert, 60.0)
    with session() as bao:
        assert bao.read_role("order.absent.x-0000-database") is None
    _move_operator_to_new_policy(platform, allow=allow)
    return session


def test_sessions_within_the_reuse_window_share_one_login_and_its_end_revokes_the_token(
    tls_platform: Platform, client_certificate: ClientCertificate
) -> None:
    session = _reusing(tls_platform, client_certificate, 1.0)
    before = _calls(tls_platform)
    for _ in range(3):
        with session() as bao:
            assert bao.read_role("order.absent.x-0000-database") is None
    calls = _calls(tls_platform) - before
    assert calls["login"] == 1, "sessions inside the window logged in again"
    assert calls["revoke-self"] == 0, "a kept token was revoked while still in use"
    time.sleep(1.1)
    with session() as bao:
        assert bao.read_role("order.absent.x-0000-database") is None
    calls = _calls(tls_platform) - before
    assert calls["login"] == 2, "a token past the window was used again"
    assert calls["revoke-self"] == 1, "the token past the window was not revoked"


def _move_operator_to_new_policy(platform: Platform, *, allow: bool) -> None:
    """As an OpenBao admin would: new logins get a new policy, and the old one allows nothing
    more, so tokens issued before the change are refused."""
    root = platform.root
    rules = root.sys.read_policy(OPERATOR_POLICY)["data"]["rules"]
    root.sys.create_or_update_policy(
        "c5c3-operator-v2", rules if allow else 'path "sys/nothing" { capabilities = ["deny"] }'
    )
    root.write_data(
        f"auth/{KUBE_MOUNT}/role/{OPERATOR_ROLE}",
        data={
            "bound_service_account_names": ["c5c3-operator"],
            "bound_service_account_namespaces": ["c5c3-system"],
            "token_policies": ["c5c3-operator-v2"],
            "token_ttl": "15m",
        },
    )
    root.sys.create_or_update_policy(
        OPERATOR_POLICY, 'path "sys/nothing" { capabilities = ["deny"] }'
    )


def test_a_kept_token_the_server_refuses_is_replaced_by_a_fresh_login(
    tls_platform: Platform, client_certificate: ClientCertificate
) -> None:
    session = _kept_token_then_policy_moved(tls_platform, client_certificate, allow=True)
    before = _calls(tls_platform)
    with session() as bao:
        assert bao.read_role("order.absent.x-0000-database") is None
    with session() as bao:
        assert bao.read_role("order.absent.x-0000-database") is None
    calls = _calls(tls_platform) - before
    assert calls["login"] == 1, "the refused token was not replaced once, and kept"


def test_a_fresh_token_the_server_refuses_is_the_answer(
    tls_platform: Platform, client_certificate: ClientCertificate
) -> None:
    session = _kept_token_then_policy_moved(tls_platform, client_certificate, allow=False)
    before = _calls(tls_platform)
    with pytest.raises(OpenBaoError) as refused, session() as bao:
        bao.read_role("order.absent.x-0000-database")
    assert refused.value.permission_denied
    assert str(refused.value).startswith(
        "openbao: 403 on GET /v1/database/mariadb/roles/order.absent.x-0000-database"
    )
    calls = _calls(tls_platform) - before
    assert calls["login"] == 1, "a refused fresh token logged in again"
    assert calls["revoke-self"] == 2, "the refused token and the fresh one were not both revoked"
