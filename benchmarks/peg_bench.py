"""Benchmark: triangular peg solitaire on the compiled engine, fewest moves and solvability.

    .venv/bin/python benchmarks/peg_bench.py                          # T_4..T_7, all starts
    nice .venv/bin/python benchmarks/peg_bench.py --sides 8 --memory 12 --limit 900
    nice .venv/bin/python benchmarks/peg_bench.py --sides 9 --memory 12 --limit 1140
    nice .venv/bin/python benchmarks/peg_bench.py --solve 8 --limit 600   # every start
    nice .venv/bin/python benchmarks/peg_bench.py --sharded 8   # 1 worker vs 2 workers
    nice -n 10 .venv/bin/python benchmarks/peg_bench.py --beams 7 8   # layers alone/beams
    nice -n 10 .venv/bin/python benchmarks/peg_bench.py --wall-check 9 --limit 120

Fewest moves: OEIS A127500's question, the fewest moves (a move = consecutive jumps by
one peg) over every one-vacancy start and every one-peg finish of T_n, in one search
(every start a root, every one-peg position a goal); known values T_4..T_10 = 5, 9, 9,
12, 13, 16, 18 (G. I. Bell, "Solving Triangular Peg Solitaire", JIS 11 (2008) 08.4.8).
Solvability (`--solve N`): `solve` from one start hole of each symmetry class of T_N,
the last peg anywhere and on the start hole.

Sharded (`--sharded N`): the same search sharded by key over Dask workers
(`flows.shard`, `solvers.frontier.sharded`), 2 shards, on a LocalCluster of 1 worker
and then of 2, side by side: wall time, their ratio, peak RSS of each worker process
(ru_maxrss, its imports included) and the layers; the run folders are temporary.

Sweep (`--sweep N`): every start hole's own fewest moves, the last peg anywhere, as a
user runs it: `puzzlesweep.sweep` of the spec `sweeps/peg_t8_min_moves.toml` (side N,
`start = "all"`, `question = ["min_moves"]`, 900 s per instance) on 2 local workers at the
engine's default memory limit (4 GiB), into a temporary catalog; prints each start
class's row (status, fewest moves, bound, seconds) and the sweep's wall time, against
the 15-minute target of issue 23.

Beams (`--beams N...`): the all-starts search of T_N with the layers alone (the engine
before) and with each target's beams first (`solvers.frontier.beam`), side by side: per
target the positions stored (beams and layers), the children made, the share the bound
pruned, the seconds; then the answer, wall and CPU seconds.

Wall (`--wall-check N --limit S`): `puzzlesweep search peg_solitaire side=N start=all
--wall S` as a user runs it, against a Prefect API started first; its line and how long
the command took, against S + 10 s.

Each run is a child process under an address-space limit of `--memory` GiB (RLIMIT_AS;
the engine's own limit is 1 GiB less, so it stops with a row, not a crash), so its
peak RSS (ru_maxrss) is its own. The engine logs each layer to stderr. Every solution
is replayed by the verifier. Not part of the test suite; the figures are in
benchmarks/README.md, with the figures of the engines this one replaced.
"""

import argparse
import functools
import json
import logging
import os
import resource
import subprocess
import sys
import tempfile
import time

from puzzlesweep.flows.api import prefect_api
from puzzlesweep.flows.cluster import dask_cluster
from puzzlesweep.flows.shard import sharded_search
from puzzlesweep.puzzles import peg_solitaire as peg
from puzzlesweep.solvers import Limits, frontier
from puzzlesweep.solvers.frontier import beam
from puzzlesweep.solvers.frontier.sharded import ShardedRun

KNOWN = {4: 5, 5: 9, 6: 9, 7: 12, 8: 13, 9: 16, 10: 18}  # OEIS A127500, Bell (2008)


