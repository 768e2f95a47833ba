"""tenantdb's admin connection verifies a TLS failover group: the CA, the name, one context.

A real group of two MariaDB servers serves TLS with certificates of this module's CA (started
once for the module); tenantdb's `AdminPool` dials dc1 through an address map, as it does a
group outside the cluster, and must connect encrypted with the right CA and name, fail with a
wrong CA or name (naming no password), reach a group without TLS in plaintext only where it is
named for that, and otherwise (the default) refuse before any connect. The platform tests check
the seed a TLS group gets (`bloodraven/main-tls` and `spec.tls`) and that tenantdb's own reading
of it connects.
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from devstack.ca import CertificateAuthority
from devstack.mysql_group import MysqlGroup
from devstack.platform import MYSQL_TLS_SECRET, start_platform
from tenantdb.adapters.clusters import ClusterRegistry
from tenantdb.adapters.groupguard import GroupGuard
from tenantdb.adapters.kube import SECRET, client_from_kubeconfig
from tenantdb.adapters.mysqladmin import (
    AdminError,
    AdminLogin,
    AdminPool,
    Target,
    TLSRequiredError,
    tls_context,
)
from tenantdb.adapters.mysqldatabase import MysqlOrders
from tenantdb.core.keys import OrderKey
from tenantdb.core.mysqldatabase.sql import Statement
from tenantdb.settings import load_settings

NS = "bloodraven"
ADDRESS = f"mysql-main-dc1-internal.{NS}.svc.cluster.local:3306"
SERVER_NAME = f"mysql-main-dc1.{NS}.svc.cluster.local"
GROUP_ID = f"{NS}/main@uid-tls"
CIPHER = Statement("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
TLS_VERSION = Statement("SHOW SESSION STATUS LIKE 'Ssl_version'")


@pytest.fixture(scope="module")
def ca() -> CertificateAuthority:
    """The CA the group's certificates are issued by."""
    return CertificateAuthority.generate("tenantdb test MySQL CA")


@pytest.fixture(scope="module")
def group(ca: CertificateAuthority) -> Iterator[MysqlGroup]:
    """Two real MariaDB servers serving TLS, started once for the module."""
    running = MysqlGroup.start(tls=ca)
    yield running
    running.stop()


