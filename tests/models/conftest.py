from ..engine.conftest import clock, make_runtime

__all__ = ("clock", "make_runtime")
