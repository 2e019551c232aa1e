"""The pictures of a peg solitaire answer: a text board after every move (`render`) and
a matplotlib figure of the same (`picture`); for `reachable`, the finishing holes and
the positions per jump. Holes are numbered 1-based, as people read them.
"""

from typing import TYPE_CHECKING

from .board import Reachable, Solution, geometry, move_path, moves_of, play, start_board

if TYPE_CHECKING:
    from . import Params


def _text_board(side: int, mark) -> list[str]:
    """The triangle as text rows, hole i drawn as mark(i) (one character)."""
    places, _ = geometry(side)
    rows: list[list[str]] = [[] for _ in range(side)]
    for i, (r, _) in enumerate(places):
        rows[r].append(mark(i))
    return [" " * (side - 1 - r) + " ".join(row) for r, row in enumerate(rows)]


def render(p: "Params", solution: Solution) -> str:
    """The board ('x' a peg, '.' a hole) at the start and after every move; for
    `reachable`, the layer counts and the finishing holes marked 'o'."""
    if isinstance(solution, Reachable):
        ends = {h for h, _ in solution.finishes}
        head = [
            "positions after each jump: " + ", ".join(map(str, solution.layers)),
            "holes where the last peg can stand: "
            + (", ".join(str(h + 1) for h in sorted(ends)) or "none"),
        ]
        return "\n".join(head + _text_board(p.side, lambda i: "o" if i in ends else "."))
    board = start_board(p.side, p.start - 1)

    def pegs(i: int) -> str:
        return "x" if board >> i & 1 else "."

    blocks = [[f"start, hole {p.start} empty", *_text_board(p.side, pegs)]]
    for move in moves_of(solution):
        for jump in move:
            board = play(board, jump)
        blocks.append([f"move {len(blocks)}: {move_path(move)}", *_text_board(p.side, pegs)])
    return "\n\n".join("\n".join(block) for block in blocks)


def _draw_board(ax, side: int, board: int, marked=(), path=()) -> None:
    """Holes as rings, pegs as discs, `marked` holes ringed green, `path` as arrows."""
    places, _ = geometry(side)
    xy = [(c - r / 2, -r * 0.866) for r, c in places]
    ax.set_xlim(-side / 2 - 0.2, side / 2 - 0.3)
    ax.set_ylim(-(side - 1) * 0.866 - 0.6, 0.6)
    for i, (x, y) in enumerate(xy):
        peg = board >> i & 1
        ax.scatter(
            [x],
            [y],
            s=160,
            facecolor="#8b4513" if peg else "white",
            edgecolor="green" if i in marked else "black",
            linewidth=3 if i in marked else 1,
            zorder=2,
        )
        ax.text(x, y - 0.36, str(i + 1), ha="center", va="center", fontsize=6, color="grey")
    for f, _, t in path:
        (x0, y0), (x1, y1) = xy[f], xy[t]
        ax.annotate(
            "",
            (x1, y1),
            (x0, y0),
            zorder=3,
            arrowprops={"arrowstyle": "->", "color": "blue", "lw": 1.5},
        )


def picture(p: "Params", solution: Solution):
    """A matplotlib Figure: the board at the start and after every move (pegs brown,
    empty holes white, the move's jumps as blue arrows, holes numbered 1-based); for
    `reachable`, the board with every finishing hole ringed green and the number of
    positions after each jump as a bar chart."""
    from puzzlesweep.puzzles._draw import panels

    board = start_board(p.side, p.start - 1)
    if isinstance(solution, Reachable):
        ends = [h for h, _ in solution.finishes]
        figure, (board_ax, bars) = panels(
            2,
            f"T_{p.side}, start {p.start}: last peg can stand on "
            f"{', '.join(str(h + 1) for h in ends) or 'no hole'}",
            size=3.2,
        )
        _draw_board(board_ax, p.side, board, marked=ends)
        bars.set_axis_on()
        bars.set_aspect("auto")
        bars.bar(range(len(solution.layers)), solution.layers, color="#8b4513")
        bars.set_xlabel("jumps")
        bars.set_ylabel("distinct positions")
        return figure
    moves = moves_of(solution)
    figure, axes = panels(
        len(moves) + 1,
        f"T_{p.side}, start {p.start}: {len(moves)} moves, {len(solution)} jumps",
        size=2.0,
    )
    _draw_board(axes[0], p.side, board)
    axes[0].set_title("start", fontsize=9)
    for ax, move in zip(axes[1:], moves, strict=True):
        for jump in move:
            board = play(board, jump)
        _draw_board(ax, p.side, board, path=move)
        ax.set_title(move_path(move), fontsize=9)
    return figure
