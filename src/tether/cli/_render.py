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
    (a reconnect resumes after the last seq shown, and a record seen twice is skipped)."""

    console: Console
    last_seq: int = 0
    _open_line: bool = field(default=False, repr=False)

    def feed(self, frame: Frame) -> None:
        if frame.event == "progress":
            self._progress(orjson.loads(frame.data))
            return
        record = orjson.loads(frame.data)
        seq = record.get("seq")
        if isinstance(seq, int):
            if seq <= self.last_seq:
                return
            self.last_seq = seq
        self._record(record)

    def end_line(self) -> None:
        """End the line text deltas left open (they are printed without their newline)."""
        if self._open_line:
            self.console.print()
            self._open_line = False

    def _line(self, text: str) -> None:
        self.end_line()
        self.console.print(text, highlight=False)

    def _progress(self, event: dict[str, Any]) -> None:
        self._line(f"[dim]… {escape(str(event.get('text', '')))}[/dim]")

    def _record(self, record: dict[str, Any]) -> None:
        kind, payload = record["kind"], record.get("payload", {})
        if kind == "user_message":
            self._line(f"\n[bold]user[/bold]: {escape(str(payload.get('body', '')))}")
        elif kind == "assistant_text_delta":
            self.console.print(escape(payload.get("text", "")), end="", highlight=False)
            self._open_line = True
        elif kind == "assistant_message_completed":
            self.end_line()
        elif kind == "tool_called":
            args = json.dumps(payload.get("args", {}))
            self._line(f"[cyan]→ {escape(payload['tool'])}({escape(args)})[/cyan]")
        elif kind == "tool_outcome":
            status = payload.get("status", "ok")
            color = "cyan" if status == "ok" else "red"
            content = escape(str(payload.get("content", "")))
            self._line(f"[{color}]← {status}: {content}[/{color}]")
        elif kind == "approval_requested":
            approval, tool = payload["approvalId"], payload["tool"]
            self._line(f"[yellow]⏸ approval {approval} needed for {escape(tool)}[/yellow]")
        elif kind == "approval_decided":
            self._decision(payload)
        elif kind == "steer_received":
            self._line(f"[magenta]steer[/magenta]: {escape(str(payload.get('body', '')))}")
        elif kind == "submission_settled":
            self._settlement(payload)

    def _decision(self, payload: dict[str, Any]) -> None:
        decision = payload["decision"]
        decided = f"{PAST.get(decision, decision)} by {escape(str(payload.get('approver')))}"
        reason = payload.get("reason")
        if reason:
            decided += f": {escape(str(reason))}"
        if decision == "reject":
            self._line(f"[red]✗ {decided}[/red]")
        else:
            self._line(f"[green]✓ {decided}[/green]")

    def _settlement(self, payload: dict[str, Any]) -> None:
        status = payload.get("status")
        if status == "succeeded":
            self._line(f"[green]✓ settled {status}[/green]")
            return
        error = payload.get("error") or payload.get("errorCode") or ""
        detail = f": {escape(str(error))}" if error else ""
        self._line(f"[red]✗ settled {status}{detail}[/red]")
