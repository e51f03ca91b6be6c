"""requirements/dev.lock pins everything pyproject.toml asks for, within its ranges, and the
environment the tests run in was installed from it (scripts/bootstrap), so CI runs the same
versions every time until someone refreshes the lock (docs/development.md)."""

from __future__ import annotations

import tomllib
from importlib.metadata import distributions
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
REFRESH = "run requirements/refresh (docs/development.md) and commit requirements/dev.lock"


def _lock() -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for line in (ROOT / "requirements" / "dev.lock").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue  # a pin for another Python or platform (numpy has one per Python)
        (spec,) = requirement.specifier
        assert spec.operator == "==", line
        pins[canonicalize_name(requirement.name)] = Version(spec.version)
    return pins


def _wanted() -> list[Requirement]:
    """The base dependencies and every extra that [dev] names, its own extras expanded."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    wanted = [Requirement(r) for r in project["dependencies"]]
    todo, seen = ["dev"], set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for text in extras[extra]:
            requirement = Requirement(text)
            if canonicalize_name(requirement.name) == "memplane":
                todo.extend(requirement.extras)
            else:
                wanted.append(requirement)
    return wanted


def test_the_lock_pins_every_dependency_within_its_range() -> None:
    pins = _lock()
    for requirement in _wanted():
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement} is not in requirements/dev.lock: {REFRESH}"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"requirements/dev.lock pins {name}=={pins[name]}, outside {requirement}: "
            f"{REFRESH}")


def test_the_test_environment_holds_the_locked_versions() -> None:
    pins = _lock()
    installed = {canonicalize_name(d.metadata["Name"]): Version(d.version)
                 for d in distributions() if d.metadata["Name"]}
    differ = {name: (str(installed[name]), str(pins[name])) for name in pins
              if name in installed and installed[name] != pins[name]}
    assert differ == {}, f"installed vs locked: {differ}; run scripts/bootstrap"
    missing = {canonicalize_name(r.name) for r in _wanted()} - set(installed)
    assert missing == set(), f"not installed: {missing}; run scripts/bootstrap"
