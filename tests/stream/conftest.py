from ..engine.conftest import make_runtime

__all__ = ("make_runtime",)
