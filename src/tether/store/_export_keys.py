"""The keys that sign exports: Ed25519, so that whoever verifies an export needs only the
public half (``ed25519:<base64url>``, one line to paste or keep in a file), never the key
that signs.

A server's key is a PEM file (PKCS #8, what ``tether export-key --new PATH`` or ``openssl
genpkey -algorithm ed25519`` writes) that ``tether serve --export-key-file`` (or
``TETHER_EXPORT_KEY_FILE``) and ``tether export --key-file`` read; it is never kept in the
store, where anyone who can write the store could sign with it. ``cryptography`` is imported
only to sign or verify: ``import tether.store`` does not load it.

Example::

    key = ExportKey.generate()
    key.save("export-key.pem")  # mode 0600; refuses to overwrite
    print(key.public)           # ed25519:...: what `tether import --trusted-key` takes
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from pathlib import Path
from typing import Final

__all__ = ("ExportKey", "ExportPublicKey")

ALGORITHM: Final = "ed25519"
_PREFIX: Final = f"{ALGORITHM}:"
_RAW_SIZE: Final = 32
_PEM_PRIVATE: Final = b"-----BEGIN PRIVATE KEY-----"
_PEM_PUBLIC: Final = b"-----BEGIN PUBLIC KEY-----"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class ExportPublicKey:
    """The public half of an :class:`ExportKey`: what verifies its signatures.

    ``str(key)`` is its text form, ``ed25519:<base64url of the 32 raw bytes>``;
    ``key_id`` is the first 16 hex digits of their SHA-256, which a signed export's trailer
    names.

    Example::

        trusted = ExportPublicKey.load("ed25519:mZ3...")  # or a file holding it, or a PEM
        assert trusted.verify(message, signature)
    """

    __slots__ = ("key_id", "raw")

    def __init__(self, raw: bytes) -> None:
        if len(raw) != _RAW_SIZE:
            raise ValueError(f"an Ed25519 public key is {_RAW_SIZE} bytes, not {len(raw)}")
        self.raw = raw
        self.key_id = hashlib.sha256(raw).hexdigest()[:16]

    def __str__(self) -> str:
        return _PREFIX + _b64(self.raw)

    def __repr__(self) -> str:
        return f"ExportPublicKey({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ExportPublicKey) and other.raw == self.raw

    def __hash__(self) -> int:
        return hash(self.raw)

    @classmethod
    def parse(cls, text: str) -> ExportPublicKey:
        """The key ``ed25519:<base64url>`` names (``ValueError`` for anything else)."""
        text = text.strip()
        if not text.startswith(_PREFIX):
            raise ValueError(f"not an export public key: expected {_PREFIX}<base64url>")
        try:
            return cls(_unb64(text.removeprefix(_PREFIX)))
        except (binascii.Error, ValueError) as exc:
            raise ValueError(f"not an export public key: {exc}") from None

    @classmethod
    def load(cls, source: str | os.PathLike[str]) -> ExportPublicKey:
        """A key given as its text, or as a file holding its text, a PEM public key, or
        a PEM private key (its public half). ``ValueError`` if it is none of them."""
        if isinstance(source, str) and source.strip().startswith(_PREFIX):
            return cls.parse(source)
        try:
            data = Path(source).read_bytes()
        except OSError as exc:
            raise ValueError(f"cannot read {source}: {exc.strerror or exc}") from None
        if data.lstrip().startswith(_PEM_PRIVATE):
            return ExportKey.from_pem(data).public
        if data.lstrip().startswith(_PEM_PUBLIC):
            from cryptography.hazmat.primitives import serialization
            from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

            try:
                loaded = serialization.load_pem_public_key(data)
            except ValueError as exc:
                raise ValueError(f"{source}: not a PEM public key: {exc}") from None
            if not isinstance(loaded, Ed25519PublicKey):
                raise ValueError(f"{source}: not an Ed25519 key ({type(loaded).__name__})")
            return cls(loaded.public_bytes_raw())
        try:
            return cls.parse(data.decode())
        except (UnicodeDecodeError, ValueError):
            raise ValueError(
                f"{source}: holds no export public key (ed25519:..., or a PEM key)"
            ) from None

    def verify(self, message: bytes, signature: bytes) -> bool:
        """Whether ``signature`` is this key's of ``message``."""
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        try:
            Ed25519PublicKey.from_public_bytes(self.raw).verify(signature, message)
        except InvalidSignature:
            return False
        return True


class ExportKey:
    """An Ed25519 private key that signs exports (a server's, or an operator's).

    Example::

        key = ExportKey.load("/etc/tether/export-key.pem")
        signature = key.sign(message)
    """

    __slots__ = ("_seed", "public")

    def __init__(self, seed: bytes) -> None:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        private = Ed25519PrivateKey.from_private_bytes(seed)
        self._seed = seed
        self.public = ExportPublicKey(private.public_key().public_bytes_raw())
        """What verifies this key's signatures (``str()`` of it to hand out)."""

    def __repr__(self) -> str:
        return f"ExportKey(key_id={self.public.key_id!r})"  # never the key itself

    @classmethod
    def generate(cls) -> ExportKey:
        """A new random key."""
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        return cls(Ed25519PrivateKey.generate().private_bytes_raw())

    @classmethod
    def from_pem(cls, data: bytes) -> ExportKey:
        """The key a PEM file (PKCS #8, unencrypted) holds; ``ValueError`` otherwise."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        try:
            loaded = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"not an unencrypted PEM private key: {exc}") from None
        if not isinstance(loaded, Ed25519PrivateKey):
            raise ValueError(f"not an Ed25519 key ({type(loaded).__name__})")
        return cls(loaded.private_bytes_raw())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ExportKey:
        """The key in the PEM file at ``path``; ``ValueError`` naming the file otherwise."""
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
        try:
            return cls.from_pem(data)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None

    def to_pem(self) -> bytes:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        return Ed25519PrivateKey.from_private_bytes(self._seed).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the key to a new file readable by its owner only (``FileExistsError`` if
        there is one: a key is never overwritten by accident)."""
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as file:
            file.write(self.to_pem())

    def sign(self, message: bytes) -> bytes:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        return Ed25519PrivateKey.from_private_bytes(self._seed).sign(message)
