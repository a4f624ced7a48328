"""Confinement: every way out of the workspace root is refused, as a typed error the model
reads, and a link swapped in mid-resolution is never followed."""

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

import tether.tools._files as files_module
import tether.tools._paths as paths_module
from tether.messages import ToolOutcomeStatus
from tether.tools import InvalidPath, PathNotFound, PathOutsideRoot, WorkspaceError, workspace
from tether.tools._paths import Root

from .support import SECRET, Tools, names


@pytest.mark.parametrize(
    "path",
    [
        "../outside/secret.txt",
        "a/../../outside/secret.txt",  # climbs out after a step in
        "a/../b",  # stays inside, lexically, and is refused all the same: no '..' at all
        "..",
        "./..",
        "sub/../../outside/secret.txt",
        "..//outside/secret.txt",
    ],
)
async def test_dot_dot_is_refused(tools: Tools, root: Path, path: str) -> None:
    (root / "a").mkdir()
    with pytest.raises(PathOutsideRoot, match=r"contains '\.\.'"):
        await tools("read", path=path)


async def test_absolute_paths_are_refused_even_inside_the_root(tools: Tools, root: Path) -> None:
    (root / "inside.txt").write_text("in")
    for path in ("/etc/passwd", str(root / "inside.txt"), "//etc/passwd", "/"):
        with pytest.raises(PathOutsideRoot, match="absolute"):
            await tools("read", path=path)


async def test_nul_bytes_and_absurd_lengths_are_refused(tools: Tools, root: Path) -> None:
    with pytest.raises(InvalidPath, match="NUL"):
        await tools("read", path="a.txt\x00.png")
    with pytest.raises(InvalidPath, match="NUL"):
        await tools("write", path="a\x00b", content="x")
    with pytest.raises(InvalidPath, match="bytes long"):
        await tools("read", path="a/" * 3000)
    with pytest.raises(InvalidPath, match="longer than 255"):
        await tools("write", path="d/" + "x" * 300, content="x")
    with pytest.raises(InvalidPath, match="empty"):
        await tools("read", path="")
    with pytest.raises(InvalidPath, match="not valid text"):
        await tools("read", path="bad\ud800")
    assert names(root) == []  # nothing was made on the way
    # Long, but within the limits: fine.
    deep = "/".join(["d" * 200] * 15) + "/f.txt"
    assert len(deep) < 4096
    await tools("write", path=deep, content="deep")
    assert await tools("read", path=deep) == "deep"


async def test_refusals_are_tool_results_the_model_reads(tools: Tools) -> None:
    result = await tools.result("read", path="../outside/secret.txt")
    assert result.is_error and result.status is ToolOutcomeStatus.ERROR
    assert result.content.startswith("read failed: PathOutsideRoot: '../outside/secret.txt'")
    assert SECRET not in result.content
    result = await tools.result("write", path="/tmp/x", content="x")
    assert result.is_error and "PathOutsideRoot" in result.content and "absolute" in result.content


async def test_links_that_stay_inside_are_followed(tools: Tools, root: Path) -> None:
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "mod.py").write_text("code")
    (root / "alias").symlink_to("src/pkg")  # a relative link to a directory
    (root / "src" / "up").symlink_to("../src/pkg/mod.py")  # a '..' that stays inside
    (root / "absolute").symlink_to(root / "src" / "pkg")  # an absolute link into the root
    (root / "chain").symlink_to("alias")  # a link to a link
    for path in ("alias/mod.py", "src/up", "absolute/mod.py", "chain/mod.py", "./alias/./mod.py"):
        assert await tools("read", path=path) == "code", path
    await tools("write", path="alias/new.py", content="new")
    assert (root / "src" / "pkg" / "new.py").read_text() == "new"
    assert (root / "alias").is_symlink()


