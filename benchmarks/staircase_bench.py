"""Benchmark: the staircase of no-three-in-a-row boards, each proven with only the cuts
of the boards proven before it, then the target board with and without the new steps;
with `--k 5`, the staircase of five-in-a-row boxes up to 6×7×6.

    nice -n 19 .venv/bin/python benchmarks/staircase_bench.py --cap 1200
    nice -n 19 .venv/bin/python benchmarks/staircase_bench.py --boards 12x12 --cap 1800
    nice -n 19 .venv/bin/python benchmarks/staircase_bench.py --k 5 --cap 3600 --plain 120

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

`--k 5`: the 2-D boards a×b, 5 <= a <= b <= 7, as thin slabs, then the boxes of
`--boxes` in order (default 5×5×5 up to 6×6×7 = 6×7×6). A 1×a×b slab of a 3-D box holds
exactly the windows of the 2-D a×b board, so its cut is the 2-D optimum (a slab 2..4
thick holds those of 2..4 parallel boards and nothing more: it adds no cut). Each
slab's value is proven by SCIP on the plain 2-D model and, up to EXHAUSTIVE_MAX_CELLS
cells, by `hitting_set.exhaustive` (iterative deepening, no MIP). Each box is then
proven by SCIP with the slabs and the boxes proven before it as its only cuts; with
`--plain CAP`, plain SCIP and plain HiGHS (no cuts, no start) run first on the same box.
Every SCIP solve of the chain prints its dual bound and incumbent as they change (on
stderr, and to `--trace FILE` as JSON lines).
"""

import argparse
import json
import math
import sys
import time

from pyscipopt import SCIP_EVENTTYPE, Eventhdlr

from puzzlesweep.puzzles import hitting_set as hs
from puzzlesweep.puzzles import no_k_in_row
from puzzlesweep.solvers import Limits, highs, scip

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
    load = loadavg()
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


def loadavg() -> float:
    """The machine's load average over the last minute."""
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def append(record: dict, log: str | None) -> None:
    """Append `record` to the file `log` (None: nowhere) as one line of JSON."""
    if log:
        with open(log, "a") as out:
            out.write(json.dumps(record) + "\n")


def show(record: dict, log: str | None) -> None:
    """Print one result line; append it to `log` as JSON."""
    fmt = lambda v: "-" if v is None else f"{v:g}"  # noqa: E731
    print(
        f"  {record['board']:>6} {record['status']:>10} {fmt(record['objective']):>5} "
        f"{fmt(record['bound']):>5} {record['nodes']:>7} {record['seconds']:>8.1f} "
        f"{record['cpu_seconds']:>7.1f} {record['load']:>5.2f} {fmt(record['published']):>9}",
        flush=True,
    )
    append(record, log)


def default_boards() -> str:
    """Every a×b with 3 <= a <= b, b in 11..12 (not 12×12), and 10×10, by area."""
    boards = [(a, b) for b in (11, 12) for a in range(3, b + 1) if (a, b) != (12, 12)]
    return ",".join(f"{a}x{b}" for a, b in sorted([*boards, (10, 10)], key=lambda s: s[0] * s[1]))


#: The 2-D boards a×b, 5 <= a <= b <= 7, that fit as slabs in the boxes up to 6×6×7 (and
#: 7×7 for larger ones); exhaustive search for those whose proof is small.
SLABS = ((5, 5), (5, 6), (5, 7), (6, 6), (6, 7), (7, 7))
EXHAUSTIVE_MAX_CELLS = 49
BOXES = "5x5x5,5x5x6,5x5x7,5x6x6,5x6x7,6x6x6,6x6x7"
TRACE_EVERY = 120.0


