"""Every module of ``src/tether`` says what its one concept is (CONTRIBUTING.md, "One concept a
module, whatever its length"): a docstring first, and what it exports in an ``__all__`` tuple.
Nothing here, nor anywhere else, counts a module's lines."""

import ast
from pathlib import Path

import tether

SRC = Path(tether.__file__).parent
MODULES = sorted(SRC.rglob("*.py"))


def _exports(tree: ast.Module) -> ast.expr | None:
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        else:
            continue
        if any(isinstance(target, ast.Name) and target.id == "__all__" for target in targets):
            return node.value
    return None


def test_every_module_opens_with_a_docstring_that_says_what_it_is() -> None:
    bare = [
        str(path.relative_to(SRC))
        for path in MODULES
        if not ast.get_docstring(ast.parse(path.read_text(), str(path)))
    ]
    assert not bare, f"modules without a docstring: {bare}"


def test_every_module_lists_its_exports_in_an_all_tuple() -> None:
    offences = []
    for path in MODULES:
        exports = _exports(ast.parse(path.read_text(), str(path)))
        if not isinstance(exports, ast.Tuple):
            found = "none" if exports is None else type(exports).__name__.lower()
            offences.append(f"{path.relative_to(SRC)}: {found}")
    assert not offences, f"modules without an __all__ tuple: {offences}"
