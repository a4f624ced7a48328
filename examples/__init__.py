"""Runnable examples of Tether: ``python -m examples.<name>`` from the repository root."""