class Trace(Eventhdlr):
    """Records (seconds, dual bound, incumbent) each time the incumbent or the rounded-up
    bound changes, and every TRACE_EVERY seconds."""

    def __init__(self, label: str, out):
        super().__init__()
        self.label, self.out, self.last = label, out, None
        self.started = self.written = time.perf_counter()

    def eventinit(self):
        self.model.catchEvent(SCIP_EVENTTYPE.NODESOLVED | SCIP_EVENTTYPE.BESTSOLFOUND, self)

    def eventexec(self, event):
        m = self.model
        bound, primal = m.getDualbound(), m.getPrimalbound()
        now = (math.ceil(bound - 1e-6), round(primal) if abs(primal) < 1e9 else None)
        if now != self.last or time.perf_counter() - self.written >= TRACE_EVERY:
            self.last, self.written = now, time.perf_counter()
            line = {
                "box": self.label,
                "t": round(time.perf_counter() - self.started, 1),
                "bound": round(bound, 3),
                "incumbent": now[1],
                "nodes": m.getNTotalNodes(),
            }
            print(f"    trace {json.dumps(line)}", file=sys.stderr, flush=True)
            if self.out:
                with open(self.out, "a") as f:
                    f.write(json.dumps(line) + "\n")


def traced_scip(model, cap: float, label: str, trace: str | None) -> dict:
    """SCIP on `model` (the options of `solvers.scip`, one thread) under `cap` seconds,
    with its bound logged by `Trace`; the figures of `scip.solve`."""
    started, cpu = time.perf_counter(), time.process_time()
    m, xs = scip.build_model(model, Limits(cap))
    scip.add_start(m, xs, model)
    m.includeEventhdlr(Trace(label, trace), "trace", "dual bound over time")
    m.optimize()
    status = scip._STATUS.get(m.getStatus(), "error")
    solution = None
    if m.getNSols() > 0 and status != "infeasible":
        best = m.getBestSol()
        solution = [m.getSolVal(best, x) for x in xs]
    bound = m.getDualbound()
    return {
        "status": status,
        "objective": round(m.getPrimalbound()) if solution else None,
        "bound": math.ceil(bound - 1e-6) if abs(bound) < 1e9 else None,
        "nodes": int(m.getNTotalNodes()),
        "seconds": round(time.perf_counter() - started, 1),
        "cpu_seconds": round(time.process_time() - cpu, 1),
        "solution": solution,
    }


def slab(a: int, b: int, cap: float) -> dict:
    """The 2-D a×b board, k = 5: SCIP on the plain model, and exhaustive search."""
    p = no_k_in_row.Params(dims=[a, b], k=5)
    record = traced_scip(no_k_in_row.model(p, cuts=False), cap, f"{a}x{b}", None)
    record.update(box=f"{a}x{b}", engine="scip", cuts=0, load=loadavg())
    record.pop("solution")
    if a * b <= EXHAUSTIVE_MAX_CELLS:
        started = time.process_time()
        value, removed = hs.exhaustive(no_k_in_row.problem((a, b), 5))
        assert no_k_in_row.verify(p, removed) == value
        record.update(exhaustive=value, exhaustive_cpu=round(time.process_time() - started, 1))
    return record


def box(dims: tuple, table: dict, cap: float, trace: str | None) -> dict:
    """SCIP on the box with the cuts of `table` (its own entry left out)."""
    p = no_k_in_row.Params(dims=list(dims), k=5)
    cuts = {key: h for key, h in table.items() if key != (5, dims)}
    label = "x".join(map(str, dims))
    record = traced_scip(no_k_in_row.model(p, cuts=cuts), cap, label, trace)
    solution = record.pop("solution")
    if solution is not None:
        assert no_k_in_row.verify(p, no_k_in_row.from_mip(p, solution)) == record["objective"]
    record.update(box=label, engine="scip", cuts=len(no_k_in_row.subbox_cuts(dims, 5, cuts)))
    record.update(load=loadavg())
    return record


