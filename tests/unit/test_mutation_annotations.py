"""The mutation score's annotation filter (``scripts/mutation_annotations.py``): which
annotations it calls never evaluated, and so which mutants it keeps out of a run."""

from __future__ import annotations

import ast
import textwrap

from scripts.mutation_annotations import unevaluated_annotations

SOURCE = textwrap.dedent('''\
    from __future__ import annotations
    import functools
    from dataclasses import dataclass
    from pydantic import BaseModel

    LIMIT: int | None = None

    def plain(a: int | None, *rest: str, flag: bool = False, **kw: bytes) -> str | None:
        local: list[int] = []
        return None

    @functools.lru_cache(maxsize=8)
    def cached(a: int) -> int:
        return a

    @router.get("/x")
    def route(a: int | None) -> dict:
        return {}

    @dataclass(frozen=True)
    class Row:
        id: str | None
        def method(self, b: int) -> None:
            pass

    class Body(BaseModel):
        name: str | None = None

    @dataclass
    class Child(Row):
        extra: int = 0
    ''')


def _texts(source: str) -> list[str]:
    """The source text of each span the filter returns, in order."""
    lines = source.splitlines()
    out = []
    for (row, col), (end_row, end_col) in unevaluated_annotations(ast.parse(source)):
        assert row == end_row, "every annotation here is on one line"
        out.append(lines[row - 1][col:end_col])
    return out


def test_only_annotations_nothing_evaluates_are_filtered() -> None:
    assert _texts(SOURCE) == [
        "int | None",          # a module-level variable
        "int | None", "str", "bool", "bytes", "str | None",  # a plain function's
        "list[int]",           # a local variable
        "int", "int",          # lru_cache evaluates nothing
        # the route's are kept: FastAPI evaluates them
        "str | None",          # a plain dataclass's field
        "int", "None",         # a method of it
        # the pydantic model's field and the dataclass with a base are kept
    ]


def test_without_postponed_evaluation_only_local_variables_are_filtered() -> None:
    source = SOURCE.replace("from __future__ import annotations\n", "")
    assert _texts(source) == ["list[int]"]
