"""Benchmark: the hard MIP instances, plain model against each improvement, in one run.

    .venv/bin/python benchmarks/mip_bench.py                    # knights 12..14, 6×7×6, 3^3
    .venv/bin/python benchmarks/mip_bench.py --only nok --cap 60
    .venv/bin/python benchmarks/mip_bench.py --only knights --knights 12..15 --cap 300
    .venv/bin/python benchmarks/mip_bench.py --only nok --dims 10,10 --k 3 --variants sub-box
    .venv/bin/python benchmarks/mip_bench.py --only targets --cap 600 [--variants 10,knight]

For each instance and each variant the script builds the family's model (timing the
build, which includes any starting incumbent), solves it with HiGHS under `--cap`
seconds (one thread, the production `highs.solve`), checks the incumbent with the
family's verifier, and prints status, incumbent, dual bound, nodes, seconds and the
ratio of seconds to the plain model's (time to a proven optimum; at the cap the bound
and incumbent are the figures to compare). Variants:

- plain: the model with no start and no symmetry rows, HiGHS defaults (which include
  HiGHS's own symmetry detection, `mip_detect_symmetry`, on by default);
- no HiGHS symmetry: plain with `mip_detect_symmetry = False`;
- symmetry rows: the family's `symmetry_rows` added (half-counts under the board's
  reflections, the diagonal under a swap of equal sides);
- periodic start (no_k_in_row, the default model): the best repaired periodic pattern
  handed to HiGHS; searched start: the same improved by `SEARCH_MOVES` moves of local
  search (its seconds are in "build s");
- greedy start (domination): the greedy cover handed to HiGHS; searched start: the
  greedy cover improved by `SEARCH_MOVES` moves of `hitting_set.improve` (with the
  region cuts, the default model from 14×14);
- SCIP symmetry 1 / 2 (knights, default model): SCIP's symmetry handling restricted to
  orbitopes and symresacks (1) or to orbital reduction (2) instead of its default 7;
- optimal start (knights): plain again, started from the plain run's proven optimum,
  the most any starting incumbent can give.

Not part of the test suite; the figures and how to read them are in benchmarks/README.md.
"""

import argparse
import json
import time

from puzzlesweep.core import make_params
from puzzlesweep.puzzles import domination, monochromatic_lines, no_k_in_row
from puzzlesweep.solvers import Limits, engines, highs

NO_SYMMETRY = {"mip_detect_symmetry": False}
NO_SCIP_SYMMETRY = {"misc/usesymmetry": 0}
#: Every engine of the table that solves a MIP (`solvers.engines`): the auto choice is
#: measured among them.
ENGINES = {name: engines.module(name, "optimum") for name in engines.with_capability("optimum")}


def knights_variants(n: int):
    """(label, family module, params, model builder, engines) for the n×n knights."""
    p = make_params(domination.Params, {"piece": "knight", "rows": n, "cols": n})
    build = domination.model
    return [
        ("plain", domination, p, lambda: build(p, regions=False), BOTH),
        (
            "no HiGHS symmetry",
            domination,
            p,
            lambda: _with(build(p, regions=False), NO_SYMMETRY),
            ("highs",),
        ),
        (
            "no SCIP symmetry",
            domination,
            p,
            lambda: _scip(build(p, regions=False), NO_SCIP_SYMMETRY),
            ("scip",),
        ),
        *[
            (f"SCIP symmetry {mode}", domination, p, lambda m=mode: _scip(build(p), m), ("scip",))
            for mode in (1, 2)
        ],
        ("searched start", domination, p, lambda: _searched(p, build(p)), BOTH),
        ("symmetry rows", domination, p, lambda: build(p, symmetry=True, regions=False), BOTH),
        ("region cuts", domination, p, lambda: build(p, regions=True), BOTH),
        ("greedy start", domination, p, lambda: build(p, start=True, regions=False), BOTH),
        ("optimal start", domination, p, None, BOTH),  # filled from the plain run
    ]


def nok_variants(dims: list[int], k: int):
    """(label, family module, params, model builder, engines) for no-k-in-a-row."""
    p = make_params(no_k_in_row.Params, {"dims": dims, "k": k})
    build = no_k_in_row.model
    moves = no_k_in_row.SEARCH_MOVES
    return [
        (
            "plain (no cuts, no start)",
            no_k_in_row,
            p,
            lambda: build(p, start=False, cuts=False),
            BOTH,
        ),
        ("sub-box cuts", no_k_in_row, p, lambda: build(p, start=False), BOTH),
        (
            "cuts, no SCIP symmetry",
            no_k_in_row,
            p,
            lambda: _scip(build(p, start=False), NO_SCIP_SYMMETRY),
            ("scip",),
        ),
        (
            "cuts + symmetry rows",
            no_k_in_row,
            p,
            lambda: build(p, start=False, symmetry=True),
            BOTH,
        ),
        ("cuts + periodic start", no_k_in_row, p, lambda: build(p), BOTH),
        ("cuts + searched start", no_k_in_row, p, lambda: build(p, moves=moves), BOTH),
    ]


