"""``read``, ``write`` and ``edit``: size caps, binary detection, the edit rules, and the
edit's idempotence by content."""

import os
import stat
from pathlib import Path

import pytest

from tether.tools import (
    BinaryFile,
    EditMismatch,
    FileChanged,
    FileTooLarge,
    NotAFile,
    workspace,
)

from .support import Recorder, Tools, names


async def test_read_shows_a_file_whole_or_by_lines(tools: Tools, root: Path) -> None:
    text = "".join(f"line {n}\n" for n in range(1, 11))
    (root / "ten.txt").write_text(text)
    assert await tools("read", path="ten.txt") == text
    assert await tools("read", path="ten.txt", offset=3, limit=2) == "line 3\nline 4\n"
    assert await tools("read", path="ten.txt", offset=10) == "line 10\n"
    assert "offset 12 is past its end" in await tools("read", path="ten.txt", offset=12)
    (root / "empty.txt").write_text("")
    assert await tools("read", path="empty.txt") == ""
    (root / "crlf.txt").write_bytes(b"a\r\nb\r\n")
    assert await tools("read", path="crlf.txt") == "a\r\nb\r\n"  # byte for byte


async def test_read_is_capped_and_says_where_to_go_on(root: Path) -> None:
    tools = Tools(workspace(root, max_read_bytes=100))
    (root / "long.txt").write_text("".join(f"{n:09d}\n" for n in range(1, 101)))  # 10 B a line
    shown = await tools("read", path="long.txt")
    assert shown.startswith("000000001\n") and "000000010\n" in shown
    assert "000000011" not in shown
    assert shown.endswith("[cut at 100 bytes: lines 1-10 of 100 shown; read on with offset=11]")
    again = await tools("read", path="long.txt", offset=11)
    assert again.startswith("000000011\n") and "offset=21" in again
    (root / "wide.txt").write_text("é" * 500 + "\n")  # one line over the cap, 2 bytes a char
    cut = await tools("read", path="wide.txt")
    assert cut.startswith("é" * 50 + "\n") and "is cut at 100 bytes" in cut


async def test_large_and_binary_files_are_not_read(root: Path) -> None:
    tools = Tools(workspace(root, max_file_bytes=1000))
    (root / "big.txt").write_text("x" * 1001)
    with pytest.raises(FileTooLarge, match=r"big.txt' is 1001 bytes; files over 1000 bytes"):
        await tools("read", path="big.txt")
    (root / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    with pytest.raises(BinaryFile, match="NUL byte"):
        await tools("read", path="image.png")
    (root / "latin1.txt").write_bytes("café".encode("latin-1"))
    with pytest.raises(BinaryFile, match="not UTF-8"):
        await tools("read", path="latin1.txt")
    result = await tools.result("read", path="image.png")
    assert result.is_error and result.content.startswith("read failed: BinaryFile:")


async def test_only_regular_files_are_read(tools: Tools, root: Path) -> None:
    (root / "dir").mkdir()
    with pytest.raises(NotAFile, match="is a directory"):
        await tools("read", path="dir")
    with pytest.raises(NotAFile, match="is a directory"):
        await tools("read", path=".")
    os.mkfifo(root / "fifo")  # opening it must not wait for a writer
    with pytest.raises(NotAFile, match="not a regular file"):
        await tools("read", path="fifo")
    with pytest.raises(NotAFile):
        await tools("write", path="dir", content="x")
    with pytest.raises(NotAFile):
        await tools("write", path="fifo", content="x")


async def test_write_makes_directories_replaces_and_keeps_the_mode(
    tools: Tools, root: Path
) -> None:
    assert await tools("write", path="a/b/c.txt", content="one\n") == "wrote 4 bytes to a/b/c.txt"
    assert (root / "a" / "b" / "c.txt").read_text() == "one\n"
    script = root / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o750)
    await tools("write", path="run.sh", content="#!/bin/sh\necho hi\n")
    assert stat.S_IMODE(script.stat().st_mode) == 0o750 and "echo hi" in script.read_text()
    assert await tools("write", path="ütf.txt", content="é") == "wrote 2 bytes to ütf.txt"
    assert names(root, ".tether-write-*") == []  # no temporary file left behind


async def test_a_write_replaces_a_hard_link_rather_than_writing_through_it(
    tools: Tools, root: Path, outside: Path
) -> None:
    other = outside / "shared.txt"
    other.write_text("shared")
    os.link(other, root / "linked.txt")
    await tools("write", path="linked.txt", content="mine")
    assert other.read_text() == "shared" and (root / "linked.txt").read_text() == "mine"


async def test_write_is_capped(root: Path) -> None:
    tools = Tools(workspace(root, max_write_bytes=10))
    (root / "keep.txt").write_text("kept")
    with pytest.raises(FileTooLarge, match="the limit of a write is 10 bytes"):
        await tools("write", path="keep.txt", content="x" * 11)
    assert (root / "keep.txt").read_text() == "kept"
    await tools("write", path="keep.txt", content="x" * 10)


async def test_edit_replaces_exactly_one_match(tools: Tools, root: Path) -> None:
    (root / "m.py").write_text("def f():\n    return 1\n")
    message = await tools("edit", path="m.py", old_string="return 1", new_string="return 2")
    assert message == "replaced 1 occurrence(s) of old_string in m.py"
    assert (root / "m.py").read_text() == "def f():\n    return 2\n"


