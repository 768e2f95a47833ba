"""The committed kind rules of the chart are exactly what `make gen` renders from `KINDS`."""

from __future__ import annotations

from types import ModuleType

import pytest

from tenantdb.core.rbac import Grant, merge_grants
from tests.unit.tools import load_tool


def _generator() -> ModuleType:
    return load_tool("gen_rbac")


def test_committed_kind_rules_match_the_generator() -> None:
    generator = _generator()
    path = generator.RULES_FILE
    assert path.exists(), f"{path.name} is missing; run make gen"
    assert path.read_text() == generator.render_rules(), f"{path.name} is stale; run make gen"


def test_generator_check_mode_reports_nothing_stale() -> None:
    assert _generator().main(["--check"]) == 0


def test_every_role_template_includes_its_generated_rules() -> None:
    generator = _generator()
    templates = generator.RULES_FILE.parent
    text = (templates / "rbac-management.yaml").read_text() + (
        templates / "rbac-target.yaml"
    ).read_text()
    for name in generator.TEMPLATE_NAMES.values():
        assert f'include "{name}"' in text, name


def test_two_kinds_on_one_resource_share_a_rule_with_both_verbs_and_reasons() -> None:
    secrets_a = Grant("", ("secrets",), ("get", "delete"), "a reads and deletes.")
    secrets_b = Grant("", ("secrets",), ("list", "get"), "b lists.")
    named = Grant("", ("secrets",), ("patch",), "a patches one.", resource_names=("x",))
    [shared, one] = merge_grants([("A", secrets_a), ("B", secrets_b), ("A", named)])
    assert shared.verbs == ("get", "list", "delete")
    assert shared.reasons == ("A: a reads and deletes.", "B: b lists.")
    assert (one.resource_names, one.verbs) == (("x",), ("patch",))


def test_a_grant_names_only_known_verbs() -> None:
    with pytest.raises(ValueError, match="verbs"):
        Grant("", ("secrets",), ("*",), "everything")