def plain(dims: tuple, engine: str, cap: float) -> dict:
    """The plain model (no cuts, no start) of the box by `engine`, one thread."""
    p = no_k_in_row.Params(dims=list(dims), k=5)
    cpu = time.process_time()
    result = {"highs": highs, "scip": scip}[engine].solve(
        no_k_in_row.model(p, start=False, cuts=False), Limits(cap)
    )
    return {
        "box": "x".join(map(str, dims)),
        "engine": f"plain {engine}",
        "cuts": 0,
        "status": result.status,
        "objective": result.objective,
        "bound": result.bound,
        "nodes": result.nodes,
        "seconds": round(result.seconds, 1),
        "cpu_seconds": round(time.process_time() - cpu, 1),
        "load": loadavg(),
    }


def show_box(record: dict, log: str | None) -> None:
    """Print one line of the k = 5 chain; append it to `log` as JSON."""
    fmt = lambda v: "-" if v is None else f"{v:g}"  # noqa: E731
    extra = ""
    if "exhaustive" in record:
        extra = f"  exhaustive {fmt(record['exhaustive'])} ({record['exhaustive_cpu']} s)"
    print(
        f"  {record['box']:>6} {record['engine']:>12} {record['cuts']:>5} "
        f"{record['status']:>10} {fmt(record['objective']):>5} {fmt(record['bound']):>5} "
        f"{record['nodes']:>8} {record['seconds']:>8.1f} {record['cpu_seconds']:>7.1f} "
        f"{record['load']:>5.2f}{extra}",
        flush=True,
    )
    append(record, log)


def chain(boxes: str, cap: float, plain_cap: float, log, trace, base: bool = False) -> dict:
    """The slabs, then `boxes` in order; a box not proven stops the chain. With `base`,
    the chain also starts from the module's proven boxes (`no_k_in_row.FIVE_IN_ROW`) of
    fewer cells than the first of `boxes`. Returns the table of values proven or taken
    ({(5, sorted sides): optimum})."""
    print("     box       engine  cuts     status   obj bound    nodes   wall s   cpu s  load")
    first = math.prod(int(v) for v in boxes.split(",")[0].split("x"))
    table = {
        (5, shape): h
        for shape, h in no_k_in_row.FIVE_IN_ROW.items()
        if base and shape[0] > 1 and math.prod(shape) < first
    }
    for a, b in SLABS:
        record = slab(a, b, cap)
        show_box(record, log)
        if record["status"] != "optimal":
            print(f"  {a}x{b} not proven: the chain stops here")
            return table
        assert record.get("exhaustive", record["objective"]) == record["objective"]
        table[5, (1, a, b)] = record["objective"]
    for text in filter(None, boxes.split(",")):
        dims = tuple(sorted(int(v) for v in text.split("x")))
        if plain_cap:
            for engine in ("scip", "highs"):
                show_box(plain(dims, engine, plain_cap), log)
        record = box(dims, table, cap, trace)
        show_box(record, log)
        if record["status"] != "optimal":
            print(f"  {text} not proven (bound {record['bound']}): the chain stops here")
            return table
        table[5, dims] = record["objective"]
    return table


def main(argv: list[str] | None = None) -> None:
    """Parse the arguments, run the chain, then the target with and without it."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--boards", default=default_boards(), help="AxB,... in order")
    parser.add_argument("--target", default="", help="AxB solved before/after the chain")
    parser.add_argument("--cap", type=float, default=1200.0, help="seconds per solve")
    parser.add_argument("--json", help="append one JSON object per solve to this file")
    parser.add_argument("--k", type=int, default=3, choices=(3, 5), help="run length")
    parser.add_argument("--boxes", default=BOXES, help="k = 5: AxBxC,... in order")
    parser.add_argument("--plain", type=float, default=0, help="k = 5: plain solves' cap")
    parser.add_argument("--trace", help="k = 5: append the bounds over time to this file")
    parser.add_argument(
        "--base", action="store_true", help="k = 5: start from the module's smaller boxes"
    )
    args = parser.parse_args(argv)
    if args.k == 5:
        table = chain(args.boxes, args.cap, args.plain, args.json, args.trace, args.base)
        print("  proven:", ", ".join(f"{'x'.join(map(str, s))} {h}" for (_, s), h in table.items()))
        return
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
