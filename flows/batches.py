"""Cutting a run's jobs into batches, as the run goes (the flow's one batch generator).

A batch is the unit of a Prefect task: its cost is the task's orchestration (about 0.2 s
of Prefect state changes per task on this machine, docs/architecture.md) plus one Parquet file.
Batches too small let that overhead dominate; batches too large leave workers idle while
the last ones finish (stragglers) and repeat much work when a worker is lost.

`Planner` sizes each batch when it is submitted, by guided self-scheduling (C. D.
Polychronopoulos and D. J. Kuck, "Guided self-scheduling", IEEE Trans. Computers 36(12),
1987): a batch takes about 1/(2·workers) of the work left in the whole run, so batches
shrink towards the end of the run and the last ones finish together. Work is estimated
from measured seconds per job (the mean over a group's finished batches, wall time in
the worker; a group not measured yet counts at the mean of the measured ones), and
every batch holds between `MIN_BATCH_SECONDS` (or a share of what is left of its group
for each worker, at the end of a run) and `MAX_BATCH_SECONDS` of it; what is left of a
group once it is estimated below `MIN_BATCH_SECONDS` goes in one batch. Until a group
has a measurement its batches are probes of `PROBE` jobs, at most one per worker at a
time, and the probes of every group go out before any other batch: a group reached
mid-run would otherwise leave workers idle while its probes make the round trip
(about 0.6 s each through Prefect). A fixed `size` (`--batch-size`) turns all of this
off.

Groups are (family, solver, limits); the group with the longest time limit goes first,
so its instances do not straggle. Within a group, classes go in instance_key order (a
hash: a fixed shuffle of the spec's order), so early measurements stand for the whole
group and its largest instances spread over the batches. A class of equivalent
instances (same instance_key) always stays in one batch: the batch solves it once and
records every member.
"""

import json
import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

from puzzlesweep import puzzles
from puzzlesweep.core import make_params
from puzzlesweep.flows.spec import Job
from puzzlesweep.puzzles import Instance
from puzzlesweep.solvers import Limits

#: Estimated seconds of work per batch, at least: keeps the per-batch overhead under ~5%.
MIN_BATCH_SECONDS = 5.0
#: ... and at most: bounds what a lost worker or a retried task repeats.
MAX_BATCH_SECONDS = 120.0
#: Jobs in a batch of a group not measured yet.
PROBE = 2


@dataclass(frozen=True)
class Batch:
    """A handle to the work of one task: which run and sweep, which family, solver and
    limits, and the parameters (dicts) of its instances. Workers rebuild the models.

    The parameters travel as one JSON text (`params_json`; `params` decodes it): Prefect
    walks every argument of a task looking for futures, through every dict of a list but
    over a string in one step. Build one with `Batch.of`."""

    run_id: str
    sweep: str
    family: str
    solver: str
    limits: Limits
    params_json: str
    number: int = 0  # its place in the run: names its commit, so a retry writes nothing twice
    count: bool = False  # also count each optimum's solutions (the study's `count`)

    @classmethod
    def of(
        cls,
        run_id: str,
        sweep: str,
        family: str,
        solver: str,
        limits: Limits,
        params: Iterable[dict],
        number: int = 0,
        count: bool = False,
    ) -> "Batch":
        """The batch of `params` (dicts of JSON values), number `number` of its run."""
        text = json.dumps(list(params))
        return cls(run_id, sweep, family, solver, limits, text, number, count)

    @cached_property
    def params(self) -> tuple[dict, ...]:
        """The parameters of the batch's instances, in order."""
        return tuple(json.loads(self.params_json))

    def instances(self) -> list[Instance]:
        """The batch's instances, in order, rebuilt from their parameters (validated
        again by the family's model: a worker trusts no handle)."""
        model = puzzles.get(self.family).Params
        return [Instance(self.family, make_params(model, raw)) for raw in self.params]


class Group(NamedTuple):
    """The jobs a batch may mix: one family, one solver, the same limits and the same
    `count`. The planner measures seconds per job per group."""

    family: str
    solver: str
    limits: Limits
    count: bool