@pytest.mark.parametrize(
    "make",
    [
        lambda root, out: (root / "link").symlink_to(out / "secret.txt"),  # absolute, to a file
        lambda root, out: (root / "link").symlink_to("../outside/secret.txt"),  # relative
        lambda root, out: (root / "link").symlink_to("/"),  # the filesystem's root
        lambda root, out: (root / "link").symlink_to(".."),  # the root's parent
        lambda root, out: ((root / "d").mkdir(), (root / "d" / "link").symlink_to("../../outside")),
    ],
    ids=["absolute-file", "relative-file", "slash", "dot-dot", "nested"],
)
async def test_links_that_escape_are_refused(
    tools: Tools, root: Path, outside: Path, make: Callable[[Path, Path], object]
) -> None:
    make(root, outside)
    link = "d/link" if (root / "d").exists() else "link"
    for path in (link, f"{link}/secret.txt", f"{link}/sub/secret.txt"):
        result = await tools.result("read", path=path)
        assert result.is_error and "PathOutsideRoot" in result.content, (path, result.content)
        assert SECRET not in result.content
    with pytest.raises(PathOutsideRoot, match="symbolic link"):
        await tools("write", path=f"{link}/sub/secret.txt", content="overwritten")
    assert (outside / "sub" / "secret.txt").read_text() == SECRET


async def test_a_link_into_the_root_through_an_outside_path_is_refused(
    tools: Tools, root: Path, outside: Path
) -> None:
    # outside/back -> the root: a link out and back in is still out (its target is outside).
    (root / "f.txt").write_text("f")
    (outside / "back").symlink_to(root)
    (root / "out").symlink_to(outside / "back")
    with pytest.raises(PathOutsideRoot):
        await tools("read", path="out/f.txt")


async def test_a_dangling_link_out_of_the_root_creates_nothing(
    tools: Tools, root: Path, outside: Path
) -> None:
    (root / "new.txt").symlink_to(outside / "created.txt")
    (root / "newdir").symlink_to(outside / "made")
    with pytest.raises(PathOutsideRoot):
        await tools("write", path="new.txt", content="x")
    with pytest.raises(PathOutsideRoot):
        await tools("write", path="newdir/a/b.txt", content="x")
    assert names(outside) == ["secret.txt", "sub", "sub/secret.txt"]
    # A dangling link inside the root is a fine place to write: its target is made.
    (root / "later.txt").symlink_to("made/later.txt")
    await tools("write", path="later.txt", content="later")
    assert (root / "made" / "later.txt").read_text() == "later"


async def test_link_loops_are_refused(tools: Tools, root: Path) -> None:
    (root / "a").symlink_to("b")
    (root / "b").symlink_to("a")
    (root / "self").symlink_to("self")
    for path in ("a", "self/x"):
        with pytest.raises(InvalidPath, match="more than 40 symbolic links"):
            await tools("read", path=path)


async def test_missing_paths_and_files_in_the_way(tools: Tools, root: Path) -> None:
    (root / "file.txt").write_text("x")
    with pytest.raises(PathNotFound, match="does not exist"):
        await tools("read", path="nothing.txt")
    with pytest.raises(PathNotFound, match="directory 'no' does not exist"):
        await tools("read", path="no/such.txt")
    with pytest.raises(PathNotFound, match="is not a directory"):
        await tools("read", path="file.txt/inner")


def _swap_to_link(name: Path, target: Path) -> None:
    """Replace ``name`` by a link to ``target`` atomically (a rename over it)."""
    spare = name.with_name(name.name + ".swap")
    spare.symlink_to(target)
    os.replace(spare, name)


async def test_a_file_swapped_for_a_link_after_its_check_is_not_followed(
    tools: Tools,
    root: Path,
    outside: Path,
    monkeypatch: pytest.MonkeyPatch,
    in_process: None,
) -> None:
    (root / "target.txt").write_text("inside")
    real = paths_module._lstat_at
    swapped: list[str] = []

    def racing(name: str, dir_fd: int) -> os.stat_result:
        status = real(name, dir_fd)
        if name == "target.txt" and not swapped:  # checked: a regular file; now swap it
            _swap_to_link(root / "target.txt", outside / "secret.txt")
            swapped.append(name)
        return status

    monkeypatch.setattr(paths_module, "_lstat_at", racing)
    result = await tools.result("read", path="target.txt")
    assert swapped and result.is_error and "PathOutsideRoot" in result.content
    assert SECRET not in result.content


