"""RFC 8785 (JSON Canonicalization Scheme) encoding and the record hash rule.

Canonical JSON is what every hash in Tether is computed over: sorted keys (by UTF-16
code units), no insignificant whitespace, UTF-8, minimal string escapes and ECMAScript
number formatting. It is deliberately independent of the wire encoder (orjson), whose
float formatting differs from ECMAScript's.

It gives the bytes the ``rfc8785`` package gives (a property test holds them to it) with a
fraction of the instructions, and rounds an integer past 2**53 to a double where the
package refuses it (docs/architecture.md §10, ``benchmarks/handwritten.py``).
"""

from __future__ import annotations

import hashlib
import json.encoder
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any, Final

import orjson

from tether.errors import CanonicalizationError

__all__ = (
    "canonical_json",
    "encode_string",
    "format_number",
    "record_hash",
    "sha256_hex",
)

_MAX_SAFE_INTEGER: Final = 2**53
# The C string encoder escapes exactly what RFC 8785 requires: '"', '\\', the five short
# control escapes and every other control character as a lowercase \u00xx.
_encode_string = json.encoder.encode_basestring


def canonical_json(value: Any) -> bytes:
    """Encode a JSON value as RFC 8785 canonical bytes.

    >>> canonical_json({"b": [1.0, "é"], "a": None})
    b'{"a":null,"b":[1,"\\xc3\\xa9"]}'
    """
    if _orjson_is_exact(value):
        try:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError:
            pass  # e.g. a lone surrogate: the exact encoder below reports it
    parts: list[str] = []
    _encode(value, parts)
    try:
        return "".join(parts).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CanonicalizationError(f"string is not valid Unicode: {exc.reason}") from None


def encode_string(value: str) -> bytes:
    """One string as canonical JSON (orjson escapes exactly as RFC 8785 does)."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        raise CanonicalizationError(f"string {value!r} is not valid Unicode") from None


def sha256_hex(data: bytes) -> str:
    """Lowercase hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def record_hash(canonical_record: bytes, prev_hash: str, seq: int) -> str:
    """The chain hash of a record (docs/architecture.md §3).

    Equal to ``sha256_hex(canonical_json({"record": r, "prev_hash": prev_hash, "seq": str(seq)}))``
    where ``canonical_record == canonical_json(r)``; assembling the outer object from the
    already-canonical record avoids encoding the record twice on the append path.
    """
    if not prev_hash or (prev_hash.isalnum() and prev_hash.isascii()):
        # A hex digest (or the empty first one) needs no escaping: one buffer, one update.
        return hashlib.sha256(
            b'{"prev_hash":"%s","record":%s,"seq":"%d"}'
            % (prev_hash.encode(), canonical_record, seq)
        ).hexdigest()
    digest = hashlib.sha256(('{"prev_hash":' + _encode_string(prev_hash) + ',"record":').encode())
    digest.update(canonical_record)
    digest.update(b',"seq":"%d"}' % seq)
    return digest.hexdigest()


def format_number(value: int | float) -> str:
    """Format a number the way ECMAScript's ``Number.prototype.toString`` does (RFC 8785 §3.2.2.3).

    Integers beyond 2**53 are first rounded to the nearest double, as a JSON parser would.
    """
    if isinstance(value, int):
        if -_MAX_SAFE_INTEGER <= value <= _MAX_SAFE_INTEGER:
            return str(value)
        try:
            value = float(value)
        except OverflowError:
            raise CanonicalizationError("integer is too large for a JSON number") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise CanonicalizationError(f"{value!r} is not a JSON number")
    if value == 0:
        return "0"  # covers -0.0 too
    sign = "-" if value < 0 else ""
    # repr() yields the shortest digits that round-trip, as ECMAScript requires.
    _, digit_tuple, exponent = Decimal(repr(abs(value))).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    assert isinstance(exponent, int)
    exponent += len(digit_tuple) - len(digits)
    k = len(digits)
    n = exponent + k  # value == 0.digits * 10**n
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * -n + digits
    else:
        e = n - 1
        mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
        text = mantissa + "e" + ("+" if e >= 0 else "-") + str(abs(e))
    return sign + text


def _orjson_is_exact(value: Any) -> bool:
    """Whether orjson's sorted output is already RFC 8785 for this value.

    orjson escapes strings exactly as RFC 8785 does and sorts ASCII keys the same way;
    it differs only for floats (formatting), integers beyond 2**53 (RFC 8785 rounds
    them to doubles) and non-ASCII keys (RFC 8785 sorts by UTF-16 code units). Checking
    the types is several times cheaper than encoding in Python.
    """
    pending = [value]
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind is str or kind is bool or item is None:
            continue
        if kind is dict:
            for key in item:
                if type(key) is not str or not key.isascii():
                    return False
            pending.extend(item.values())
        elif kind is list or kind is tuple:
            pending.extend(item)
        elif kind is int:
            if not -_MAX_SAFE_INTEGER <= item <= _MAX_SAFE_INTEGER:
                return False
        else:
            return False
    return True


def _utf16_key(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def _encode(value: Any, out: list[str]) -> None:
    # Ordered by frequency in records: strings and objects dominate.
    if isinstance(value, str):
        out.append(_encode_string(value))
    elif isinstance(value, Mapping):
        keys = list(value)
        for key in keys:
            if not isinstance(key, str):
                raise CanonicalizationError(f"object key {key!r} is not a string")
        if all(key.isascii() for key in keys):
            keys.sort()
        else:
            keys.sort(key=_utf16_key)
        out.append("{")
        first = True
        for key in keys:
            if not first:
                out.append(",")
            first = False
            out.append(_encode_string(key))
            out.append(":")
            _encode(value[key], out)
        out.append("}")
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int | float):
        out.append(format_number(value))
    elif isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        out.append("[")
        first = True
        for item in value:
            if not first:
                out.append(",")
            first = False
            _encode(item, out)
        out.append("]")
    else:
        raise CanonicalizationError(f"{type(value).__name__} is not a JSON type")
