"""Which ExternalSecrets a VaultDynamicSecret's event wakes: those whose `dataFrom` runs it in
its namespace, answered from what the ExternalSecret watch has said, as ESO's cache would."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from devstack.eso.controller import ExternalSecrets
from devstack.kube.server import ClusterServer
from devstack.reconciler import Key


@pytest.fixture
def eso() -> Iterator[ExternalSecrets]:
    server = ClusterServer("management").start()
    yield ExternalSecrets(server.cluster)
    server.stop()


def _es(namespace: str, name: str, *generators: str, kind: str = "VaultDynamicSecret") -> Any:
    return {
        "metadata": {"namespace": namespace, "name": name},
        "spec": {
            "dataFrom": [
                {"sourceRef": {"generatorRef": {"kind": kind, "name": generator}}}
                for generator in generators
            ]
        },
    }


def _woken(eso: ExternalSecrets, namespace: str, generator: str) -> list[str]:
    event = {"metadata": {"namespace": namespace, "name": generator}}
    return [key.name for key in eso._users_of_generator("MODIFIED", event)]


def _heard(eso: ExternalSecrets, event: str, es: Any) -> list[Key]:
    return list(eso._own_key(event, es))


def test_a_generator_wakes_the_external_secrets_that_run_it_in_its_namespace(
    eso: ExternalSecrets,
) -> None:
    _heard(eso, "ADDED", _es("tenant-a", "one", "gen"))
    _heard(eso, "ADDED", _es("tenant-a", "two", "gen", "other"))
    _heard(eso, "ADDED", _es("tenant-a", "three", "other"))
    _heard(eso, "ADDED", _es("tenant-b", "four", "gen"))
    _heard(eso, "ADDED", _es("tenant-a", "five", "gen", kind="Password"))
    assert _woken(eso, "tenant-a", "gen") == ["one", "two"]
    assert _woken(eso, "tenant-b", "gen") == ["four"]
    assert _woken(eso, "tenant-a", "missing") == []


def test_an_external_secret_that_moves_to_another_generator_or_goes_is_forgotten(
    eso: ExternalSecrets,
) -> None:
    _heard(eso, "ADDED", _es("tenant-a", "one", "gen"))
    _heard(eso, "ADDED", _es("tenant-a", "two", "gen"))
    _heard(eso, "MODIFIED", _es("tenant-a", "one", "next"))
    assert _woken(eso, "tenant-a", "gen") == ["two"]
    assert _woken(eso, "tenant-a", "next") == ["one"]
    _heard(eso, "DELETED", _es("tenant-a", "two", "gen"))
    assert _woken(eso, "tenant-a", "gen") == []
    # A relist hands every ExternalSecret on again: nothing is counted twice.
    _heard(eso, "ADDED", _es("tenant-a", "one", "next"))
    assert _woken(eso, "tenant-a", "next") == ["one"]
