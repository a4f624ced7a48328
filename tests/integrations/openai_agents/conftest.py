from ...engine.conftest import FAST, make_runtime

__all__ = ("FAST", "make_runtime")
