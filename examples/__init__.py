"""Runnable examples of Tether: ``.venv/bin/python -m examples.<name>`` from the repository root."""
