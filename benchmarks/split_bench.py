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

With `--hard`, the split chosen by the solver on HARD (a tree of LP-lookahead
fixings, `--split lookahead:N`, `--leaves N`) against the direct solve of the same
instance, side by side in one run: plain HiGHS and plain SCIP (the family's model, one
thread, `--hard-cap` seconds), then a probe (SCIP on the whole for `--probe` seconds,
as `prove --probe` does, for an incumbent), the tree grown with the probe's incumbent
− 1 as cutoff, and its parts solved by SCIP on 2 worker processes (in preorder, each
with that cutoff, so a part proves only that nothing better lies in it). The probe's
and the tree's seconds count in the split's wall time. Seconds are CPU seconds of each
solve (the machine is shared); the 2-worker wall time is the makespan of the parts'
CPU seconds handed out in order to 2 dedicated cores. It prints the largest part / direct,
the sum of the parts / direct and the wall time on 2 workers / direct, against the
direct SCIP solve (the faster engine); the issue's targets are <= 0.2, <= 1.5, <= 0.6.

Not part of the test suite.
"""

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor

from puzzlesweep import puzzles
from puzzlesweep.proof import Proof, best_row, build, solve_one, stored
from puzzlesweep.solvers import Limits, highs, lookahead, scip
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
#: The instance of `--hard`: a direct SCIP solve proves it in a few minutes on the shared
#: 2-core machine (OEIS A181018: 64 stones kept on 11×11 with no three in a row, so 57
#: removed; benchmarks/README.md).
HARD = {"dims": [11, 11], "k": 3}


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


def _solve_part(params: dict, text: str, index: int, cutoff: float, cap: float) -> tuple:
    """(index, status, objective, bound, nodes, seconds) of one tree part solved by SCIP
    (in a worker process: the model is rebuilt there, as a Dask worker does)."""
    family = puzzles.get("no_k_in_row")
    model = family.model(family.Params(**params))
    split, _ = lookahead.tree_split(text, model.num_cols)
    started, cpu = time.perf_counter(), time.process_time()
    r = scip.solve(splitting.restrict(model, split, split.parts[index], cutoff), Limits(cap))
    seconds = time.perf_counter() - started
    return index, r.status, r.objective, r.bound, r.nodes, seconds, time.process_time() - cpu


def makespan(seconds: list[float], workers: int = 2) -> float:
    """The wall time of jobs of these `seconds` handed out in order to the first free of
    `workers` dedicated cores (what the prove flow does with one part per worker)."""
    free = [0.0] * workers
    for s in seconds:
        free[free.index(min(free))] += s
    return max(free)


def hard(params: dict, leaves: int, cap: float, probe_seconds: float) -> None:
    """Print the direct solves of `params` (plain HiGHS, plain SCIP) and its lookahead
    tree's parts on 2 worker processes, with the ratios of the module docstring."""
    family = puzzles.get("no_k_in_row")
    model = family.model(family.Params(**params))
    name = f"{'x'.join(map(str, params['dims']))} k={params['k']}"
    direct_s = {}
    for engine in (highs, scip):
        started, cpu = time.perf_counter(), time.process_time()
        r = engine.solve(model, Limits(cap))
        direct_s[r.solver] = time.process_time() - cpu
        print(f"{name} direct {r.solver:5s} {text(r.status, r.objective, r.bound):>16s} "
              f"nodes {r.nodes:8d} {time.perf_counter() - started:8.1f} s wall "
              f"{direct_s[r.solver]:8.1f} s cpu", flush=True)  # fmt: skip
    started = time.process_time()  # the probe: an incumbent for the cutoff, as --probe
    probe = scip.solve(model, Limits(probe_seconds))
    model.start = probe.solution or model.start
    tree = lookahead.resolve(model, f"lookahead:{leaves}")
    grow = time.process_time() - started
    split, _ = lookahead.tree_split(tree, model.num_cols)
    cutoff = round(sum(c * x for c, x in zip(model.costs, model.start, strict=True))) - 1
    print(f"probe {probe_seconds:.0f} s: {text(probe.status, probe.objective, probe.bound)}")
    print(f"tree of {len(split.parts)} leaves grown in {grow:.1f} s: --split {tree}")
    started, rows = time.perf_counter(), []
    with ProcessPoolExecutor(2) as pool:
        jobs = [(params, tree, i, cutoff, cap) for i in range(len(split.parts))]
        for row in pool.map(_solve_part, *zip(*jobs, strict=True)):
            rows.append(row)
            print(f"  part {row[0]:3d} {split.parts[row[0]].label:40s} {row[1]:10s} "
                  f"bound {row[3]} nodes {row[4]:7d} {row[5]:7.1f} s wall {row[6]:7.1f} s cpu",
                  flush=True)  # fmt: skip
    wall = time.perf_counter() - started + grow
    lowers = [splitting.part_lower(r[1], r[3], cutoff, True) for r in rows]
    incumbent = min([cutoff + 1] + [r[2] for r in rows if r[2] is not None])
    proven = min(lowers) >= incumbent - 1e-6
    ref = direct_s["scip"]
    cpu = [r[6] for r in rows]
    print(f"split: {'proven' if proven else 'not proven'}: bound {min(lowers)} with incumbent "
          f"{incumbent}; wall {wall:.1f} s on 2 processes (probe, tree {grow:.1f} s)")  # fmt: skip
    print(f"in cpu seconds against direct SCIP {ref:.1f} s (HiGHS {direct_s['highs']:.1f} s): "
          f"largest part {max(cpu) / ref:.2f}x, sum of parts {sum(cpu) / ref:.2f}x, "
          f"wall on 2 dedicated workers {(makespan(cpu) + grow) / ref:.2f}x "
          f"(targets 0.2, 1.5, 0.6)")  # fmt: skip


def main() -> None:
    """Print the table (and the stored attempt with --catalog); assert known optima."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cap", type=float, default=120.0, help="seconds per solve or part")
    parser.add_argument("--catalog", help="read the 6x7x6 attempt from this catalog")
    parser.add_argument("--hard", action="store_true", help="the lookahead split of HARD")
    parser.add_argument("--leaves", type=int, default=16, help="leaves of --hard's tree")
    parser.add_argument("--hard-cap", type=float, default=900.0, help="seconds per solve")
    parser.add_argument("--hard-dims", help="another instance for --hard, e.g. 8,8")
    parser.add_argument("--hard-k", type=int, default=HARD["k"])
    parser.add_argument("--probe", type=float, default=10.0, help="--hard's probe seconds")
    args = parser.parse_args()
    if args.hard:
        dims = [int(d) for d in args.hard_dims.split(",")] if args.hard_dims else HARD["dims"]
        hard({"dims": dims, "k": args.hard_k}, args.leaves, args.hard_cap, args.probe)
        return
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
