"""A fake OpenAI API on 127.0.0.1, for the real ``openai`` SDK (through pydantic-ai) to talk to
over HTTP: ``POST /v1/chat/completions`` and ``POST /v1/responses``, streamed (SSE) or not.

It answers from a script, in order (:class:`Answer`: text, tool calls, usage), and records
every request it was sent, so a test can count the model calls that left the process::

    with FakeOpenAI([Answer(calls=(Call("clock"),)), Answer(text="It is noon.")]) as fake:
        env = {"OPENAI_BASE_URL": fake.url, "OPENAI_API_KEY": "fake"}
        ...
        assert fake.count == 2

Streamed Chat Completions chunks split the text into pieces and each tool call's arguments
over several ``delta.tool_calls`` chunks (with ``index``; the ``id`` and function name in
the first); with ``stream_options.include_usage`` a last chunk carries the usage and no
choices. The Responses API streams its events (``response.output_text.delta``,
``response.function_call_arguments.delta``, ``response.completed`` with the usage...), and
an answer's ``reasoning`` as a reasoning item before the text, its summary streamed as
``response.reasoning_summary_text.delta`` events. ``usage=False`` reports no token counts.

An answer with ``hang_after=N`` streams its first N text pieces, sets :attr:`FakeOpenAI.hung`
and sends nothing more until :meth:`FakeOpenAI.release` (a model stalled mid-answer: the
moment to ``kill -9`` its caller). Past 1 KiB of streamed text the journal writes a delta
record without waiting for a timer, so a long enough head makes the partial answer durable
deterministically. A request past the end of the script gets a 500, or the fake's
``otherwise`` answer when it has one (``FakeOpenAI(otherwise=Answer(status=429))``: a provider
that rate-limits every request).

A provider failing: an answer with a ``status`` other than 200 is an error response with
OpenAI's JSON error body (``Answer(status=429, retry_after="1")`` adds a ``Retry-After``
header); an answer with ``hang=True`` sends nothing at all (not even a status line) until
:meth:`FakeOpenAI.release`, or until its client closes the connection.

Like the real API, the fake answers 400 (``invalid_request_error``, OpenAI's own message) to a
history a provider refuses: a tool call not answered by its result before anything else, or
a result that answers no call (``provider_rules``); :attr:`FakeOpenAI.refused` says why. It
keeps no response: a Responses request naming a ``previous_response_id`` gets the 400 the API
answers for a response it no longer holds.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from .provider_rules import chat_refusal, responses_refusal

__all__ = ("Answer", "Call", "FakeOpenAI", "Request")

#: How long a hanging answer waits for :meth:`FakeOpenAI.release` before it gives up.
HANG_SECONDS = 90.0


@dataclass(frozen=True)
class Call:
    """A tool call the model makes."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Answer:
    """One scripted model response: text, then tool calls; the usage it reports."""

    text: str = ""
    calls: tuple[Call, ...] = ()
    input_tokens: int = 120
    output_tokens: int = 30
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    hang_after: int | None = None
    """Stream this many text pieces, then stall until released (the rest is never sent)."""
    chunk: int | None = None
    """Characters per streamed piece (the fake's own ``chunk`` if unset)."""
    reasoning: str = ""
    """A reasoning summary the Responses API sends before the text (Chat Completions: none)."""
    usage: bool = True
    """Whether the usage is reported at all (``False``: no token counts)."""
    status: int = 200
    """Anything but 200 answers an error, with OpenAI's error body (``error.message``,
    ``type`` and ``code``), whole, streamed request or not."""
    retry_after: str | None = None
    """The ``Retry-After`` header of an error answer (seconds, or an HTTP date)."""
    hang: bool = False
    """Send nothing, not even a status line, until released or the client hangs up."""


@dataclass(frozen=True)
class Request:
    """A request the fake was sent."""

    path: str
    body: dict[str, Any]

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def conversation(self) -> str:
        """The request's messages (or input items), as canonical JSON: equal for a re-sent call."""
        messages = self.body.get("messages", self.body.get("input"))
        return json.dumps(messages, sort_keys=True)


