"""``glob`` and ``grep``: patterns, ignored directories, links never followed, binary files
skipped, output capped."""

from fnmatch import fnmatchcase
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from tether.tools import (
    InvalidPath,
    InvalidPattern,
    NotAFile,
    PathOutsideRoot,
    WorkspaceError,
    workspace,
)
from tether.tools._search import MAX_MATCHES, glob_regex

from .support import GAP_BOUND, SECRET, Tools, eventually, loop_gaps, worker_pids


@pytest.fixture
def tree(root: Path, outside: Path) -> Path:
    for path, text in {
        "README.md": "# Project\nTODO: write\n",
        "src/app.py": "import os\n# todo later\nprint('hi')\n",
        "src/util/strings.py": "def upper(s):\n    return s.upper()  # TODO\n",
        "src/util/data.json": '{"todo": true}\n',
        "tests/test_app.py": "def test_app():\n    pass\n",
        "node_modules/lib/index.js": "// TODO in a dependency\n",
        ".git/config": "[core] TODO\n",
        "b.txt": "b\n",
        "c.txt": "c\r\nTODO crlf\r\n",
    }.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    (root / "logo.png").write_bytes(b"\x89PNG\x00\x00TODO")
    (root / "src" / "linked").symlink_to("util")  # a link to a directory inside
    (root / "escape").symlink_to(outside)  # a link out
    (root / "escape.txt").symlink_to(outside / "secret.txt")
    return root


@pytest.mark.parametrize(
    ("pattern", "matches", "misses"),
    [
        ("*.py", ["a.py", ".hidden.py"], ["a/b.py", "a.pyc", "a.py/"]),
        ("**/*.py", ["a.py", "a/b.py", "a/b/c.py"], ["a.pyc", "a/b.pyc"]),
        ("src/**", ["src/a", "src/a/b"], ["src", "other/a"]),
        ("a/**/z", ["a/z", "a/b/z", "a/b/c/z"], ["z", "b/z"]),
        ("?.txt", ["a.txt"], ["ab.txt", "/.txt"]),
        ("[ab].txt", ["a.txt", "b.txt"], ["c.txt"]),
        ("[!ab].txt", ["c.txt"], ["a.txt", "/.txt"]),
        ("[a-c]x", ["bx"], ["dx"]),
        ("[[]x", ["[x"], ["ax"]),  # a class holding '[': no regex set warning
        ("a&&b|c~~d", ["a&&b|c~~d"], ["ab"]),  # regex metacharacters are literal
        ("file[", ["file["], ["file"]),  # an unclosed class is a literal '['
    ],
)
def test_glob_patterns(pattern: str, matches: list[str], misses: list[str]) -> None:
    regex = glob_regex(pattern)
    for path in matches:
        assert regex.fullmatch(path), (pattern, path)
    for path in misses:
        assert not regex.fullmatch(path), (pattern, path)


def test_glob_patterns_may_not_leave_the_root() -> None:
    with pytest.raises(PathOutsideRoot):
        glob_regex("/etc/*")
    with pytest.raises(PathOutsideRoot):
        glob_regex("../*")
    with pytest.raises(InvalidPath):
        glob_regex("")
    with pytest.raises(InvalidPath):
        glob_regex("a\x00")


async def test_glob_lists_in_name_order_and_marks_directories(tools: Tools, tree: Path) -> None:
    assert (await tools("glob", pattern="**/*.py")).split("\n") == [
        "src/app.py",
        "src/util/strings.py",
        "tests/test_app.py",
    ]
    top = (await tools("glob", pattern="*")).split("\n")
    assert top == [
        ".git/",
        "README.md",
        "b.txt",
        "c.txt",
        "escape",  # a link: listed under its name, not followed
        "escape.txt",
        "logo.png",
        "node_modules/",
        "src/",
        "tests/",
    ]
    assert await tools("glob", pattern="*.py", path="src/util") == "src/util/strings.py"
    assert await tools("glob", pattern="*.py", path="src/linked") == "src/util/strings.py"
    assert (await tools("glob", pattern="**", path="src")).split("\n") == [
        "src/app.py",
        "src/linked",
        "src/util/",
        "src/util/data.json",
        "src/util/strings.py",
    ]
    assert "no paths under . match '*.rs'" in await tools("glob", pattern="*.rs")


async def test_glob_neither_descends_ignored_directories_nor_follows_links(
    tools: Tools, tree: Path
) -> None:
    everything = (await tools("glob", pattern="**")).split("\n")
    assert ".git/" in everything and "node_modules/" in everything
    ignored = [path for path in everything if path.startswith((".git/", "node_modules/"))]
    assert ignored == [".git/", "node_modules/"]  # listed, not descended into
    assert not [path for path in everything if "secret" in path]
    assert "src/linked" in everything and "src/linked/strings.py" not in everything
    # Pointed at an ignored directory, it searches it.
    assert await tools("glob", pattern="*", path=".git") == ".git/config"
    # Unless told otherwise.
    everything = await Tools(workspace(tree, ignore=()))("glob", pattern="**/*.js")
    assert everything == "node_modules/lib/index.js"
    with pytest.raises(PathOutsideRoot):
        await tools("glob", pattern="*", path="escape")
    with pytest.raises(NotAFile, match="is a file"):
        await tools("glob", pattern="*", path="b.txt")


