"""The desired child objects of a MariaDBDatabase, and the pass-result rule."""

from __future__ import annotations

import base64
from datetime import timedelta

import pytest

from tenantdb.core.actions import ApplyObject
from tenantdb.core.mariadbdatabase.manifests import (
    build_client_certificate,
    build_database_cr,
    build_delivered_secret,
    build_external_secret,
    build_service_account,
    build_vault_dynamic_secret,
)
from tenantdb.core.mariadbdatabase.models import DeletionPolicy
from tenantdb.core.mariadbdatabase.openbao import OpenBaoConnection
from tenantdb.core.mariadbdatabase.results import (
    ORDER_REFRESH_AFTER,
    REQUEUE_SHORT,
    PassResult,
    StepOutcome,
    compute_pass_result,
)
from tests.unit.mdb_builders import ORDER_UID, child_labels, make_order, names_for


@pytest.mark.parametrize(
    ("policy", "cleanup"),
    [
        pytest.param(DeletionPolicy.RETAIN, "Skip", id="retain-skip"),
        pytest.param(DeletionPolicy.DELETE, "Delete", id="delete-delete"),
    ],
)
def test_database_cr(policy: DeletionPolicy, cleanup: str) -> None:
    cr = build_database_cr(
        name="x-database",
        keystone_namespace="ks",
        cluster_ref="openstack-db",
        schema="app_db",
        deletion_policy=policy,
        labels=child_labels(),
    )
    assert cr["apiVersion"] == "k8s.mariadb.com/v1alpha1"
    assert cr["metadata"] == {"name": "x-database", "namespace": "ks", "labels": child_labels()}
    assert cr["spec"] == {
        "mariaDbRef": {"name": "openstack-db", "waitForIt": True},
        "characterSet": "utf8",
        "collate": "utf8_general_ci",
        "name": "app_db",
        "cleanupPolicy": cleanup,
    }


def test_stored_order_without_policy_reads_retain() -> None:
    assert make_order().spec.deletion_policy is DeletionPolicy.RETAIN


def test_shared_identity_is_unlabelled_and_unowned() -> None:
    sa = build_service_account("openstack")
    cert = build_client_certificate("openstack")
    assert sa["metadata"] == {"name": "order-db-creds", "namespace": "openstack"}
    assert cert["metadata"] == {"name": "order-db-openbao-client", "namespace": "openstack"}
    assert cert["spec"] == {
        "secretName": "order-db-openbao-client",
        "duration": "8760h",
        "renewBefore": "720h",
        "usages": ["client auth"],
        "commonName": "order-db-openbao-client.openstack.svc",
        "issuerRef": {"name": "openbao-ca-issuer", "kind": "ClusterIssuer"},
    }


def test_generator_and_external_secret() -> None:
    names = names_for()
    vds = build_vault_dynamic_secret(
        name=names.credentials,
        cp_namespace="default",
        creds_path=names.creds_path,
        connection=OpenBaoConnection("https://bao:8200", "kubernetes/management"),
        labels=child_labels(),
    )
    assert vds["spec"]["path"] == f"database/mariadb/creds/{names.role}"
    assert vds["spec"]["method"] == "GET"
    provider = vds["spec"]["provider"]
    assert provider["server"] == "https://bao:8200"
    assert provider["auth"]["kubernetes"] == {
        "mountPath": "kubernetes/management",
        "role": "order-db",
        "serviceAccountRef": {"name": "order-db-creds"},
    }
    assert provider["caProvider"] == {
        "type": "Secret",
        "name": "order-db-openbao-client",
        "key": "ca.crt",
    }
    es = build_external_secret(
        name=names.credentials, cp_namespace="default", labels=child_labels()
    )
    assert es["spec"]["refreshInterval"] == "24h"
    assert es["spec"]["target"]["template"]["metadata"]["labels"] == child_labels()
    assert es["spec"]["target"]["creationPolicy"] == "Owner"
    assert "secretStoreRef" not in es["spec"]
    assert es["spec"]["dataFrom"][0]["sourceRef"]["generatorRef"]["kind"] == "VaultDynamicSecret"


def test_delivered_secret_is_controlled_and_ordered() -> None:
    values = {
        "host": "h",
        "port": "3306",
        "database": "app_db",
        "username": "v-u",
        "password": "pw-Zq9",
    }
    secret = build_delivered_secret(
        make_order(), secret_name="app-db-credentials", values=values, ca_crt="CA"
    )
    assert secret["type"] == "Opaque"
    assert list(secret["data"]) == ["host", "port", "database", "username", "password", "ca.crt"]
    assert base64.b64decode(secret["data"]["port"]) == b"3306"
    assert secret["metadata"]["labels"] == {
        "c5c3.io/mariadbdatabase-name": "app-db",
        "c5c3.io/mariadbdatabase-namespace": "tenant-a",
    }
    (owner,) = secret["metadata"]["ownerReferences"]
    assert owner == {
        "apiVersion": "c5c3.io/v1alpha1",
        "kind": "MariaDBDatabase",
        "name": "app-db",
        "uid": ORDER_UID,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert "pw-Zq9" not in repr(ApplyObject("", secret))


@pytest.mark.parametrize(
    ("outcome", "cluster", "delivered", "result"),
    [
        pytest.param(
            StepOutcome(requeue_after=REQUEUE_SHORT),
            "",
            True,
            PassResult(REQUEUE_SHORT),
            id="explicit-requeue-stands",
        ),
        pytest.param(StepOutcome(), "", True, PassResult(), id="management-delivered-waits"),
        pytest.param(
            StepOutcome(), "", False, PassResult(ORDER_REFRESH_AFTER), id="management-refused-10m"
        ),
        pytest.param(
            StepOutcome(),
            "edge-1",
            True,
            PassResult(ORDER_REFRESH_AFTER),
            id="target-delivered-10m",
        ),
        pytest.param(
            StepOutcome(error="boom"), "", True, PassResult(error="boom"), id="error-backs-off"
        ),
        pytest.param(
            StepOutcome(requeue_after=timedelta(seconds=1)),
            "edge-1",
            False,
            PassResult(timedelta(seconds=1)),
            id="next-pass",
        ),
    ],
)
def test_pass_result_rule(
    outcome: StepOutcome, cluster: str, delivered: bool, result: PassResult
) -> None:
    assert compute_pass_result(outcome, cluster=cluster, delivery_ready=delivered) == result
