"""Every kind in ``KINDS`` has a task module and a route module, each declaring that very kind.

The worker's task modules and the watcher's route modules are derived from the registry; this
keeps the names in it from drifting away from the modules they name.
"""

from __future__ import annotations

import importlib

import pytest

from tenantdb.adapters.kube import resource_of
from tenantdb.core.served import KINDS, ServedKind, build_crds, route_modules, task_modules
from watcher.routes import routes_for

IDS = [kind.identity.kind for kind in KINDS]


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_the_task_module_declares_the_kind(kind: ServedKind) -> None:
    module = importlib.import_module(kind.task_module)
    assert module.SPEC.identity == kind.identity


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_the_route_module_declares_the_routes_of_the_kind(kind: ServedKind) -> None:
    module = importlib.import_module(kind.route_module)
    watched = [route.resource for route in module.ROUTES]
    assert resource_of(kind.identity) in watched
    assert {route.kind for route in module.ROUTES} <= {route.kind for route in routes_for("")}


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_the_crd_is_the_kinds(kind: ServedKind) -> None:
    crd = build_crds()[f"{kind.identity.plural}.{kind.identity.group}"]
    assert crd["spec"]["names"]["kind"] == kind.identity.kind


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_the_kind_may_watch_and_read_its_orders(kind: ServedKind) -> None:
    def verbs(place: str) -> set[str]:
        return {
            verb
            for grant in getattr(kind.access, place)
            if grant.api_group == kind.identity.group and kind.identity.plural in grant.resources
            for verb in grant.verbs
        }

    assert {"list", "watch"} <= verbs("watcher")
    assert {"get", "patch"} <= verbs("worker")


def test_the_derived_lists_name_every_kind_once() -> None:
    assert len({kind.identity.kind for kind in KINDS}) == len(KINDS)
    assert task_modules() == tuple(kind.task_module for kind in KINDS)
    assert route_modules() == tuple(kind.route_module for kind in KINDS)
    assert len(set(task_modules())) == len(KINDS) == len(set(route_modules()))


def test_the_worker_imports_every_kinds_task_module() -> None:
    from workers.app import TASK_MODULES

    assert set(task_modules()) <= set(TASK_MODULES)
