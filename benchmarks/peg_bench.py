"""Benchmark: time to the proven fewest moves of triangular peg solitaire, before and after.

    .venv/bin/python benchmarks/peg_bench.py                        # T_4..T_7, every stage
    .venv/bin/python benchmarks/peg_bench.py --sides 4 5 6 --before-limit 60
    .venv/bin/python benchmarks/peg_bench.py --sides 7 --stages pruned --limit 900
    .venv/bin/python benchmarks/peg_bench.py --t8 --stages pruned   # the stretch, T_8

The question is OEIS A127500's: the fewest moves (a move = consecutive jumps by one peg)
over every one-vacancy start and every one-peg finish of T_n; known values
T_4..T_8 = 5, 9, 9, 12, 13 (G. I. Bell, "Solving Triangular Peg Solitaire", JIS 11
(2008) 08.4.8, arXiv math/0703865). Each stage runs in its own child process (so its
peak RSS is its own, and a data-memory limit `--memory` turns a blow-up into a row):

- before: the engine of commit 63a8482, kept as `peg_solitaire.deep_search` for boards
  beyond 64-bit keys: per start class, a Python uniform-cost search over (board, last
  peg moved) with symmetric keys after a depth-first dive; the classes run one after
  another within `--before-limit` seconds in all; when capped, the proven bound is
  the least bound over the classes (0 for a class not reached).
- layered: the layered DP of `peg_solitaire.layered`, every start in layer 0, exact
  states (no symmetry), no dominance, no pruning.
- symmetry: + states identified under the 6 symmetries of the triangle.
- dominance: + per board only the states of least moves.
- pruned: + a beam pass (width 5000) for an incumbent and the corner bound to cut
  states that cannot beat it (the configuration `puzzlesweep solve` uses).

Printed per board and stage: seconds to the proven optimum ("> L s, bound b" when a
limit stopped it), states expanded, peak RSS, and the speed-up over `before` and over
the previous stage, all measured in the same run. Not part of the test suite.
"""

import argparse
import json
import resource
import subprocess
import sys
import time

from puzzlesweep.puzzles import peg_solitaire as peg
from puzzlesweep.solvers import Limits, backtrack, frontier

KNOWN = {4: 5, 5: 9, 6: 9, 7: 12, 8: 13}  # OEIS A127500, Bell (2008)
STAGES = {
    "layered": {"symmetry": False, "dominance": False, "beam": None},
    "symmetry": {"symmetry": True, "dominance": False, "beam": None},
    "dominance": {"symmetry": True, "dominance": True, "beam": None},
    "pruned": {"symmetry": True, "dominance": True, "beam": 5000},
}


def run_before(side: int, limit: float) -> dict:
    """The old engine over one start per class, within `limit` seconds in all."""
    classes = sorted({min(g[h] for g in peg.symmetries(side)) for h in range(peg.holes(side))})
    started, values, bounds, nodes, status = time.perf_counter(), [], [], 0, "optimal"
    for start in classes:
        left = limit - (time.perf_counter() - started)
        if left <= 0:
            status = "time_limit"
            bounds.append(0.0)
            continue
        params = peg.Params(side=side, start=start + 1, question="min_moves")
        result = backtrack.solve(peg.deep_search(params), Limits(left))
        nodes += result.nodes
        if result.status == "optimal":
            values.append(result.objective)
            bounds.append(result.objective)
        elif result.status != "infeasible":
            status = result.status
            bounds.append(result.bound or 0.0)
    seconds = time.perf_counter() - started
    best = min(values) if status == "optimal" else None
    return {
        "status": status,
        "objective": best,
        "bound": min(bounds),
        "seconds": seconds,
        "nodes": nodes,
    }


def run_after(side: int, stage: str, limit: float) -> dict:
    """The layered search over every start at once, configured as `stage`."""
    problem = peg.layered(side, list(range(peg.holes(side))), None, "min_moves", **STAGES[stage])
    result = frontier.solve(problem, Limits(limit))
    if result.status == "optimal":  # replay the witness, as `puzzlesweep solve` does
        path = tuple(result.solution)
        p = peg.Params(side=side, start=path[0][2] + 1, question="min_moves")
        assert peg.verify(p, path) == result.objective
    return {
        "status": result.status,
        "objective": result.objective,
        "bound": result.bound,
        "seconds": result.seconds,
        "nodes": result.nodes,
        "message": result.message,
        "peak_states": result.extra.get("peak_states"),
    }


def child(side: int, stage: str, limit: float, memory: int) -> None:
    """Run one (board, stage) under a data-memory limit and print it as JSON."""
    resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))
    try:
        row = run_before(side, limit) if stage == "before" else run_after(side, stage, limit)
    except MemoryError:
        row = {"status": "memory", "seconds": None, "nodes": None}
    row["rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(row))


def cell(row: dict, limit: float) -> str:
    """'12.3 s, 4.5e6 states, 812 MiB' or '> 120 s, bound 7' or 'memory > 6 GiB'."""
    if row["status"] == "memory":
        return "out of memory"
    states = f"{row['nodes']:,} states" if row.get("nodes") else "-"
    memory = f"{row['rss_mib']:.0f} MiB"
    if row["status"] not in ("optimal", "time_limit", "node_limit"):  # error: say why
        return f"{row['status']}: {row.get('message')}; {states}, {memory}"
    if row["status"] != "optimal":
        bound = "-" if row.get("bound") is None else f"{row['bound']:g}"
        return f"> {limit:g} s, bound {bound}; {states}, {memory}"
    return f"{row['seconds']:.2f} s = {row['objective']:g}; {states}, {memory}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sides", type=int, nargs="+", default=[4, 5, 6, 7])
    parser.add_argument("--t8", action="store_true", help="add T_8 (after stages only)")
    parser.add_argument("--stages", default="before," + ",".join(STAGES))
    parser.add_argument("--before-limit", type=float, default=120.0)
    parser.add_argument("--limit", type=float, default=900.0, help="seconds per stage")
    parser.add_argument("--memory", type=float, default=6.0, help="GiB per stage")
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        limit = args.before_limit if args.one[1] == "before" else args.limit
        return child(int(args.one[0]), args.one[1], limit, int(args.memory * 2**30))
    sides = args.sides + ([8] if args.t8 and 8 not in args.sides else [])
    stages = args.stages.split(",")
    for side in sides:
        print(f"T_{side} (known fewest moves {KNOWN[side]}):", flush=True)
        before = previous = None
        before_capped = False
        for stage in stages:
            if stage == "before" and side == 8:
                continue
            limit = args.before_limit if stage == "before" else args.limit
            done = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--one",
                    str(side),
                    stage,
                    "--limit",
                    str(args.limit),
                    "--before-limit",
                    str(args.before_limit),
                    "--memory",
                    str(args.memory),
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            row = json.loads(done.stdout.strip().splitlines()[-1])
            if row["status"] == "optimal":
                assert row["objective"] == KNOWN[side], (side, stage, row)
            seconds = row["seconds"] if row["status"] == "optimal" else None
            ratios = []
            if stage != "before" and seconds:
                if before is not None:
                    ratios.append(f"x{before / seconds:.1f} vs before")
                elif before_capped:  # the old engine was stopped: at least this much
                    ratios.append(f"x>{args.before_limit / seconds:.0f} vs before")
                if previous:
                    ratios.append(f"x{previous / seconds:.1f} vs previous stage")
            print(f"  {stage:10s} {cell(row, limit)}  {'; '.join(ratios)}", flush=True)
            if stage == "before":
                before, before_capped = seconds, seconds is None
            previous = seconds
        print(flush=True)


if __name__ == "__main__":
    main()
