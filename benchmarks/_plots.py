"""PNG plots of the side-by-side figures (matplotlib, Agg backend; skipped without it)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

__all__ = ("plot_lines",)

Series = Mapping[str, Mapping[int, float]]


def plot_lines(
    path: Path, title: str, xlabel: str, ylabel: str, series: Series, *, log: bool = False
) -> Path | None:
    """One line per system; returns the file written, or ``None`` without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    figure, axes = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    for name, points in series.items():
        if points:
            xs = sorted(points)
            axes.plot(xs, [points[x] for x in xs], marker="o", label=name)
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_xscale("log")
    if log:
        axes.set_yscale("log")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
    return path
