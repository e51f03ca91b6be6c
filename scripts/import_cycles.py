#!/usr/bin/env python3
"""Print every import circle among memplane's modules; exit 1 when there is one.

    .venv/bin/python scripts/import_cycles.py

Builds the import graph of control_plane, storage_adapters and memplane with grimp (the graph
import-linter checks) and prints each strongly connected component of more than one module:
the modules that, through some chain of imports, each import all the others. Imports inside
``if TYPE_CHECKING:`` blocks count, as they do for import-linter.
"""

from __future__ import annotations

import sys
from pathlib import Path

import grimp

PACKAGES = ("control_plane", "storage_adapters", "memplane")


def strongly_connected(graph: grimp.ImportGraph) -> list[list[str]]:
    """Tarjan's algorithm, iterative: the components with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    imported = sorted(graph.find_modules_directly_imported_by(child))
                    work.append((child, iter(imported)))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def main() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    circles = strongly_connected(graph)
    for circle in circles:
        print(f"circle of {len(circle)} modules:")
        for module in circle:
            print(f"  {module}")
    print(f"{len(graph.modules)} modules, {len(circles)} import circles")
    return 1 if circles else 0


if __name__ == "__main__":
    raise SystemExit(main())
