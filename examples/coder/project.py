"""The scratch project the coder works on: ``hello.py``, with a bug, and its tests."""

from __future__ import annotations

from pathlib import Path

__all__ = ("BUG", "FIX", "PROJECT", "seed")

BUG, FIX = '"Hello, " + "name" + "!"', 'f"Hello, {name}!"'
PROJECT = {
    "hello.py": f'''"""Greetings: a tiny module with a bug, for the coder example to fix."""


def greet(name: str) -> str:
    """A greeting for ``name``: ``greet("Ada")`` is ``"Hello, Ada!"``."""
    return {BUG}
''',
    "test_hello.py": '''"""The tests of hello.py: python3 test_hello.py (or pytest)."""

import sys
import time

from hello import greet


def test_greets_by_name() -> None:
    assert greet("Ada") == "Hello, Ada!", greet("Ada")


def test_greets_anyone() -> None:
    assert greet("Grace Hopper") == "Hello, Grace Hopper!", greet("Grace Hopper")


def test_greets_the_world() -> None:
    assert greet("world") == "Hello, world!", greet("world")


if __name__ == "__main__":
    tests = [test for name, test in sorted(globals().items()) if name.startswith("test_")]
    failed = 0
    for test in tests:
        time.sleep(0.3)  # slow on purpose: watch the lines stream in
        try:
            test()
            print(f"ok   {test.__name__}", flush=True)
        except AssertionError as exc:
            failed += 1
            print(f"FAIL {test.__name__}: got {exc}", flush=True)
    print(f"{len(tests) - failed} passed, {failed} failed", flush=True)
    sys.exit(1 if failed else 0)
''',
}


def seed(root: Path, *, reset: bool = False) -> None:
    """The scratch project: written where missing (or everywhere, with ``reset``)."""
    root.mkdir(parents=True, exist_ok=True)
    for name, text in PROJECT.items():
        if reset or not (root / name).exists():
            (root / name).write_text(text)