def lines_variants():
    """(label, family module, params, model builder, engines) for the seed cube 3^3."""
    p = make_params(monochromatic_lines.Params, {"n": 3, "d": 3, "counts": [14, 13]})
    build = monochromatic_lines.model
    return [
        ("plain", monochromatic_lines, p, lambda: build(p), BOTH),
        (
            "no HiGHS symmetry",
            monochromatic_lines,
            p,
            lambda: _with(build(p), NO_SYMMETRY),
            ("highs",),
        ),
        (
            "no SCIP symmetry",
            monochromatic_lines,
            p,
            lambda: _scip(build(p), NO_SCIP_SYMMETRY),
            ("scip",),
        ),
    ]


#: The instances of the `auto` table: the production model of each, both engines.
AUTO_INSTANCES = [
    *[("domination", {"piece": "knight", "rows": n, "cols": n}) for n in (6, 8, 10, 11, 12, 13)],
    ("domination", {"piece": "knight", "rows": 8, "cols": 13}),
    *[("domination", {"piece": "queen", "rows": n, "cols": n}) for n in (6, 8, 10)],
    ("domination", {"piece": "king", "rows": 12, "cols": 12}),
    ("domination", {"piece": "bishop", "rows": 10, "cols": 10}),
    ("domination", {"piece": "knight", "rows": 10, "cols": 10, "variant": "total"}),
    ("domination", {"piece": "knight", "rows": 10, "cols": 10, "variant": "independent"}),
    *[("no_k_in_row", {"dims": [n, n], "k": 3}) for n in (5, 6, 7, 8, 9)],
    ("no_k_in_row", {"dims": [6, 7], "k": 5}),
    ("no_k_in_row", {"dims": [13, 17], "k": 5}),
    ("no_k_in_row", {"dims": [5, 5, 5], "k": 5}),
    ("no_k_in_row", {"dims": [4, 4, 4], "k": 3}),
    ("monochromatic_lines", {"n": 3, "d": 2, "counts": [5, 4]}),
    ("monochromatic_lines", {"n": 3, "d": 3, "counts": [14, 13]}),
    ("monochromatic_lines", {"n": 4, "d": 2, "counts": [8, 8]}),
    ("monochromatic_lines", {"n": 4, "d": 3, "counts": [32, 32]}),
    ("monochromatic_lines", {"n": 3, "d": 3, "counts": [9, 9, 9]}),
]


def auto_table(cap: float, log) -> None:
    """Solve every AUTO_INSTANCES entry's production model with both engines in turn and
    print the faster (the one proven, else the better bound) beside `auto`'s choice."""
    from puzzlesweep import puzzles

    print(f"\nauto table (cap {cap:g} s): production models, one thread each")
    print(f"  {'instance':<44} {'highs':>16} {'scip':>16}  faster  auto")
    for name, raw in AUTO_INSTANCES:
        family = puzzles.get(name)
        p = family.canonical(make_params(family.Params, raw))
        results = {e: ENGINES[e].solve(family.model(p), Limits(cap)) for e in ENGINES}
        num = lambda v: "-" if v is None else f"{v:g}"  # noqa: E731
        show = {
            e: f"{r.status[:3]} {num(r.objective)}/{num(r.bound)} {r.seconds:.2f}s"
            for e, r in results.items()
        }
        faster = min(ENGINES, key=lambda e, r=results: _rank(r[e]))
        label = f"{name} " + " ".join(f"{k}={v}" for k, v in raw.items())
        print(
            f"  {label:<44} {show['highs']:>16} {show['scip']:>16}  {faster:>6}  "
            f"{family.auto_solver(p)}",
            flush=True,
        )
        if log:
            for e, r in results.items():
                record = {"instance": label, "engine": e, "cap": cap, "status": r.status}
                record.update(objective=r.objective, bound=r.bound, nodes=r.nodes)
                record.update(seconds=round(r.seconds, 2), auto=family.auto_solver(p))
                with open(log, "a") as out:
                    out.write(json.dumps(record) + "\n")


