"""RFC 8785 canonical JSON and the record hash rule."""

import json
import math

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from tether._canonical import _encode, canonical_json, format_number, record_hash, sha256_hex
from tether.errors import CanonicalizationError

# The three published agentsessions vectors (reference §1.3): same canonical bytes, same SHA-256.
GOLDEN_EVENT = {
    "execution_id": "exec-1",
    "schema_version": 1,
    "ts": "2023-11-14T22:13:20Z",
    "kind": "EVENT_OUTPUT",
    "message": {"role": "assistant", "parts": [{"text": {"text": "hello"}}]},
    "actor": {"principal": "agent://a", "issuer": "entra", "subject": "sub-1"},
}


def test_golden_vector_1_output_event() -> None:
    canonical = canonical_json({"event": GOLDEN_EVENT, "prev_hash": "", "seq": "1"})
    assert (
        sha256_hex(canonical) == "551bd146050c8d630b0c3b999a4445f3792a470db9bca443d8d4a67706283fcc"
    )


@pytest.mark.parametrize(
    ("exact_bytes", "digest"),
    [
        (
            b'{"event":{"kind":"EVENT_TOOL_RESULT","result":{"id":"c1"}},"prev_hash":"","seq":"1"}',
            "2eddf9826b382796691c15da8ee7dd6af7b41dbab55c949f131ed2933e0b0d8e",
        ),
        (
            b'{"event":{"approval_result":{"reason":"no","tool_call_id":"c1"},'
            b'"kind":"EVENT_APPROVAL_RESULT"},"prev_hash":"","seq":"1"}',
            "c36a909b1ea5f243536ff6b4f1770e99e47b35cb1dfb94c2e943b85a42206bea",
        ),
    ],
)
def test_golden_vectors_2_and_3(exact_bytes: bytes, digest: str) -> None:
    # Re-canonicalizing the parsed (and key-shuffled) value must give the exact bytes back.
    value = json.loads(exact_bytes)
    shuffled = dict(reversed(list(value.items())))
    assert canonical_json(shuffled) == exact_bytes
    assert sha256_hex(canonical_json(shuffled)) == digest


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (0, "0"),
        (-0.0, "0"),
        (1.0, "1"),
        (100.0, "100"),
        (-5, "-5"),
        (0.1, "0.1"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e-7, "1e-7"),
        (1.5e-7, "1.5e-7"),
        (0.000001, "0.000001"),
        (123.456, "123.456"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (333333333.33333329, "333333333.3333333"),
        (2**53, "9007199254740992"),
        (2**53 + 1, "9007199254740992"),
        (-(2**60), "-1152921504606847000"),
        (4.5, "4.5"),
        (1e-6, "0.000001"),
        (1.2345e-5, "0.000012345"),
    ],
)
def test_numbers_follow_ecmascript(number: float, text: str) -> None:
    assert format_number(number) == text


@pytest.mark.parametrize(
    "bad", [math.nan, math.inf, -math.inf, 10**400, {1: "x"}, b"bytes", object()]
)
def test_non_json_values_are_rejected(bad: object) -> None:
    with pytest.raises(CanonicalizationError):
        canonical_json(bad if isinstance(bad, dict) else [bad])


def test_strings_use_minimal_escapes_and_raw_utf8() -> None:
    value = '"\\\b\f\n\r\t\x00\x1f\x7f é € 𝄞 \u2028'
    expected = '"\\"\\\\\\b\\f\\n\\r\\t\\u0000\\u001f\x7f é € 𝄞 \u2028"'
    assert canonical_json(value) == expected.encode()


def test_lone_surrogates_are_rejected() -> None:
    with pytest.raises(CanonicalizationError):
        canonical_json("\ud800")


def test_keys_sort_by_utf16_code_units() -> None:
    # U+1D11E (a surrogate pair D834 DD1E) sorts before U+FB33 in UTF-16, after it by code point.
    assert (
        canonical_json({"\ufb33": 1, "\U0001d11e": 2, "a": 3})
        == '{"a":3,"\U0001d11e":2,"\ufb33":1}'.encode()
    )


def test_determinism() -> None:
    value = {"b": [1, 2.5, {"z": None, "a": True}], "a": "x"}
    assert len({canonical_json(value) for _ in range(200)}) == 1


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(JSON)
def test_canonical_json_parses_back_to_the_same_value(value: object) -> None:
    # ECMAScript prints large doubles as integers, so compare numbers as doubles.
    assert json.loads(canonical_json(value), parse_int=float) == value


@given(
    record=st.dictionaries(st.text(max_size=5), JSON, max_size=5),
    prev=st.text("0123456789abcdef", max_size=64),
    seq=st.integers(1, 10**12),
)
def test_record_hash_equals_the_spec_formula(
    record: dict[str, object], prev: str, seq: int
) -> None:
    spec = sha256_hex(canonical_json({"record": record, "prev_hash": prev, "seq": str(seq)}))
    assert record_hash(canonical_json(record), prev, seq) == spec


def test_chain_binding() -> None:
    body = canonical_json({"kind": "x"})
    first = record_hash(body, "", 1)
    assert record_hash(body, first, 2) != first
    assert record_hash(body, first, 2) == record_hash(body, first, 2)


FAST_PATH_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text(alphabet=st.characters(max_codepoint=127), max_size=6), inner, max_size=4
        )
    ),
    max_leaves=12,
)


@given(FAST_PATH_JSON)
def test_the_orjson_fast_path_equals_the_exact_encoder(value: object) -> None:
    parts: list[str] = []
    _encode(value, parts)
    assert canonical_json(value) == "".join(parts).encode()


# The rfc8785 package (the maintained implementation) refuses integers outside ±(2**53 - 1);
# every other JSON value must encode to the same bytes there, or the hash chain would depend
# on which encoder wrote it (benchmarks/handwritten.py times the two).
SAFE_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(SAFE_JSON)
def test_canonical_json_equals_the_rfc8785_package(value: object) -> None:
    assert canonical_json(value) == rfc8785.dumps(value)  # type: ignore[arg-type]


@given(st.integers(2**53, 2**80) | st.integers(-(2**80), -(2**53)))
def test_integers_past_doubles_round_where_rfc8785_refuses(number: int) -> None:
    """The one input class the two differ on: a JSON parser reads such an integer as the
    nearest double, and so does Tether (logs written with one keep their hashes); the
    package raises instead."""
    assert canonical_json([number]) == b"[%s]" % format_number(float(number)).encode()
    with pytest.raises(rfc8785.IntegerDomainError):
        rfc8785.dumps([number])
