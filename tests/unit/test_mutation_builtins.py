"""The mutation run's builtin (``scripts/mutation_builtins.py``, loaded with ``-p`` in the test
command ``scripts/mutation`` gives cosmic-ray): an exception-replacer mutant's handler
(``except CosmicRayTestingException``, or cosmic-ray's garbled dotted form
``except jsonCosmicRayTestingExceptionJSONDecodeError``) catches nothing, so the original
exception goes on, in the test process and in a Python process it starts. Without the plugin
the same mutants die of a NameError. (The plugin is not imported here: loading it changes the
process's builtins and ``PYTHONPATH``.)"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]

MUTANT_TESTS = textwrap.dedent('''\
    import builtins
    import json
    import subprocess
    import sys

    import pytest


    def read(path):
        try:
            return path.read_text()
        except CosmicRayTestingException:  # the mutant of `except FileNotFoundError`
            return None


    def parse(text):
        try:
            return json.loads(text)
        except jsonCosmicRayTestingExceptionJSONDecodeError:  # of `except json.JSONDecodeError`
            return None


    def test_the_name_is_a_builtin_exception_nothing_raises():
        cls = builtins.CosmicRayTestingException
        assert cls.__name__ == "CosmicRayTestingException"
        assert cls.__mro__[1:] == (Exception, BaseException, object)
        assert builtins.jsonCosmicRayTestingExceptionJSONDecodeError is cls


    def test_the_mutated_handler_lets_the_original_exception_through(tmp_path):
        with pytest.raises(FileNotFoundError):
            read(tmp_path / "absent")


    def test_the_garbled_dotted_mutant_lets_the_original_exception_through():
        with pytest.raises(json.JSONDecodeError):
            parse("{")


    def test_a_spawned_python_has_the_names_too():
        child = subprocess.run(
            [sys.executable, "-c", "print(issubclass(CosmicRayTestingException, Exception),"
             " jsonCosmicRayTestingExceptionJSONDecodeError is CosmicRayTestingException)"],
            capture_output=True, text=True)
        assert (child.returncode, child.stdout) == (0, "True True\\n"), child.stderr
''')


def _run(tmp_path: Path, *plugin: str) -> subprocess.CompletedProcess[str]:
    mutant = tmp_path / "test_mutant.py"
    mutant.write_text(MUTANT_TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    # As scripts/mutation runs it: the mutated module named, no PYTHONPATH of this process's
    # (this test may itself run under the plugin).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["MUTATION_MODULE"] = str(mutant)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
         "-p", "no:langsmith_plugin", "-c", str(tmp_path / "pytest.ini"),
         "--rootdir", str(tmp_path), *plugin, str(mutant)],
        cwd=CHECKOUT, env=env, capture_output=True, text=True, timeout=120)


def test_with_the_plugin_the_mutant_means_the_handler_no_longer_catches(tmp_path: Path) -> None:
    run = _run(tmp_path, "-p", "scripts.mutation_builtins")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "4 passed" in run.stdout


def test_without_the_plugin_the_mutant_dies_of_a_name_error(tmp_path: Path) -> None:
    run = _run(tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "4 failed" in run.stdout
    assert "NameError: name 'CosmicRayTestingException' is not defined" in run.stdout
    assert ("NameError: name 'jsonCosmicRayTestingExceptionJSONDecodeError' is not defined"
            in run.stdout)

