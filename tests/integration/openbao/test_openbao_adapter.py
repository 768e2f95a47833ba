"""tenantdb's own OpenBao adapter (hvac underneath) against the real OpenBao, over mutual TLS.

What the engine relies on: a session logs in with the ServiceAccount token read afresh and the
client certificate, reads and writes the order role, revokes the role's leases (dropping its SQL
users) and deletes it, and revokes its own token on the way out; failures carry OpenBao's status
and messages but never the token or the JWT; no key file reaches the disk. Sessions that follow
each other keep their TLS connection, and one the network dropped costs the next session nothing.
The connections are counted, and cut, by a proxy in front of OpenBao; the requests are read from
OpenBao's audit log.
"""

from __future__ import annotations

import http.server
import multiprocessing
import ssl
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import hvac.exceptions
import pytest

from devstack.ca import CertificateAuthority, Request
from tenantdb.adapters.openbao import (
    ClientCertificate,
    OpenBaoError,
    OpenBaoSession,
    open_session,
)
from tenantdb.adapters.openbao import _error as openbao_error
from tenantdb.core.mariadbdatabase.openbao import build_role, should_write_role
from tests.integration.openbao.conftest import (
    CP_NAMESPACE,
    KEYSTONE_NAMESPACE,
    KUBE_MOUNT,
    OPERATOR_POLICY,
    OPERATOR_ROLE,
    Bao,
    sql_user_exists,
)


def _leftover_key_dirs() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("tenantdb-openbao-*")}


def test_a_session_writes_the_role_once_and_removes_it_with_its_users(
    bao: Bao, client_certificate: ClientCertificate, schemas: Callable[[], str]
) -> None:
    schema = schemas()
    role = f"order.{CP_NAMESPACE}.adapter-{schema[4:12]}-database"
    desired = build_role(schema, KEYSTONE_NAMESPACE)
    reads: list[str] = []

    def read_jwt() -> str:
        jwt = bao.jwt()
        reads.append(jwt)
        return jwt

    before = _leftover_key_dirs()
    args = (bao.url, KUBE_MOUNT, OPERATOR_ROLE, read_jwt, client_certificate)
    with open_session(*args) as session:
        assert session.read_role(role) is None
        session.write_role(role, desired.to_request())
        assert not should_write_role(session.read_role(role), desired)
    with open_session(*args) as session:
        assert not should_write_role(session.read_role(role), desired)
    assert len(reads) == 2, "the token is read afresh at every login"
    assert _leftover_key_dirs() == before, "no key file is left on disk"

    # As ESO's generator does: a login as `order-db` (with the ServiceAccount tenantdb makes
    # for every order's generator), then the role's credentials.
    bao.platform.cluster().apply(
        "serviceaccounts",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "order-db-creds"}},
        CP_NAMESPACE,
    )
    generator = hvac.Client(
        url=bao.url, cert=bao.platform.admin_client_cert, verify=str(bao.platform.ca_file)
    )
    try:
        generator.auth.kubernetes.login(
            "order-db", bao.jwt(CP_NAMESPACE, "order-db-creds"), mount_point=KUBE_MOUNT
        )
        username = generator.secrets.database.generate_credentials(
            role, mount_point="database/mariadb"
        )["data"]["username"]
    finally:
        generator.adapter.close()
    assert sql_user_exists(username)

    with open_session(*args) as session:
        session.revoke_role_leases(role)
        session.delete_role(role)
        session.delete_role(role)  # absent counts as deleted
        assert session.read_role(role) is None
    assert not sql_user_exists(username)


def test_sessions_in_a_row_keep_one_tls_connection_and_log_in_each_time(
    bao: Bao, client_certificate: ClientCertificate
) -> None:
    args = bao.session_args(client_certificate)
    before = bao.calls()
    accepted = bao.proxy.accepted
    for _ in range(3):
        with open_session(*args) as session:
            assert session.read_role("order.absent.x-0000-database") is None
    assert bao.proxy.accepted - accepted <= 1, "each session made a TLS connection"
    calls = bao.calls() - before
    assert calls["login"] == 3, "every session logs in"
    assert calls["revoke-self"] == 3, "every session revokes its own token"


