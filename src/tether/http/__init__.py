"""The HTTP/SSE face of a runtime (docs/architecture.md §7): ``create_app(runtime)`` is an ASGI app.

Example::

    from tether.http import create_app

    app = create_app(Runtime(agents, store="sqlite:///./tether-data"), manage_runtime=True)

Every route takes the runtime it calls from ``runtime_dependency``, which an app's
``dependency_overrides`` can replace.
"""

from tether.http._app import create_app
from tether.http._dependencies import runtime_dependency

__all__ = ("create_app", "runtime_dependency")
