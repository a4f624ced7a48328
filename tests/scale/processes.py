"""The process helpers of the scale tests live in ``tests/processes.py``, shared by all."""

from ..processes import free_port, log_text, wait_ready

__all__ = ("free_port", "log_text", "wait_ready")
