"""Benchmark: the staircase of no-three-in-a-row boards, each proven with only the cuts
of the boards proven before it, then the target board with and without the new steps.

    nice -n 19 .venv/bin/python benchmarks/staircase_bench.py --cap 1200
    nice -n 19 .venv/bin/python benchmarks/staircase_bench.py --boards 12x12 --cap 1800

The chain starts from the boards up to 9×10 (`no_k_in_row.THREE_IN_ROW`'s first
entries) and proves `--boards` in the order given (default: every a×b with b = 11, 12 and
10×10, by area) with SCIP, one thread, the default model (periodic start) whose sub-box
cuts come only from boards proven earlier in the chain (`model(p, cuts=table)`); a board
not proven stops the chain. Each line: status, objective, dual bound, nodes, wall and CPU
seconds, the load average, and the value of OEIS A181019 (the most stones kept on an m×n
board with no three in a row, rows 3..10 of its table; A181018 for the squares) where
known. `--target` then solves that board twice, with the cuts of the base table and with
the whole chain's, for the before/after figure. Not part of the test suite; the figures
are in benchmarks/README.md.
"""

import argparse
import json
import time

from puzzlesweep.puzzles import no_k_in_row
from puzzlesweep.solvers import Limits, scip

#: OEIS A181019, rows 3..10, columns 1..12: the most stones kept on an m×n board with no
#: three in a row (https://oeis.org/A181019).
A181019 = {
    3: (2, 4, 6, 7, 9, 10, 12, 14, 15, 17, 19, 20),
    4: (3, 6, 7, 9, 12, 13, 16, 18, 20, 22, 24, 26),
    5: (4, 8, 9, 12, 16, 17, 20, 24, 25, 28, 32, 33),
    6: (4, 8, 10, 13, 17, 20, 23, 26, 29, 32, 36, 38),
    7: (5, 10, 12, 16, 20, 23, 26, 30, 33, 37, 41, 44),
    8: (6, 12, 14, 18, 24, 26, 30, 36, 38, 42, 48, 50),
    9: (6, 12, 15, 20, 25, 29, 33, 38, 42, 47, 52, 56),
    10: (7, 14, 17, 22, 28, 32, 37, 42, 47, 52, 58, 62),
}
#: OEIS A181018 (n×n, most stones kept) for n = 11, 12.
A181018 = {11: 64, 12: 74}


def published(a: int, b: int) -> int | None:
    """The fewest removals a·b − kept on a×b (a <= b) where A181019/A181018 give it."""
    if a == b and a in A181018:
        return a * b - A181018[a]
    if a in A181019 and b <= len(A181019[a]):
        return a * b - A181019[a][b - 1]
    return None


def base_table() -> dict:
    """The cuts the chain starts from: THREE_IN_ROW's boards up to 9×10."""
    return {(3, s): h for s, h in no_k_in_row.THREE_IN_ROW.items() if s[1] <= 10 and s[0] < 10}


def prove(a: int, b: int, table: dict, cap: float) -> dict:
    """Solve a×b, k = 3 with SCIP under `cap` seconds, cuts from `table` only."""
    p = no_k_in_row.Params(dims=[a, b], k=3)
    model = no_k_in_row.model(p, cuts={key: h for key, h in table.items() if key[1] != (a, b)})
    cpu = time.process_time()
    result = scip.solve(model, Limits(cap))
    cpu = time.process_time() - cpu  # below the wall clock when the machine is shared
    with open("/proc/loadavg") as f:
        load = float(f.read().split()[0])
    if result.solution is not None:
        removed = no_k_in_row.from_mip(p, result.solution)
        assert no_k_in_row.verify(p, removed) == round(result.objective)
    return {
        "board": f"{a}x{b}",
        "status": result.status,
        "objective": result.objective,
        "bound": result.bound,
        "nodes": result.nodes,
        "seconds": round(result.seconds, 1),
        "cpu_seconds": round(cpu, 1),
        "load": load,
        "cuts": len(table),
        "published": published(a, b),
    }


def show(record: dict, log: str | None) -> None:
    """Print one result line; append it to `log` as JSON."""
    fmt = lambda v: "-" if v is None else f"{v:g}"  # noqa: E731
    print(
        f"  {record['board']:>6} {record['status']:>10} {fmt(record['objective']):>5} "
        f"{fmt(record['bound']):>5} {record['nodes']:>7} {record['seconds']:>8.1f} "
        f"{record['cpu_seconds']:>7.1f} {record['load']:>5.2f} {fmt(record['published']):>9}",
        flush=True,
    )
    if log:
        with open(log, "a") as out:
            out.write(json.dumps(record) + "\n")


def default_boards() -> str:
    """Every a×b with 3 <= a <= b, b in 11..12 (not 12×12), and 10×10, by area."""
    boards = [(a, b) for b in (11, 12) for a in range(3, b + 1) if (a, b) != (12, 12)]
    return ",".join(f"{a}x{b}" for a, b in sorted([*boards, (10, 10)], key=lambda s: s[0] * s[1]))


def main(argv: list[str] | None = None) -> None:
    """Parse the arguments, run the chain, then the target with and without it."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--boards", default=default_boards(), help="AxB,... in order")
    parser.add_argument("--target", default="", help="AxB solved before/after the chain")
    parser.add_argument("--cap", type=float, default=1200.0, help="seconds per solve")
    parser.add_argument("--json", help="append one JSON object per solve to this file")
    args = parser.parse_args(argv)
    table = base_table()
    print("  board     status   obj bound   nodes   wall s   cpu s  load  A181019")
    for text in filter(None, args.boards.split(",")):
        a, b = sorted(int(v) for v in text.split("x"))
        record = prove(a, b, table, args.cap)
        show(record, args.json)
        if record["status"] != "optimal":
            print(f"  {text} not proven: the chain stops here")
            break
        table[3, (a, b)] = round(record["objective"])
    if args.target:
        a, b = sorted(int(v) for v in args.target.split("x"))
        for label, cuts in (("base table", base_table()), ("whole chain", table)):
            print(f"  {args.target} with the cuts of the {label} ({len(cuts)} boards)")
            show(prove(a, b, cuts, args.cap), args.json)


if __name__ == "__main__":
    main()
