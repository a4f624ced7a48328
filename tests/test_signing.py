"""The webhook signing rule (``tether._signing``): Tether's outbound ``Tether-Signature``
verifies with ``verify_signature`` inside its tolerance window only, for the exact bytes,
under any of the secrets given; malformed headers are refused, never raised on."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from tether import verify_signature
from tether._signing import hmac_hex, matches, signature_header

BODY = b'{"id":"wh_1","type":"settled"}'
T = 1_765_000_000


def test_a_signature_verifies_within_its_window_only() -> None:
    header = signature_header(BODY, "s3cret", timestamp=T)
    expected = hmac.new(b"s3cret", f"{T}.".encode() + BODY, hashlib.sha256).hexdigest()
    assert header == f"t={T},v1={expected}"
    assert verify_signature(BODY, header, "s3cret", now=T)
    assert verify_signature(BODY, header, b"s3cret", now=T + 300)
    assert verify_signature(BODY, header, "s3cret", now=T - 300)
    assert not verify_signature(BODY, header, "s3cret", now=T + 301)
    assert verify_signature(BODY, header, "s3cret", now=T + 3000, tolerance=3600)
    assert not verify_signature(BODY + b" ", header, "s3cret", now=T)
    assert not verify_signature(BODY, header, "other", now=T)
    assert verify_signature(BODY, header, ["old", "s3cret"], now=T)  # a rotation


@pytest.mark.parametrize(
    "header",
    [
        "",
        "v1=abc",
        f"t={T}",
        f"t=,v1={'0' * 64}",
        f"t=-{T},v1={'0' * 64}",
        f"t={T},t={T},v1={'0' * 64}",
        f"t=1e9,v1={'0' * 64}",
        f"t={'9' * 40},v1={'0' * 64}",
        f"t={T},v0={hmac_hex(b's', str(T).encode() + b'.' + BODY)}",
        "garbage,,,=,",
    ],
)
def test_a_malformed_header_is_refused(header: str) -> None:
    assert not verify_signature(BODY, header, "s", now=T)


def test_any_v1_of_the_header_may_match_and_an_empty_secret_is_refused() -> None:
    good = signature_header(BODY, "s", timestamp=T).split(",")[1]
    assert verify_signature(BODY, f"t={T},v1={'0' * 64},{good}", "s", now=T)
    assert matches(hmac_hex(b"k", b"m").upper(), b"m", [b"x", b"k"])
    with pytest.raises(ValueError, match="non-empty secret"):
        verify_signature(BODY, "t=1,v1=00", "", now=1)
    with pytest.raises(ValueError, match="non-empty secret"):
        signature_header(BODY, " ", timestamp=T)
