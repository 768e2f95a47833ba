"""The generated MariaDBDatabase CRD proven against the admission corpus, CEL rules included.

The CEL rules are evaluated with the `cel` library the way the API server binds them: `self`
is the object at the rule's level, property names that are CEL keywords are escaped as
`__keyword__`, and a transition rule (one that reads oldSelf) runs only on an update. A
minimal structural check stands in for the OpenAPI part (required, enum, bounds, pattern).
"""

from __future__ import annotations

import re
from typing import Any

import cel
import cel.stdlib
import pytest

from tenantdb.core.mariadbdatabase.crd import build_crd
from tenantdb.core.mariadbdatabase.models import MariaDBDatabaseSpec, MariaDBDatabaseStatus
from tenantdb.core.mariadbdatabase.validation import (
    CONTROL_PLANE_REF_RULES,
    PUBLISHED_ENDPOINT_PATTERN,
    ROOT_RULES,
)
from tests.fixtures.admission_corpus import CASES, CONTROL_PLANE_CASES, AdmissionCase

CEL_KEYWORDS = {"namespace", "in", "as", "if", "else", "for", "function", "import", "package"}
SCHEMA = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def _escape(value: Any) -> Any:
    if isinstance(value, dict):
        return {(f"__{k}__" if k in CEL_KEYWORDS else k): _escape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_escape(v) for v in value]
    return value


def _evaluate(rule: str, new: Any, old: Any | None) -> bool:
    context = cel.Context()
    cel.stdlib.add_stdlib_to_context(context)
    context.add_variable("self", _escape(new))
    if old is not None:
        context.add_variable("oldSelf", _escape(old))
    return bool(cel.evaluate(rule, context))


def _failed_rules(obj: dict[str, Any], old: dict[str, Any] | None) -> list[str]:
    """Return the messages of the CEL rules that fail, as the API server would run them."""
    failed = []
    levels = [(SCHEMA["x-kubernetes-validations"], obj, old)]
    ref = obj.get("spec", {}).get("controlPlaneRef")
    old_ref = old["spec"].get("controlPlaneRef") if old else None
    if ref is not None:
        ref_schema = SCHEMA["properties"]["spec"]["properties"]["controlPlaneRef"]
        levels.append((ref_schema["x-kubernetes-validations"], ref, old_ref))
    for rules, value, old_value in levels:
        for rule in rules:
            transition = "oldSelf" in rule["rule"]
            if transition and old_value is None:
                continue
            if not _evaluate(rule["rule"], value, old_value if transition else None):
                failed.append(rule["message"])
    return failed


def _string_errors(value: str, schema: dict[str, Any], path: str) -> list[str]:
    errors = []
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f'{path}: Unsupported value: "{value}"')
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        errors.append(f"{path}: Too long: may not be more than {schema['maxLength']} bytes")
    if "minLength" in schema and len(value) < schema["minLength"]:
        errors.append(
            f"{path}: Invalid value: {path} in body should be at least "
            f"{schema['minLength']} chars long"
        )
    if "pattern" in schema and re.search(schema["pattern"], value) is None:
        errors.append(f"{path}: Invalid value: {path} in body should match '{schema['pattern']}'")
    return errors


def _schema_errors(value: Any, schema: dict[str, Any], path: str) -> list[str]:
    if schema.get("type") == "string" and isinstance(value, str):
        return _string_errors(value, schema, path)
    errors: list[str] = []
    if schema.get("type") == "object" and isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                errors.append(f"{path}.{key}: Required value")
        for key, sub in schema.get("properties", {}).items():
            if key in value and key != "metadata":
                errors += _schema_errors(value[key], sub, f"{path}.{key}".lstrip("."))
    return errors


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
def test_corpus_against_the_generated_crd(case: AdmissionCase) -> None:
    if case.old is not None:
        assert not _schema_errors(case.old, SCHEMA, ""), "the stored object must be admitted"
        assert not _failed_rules(case.old, None)
    failed_rules = _failed_rules(case.obj, case.old)
    errors = _schema_errors(case.obj, SCHEMA, "") + failed_rules
    assert failed_rules == list(case.cel_rule_messages)
    if case.admitted:
        assert errors == []
    else:
        assert any(all(part in error for part in case.expect) for error in errors), errors


