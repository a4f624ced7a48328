"""Whether an object implements a runtime-checkable protocol, decided once per class.

``isinstance`` against a runtime-checkable protocol walks every member of the protocol
(``Store`` has dozens: ~0.1 ms here), and the engine asks on hot paths (every claim, wait
and settling append). A class's instances all have the same methods, so the answer is kept
per class.
"""

from __future__ import annotations

__all__ = ("implements",)

_known: dict[tuple[type, type], bool] = {}


def implements(obj: object, protocol: type) -> bool:
    """``isinstance(obj, protocol)`` for a runtime-checkable protocol, cached per class."""
    key = (type(obj), protocol)
    found = _known.get(key)
    if found is None:
        found = _known[key] = isinstance(obj, protocol)
    return found
