"""What a client of a Tether server assumes unless told otherwise: where the server listens
(:data:`DEFAULT_URL`) and how long one ``?wait`` of a followed ``send`` holds a request
(:data:`WAIT_SLICE`).

Kept apart from the clients, which import the wire models, so the ``tether`` CLI's client
commands share these without loading them (``tests/cli/test_help.py``).
"""

__all__ = ("DEFAULT_URL", "WAIT_SLICE")

DEFAULT_URL = "http://127.0.0.1:8484"
"""Where ``tether serve`` listens unless told otherwise."""
WAIT_SLICE = 1.0
"""Seconds one ``?wait`` of ``send`` holds a request: how soon it notices a parked run."""