def _use_address_map(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TENANTDB_ADDRESS_MAP_FILE", str(path))
    load_settings.cache_clear()


@pytest.fixture
def address_map(
    group: MysqlGroup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """TENANTDB_ADDRESS_MAP_FILE maps dc1's in-cluster address to its real one."""
    host, port = group.address("dc1")
    path = tmp_path / "services.json"
    path.write_text(json.dumps({ADDRESS: f"{host}:{port}"}), encoding="utf-8")
    _use_address_map(path, monkeypatch)
    yield
    load_settings.cache_clear()


@pytest.fixture
def pool(address_map: None, admin_guard: GroupGuard) -> Iterator[AdminPool]:
    """A pool of the test's own, with a guard under the test's own prefix (so no circuit of
    another test leaks in)."""
    made = AdminPool(admin_guard)
    yield made
    made.close()


@pytest.fixture
def login(group: MysqlGroup) -> AdminLogin:
    """The group's operator login, with root's password as its fallback."""
    operator = group.account("operator")
    return AdminLogin(operator.username, operator.password, group.root_password)


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every `pymysql.connect` call's keyword arguments, the connect still made."""
    calls: list[dict[str, Any]] = []
    real = pymysql.connect

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(pymysql, "connect", spy)
    return calls


def _target(ca_pem: bytes | None, server_name: str = SERVER_NAME) -> Target:
    return Target(GROUP_ID, "dc1", ADDRESS, server_name, ca_pem)


def _status(pool: AdminPool, target: Target, login: AdminLogin) -> tuple[str, str]:
    with pool.session(target, login) as session:
        cipher = session.query(CIPHER)
        version = session.query(TLS_VERSION)
    return str(cipher[0][1]), str(version[0][1])


def _refusal(pool: AdminPool, target: Target, login: AdminLogin) -> AdminError:
    with pytest.raises(AdminError) as failed, pool.session(target, login):
        pytest.fail("the session opened")
    return failed.value


def _assert_names_no_password(error: BaseException, login: AdminLogin) -> None:
    shown = "".join(traceback.format_exception(error)) + repr(error.args)
    for secret in (login.password, login.root_password):
        assert secret
        assert secret not in shown


# ------------------------------------------------------------ the group's certificates


def test_each_site_serves_its_own_server_certificate_from_0600_files(
    group: MysqlGroup, ca: CertificateAuthority
) -> None:
    assert group.tls is not None
    assert group.tls.ca_pem == ca.cert_pem
    for site in group.sites:
        directory = group.directory / site / "tls"
        for name in ("tls.crt", "tls.key", "ca.crt"):
            assert (directory / name).stat().st_mode & 0o777 == 0o600, name
        cert = x509.load_pem_x509_certificate((directory / "tls.crt").read_bytes())
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert set(names.get_values_for_type(x509.DNSName)) == {
            f"mysql-main-{site}.{NS}.svc.cluster.local",
            f"mysql-main-{site}-internal.{NS}.svc.cluster.local",
        }
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        assert list(usages) == [ExtendedKeyUsageOID.SERVER_AUTH]
        assert cert.issuer == ca.cert.subject
        with group.connect(site) as conn, conn.cursor() as cursor:
            cursor.execute("SELECT @@ssl_cert, @@have_ssl")
            assert cursor.fetchone() == (str(directory / "tls.crt"), "YES")


def test_the_groups_own_connections_stay_plaintext_and_replicate(group: MysqlGroup) -> None:
    with group.connect("dc1") as conn, conn.cursor() as cursor:
        cursor.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        assert cursor.fetchone() == ("Ssl_cipher", "")
    assert group.wait_replicated()
    assert group.topology()["dc2"]["sql_running"] == "Yes"


# ------------------------------------------------------------ tenantdb's admin connection


def test_the_right_ca_and_name_connect_encrypted(
    pool: AdminPool, login: AdminLogin, ca: CertificateAuthority
) -> None:
    cipher, version = _status(pool, _target(ca.cert_pem), login)
    assert cipher, "the session is not encrypted"
    assert version in {"TLSv1.2", "TLSv1.3"}


def test_a_wrong_ca_fails_and_names_no_password(pool: AdminPool, login: AdminLogin) -> None:
    other = CertificateAuthority.generate("some other CA")
    failure = _refusal(pool, _target(other.cert_pem), login)
    assert "CERTIFICATE_VERIFY_FAILED" in str(failure)
    assert failure.code == 2003
    _assert_names_no_password(failure, login)


@pytest.mark.parametrize(
    "wrong_name",
    [f"mysql-main-dc2.{NS}.svc.cluster.local", f"mysql-other-dc1.{NS}.svc.cluster.local"],
)
def test_the_right_ca_with_a_wrong_name_fails_and_names_no_password(
    pool: AdminPool, login: AdminLogin, ca: CertificateAuthority, wrong_name: str
) -> None:
    failure = _refusal(pool, _target(ca.cert_pem, wrong_name), login)
    assert "CERTIFICATE_VERIFY_FAILED" in str(failure)
    assert "Hostname mismatch" in str(failure)
    _assert_names_no_password(failure, login)


def test_one_context_per_ca_and_name_serves_every_connect(
    address_map: None,
    admin_guard: GroupGuard,
    login: AdminLogin,
    ca: CertificateAuthority,
    connects: list[dict[str, Any]],
) -> None:
    context = tls_context(ca.cert_pem, SERVER_NAME)
    assert tls_context(bytes(bytearray(ca.cert_pem)), SERVER_NAME) is context
    assert tls_context(ca.cert_pem, f"mysql-main-dc2.{NS}.svc.cluster.local") is not context
    for _ in range(2):
        fresh = AdminPool(admin_guard)
        try:
            cipher, _version = _status(fresh, _target(ca.cert_pem), login)
        finally:
            fresh.close()
        assert cipher
    assert len(connects) == 2
    assert all(call["ssl"] is context for call in connects)


def _fresh_pool(
    monkeypatch: pytest.MonkeyPatch, admin_guard: GroupGuard, **env: str | None
) -> AdminPool:
    for name, value in env.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    load_settings.cache_clear()
    return AdminPool(admin_guard)


@pytest.mark.parametrize(
    "env",
    [
        pytest.param({"TENANTDB_MYSQL_PLAINTEXT_GROUPS": f"other/main, {NS}/main"}, id="named"),
        pytest.param({"TENANTDB_MYSQL_PLAINTEXT_GROUPS": f"{NS}/*"}, id="its-namespace"),
        pytest.param({"TENANTDB_MYSQL_REQUIRE_TLS": "false"}, id="tls-not-required"),
    ],
)
def test_a_group_without_tls_is_dialled_in_plaintext_only_where_allowed(
    address_map: None,
    admin_guard: GroupGuard,
    login: AdminLogin,
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
) -> None:
    unset: dict[str, str | None] = {
        "TENANTDB_MYSQL_PLAINTEXT_GROUPS": None,
        "TENANTDB_MYSQL_REQUIRE_TLS": None,
    }
    fresh = _fresh_pool(monkeypatch, admin_guard, **{**unset, **env})
    try:
        cipher, version = _status(fresh, _target(None), login)
    finally:
        fresh.close()
        load_settings.cache_clear()
    assert (cipher, version) == ("", "")


@pytest.mark.parametrize(
    "allowed",
    [None, f"other/main,{NS}/main-tls,{NS}/mai*"],
    ids=["default", "other-groups-named"],
)
def test_a_group_without_tls_is_refused_by_default_before_any_connect(
    address_map: None,
    admin_guard: GroupGuard,
    login: AdminLogin,
    monkeypatch: pytest.MonkeyPatch,
    connects: list[dict[str, Any]],
    allowed: str | None,
) -> None:
    fresh = _fresh_pool(
        monkeypatch,
        admin_guard,
        TENANTDB_MYSQL_REQUIRE_TLS=None,
        TENANTDB_MYSQL_PLAINTEXT_GROUPS=allowed,
    )
    try:
        with pytest.raises(TLSRequiredError) as refused, fresh.session(_target(None), login):
            pytest.fail("the session opened")
    finally:
        fresh.close()
        load_settings.cache_clear()
    assert connects == []
    assert "set the group's spec.tls, or name it in TENANTDB_MYSQL_PLAINTEXT_GROUPS" in str(
        refused.value
    )


# ------------------------------------------------------------ the platform's seed


def test_a_platform_refuses_tls_that_does_not_fit_its_seed(
    tmp_path: Path, group: MysqlGroup
) -> None:
    with pytest.raises(ValueError, match="another CA"):
        start_platform(
            tmp_path, ("management",), mysql_group=group, ca=CertificateAuthority.generate()
        )
    with pytest.raises(ValueError, match="needs a MySQL failover group"):
        start_platform(tmp_path, ("management",), mysql_tls=True)
    assert not (tmp_path / "kubeconfig").exists(), "nothing started"


@pytest.mark.parametrize("owned", [False, True], ids=["group-passed-in", "platform-starts-it"])
def test_the_platform_seeds_the_groups_tls_and_tenantdb_connects_through_it(
    tmp_path: Path,
    group: MysqlGroup,
    monkeypatch: pytest.MonkeyPatch,
    owned: bool,
    admin_guard: GroupGuard,
) -> None:
    with start_platform(
        tmp_path / "state",
        ("management",),
        mysql_group=True if owned else group,
        mysql_tls=owned,
    ) as platform:
        assert platform.ca is not None
        assert platform.mysql_group is not None
        assert platform.mysql_group.tls is not None
        assert platform.mysql_group.tls.ca_pem == platform.ca_file.read_bytes()
        kube = client_from_kubeconfig(str(platform.kubeconfig_path), "management", "")
        try:
            orders = MysqlOrders(ClusterRegistry({"": lambda: kube}))
            key = OrderKey("mysqldatabase", NS, "tls-probe")
            seeded = orders.group(key, "main")
            assert seeded is not None
            assert seeded["spec"]["tls"] == {
                "issuerRef": {"name": "openbao-ca-issuer", "kind": "ClusterIssuer"},
                "secretName": MYSQL_TLS_SECRET,
            }
            raw = kube.get_or_none(SECRET, NS, MYSQL_TLS_SECRET)
            assert raw is not None
            assert raw["type"] == "kubernetes.io/tls"
            secret = orders.secret(key, MYSQL_TLS_SECRET)
            assert secret is not None
            assert set(secret.values) == {"tls.crt", "tls.key", "ca.crt"}
            assert secret.values["ca.crt"].encode() == platform.ca.cert_pem
            target, login = orders.admin(key, seeded, "dc1")
        finally:
            kube.api.close()
        assert target.server_name == platform.mysql_server_name("dc1") == SERVER_NAME
        assert target.address == platform.mysql_service("dc1") == ADDRESS
        assert target.ca_pem == platform.ca.cert_pem
        _use_address_map(Path(platform.env["TENANTDB_ADDRESS_MAP_FILE"]), monkeypatch)
        fresh = AdminPool(admin_guard)
        try:
            with fresh.session(target, login) as session:
                cipher = session.query(CIPHER)[0][1]
                user = session.query(Statement("SELECT CURRENT_USER()"))[0][0]
        finally:
            fresh.close()
            load_settings.cache_clear()
        assert cipher
        assert user == "bloodraven@%"
    if not owned:
        assert group.is_running("dc1"), "a group passed in is left running"
