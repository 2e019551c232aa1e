"""Benchmark: knights dominating the n×n board, n = 1..20 (OEIS A006075), each proven by
the production path (`puzzlesweep solve domination piece=knight rows=n cols=n`).

    .venv/bin/python benchmarks/knights_bench.py                       # n = 1..20, 600 s each
    .venv/bin/python benchmarks/knights_bench.py --n 17..18 --time-limit 400 --json out.jsonl
    .venv/bin/python benchmarks/knights_bench.py --n 14..17 --solver scip,highs

Each n is solved by `solve.solve_instance` (the family's model, one thread, the family's
verifier) with each engine of `--solver` in turn (highs, scip or auto; default highs,scip)
under `--time-limit` seconds; the script prints per n and engine the status,
the objective, the dual bound, the nodes, the seconds, and whether the value equals
A006075 (1, 4, 4, 4, 5, 8, 10, 12, 14, 16, 21, 24, 28, 32, 36, 40, 46, 52, 57, 62 for
n = 1..20, https://oeis.org/A006075), then the total time. `--json FILE` appends one
JSON object per n, so a long sweep can be run in pieces of at most ~15 minutes and put
together. Not part of the test suite; the figures are in benchmarks/README.md.
"""

import argparse
import json
import sys
import time

from puzzlesweep.core import make_params
from puzzlesweep.puzzles import Instance, domination
from puzzlesweep.solve import solve_instance
from puzzlesweep.solvers import Limits

#: OEIS A006075, knights dominating n×n, n = 1..20 (https://oeis.org/A006075).
A006075 = [1, 4, 4, 4, 5, 8, 10, 12, 14, 16, 21, 24, 28, 32, 36, 40, 46, 52, 57, 62]


def sizes(text: str) -> list[int]:
    """'12..16' → [12, ..., 16]; '5' → [5]; sizes must lie in 1..20."""
    low, _, high = text.partition("..")
    chosen = list(range(int(low), int(high or low) + 1))
    if not chosen or chosen[0] < 1 or chosen[-1] > len(A006075):
        raise SystemExit(f"--n must lie within 1..{len(A006075)}, got {text!r}")
    return chosen


def prove(n: int, time_limit: float, solver: str = "highs") -> dict:
    """One n with one solver: the catalog row's numbers for the n×n knights instance,
    plus `expected`."""
    params = make_params(domination.Params, {"piece": "knight", "rows": n, "cols": n})
    cpu = time.process_time()
    row = solve_instance(Instance("domination", params), solver, Limits(time_limit))
    cpu = time.process_time() - cpu  # below the wall clock when the machine is shared
    return {
        "n": n,
        "solver": row["solver"],
        "status": row["status"],
        "objective": row["objective"],
        "bound": row["bound"],
        "nodes": row["nodes"],
        "seconds": round(row["solve_seconds"], 2),
        "cpu_seconds": round(cpu, 2),
        "verified": row["verified"],
        "expected": A006075[n - 1],
    }


def main(argv: list[str] | None = None) -> None:
    """Parse the arguments, prove each n in turn, print the table and the total."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", default="1..20", help="sizes, e.g. 1..20 or 16")
    parser.add_argument("--time-limit", type=float, default=600.0, help="seconds per n")
    parser.add_argument("--json", help="append one JSON object per n to this file")
    parser.add_argument("--solver", default="highs,scip", help="engines in turn per n")
    args = parser.parse_args(argv)
    print(
        f"{'n':>3} {'solver':>6} {'status':>10} {'obj':>5} {'bound':>5} {'A006075':>7} "
        f"{'nodes':>8} {'s':>8} {'cpu s':>8}"
    )
    total, started = 0.0, time.perf_counter()
    for n, solver in [(n, s) for n in sizes(args.n) for s in args.solver.split(",")]:
        result = prove(n, args.time_limit, solver)
        total += result["seconds"]
        fmt = lambda v: "-" if v is None else f"{v:g}"  # noqa: E731
        print(
            f"{n:>3} {result['solver']:>6} {result['status']:>10} {fmt(result['objective']):>5} "
            f"{fmt(result['bound']):>5} {result['expected']:>7} {result['nodes']:>8} "
            f"{result['seconds']:>8.2f} {result['cpu_seconds']:>8.1f}",
            flush=True,
        )
        if result["objective"] is not None and result["bound"] is not None:
            if not result["bound"] <= result["expected"] <= result["objective"]:
                print(f"    n = {n} contradicts A006075 = {result['expected']}", file=sys.stderr)
        if args.json:
            with open(args.json, "a") as out:
                out.write(json.dumps(result) + "\n")
    print(f"total solve time {total:.1f} s (wall {time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
