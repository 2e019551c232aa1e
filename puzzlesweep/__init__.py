"""puzzlesweep: batch experiments on combinatorial puzzles."""

__version__ = "0.1.0"
