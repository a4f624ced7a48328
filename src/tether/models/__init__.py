"""Models: the protocol the journal calls, and (later) providers and local models."""

from tether.models._protocol import DeltaSink, Model, StreamDelta

__all__ = ("DeltaSink", "Model", "StreamDelta")