async def test_edit_fails_on_zero_or_several_matches_saying_how_many(
    tools: Tools, root: Path
) -> None:
    (root / "m.txt").write_text("a = 1\nb = 1\nc = 1\n")
    with pytest.raises(EditMismatch, match=r"not found in m.txt \(0 matches\)") as none:
        await tools("edit", path="m.txt", old_string="d = 1", new_string="d = 2")
    assert none.value.matches == 0
    with pytest.raises(EditMismatch, match=r"matches 3 times in m\.txt") as many:
        await tools("edit", path="m.txt", old_string="= 1", new_string="= 2")
    assert many.value.matches == 3
    assert (root / "m.txt").read_text() == "a = 1\nb = 1\nc = 1\n"  # untouched
    result = await tools.result("edit", path="m.txt", old_string="= 1", new_string="= 2")
    assert result.is_error and "EditMismatch" in result.content and "3 times" in result.content
    # Overlapping matches count: "aa" is in "aaa" twice, so which one is meant is unclear.
    (root / "a.txt").write_text("aaa")
    with pytest.raises(EditMismatch, match="matches 2 times"):
        await tools("edit", path="a.txt", old_string="aa", new_string="b")
    # replace_all takes every (non-overlapping) occurrence.
    message = await tools(
        "edit", path="m.txt", old_string="= 1", new_string="= 2", replace_all=True
    )
    assert message == "replaced 3 occurrence(s) of old_string in m.txt"
    assert (root / "m.txt").read_text() == "a = 2\nb = 2\nc = 2\n"


async def test_edit_refuses_what_it_cannot_do_well(tools: Tools, root: Path) -> None:
    (root / "t.txt").write_bytes(b"one\r\ntwo\r\n")
    with pytest.raises(EditMismatch, match="CRLF line endings"):
        await tools("edit", path="t.txt", old_string="one\ntwo", new_string="1\n2")
    (root / "i.py").write_text("if x:\n        y()\n")
    with pytest.raises(EditMismatch, match="check indentation"):
        await tools("edit", path="i.py", old_string="    y()\n    ", new_string="z()")
    with pytest.raises(EditMismatch, match="empty"):
        await tools("edit", path="t.txt", old_string="", new_string="x")
    with pytest.raises(EditMismatch, match="the same"):
        await tools("edit", path="t.txt", old_string="one", new_string="one")
    (root / "bin").write_bytes(b"\x00\x01one")
    with pytest.raises(BinaryFile):
        await tools("edit", path="bin", old_string="one", new_string="two")


async def test_edit_results_are_capped(root: Path) -> None:
    tools = Tools(workspace(root, max_file_bytes=20, max_write_bytes=16))
    (root / "f.txt").write_text("0123456789")
    with pytest.raises(FileTooLarge, match="would be over 20 bytes"):
        await tools("edit", path="f.txt", old_string="5", new_string="x" * 12 + "5")  # 22 bytes
    with pytest.raises(FileTooLarge, match="new_string is over the write limit"):
        await tools("edit", path="f.txt", old_string="5", new_string="x" * 17)
    assert (root / "f.txt").read_text() == "0123456789"


async def test_an_edit_re_run_by_a_recovery_applies_once(root: Path) -> None:
    """The plan (digests before and after) is a durable step: a recovery that re-drives the
    edit gets the recorded plan, so it finds the file already edited and leaves it, or
    finds it unedited and edits it, or refuses if something else changed it."""
    recorder = Recorder()
    tools = Tools(workspace(root), recorder)
    path = root / "f.txt"
    path.write_text("alpha beta\n")
    first = await tools("edit", path="f.txt", old_string="beta", new_string="beta beta")
    assert recorder.runs == ["edit"] and path.read_text() == "alpha beta beta\n"
    plan = recorder.steps["edit"]
    assert isinstance(plan, dict) and plan["path"] == "f.txt" and plan["replacements"] == 1
    inode = path.stat().st_ino

    # A crash after the edit, before its outcome: re-driven, the step is served, the file is
    # left as it is (not re-written), and the answer is the same. A plain re-run would have
    # matched "beta" twice now and failed, or edited twice.
    again = await tools("edit", path="f.txt", old_string="beta", new_string="beta beta")
    assert again == first and recorder.runs == ["edit"]
    assert path.read_text() == "alpha beta beta\n" and path.stat().st_ino == inode

    # A crash after the plan, before the file was written: the re-run edits it.
    path.write_text("alpha beta\n")
    assert await tools("edit", path="f.txt", old_string="beta", new_string="beta beta") == first
    assert path.read_text() == "alpha beta beta\n"

    # Something else changed the file meanwhile: refused, not guessed at.
    path.write_text("something else\n")
    with pytest.raises(FileChanged, match="changed while the edit was being made"):
        await tools("edit", path="f.txt", old_string="beta", new_string="beta beta")
    assert path.read_text() == "something else\n"


def test_recovery_classes_are_declared(root: Path) -> None:
    specs = {tool.name: tool.spec for tool in workspace(root)}
    assert list(specs) == ["read", "write", "edit", "glob", "grep", "bash"]
    assert {name for name, spec in specs.items() if spec.idempotent} == {
        "read",
        "write",
        "edit",
        "glob",
        "grep",
    }
    assert all(spec.mediation == "host" for spec in specs.values())
    properties = specs["edit"].parameters["properties"]
    assert isinstance(properties, dict) and set(properties) == {
        "path",
        "old_string",
        "new_string",
        "replace_all",
    }
    assert specs["edit"].parameters["required"] == ["path", "old_string", "new_string"]
    assert "ctx" not in properties
