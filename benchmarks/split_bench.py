"""Benchmark: one direct HiGHS solve against the split proof, side by side.

    .venv/bin/python benchmarks/split_bench.py                        # small instances
    .venv/bin/python benchmarks/split_bench.py --catalog results-676  # + the 6x7x6 attempt

For each instance: the direct solve of the whole MIP (`solvers.highs.solve`, one thread,
`--cap` seconds) and the split proof solved part after part in this process
(`puzzlesweep.proof.solve_one`, each part capped at `--cap`, cutoff = the best
incumbent found so far − 1, as the flow does). Columns: value or bounds, seconds of
wall time (the split's is the sum over its parts: what one worker spends; two workers
take about half), parts. Every split must give the direct solve's optimum; the script
checks it.

With `--catalog`, it also reads the stored attempt of `prove no_k_in_row dims=6,7,6 k=5
--split 1:0,6 --width 3` from that catalog (it does not run it: see benchmarks/README.md):
parts done, the combined bound and incumbent, and the seconds spent.

Not part of the test suite.
"""

import argparse
import json
import time

from puzzlesweep import puzzles
from puzzlesweep.proof import Proof, best_row, build, solve_one, stored
from puzzlesweep.solvers import Limits, highs
from puzzlesweep.solvers import split as splitting

# (dims, k, split text, width, known optimum)
INSTANCES = [
    ([6, 7], 5, "0:0,5", 3, 8),
    ([13, 17], 5, "0:6", 3, 44),
    ([6, 6], 3, "0:0,5", 2, 16),
    ([8, 8], 3, "0:0,7", 2, 28),
    ([5, 5, 5], 5, "0:0,4", 3, 28),
]
BIG = {"dims": [6, 7, 6], "k": 5}


def direct(dims, k, cap):
    """(status, objective, bound, seconds) of one direct solve."""
    family = puzzles.get("no_k_in_row")
    started = time.perf_counter()
    result = highs.solve(family.model(family.Params(dims=dims, k=k)), Limits(cap))
    return result.status, result.objective, result.bound, time.perf_counter() - started


def split_solve(dims, k, text, width, cap):
    """(combined, seconds, parts) of the split proof, parts solved one after another."""
    proof = Proof("no_k_in_row", {"dims": dims, "k": k}, text, width, Limits(cap))
    _, model, split, _ = build(proof)
    integral = splitting.integral_objective(model)
    started = time.perf_counter()
    rows = []
    for part in split.parts:
        best = best_row(rows)
        cutoff = best["objective"] - 1 if best and integral else None
        rows.append(solve_one(proof, part.index, cutoff, proof.limits, "bench"))
    lowers = [float(json.loads(r["subproblem"])["lower"]) for r in rows]
    combined = splitting.combine(lowers, [r["objective"] for r in rows if r["verified"]])
    return combined, time.perf_counter() - started, len(split.parts)


def text(status, objective, bound):
    """'optimal 8' or 'bounds 55..64'."""
    if status == "optimal":
        return f"optimal {objective:g}"
    low = "-" if bound is None else f"{bound:g}"
    high = "-" if objective is None else f"{objective:g}"
    return f"bounds {low}..{high}"


def attempt(path: str, width: int = 3, split: str = "1:0,6") -> None:
    """Print the stored 6x7x6 attempt from the catalog at `path`."""
    proof = Proof("no_k_in_row", BIG, split, width, Limits(600))
    _, _, row = stored(path, proof)
    if row is None:
        print(f"\nno stored attempt {proof.key} in {path}")
        return
    cert = json.loads(row["certificate"])
    parts = cert["parts"]
    final = sum(p["status"] in ("optimal", "infeasible") for p in parts)
    stopped = sum(p["status"] in ("time_limit", "node_limit") for p in parts)
    print(f"\n6x7x6 k=5, split {split} width {width} (key {proof.key}) in {path}:")
    print(
        f"  status {row['status']}, incumbent {row['objective']}, bound {row['bound']}, "
        f"{len(parts)} parts ({cert['parts_total_before_symmetry']} before symmetry): "
        f"{final} closed, {stopped} at their limit, {len(parts) - final - stopped} missing; "
        f"probe bound {cert['probe_bound']}; {row['solve_seconds']:.0f} s of solving "
        f"(summed over workers)"
    )
    for p in parts:
        print(
            f"  part {p['index']:2d} {p['label']:22s} {p['status'] or '-':11s} lower {p['lower']}"
        )


def main() -> None:
    """Print the table (and the stored attempt with --catalog); assert known optima."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cap", type=float, default=120.0, help="seconds per solve or part")
    parser.add_argument("--catalog", help="read the 6x7x6 attempt from this catalog")
    args = parser.parse_args()
    print(f"{'instance':18s} {'direct':>16s} {'s':>7s}   {'split':>16s} {'s':>7s} {'parts':>5s}")
    for dims, k, split, width, optimum in INSTANCES:
        status, objective, bound, seconds = direct(dims, k, args.cap)
        combined, split_seconds, parts = split_solve(dims, k, split, width, args.cap)
        name = f"{'x'.join(map(str, dims))} k={k} {split}"
        right = "optimal" if combined.proven else "time_limit"
        print(
            f"{name:18s} {text(status, objective, bound):>16s} {seconds:7.2f}   "
            f"{text(right, combined.objective, combined.bound):>16s} {split_seconds:7.2f} "
            f"{parts:5d}"
        )
        if status == "optimal":
            assert objective == optimum, (dims, k, objective)
        if combined.proven:
            assert combined.objective == optimum, (dims, k, combined)
    if args.catalog:
        attempt(args.catalog)


if __name__ == "__main__":
    main()
