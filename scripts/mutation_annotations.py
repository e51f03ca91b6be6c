"""A cosmic-ray filter for ``scripts/mutation``: marks as not run the mutants that only change an
annotation Python never evaluates, and prints how many it marked.

Run with the mutation venv's Python (it imports cosmic-ray): ``python mutation_annotations.py
SESSION``. A module with ``from __future__ import annotations`` keeps its annotations as strings,
so ``X | None`` → ``X & None`` in them changes no behaviour. Only annotations nothing in the
process evaluates are filtered:

- the parameters' and return annotations of a function whose decorators are all plain
  (``staticmethod``, ``property``, ``contextmanager``, ``lru_cache``, …): a route's or a
  ``validate_call``'s annotations *are* evaluated, and so stay in;
- a variable's annotation inside a function body (never evaluated, future import or not);
- a module-level variable's annotation, and a field's in a ``@dataclass`` without bases
  (dataclasses read the strings, they do not evaluate them); a pydantic model's or an ORM
  model's fields are evaluated, and stay in.

A function that FastAPI calls as a dependency has its annotations evaluated although it is
undecorated; its annotation mutants are filtered too, which can only take killed mutants out
(an evaluated ``X & None`` raises where it is evaluated), never hide a survivor of a path a
test reaches.

Each filtered mutant is recorded as SKIPPED with the output ``annotation`` (the operator
filter's are SKIPPED with no output), so the score's summary can count the two apart.
"""

from __future__ import annotations

import ast
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

PLAIN_DECORATORS = {
    "staticmethod", "classmethod", "property", "setter", "deleter", "getter",
    "contextmanager", "asynccontextmanager", "cache", "lru_cache", "cached_property",
    "overload", "abstractmethod", "wraps", "override", "final", "total_ordering",
}
Span = tuple[tuple[int, int], tuple[int, int]]


def _name(node: ast.expr) -> str:
    """A decorator's last name: ``functools.lru_cache(maxsize=8)`` → ``lru_cache``."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _span(node: ast.expr) -> Span:
    assert node.end_lineno is not None and node.end_col_offset is not None
    return (node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset)


def _is_plain_dataclass(cls: ast.ClassDef) -> bool:
    return not cls.bases and any(_name(d) == "dataclass" for d in cls.decorator_list)


def unevaluated_annotations(tree: ast.Module) -> list[Span]:
    """The spans of the annotations in ``tree`` that nothing evaluates (rules above), in
    source order."""
    future = any(isinstance(n, ast.ImportFrom) and n.module == "__future__"
                 and any(a.name == "annotations" for a in n.names) for n in tree.body)
    spans: list[Span] = []

    def visit(node: ast.AST, in_function: bool, in_plain_class: bool, at_module: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if future and all(_name(d) in PLAIN_DECORATORS for d in child.decorator_list):
                    a = child.args
                    params = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
                    spans.extend(_span(p.annotation) for p in params
                                 if p is not None and p.annotation is not None)
                    if child.returns is not None:
                        spans.append(_span(child.returns))
                visit(child, True, False, False)
            elif isinstance(child, ast.ClassDef):
                visit(child, in_function, future and _is_plain_dataclass(child), False)
            elif isinstance(child, ast.AnnAssign):
                if in_function or (future and (at_module or in_plain_class)):
                    spans.append(_span(child.annotation))
                visit(child, in_function, False, False)
            elif isinstance(child, ast.Lambda):
                continue
            else:
                visit(child, in_function, in_plain_class, at_module and isinstance(
                    child, (ast.If, ast.Try)))

    visit(tree, False, False, True)
    return sorted(spans)


def _inside(inner: Span, outer: Span) -> bool:
    return outer[0] <= inner[0] and inner[1] <= outer[1]


@lru_cache
def _spans_of(path: Path) -> list[Span]:
    return unevaluated_annotations(ast.parse(path.read_text()))


def filter_session(db: Any) -> int:
    """Mark every pending mutant of a cosmic-ray ``WorkDB`` inside an unevaluated annotation;
    return how many."""
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    done = {job_id for job_id, _ in db.results}
    marked = 0
    for item in db.work_items:
        if item.job_id in done:
            continue
        if all(any(_inside((m.start_pos, m.end_pos), span) for span in _spans_of(m.module_path))
               for m in item.mutations):
            db.set_result(item.job_id, WorkResult(output="annotation", test_outcome=None,
                                                  diff=None,
                                                  worker_outcome=WorkerOutcome.SKIPPED))
            marked += 1
    return marked


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.splitlines()[0], file=sys.stderr)
        return 2
    from cosmic_ray.work_db import WorkDB, use_db

    with use_db(argv[0], WorkDB.Mode.open) as db:
        marked = filter_session(db)
    print(f"{marked} mutants only change an annotation nothing evaluates: not run")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
