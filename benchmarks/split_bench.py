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

With `--hard --nodes N`, the tree is the ramp-up's instead (`--split nodes:N`,
`solvers.ramp`): SCIP on the whole for N nodes, symmetry handling off, its open nodes
as leaves; no probe, the ramp-up's incumbent − 1 is the first cutoff. The parts run
with SCIP's defaults; each part is submitted with the best incumbent known then − 1
(the ramp-up's or a finished part's, as the prove flow does). `--hard-family` and
`--hard-params` (JSON) pick another instance (knights domination 17×17:
`--hard-family domination --hard-params '{"piece": "knight", "rows": 17, "cols": 17}'`),
`--highs-cap` caps the direct HiGHS solve alone.

With `--lex` (`--split lex:nodes:N`), the ramp-up and every part solve the model with the
lexicographic-leader rows of the family's symmetries and SCIP's own symmetry handling
off (`solvers.symmetry`). `--directs` names the direct solves to run (highs, scip: the
family's model with SCIP's defaults; scip+lex: the model with the rows); the ratios
are taken against direct SCIP, or against `--reference` CPU seconds when it is not run.
`--moves M` starts every solve, direct or part, from M moves of the family's local
search (no_k_in_row), so the ramp-up's cutoff and the direct solve's start are one.

Not part of the test suite.
"""

import argparse
import json
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

from puzzlesweep import puzzles
from puzzlesweep.proof import Proof, best_row, build, solve_one, stored
from puzzlesweep.solvers import Limits, highs, lookahead, ramp, scip, symmetry
from puzzlesweep.solvers import split as splitting
from puzzlesweep.solvers.mip import has_integral_objective

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
    integral = has_integral_objective(model)
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


def hard_model(family: str, params: dict, lex: bool = False, moves: int = 0):
    """The model of the `--hard` instance: the family's, with the start of `moves`
    local-search moves (no_k_in_row only; 0: the family's default start) and with
    `lex`, the leader rows of its symmetries (`--split lex:...`, `solvers.symmetry`)."""
    module = puzzles.get(family)
    p = module.Params(**params)
    model = module.model(p, moves=moves) if moves else module.model(p)
    return symmetry.with_leader_rows(model, module.symmetries(p)) if lex else model


def _solve_part(family: str, params: dict, shape: tuple, text: str, index: int, cutoff, cap):
    """(index, status, objective, bound, nodes, seconds, cpu seconds) of one tree part
    solved by SCIP (in a worker process: the model is rebuilt there, as a Dask worker
    does; `shape`: `hard_model`'s (lex, moves))."""
    model = hard_model(family, params, *shape)
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


def _directs(runs: list, name: str, caps: dict) -> dict:
    """Print each (label, engine, model) of `runs` solved whole (`caps`: engine name →
    seconds, 0 skips it); returns label → CPU seconds."""
    cpu_of = {}
    for label, engine, model in runs:
        if not caps[engine.__name__.rsplit(".", 1)[-1]]:
            continue
        started, cpu = time.perf_counter(), time.process_time()
        r = engine.solve(model, Limits(caps[engine.__name__.rsplit(".", 1)[-1]]))
        cpu_of[label] = time.process_time() - cpu
        print(f"{name} direct {label:10s} {text(r.status, r.objective, r.bound):>16s} "
              f"nodes {r.nodes:8d} {time.perf_counter() - started:8.1f} s wall "
              f"{cpu_of[label]:8.1f} s cpu", flush=True)  # fmt: skip
    return cpu_of


def _lookahead_tree(model, leaves: int, probe_seconds: float) -> tuple[str, float, float]:
    """(tree, CPU seconds, cutoff) of a probe (SCIP on the whole for `probe_seconds`, as
    `prove --probe` does) and the lookahead tree grown under its incumbent − 1."""
    started = time.process_time()
    probe = scip.solve(model, Limits(probe_seconds))
    model.start = probe.solution or model.start
    tree = lookahead.resolve(model, f"lookahead:{leaves}")
    grow = time.process_time() - started
    cutoff = round(sum(c * x for c, x in zip(model.costs, model.start, strict=True))) - 1
    print(f"probe {probe_seconds:.0f} s: {text(probe.status, probe.objective, probe.bound)}")
    print(f"tree of {leaves} leaves grown in {grow:.1f} s cpu: --split {tree}")
    return tree, grow, cutoff


def _ramp_tree(model, nodes: int) -> tuple[str, float, float | None]:
    """(tree, CPU seconds, cutoff) of a ramp-up of `nodes` nodes (`--split nodes:N`); the
    cutoff is its incumbent − 1."""
    started = time.process_time()
    found = ramp.ramp_up(model, nodes)
    grow = time.process_time() - started
    print(f"ramp-up {found.nodes} nodes ({found.status}): "
          f"{text('-', found.objective, found.bound)}, {found.open} open nodes, "
          f"{found.closed} closed leaves, {found.seconds:.1f} s wall {grow:.1f} s cpu")  # fmt: skip
    print(f"--split {found.tree}")
    return found.tree, grow, ramp.cutoff(found)


def _parts(family: str, params: dict, shape, tree: str, split, cutoff, cap) -> list[tuple]:
    """Solve the parts of `tree` in preorder on 2 worker processes, each submitted with
    the best incumbent known then − 1 as its cutoff (the tree's own cutoff at first, as
    the prove flow does); prints each; returns the rows of `_solve_part` in part order,
    each with its cutoff appended."""
    rows, pending, best = {}, {}, cutoff
    todo = list(range(len(split.parts)))
    with ProcessPoolExecutor(2) as pool:
        while todo or pending:
            while todo and len(pending) < 2:
                index = todo.pop(0)
                job = pool.submit(_solve_part, family, params, shape, tree, index, best, cap)
                pending[job] = best
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for job in done:
                row = (*job.result(), pending.pop(job))
                rows[row[0]] = row
                if row[2] is not None and (best is None or row[2] - 1 < best):
                    best = round(row[2]) - 1.0
                print(f"  part {row[0]:3d} {split.parts[row[0]].label[:40]:40s} {row[1]:10s} "
                      f"cutoff {row[7]} bound {row[3]} nodes {row[4]:7d} {row[5]:7.1f} s wall "
                      f"{row[6]:7.1f} s cpu", flush=True)  # fmt: skip
    return [rows[i] for i in sorted(rows)]


def hard(family: str, params: dict, tree_of, caps: dict, shape=(False, 0), directs=()) -> None:
    """Print the direct solves of `params` named in `directs` (highs, scip: the family's
    model; scip+lex: SCIP on the model with leader rows, its own symmetry handling off),
    the tree `tree_of` grows (model → (tree, CPU seconds, cutoff)) on `hard_model(*shape)`
    and its parts on 2 worker processes, with the ratios of the module docstring against
    direct SCIP (`caps["reference"]` CPU seconds when it is not run here)."""
    plain = hard_model(family, params, False, shape[1])
    model = hard_model(family, params, *shape)
    name = f"{family} " + " ".join(f"{k}={v}" for k, v in params.items())
    runs = [("highs", highs, plain), ("scip", scip, plain), ("scip+lex", scip, model)]
    direct_s = _directs([r for r in runs if r[0] in directs], name, caps)
    tree, grow, cutoff = tree_of(model)
    split, _ = lookahead.tree_split(tree, model.num_cols)
    started = time.perf_counter()
    rows = _parts(family, params, shape, tree, split, cutoff, caps["parts"])
    wall = time.perf_counter() - started + grow
    lowers = [splitting.part_lower(r[1], r[3], r[7], True) for r in rows]
    found = [r[2] for r in rows if r[2] is not None] + ([] if cutoff is None else [cutoff + 1])
    incumbent = min(found, default=None)
    proven = incumbent is not None and min(lowers) >= incumbent - 1e-6
    ref, cpu = direct_s.get("scip", caps.get("reference")), [r[6] for r in rows]
    others = ", ".join(f"{k} {v:.1f} s" for k, v in direct_s.items())
    print(f"split: {'proven' if proven else 'not proven'}: bound {min(lowers)} with incumbent "
          f"{incumbent}; wall {wall:.1f} s on 2 processes (tree {grow:.1f} s); parts "
          f"{len(cpu)}, {sum(cpu):.1f} s cpu in all, largest {max(cpu):.1f} s")  # fmt: skip
    if ref:
        print(f"in cpu seconds against direct SCIP {ref:.1f} s ({others}): "
              f"largest part {max(cpu) / ref:.2f}x, sum of parts {sum(cpu) / ref:.2f}x "
              f"(with the tree {(sum(cpu) + grow) / ref:.2f}x), wall on 2 dedicated workers "
              f"{(makespan(cpu) + grow) / ref:.2f}x (targets 0.2, 1.5, 0.6)")  # fmt: skip


def main() -> None:
    """Print the table (and the stored attempt with --catalog); assert known optima."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cap", type=float, default=120.0, help="seconds per solve or part")
    parser.add_argument("--catalog", help="read the 6x7x6 attempt from this catalog")
    parser.add_argument("--hard", action="store_true", help="the solver's split of HARD")
    parser.add_argument("--leaves", type=int, default=16, help="leaves of --hard's tree")
    parser.add_argument("--nodes", type=int, help="--hard: the ramp-up's tree of N nodes")
    parser.add_argument("--hard-cap", type=float, default=900.0, help="seconds per solve")
    parser.add_argument("--highs-cap", type=float, help="direct HiGHS seconds [--hard-cap]")
    parser.add_argument("--hard-family", default="no_k_in_row")
    parser.add_argument("--hard-params", help='JSON, e.g. {"dims": [12, 12], "k": 3}')
    parser.add_argument("--hard-dims", help="another no_k_in_row board for --hard, e.g. 8,8")
    parser.add_argument("--hard-k", type=int, default=HARD["k"])
    parser.add_argument("--probe", type=float, default=10.0, help="--hard's probe seconds")
    parser.add_argument("--lex", action="store_true", help="--hard: leader rows in the model")
    parser.add_argument("--moves", type=int, default=0, help="--hard: local-search start")
    parser.add_argument("--directs", default="highs,scip", help="--hard: highs,scip,scip+lex")
    parser.add_argument("--reference", type=float, help="direct SCIP cpu s, when not run")
    args = parser.parse_args()
    if args.hard:
        dims = [int(d) for d in args.hard_dims.split(",")] if args.hard_dims else HARD["dims"]
        params = (
            json.loads(args.hard_params) if args.hard_params else {"dims": dims, "k": args.hard_k}
        )
        caps = {
            "highs": args.highs_cap or args.hard_cap,
            "scip": args.hard_cap,
            "parts": args.hard_cap,
        }
        if args.nodes:
            tree_of = lambda model: _ramp_tree(model, args.nodes)  # noqa: E731
        else:
            tree_of = lambda model: _lookahead_tree(model, args.leaves, args.probe)  # noqa: E731
        caps["reference"] = args.reference
        directs = args.directs.split(",") if args.directs else ()
        hard(args.hard_family, params, tree_of, caps, (args.lex, args.moves), directs)
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
