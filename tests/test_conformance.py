"""The per-class protocol check answers as ``isinstance`` does."""

from tether._conformance import implements
from tether.store import ChangeFeed, LogStore, MemoryStore, Store


def test_it_answers_as_isinstance_does() -> None:
    store, other = MemoryStore(), MemoryStore()
    for protocol in (Store, LogStore, ChangeFeed):
        assert implements(store, protocol) == isinstance(store, protocol)
        assert implements(other, protocol) == isinstance(other, protocol)
    assert not implements(object(), Store)