async def test_glob_output_is_capped(root: Path) -> None:
    for n in range(100):
        (root / f"file{n:03d}.txt").write_text("")
    shown = await Tools(workspace(root, max_output_bytes=200))("glob", pattern="*.txt")
    lines = shown.split("\n")
    assert lines[0] == "file000.txt" and len(lines) < 30
    assert lines[-1].startswith("[truncated: the first") and "narrow the pattern" in lines[-1]


async def test_grep_finds_lines_as_path_line_text(tools: Tools, tree: Path) -> None:
    found = (await tools("grep", pattern="TODO")).split("\n")
    assert found == [
        "README.md:2:TODO: write",
        "c.txt:2:TODO crlf",  # the \r is not part of the line shown
        "src/util/strings.py:2:    return s.upper()  # TODO",
        "[1 binary, over-large or unreadable files skipped]",  # logo.png
    ]
    case = (await tools("grep", pattern="todo", ignore_case=True, path="src")).split("\n")
    assert case == [
        "src/app.py:2:# todo later",
        'src/util/data.json:1:{"todo": true}',
        "src/util/strings.py:2:    return s.upper()  # TODO",
    ]


async def test_grep_filters_by_glob_and_takes_a_single_file(tools: Tools, tree: Path) -> None:
    by_name = await tools("grep", pattern="def ", glob="*.py")  # a name: at any depth
    assert by_name.split("\n") == [
        "src/util/strings.py:1:def upper(s):",
        "tests/test_app.py:1:def test_app():",
    ]
    by_path = await tools("grep", pattern="def ", glob="tests/*.py")  # a path: from `path`
    assert by_path == "tests/test_app.py:1:def test_app():"
    assert await tools("grep", pattern="print", path="src/app.py") == "src/app.py:3:print('hi')"
    assert await tools("grep", pattern="upper", path="src/linked") == (
        "src/util/strings.py:1:def upper(s):\nsrc/util/strings.py:2:    return s.upper()  # TODO"
    )
    nothing = await tools("grep", pattern="zebra")
    assert nothing.startswith("no matches for 'zebra' in 7 files under .")


async def test_grep_never_reads_through_a_link_nor_a_binary_file(tools: Tools, tree: Path) -> None:
    assert SECRET not in await tools("grep", pattern="secret")
    with pytest.raises(PathOutsideRoot):
        await tools("grep", pattern="secret", path="escape.txt")
    with pytest.raises(PathOutsideRoot):
        await tools("grep", pattern="secret", path="escape")
    binary = await tools("grep", pattern="TODO", path="logo.png")
    assert binary.startswith("no matches") and "1 binary" in binary


async def test_grep_skips_large_files_and_caps_its_output(root: Path) -> None:
    (root / "big.txt").write_text("needle\n" * 200)  # 1400 bytes
    (root / "small.txt").write_text("needle\n")
    capped = Tools(workspace(root, max_file_bytes=1000))
    assert await capped("grep", pattern="needle") == (
        "small.txt:1:needle\n[1 binary, over-large or unreadable files skipped]"
    )
    short = Tools(workspace(root, max_output_bytes=100))
    lines = (await short("grep", pattern="needle")).split("\n")
    assert lines[0] == "big.txt:1:needle" and len(lines) < 10
    assert lines[-1].startswith("[truncated: the first") and "narrow the pattern" in lines[-1]
    (root / "wide.txt").write_text("needle" + "x" * 2000 + "\n")
    wide = await Tools(workspace(root))("grep", pattern="needle", path="wide.txt")
    assert wide.endswith(" [...]") and len(wide) < 600


async def test_grep_caps_its_matches(root: Path) -> None:
    (root / "many.txt").write_text("needle\n" * (MAX_MATCHES + 100))
    lines = (await Tools(workspace(root))("grep", pattern="needle")).split("\n")
    assert lines[:2] == ["many.txt:1:needle", "many.txt:2:needle"]
    assert len(lines) == MAX_MATCHES + 1
    assert lines[-1] == (
        f"[truncated: the first {MAX_MATCHES} matches shown; narrow the pattern, the path or "
        "the glob]"
    )


async def test_grep_reports_a_bad_expression(tools: Tools, tree: Path) -> None:
    with pytest.raises(InvalidPattern, match="invalid regular expression"):
        await tools("grep", pattern="(unclosed")
    result = await tools.result("grep", pattern="[z-a]")
    assert result.is_error and "InvalidPattern: invalid regular expression" in result.content
    huge = await tools.result("grep", pattern="(" * 100_000)  # no crash, and a short message
    assert huge.is_error and "invalid regular expression" in huge.content
    assert len(huge.content) < 500
    assert issubclass(InvalidPattern, WorkspaceError)


