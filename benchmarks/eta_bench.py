"""Benchmark: the error of a run's estimate of the time left (issue 37: "Both ETAs said
47 s where 167 s remained"). Not part of the test suite; it prints figures, it asserts
nothing.

    nice -n 10 .venv/bin/python benchmarks/eta_bench.py               # the mixed sweep
    nice -n 10 .venv/bin/python benchmarks/eta_bench.py --rows 4..6 --cols 4..6

Runs one sweep of the domination family through `flows.sweep.run_sweep` (what
`puzzlesweep run SPEC --workers 2` and `puzzlesweep.sweep()` run) into a fresh catalog
in a temporary folder: by default 5 pieces x 3 variants x rows 4..9 x cols 4..9, a
mixed sweep whose instances take from milliseconds to seconds. Every `--every` seconds
a thread reads the run's standing from its `Control` (the estimate its terminal prints
and its heartbeat writes for the dashboard: `flows.progress.Standing.seconds_left`),
with the 1-minute load average. After the run, the true time left at each moment is
the time of its last commit (the listener hears done == total) less that moment.

Printed, at 10, 25, 50, 75 and 90 % of the run's wall time (from its first batch out,
`Progress.started`, to its last commit): the sample read last before that moment, the
truth at the moment it was read, the estimate, their difference (seconds; negative: the
estimate said too little) and their ratio; then the load average at those moments.
`--samples FILE` also writes every sample as JSON lines.
"""

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FRACTIONS = (0.10, 0.25, 0.50, 0.75, 0.90)
PIECES = ["knight", "king", "queen", "rook", "bishop"]
VARIANTS = ["dominating", "total", "independent"]


def spec(args: argparse.Namespace) -> dict:
    """The sweep as a TOML document (a dict)."""
    return {
        "name": "eta-mixed",
        "study": [
            {
                "family": "domination",
                "time_limit": args.time_limit,
                "grid": {
                    "piece": args.pieces,
                    "variant": args.variants,
                    "rows": args.rows,
                    "cols": args.cols,
                },
            }
        ],
    }


class Sampler:
    """Reads `control.standing()` every `every` seconds on a daemon thread until
    `stop()`; notes the moment a listener first hears every instance committed."""

    def __init__(self, control, every: float):
        self.control, self.every = control, every
        self.samples: list[dict] = []
        self.ended: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        control.listen(self._heard)

    def _heard(self, standing) -> None:
        if self.ended is None and standing.total and standing.done >= standing.total:
            self.ended = time.perf_counter()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            standing = self.control.standing()
            if standing is None:
                continue
            self.samples.append(
                {
                    "at": time.perf_counter(),
                    "since_start": standing.seconds,
                    "done": standing.done,
                    "total": standing.total,
                    "estimate": standing.seconds_left,
                    "load": os.getloadavg()[0],
                }
            )

    def start(self) -> "Sampler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def figures(samples: list[dict], ended: float) -> tuple[float, list[dict]]:
    """(wall seconds from the first batch out to the last commit, one dict per fraction
    of `FRACTIONS`: the sample read last before that moment, with "fraction", "t"
    (seconds into the run) and "truth" (seconds from that sample to the last commit))."""
    start = samples[0]["at"] - samples[0]["since_start"]
    wall = ended - start
    rows = []
    for fraction in FRACTIONS:
        moment = start + fraction * wall
        sample = ([s for s in samples if s["at"] <= moment] or samples[:1])[-1]
        truth = ended - sample["at"]
        rows.append({**sample, "fraction": fraction, "t": sample["at"] - start, "truth": truth})
    return wall, rows


def _error(estimate: float | None, truth: float) -> list[str]:
    """[estimate, estimate - truth, estimate / truth] as printed."""
    if estimate is None:
        return ["none", "-", "-"]
    ratio = f"{estimate / truth:.2f}" if truth > 0 else "-"
    return [f"{estimate:.0f} s", f"{estimate - truth:+.0f} s", ratio]


def show(wall: float, rows: list[dict]) -> None:
    """Print the figures side by side: the truth, the estimate, their error."""
    print(f"wall time (first batch out to last commit): {wall:.1f} s")
    widths = (5, 7, 9, 7, 9, 8, 6)
    head = ["at", "t (s)", "done", "truth", "estimate", "error", "ratio"]
    print(" ".join(f"{name:>{width}}" for name, width in zip(head, widths, strict=True)))
    for row in rows:
        cells = [f"{row['fraction']:.0%}", f"{row['t']:.1f}", f"{row['done']}/{row['total']}"]
        cells += [f"{row['truth']:.0f} s", *_error(row["estimate"], row["truth"])]
        print(" ".join(f"{cell:>{width}}" for cell, width in zip(cells, widths, strict=True)))
    loads = [row["load"] for row in rows]
    print(
        f"1-min load average at those moments: min {min(loads):.2f}, mean "
        f"{sum(loads) / len(loads):.2f}, max {max(loads):.2f} ({os.cpu_count()} cores)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pieces", nargs="+", default=PIECES)
    parser.add_argument("--variants", nargs="+", default=VARIANTS)
    parser.add_argument("--rows", default="4..9")
    parser.add_argument("--cols", default="4..9")
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--every", type=float, default=2.0, help="seconds between samples")
    parser.add_argument("--samples", type=Path, help="write every sample here (JSON lines)")
    args = parser.parse_args()

    from puzzlesweep.flows.control import Control
    from puzzlesweep.flows.settings import RunSettings
    from puzzlesweep.flows.sweep import run_sweep

    control = Control()
    sampler = Sampler(control, args.every).start()
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as folder:
        settings = RunSettings.of(catalog=str(Path(folder) / "results"), workers=args.workers)
        report = run_sweep(spec(args), settings, control=control)
    sampler.stop()
    print(
        f"sweep: {len(args.pieces)} pieces x {len(args.variants)} variants x rows "
        f"{args.rows} x cols {args.cols}, time limit {args.time_limit:g} s, "
        f"{args.workers} workers: solved {report['solved']}, batches {report['batches']}, "
        f"counts {report['counts']}"
    )
    if args.samples:
        args.samples.write_text("".join(json.dumps(s) + "\n" for s in sampler.samples))
    if sampler.ended is None or not sampler.samples:
        print("the run did not commit every instance: no figures")
        return
    wall, rows = figures(sampler.samples, sampler.ended)
    show(wall, rows)


if __name__ == "__main__":
    main()
