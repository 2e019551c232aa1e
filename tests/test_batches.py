"""The batch planner: sizes from guided self-scheduling and measured seconds per job."""

from puzzlesweep import puzzles
from puzzlesweep.core import make_params
from puzzlesweep.flows.batches import MAX_BATCH_SECONDS, PROBE, Planner
from puzzlesweep.flows.spec import Job
from puzzlesweep.puzzles import Instance
from puzzlesweep.solvers import Limits


def _jobs(boards: list[tuple[int, int]], time_limit: float = 60.0) -> list[Job]:
    family = puzzles.get("domination")
    return [
        Job(
            Instance("domination", make_params(family.Params, {"rows": r, "cols": c})),
            "highs",
            Limits(time_limit),
            1,
        )
        for r, c in boards
    ]


def _drain(planner: Planner, seconds_per_job: float | None) -> list[int]:
    sizes = []
    while (batch := planner.next()) is not None:
        sizes.append(len(batch.params))
        if seconds_per_job is not None:
            planner.record(batch, seconds_per_job * len(batch.params))
    return sizes


def test_adaptive_sizes_follow_what_is_left_and_the_measured_seconds():
    # 100 distinct boards, 2 workers, each job measured at 0.1 s: probes of PROBE jobs,
    # then ceil(left / 4) jobs but at least 5 s / 0.1 s = 50, or half of what is left;
    # less than 5 s of work left goes in one batch.
    jobs = _jobs([(r, c) for r in range(1, 51) for c in (60, 61)])
    sizes = _drain(Planner(jobs, "r", "s", workers=2), 0.1)
    assert sizes == [PROBE, 49, 49]
    # At 1 s per job the floor is 5 jobs and guided self-scheduling shrinks towards it.
    sizes = _drain(Planner(jobs, "r", "s", workers=2), 1.0)
    assert sizes == [2, 25, 19, 14, 10, 8, 6, 5, 5, 3, 3]
    # At 60 s per job a batch holds at most MAX_BATCH_SECONDS of work.
    sizes = _drain(Planner(jobs, "r", "s", workers=2), 60.0)
    assert max(sizes) == MAX_BATCH_SECONDS // 60 and sum(sizes) == 100


def test_fixed_sizes_keep_equivalent_instances_together_and_long_limits_first():
    # 3x5 and 5x3 are one class (same instance_key): never split across batches.
    jobs = _jobs([(1, 4), (3, 5), (5, 3), (2, 2)]) + _jobs([(4, 4)], time_limit=600)
    planner = Planner(jobs, "r", "s", workers=2, size=2)
    batches = []
    while (batch := planner.next()) is not None:
        batches.append(sorted((p["rows"], p["cols"]) for p in batch.params))
        planner.record(batch, 1.0 if len(batches) % 2 else None)  # reports change nothing
    assert batches[0] == [(4, 4)] and [(3, 5), (5, 3)] in batches
    assert sorted(sum(batches, [])) == [(1, 4), (2, 2), (3, 5), (4, 4), (5, 3)]
    assert all(len(b) <= 2 for b in batches) and planner.planned == len(batches) == 4


def test_probes_go_one_per_worker_until_one_reports():
    # 100 boards of one group, 2 workers: two probes of PROBE jobs, then nothing until a
    # probe reports (or fails); its measurement (0.1 s per job) then sizes the rest.
    jobs = _jobs([(r, c) for r in range(1, 51) for c in (60, 61)])
    planner = Planner(jobs, "r", "s", workers=2)
    first, second = planner.next(), planner.next()
    assert len(first.params) == len(second.params) == PROBE
    assert planner.next() is None and planner.planned == 2
    planner.record(first, None)  # a probe that failed frees its place, measures nothing
    third = planner.next()
    assert len(third.params) == PROBE and planner.next() is None
    planner.record(second, 0.1 * PROBE)
    # 94 jobs left at 0.1 s: at least 5 s (50 jobs) or half of what is left (47)
    assert [len(planner.next().params) for _ in range(2)] == [47, 47]
    assert planner.next() is None and planner.planned == 5


def test_every_group_is_probed_before_any_other_batch():
    # Two groups (time limits 600 s and 60 s), 2 workers: both groups' probes come first
    # (the longer limit first), then batches of whichever group is measured.
    jobs = _jobs([(r, 60) for r in range(1, 41)], 600) + _jobs([(r, 61) for r in range(1, 41)])
    planner = Planner(jobs, "r", "s", workers=2)
    probes = [planner.next() for _ in range(4)]
    assert [b.limits.time_limit for b in probes] == [600, 600, 60, 60]
    assert {len(b.params) for b in probes} == {PROBE} and planner.next() is None
    planner.record(probes[2], 0.1 * PROBE)  # the 60 s group is measured first
    assert planner.next().limits.time_limit == 60


def test_a_long_probe_never_reads_as_nearly_done():
    # One open box at a 60 s limit beside 20 quick boards measured at 0.1 s per job, on
    # one worker: the box's probe counts as long again as it has run, and never past
    # what its limit leaves.
    quick = _jobs([(r, c) for r in range(1, 11) for c in (20, 21)])
    family = puzzles.get("no_k_in_row")
    box = Job(
        Instance("no_k_in_row", make_params(family.Params, {"dims": [6, 7, 6], "k": 5})),
        "highs",
        Limits(60.0),
        1,
    )
    planner = Planner([box, *quick], "r", "s", workers=1)
    assert planner.seconds_left({}) is None  # nothing measured: no estimate yet
    probe = planner.next()  # the longest limit goes first
    assert probe.family == "no_k_in_row"
    while (batch := planner.next()) is not None:
        planner.record(batch, 0.1 * len(batch.params))
    assert planner.seconds_left({probe.number: (1, 0.0)}) == 0.1  # the prior, 0.1 s
    assert planner.seconds_left({probe.number: (1, 10.0)}) == 10.0  # as long again
    assert planner.seconds_left({probe.number: (1, 50.0)}) == 10.0  # its limit leaves 10
    assert planner.seconds_left({probe.number: (1, 70.0)}) == 0.0
    # With two workers the lone box still needs its own 10 s: a batch runs on one worker.
    planner = Planner([box, *quick], "r", "s", workers=2)
    probe = planner.next()
    while (batch := planner.next()) is not None:
        planner.record(batch, 0.1 * len(batch.params))
    assert planner.seconds_left({probe.number: (1, 10.0)}) == 10.0
    # The same in a measured group: a batch of 3 quick boards whose current board has
    # run 30 s counts it as 30 s more (its limit leaves 30), the other two at 0.1 s.
    planner = Planner(quick, "r", "s", workers=1)
    first = planner.next()
    planner.record(first, 0.1 * len(first.params))
    batch = planner.next()
    left = planner.seconds_left({batch.number: (3, 30.0)})
    assert abs(left - (30.0 + 2 * 0.1 + 0.1 * planner.left[next(iter(planner.left))])) < 1e-9