class Planner:
    """Hands out the batches of `jobs` one at a time (`next`: None when every job is
    handed out, or while a group's probes are out), learning from the batches that
    finished or failed (`record`).

    workers: how many batches run at once (>= 1). size: a fixed batch size in jobs, or
    None for the adaptive sizes of the module docstring. Batches are numbered 0, 1, ...
    in the order they are handed out; `planned` counts them so far.
    """

    def __init__(
        self, jobs: list[Job], run_id: str, sweep: str, workers: int, size: int | None = None
    ):
        if size is not None and size < 1:
            raise ValueError(f"batch size must be >= 1, got {size}")
        self.run_id, self.sweep, self.size = run_id, sweep, size
        self.workers = max(1, workers)
        groups: dict[Group, dict[str, list[Job]]] = {}
        for job in jobs:
            key = Group(job.instance.family, job.solver, job.limits, job.count)
            groups.setdefault(key, {}).setdefault(job.instance.key, []).append(job)
        order = sorted(groups, key=lambda group: -group.limits.time_limit)
        # classes in instance_key order, a fixed pseudo-random shuffle: a spec lists its
        # small instances first, so in spec order the first batches would measure only
        # those, and the largest would all fall in the last batch and straggle
        self.groups = {key: deque(groups[key][k] for k in sorted(groups[key])) for key in order}
        self.left = {key: sum(map(len, groups[key].values())) for key in order}
        self.measured: dict[Group, tuple[float, int]] = {}  # group -> (seconds, jobs)
        self.probing: dict[Group, int] = {}  # group -> its probes not reported yet
        self.out: dict[int, Group] = {}  # batch number -> its group, until recorded
        self.planned = 0

    def per_job(self, group: Group) -> float | None:
        """The measured seconds per job of `group`, or None before its first report."""
        if group not in self.measured:
            return None
        seconds, jobs = self.measured[group]
        return max(seconds / jobs, 1e-6)

    def batch_size(self, group: Group) -> int:
        """The number of jobs for the next batch of `group` (see the module docstring)."""
        if self.size is not None:
            return self.size
        per_job = self.per_job(group)
        if per_job is None:
            return min(math.ceil(self.left[group] / (2 * self.workers)), PROBE)
        if self.left[group] * per_job < MIN_BATCH_SECONDS:
            return self.left[group]  # too little left to be worth sharing out
        known = [self.per_job(g) for g in self.measured]
        prior = sum(known) / len(known)  # for the groups not measured yet
        work = sum(left * (self.per_job(g) or prior) for g, left in self.left.items())
        guided = math.ceil(work / (2 * self.workers) / per_job)
        least = math.ceil(MIN_BATCH_SECONDS / per_job)
        least = min(least, math.ceil(self.left[group] / self.workers))  # the tail is shared
        most = max(1, math.floor(MAX_BATCH_SECONDS / per_job))
        return max(1, min(max(guided, least), most))

    def next(self) -> Batch | None:
        """The next batch: a probe of a group not measured yet (every group's probes go
        out first, so no group waits for its measurement mid-run), else a batch of the
        first measured group with jobs left; None when every job is handed out or only
        unmeasured groups are left, with their probes out."""
        chosen = self._group()
        if chosen is None:
            return None
        classes = self.groups[chosen]
        size, chunk = self.batch_size(chosen), list(classes.popleft())
        while classes and len(chunk) + len(classes[0]) <= size:
            chunk.extend(classes.popleft())
        self.left[chosen] -= len(chunk)
        params = (job.instance.params.model_dump() for job in chunk)
        family, solver, limits = chosen.family, chosen.solver, chosen.limits
        batch = Batch.of(
            self.run_id, self.sweep, family, solver, limits, params, self.planned, chosen.count
        )
        self.out[batch.number] = chosen
        self.planned += 1
        return batch

    def seconds_left(self, in_flight: dict[int, tuple[int, float]]) -> float | None:
        """Estimated wall seconds until every job is done, shared by the workers, or None
        before any group is measured. Counted: the jobs not handed out and those of
        `in_flight` ({batch number: (its jobs not finished yet, seconds since its last
        job finished, or since it went out)}), each at its group's measured seconds per
        job (a group not measured yet at the mean of the measured ones, capped by its
        time limit). The job a batch is on now, running t seconds, is expected to need
        at least as long again, and no more than its time limit leaves: a long instance
        in a group of quick ones never reads as nearly done. No estimate is shorter than the
        longest batch out (a batch runs on one worker). Safe to call from another thread
        than the one handing out batches."""
        measured = dict(self.measured)
        if not measured:
            return None
        per_job = {g: max(seconds / jobs, 1e-6) for g, (seconds, jobs) in measured.items()}
        prior = sum(per_job.values()) / len(per_job)

        def cost(group: Group) -> float:
            return per_job[group] if group in per_job else min(prior, group.limits.time_limit)

        work = sum(left * cost(g) for g, left in dict(self.left).items())
        out, longest = dict(self.out), 0.0
        for number, (jobs, running) in in_flight.items():
            group = out.get(number)
            if group is None or not jobs:
                continue
            limit_left = max(group.limits.time_limit - running, 0.0)
            current = max(cost(group) - running, min(running, limit_left))
            ahead = (jobs - 1) * cost(group) + current
            work, longest = work + ahead, max(longest, ahead)
        return max(work / self.workers, longest)  # one batch runs on one worker

    def _group(self) -> Group | None:
        """The group of the next batch (counting it as a probe when it is one), or None."""
        left = [group for group, classes in self.groups.items() if classes]
        if self.size is not None:
            return left[0] if left else None
        for group in left:
            if group not in self.measured and self.probing.get(group, 0) < self.workers:
                self.probing[group] = self.probing.get(group, 0) + 1
                return group
        return next((group for group in left if group in self.measured), None)

    def record(self, batch: Batch, seconds: float | None) -> None:
        """Learn that `batch` took `seconds` of wall time in its worker (None: it failed,
        which only ends its probe)."""
        group = Group(batch.family, batch.solver, batch.limits, batch.count)
        self.out.pop(batch.number, None)
        if self.size is None and group not in self.measured:  # then it was a probe
            self.probing[group] -= 1
        if seconds is not None:
            total, jobs = self.measured.get(group, (0.0, 0))
            self.measured[group] = (total + seconds, jobs + len(batch.params))
