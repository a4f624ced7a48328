"""The shape of the source tree (docs/architecture.md §2): private modules stay private to
their package (in the tests too), and no two modules import each other, directly or around a
loop."""

import ast
from collections.abc import Iterator
from pathlib import Path

import tether

SRC = Path(tether.__file__).parent.parent
TESTS = Path(__file__).parent
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
    return _imports_of(path, _package(module, path))


def _imports_of(path: Path, package: str) -> Iterator[tuple[str, int]]:
    """Every Tether module the file at ``path`` imports, its relative imports resolved
    against ``package``."""
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


def _private_to_another(package: str, imported: str) -> bool:
    """``imported`` is a private module of a package other than ``package`` or one above it
    (the top package's shared internals are everyone's)."""
    owner, _, leaf = imported.rpartition(".")
    if not leaf.startswith("_") or owner == "tether":
        return False
    return package != owner and not package.startswith(owner + ".")


def test_no_module_imports_another_packages_private_module() -> None:
    offences = [
        f"{module}:{line} imports {imported}"
        for module, path in MODULES.items()
        for imported, line in _imports(module)
        if _private_to_another(_package(module, path), imported)
    ]
    assert not offences, "private modules imported across packages:\n" + "\n".join(offences)


def test_no_test_imports_another_packages_private_module() -> None:
    """The source's rule, for tests: ``tests/<pkg>/`` tests ``tether.<pkg>`` and may import its
    private modules (those of its subpackages too: ``tests/store`` tests the PostgreSQL
    backend); any other test uses public names, or lives with the package it tests."""
    offences = []
    for path in sorted(TESTS.rglob("*.py")):
        folder = path.parent.relative_to(TESTS).parts
        tested = ".".join(("tether", *folder))
        for imported, line in _imports_of(path, ".".join(("tests", *folder))):
            below = bool(folder) and imported.startswith(tested + ".")
            if not below and _private_to_another(tested, imported):
                offences.append(f"{path.relative_to(TESTS.parent)}:{line} imports {imported}")
    assert not offences, "tests reaching into another package:\n" + "\n".join(offences)


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
    "wire": set(),
    "store": set(),
    "auth": {"store"},
    "models": set(),
    "journal": {"store", "models"},
    "stream": {"journal", "models"},
    "engine": {"journal", "store", "models"},
    "agent": {"engine", "journal", "models"},
    "tools": {"agent"},
    "integrations": {"engine", "journal", "stream", "models", "store"},
    "otel": {"engine", "stream"},
    "http": {"auth", "engine", "stream", "journal", "store", "wire"},
    "testing": {"store", "journal", "models"},
    "demo": {"agent", "engine", "models"},
    "client": {"wire", "stream"},
    "cli": {
        "auth",
        "client",
        "demo",
        "engine",
        "http",
        "journal",
        "models",
        "otel",
        "store",
        "stream",
        "testing",
        "wire",
    },
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
