"""Every relative link of the README and the docs leads to a file of the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_lead_to_files(doc: Path) -> None:
    targets = [t for t in _LINK.findall(doc.read_text()) if "://" not in t]
    missing = [t for t in targets if not (doc.parent / t).exists()]
    assert missing == [], f"{doc.relative_to(ROOT)} links to files that do not exist"


_CODE_PATH = re.compile(r"`((?:tenantdb|tasks|watcher|workers|tests)/[\w/.-]+\.py)(?:::(\w+))?`")


def test_the_architecture_map_names_files_and_tests_that_exist() -> None:
    # The map of the code is only useful while it points at what is there.
    text = (ROOT / "docs" / "architecture.md").read_text()
    named = _CODE_PATH.findall(text)
    assert len(named) > 20
    missing = [path for path, _ in named if not (ROOT / path).exists()]
    assert missing == [], f"docs/architecture.md names files that do not exist: {missing}"
    gone = [
        f"{path}::{test}"
        for path, test in named
        if test and f"def {test}(" not in (ROOT / path).read_text()
    ]
    assert gone == [], f"docs/architecture.md names tests that do not exist: {gone}"
