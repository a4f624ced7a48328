"""The shape of the source tree (docs/architecture.md §2): private modules stay private to
their package, and no two modules import each other, directly or around a loop."""

import ast
from collections.abc import Iterator
from pathlib import Path

import tether

SRC = Path(tether.__file__).parent.parent
MODULES = {
    ".".join(path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__"): path
    for path in (SRC / "tether").rglob("*.py")
}


def _package(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _imports(module: str) -> Iterator[tuple[str, int]]:
    """Every Tether module ``module`` imports, at any depth of its code (a deferred import
    inside a function is an import all the same), with its line."""
    path = MODULES[module]
    package = _package(module, path)
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against this module's package
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            # ``from package import submodule`` imports the submodule.
            names = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                for alias in node.names
            ]
        else:
            continue
        for name in names:
            if name.split(".")[0] == "tether" and name in MODULES:
                yield name, node.lineno


def test_no_module_imports_another_packages_private_module() -> None:
    offences = []
    for module, path in MODULES.items():
        own = _package(module, path)
        for imported, line in _imports(module):
            owner, _, leaf = imported.rpartition(".")
            if not leaf.startswith("_") or owner == "tether":
                continue  # public, or one of the top package's shared internals
            if own != owner and not own.startswith(owner + "."):
                offences.append(f"{module}:{line} imports {imported}")
    assert not offences, "private modules imported across packages:\n" + "\n".join(offences)


def test_no_import_cycles() -> None:
    graph = {module: {name for name, _ in _imports(module)} - {module} for module in MODULES}
    # A package's __init__ re-exports its modules: an edge into a package's own __init__
    # from one of its modules is what every package has, not a loop of concepts.
    for module in graph:
        graph[module] = {
            name
            for name in graph[module]
            if not (MODULES[name].name == "__init__.py" and module.startswith(name + "."))
        }
    cycles: list[list[str]] = []
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in graph:
        if module not in index:
            visit(module)
    assert not cycles, f"modules that import each other: {cycles}"


CORE = frozenset({"records", "messages", "errors", "tree"})
"""With the top package's private modules: the vocabulary every layer may use."""
MAY_IMPORT = {
    "store": set(),
    "models": set(),
    "journal": {"store", "models"},
    "stream": {"journal", "models"},
    "engine": {"journal", "store", "models"},
    "agent": {"engine", "journal", "models"},
    "tools": {"agent"},
    "integrations": {"engine", "journal", "stream", "models"},
    "otel": {"engine", "stream"},
    "http": {"engine", "stream", "journal", "store"},
    "testing": {"store", "journal", "models"},
    "demo": {"agent", "engine", "models"},
    "cli": {"demo", "engine", "http", "journal", "models", "otel", "store", "stream", "testing"},
}
"""docs/architecture.md §2: what each package may import of Tether besides the core."""


def _layer(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) < 2 or parts[1].startswith("_") or parts[1] in CORE:
        return None  # the top package or the core
    return parts[1]


def test_imports_point_inward() -> None:
    assert set(MAY_IMPORT) == {_layer(m) for m in MODULES} - {None}, "a package is unlisted"
    offences = []
    for module in MODULES:
        layer = _layer(module)
        if layer is None:
            continue
        for imported, line in _imports(module):
            target = _layer(imported)
            if target not in (None, layer) and target not in MAY_IMPORT[layer]:
                offences.append(f"{module}:{line} ({layer}) imports {imported} ({target})")
    assert not offences, "imports against the layering:\n" + "\n".join(offences)
