"""The committed CRD files are exactly what `make gen` renders from the core."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_crds", ROOT / "tools" / "gen_crds.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RENDERED: dict[Path, str] = _generator().render_crds()


@pytest.mark.parametrize(
    "path", [pytest.param(p, id=str(p.relative_to(ROOT))) for p in sorted(RENDERED)]
)
def test_committed_crd_matches_the_generator(path: Path) -> None:
    assert path.exists(), f"{path.relative_to(ROOT)} is missing; run make gen"
    assert path.read_text() == RENDERED[path], f"{path.relative_to(ROOT)} is stale; run make gen"


def test_generator_check_mode_reports_nothing_stale() -> None:
    assert _generator().main(["--check"]) == 0
