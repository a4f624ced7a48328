"""The PostgreSQL store (the ``postgres`` extra): many workers and API nodes on one database.

Example::

    from tether.store.postgres import PostgresStore

    async with await PostgresStore.open("postgresql://tether@db/tether") as store:
        print(await store.list_runnable())

Or by URL anywhere a store URL goes: ``tether worker --store postgresql://tether@db/tether``.
"""

from tether.store.postgres._schema import SCHEMA_VERSION
from tether.store.postgres._store import PostgresStore, split_store_url

__all__ = ("SCHEMA_VERSION", "PostgresStore", "split_store_url")