async def test_a_backtracking_pattern_leaves_the_event_loop_ticking(root: Path) -> None:
    """Issue 36 item 4: ``(a*)*b`` against a line of a's backtracks for seconds (2^25 ways to
    split the line) and ``re`` holds the GIL all the while, so a grep run in a thread stopped
    the event loop: no other session, request or lease renewal ran. Now the search runs in a
    worker process, on RE2 (linear time): it answers at once and the loop never stops."""
    (root / "aaa.txt").write_text("a" * 25 + "\n")
    tools = Tools(workspace(root))
    async with loop_gaps() as gaps:
        answer = await tools("grep", pattern="(a*)*b")
    assert answer == "no matches for '(a*)*b' in 1 files under ."
    assert max(gaps) < GAP_BOUND, f"the event loop stopped for {max(gaps):.3f} s"


async def test_a_pattern_only_re_can_run_is_stopped_at_the_deadline(root: Path) -> None:
    """A lookahead keeps the same backtracking pattern off RE2: it runs on ``re`` in the
    worker, which is killed at the deadline; the model reads a typed error, the loop ticks
    all the while, and the next call gets a fresh worker."""
    (root / "aaa.txt").write_text("a" * 40 + "\n")
    tools = Tools(workspace(root, tool_timeout=1))
    await tools("grep", pattern="warm")  # a worker started, idle (its start is not timed)
    before = worker_pids()
    async with loop_gaps() as gaps:
        result = await tools.result("grep", pattern="(?=a)(a*)*b")
    assert result.is_error and result.content == (
        "grep failed: ToolTimedOut: grep timed out after 1 s and was stopped; narrow the "
        "pattern, the path or the glob"
    )
    assert max(gaps) < GAP_BOUND, f"the event loop stopped for {max(gaps):.3f} s"
    assert await eventually(lambda: len(worker_pids() & before) == len(before) - 1)  # killed
    assert await tools("grep", pattern="a+$") == "aaa.txt:1:" + "a" * 40


async def test_a_glob_that_would_backtrack_answers_at_once(root: Path) -> None:
    """A glob is a regular expression too: ``*a*a*...b`` as one ``[^/]*`` a star tries every
    split of a long name of a's (``O(n^12)``), and in a thread held the GIL for as long. Each
    star's piece is taken where it first occurs, so it answers at once; and it runs in the
    worker, under the deadline, all the same."""
    (root / ("a" * 200)).write_text("")
    deep = root.joinpath(*["a"] * 30)
    deep.mkdir(parents=True)
    tools = Tools(workspace(root, tool_timeout=20))
    async with loop_gaps() as gaps:
        stars = await tools("glob", pattern="*a" * 12 + "b")
        doubles = await tools("glob", pattern="**/a/" * 10 + "**/b")
        found = await tools("glob", pattern="*a" * 12 + "*")
    assert stars.startswith("no paths under . match '*a*a") and doubles.startswith("no paths")
    assert found == "a" * 200  # twelve a's at least: the directory "a" is not one
    assert max(gaps) < GAP_BOUND, f"the event loop stopped for {max(gaps):.3f} s"


def _matches(parts: list[str], names: list[str]) -> bool:
    """The glob's meaning, told plainly: ``fnmatchcase`` per component, a ``**`` spanning
    any number of them (a last ``**``, one or more: ``src/**`` is not ``src``)."""
    if not parts:
        return not names
    if parts[0] == "**":
        if len(parts) == 1:
            return bool(names)
        return any(_matches(parts[1:], names[skip:]) for skip in range(len(names) + 1))
    return bool(names) and fnmatchcase(names[0], parts[0]) and _matches(parts[1:], names[1:])


_GLOB_TOKENS = ["a", "b", "?", "*", "[ab]", "[!a]", "/", "**/"]


@given(
    st.lists(st.sampled_from(_GLOB_TOKENS), min_size=1, max_size=8),
    st.lists(st.text(alphabet="ab", min_size=1, max_size=5), min_size=1, max_size=4),
)
def test_glob_means_fnmatch_per_component(tokens: list[str], names: list[str]) -> None:
    pattern = "".join(tokens)
    parts = [part for part in pattern.split("/") if part not in ("", ".")]
    assume(parts and not pattern.startswith("/"))
    path = "/".join(names)
    assert bool(glob_regex(pattern).fullmatch(path)) == _matches(parts, names), (pattern, path)


def test_a_glob_class_that_is_no_class_is_an_invalid_pattern() -> None:
    with pytest.raises(InvalidPattern, match=r"invalid glob '\[z-a\]\.txt'"):
        glob_regex("[z-a].txt")
