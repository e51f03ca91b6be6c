"""Imported at the start of every Python process of a mutation run (``scripts/mutation_builtins``
puts this directory on ``PYTHONPATH``): runs that plugin's file here too, so a spawned server
that imports a mutated module reads the mutant as the test process does."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "_mutation_builtins", Path(__file__).resolve().parent.parent / "mutation_builtins.py")
if _spec is not None and _spec.loader is not None:
    _spec.loader.exec_module(importlib.util.module_from_spec(_spec))
