"""A pytest plugin for ``scripts/mutation``'s test command (``-p scripts.mutation_builtins``):
makes ``CosmicRayTestingException`` a builtin of the test process and of every Python process
it starts.

cosmic-ray's exception-replacer mutant rewrites ``except OSError`` to ``except
CosmicRayTestingException``: the handler should no longer catch, and the original exception
should go on. cosmic-ray defines that class in its own package, which the project's ``.venv``
(where the tests run) does not have, so without this plugin a mutant whose handler is reached
dies of ``NameError`` — killed whether or not a test checks what the handler does (a test that
expects the exception to propagate fails on the NameError instead). With the name a builtin,
an ``Exception`` subclass nothing raises, the mutant means what it says.

cosmic-ray 8.7 writes the mutant of a dotted name wrongly: ``except note.NoteError`` becomes
``except noteCosmicRayTestingExceptionNoteError``. Every such name in the mutated module
(``MUTATION_MODULE``, which ``scripts/mutation`` sets) is made a builtin too, the same class:
that mutant then also means "this handler no longer catches". (A dotted name inside a tuple,
``except (A, b.C)``, cosmic-ray cannot write at all; it stays counted as such.)

A server a test spawns (``memplane serve``) imports the mutated module too: the plugin puts
``scripts/mutation_site`` first on ``PYTHONPATH``, whose ``sitecustomize`` runs this file at
the child's start (the project's Python has no ``sitecustomize`` of its own).
"""

from __future__ import annotations

import builtins
import os
import re
from pathlib import Path

NAME = "CosmicRayTestingException"
SITE = Path(__file__).resolve().with_name("mutation_site")
_MUTANT_NAMES = re.compile(r"\b\w*" + NAME + r"\w*\b")


class CosmicRayTestingException(Exception):
    """The exception an exception-replacer mutant's handler catches: nothing raises it."""


def names_in(source: str) -> set[str]:
    """The names a mutant's handler may use: the plain one, and cosmic-ray's garbled dotted
    ones found in ``source``."""
    return {NAME, *_MUTANT_NAMES.findall(source)}


def install() -> None:
    """Make the names builtins of this process (unless already there) and of the Python
    processes it starts."""
    cls = getattr(builtins, NAME, CosmicRayTestingException)
    module = os.environ.get("MUTATION_MODULE")
    source = ""
    if module:
        try:
            source = Path(module).read_text()
        except OSError:  # the run's module is gone: only the plain name
            source = ""
    for name in names_in(source):
        if not hasattr(builtins, name):
            setattr(builtins, name, cls)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(SITE) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(SITE), *paths])


install()
