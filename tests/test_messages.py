"""The neutral message model and the canonical model-input hash."""

import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tether.messages as messages_module
from tether._canonical import canonical_json, sha256_hex
from tether.messages import (
    DataPart,
    Message,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**60), 2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
TEXT = st.text(max_size=6)
PARTS = st.one_of(
    st.builds(lambda text: TextPart(text=text), TEXT),
    st.builds(lambda text, sig: ThinkingPart(text=text, signature=sig), TEXT, st.none() | TEXT),
    st.builds(
        lambda cid, name, args: ToolCallPart(call_id=cid, name=name, args=args),
        st.text(min_size=1, max_size=4),
        st.text(min_size=1, max_size=4),
        st.dictionaries(st.text(max_size=4), JSON, max_size=3),
    ),
    st.builds(
        lambda cid, text, data: ToolResultPart(call_id=cid, content=text, data=data),
        TEXT,
        TEXT,
        JSON,
    ),
    st.builds(lambda data: DataPart(data=data), JSON),
)
MESSAGES = st.builds(
    Message,
    role=st.sampled_from(["system", "user", "assistant", "tool"]),
    parts=st.lists(PARTS, max_size=3).map(tuple),
)
REQUESTS = st.builds(
    ModelRequest,
    model=st.text(max_size=8),
    messages=st.lists(MESSAGES, max_size=4).map(tuple),
    tools=st.lists(st.builds(ToolSpec, name=st.text(min_size=1, max_size=5)), max_size=2).map(
        tuple
    ),
    tool_choice=st.none() | st.sampled_from(["auto", "none"]),
    settings=st.dictionaries(st.text(max_size=4), JSON, max_size=2),
)


@given(REQUESTS)
def test_the_input_hash_is_the_hash_of_the_canonical_request(request: ModelRequest) -> None:
    assert request.input_hash() == sha256_hex(canonical_json(request.to_json_object()))


@given(REQUESTS)
def test_the_input_hash_survives_a_json_round_trip(request: ModelRequest) -> None:
    again = ModelRequest.model_validate_json(request.model_dump_json())
    assert again.input_hash() == request.input_hash()


def test_json_equal_settings_hash_the_same() -> None:
    a = ModelRequest(model="m", messages=(), settings={"t": 2, "b": {"x": 1, "a": 2}})
    b = ModelRequest(model="m", messages=(), settings={"b": {"a": 2, "x": 1}, "t": 2.0})
    assert a.input_hash() == b.input_hash()
    assert a.input_hash() != ModelRequest(model="m", messages=(), settings={"t": 3}).input_hash()


def test_reasoning_and_opaque_fields_round_trip_byte_for_byte() -> None:
    message = Message(
        role="assistant",
        parts=(
            ThinkingPart(
                text="hmm",
                signature="c2lnbmF0dXJl\\u0000==",
                opaque="gAAAAB\u2028x",
                provider="p",
                id="rs_1",
            ),
            ToolCallPart(call_id="c", name="t", args={"n": 1.5}, signature="ts"),
        ),
    )
    response = ModelResponse(message=message)
    again = ModelResponse.model_validate_json(response.model_dump_json())
    assert again == response
    assert canonical_json(again.to_json_object()) == canonical_json(response.to_json_object())


@given(
    st.lists(MESSAGES, min_size=1, max_size=6),
    st.lists(st.tuples(st.integers(0, 6), st.booleans(), st.booleans()), min_size=1, max_size=6),
)
def test_the_input_hash_resumes_only_from_the_very_same_messages(
    pool: list[Message], requests: list[tuple[int, bool, bool]]
) -> None:
    """Histories that grow, shrink, or are rebuilt from equal copies (their first message
    alone, or the rest): each hash equals a from-scratch hash of its canonical request."""
    for length, rebuilt_head, rebuilt in requests:
        head = Message.model_validate(pool[0].to_json_object()) if rebuilt_head else pool[0]
        tail = pool[1:length]
        if rebuilt:
            tail = [Message.model_validate(m.to_json_object()) for m in tail]
        request = ModelRequest(model="m", messages=(head, *tail))
        assert request.input_hash() == sha256_hex(canonical_json(request.to_json_object()))


def test_a_history_behind_a_system_prompt_built_afresh_resumes_its_hash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A harness builds its system message anew for each request (the built-in agent does):
    the history after it, the same objects each time, is not encoded again."""
    history = [Message.user(f"m{n}") for n in range(50)]
    ModelRequest(model="m", messages=(Message.system("terse"), *history)).input_hash()
    encoded: list[Message] = []
    canonical = messages_module._canonical

    def counting(model: Message) -> bytes:
        encoded.append(model)
        return canonical(model)

    monkeypatch.setattr(messages_module, "_canonical", counting)
    longer = (Message.system("terse"), *history, Message.user("next"))
    request = ModelRequest(model="m", messages=longer)
    assert request.input_hash() == sha256_hex(canonical_json(request.to_json_object()))
    assert [m for m in encoded if isinstance(m, Message)] == [longer[0], longer[-1]]


def test_the_hash_caches_can_be_shared_by_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Event loops on several threads hash at once; tiny caches evict all the time."""
    monkeypatch.setattr(messages_module, "_CACHE_SIZE", 4)
    monkeypatch.setattr(messages_module._hashed, "entries", 2)
    history = [Message.user(f"m{n}") for n in range(40)]

    def hash_growing(offset: int) -> list[bool]:
        checks = []
        for n in range(1, len(history)):
            request = ModelRequest(model="m", messages=tuple(history[offset % 3 : n]))
            expected = sha256_hex(canonical_json(request.to_json_object()))
            checks.append(request.input_hash() == expected)
        return checks

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(hash_growing, range(8)))
    finally:
        sys.setswitchinterval(interval)
    assert all(all(checks) for checks in results)


@given(MESSAGES)
def test_a_messages_canonical_form_written_directly_equals_the_general_encoder(
    message: Message,
) -> None:
    assert messages_module._message_canonical(message) == canonical_json(message.to_json_object())
