"""Benchmark: the hard MIP instances, plain model against each improvement, in one run.

    .venv/bin/python benchmarks/mip_bench.py                    # knights 12..14, 6×7×6, 3^3
    .venv/bin/python benchmarks/mip_bench.py --only nok --cap 60
    .venv/bin/python benchmarks/mip_bench.py --only knights --knights 12..15 --cap 300

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
- greedy start (domination): the greedy cover handed to HiGHS;
- optimal start (knights): plain again, started from the plain run's proven optimum,
  the most any starting incumbent can give.

Not part of the test suite; the figures and how to read them are in benchmarks/README.md.
"""

import argparse
import json
import time

from puzzlesweep.core import make_params
from puzzlesweep.puzzles import domination, monochromatic_lines, no_k_in_row
from puzzlesweep.solvers import Limits, highs

NO_SYMMETRY = {"mip_detect_symmetry": False}


def knights_variants(n: int):
    """(label, family module, params, model builder) for the n×n knights instance."""
    p = make_params(domination.Params, {"piece": "knight", "rows": n, "cols": n})
    build = domination.model
    return [
        ("plain", domination, p, lambda: build(p)),
        ("no HiGHS symmetry", domination, p, lambda: _with(build(p), NO_SYMMETRY)),
        ("symmetry rows", domination, p, lambda: build(p, symmetry=True)),
        ("greedy start", domination, p, lambda: build(p, start=True)),
        ("optimal start", domination, p, None),  # filled from the plain run
    ]


def nok_variants(dims: list[int], k: int):
    """(label, family module, params, model builder) for no-k-in-a-row on `dims`."""
    p = make_params(no_k_in_row.Params, {"dims": dims, "k": k})
    build = no_k_in_row.model
    return [
        ("plain", no_k_in_row, p, lambda: build(p, start=False)),
        ("no HiGHS symmetry", no_k_in_row, p, lambda: _with(build(p, start=False), NO_SYMMETRY)),
        ("symmetry rows", no_k_in_row, p, lambda: build(p, start=False, symmetry=True)),
        ("periodic start", no_k_in_row, p, lambda: build(p)),
        ("searched start", no_k_in_row, p, lambda: build(p, moves=no_k_in_row.SEARCH_MOVES)),
        (
            "searched start + sym rows",
            no_k_in_row,
            p,
            lambda: build(p, moves=no_k_in_row.SEARCH_MOVES, symmetry=True),
        ),
    ]


def lines_variants():
    """(label, family module, params, model builder) for the seed cube 3^3, 14/13 balls."""
    p = make_params(monochromatic_lines.Params, {"n": 3, "d": 3, "counts": [14, 13]})
    build = monochromatic_lines.model
    return [
        ("plain", monochromatic_lines, p, lambda: build(p)),
        ("no HiGHS symmetry", monochromatic_lines, p, lambda: _with(build(p), NO_SYMMETRY)),
    ]


def _with(model: highs.MipModel, options: dict) -> highs.MipModel:
    model.options.update(options)
    return model


def run(name: str, variants, cap: float, log) -> None:
    """Solve every variant of one instance, print one line each, append JSON to `log`."""
    print(f"\n{name} (cap {cap:g} s)")
    print(
        f"  {'variant':<24} {'build s':>7} {'status':>10} {'obj':>5} {'bound':>5} "
        f"{'nodes':>7} {'solve s':>8} {'× plain':>7}"
    )
    plain = None
    for label, family, params, build in variants:
        started = time.perf_counter()
        if build is None:  # the optimal start: plain, started from plain's optimum
            if plain is None or plain.status != "optimal":
                continue
            model = family.model(params)
            model.start = plain.solution
        else:
            model = build()
        built = time.perf_counter() - started
        result = highs.solve(model, Limits(cap))
        if result.solution is not None:  # every incumbent is checked by the family
            assert family.verify(params, family.from_mip(params, result.solution)) == round(
                result.objective
            )
        plain = plain or result
        ratio = (
            result.seconds / plain.seconds if result.status == plain.status == "optimal" else None
        )
        fmt = lambda v, f="g": "-" if v is None else format(v, f)  # noqa: E731
        print(
            f"  {label:<24} {built:>7.2f} {result.status:>10} {fmt(result.objective):>5} "
            f"{fmt(result.bound):>5} {result.nodes:>7} {result.seconds:>8.2f} "
            f"{fmt(ratio, '.2f'):>7}",
            flush=True,
        )
        if log:
            record = {
                "instance": name,
                "variant": label,
                "cap": cap,
                "build_seconds": round(built, 2),
                "status": result.status,
                "objective": result.objective,
                "bound": result.bound,
                "nodes": result.nodes,
                "seconds": round(result.seconds, 2),
            }
            with open(log, "a") as out:
                out.write(json.dumps(record) + "\n")


def main(argv: list[str] | None = None) -> None:
    """Parse the arguments and run the chosen instances."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="knights,nok,lines", help="knights, nok, lines")
    parser.add_argument("--knights", default="12..14", help="board sizes, e.g. 12..16")
    parser.add_argument("--cap", type=float, default=None, help="seconds per solve")
    parser.add_argument("--json", help="append one JSON object per solve to this file")
    args = parser.parse_args(argv)
    chosen = args.only.split(",")
    if "knights" in chosen:
        low, _, high = args.knights.partition("..")
        for n in range(int(low), int(high or low) + 1):
            run(f"knights {n}×{n}", knights_variants(n), args.cap or 300, args.json)
    if "nok" in chosen:
        run("no-5-in-a-row 6×7×6", nok_variants([6, 7, 6], 5), args.cap or 60, args.json)
    if "lines" in chosen:
        run("monochromatic lines 3^3 (14, 13)", lines_variants(), args.cap or 60, args.json)


if __name__ == "__main__":
    main()
