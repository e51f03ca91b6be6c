"""The install instructions stay true without a Docker engine: the README's image build names
deploy/Dockerfile and the repository root, every path the Dockerfile and its dockerignore let
in exists, the chart's values say the image must be built and pushed with that same command,
the README's wheel is the one the build makes, and the LICENSE pyproject.toml declares is
there, in its standard text, and ships in the distribution."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _version() -> str:
    found = re.search(r'__version__ = "([^"]+)"', (ROOT / "memplane" / "_version.py").read_text())
    assert found is not None
    return found[1]


def _build_commands(text: str) -> list[str]:
    return re.findall(r"docker build -f (\S+) -t (\S+) (\S+)", text)


def test_the_readme_builds_the_image_from_the_dockerfile_at_the_repository_root() -> None:
    builds = _build_commands(README)
    assert builds == [("deploy/Dockerfile", f"registry.example.com/memplane:{_version()}", ".")]
    tag = builds[0][1]
    assert f"docker push {tag}\n" in README
    values = (ROOT / "deploy" / "helm" / "memplane" / "values.yaml").read_text()
    comment = "\n".join(line.lstrip("# ") for line in values.splitlines()
                        if line.startswith("#"))
    assert _build_commands(comment) == builds
    assert f"docker push {tag}" in comment
    assert "build it and push it" in comment


def test_every_path_the_image_build_takes_exists() -> None:
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    # The Dockerfile's own comment builds it the way the README does.
    assert "docker build -f deploy/Dockerfile -t memplane .\n" in dockerfile
    copies = re.findall(r"^COPY (?!--from)(\S+) (\S+)$", dockerfile, re.M)
    assert copies == [(".", "./")]
    # What the build context lets in (deploy/Dockerfile.dockerignore), each of it present.
    ignore = (ROOT / "deploy" / "Dockerfile.dockerignore").read_text().splitlines()
    allowed = [line[1:].rstrip("/") for line in ignore if line.startswith("!")]
    assert allowed == ["pyproject.toml", "README.md", "LICENSE", "control_plane",
                       "storage_adapters", "memplane", "requirements"]
    assert [name for name in allowed if not (ROOT / name).exists()] == []
    # The lock file the build installs from, and the extras it installs.
    assert sorted(p.name for p in (ROOT / "requirements").glob("*.lock")) == ["dev.lock"]
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    installed = re.search(r'pip install "\$@" "\.\[([a-z0-9,]+)\]"', dockerfile)
    assert installed is not None
    assert [e for e in installed[1].split(",") if e not in extras] == []


def test_the_readme_installs_from_a_clone_and_names_the_built_wheel() -> None:
    assert "pip install memplane " not in README and "pip install 'memplane[" not in README
    assert "pip install .  " in README
    assert "python -m build" in README
    assert f"dist/memplane-{_version()}-py3-none-any.whl" in README


def test_the_license_pyproject_names_is_there_in_its_standard_text() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License\n                           Version 2.0, "
                                    "January 2004")
    assert "END OF TERMS AND CONDITIONS" in text
    assert len(text.splitlines()) == 201


def test_the_langgraph_extra_installs_langgraph() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    names = {re.split(r"[<>=\[; ]", requirement)[0] for requirement in extras["langgraph"]}
    # The example and the integration import langgraph itself, not only its checkpoint base.
    assert {"langgraph", "langgraph-checkpoint"} <= names
    example = (ROOT / "examples" / "langgraph_preferences.py").read_text()
    assert re.search(r"^from langgraph\.", example, re.M)
