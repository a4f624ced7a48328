from ..engine.conftest import make_runtime, store

__all__ = ("make_runtime", "store")