class FakeOpenAI:
    """The server, in a thread of the test's process; a context manager."""

    def __init__(
        self, script: Iterable[Answer] = (), *, chunk: int = 6, otherwise: Answer | None = None
    ) -> None:
        self._script = list(script)
        self._chunk = chunk
        self._otherwise = otherwise
        """What every request past the end of the script gets (``None``: a 500)."""
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._requests: list[Request] = []
        self._refused: list[str] = []
        self._served = 0
        self.hung = threading.Event()
        self._released = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        # A short poll: shutdown() waits for the loop to notice, once per test.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        """The base URL, as ``OPENAI_BASE_URL`` takes it (``http://127.0.0.1:port/v1``)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def requests(self) -> list[Request]:
        with self._lock:
            return list(self._requests)

    @property
    def count(self) -> int:
        """How many model requests were sent to the fake."""
        with self._lock:
            return len(self._requests)

    def wait_for_requests(self, count: int, timeout: float) -> bool:
        """Block until ``count`` requests have come (in all), or ``timeout`` seconds have
        passed: whether they have (a test's thread waits, as ``asyncio.to_thread``)."""
        with self._arrived:
            return self._arrived.wait_for(lambda: len(self._requests) >= count, timeout)

    def add(self, *answers: Answer) -> None:
        """More answers, after the scripted ones."""
        with self._lock:
            self._script.extend(answers)

    def release(self) -> None:
        """Let a hanging answer end (without sending the rest: its caller is gone)."""
        self._released.set()

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(30)

    # --- answering ----------------------------------------------------------------------

    @property
    def refused(self) -> list[str]:
        """Why each request the fake refused (400) was refused, as the API said it."""
        with self._lock:
            return list(self._refused)

    def _refuse(self, request: Request, why: str) -> None:
        with self._lock:
            self._requests.append(request)
            self._refused.append(why)
            self._arrived.notify_all()

    def _take(self, request: Request) -> tuple[int, Answer | None]:
        with self._lock:
            self._requests.append(request)
            self._arrived.notify_all()
            if self._served >= len(self._script):
                return len(self._requests), self._otherwise
            self._served += 1
            return self._served, self._script[self._served - 1]

    def _pieces(self, text: str, chunk: int | None = None) -> list[str]:
        size = chunk or self._chunk
        return [text[i : i + size] for i in range(0, len(text), size)]

    def _hang(self) -> None:
        self.hung.set()
        self._released.wait(HANG_SECONDS)

    def _hang_until_gone(self, connection: socket.socket) -> None:
        """Hang until released, or until the client closes its end (a timeout gave up)."""
        self.hung.set()
        deadline = time.monotonic() + HANG_SECONDS
        while not self._released.wait(0.02) and time.monotonic() < deadline:
            readable, _, _ = select.select([connection], [], [], 0)
            if readable and not connection.recv(1, socket.MSG_PEEK):
                return  # the client closed the connection


class _Hung(Exception):
    """A hanging answer was released: the response ends here, unfinished."""


