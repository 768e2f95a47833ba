"""The mariadb-operator stand-in's `Database` behaves as upstream mariadb-operator's does.

One table per point, each calling the stand-in's own code: the CRD as `devstack.crds.mariadb`
builds it (read as data, and served by a real kube-apiserver for its defaults, validation and
immutability), the controller's pure decisions (kind, schema name, options, Ready condition,
requeue and retry, finalization), the SQL text, and the controller's reconcile run once per case
on that cluster with the MariaDB server replaced by a fake at the driver's `connect`:

1. spec: `mariaDbRef` required and immutable as a whole (`name`, `namespace`, `kind`, `waitForIt`
   defaulting to true), `characterSet` (`utf8`) and `collate` (`utf8_general_ci`) defaulted and
   immutable, `name` overriding metadata.name (at most 80 characters, immutable),
   `requeueInterval`, `retryInterval` and `cleanupPolicy` (`Skip` | `Delete`).
2. status: `conditions` only; printer columns Ready, Status, CharSet, Collate, MariaDB, Age, Name;
   short name `dmdb`.
3. create: an existing schema is left alone, else `CREATE DATABASE … CHARACTER SET … COLLATE …`;
   the finalizer comes after the first successful create; Ready `Created`/`Created`, or `Failed`
   with `MariaDB not found`, `Error connecting to MariaDB: …` or `Error creating <name>: …`.
4. requeue: 10 h plus up to 1 h at random, `requeueInterval` instead of the 10 h; a failure
   after `retryInterval`, else with the controller's back-off; a MariaDB that is not Ready is
   waited for, one second at a time.
5. delete: unset `cleanupPolicy` drops (`DROP DATABASE IF EXISTS`), `Skip` keeps the schema; a
   MariaDB that is gone or being deleted releases the finalizer without SQL.

Against the real MariaDB (the schema's collation, drop or keep on delete, an invalid name never
reaching SQL, a missing MariaDB) the same is covered end to end by
`tests/integration/platform/test_mariadb_operator.py`.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pymysql
import pytest

from devstack import realkube
from devstack.crds import install, wait_established
from devstack.crds import mariadb as crds
from devstack.crds.schema import Schema
from devstack.kubeclient import ApiError, RemoteCluster
from devstack.kubeclient import KubeApi as Cluster
from devstack.mariadb_operator import sql
from devstack.mariadb_operator.controller import (
    DATABASES,
    FINALIZER,
    MARIADBS,
    WAIT_FOR_MARIADB,
    MariaDBOperator,
    RetryError,
    charset_and_collate,
    finalize_step,
    mariadb_kind,
    mariadb_resource,
    ready_status,
    requeue_after,
    retry_after,
    schema_of,
    waits_for,
)
from devstack.reconciler import Key

NS = "default"
CLUSTER = "management"
HOUR = 3600.0
LOOKUP = "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s"
DOWN = pymysql.err.OperationalError(2003, "Can't connect to MySQL server on 'db'")
REFUSED = pymysql.err.ProgrammingError(1115, "Unknown character set: 'utf8'")


def _unique(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(4)}"


# ------------------------------------------------------------ the real server, faked


@dataclass
class FakeServer:
    """The real MariaDB as the stand-in's SQL module sees it: its schemas and what it was sent."""

    schemas: set[str] = field(default_factory=set)
    statements: list[str] = field(default_factory=list)
    down: bool = False
    refuse_writes: bool = False

    def connect(self, server: sql.Server) -> _Session:
        if self.down:
            raise DOWN
        return _Session(self)

    def sent(self, *verbs: str) -> list[str]:
        """The statements sent that start with one of the verbs."""
        return [s for s in self.statements if s.startswith(verbs)]


class _Session:
    def __init__(self, server: FakeServer) -> None:
        self.server = server

    def cursor(self) -> _Cursor:
        return _Cursor(self.server)

    def close(self) -> None:
        return None