def test_a_forked_child_opens_its_own_connection_and_leaves_the_parents_alone(
    bao: Bao, client_certificate: ClientCertificate
) -> None:
    args = bao.session_args(client_certificate)
    with open_session(*args) as session:
        assert session.read_role("order.absent.x-0000-database") is None
    accepted = bao.proxy.accepted
    # As a prefork pool child is forked from a worker that already talked to OpenBao; its
    # token is issued before the fork, so that the child talks to OpenBao alone.
    jwt = bao.jwt()
    child_args = (*args[:3], lambda: jwt, *args[4:])
    child = multiprocessing.get_context("fork").Process(target=_one_session, args=(child_args,))
    child.start()
    child.join(30)
    assert child.exitcode == 0, "the child's session failed"
    assert bao.proxy.accepted == accepted + 1, "the child used the parent's connection"
    with open_session(*args) as session:
        assert session.read_role("order.absent.x-0000-database") is None
    assert bao.proxy.accepted == accepted + 1, "the parent lost its connection"


def _one_session(args: tuple[object, ...]) -> None:
    with open_session(*args) as session:  # type: ignore[arg-type]
        session.read_role("order.absent.x-0000-database")


def test_a_connection_the_network_dropped_costs_the_next_session_nothing(
    bao: Bao, client_certificate: ClientCertificate
) -> None:
    args = bao.session_args(client_certificate)
    with open_session(*args) as session:
        assert session.read_role("order.absent.x-0000-database") is None
    assert bao.proxy.cut(abrupt=False) == 1, "the session's connection was kept open"
    with open_session(*args) as session:
        assert session.read_role("order.absent.x-0000-database") is None


def test_a_denied_login_is_a_403_without_the_jwt(
    bao: Bao, client_certificate: ClientCertificate
) -> None:
    # A ServiceAccount of a tenant's namespace, which the operator's auth role does not bind.
    jwt = bao.jwt("tenant-a", "default")
    session = open_session(bao.url, KUBE_MOUNT, OPERATOR_ROLE, lambda: jwt, client_certificate)
    with pytest.raises(OpenBaoError) as denied:
        session.__enter__()
    assert denied.value.permission_denied
    assert str(denied.value).startswith("openbao: 403 on POST /v1/auth/kubernetes/management/login")
    assert jwt not in str(denied.value)


def test_an_unreachable_server_is_a_transport_error(client_certificate: ClientCertificate) -> None:
    session = open_session(
        "https://127.0.0.1:9", KUBE_MOUNT, OPERATOR_ROLE, lambda: "jwt", client_certificate
    )
    with pytest.raises(OpenBaoError, match=r"^openbao: POST /v1/auth/.*/login: ConnectionError"):
        session.__enter__()


def test_a_plain_http_server_never_sees_the_token() -> None:
    plain = _Listener(lambda handler: handler.send_error(404))
    reads: list[str] = []

    def read_jwt() -> str:
        reads.append("read")
        return "the-serviceaccount-jwt"

    session = open_session(
        f"http://127.0.0.1:{plain.port}", KUBE_MOUNT, OPERATOR_ROLE, read_jwt, None
    )
    try:
        with pytest.raises(OpenBaoError, match="OpenBao must be reached over https"):
            session.__enter__()
    finally:
        plain.stop()
    assert reads == [], "the token was not even read"
    assert plain.seen == [], "nothing was sent"


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


def test_a_redirect_is_refused_and_the_token_never_follows_it(tmp_path: Path) -> None:
    ca = CertificateAuthority.generate()
    server = ca.sign(Request(common_name="127.0.0.1", ip_addresses=("127.0.0.1",)))
    client = ca.sign(Request(common_name="tenantdb", usages=("client auth",)))
    (tmp_path / "server.crt").write_bytes(server.cert_pem)
    (tmp_path / "server.key").write_bytes(server.key_pem)
    certificate = ClientCertificate(ca.cert_pem, client.cert_pem, client.key_pem)
    plain = _Listener(lambda handler: handler.send_error(404))

    def redirect(handler: http.server.BaseHTTPRequestHandler) -> None:
        handler.send_response(307)
        handler.send_header("Location", f"http://127.0.0.1:{plain.port}{handler.path}")
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(tmp_path / "server.crt", tmp_path / "server.key")
    redirecting = _Listener(redirect, tls)
    try:
        session = open_session(
            f"https://127.0.0.1:{redirecting.port}",
            KUBE_MOUNT,
            OPERATOR_ROLE,
            lambda: "the-serviceaccount-jwt",
            certificate,
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
    bao: Bao, cert: ClientCertificate, seconds: float
) -> Callable[[], AbstractContextManager[OpenBaoSession]]:
    """Open sessions that keep the token of a login for ``seconds``, as a worker does."""
    args = bao.session_args(cert)
    return lambda: open_session(*args, token_reuse=seconds)


