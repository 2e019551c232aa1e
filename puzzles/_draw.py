"""Shared matplotlib plumbing for the families' `picture` functions (not a family).

Figures are built with `matplotlib.figure.Figure` directly, never through pyplot, so no
global state or GUI backend is involved and workers can draw too.
"""

import math

#: Ten distinct colours (matplotlib's "tab10", reordered: red first).
PALETTE = (
    "#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip


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


def slice_panels(count: int, rows: int, cols: int, title: str, label=None):
    """(figure, list of `count` axes) for a box drawn as 2-D slices of rows × cols cells,
    cell (r, c) centred at (c, r) with row 0 on top: each axis spans the cells with a
    margin, and when there is more than one slice each is titled `label(s)` (default
    "slice s", s counting from 0)."""
    figure, axes = panels(count, title)
    for s, ax in enumerate(axes):
        ax.set_xlim(-0.6, cols - 0.4)
        ax.set_ylim(rows - 0.4, -0.6)
        if count > 1:
            ax.set_title(label(s) if label else f"slice {s}", fontsize=9)
    return figure, axes
