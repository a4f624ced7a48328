"""The neutral chat model every harness and provider adapter speaks.

A :class:`Message` has a role and typed parts; a :class:`ModelRequest` is what a harness
asks a model, a :class:`ModelResponse` what comes back. The whole response is journaled,
so every part, including thinking signatures and provider-opaque payloads, must survive
a JSON round trip byte for byte (invariant I2).

Example::

    from tether.messages import Message, ModelRequest

    request = ModelRequest(model="local:echo", messages=(Message.user("hi"),))
    again = ModelRequest.model_validate_json(request.model_dump_json())
    assert again.input_hash() == request.input_hash()
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field, JsonValue

from tether._canonical import canonical_json, encode_string, sha256_hex
from tether._histories import HistoryMemo
from tether._wire import JsonObject, WireModel

__all__ = (
    "DataPart",
    "FilePart",
    "Mediation",
    "Message",
    "ModelRequest",
    "ModelResponse",
    "Part",
    "Role",
    "TextPart",
    "ThinkingPart",
    "ToolCall",
    "ToolCallPart",
    "ToolOutcomeStatus",
    "ToolResult",
    "ToolResultPart",
    "ToolSpec",
    "Usage",
    "args_digest",
)

Role = Literal["system", "user", "assistant", "tool"]


class TextPart(WireModel):
    type: Literal["text"] = "text"
    text: str


class ThinkingPart(WireModel):
    """Model reasoning. ``signature`` and ``opaque`` are provider data replayed verbatim."""

    type: Literal["thinking"] = "thinking"
    text: str = ""
    signature: str | None = None
    opaque: str | None = None
    provider: str | None = None
    id: str | None = None


class ToolCallPart(WireModel):
    """A tool call the model asked for (``signature``: e.g. a Gemini thought signature)."""

    type: Literal["tool_call"] = "tool_call"
    call_id: str
    name: str
    args: JsonObject = Field(default_factory=dict)
    signature: str | None = None


class ToolResultPart(WireModel):
    type: Literal["tool_result"] = "tool_result"
    call_id: str
    name: str | None = None
    content: str
    data: JsonValue = None
    is_error: bool = False


class DataPart(WireModel):
    type: Literal["data"] = "data"
    data: JsonValue = None  # null is dropped on the wire, so it must read back as the default
    media_type: str | None = None


class FilePart(WireModel):
    """Bytes in the attachment store, by digest."""

    type: Literal["file"] = "file"
    digest: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    media_type: str
    name: str | None = None
    size: int | None = Field(default=None, ge=0)


Part = Annotated[
    TextPart | ThinkingPart | ToolCallPart | ToolResultPart | DataPart | FilePart,
    Field(discriminator="type"),
]


class Message(WireModel):
    role: Role
    parts: tuple[Part, ...] = ()

    @classmethod
    def user(cls, text: str) -> Message:
        return cls(role="user", parts=(TextPart(text=text),))

    @classmethod
    def system(cls, text: str) -> Message:
        return cls(role="system", parts=(TextPart(text=text),))

    @classmethod
    def assistant(cls, text: str) -> Message:
        return cls(role="assistant", parts=(TextPart(text=text),))

    @property
    def text(self) -> str:
        """The concatenated text parts (thinking excluded)."""
        return "".join(part.text for part in self.parts if isinstance(part, TextPart))

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        return [part for part in self.parts if isinstance(part, ToolCallPart)]


class Usage(WireModel):
    """Token usage of one model call. ``None`` means "not reported"; a real 0 stays 0."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None


class Mediation(StrEnum):
    """Who runs a tool: the host (journaled), the harness (reported), the host after a human,
    a child submission (a ``task`` call: see ``Turn.delegate``), or a human who answers it
    (an ``input`` call: see ``Turn.ask``)."""

    HOST = "host"
    REPORTED = "reported"
    APPROVAL = "approval"
    TASK = "task"
    INPUT = "input"
    """A human gives the call's result: the execution parks until it is answered."""


def _empty_object_schema() -> JsonObject:
    return {"type": "object", "properties": {}}


class ToolSpec(WireModel):
    """A tool offered to the model."""

    name: str = Field(min_length=1)
    description: str = ""
    parameters: JsonObject = Field(default_factory=_empty_object_schema)
    mediation: Mediation = Mediation.HOST
    idempotent: bool = False


class ModelRequest(WireModel):
    model: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: str | None = None
    settings: JsonObject = Field(default_factory=dict)

    def input_hash(self) -> str:
        """The canonical model-input hash (I0): SHA-256 of the request's canonical JSON.

        Fed from each message's and tool's cached canonical bytes, in sorted key order
        (``messages`` < ``model`` < ``settings`` < ``toolChoice`` < ``tools``). An agent loop
        re-sending a growing history resumes the hash where its previous request's messages
        ended, so a call costs what it adds, not the whole history again.
        """
        digest = _messages_digest(self.messages)
        tail = [
            b'],"model":' + encode_string(self.model),
            b'"settings":' + (canonical_json(self.settings) if self.settings else b"{}"),
        ]
        if self.tool_choice is not None:
            tail.append(b'"toolChoice":' + encode_string(self.tool_choice))
        tail.append(b'"tools":[' + b",".join(_canonical(tool) for tool in self.tools) + b"]}")
        digest.update(b",".join(tail))
        return digest.hexdigest()