async def test_a_directory_swapped_for_a_link_after_its_check_is_not_followed(
    tools: Tools,
    root: Path,
    outside: Path,
    monkeypatch: pytest.MonkeyPatch,
    in_process: None,
) -> None:
    (root / "sub").mkdir()
    (root / "sub" / "secret.txt").write_text("inside")
    real = paths_module._lstat_at
    swapped: list[str] = []

    def racing(name: str, dir_fd: int) -> os.stat_result:
        status = real(name, dir_fd)
        if name == "sub" and not swapped:  # checked: a directory; now it is a link out
            os.rename(root / "sub", root / "sub.old")
            (root / "sub").symlink_to(outside / "sub")
            swapped.append(name)
        return status

    monkeypatch.setattr(paths_module, "_lstat_at", racing)
    for name, args in (("read", {}), ("write", {"content": "overwritten"})):
        swapped.clear()
        if (root / "sub").is_symlink():
            (root / "sub").unlink()
            os.rename(root / "sub.old", root / "sub")
        result = await tools.result(name, path="sub/secret.txt", **args)
        assert swapped and result.is_error and "PathOutsideRoot" in result.content, result
        assert SECRET not in result.content
    assert (outside / "sub" / "secret.txt").read_text() == SECRET


async def test_a_link_swapped_in_just_before_the_rename_is_replaced_not_written_through(
    tools: Tools,
    root: Path,
    outside: Path,
    monkeypatch: pytest.MonkeyPatch,
    in_process: None,
) -> None:
    (root / "target.txt").write_text("old")
    real = paths_module._lstat_at  # the very function _files imported
    swapped: list[str] = []

    def racing(name: str, dir_fd: int) -> os.stat_result:
        status = real(name, dir_fd)
        if name == "target.txt" and not swapped:  # the write's own check passed
            _swap_to_link(root / "target.txt", outside / "secret.txt")
            swapped.append(name)
        return status

    monkeypatch.setattr(files_module, "_lstat_at", racing)
    await tools("write", path="target.txt", content="new")
    assert swapped
    assert (outside / "secret.txt").read_text() == SECRET  # untouched
    assert not (root / "target.txt").is_symlink() and (root / "target.txt").read_text() == "new"


async def test_a_link_flipping_all_the_while_never_leaks(
    root: Path, outside: Path, tmp_path: Path
) -> None:
    """A thread flips ``flip`` between an inside file and a link out, as fast as it can,
    while the tools read, grep and write through it: never a byte of the secret comes back,
    and the outside file is never written."""
    tools = Tools(workspace(root))
    (root / "flip").write_text("inside")
    stop = threading.Event()

    def flipper() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            spare = root / f".spare{n % 2}"
            if n % 2:
                spare.write_text("inside")
            else:
                spare.unlink(missing_ok=True)
                spare.symlink_to(outside / "secret.txt")
            os.replace(spare, root / "flip")

    thread = threading.Thread(target=flipper, daemon=True)
    thread.start()
    outcomes: set[str] = set()
    try:
        for i in range(150):
            for name, args in (
                ("read", {"path": "flip"}),
                ("grep", {"pattern": "secret|inside", "path": "."}),
                ("write", {"path": "flip", "content": f"written {i}"}),
            ):
                result = await tools.result(name, **args)
                assert SECRET not in result.content and "secret outside" not in result.content
                outcomes.add(result.content.split(":")[1] if result.is_error else "ok")
    finally:
        stop.set()
        thread.join(10)
    assert (outside / "secret.txt").read_text() == SECRET
    assert "ok" in outcomes
    assert outcomes <= {"ok", " PathOutsideRoot", " PathNotFound", " WorkspaceError"}, outcomes


def test_a_directory_moved_out_while_held_fails_the_descriptor_check(
    root: Path, outside: Path
) -> None:
    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("no /proc/self/fd: the descriptor walk is the only check here")
    where = Root(root)
    (root / "held").mkdir()
    fd = os.open(root / "held", os.O_RDONLY | os.O_DIRECTORY)
    try:
        where.verify(fd, "held")  # inside: fine
        os.rename(root / "held", outside / "held")
        with pytest.raises(PathOutsideRoot, match="moved outside"):
            where.verify(fd, "held")
    finally:
        os.close(fd)


def test_the_root_must_be_a_directory(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    for bad in (tmp_path / "file", tmp_path / "missing"):
        with pytest.raises(NotADirectoryError):
            workspace(bad)
    with pytest.raises(ValueError, match="max_read_bytes must be positive"):
        workspace(tmp_path, max_read_bytes=0)


async def test_a_root_replaced_by_a_link_is_refused(tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "ws2"
    root.mkdir()
    tools = Tools(workspace(root))
    root.rmdir()
    root.symlink_to(outside)
    with pytest.raises(WorkspaceError, match="workspace root"):
        await tools("read", path="secret.txt")