def fewest(side: int, limit: float, memory: int) -> dict:
    """The all-starts fewest-moves search on T_side, its witness replayed."""
    problem = peg.problem(side, list(range(peg.holes(side))), None, "min_moves", memory)
    result = frontier.solve(problem, Limits(limit))
    row = {
        "question": f"T_{side} fewest moves, all starts",
        "status": result.status,
        "objective": result.objective,
        "bound": result.bound,
        "seconds": result.seconds,
        "nodes": result.nodes,
        "message": result.message,
        "layers": {k: result.extra.get(k) for k in ("forward", "backward")},
    }
    if result.status == "optimal":
        path = tuple(result.solution)
        p = peg.Params(side=side, start=path[0][2] + 1, question="min_moves")
        row["verified"] = peg.verify(p, path) == result.objective
        row["moves"] = peg.details(p, path)["moves"]
    return row


def solvable(side: int, limit: float, memory: int) -> dict:
    """`solve` from one start of each class, finish anywhere and on the start hole."""
    classes = sorted({min(g[h] for g in peg.symmetries(side)) for h in range(peg.holes(side))})
    answers, seconds = {}, 0.0
    for start in classes:
        for finish in ("any", "start"):
            p = peg.Params(side=side, start=start + 1, finish=finish, question="solve")
            problem = peg.problem(side, [start], p.finish_hole, "solve", memory)
            result = frontier.solve(problem, Limits(limit))
            seconds += result.seconds
            answer = result.status
            if result.status == "optimal":
                peg.verify(p, peg.from_search(p, result.solution))
                answer = "solved"
            elif result.extra.get("position_class"):
                answer += " (position class)"
            answers[f"{start + 1}/{finish}"] = f"{answer}, {result.seconds:.1f} s"
            print(
                f"  start {start + 1}, finish {finish}: {answers[f'{start + 1}/{finish}']}",
                file=sys.stderr,
                flush=True,
            )
    return {
        "question": f"T_{side} solve, every start class",
        "answers": answers,
        "seconds": seconds,
        "status": "done",
    }


def sharded(side: int, workers: int, memory: int) -> dict:
    """The sharded all-starts search of T_side (2 shards, parts of at most `memory`
    bytes) on a new LocalCluster of `workers` workers, its answer replayed."""
    problem = peg.problem(side, list(range(peg.holes(side))), None, "min_moves")
    verify = functools.partial(peg.verify_any_start, side)

    def on_layer(step, manifest):
        print(
            f"    target {step.target} {step.side}{step.d + 1}: {manifest['keys']:,} keys"
            f" ({time.perf_counter() - started:.0f} s)",
            file=sys.stderr,
            flush=True,
        )

    with tempfile.TemporaryDirectory(prefix="peg-shards-") as folder:
        with dask_cluster(None, workers, None) as (address, _, _):
            started = time.perf_counter()
            run = ShardedRun(problem, folder, 2, memory)
            done = sharded_search(run, address, verify, on_layer)
            done["seconds"] = time.perf_counter() - started
    return done


def compare(side: int, memory: int) -> None:
    """`sharded` on 1 worker and on 2, printed side by side with the time ratio."""
    rows = {}
    with prefect_api():
        for workers in (1, 2):
            print(f"T_{side} sharded, {workers} worker(s):", flush=True)
            rows[workers] = row = sharded(side, workers, memory)
            assert row["objective"] == KNOWN[side], row
            peaks = ", ".join(f"{b / 2**20:.0f}" for b in sorted(row["peak_rss"].values()))
            print(
                f"  {row['objective']} moves = A127500, verified; {row['seconds']:.1f} s, "
                f"{row['layers']} layers, peak RSS per worker {peaks} MiB",
                flush=True,
            )
    ratio = rows[1]["seconds"] / rows[2]["seconds"]
    print(f"T_{side}: 1 worker / 2 workers wall time = {ratio:.2f}", flush=True)


