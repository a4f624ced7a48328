"""``tether tail``: a session's SSE stream, rendered for a terminal."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from rich.console import Console
from rich.markup import escape

__all__ = ("Frame", "SessionRenderer", "frames")

PAST = {"approve": "approved", "reject": "rejected", "edit": "approved with edited arguments"}


@dataclass(frozen=True)
class Frame:
    """One server-sent event: ``event`` is ``message`` when the frame names none."""

    event: str
    data: str
    id: str | None


def frames(lines: Iterable[str]) -> Iterator[Frame]:
    """The events of an SSE stream, from its lines (comments and ``retry:`` skipped)."""
    event, data, event_id = "message", list[str](), None
    for line in lines:
        if not line:
            if data:
                yield Frame(event, "\n".join(data), event_id)
            event, data, event_id = "message", [], None
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
        elif name == "id":
            event_id = value


@dataclass
class SessionRenderer:
    """Renders records and progress events; each record once, however often it is sent
    (a reconnect resumes after the last event shown, and a record seen twice is skipped).

    The subagents a task call spawned (``event: child`` frames, ``?children=true``) are
    shown under the call, indented by their depth: what they do, then how they ended.
    Children running side by side take turns: a line ``↳ <agent> <submission>`` says
    whose lines follow when they are not the lines of the child shown last."""

    console: Console
    last_seq: int = 0
    last_event_id: str | None = None
    """The ``id`` of the last event shown: where a reconnect resumes (``Last-Event-ID``)."""
    _open_line: bool = field(default=False, repr=False)
    _child_seqs: dict[str, int] = field(default_factory=dict, repr=False)
    _depths: dict[str, int] = field(default_factory=dict, repr=False)  # by submission id
    _source: str | None = field(default=None, repr=False)  # the child shown last, if any
    _steers: set[str] = field(default_factory=set, repr=False)  # submissions that joined a run

    def feed(self, frame: Frame) -> None:
        if frame.event == "progress":
            self._progress(orjson.loads(frame.data))
            return
        data = orjson.loads(frame.data)
        if frame.id is not None:
            self.last_event_id = frame.id
        if frame.event == "child":
            self._child(data)
            return
        seq = data.get("seq")
        if isinstance(seq, int):
            if seq <= self.last_seq:
                return
            self.last_seq = seq
        self._source = None
        self._record(data, 0)

    def end_line(self) -> None:
        """End the line text deltas left open (they are printed without their newline)."""
        if self._open_line:
            self.console.print()
            self._open_line = False

    def _line(self, text: str, depth: int = 0) -> None:
        self.end_line()
        self.console.print(_indent(depth) + text, highlight=False)

    def _progress(self, event: dict[str, Any]) -> None:
        depth = self._depths.get(str(event.get("submissionId")), 0)
        self._line(f"[dim]… {escape(str(event.get('text', '')))}[/dim]", depth)

    def _child(self, event: dict[str, Any]) -> None:
        record, child = event.get("record", {}), str(event.get("childSubmissionId"))
        seq = record.get("seq")
        if isinstance(seq, int):
            if seq <= self._child_seqs.get(child, 0):
                return
            self._child_seqs[child] = seq
        depth = event.get("depth")
        depth = self._depths[child] = depth if isinstance(depth, int) and depth > 0 else 1
        if self._source != child:
            agent = escape(str(event.get("agent") or "task"))
            self._line(f"[dim]↳ {agent} {escape(child)}[/dim]", depth)
            self._source = child
        self._record(record, depth)

    def _record(self, record: dict[str, Any], depth: int) -> None:
        kind, payload = record.get("kind"), record.get("payload", {})
        if kind == "user_message":
            body = escape(str(payload.get("body", "")))
            if depth == 0:
                self._line(f"\n[bold]user[/bold]: {body}")
            else:  # the task's prompt
                self._line(f"[bold]task[/bold]: {body}", depth)
        elif kind == "assistant_text_delta" and depth == 0:
            self.console.print(escape(payload.get("text", "")), end="", highlight=False)
            self._open_line = True
        elif kind == "assistant_message_completed":
            self.end_line()
            text = _message_text(payload) if depth else ""
            if text:  # a subagent's answer whole: two live streams would interleave
                self._line(escape(text), depth)
        elif kind == "tool_called":
            args = json.dumps(payload.get("args", {}))
            self._line(f"[cyan]→ {escape(payload['tool'])}({escape(args)})[/cyan]", depth)
        elif kind == "tool_outcome":
            status = payload.get("status", "ok")
            color = "cyan" if status == "ok" else "red"
            content = escape(str(payload.get("content", "")))
            self._line(f"[{color}]← {status}: {content}[/{color}]", depth)
        elif kind == "task_spawned":
            agent, child = escape(str(payload.get("agent"))), payload.get("childSubmissionId")
            self._depths[str(child)] = depth + 1
            self._line(f"[magenta]⇢ {agent} started ({escape(str(child))})[/magenta]", depth + 1)
            self._source = str(child)  # its lines, if they come next, need no heading
        elif kind == "task_finished":
            self._task_finished(payload, depth + 1)
        elif kind == "approval_requested":
            approval, tool = payload["approvalId"], payload["tool"]
            self._line(f"[yellow]⏸ approval {approval} needed for {escape(tool)}[/yellow]", depth)
        elif kind == "approval_decided":
            self._decision(payload, depth)
        elif kind == "input_requested":
            asked, prompt = payload["inputId"], " ".join(str(payload.get("prompt", "")).split())
            self._line(f"[yellow]⏸ input {asked} needed: {escape(prompt)}[/yellow]", depth)
        elif kind == "input_answered":
            value = json.dumps(payload.get("value"), ensure_ascii=False)
            responder = escape(str(payload.get("responder")))
            self._line(f"[green]✓ answered by {responder}: {escape(value)}[/green]", depth)
        elif kind == "budget_requested":
            gate, limit = payload["gateId"], payload.get("limit")
            used = f"{payload.get('used'):g} of {payload.get('max'):g}"
            whose = " (session)" if payload.get("scope") == "session" else ""
            self._line(f"[yellow]⏸ budget {gate}: {limit} {used} used{whose}[/yellow]", depth)
        elif kind == "budget_decided":
            more = json.dumps(payload["extension"]) if payload.get("extension") else ""
            who = escape(str(payload.get("approver")))
            self._line(
                f"[green]✓ budget {payload.get('decision')} {escape(more)} by {who}[/green]", depth
            )
        elif kind == "steer_received":
            self._steers.add(str(payload.get("sourceSubmissionId")))
            self._line(f"[magenta]steer[/magenta]: {escape(str(payload.get('body', '')))}", depth)
        elif kind == "version_changed":
            self._version_changed(payload, depth)
        elif kind == "submission_settled":
            # A steer that joined a run settles with it: its own line said it arrived.
            if record.get("submissionId") not in self._steers:
                self._settlement(payload, depth)

    def _task_finished(self, payload: dict[str, Any], depth: int) -> None:
        agent, status = escape(str(payload.get("agent") or "task")), payload.get("status")
        calls = payload.get("modelCalls")
        used = f" ({calls} model call{'' if calls == 1 else 's'})" if calls else ""
        if status == "succeeded":
            self._line(f"[green]⇠ {agent} {status}{used}[/green]", depth)
            return
        error = payload.get("error") or payload.get("errorCode") or ""
        detail = f": {escape(str(error))}" if error else ""
        self._line(f"[red]⇠ {agent} {status}{detail}[/red]", depth)

    def _version_changed(self, payload: dict[str, Any], depth: int) -> None:
        versions = f"{payload.get('fromVersion') or '?'} → {payload.get('toVersion') or '?'}"
        differs = ", ".join(str(word) for word in payload.get("differs") or ())
        detail = f": {escape(differs)}" if differs else ""
        reason = escape(str(payload.get("reason")))
        self._line(f"[yellow]⇪ version {escape(versions)} ({reason}){detail}[/yellow]", depth)

    def _decision(self, payload: dict[str, Any], depth: int) -> None:
        decision = payload["decision"]
        decided = f"{PAST.get(decision, decision)} by {escape(str(payload.get('approver')))}"
        reason = payload.get("reason")
        if reason:
            decided += f": {escape(str(reason))}"
        if decision == "reject":
            self._line(f"[red]✗ {decided}[/red]", depth)
        else:
            self._line(f"[green]✓ {decided}[/green]", depth)

    def _settlement(self, payload: dict[str, Any], depth: int) -> None:
        status = payload.get("status")
        if status == "succeeded":
            self._line(f"[green]✓ settled {status}[/green]", depth)
            return
        error = payload.get("error") or payload.get("errorCode") or ""
        detail = f": {escape(str(error))}" if error else ""
        self._line(f"[red]✗ settled {status}{detail}{_aborted_by(payload)}[/red]", depth)


def _aborted_by(payload: dict[str, Any]) -> str:
    """`` (aborted by Ann: ann@acme, acme)``: who aborted the run, as the server verified
    them; nothing when no one authenticated did."""
    by = payload.get("abortedBy")
    if not isinstance(by, dict) or not by.get("subject"):
        return ""
    tenant = f", {by['tenant']}" if by.get("tenant") else ""
    name = by.get("display") or by["subject"]
    return escape(f" (aborted by {name}: {by['subject']}{tenant})")


def _indent(depth: int) -> str:
    """A subagent's lines hang under its parent's task call: ``  │ `` per level."""
    return "  │ " * depth


def _message_text(payload: dict[str, Any]) -> str:
    message = payload.get("message", {})
    parts = message.get("parts", []) if isinstance(message, dict) else []
    return "".join(
        str(part.get("text", ""))
        for part in parts
        if isinstance(part, dict) and part.get("type") == "text"
    )
