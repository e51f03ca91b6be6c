"""memplane's own import-linter contract types (registered in ``.importlinter``).

``no_circles``
    No import circle among the modules of the root packages: the import graph, with the
    imports under ``if TYPE_CHECKING:`` counted, has no strongly connected component of more
    than one module. ``scripts/import_cycles.py`` prints the circles themselves.

``private_names``
    No module imports another domain's underscore names. A domain is a package directly below
    a root package (``control_plane.memories``, ``memplane.cli``); the root package's own
    top-level modules and private modules are its kernel, one domain. ``from ..memories.write
    import _check_size`` in ``control_plane.entries.service`` breaks it, as does
    ``from ..deps import _role`` in ``control_plane.compliance.router``; ``from ._base import
    _query`` inside ``memplane`` does not. Dunder names (``__version__``) are public.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import grimp
from importlinter.application import output
from importlinter.domain.contract import Contract, ContractCheck

from .import_cycles import strongly_connected


def _root_packages(contract: Contract) -> list[str]:
    return sorted(contract.session_options["root_packages"])


class NoCirclesContract(Contract):
    type_name = "no_circles"

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        circles = strongly_connected(graph)
        return ContractCheck(kept=not circles, metadata={"circles": circles})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for circle in check.metadata["circles"]:
            output.print_error(f"An import circle of {len(circle)} modules:")
            for module in circle:
                output.print(f"    {module}")
            output.new_line()


def domain_of(module: str, roots: list[str], packages: set[str]) -> str:
    """The domain a module belongs to: the package directly below its root package
    (``control_plane.memories.write`` → ``control_plane.memories``). The root package's own
    top-level modules (``control_plane.deps``, ``control_plane.kit``) and private modules
    (``memplane._base``) are its kernel: the root package itself."""
    parts = module.split(".")
    for index, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            parts = parts[:index]
            break
    if parts[0] not in roots:
        return module
    if len(parts) >= 2 and ".".join(parts[:2]) in packages:
        return ".".join(parts[:2])
    return parts[0]


def _absolute(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = importer.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def private_imports(graph: grimp.ImportGraph, roots: list[str]) -> list[tuple[str, int, str]]:
    """(importer, line, what) for each import of another domain's underscore name."""
    found: list[tuple[str, int, str]] = []
    packages = {module.rsplit(".", 1)[0] for module in graph.modules if "." in module}
    for importer in sorted(graph.modules):
        spec = importlib.util.find_spec(importer)
        if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
            continue
        is_package = Path(spec.origin).name == "__init__.py"
        tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
        home = domain_of(importer, roots, packages)
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            source = _absolute(importer, is_package, node)
            if not any(source == r or source.startswith(r + ".") for r in roots):
                continue
            for alias in node.names:
                name = alias.name
                target = f"{source}.{name}" if f"{source}.{name}" in graph.modules else source
                if domain_of(target, roots, packages) == home:
                    continue
                if name.startswith("_") and not name.startswith("__"):
                    found.append((importer, node.lineno, f"{source}.{name}"))
    return found


class PrivateNamesContract(Contract):
    type_name = "private_names"

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        found = private_imports(graph, _root_packages(self))
        return ContractCheck(kept=not found, metadata={"found": found})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for importer, line, name in check.metadata["found"]:
            output.print_error(f"{importer}:{line} imports {name}, another domain's private name")
        output.new_line()