def _kept_token_then_policy_moved(
    bao: Bao, cert: ClientCertificate, *, allow: bool
) -> Callable[[], AbstractContextManager[OpenBaoSession]]:
    """A session opener whose token was kept before the operator's auth role moved to a new
    policy (allowing as much as the old one, or nothing)."""
    session = _reusing(bao, cert, 60.0)
    with session() as kept:
        assert kept.read_role("order.absent.x-0000-database") is None
    _move_operator_to_new_policy(bao, allow=allow)
    return session


def test_sessions_within_the_reuse_window_share_one_login_and_its_end_revokes_the_token(
    bao: Bao, client_certificate: ClientCertificate
) -> None:
    session = _reusing(bao, client_certificate, 1.0)
    before = bao.calls()
    for _ in range(3):
        with session() as kept:
            assert kept.read_role("order.absent.x-0000-database") is None
    calls = bao.calls() - before
    assert calls["login"] == 1, "sessions inside the window logged in again"
    assert calls["revoke-self"] == 0, "a kept token was revoked while still in use"
    time.sleep(1.1)
    with session() as kept:
        assert kept.read_role("order.absent.x-0000-database") is None
    calls = bao.calls() - before
    assert calls["login"] == 2, "a token past the window was used again"
    assert calls["revoke-self"] == 1, "the token past the window was not revoked"


def _move_operator_to_new_policy(bao: Bao, *, allow: bool) -> None:
    """As an OpenBao admin would: new logins get a new policy, and the old one allows nothing
    more, so tokens issued before the change are refused."""
    root = bao.root()
    try:
        rules = root.sys.read_policy(OPERATOR_POLICY)["data"]["rules"]
        root.sys.create_or_update_policy(
            "c5c3-operator-v2", rules if allow else 'path "sys/nothing" { capabilities = ["deny"] }'
        )
        # A write names only what it changes: the role keeps its bindings and audience.
        root.write_data(
            f"auth/{KUBE_MOUNT}/role/{OPERATOR_ROLE}", data={"token_policies": ["c5c3-operator-v2"]}
        )
        root.sys.create_or_update_policy(
            OPERATOR_POLICY, 'path "sys/nothing" { capabilities = ["deny"] }'
        )
    finally:
        root.adapter.close()


def test_a_kept_token_the_server_refuses_is_replaced_by_a_fresh_login(
    private_bao: Bao, private_certificate: ClientCertificate
) -> None:
    bao = private_bao
    session = _kept_token_then_policy_moved(bao, private_certificate, allow=True)
    before = bao.calls()
    with session() as kept:
        assert kept.read_role("order.absent.x-0000-database") is None
    with session() as kept:
        assert kept.read_role("order.absent.x-0000-database") is None
    calls = bao.calls() - before
    assert calls["login"] == 1, "the refused token was not replaced once, and kept"


def test_a_fresh_token_the_server_refuses_is_the_answer(
    private_bao: Bao, private_certificate: ClientCertificate
) -> None:
    bao = private_bao
    session = _kept_token_then_policy_moved(bao, private_certificate, allow=False)
    before = bao.calls()
    with pytest.raises(OpenBaoError) as refused, session() as kept:
        kept.read_role("order.absent.x-0000-database")
    assert refused.value.permission_denied
    assert str(refused.value).startswith(
        "openbao: 403 on GET /v1/database/mariadb/roles/order.absent.x-0000-database"
    )
    calls = bao.calls() - before
    assert calls["login"] == 1, "a refused fresh token logged in again"
    assert calls["revoke-self"] == 2, "the refused token and the fresh one were not both revoked"
