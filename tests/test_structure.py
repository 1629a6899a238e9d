"""The library's module structure: no import cycles, no private names across modules, the stand-in apart.

Read from the source (``ast``), so nothing is imported: an import under ``if TYPE_CHECKING:`` is for
the type checker only and is not followed; an import inside a function is followed like any other,
but for a package's module-level ``__getattr__`` (PEP 562: the package's public classes, imported
on first use of their name, which no library module asks of the package).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOT = REPO / "infra"
PACKAGE = "idempotent_order_pipeline"
SANDBOX = f"{PACKAGE}.sandbox"
#: The stand-in's front in the CLI: it imports the stand-in when a ``sandbox`` command runs.
SANDBOX_FRONT = f"{PACKAGE}.cli.sandbox"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def library_modules() -> dict[str, Path]:
    return {
        module_name(path): path
        for path in sorted((ROOT / PACKAGE).rglob("*.py"))
        if "__pycache__" not in path.parts and "brownfield_app" not in path.parts
    }


def _runtime_nodes(tree: ast.Module) -> Iterator[ast.AST]:
    """Every node but what sits under ``if TYPE_CHECKING:`` and in a module-level ``__getattr__``."""
    stack: list[ast.AST] = [node for node in tree.body if not _lazy_attributes(node)]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _lazy_attributes(node: ast.stmt) -> bool:
    return isinstance(node, ast.FunctionDef) and node.name == "__getattr__"


def imports(name: str, path: Path) -> list[tuple[str, list[str]]]:
    """(module imported, names taken from it) for each runtime import of a module."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, list[str]]] = []
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            found.append((target, [alias.name for alias in node.names]))
    return found


def graph() -> dict[str, set[str]]:
    """Module -> the library modules it imports at run time."""
    modules = library_modules()
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for target, names in imports(name, path):
            # `from package import module` imports that module; the package's __init__ is not counted
            # (every import of a submodule runs it first, so counting it would make each package a cycle)
            submodules = {f"{target}.{item}" for item in names} & modules.keys()
            targets |= (submodules or ({target} & modules.keys())) - {name}
        edges[name] = targets
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Each import cycle once (Tarjan's strongly connected components of more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
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

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_the_reader_finds_the_library_and_its_imports() -> None:
    # GIVEN the library's modules, as the checks below read them
    edges = graph()
    # THEN the construct, the CLI and the stand-in are among them, with imports the code really has
    assert f"{PACKAGE}.construct" in edges
    assert f"{PACKAGE}.cli.migrate" in edges
    assert f"{PACKAGE}.resources" in edges[f"{PACKAGE}.construct"]
    assert f"{SANDBOX}.moto_patches" in edges
    # AND a cycle made of two modules would be found
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    # AND an import inside a function is followed, one under TYPE_CHECKING is not
    assert f"{PACKAGE}.sandbox.control" in edges[SANDBOX_FRONT]
    assert f"{PACKAGE}.construct" not in edges[f"{PACKAGE}.discovery"]


def test_the_library_has_no_import_cycle() -> None:
    # GIVEN every runtime import between the library's modules
    edges = graph()
    # THEN no module reaches itself
    assert cycles(edges) == []


def test_no_module_imports_another_modules_private_names() -> None:
    # GIVEN every `from idempotent_order_pipeline... import name` of the library
    taken = [
        (name, target, item)
        for name, path in library_modules().items()
        for target, items in imports(name, path)
        if target.startswith(PACKAGE)
        for item in items
    ]
    assert taken
    # THEN none takes a name that its module keeps private (a shared helper lives in a module of its own)
    assert [entry for entry in taken if entry[2].startswith("_") and entry[2] != "__version__"] == []


def test_only_the_stand_ins_front_imports_the_stand_in() -> None:
    # GIVEN the modules outside the stand-in
    edges = graph()
    outside = {name: targets for name, targets in edges.items() if not name.startswith(SANDBOX)}
    assert outside
    # THEN none imports it but the CLI's `sandbox` commands (when one runs), so importing the library
    # never imports moto or patches it
    importers = {name for name, targets in outside.items() if any(t.startswith(SANDBOX) for t in targets)}
    assert importers == {SANDBOX_FRONT}


def test_every_package_of_the_library_is_in_the_distribution() -> None:
    # GIVEN the packages pyproject.toml ships and the library's packages on disk
    import tomllib

    shipped = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {module_name(init) for init in (ROOT / PACKAGE).rglob("__init__.py") if "__pycache__" not in init.parts}
    assert {PACKAGE, f"{PACKAGE}.core", SANDBOX} <= on_disk
    # THEN each is shipped (a package left out fails only once installed, as core did)
    assert on_disk - shipped == set()