def test_corpus_holds_the_twelve_reference_fixtures() -> None:
    ids = [c.id for c in CASES]
    assert len(set(ids)) == len(ids)
    assert [i for i in ids if i[:2].isdigit() and int(i[:2]) < 12] == [
        "00-databasename-dash",
        "01-databasename-too-long",
        "02-databasename-empty",
        "03-name-too-long",
        "04-name-not-identifier",
        "05-controlplaneref-name-missing",
        "06-controlplaneref-namespace-invalid",
        "07-deletionpolicy-invalid",
        "08-immutable-base",
        "09-immutable-controlplaneref-name",
        "10-immutable-controlplaneref-namespace",
        "11-immutable-databasename",
    ]
    by_id = {c.id: c for c in CASES}
    assert len(by_id["03-name-too-long"].obj["metadata"]["name"].encode()) == 64
    assert len(by_id["01-databasename-too-long"].obj["spec"]["databaseName"]) == 65
    assert "databaseName" not in by_id["04-name-not-identifier"].obj["spec"]
    assert all("namespace" not in c.obj["metadata"] for c in CASES)


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CONTROL_PLANE_CASES])
def test_published_endpoint_pattern(case: AdmissionCase) -> None:
    endpoint = case.obj["spec"]["infrastructure"]["publishedDatabaseEndpoint"]
    assert (re.search(PUBLISHED_ENDPOINT_PATTERN, endpoint) is not None) is case.admitted


def test_crd_carries_the_rules_verbatim() -> None:
    ref_schema = SCHEMA["properties"]["spec"]["properties"]["controlPlaneRef"]
    assert [r["rule"] for r in ref_schema["x-kubernetes-validations"]] == [
        "self.name == oldSelf.name",
        "(has(self.__namespace__) ? self.__namespace__ : '') == "
        "(has(oldSelf.__namespace__) ? oldSelf.__namespace__ : '')",
    ]
    assert [r["rule"] for r in SCHEMA["x-kubernetes-validations"]] == [
        "size(self.metadata.name) <= 63",
        "(has(self.spec.databaseName) ? self.spec.databaseName : "
        "self.metadata.name.replace('-', '_')) == (has(oldSelf.spec.databaseName) ? "
        "oldSelf.spec.databaseName : oldSelf.metadata.name.replace('-', '_'))",
        "has(self.spec.databaseName) || self.metadata.name.matches('^[a-z0-9-]{1,64}$')",
    ]
    assert len(CONTROL_PLANE_REF_RULES) + len(ROOT_RULES) == 5


def test_crd_shape() -> None:
    crd = build_crd()
    version = crd["spec"]["versions"][0]
    assert crd["metadata"]["name"] == "mariadbdatabases.c5c3.io"
    assert crd["spec"]["scope"] == "Namespaced"
    assert version["subresources"] == {"status": {}}
    assert crd["spec"]["names"]["shortNames"] == ["mdbd"]
    # Why an order is not Ready shows in `kubectl get`: each leg's reason.
    assert [c["name"] for c in version["additionalPrinterColumns"]] == [
        "Ready",
        "Provision",
        "Delivery",
        "ControlPlane",
        "Database",
        "Refreshed",
        "Age",
    ]
    conditions = SCHEMA["properties"]["status"]["properties"]["conditions"]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    assert SCHEMA["properties"]["spec"]["properties"]["deletionPolicy"]["default"] == "Retain"


def _aliases(model: Any) -> set[str]:
    return {f.alias or name for name, f in model.model_fields.items()}


def test_crd_and_models_name_the_same_fields() -> None:
    assert set(SCHEMA["properties"]["spec"]["properties"]) == _aliases(MariaDBDatabaseSpec)
    assert set(SCHEMA["properties"]["status"]["properties"]) == _aliases(MariaDBDatabaseStatus)


def _walk(schema: dict[str, Any], path: str = "") -> list[str]:
    missing = [] if schema.get("description") or path in ("", ".metadata") else [path]
    for key, sub in schema.get("properties", {}).items():
        missing += _walk(sub, f"{path}.{key}")
    return missing


def test_every_field_is_explained() -> None:
    assert _walk(SCHEMA) == []
