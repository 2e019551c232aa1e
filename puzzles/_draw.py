"""Shared matplotlib plumbing for the families' `picture` functions (not a family).

Figures are built with `matplotlib.figure.Figure` directly, never through pyplot, so no
global state or GUI backend is involved and workers can draw too.
"""

import math

PALETTE = ["#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2"]
PALETTE += ["#7f7f7f", "#bcbd22", "#17becf"]


def panels(count: int, title: str, size: float = 2.2, most_columns: int = 6):
    """(figure, list of `count` axes) on a grid of at most `most_columns` columns, each
    axis square, without ticks, equal aspect; the figure carries `title`."""
    from matplotlib.figure import Figure

    columns = max(1, min(count, most_columns))
    rows = math.ceil(count / columns)
    figure = Figure(figsize=(size * columns, size * rows + 0.5), layout="constrained")
    grid = figure.subplots(rows, columns, squeeze=False)
    axes = [ax for row in grid for ax in row]
    for ax in axes:
        ax.set_axis_off()
        ax.set_aspect("equal")
    figure.suptitle(title)
    return figure, axes[:count]


def colour(index: int) -> str:
    """A distinct colour for a small index (cycles after ten)."""
    return PALETTE[index % len(PALETTE)]