#: Issue 22's MIP targets: (family, params, known optimum and its source, target).
TARGETS = [
    ("no_k_in_row", {"dims": [10, 10], "k": 3}, "48 (A181018)", "<= 60 s"),
    ("no_k_in_row", {"dims": [11, 11], "k": 3}, "57 (A181018)", "<= 30 min"),
    ("no_k_in_row", {"dims": [12, 12], "k": 3}, "70 (A181018)", "<= 30 min"),
    ("domination", {"piece": "knight", "rows": 17, "cols": 17}, "46 (A006075)", "<= 60 s"),
    ("domination", {"piece": "knight", "rows": 18, "cols": 18}, "52 (A006075)", "<= 30 min"),
    ("domination", {"piece": "knight", "rows": 19, "cols": 19}, "57 (A006075)", "attempted"),
    ("no_k_in_row", {"dims": [6, 7, 6], "k": 5}, "open, 59..63", "proven"),
]


def targets_table(cap: float, log, only: list[str] | None) -> None:
    """Each of `TARGETS` (those whose label contains one of `only`, when given) solved
    three ways under `cap` seconds, one thread each: the family's plain model (no cuts,
    no start) by HiGHS and by SCIP, and the production model (`family.model`) by the
    engine `auto` picks; one line each with status, incumbent/dual bound and CPU s."""
    from puzzlesweep import puzzles

    print(f"\nissue 22 targets (cap {cap:g} s; CPU seconds of this process)")
    print(f"  {'instance':<34} {'known':<14} {'target':<10} {'plain HiGHS':>20} "
          f"{'plain SCIP':>20} {'product':>26}")  # fmt: skip
    for name, raw, known, target in TARGETS:
        family = puzzles.get(name)
        label = f"{name} " + " ".join(f"{k}={v}" for k, v in raw.items())
        if only and not any(o in label for o in only):
            continue
        p = family.canonical(make_params(family.Params, raw))
        plain = {"regions": False} if name == "domination" else {"start": False, "cuts": False}
        engine = family.auto_solver(p)
        cells = [
            _target_cell(family, p, options, solver, cap, log, f"{label}, {how}")
            for how, options, solver in (
                ("plain highs", plain, "highs"),
                ("plain scip", plain, "scip"),
                (f"product {engine}", {}, engine),
            )
        ]
        print(f"  {label[:34]:<34} {known:<14} {target:<10} {cells[0]:>20} {cells[1]:>20} "
              f"{engine + ' ' + cells[2]:>26}", flush=True)  # fmt: skip


def _target_cell(family, p, options: dict, solver: str, cap: float, log, label: str) -> str:
    """'sta incumbent/bound CPUs' of `family.model(p, **options)` solved by `solver`
    under `cap` seconds (model building included in the CPU seconds); its incumbent is
    checked by the family's verifier; one JSON line appended to `log`."""
    cpu = time.process_time()
    result = ENGINES[solver].solve(family.model(p, **options), Limits(cap))
    cpu = time.process_time() - cpu
    if result.solution is not None:
        assert family.verify(p, family.from_mip(p, result.solution)) == round(result.objective)
    if log:
        record = {"instance": label, "cap": cap, "status": result.status, "cpu": round(cpu, 1)}
        record.update(objective=result.objective, bound=result.bound)
        with open(log, "a") as out:
            out.write(json.dumps(record) + "\n")
    num = lambda v: "-" if v is None else f"{v:g}"  # noqa: E731
    return f"{result.status[:3]} {num(result.objective)}/{num(result.bound)} {cpu:.0f}s"


BOTH = ("highs", "scip")


def _rank(result) -> tuple:
    """Sort key of a result, best first: proven, then the higher bound, then faster."""
    return (result.status != "optimal", -(result.bound or 0), result.seconds)


def _searched(p, model: highs.MipModel) -> highs.MipModel:
    """`model` started from the greedy cover improved by SEARCH_MOVES moves of
    `hitting_set.improve` (seed 0)."""
    import numpy as np

    from puzzlesweep.puzzles import hitting_set as hs

    problem = domination.problem(p.piece, p.rows, p.cols, p.variant)
    state = hs.Hits(problem, np.isin(np.arange(problem.size), domination.greedy_start(p)))
    hs.improve(state, SEARCH_MOVES)
    chosen = set(state.elements())
    model.start = [1.0 if s in chosen else 0.0 for s in range(problem.size)]
    return model


#: Moves of local search for the knights' searched start (17×17: 55 greedy → 47).
SEARCH_MOVES = 21000


def _with(model: highs.MipModel, options: dict) -> highs.MipModel:
    model.options.update(options)
    return model


