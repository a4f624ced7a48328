"""A store seen through failpoints: every operation first reaches ``store.<operation>``.

The runtime wraps the store it opens in one (:func:`with_failpoints`) only while failpoints
are armed or ``TETHER_FAILPOINTS`` is set, so no backend carries a line of it and a store
without failpoints pays nothing. The wrapper is of a class made once per backend class, with
the backend's every public attribute on it (the capability protocols are checked against the
class), and passes everything through unchanged when no failpoint fires.

An ``error`` is what the backend lets out when its database fails:
:class:`~tether.errors.StoreUnavailable`, caused by the backend's own exception
(``sqlite3.OperationalError: disk I/O error`` for SQLite, a psycopg ``OperationalError``
for PostgreSQL, an ``OSError`` ``EIO`` for one that has neither), raised before the call
reaches the backend, so nothing of it is written.
"""

from __future__ import annotations

import errno
import inspect
import sqlite3
from collections.abc import Awaitable, Callable
from functools import cache
from typing import Any, cast

from tether._failpoints import hit
from tether.errors import StoreUnavailable
from tether.store._protocol import Store

__all__ = ("backend_error", "with_failpoints")

Sleep = Callable[[float], Awaitable[None]]


def backend_error(backend: type) -> Callable[[str], BaseException]:
    """What a failing database raises inside ``backend``, as the store lets it out."""
    module = backend.__module__
    if "postgres" in module:

        def postgres(name: str) -> BaseException:
            import psycopg

            cause = psycopg.OperationalError(
                "consuming input failed: server closed the connection unexpectedly"
            )
            error = StoreUnavailable(f"postgresql: {cause} (failpoint {name})")
            error.__cause__ = cause
            return error

        return postgres
    if "sqlite" in module:

        def sqlite(name: str) -> BaseException:
            cause = sqlite3.OperationalError("disk I/O error")
            error = StoreUnavailable(f"sqlite failed: {cause} (failpoint {name})")
            error.__cause__ = cause
            return error

        return sqlite

    def other(name: str) -> BaseException:
        cause = OSError(errno.EIO, "disk I/O error")
        error = StoreUnavailable(f"store failed: {cause} (failpoint {name})")
        error.__cause__ = cause
        return error

    return other


class _FailpointStore:
    """The base of every wrapper class: the backend, the clock's sleep, the error."""

    _inner: Any
    _sleep: Sleep | None
    _error: Callable[[str], BaseException]

    def __init__(self, inner: Any, sleep: Sleep | None) -> None:
        self._inner = inner
        self._sleep = sleep
        self._error = backend_error(type(inner))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __repr__(self) -> str:
        return f"with_failpoints({self._inner!r})"

    async def __aenter__(self) -> _FailpointStore:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._inner.__aexit__(*exc_info)


def _operation(name: str) -> Callable[..., Awaitable[Any]]:
    point = f"store.{name}"

    async def operation(self: _FailpointStore, *args: Any, **kwargs: Any) -> Any:
        await hit(point, error=self._error, sleep=self._sleep)
        return await getattr(self._inner, name)(*args, **kwargs)

    operation.__name__ = name
    return operation


def _passed(name: str) -> Callable[..., Any]:
    def method(self: _FailpointStore, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._inner, name)(*args, **kwargs)

    method.__name__ = name
    return method


def _delegated(name: str) -> property:
    def read(self: _FailpointStore) -> Any:
        return getattr(self._inner, name)

    return property(read)


@cache
def _wrapper_class(backend: type) -> type[_FailpointStore]:
    from tether._failpoints import STORE_POINTS

    points = set(STORE_POINTS)
    namespace: dict[str, Any] = {"__module__": __name__}
    for name in dir(backend):
        if name.startswith("_"):
            continue
        attribute = inspect.getattr_static(backend, name)
        if isinstance(attribute, property):
            namespace[name] = _delegated(name)
        elif inspect.iscoroutinefunction(attribute) and f"store.{name}" in points:
            namespace[name] = _operation(name)
        elif callable(attribute) and not isinstance(attribute, (staticmethod, classmethod)):
            namespace[name] = _passed(name)
    return type(f"Failpoint{backend.__name__}", (_FailpointStore,), namespace)


def with_failpoints(store: Store, *, sleep: Sleep | None = None) -> Store:
    """``store`` with a failpoint before each of its operations; ``sleep`` is what a delay
    sleeps on (the runtime's clock). A store wrapped already is returned as it is.

    Example::

        store = with_failpoints(await open_store(url), sleep=clock.sleep)
    """
    if isinstance(store, _FailpointStore):
        return store
    wrapper = _wrapper_class(type(store))(store, sleep)
    return cast(Store, wrapper)
