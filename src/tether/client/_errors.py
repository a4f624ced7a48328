"""An error answer read back into the exception the server raised: the envelope's ``type`` is
the code of a class of :mod:`tether.errors`, and the client raises that class.

An error the server's HTTP layer answers itself (``invalid_request``, ``malformed_json``,
``misdirected_request``, ``internal``...) has no class there: it is a
:class:`RequestFailed`, carrying the same ``type``.
"""

from __future__ import annotations

import inspect
from typing import Any

import orjson

from tether import errors

__all__ = ("RequestFailed", "error_class", "error_from_response")


class RequestFailed(errors.TetherError):
    """An error answer with no class of its own in :mod:`tether.errors`: a request the HTTP
    layer refused (``invalid_request``: ``details`` lists each field's problem), a body
    that is not the envelope, or the server's own failure (``internal``).

    Example::

        try:
            client.records("assistant", "ann", limit=0)
        except RequestFailed as exc:
            print(exc.status, exc.type, exc.details)  # 422 invalid_request [...]
    """

    code = "request_failed"

    def __init__(self, status: int, type_: str, message: str, details: Any = None) -> None:
        self.status = status
        self.type = type_
        self.details = details
        super().__init__(message)


def _classes() -> dict[str, type[errors.TetherError]]:
    """Every error class of :mod:`tether.errors` by its code (a code two classes shared
    would be read as the first, the more general)."""
    found: dict[str, type[errors.TetherError]] = {}
    for name in errors.__all__:
        kind = getattr(errors, name)
        if isinstance(kind, type) and issubclass(kind, errors.TetherError):
            found.setdefault(kind.code, kind)
    found.setdefault(errors.TetherError.code, errors.TetherError)
    return found


_BY_CODE = _classes()


def error_class(code: str) -> type[errors.TetherError] | None:
    """The class of :mod:`tether.errors` whose ``code`` is ``code``, if any."""
    return _BY_CODE.get(code)


def _rebuilt(kind: type[errors.TetherError], message: str, details: Any) -> errors.TetherError:
    """An instance of ``kind`` holding ``message`` as its text, with each attribute its
    constructor takes from ``details`` when the envelope carries it, else None: the server
    sends the message it made, not the arguments it was made from."""
    error = kind.__new__(kind)
    Exception.__init__(error, message)
    given = details if isinstance(details, dict) else {}
    parameters = inspect.signature(kind.__init__).parameters
    for name, parameter in parameters.items():
        if name == "self" or parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        if name != "message":
            default = None if parameter.default is parameter.empty else parameter.default
            setattr(error, name, given.get(name, default))
    for name, value in given.items():
        if not hasattr(error, name):
            setattr(error, name, value)
    return error


def error_from_response(status: int, content: bytes) -> errors.TetherError:
    """The exception an error answer (``status``, its body ``content``) stands for.

    It has the envelope's ``message`` as its text and, besides the attributes of its class
    (each from ``details`` when there, else its default or None), ``http_status`` (the
    answer's) and ``details`` (the envelope's, when it has some and the class no
    ``details`` of its own).
    """
    try:
        body = orjson.loads(content)
        envelope = body["error"]
        type_, message = str(envelope["type"]), str(envelope["message"])
        details = envelope.get("details")
    except orjson.JSONDecodeError:  # a proxy's page, say
        text = content[:200].decode("utf-8", "replace")
        return RequestFailed(status, "not_json", text or f"HTTP {status}")
    except (KeyError, TypeError):
        text = content[:200].decode("utf-8", "replace")
        return RequestFailed(status, "not_an_envelope", text)
    kind = error_class(type_)
    if kind is None:
        return RequestFailed(status, type_, message, details)
    error = _rebuilt(kind, message, details)
    # Not ``status``: a provider's failure has its own (the status the provider answered).
    setattr(error, "http_status", status)  # noqa: B010 (not an attribute of every class)
    if details is not None and not hasattr(type(error), "details"):
        setattr(error, "details", details)  # noqa: B010
    return error