def sweep_starts(side: int) -> None:
    """`sweep` of every start of T_side (the spec of `sweeps/peg_t8_min_moves.toml` with
    `side` set), its rows printed per start class, the wall time last."""
    import tomllib
    from pathlib import Path

    import puzzlesweep
    from puzzlesweep.catalog import query

    spec = tomllib.loads((Path(__file__).parents[1] / "sweeps/peg_t8_min_moves.toml").read_text())
    spec["study"][0]["grid"]["side"] = side
    with tempfile.TemporaryDirectory(prefix="peg-sweep-") as catalog:
        started = time.perf_counter()
        report = puzzlesweep.sweep(spec, catalog, workers=2)
        wall = time.perf_counter() - started
        _, rows = query(
            catalog,
            "SELECT start, status, objective, bound, solve_seconds, error FROM results"
            " WHERE NOT equivalent ORDER BY start",
        )
    for start, status, objective, bound, seconds, error in rows:
        print(
            f"  start {start}: {status}, {objective} moves, bound {bound}, {seconds:.1f} s"
            + (f" ({error})" if error else ""),
            flush=True,
        )
    proven = all(row[1] == "optimal" for row in rows)
    print(
        f"T_{side}, every start: {report['counts']}, all proven {proven}; "
        f"sweep wall time {wall:.0f} s (target 900 s)",
        flush=True,
    )


def beams(side: int, limit: float, memory: int) -> None:
    """The all-starts fewest-moves search of T_side with the layers alone (the engine
    before, `beam.WIDTHS` emptied) and with each target's beams first, side by side: per
    target the positions stored (the beams' kept positions plus both sides' layers), the
    children made, the share the bound pruned, and the seconds; then the answer, wall and
    CPU seconds (this process), positions expanded and the most bytes of layers held."""
    problem = peg.problem(side, list(range(peg.holes(side))), None, "min_moves", memory)
    frontier.warm()
    for name, widths in (("layers alone (before)", ()), ("beams, then layers", beam.WIDTHS)):
        cpu, saved = time.process_time(), beam.WIDTHS
        beam.WIDTHS = widths
        try:
            result = frontier.solve(problem, Limits(limit))
        finally:
            beam.WIDTHS = saved
        cpu = time.process_time() - cpu
        peak = result.extra.get("peak_bytes", 0)
        print(f"T_{side}, {name}:", flush=True)
        for target, row in sorted(result.extra.get("attempts", {}).items()):
            layers = sum(row.get("forward", [])) + sum(row.get("backward", []))
            made, kept = row.get("made", 0), row.get("kept", 0)
            pruned = 1 - kept / made if made else 0.0
            print(
                f"  target {target}: {row.get('beam', 0):,} + {layers:,} positions stored "
                f"(beams + layers), {made:,} children made, {pruned:.1%} pruned by the bound, "
                f"{row.get('seconds', 0):.1f} s",
                flush=True,
            )
        verified = None
        if result.status == "optimal":
            verified = peg.verify_any_start(side, tuple(result.solution)) == result.objective
        print(
            f"  {result.status}: {result.objective} moves (A127500: {KNOWN.get(side)}), bound "
            f"{result.bound}, verified {verified}; {result.seconds:.1f} s wall, {cpu:.1f} s CPU, "
            f"{result.nodes:,} positions expanded, {peak / 2**20:.0f} MiB of layers at most",
            flush=True,
        )


def wall_check(side: int, wall: float) -> None:
    """`puzzlesweep search peg_solitaire side=SIDE start=all --wall WALL` as a user runs
    it (a LocalCluster of 2 workers, a temporary folder and catalog), against a Prefect
    API started first (`flows.api.TemporaryAPI`, as a configured one: under load the
    temporary API a bare command starts took minutes); prints the command's line and
    its wall time against WALL + 10 s."""
    from pathlib import Path

    from puzzlesweep.flows.api import TemporaryAPI

    cli = str(Path(sys.executable).with_name("puzzlesweep"))
    with TemporaryAPI() as api, tempfile.TemporaryDirectory(prefix="peg-wall-") as folder:
        command = [cli, "search", "peg_solitaire", f"side={side}", "start=all"]
        command += ["--folder", f"{folder}/run", "--catalog", f"{folder}/catalog"]
        command += ["--wall", str(wall), "--workers", "2"]
        env = {**os.environ, "PREFECT_API_URL": api.url()}
        started = time.perf_counter()
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - started
    print(done.stdout.strip() or done.stderr.strip()[-2000:], flush=True)
    print(
        f"T_{side} --wall {wall:g}: exit {done.returncode}, the command took {seconds:.1f} s "
        f"(target {wall + 10:g} s)",
        flush=True,
    )


