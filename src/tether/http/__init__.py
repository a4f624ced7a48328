"""The HTTP/SSE face of a runtime (docs/architecture.md §7): ``create_app(runtime)`` is an ASGI app.

Example::

    from tether.http import create_app

    app = create_app(Runtime(agents, store="sqlite:///./tether-data"), manage_runtime=True)
"""

from tether.http._app import create_app

__all__ = ("create_app",)
