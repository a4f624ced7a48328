"""The served benchmark's workloads: each one's tool turns per submission (one tool call per
turn, then the final answer; ``benchmarks/peers/_fake.py``'s conversation of that many turns)."""

from __future__ import annotations

__all__ = ("TURNS",)

TURNS = {"one": 1, "three": 3}