def _scip(model: highs.MipModel, options: dict | int) -> highs.MipModel:
    """`model` with SCIP `options`; an int is a `misc/usesymmetry` bitset (SCIP 10: 1
    orbitopes and symresacks, 2 orbital reduction, 4 Schreier-Sims cuts; default 7)."""
    model.scip_options.update(
        {"misc/usesymmetry": options} if isinstance(options, int) else options
    )
    return model


def run(name: str, variants, cap: float, log, engines=BOTH, only=None) -> None:
    """Solve every variant of one instance with each of `engines` it applies to (only
    the variants whose label starts with one of `only`, when given), print one line
    each, append JSON to `log`."""
    if only:
        keep = lambda v: v[0].startswith("plain") or any(v[0].startswith(o) for o in only)  # noqa: E731
        variants = [v for v in variants if keep(v)]
    print(f"\n{name} (cap {cap:g} s)")
    print(
        f"  {'variant':<28} {'engine':>6} {'build s':>7} {'status':>10} {'obj':>5} "
        f"{'bound':>7} {'nodes':>7} {'solve s':>8} {'cpu s':>7} {'× plain HiGHS':>13}"
    )
    plain: dict = {}
    for label, family, params, build, applies in variants:
        for engine in [e for e in engines if e in applies]:
            started = time.perf_counter()
            if build is None:  # the optimal start: plain, started from plain's optimum
                known = plain.get(engine)
                if known is None or known.status != "optimal":
                    continue
                model = family.model(params, regions=False)
                model.start = known.solution
            else:
                model = build()
            built = time.perf_counter() - started
            cpu = time.process_time()
            result = ENGINES[engine].solve(model, Limits(cap))
            cpu = time.process_time() - cpu  # below the wall clock when the machine is shared
            if result.solution is not None:  # every incumbent is checked by the family
                assert family.verify(params, family.from_mip(params, result.solution)) == round(
                    result.objective
                )
            plain.setdefault(engine, result)
            reference = plain.get("highs")
            ratio = (
                result.seconds / reference.seconds
                if reference and result.status == reference.status == "optimal"
                else None
            )
            fmt = lambda v, f="g": "-" if v is None else format(v, f)  # noqa: E731
            print(
                f"  {label:<28} {engine:>6} {built:>7.2f} {result.status:>10} "
                f"{fmt(result.objective):>5} {fmt(result.bound):>7} {result.nodes:>7} "
                f"{result.seconds:>8.2f} {cpu:>7.1f} {fmt(ratio, '.2f'):>13}",
                flush=True,
            )
            if log:
                record = {
                    "instance": name,
                    "variant": label,
                    "engine": engine,
                    "cap": cap,
                    "build_seconds": round(built, 2),
                    "status": result.status,
                    "objective": result.objective,
                    "bound": result.bound,
                    "nodes": result.nodes,
                    "seconds": round(result.seconds, 2),
                    "cpu_seconds": round(cpu, 2),
                }
                with open(log, "a") as out:
                    out.write(json.dumps(record) + "\n")


def main(argv: list[str] | None = None) -> None:
    """Parse the arguments and run the chosen instances."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--only", default="knights,nok,lines", help="knights, nok, lines, auto, targets"
    )
    parser.add_argument("--engines", default="highs,scip", help="highs, scip")
    parser.add_argument("--dims", default="6,7,6", help="no-k-in-a-row box, e.g. 6,7,6")
    parser.add_argument("--k", type=int, default=5, help="no-k-in-a-row run length")
    parser.add_argument("--variants", help="only these variants (label prefixes, comma-separated)")
    parser.add_argument("--knights", default="12..14", help="board sizes, e.g. 12..16")
    parser.add_argument("--cap", type=float, default=None, help="seconds per solve")
    parser.add_argument("--json", help="append one JSON object per solve to this file")
    args = parser.parse_args(argv)
    chosen = args.only.split(",")
    engines = tuple(args.engines.split(","))
    only = args.variants.split(",") if args.variants else None
    if "knights" in chosen:
        low, _, high = args.knights.partition("..")
        for n in range(int(low), int(high or low) + 1):
            run(f"knights {n}×{n}", knights_variants(n), args.cap or 300, args.json, engines, only)
    if "nok" in chosen:
        dims = [int(d) for d in args.dims.split(",")]
        name = f"no-{args.k}-in-a-row {'×'.join(map(str, dims))}"
        run(name, nok_variants(dims, args.k), args.cap or 60, args.json, engines, only)
    if "lines" in chosen:
        run(
            "monochromatic lines 3^3 (14, 13)", lines_variants(), args.cap or 60, args.json, engines
        )
    if "auto" in chosen:
        auto_table(args.cap or 60, args.json)
    if "targets" in chosen:
        targets_table(args.cap or 1800, args.json, only)


if __name__ == "__main__":
    main()