class _Cursor:
    def __init__(self, server: FakeServer) -> None:
        self.server = server
        self.row: tuple[int] | None = None

    def __enter__(self) -> _Cursor:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def execute(self, statement: str, args: tuple[Any, ...] = ()) -> None:
        self.server.statements.append(statement)
        if statement == LOOKUP:
            self.row = (int(args[0] in self.server.schemas),)
        elif statement.startswith(("CREATE", "DROP")):
            if self.server.refuse_writes:
                raise REFUSED
            schema = statement.split("`")[1]
            if statement.startswith("CREATE"):
                self.server.schemas.add(schema)
            else:
                self.server.schemas.discard(schema)

    def fetchone(self) -> tuple[int] | None:
        return self.row


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> FakeServer:
    fake = FakeServer()
    monkeypatch.setattr(sql, "_connect", fake.connect)
    return fake


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A real kube-apiserver serving the two CRDs, through the client the controller uses."""
    missing = [n for n in realkube.missing_binaries() if n != "kube-controller-manager"]
    if missing:
        pytest.fail(f"{', '.join(missing)} not built in tools/kube/bin; run `make kube`")
    real = realkube.start_real_clusters(tmp_path_factory.mktemp("kube"), [CLUSTER])
    pair = (str(real.pki.admin_cert), str(real.pki.admin_key))
    served = RemoteCluster(CLUSTER, real[CLUSTER].server, ca_pem=real.ca_pem, client_cert=pair)
    try:
        wanted = [crds.mariadb(), crds.database()]
        install(served, wanted)
        wait_established(served, wanted)
        yield served
    finally:
        served.close()
        real.stop()


@pytest.fixture
def operator(cluster: Cluster) -> MariaDBOperator:
    return MariaDBOperator({CLUSTER: cluster}, sql.Server())


def _add_mariadb(cluster: Cluster, state: str) -> str:
    """A MariaDB CR that reads Ready (`ready`), not (`not-ready`), or is being deleted."""
    name = _unique("mdb")
    if state == "absent":
        return name
    body: dict[str, Any] = {
        "apiVersion": "k8s.mariadb.com/v1alpha1",
        "kind": "MariaDB",
        "metadata": {"name": name, "finalizers": ["devstack.test/hold"]},
        "spec": {},
    }
    cluster.create(MARIADBS, body, NS)
    status = "False" if state == "not-ready" else "True"
    ready = {"type": "Ready", "status": status, "reason": "Test", "message": "test"}
    cluster.patch(MARIADBS, name, {"status": {"conditions": [ready]}}, NS, subresource="status")
    if state == "deleting":
        cluster.delete(MARIADBS, name, NS)
    return name


def _add_database(
    cluster: Cluster, spec: dict[str, Any], *, finalizer: bool = False, deleting: bool = False
) -> str:
    name = _unique("db")
    metadata: dict[str, Any] = {"name": name}
    if finalizer:
        metadata["finalizers"] = [FINALIZER]
    body = {
        "apiVersion": "k8s.mariadb.com/v1alpha1",
        "kind": "Database",
        "metadata": metadata,
        "spec": spec,
    }
    cluster.create(DATABASES, body, NS)
    if deleting:
        cluster.delete(DATABASES, name, NS)
    return name


def _get(cluster: Cluster, name: str) -> dict[str, Any] | None:
    try:
        return cluster.get(DATABASES, name, NS)
    except ApiError as exc:
        if exc.code == 404:
            return None
        raise


def _ready(obj: dict[str, Any] | None) -> tuple[str, str, str] | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return str(cond["status"]), str(cond["reason"]), str(cond["message"])
    return None


# ------------------------------------------------------------ 1 and 2: the CRD as data


def _version(crd: Schema) -> Schema:
    version: Schema = crd["spec"]["versions"][0]
    return version


def _spec(crd: Schema) -> Schema:
    spec: Schema = _version(crd)["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return spec


def _field(*path: str) -> Callable[[Schema], Schema]:
    def node(crd: Schema) -> Schema:
        found = _spec(crd)
        for name in path:
            found = found["properties"][name]
        return found

    return node


def _rules(node: Schema) -> list[tuple[str, str]]:
    return [(r["rule"], r["message"]) for r in node.get("x-kubernetes-validations") or []]


CRD_FACTS = [
    pytest.param(lambda c: _spec(c)["required"], ["mariaDbRef"], id="1-mariaDbRef-required"),
    pytest.param(
        lambda c: sorted(_field("mariaDbRef")(c)["properties"]),
        ["kind", "name", "namespace", "waitForIt"],
        id="1-mariaDbRef-fields",
    ),
    pytest.param(
        lambda c: _field("mariaDbRef", "waitForIt")(c)["default"], True, id="1-waitForIt-true"
    ),
    pytest.param(
        lambda c: _field("mariaDbRef", "kind")(c),
        {"type": "string"},
        id="1-kind-any-string-as-upstream",
    ),
    pytest.param(
        lambda c: _rules(_field("mariaDbRef")(c)),
        [("self == oldSelf", "'spec.mariaDbRef' field is immutable")],
        id="1-mariaDbRef-immutable",
    ),
    pytest.param(lambda c: _field("characterSet")(c)["default"], "utf8", id="1-charset-utf8"),
    pytest.param(
        lambda c: _rules(_field("characterSet")(c)),
        [("self == oldSelf", "'spec.characterSet' field is immutable")],
        id="1-charset-immutable",
    ),
    pytest.param(
        lambda c: _field("collate")(c)["default"], "utf8_general_ci", id="1-collate-general-ci"
    ),
    pytest.param(
        lambda c: _rules(_field("collate")(c)),
        [("self == oldSelf", "'spec.collate' field is immutable")],
        id="1-collate-immutable",
    ),
    pytest.param(lambda c: _field("name")(c)["maxLength"], 80, id="1-name-max-80"),
    pytest.param(
        lambda c: [m for _, m in _rules(_spec(c))],
        ["'spec.name' field is immutable"],
        id="1-name-immutable",
    ),
    pytest.param(
        lambda c: _field("requeueInterval")(c), {"type": "string"}, id="1-requeueInterval"
    ),
    pytest.param(lambda c: _field("retryInterval")(c), {"type": "string"}, id="1-retryInterval"),
    pytest.param(
        lambda c: _field("cleanupPolicy")(c)["enum"], ["Skip", "Delete"], id="1-cleanupPolicy"
    ),
    pytest.param(
        lambda c: sorted(
            _version(c)["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
        ),
        ["conditions"],
        id="2-status-conditions-only",
    ),
    pytest.param(
        lambda c: [
            (col["name"], col["type"], col["jsonPath"])
            for col in _version(c)["additionalPrinterColumns"]
        ],
        [
            ("Ready", "string", '.status.conditions[?(@.type=="Ready")].status'),
            ("Status", "string", '.status.conditions[?(@.type=="Ready")].message'),
            ("CharSet", "string", ".spec.characterSet"),
            ("Collate", "string", ".spec.collate"),
            ("MariaDB", "string", ".spec.mariaDbRef.name"),
            ("Age", "date", ".metadata.creationTimestamp"),
            ("Name", "string", ".spec.name"),
        ],
        id="2-printer-columns",
    ),
    pytest.param(lambda c: c["spec"]["names"]["shortNames"], ["dmdb"], id="2-short-name-dmdb"),
]


@pytest.mark.parametrize(("fact", "expected"), CRD_FACTS)
def test_database_crd_reads_as_upstream(fact: Callable[[Schema], Any], expected: Any) -> None:
    assert fact(crds.database()) == expected


# ------------------------------------------------------------ 1: the CRD as served

REF = {"mariaDbRef": {"name": "mariadb"}}

CREATED_AS = [
    pytest.param(REF, ("mariaDbRef", "waitForIt"), True, id="waitForIt-defaults-true"),
    pytest.param(REF, ("characterSet",), "utf8", id="characterSet-defaults-utf8"),
    pytest.param(REF, ("collate",), "utf8_general_ci", id="collate-defaults-utf8_general_ci"),
    pytest.param(
        {**REF, "characterSet": "utf8mb4", "collate": "utf8mb4_bin"},
        ("collate",),
        "utf8mb4_bin",
        id="collate-as-given",
    ),
]


@pytest.mark.parametrize(("spec", "path", "expected"), CREATED_AS)
def test_a_created_database_reads_with_the_defaults(
    cluster: Cluster, spec: dict[str, Any], path: tuple[str, ...], expected: Any
) -> None:
    value: Any = (_get(cluster, _add_database(cluster, spec)) or {})["spec"]
    for name in path:
        value = value[name]
    assert value == expected


REFUSED_ON_CREATE = [
    pytest.param({}, "spec.mariaDbRef: Required value", id="without-mariaDbRef"),
    pytest.param(
        {**REF, "name": "n" * 81},
        "spec.name: Too long: may not be more than 80 bytes",
        id="name-of-81",
    ),
    pytest.param(
        {**REF, "cleanupPolicy": "Retain"},
        'spec.cleanupPolicy: Unsupported value: "Retain"',
        id="cleanupPolicy-Retain",
    ),
]


@pytest.mark.parametrize(("spec", "refusal"), REFUSED_ON_CREATE)
def test_an_invalid_database_is_refused(
    cluster: Cluster, spec: dict[str, Any], refusal: str
) -> None:
    with pytest.raises(ApiError) as err:
        _add_database(cluster, spec)
    assert err.value.code == 422
    assert refusal in err.value.message


FULL = {
    "mariaDbRef": {"name": "mariadb", "namespace": NS, "kind": "MariaDB"},
    "characterSet": "utf8mb4",
    "collate": "utf8mb4_unicode_ci",
    "name": "keystone",
    "cleanupPolicy": "Delete",
}

UPDATES = [
    pytest.param({"mariaDbRef": {"name": "other"}}, "spec.mariaDbRef", id="mariaDbRef-name"),
    pytest.param({"mariaDbRef": {"namespace": "x"}}, "spec.mariaDbRef", id="mariaDbRef-namespace"),
    pytest.param(
        {"mariaDbRef": {"kind": "ExternalMariaDB"}}, "spec.mariaDbRef", id="mariaDbRef-kind"
    ),
    pytest.param({"mariaDbRef": {"waitForIt": False}}, "spec.mariaDbRef", id="mariaDbRef-wait"),
    pytest.param({"characterSet": "latin1"}, "spec.characterSet", id="characterSet"),
    pytest.param({"characterSet": None}, "spec.characterSet", id="characterSet-back-to-default"),
    pytest.param({"collate": "utf8mb4_bin"}, "spec.collate", id="collate"),
    pytest.param({"name": "nova"}, "spec.name", id="name"),
    pytest.param({"name": None}, "spec.name", id="name-unset"),
    pytest.param({"cleanupPolicy": "Skip"}, None, id="cleanupPolicy-may-change"),
    pytest.param({"requeueInterval": "1h"}, None, id="requeueInterval-may-change"),
    pytest.param({"retryInterval": "5s"}, None, id="retryInterval-may-change"),
]


@pytest.mark.parametrize(("change", "immutable"), UPDATES)
def test_immutable_fields_refuse_a_change(
    cluster: Cluster, change: dict[str, Any], immutable: str | None
) -> None:
    name = _add_database(cluster, FULL)
    if immutable is None:
        cluster.patch(DATABASES, name, {"spec": change}, NS)
        return
    with pytest.raises(ApiError) as err:
        cluster.patch(DATABASES, name, {"spec": change}, NS)
    assert err.value.code == 422
    assert f"{immutable}: Invalid value" in err.value.message
    assert f"'{immutable}' field is immutable" in err.value.message


def test_a_name_unset_at_creation_cannot_be_set_later(cluster: Cluster) -> None:
    name = _add_database(cluster, REF)
    with pytest.raises(ApiError) as err:
        cluster.patch(DATABASES, name, {"spec": {"name": "nova"}}, NS)
    assert "'spec.name' field is immutable" in err.value.message


# ------------------------------------------------------------ 1, 3 and 4: pure decisions

KINDS = [
    pytest.param({"mariaDbRef": {"name": "m"}}, "MariaDB", MARIADBS, id="unset-is-MariaDB"),
    pytest.param({"mariaDbRef": {"kind": "MariaDB"}}, "MariaDB", MARIADBS, id="MariaDB"),
    pytest.param(
        {"mariaDbRef": {"kind": "ExternalMariaDB"}},
        "ExternalMariaDB",
        "externalmariadbs.k8s.mariadb.com",
        id="ExternalMariaDB",
    ),
    pytest.param({"mariaDbRef": {"kind": "Other"}}, "MariaDB", MARIADBS, id="other-is-MariaDB"),
]


@pytest.mark.parametrize(("spec", "kind", "resource"), KINDS)
def test_mariadb_ref_kind(spec: dict[str, Any], kind: str, resource: str) -> None:
    assert (mariadb_kind(spec), mariadb_resource(spec)) == (kind, resource)


SCHEMAS = [
    pytest.param({}, ("keystone", "utf8", "utf8_general_ci"), id="defaults-and-own-name"),
    pytest.param({"name": "nova_api"}, ("nova_api", "utf8", "utf8_general_ci"), id="name-wins"),
    pytest.param(
        {"characterSet": "utf8mb4", "collate": "utf8mb4_bin"},
        ("keystone", "utf8mb4", "utf8mb4_bin"),
        id="options-as-given",
    ),
    pytest.param({"characterSet": "", "collate": ""}, ("keystone", "", ""), id="empty-kept"),
]


@pytest.mark.parametrize(("spec", "expected"), SCHEMAS)
def test_schema_name_and_options(spec: dict[str, Any], expected: tuple[str, str, str]) -> None:
    assert (schema_of("keystone", spec), *charset_and_collate(spec)) == expected


STATEMENTS = [
    pytest.param(
        lambda: sql.create_statement("keystone", "utf8", "utf8_general_ci"),
        "CREATE DATABASE `keystone` CHARACTER SET = `utf8` COLLATE = `utf8_general_ci`",
        id="create",
    ),
    pytest.param(
        lambda: sql.create_statement("keystone", "", "utf8_bin"),
        "CREATE DATABASE `keystone` COLLATE = `utf8_bin`",
        id="create-without-charset",
    ),
    pytest.param(
        lambda: sql.create_statement("keystone", "utf8", ""),
        "CREATE DATABASE `keystone` CHARACTER SET = `utf8`",
        id="create-without-collate",
    ),
    pytest.param(
        lambda: sql.drop_statement("keystone"), "DROP DATABASE IF EXISTS `keystone`", id="drop"
    ),
]


@pytest.mark.parametrize(("build", "expected"), STATEMENTS)
def test_sql_text(build: Callable[[], str], expected: str) -> None:
    assert build() == expected


CREATES = [
    pytest.param(
        set(),
        True,
        [LOOKUP, "CREATE DATABASE `keystone` CHARACTER SET = `utf8` COLLATE = `utf8_general_ci`"],
        id="absent-is-created",
    ),
    pytest.param({"keystone"}, False, [LOOKUP], id="existing-is-left-alone"),
]


@pytest.mark.parametrize(("existing", "created", "sent"), CREATES)
def test_create_schema(
    server: FakeServer, existing: set[str], created: bool, sent: list[str]
) -> None:
    server.schemas |= existing
    assert sql.create_schema(sql.Server(), "keystone", "utf8", "utf8_general_ci") is created
    assert server.statements == sent


READY = [
    pytest.param("created", "", (True, "Created", "Created"), id="created"),
    pytest.param("not-found", "MariaDB", (False, "Failed", "MariaDB not found"), id="not-found"),
    pytest.param(
        "connect",
        "(2003) down",
        (False, "Failed", "Error connecting to MariaDB: (2003) down"),
        id="connect",
    ),
    pytest.param(
        "create",
        "(1007) exists",
        (False, "Failed", "Error creating db-1: (1007) exists"),
        id="create",
    ),
]


@pytest.mark.parametrize(("outcome", "detail", "expected"), READY)
def test_ready_condition(outcome: Any, detail: str, expected: tuple[bool, str, str]) -> None:
    assert ready_status(outcome, "db-1", detail) == expected


REQUEUES = [
    pytest.param({}, 0.0, 10 * HOUR, id="10h"),
    pytest.param({}, 0.5, 10.5 * HOUR, id="10h-plus-offset"),
    pytest.param({}, 0.999, 10 * HOUR + 0.999 * HOUR, id="under-11h"),
    pytest.param({"requeueInterval": "30s"}, 0.0, 30.0, id="requeueInterval"),
    pytest.param({"requeueInterval": "1h30m"}, 0.25, 1.75 * HOUR, id="requeueInterval-plus"),
    pytest.param({"requeueInterval": "soon"}, 0.0, 10 * HOUR, id="unreadable-is-unset"),
]


@pytest.mark.parametrize(("spec", "fraction", "seconds"), REQUEUES)
def test_requeue_after_a_create(spec: dict[str, Any], fraction: float, seconds: float) -> None:
    assert requeue_after(spec, fraction) == pytest.approx(seconds)


RETRIES = [
    pytest.param({}, None, id="back-off"),
    pytest.param({"retryInterval": "5s"}, 5.0, id="retryInterval"),
    pytest.param({"retryInterval": "1m30s"}, 90.0, id="retryInterval-compound"),
    pytest.param({"retryInterval": "0s"}, None, id="zero-backs-off"),
    pytest.param({"retryInterval": "later"}, None, id="unreadable-backs-off"),
]


@pytest.mark.parametrize(("spec", "seconds"), RETRIES)
def test_retry_after_a_failure(spec: dict[str, Any], seconds: float | None) -> None:
    assert retry_after(spec) == seconds


def _mdb(status: str | None, *, deleting: bool = False) -> dict[str, Any]:
    conditions = [] if status is None else [{"type": "Ready", "status": status}]
    metadata = {"deletionTimestamp": "2026-01-01T00:00:00Z"} if deleting else {}
    return {"metadata": metadata, "status": {"conditions": conditions}}


WAITS = [
    pytest.param({}, _mdb("True"), False, id="ready"),
    pytest.param({}, _mdb("False"), True, id="not-ready"),
    pytest.param({}, _mdb(None), True, id="no-status-yet"),
    pytest.param(
        {"mariaDbRef": {"waitForIt": False}}, _mdb("False"), True, id="waitForIt-false-waits"
    ),
    pytest.param(
        {"mariaDbRef": {"kind": "ExternalMariaDB"}}, _mdb(None), False, id="external-never"
    ),
]


@pytest.mark.parametrize(("spec", "mariadb", "waits"), WAITS)
def test_waits_for_the_mariadb(spec: dict[str, Any], mariadb: dict[str, Any], waits: bool) -> None:
    assert waits_for(spec, mariadb) is waits


# ------------------------------------------------------------ 5: finalization decided


def _db(policy: str | None, *, finalizer: bool = True) -> dict[str, Any]:
    spec = {} if policy is None else {"cleanupPolicy": policy}
    return {"metadata": {"finalizers": [FINALIZER] if finalizer else []}, "spec": spec}


STEPS = [
    pytest.param(_db(None, finalizer=False), _mdb("True"), "none", id="no-finalizer"),
    pytest.param(_db(None), _mdb("True"), "drop", id="unset-policy-drops"),
    pytest.param(_db("Delete"), _mdb("True"), "drop", id="Delete-drops"),
    pytest.param(_db("Skip"), _mdb("True"), "keep", id="Skip-keeps"),
    pytest.param(_db(None), None, "release", id="mariadb-gone"),
    pytest.param(_db(None), _mdb("True", deleting=True), "release", id="mariadb-deleting"),
    pytest.param(_db(None), _mdb("False"), "wait", id="mariadb-not-ready"),
]


@pytest.mark.parametrize(("db", "mariadb", "step"), STEPS)
def test_finalize_step(db: dict[str, Any], mariadb: dict[str, Any] | None, step: str) -> None:
    assert finalize_step(db, mariadb) == step


# ------------------------------------------------------------ 3 and 4: a reconcile, run once


@dataclass(frozen=True)
class Create:
    """One reconcile of a new Database and what it must leave behind."""

    mariadb: str = "ready"
    spec: dict[str, Any] = field(default_factory=dict)
    existing: bool = False
    down: bool = False
    refuse_writes: bool = False
    after: tuple[float, float] | None = (10 * HOUR, 11 * HOUR)
    """Seconds until it comes back, as a [low, high) range; None: not at all."""
    backs_off: bool = False
    ready: tuple[str, str, str] | None = ("True", "Created", "Created")
    finalizer: bool = True
    creates: bool = True
    """Whether `CREATE DATABASE` is sent."""


RECONCILES = [
    pytest.param(Create(), id="3-created-then-finalizer-4-requeued-10h"),
    pytest.param(Create(existing=True, creates=False), id="3-existing-schema-left-alone"),
    pytest.param(
        Create(spec={"requeueInterval": "1h"}, after=(HOUR, 2 * HOUR)),
        id="4-requeueInterval-plus-offset",
    ),
    pytest.param(
        Create(
            mariadb="absent",
            after=None,
            backs_off=True,
            ready=("False", "Failed", "MariaDB not found"),
            finalizer=False,
            creates=False,
        ),
        id="3-mariadb-not-found-4-backs-off",
    ),
    pytest.param(
        Create(
            mariadb="ready",
            spec={"mariaDbRef": {"kind": "ExternalMariaDB"}},
            after=None,
            backs_off=True,
            ready=("False", "Failed", "ExternalMariaDB not found"),
            finalizer=False,
            creates=False,
        ),
        id="3-external-mariadb-not-served",
    ),
    pytest.param(
        Create(
            mariadb="not-ready",
            after=(WAIT_FOR_MARIADB, WAIT_FOR_MARIADB + 1e-9),
            ready=None,
            finalizer=False,
            creates=False,
        ),
        id="4-waits-1s-for-the-mariadb",
    ),
    pytest.param(
        Create(
            down=True,
            after=None,
            backs_off=True,
            ready=("False", "Failed", "Error connecting to MariaDB: (2003) Can't connect"),
            finalizer=False,
            creates=False,
        ),
        id="3-connect-error-4-backs-off",
    ),
    pytest.param(
        Create(
            spec={"retryInterval": "7s"},
            down=True,
            after=(7.0, 7.0 + 1e-9),
            ready=("False", "Failed", "Error connecting to MariaDB: (2003) Can't connect"),
            finalizer=False,
            creates=False,
        ),
        id="3-connect-error-4-retryInterval",
    ),
    pytest.param(
        Create(
            refuse_writes=True,
            after=None,
            backs_off=True,
            ready=("False", "Failed", "Error creating {db}: (1115) Unknown character set"),
            finalizer=False,
        ),
        id="3-create-error-4-backs-off",
    ),
    pytest.param(
        Create(
            spec={"name": "bad-name"},
            after=None,
            ready=("False", "Failed", "Error creating {db}: invalid database name 'bad-name'"),
            finalizer=False,
            creates=False,
        ),
        id="3-invalid-name-never-reaches-sql",
    ),
]


@pytest.mark.parametrize("case", RECONCILES)
def test_reconcile_of_a_database(
    cluster: Cluster, server: FakeServer, operator: MariaDBOperator, case: Create
) -> None:
    mariadb = _add_mariadb(cluster, case.mariadb)
    schema = _unique("s").replace("-", "_")
    spec = {"name": schema, **case.spec}
    spec["mariaDbRef"] = {"name": mariadb, **(case.spec.get("mariaDbRef") or {})}
    name = _add_database(cluster, spec)
    if case.existing:
        server.schemas.add(schema)
    server.down, server.refuse_writes = case.down, case.refuse_writes

    key = Key(CLUSTER, NS, name)
    if case.backs_off:
        with pytest.raises(RetryError):
            operator._reconcile_database(key)
    else:
        after = operator._reconcile_database(key)
        if case.after is None:
            assert after is None
        else:
            assert after is not None
            assert case.after[0] <= after < case.after[1]

    stored = _get(cluster, name) or {}
    ready = _ready(stored)
    if case.ready is None:
        assert ready is None
    else:
        assert ready is not None
        assert ready[:2] == case.ready[:2]
        assert ready[2].startswith(case.ready[2].format(db=name))
    assert (FINALIZER in (stored["metadata"].get("finalizers") or [])) is case.finalizer
    assert bool(server.sent("CREATE")) is case.creates
    kept = case.existing or (case.creates and not case.refuse_writes)
    assert (schema in server.schemas) is kept


# ------------------------------------------------------------ 5: a deletion, run once


@dataclass(frozen=True)
class Delete:
    """One reconcile of a Database being deleted and what it must leave behind."""

    mariadb: str = "ready"
    policy: str | None = None
    down: bool = False
    dropped: bool = True
    released: bool = True
    after: float | None = None
    backs_off: bool = False


DELETIONS = [
    pytest.param(Delete(), id="5-unset-policy-drops"),
    pytest.param(Delete(policy="Delete"), id="5-Delete-drops"),
    pytest.param(Delete(policy="Skip", dropped=False), id="5-Skip-keeps"),
    pytest.param(Delete(mariadb="absent", dropped=False), id="5-mariadb-gone-releases"),
    pytest.param(Delete(mariadb="deleting", dropped=False), id="5-mariadb-deleting-releases"),
    pytest.param(
        Delete(mariadb="not-ready", dropped=False, released=False, after=WAIT_FOR_MARIADB),
        id="5-mariadb-not-ready-waits",
    ),
    pytest.param(
        Delete(down=True, dropped=False, released=False, backs_off=True),
        id="5-server-down-backs-off",
    ),
]


@pytest.mark.parametrize("case", DELETIONS)
def test_deletion_of_a_database(
    cluster: Cluster, server: FakeServer, operator: MariaDBOperator, case: Delete
) -> None:
    mariadb = _add_mariadb(cluster, case.mariadb)
    schema = _unique("s").replace("-", "_")
    spec: dict[str, Any] = {"mariaDbRef": {"name": mariadb}, "name": schema}
    if case.policy is not None:
        spec["cleanupPolicy"] = case.policy
    name = _add_database(cluster, spec, finalizer=True, deleting=True)
    server.schemas.add(schema)
    server.down = case.down

    key = Key(CLUSTER, NS, name)
    if case.backs_off:
        with pytest.raises(RetryError):
            operator._reconcile_database(key)
    else:
        assert operator._reconcile_database(key) == case.after

    assert (_get(cluster, name) is None) is case.released
    assert server.sent("DROP") == ([sql.drop_statement(schema)] if case.dropped else [])
    assert (schema in server.schemas) is not case.dropped
    if case.mariadb in ("absent", "deleting"):
        assert server.statements == []