def _handler(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            path = self.path.split("?", 1)[0]
            if path not in ("/v1/chat/completions", "/v1/responses"):
                self._json(404, {"error": {"message": f"no route {path}", "type": "not_found"}})
                return
            chat = path == "/v1/chat/completions"
            refusal = (chat_refusal if chat else responses_refusal)(
                body.get("messages" if chat else "input") or []
            )
            if not chat and body.get("previous_response_id"):
                # The fake keeps no response: as the API answers once it holds one no more.
                refusal = f"Previous response with id '{body['previous_response_id']}' not found."
            if refusal is not None:  # as the real API answers a history it cannot take
                fake._refuse(Request(path, body), refusal)
                error = {
                    "message": refusal,
                    "type": "invalid_request_error",
                    "param": "messages" if chat else "input",
                    "code": None,
                }
                self._json(400, {"error": error})
                return
            number, answer = fake._take(Request(path, body))
            if answer is None:
                error = {"message": "the fake's script has no more answers", "type": "server"}
                self._json(500, {"error": error})
                return
            if answer.hang:
                fake._hang_until_gone(self.connection)
                self.close_connection = True
                return
            if answer.status != 200:
                self._error(answer)
                return
            model = str(body.get("model", "gpt-4.1-mini"))
            try:
                if not body.get("stream"):
                    reply = (
                        _chat(answer, number, model) if chat else _response(answer, number, model)
                    )
                    self._json(200, reply)
                    return
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.end_headers()  # HTTP/1.0: the stream ends when the connection closes
                usage = bool((body.get("stream_options") or {}).get("include_usage"))
                events = (
                    _chat_chunks(fake, answer, number, model, usage)
                    if chat
                    else _response_events(fake, answer, number, model)
                )
                for event in events:
                    self.wfile.write(event)
                    self.wfile.flush()
            except (_Hung, BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        def _json(self, status: int, value: object, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(value).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for name, header in (headers or {}).items():
                self.send_header(name, header)
            self.end_headers()
            self.wfile.write(data)

        def _error(self, answer: Answer) -> None:
            kind, code = _ERRORS.get(answer.status, ("invalid_request_error", None))
            if answer.status >= 500 and answer.status not in _ERRORS:
                kind = "server_error"
            message = f"the fake answers {answer.status} ({kind})"
            error = {"message": message, "type": kind, "param": None, "code": code}
            headers = {"retry-after": answer.retry_after} if answer.retry_after else {}
            self._json(answer.status, {"error": error}, headers)

    return Handler


# OpenAI's error ``type`` and ``code`` for the statuses a test asks for.
_ERRORS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    408: ("timeout", None),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    503: ("server_error", "service_unavailable"),
}


def _sse(value: object, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(value)}\n\n".encode()


def _call_id(number: int, index: int) -> str:
    return f"call_{number}_{index}"


def _arguments(call: Call) -> str:
    return json.dumps(call.arguments)


def _stall(fake: FakeOpenAI, answer: Answer, sent: int) -> None:
    if answer.hang_after is not None and sent == answer.hang_after:
        fake._hang()
        raise _Hung


# --- Chat Completions -------------------------------------------------------------------


def _chat_usage(answer: Answer) -> dict[str, Any]:
    return {
        "prompt_tokens": answer.input_tokens,
        "completion_tokens": answer.output_tokens,
        "total_tokens": answer.input_tokens + answer.output_tokens,
        "prompt_tokens_details": {"cached_tokens": answer.cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": answer.reasoning_tokens},
    }


def _finish(answer: Answer) -> str:
    return "tool_calls" if answer.calls else "stop"


def _chat(answer: Answer, number: int, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.text or None}
    if answer.calls:
        message["tool_calls"] = [
            {
                "id": _call_id(number, index),
                "type": "function",
                "function": {"name": call.name, "arguments": _arguments(call)},
            }
            for index, call in enumerate(answer.calls)
        ]
    return {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": _finish(answer)}],
        "usage": _chat_usage(answer) if answer.usage else None,
    }


def _chat_chunks(
    fake: FakeOpenAI, answer: Answer, number: int, model: str, usage: bool
) -> Iterator[bytes]:
    base = {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return _sse({**base, "choices": [choice]})

    yield chunk({"role": "assistant", "content": ""})
    for sent, piece in enumerate(fake._pieces(answer.text, answer.chunk)):
        _stall(fake, answer, sent)
        yield chunk({"content": piece})
    for index, call in enumerate(answer.calls):
        opening = {"name": call.name, "arguments": ""}
        first = {"index": index, "id": _call_id(number, index), "type": "function"}
        yield chunk({"tool_calls": [{**first, "function": opening}]})
        for piece in fake._pieces(_arguments(call)):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, _finish(answer))
    if usage and answer.usage:
        yield _sse({**base, "choices": [], "usage": _chat_usage(answer)})
    yield b"data: [DONE]\n\n"


# --- Responses --------------------------------------------------------------------------


def _response_usage(answer: Answer) -> dict[str, Any]:
    return {
        "input_tokens": answer.input_tokens,
        "input_tokens_details": {"cached_tokens": answer.cached_tokens, "cache_write_tokens": 0},
        "output_tokens": answer.output_tokens,
        "output_tokens_details": {"reasoning_tokens": answer.reasoning_tokens},
        "total_tokens": answer.input_tokens + answer.output_tokens,
    }


def _message_item(number: int, text: str, status: str) -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": []}] if text else []
    return {
        "type": "message",
        "id": f"msg_{number}",
        "role": "assistant",
        "status": status,
        "content": content,
    }


def _call_item(number: int, index: int, call: Call, arguments: str, status: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{number}_{index}",
        "call_id": _call_id(number, index),
        "name": call.name,
        "arguments": arguments,
        "status": status,
    }


def _reasoning_item(number: int, text: str) -> dict[str, Any]:
    summary = [{"type": "summary_text", "text": text}] if text else []
    return {"type": "reasoning", "id": f"rs_{number}", "summary": summary}


def _output(answer: Answer, number: int) -> list[dict[str, Any]]:
    items = [_reasoning_item(number, answer.reasoning)] if answer.reasoning else []
    items += [_message_item(number, answer.text, "completed")] if answer.text else []
    items += [
        _call_item(number, index, call, _arguments(call), "completed")
        for index, call in enumerate(answer.calls)
    ]
    return items


def _response_object(
    answer: Answer, number: int, model: str, status: str, output: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "id": f"resp_{number}",
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "error": None,
        "incomplete_details": None,
        "usage": _response_usage(answer) if status == "completed" and answer.usage else None,
    }


def _response(answer: Answer, number: int, model: str) -> dict[str, Any]:
    return _response_object(answer, number, model, "completed", _output(answer, number))


def _response_events(fake: FakeOpenAI, answer: Answer, number: int, model: str) -> Iterator[bytes]:
    sequence = iter(range(1_000_000))

    def event(kind: str, **fields: Any) -> bytes:
        return _sse({"type": kind, "sequence_number": next(sequence), **fields}, kind)

    yield event(
        "response.created", response=_response_object(answer, number, model, "in_progress", [])
    )
    index = 0
    if answer.reasoning:
        item_id = f"rs_{number}"
        at: dict[str, Any] = {"item_id": item_id, "output_index": index, "summary_index": 0}
        yield event(
            "response.output_item.added", output_index=index, item=_reasoning_item(number, "")
        )
        blank = {"type": "summary_text", "text": ""}
        yield event("response.reasoning_summary_part.added", **at, part=blank)
        for piece in fake._pieces(answer.reasoning, answer.chunk):
            yield event("response.reasoning_summary_text.delta", **at, delta=piece)
        yield event("response.reasoning_summary_text.done", **at, text=answer.reasoning)
        whole = {"type": "summary_text", "text": answer.reasoning}
        yield event("response.reasoning_summary_part.done", **at, part=whole)
        yield event(
            "response.output_item.done",
            output_index=index,
            item=_reasoning_item(number, answer.reasoning),
        )
        index += 1
    if answer.text:
        item_id = f"msg_{number}"
        where = {"item_id": item_id, "output_index": index, "content_index": 0}
        yield event(
            "response.output_item.added",
            output_index=index,
            item=_message_item(number, "", "in_progress"),
        )
        empty = {"type": "output_text", "text": "", "annotations": []}
        yield event("response.content_part.added", **where, part=empty)
        for sent, piece in enumerate(fake._pieces(answer.text, answer.chunk)):
            _stall(fake, answer, sent)
            yield event("response.output_text.delta", **where, delta=piece, logprobs=[])
        yield event("response.output_text.done", **where, text=answer.text, logprobs=[])
        full = {"type": "output_text", "text": answer.text, "annotations": []}
        yield event("response.content_part.done", **where, part=full)
        yield event(
            "response.output_item.done",
            output_index=index,
            item=_message_item(number, answer.text, "completed"),
        )
        index += 1
    for position, call in enumerate(answer.calls):
        item_id = f"fc_{number}_{position}"
        yield event(
            "response.output_item.added",
            output_index=index,
            item=_call_item(number, position, call, "", "in_progress"),
        )
        for piece in fake._pieces(_arguments(call)):
            yield event(
                "response.function_call_arguments.delta",
                item_id=item_id,
                output_index=index,
                delta=piece,
            )
        yield event(
            "response.function_call_arguments.done",
            item_id=item_id,
            output_index=index,
            name=call.name,
            arguments=_arguments(call),
        )
        yield event(
            "response.output_item.done",
            output_index=index,
            item=_call_item(number, position, call, _arguments(call), "completed"),
        )
        index += 1
    yield event(
        "response.completed",
        response=_response_object(answer, number, model, "completed", _output(answer, number)),
    )
