"""``workspace(root)``: the six tools, their argument schemas and recovery classes."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from tether.agent import Tool, ToolContext
from tether.tools._bash import run_bash, scrubbed_env
from tether.tools._errors import CommandTimedOut
from tether.tools._files import Limits
from tether.tools._paths import Root
from tether.tools._pool import WorkerCalls
from tether.tools._sandbox import SANDBOX_PATH, SandboxLimits, sandbox_for
from tether.tools._search import DEFAULT_IGNORE

__all__ = ("workspace",)

_PATH = "A path relative to the workspace root (no '..', not absolute)."


class _Arguments(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Read(_Arguments):
    path: str = Field(description=_PATH)
    offset: int = Field(1, ge=1, description="The first line to show, 1-based.")
    limit: int | None = Field(None, ge=1, description="How many lines to show (default: all).")


class _Write(_Arguments):
    path: str = Field(description=_PATH)
    content: str = Field(description="The whole new content of the file.")


class _Edit(_Arguments):
    path: str = Field(description=_PATH)
    old_string: str = Field(description="The exact text to replace (whitespace included).")
    new_string: str = Field(description="The text to put in its place.")
    replace_all: bool = Field(
        False, description="Replace every occurrence; by default old_string must match once."
    )


class _Glob(_Arguments):
    pattern: str = Field(description="A glob such as 'src/**/*.py' ('**' spans directories).")
    path: str = Field(".", description="The directory to search in. " + _PATH)


class _Grep(_Arguments):
    pattern: str = Field(description="A regular expression (Python syntax), matched per line.")
    path: str = Field(".", description="The directory or file to search. " + _PATH)
    glob: str | None = Field(
        None, description="Only files matching this glob ('*.py': by name, at any depth)."
    )
    ignore_case: bool = Field(False, description="Match without regard to case.")


class _Bash(_Arguments):
    command: str = Field(description="A bash command line, run with bash -c.")
    timeout: float | None = Field(
        None, gt=0, description="Seconds before the command is killed (default: the maximum)."
    )


def workspace(
    root: str | os.PathLike[str],
    *,
    bash: bool = True,
    bash_approval: bool = False,
    bash_timeout: float = 120.0,
    bash_env: Mapping[str, str] | None = None,
    sandbox: Literal["bwrap", "none"] = "bwrap",
    sandbox_limits: SandboxLimits | None = None,
    sandbox_paths: Iterable[str] = (),
    kill_grace: float = 2.0,
    max_read_bytes: int = 256 * 1024,
    max_write_bytes: int = 1024 * 1024,
    max_file_bytes: int = 10 * 1024 * 1024,
    max_output_bytes: int = 64 * 1024,
    ignore: Iterable[str] = DEFAULT_IGNORE,
    tool_timeout: float = 30.0,
) -> tuple[Tool, ...]:
    """The tools ``read``, ``write``, ``edit``, ``glob``, ``grep`` and ``bash``, rooted at
    the directory ``root``, for the built-in :class:`~tether.agent.Agent` (or anything that
    takes :class:`~tether.agent.Tool`).

    File paths are confined to ``root``. ``bash`` runs in a ``bwrap`` sandbox (its own PID
    and network namespaces; ``root`` read-write, the system's programs read-only, nothing
    else of the host; ``sandbox_limits`` bound each command), and where none can be made
    this call raises :class:`SandboxUnavailable`, at start-up; ``sandbox="none"`` opts out:
    commands run unconfined, as the worker's user (see :mod:`tether.tools`).
    ``sandbox_paths`` are host paths the sandbox shows too, read-only (a toolchain under
    ``/opt``). ``bash=False`` leaves it out; ``bash_approval=True`` gates each command on a
    human's approval (``Mediation.APPROVAL``). ``bash_timeout`` is the most a command may
    run (the model may ask for less), ``kill_grace`` how long its process group has between
    SIGTERM and SIGKILL; ``bash_env`` adds variables to its scrubbed environment. The caps: a read
    shows at most ``max_read_bytes``; a write takes at most ``max_write_bytes``; files over
    ``max_file_bytes`` are not read, edited or grepped; ``grep``, ``glob`` and ``bash`` answer
    with at most ``max_output_bytes``. Directories named in ``ignore`` are not descended into
    by ``glob`` and ``grep`` (unless their ``path`` points inside one). ``tool_timeout`` is
    the most a ``read``, ``write``, ``edit``, ``glob`` or ``grep`` may take: their work runs
    in a worker process, killed at that deadline (:class:`ToolTimedOut`).

    Example::

        from tether.agent import agent_spec
        from tether.engine import AgentDefinition
        from tether.tools import workspace

        tools = workspace("/srv/checkouts/acme", bash_timeout=60)
        coder = AgentDefinition(lambda instance, env: agent_spec(model, tools=tools))
    """
    where = Root(root)
    for name, value in (
        ("bash_timeout", bash_timeout),
        ("max_read_bytes", max_read_bytes),
        ("max_write_bytes", max_write_bytes),
        ("max_file_bytes", max_file_bytes),
        ("max_output_bytes", max_output_bytes),
        ("tool_timeout", tool_timeout),
    ):
        if value <= 0:
            raise ValueError(f"{name} must be positive, not {value!r}")
    if kill_grace < 0:
        raise ValueError(f"kill_grace must not be negative, not {kill_grace!r}")
    limits = Limits(max_read_bytes, max_write_bytes, max_file_bytes, max_output_bytes)
    box = sandbox_for(where.path, sandbox, sandbox_limits, sandbox_paths) if bash else None
    env = scrubbed_env(where.path, bash_env, path=SANDBOX_PATH if box else None)
    # The file tools' work runs in a worker process, under the deadline (tools/_pool.py).
    calls = WorkerCalls(where, limits, frozenset(ignore), timeout=tool_timeout)

    async def read(path: str, offset: int, limit: int | None) -> str:
        return await calls.text("read", "read", path=path, offset=offset, limit=limit)

    async def write(path: str, content: str) -> str:
        return await calls.text("write", "write", path=path, content=content)

    async def edit(
        path: str, old_string: str, new_string: str, replace_all: bool, ctx: ToolContext
    ) -> str:
        strings: dict[str, JsonValue] = {"old_string": old_string, "new_string": new_string}

        async def plan() -> JsonValue:
            return await calls.run(
                "edit", "plan_edit", path=path, replace_all=replace_all, **strings
            )

        # The plan (the file's digests before and after) is journaled before the file is
        # touched: a re-driven edit finds the file in one of the two states, or refuses.
        planned = await ctx.step("edit", plan)
        assert isinstance(planned, dict)
        return await calls.text(
            "edit", "apply_edit", plan=planned, replace_all=replace_all, **strings
        )

    async def glob(pattern: str, path: str) -> str:
        return await calls.text("glob", "glob", pattern=pattern, path=path)

    async def grep(pattern: str, path: str, glob: str | None, ignore_case: bool) -> str:
        return await calls.text(
            "grep", "grep", pattern=pattern, path=path, glob=glob, ignore_case=ignore_case
        )

    # ``timeout`` is the argument's name in the schema the model sees.
    async def run(command: str, timeout: float | None, ctx: ToolContext) -> str:  # noqa: ASYNC109
        seconds = min(timeout or bash_timeout, bash_timeout)
        result = await run_bash(
            command,
            cwd=where.path,
            env=env,
            time_limit=seconds,
            output_limit=max_output_bytes,
            kill_grace=kill_grace,
            progress=ctx.progress,
            sandbox=box,
        )
        if result.timed_out:
            raise CommandTimedOut(
                f"the command ran past its timeout of {seconds:g} s and its process group was "
                f"killed; its output until then:\n{result.render()}",
                output=result.output,
                timeout=seconds,
            )
        return result.render()

    tools = [
        Tool(
            name="read",
            description=(
                "Read a UTF-8 text file of the workspace. Long files are cut; read on with "
                "offset and limit (lines)."
            ),
            fn=read,
            arguments=_Read,
            idempotent=True,
        ),
        Tool(
            name="write",
            description=(
                "Write a file of the workspace whole (made, with its directories, if need "
                "be; replaced if it exists)."
            ),
            fn=write,
            arguments=_Write,
            idempotent=True,  # the same arguments leave the same file, however often run
        ),
        Tool(
            name="edit",
            description=(
                "Replace old_string by new_string in a text file of the workspace. old_string "
                "must match exactly (whitespace included) and only once, unless replace_all; "
                "otherwise nothing changes and the error says how many times it matched."
            ),
            fn=edit,
            arguments=_Edit,
            context_parameter="ctx",
            idempotent=True,  # by content: see the plan step
        ),
        Tool(
            name="glob",
            description=(
                "List the workspace paths matching a glob, in name order (directories end "
                "with '/'). Symbolic links are listed, not followed."
            ),
            fn=glob,
            arguments=_Glob,
            idempotent=True,
        ),
        Tool(
            name="grep",
            description=(
                "Search the text files of the workspace for a regular expression; answers "
                "path:line:text. Binary and very large files are skipped."
            ),
            fn=grep,
            arguments=_Grep,
            idempotent=True,
        ),
    ]
    if bash:
        tools.append(
            Tool(
                name="bash",
                description=(
                    "Run a bash command in the workspace root (stdout and stderr merged, "
                    f"stdin empty), killed after its timeout (at most {bash_timeout:g} s). "
                    "Output is cut past its limit. Nothing runs on after it ends."
                ),
                fn=run,
                arguments=_Bash,
                context_parameter="ctx",
                requires_approval=bash_approval,
                idempotent=False,  # a command's effects are unknown: never re-run on recovery
            )
        )
    return tuple(tools)