def child(kind: str, side: int, limit: float, memory: int) -> None:
    """Run one measurement under the address-space limit and print it as JSON."""
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    # force: importing the flows installs Prefect's handler on the root logger, and
    # without it basicConfig would do nothing and the engine's INFO layer log be dropped
    logging.basicConfig(level=logging.INFO, format="  %(message)s", stream=sys.stderr, force=True)
    engine = memory - (1 << 30)
    try:
        row = fewest(side, limit, engine) if kind == "fewest" else solvable(side, limit, engine)
    except MemoryError:
        row = {"status": "memory", "seconds": None}
    row["rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(row))


def show(row: dict, side: int) -> str:
    """One line per run: the answer, time and peak RSS."""
    memory = f"peak RSS {row['rss_mib']:.0f} MiB"
    if "answers" in row:
        return f"{row['seconds']:.1f} s in all, {memory}"
    if row["status"] == "optimal":
        known = "= A127500" if row["objective"] == KNOWN.get(side) else "!= A127500"
        return (
            f"{row['objective']:g} moves {known}, proven, verified {row.get('verified')}; "
            f"{row['seconds']:.1f} s, {row['nodes']:,} positions expanded, {memory}; "
            f"layers {row['layers']}"
        )
    return (
        f"{row['status']} ({row.get('message')}) after {row['seconds']:.1f} s: "
        f"incumbent {row.get('objective')}, bound {row.get('bound')}; {memory}; "
        f"layers {row.get('layers')}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sides", type=int, nargs="+", default=[4, 5, 6, 7])
    parser.add_argument("--solve", type=int, nargs="*", default=[], help="sides for solve")
    parser.add_argument("--limit", type=float, default=900.0, help="seconds per run")
    parser.add_argument("--memory", type=float, default=12.0, help="GiB per run")
    parser.add_argument("--sharded", type=int, help="side: the sharded search, 1 vs 2 workers")
    parser.add_argument("--sweep", type=int, help="side: every start's fewest moves, a sweep")
    parser.add_argument("--beams", type=int, nargs="*", default=[], help="sides: layers/beams")
    parser.add_argument("--wall-check", type=int, help="side: search --wall LIMIT, timed")
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    memory = int(args.memory * 2**30)
    if args.sharded:  # parts of at most 4 GiB: each worker stays under 6 GB
        return compare(args.sharded, min(memory, frontier.MEMORY))
    if args.sweep:
        return sweep_starts(args.sweep)
    if args.wall_check:
        return wall_check(args.wall_check, args.limit)
    if args.beams:
        logging.basicConfig(level=logging.WARNING, force=True)
        for side in args.beams:
            beams(side, args.limit, memory)
        return None
    if args.one:
        return child(args.one[0], int(args.one[1]), args.limit, memory)
    runs = [("fewest", s) for s in args.sides if not args.solve] + [
        ("solve", s) for s in args.solve
    ]
    for kind, side in runs:
        print(f"T_{side} {kind} (known fewest moves {KNOWN.get(side)}):", flush=True)
        done = subprocess.run(
            [
                sys.executable,
                __file__,
                "--one",
                kind,
                str(side),
                "--limit",
                str(args.limit),
                "--memory",
                str(args.memory),
            ],
            stdout=subprocess.PIPE,
            text=True,
            check=True,
        )
        row = json.loads(done.stdout.strip().splitlines()[-1])
        if row["status"] == "optimal":
            assert row["objective"] == KNOWN[side] and row["verified"], row
        print(f"  {show(row, side)}", flush=True)
        if "answers" in row:
            for name, answer in row["answers"].items():
                print(f"    start/finish {name}: {answer}", flush=True)


if __name__ == "__main__":
    main()
