"""The alert rules, checked and unit-tested by the real promtool (Debian's prometheus package).

``promtool check rules`` on the chart's rule file, ``promtool test rules`` on synthetic series
(tests/monitoring/tenantdb.rules.test.yaml), a proof that those tests notice a changed rule,
and every alert's runbook section in docs/operations.md.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tests.monitoring.sources import (
    OPERATIONS_DOC,
    RULES_FILE,
    RULES_TEST_FILE,
    alerts,
    load_rules,
    markdown_anchor,
    run_promtool,
)


def test_promtool_accepts_the_rule_file() -> None:
    checked = run_promtool("check", "rules", RULES_FILE)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in checked.stdout


def test_every_alert_passes_its_promtool_unit_tests() -> None:
    tested = run_promtool("test", "rules", RULES_TEST_FILE)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_every_alert_has_a_case_that_fires_and_one_that_does_not() -> None:
    cases = yaml.safe_load(RULES_TEST_FILE.read_text())["tests"]
    firing: set[str] = set()
    quiet: set[str] = set()
    for case in cases:
        for check in case.get("alert_rule_test", []):
            (firing if check.get("exp_alerts") else quiet).add(check["alertname"])
    names = {rule["alert"] for rule in alerts()}
    assert firing == names
    assert quiet == names


def test_the_unit_tests_notice_a_changed_threshold(tmp_path: Path) -> None:
    changed = RULES_FILE.read_text().replace(
        "(tenantdb_orders_not_ready_seconds) > 900", "(tenantdb_orders_not_ready_seconds) > 9000"
    )
    assert changed != RULES_FILE.read_text()
    (tmp_path / "rules.yaml").write_text(changed)
    cases = yaml.safe_load(RULES_TEST_FILE.read_text())
    cases["rule_files"] = ["rules.yaml"]
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(cases))
    tested = run_promtool("test", "rules", tmp_path / "test.yaml")
    assert tested.returncode != 0
    assert "TenantdbOrdersNotReady" in tested.stdout + tested.stderr


def test_every_alert_links_to_its_runbook_section() -> None:
    doc = OPERATIONS_DOC.read_text()
    sections = dict(
        (markdown_anchor(m.group(1)), m.group(2))
        for m in re.finditer(r"^### ([^\n]+)\n(.*?)(?=^#{1,3} |\Z)", doc, re.MULTILINE | re.DOTALL)
    )
    for rule in alerts():
        url = rule["annotations"]["runbook_url"]
        page, _, anchor = url.partition("#")
        assert page == "docs/operations.md"
        assert anchor == markdown_anchor(rule["alert"]), f"{rule['alert']}: {url}"
        assert anchor in sections, f"docs/operations.md has no section for {rule['alert']}"
        for part in ("**What it means.**", "**What to check.**", "**What to do.**"):
            assert part in sections[anchor], f"{rule['alert']}'s runbook lacks {part}"
    runbooks = {a for a in sections if a.startswith("tenantdb")}
    assert runbooks == {markdown_anchor(r["alert"]) for r in alerts()}, "a runbook of no alert"


def test_every_alert_has_a_severity_and_words_for_the_page() -> None:
    for group in load_rules()["groups"]:
        for rule in group["rules"]:
            assert rule["labels"]["severity"] in {"warning", "critical"}
            assert set(rule["annotations"]) == {"summary", "description", "runbook_url"}


def test_each_alert_compares_with_one_threshold_the_chart_can_set() -> None:
    # The chart sets an alert's threshold (metrics.prometheusRule.alerts.<name>.threshold) by
    # replacing the number after the one "> " in its expression: a second would be ambiguous.
    without = {"TenantdbNoLeader"}  # a count of leaders, not a threshold
    for rule in alerts():
        found = re.findall(r"> [0-9][0-9.]*", rule["expr"])
        assert len(found) == (0 if rule["alert"] in without else 1), (rule["alert"], found)
