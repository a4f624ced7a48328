from pathlib import Path

from tether.store import MemoryStore, Store
from tether.testing.storetest import StoreConformance


class TestMemoryStore(StoreConformance):
    async def make_store(self, directory: Path) -> Store:
        return MemoryStore()

    async def tamper(self, store: Store, conversation_id: str, seq: int, body: bytes) -> None:
        assert isinstance(store, MemoryStore)
        rows = store._logs[conversation_id].rows
        rows[seq - 1] = (rows[seq - 1][0], rows[seq - 1][1], body, *rows[seq - 1][3:])

    async def truncate(self, store: Store, conversation_id: str, seq: int) -> None:
        assert isinstance(store, MemoryStore)
        del store._logs[conversation_id].rows[seq:]