class ModelResponse(WireModel):
    message: Message
    usage: Usage | None = None
    finish_reason: str | None = None
    cost: float | None = None
    """What the call cost in dollars, when whoever answered it says (an agent CLI reports its
    run's cost): journaled as the completion's cost instead of the price table's."""
    response_id: str | None = None
    """The provider's id of this response (``chatcmpl-…``, ``resp_…``), when it reports one."""
    response_model: str | None = None
    """The model that answered, as the provider reports it (``gpt-4.1-mini-2025-04-14``).

    Both are for tracing (``gen_ai.response.id`` and ``gen_ai.response.model``) and only
    live: the journal does not keep them, so a response served from the log has neither."""


class ToolOutcomeStatus(StrEnum):
    OK = "ok"
    ERROR = "error"
    DENIED = "denied"
    UNKNOWN = "unknown"


class ToolCall(WireModel):
    """A call of a host-mediated tool. ``idempotency_key`` scopes its at-most-once execution."""

    call_id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    args: JsonObject = Field(default_factory=dict)
    idempotency_key: str = ""
    mediation: Mediation = Mediation.HOST
    idempotent: bool = False
    metadata: JsonObject | None = None
    """What the framework attached to a call it deferred to a person (pydantic-ai's
    ``ApprovalRequired``/``CallDeferred`` metadata): its approval or input request carries it."""


class ToolResult(WireModel):
    call_id: str
    content: str
    data: JsonValue = None
    is_error: bool = False
    status: ToolOutcomeStatus = ToolOutcomeStatus.OK

    def to_part(self, name: str | None = None) -> ToolResultPart:
        return ToolResultPart(
            call_id=self.call_id,
            name=name,
            content=self.content,
            data=self.data,
            is_error=self.is_error,
        )


_CACHE_SIZE = 4096
_canonical_cache: OrderedDict[int, tuple[WireModel, bytes]] = OrderedDict()
"""Keyed by identity and holding the model itself, so an id is never reused while its entry
lives."""


def _canonical(model: WireModel) -> bytes:
    """A frozen model's canonical JSON, remembered for the models hashed most recently (an
    agent loop re-sending its history then encodes each message once)."""
    cached = _canonical_cache.get(id(model))
    if cached is not None and cached[0] is model:
        return cached[1]
    if type(model) is Message:
        encoded = _message_canonical(model)
    else:
        encoded = canonical_json(model.to_json_object())
    _remember(_canonical_cache, id(model), (model, encoded), _CACHE_SIZE)
    return encoded


def _message_canonical(message: Message) -> bytes:
    """A message's canonical JSON, its text parts written directly: a text part holds only
    strings, so its canonical form is fixed (keys ``text`` < ``type``, then ``parts`` <
    ``role``). Other parts go through the general encoder."""
    parts = [
        b'{"text":' + encode_string(part.text) + b',"type":"text"}'
        if type(part) is TextPart
        else canonical_json(part.to_json_object())
        for part in message.parts
    ]
    return b'{"parts":[' + b",".join(parts) + b'],"role":' + encode_string(message.role) + b"}"


def _remember(cache: OrderedDict[int, Any], key: int, value: Any, size: int) -> None:
    """Put ``value`` last in a bounded cache; safe when threads share it (each step is one
    atomic dict operation, and an entry another thread evicted first is simply gone)."""
    cache.pop(key, None)
    cache[key] = value
    if len(cache) > size:
        try:
            cache.popitem(last=False)
        except KeyError:  # another thread emptied it meanwhile
            pass


_hashed: HistoryMemo[hashlib._Hash] = HistoryMemo(entries=256, messages=16_384)
"""By a history's start (:func:`_prefix_key`): the SHA-256 state once its messages were fed."""


def _prefix_key(messages: tuple[Message, ...]) -> tuple[bytes, int]:
    """The first message by its canonical bytes, the second by identity.

    A harness commonly builds its system prompt's message afresh for each request, while the
    rest of its history are the same objects each time (the journal projects each record
    once): keyed by the first message's content, such a history still resumes its hash.
    """
    return _canonical(messages[0]), id(messages[1]) if len(messages) > 1 else 0


def _messages_digest(messages: tuple[Message, ...]) -> hashlib._Hash:
    """A SHA-256 state fed ``{"messages":[`` and the messages' canonical bytes (no ``]``).

    Resumes from the remembered history of the same start (:func:`_prefix_key`) when its
    messages after the first are the very same objects as this one's; identity, not
    equality, so a rebuilt history is simply hashed in full.
    """
    if not messages:
        return hashlib.sha256(b'{"messages":[')
    key = _prefix_key(messages)
    start, digest = 0, None
    known = _hashed.resumable(key, messages)
    if known is not None:
        start, digest = known[0], known[1].copy()
    if digest is None:
        digest = hashlib.sha256(b'{"messages":[')
    rest = messages[start:]
    if rest:
        body = b",".join(_canonical(message) for message in rest)
        digest.update(b"," + body if start else body)
        _hashed.remember(key, messages, digest.copy())
    return digest


def args_digest(args: JsonObject) -> str:
    """``sha256:<hex>`` of the canonical JSON of a tool's arguments."""
    return "sha256:" + sha256_hex(canonical_json(args))
