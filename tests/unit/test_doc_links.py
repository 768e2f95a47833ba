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
