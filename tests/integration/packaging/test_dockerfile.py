"""The Dockerfile, checked without a Docker engine: the runtime image's entrypoint is the tenantdb
command, it installs the package without the dev extra and refuses to ship the devstack, and the
build context leaves out local environments and tests."""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field

import pytest

from tests.integration.packaging.conftest import REPO_ROOT, tenantdb_accepts


@dataclass
class Stage:
    """One build stage: its base, its name and its instructions in order."""

    base: str
    name: str
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [arg for kw, arg in self.instructions if kw == keyword]

    def last(self, keyword: str) -> str:
        found = self.all(keyword)
        assert found, f"stage {self.name} has no {keyword}"
        return found[-1]


def _parse(text: str) -> list[Stage]:
    joined = re.sub(r"\\\n", " ", text)
    stages: list[Stage] = []
    for raw in joined.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, arg = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            parts = arg.split()
            name = parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else ""
            stages.append(Stage(parts[0], name))
        elif stages:
            stages[-1].instructions.append((keyword, " ".join(arg.split())))
    return stages


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return _parse((REPO_ROOT / "Dockerfile").read_text())


@pytest.fixture(scope="module")
def runtime(stages: list[Stage]) -> Stage:
    return stages[-1]


def test_runtime_is_the_default_target(runtime: Stage) -> None:
    # `docker build .` builds the last stage: the production image.
    assert runtime.name == "runtime"


def test_entrypoint_is_the_tenantdb_command(runtime: Stage) -> None:
    entrypoint = json.loads(runtime.last("ENTRYPOINT"))
    cmd = json.loads(runtime.last("CMD"))
    scripts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert entrypoint[-1] == "tenantdb"
    assert "tenantdb" in scripts
    assert tenantdb_accepts(cmd)
    assert entrypoint[:2] == ["/usr/bin/tini", "--"]
    assert "tini" in " ".join(arg for stage in _ancestry(runtime) for arg in stage.all("RUN"))


def test_runtime_installs_the_wheel_without_extras(stages: list[Stage], runtime: Stage) -> None:
    installs = [run for run in runtime.all("RUN") if "pip install" in run]
    assert installs
    for run in installs:
        assert "[" not in run, f"an extra is installed: {run}"
        assert "/wheels/tenantdb-" in run
        assert "-c /wheels/constraints.txt" in run, f"the wheel is installed off the lock: {run}"
    build = next(s for s in stages if s.name == "build")
    assert any("pip wheel --no-deps" in run for run in build.all("RUN"))
    assert "--from=build /wheels /wheels" in runtime.all("COPY")


def test_runtime_build_fails_when_the_devstack_ships(runtime: Stage) -> None:
    guard = " ".join(runtime.all("RUN"))
    assert "find_spec('devstack') is not None" in guard


def test_runtime_runs_as_a_non_root_user(runtime: Stage) -> None:
    user = runtime.last("USER").split(":")[0]
    assert user.isdigit()
    assert int(user) != 0


def test_dev_stage_runs_the_devstack(stages: list[Stage]) -> None:
    dev = next(s for s in stages if s.name == "dev")
    assert any(
        'pip install -c constraints.txt ./devstack ".[dev]"' in run for run in dev.all("RUN")
    )
    assert json.loads(dev.last("CMD"))[:3] == ["python", "-m", "devstack"]
    # The platform's binaries, built from their Go modules as `make kube` builds them.
    kube = next(s for s in stages if s.name == "kube")
    assert "bash tools/kube/build.sh" in kube.all("RUN")
    assert "--from=kube /src/tools/kube/bin tools/kube/bin" in dev.all("COPY")


def test_stages_build_on_known_stages(stages: list[Stage]) -> None:
    names = {s.name for s in stages}
    for stage in stages[1:]:
        assert stage.base in names or stage.base == "${GO_IMAGE}", stage.name


def _labels(stage: Stage) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in stage.all("LABEL"):
        for key, value in re.findall(r'(\S+)="([^"]*)"', line):
            found[key] = value
    return found


def _arg(text: str, name: str) -> str:
    found = re.search(rf"^ARG {name}=(\S*)$", text, re.M)
    assert found, f"no default for ARG {name}"
    return found.group(1).strip('"')


def test_the_image_says_what_it_is_in_oci_labels(runtime: Stage) -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    text = (REPO_ROOT / "Dockerfile").read_text()
    labels = _labels(runtime)
    oci = "org.opencontainers.image."
    assert labels[f"{oci}title"] == project["name"]
    assert labels[f"{oci}licenses"] == project["license"]
    assert labels[f"{oci}version"] == "${VERSION}"
    assert _arg(text, "VERSION") == project["version"], "the image version follows the package"
    assert {f"{oci}revision", f"{oci}created", f"{oci}base.name"} <= set(labels)


def test_the_base_image_is_one_build_argument(stages: list[Stage]) -> None:
    # One place to pin it by digest; every stage builds on it.
    text = (REPO_ROOT / "Dockerfile").read_text()
    assert stages[0].base == "${BASE_IMAGE}"
    assert _arg(text, "BASE_IMAGE").startswith("python:3.11")
    # Every stage builds on it but the one that builds the platform's Go binaries for `dev`.
    assert all(s.base == "base" or s is stages[0] or s.name == "kube" for s in stages)
    assert next(s for s in stages if s.name == "kube").base == "${GO_IMAGE}"


def test_build_context_leaves_out_local_state() -> None:
    ignored = set((REPO_ROOT / ".dockerignore").read_text().split())
    assert {".git", ".venv", "tests", "devstack/tests", "**/kubeconfig"} <= ignored
    # The dev stage builds the devstack from the context, so it must stay in it.
    assert "devstack" not in ignored


def _ancestry(stage: Stage) -> list[Stage]:
    stages = _parse((REPO_ROOT / "Dockerfile").read_text())
    by_name = {s.name: s for s in stages}
    chain = [stage]
    while chain[-1].base in by_name:
        chain.append(by_name[chain[-1].base])
    return chain
