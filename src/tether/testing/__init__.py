"""Test support shipped with Tether: the store conformance suite, :mod:`.storetest`."""

__all__ = ()
