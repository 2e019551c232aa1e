"""`python -m puzzlesweep.cli`: the same as the `puzzlesweep` script."""

from puzzlesweep.cli import main

main()
