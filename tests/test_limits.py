"""Per-instance limits as a cluster worker applies them: each instance in the worker's
child process (`isolate.Child`), which holds the time limit of both solvers, a memory
limit, and survives a crashed solver. Margins are generous: the machine is shared."""

import os
import re
import signal
import threading
import time

import pytest

from puzzlesweep import puzzles
from puzzlesweep.core import make_params
from puzzlesweep.isolate import MIN_MEMORY, Child
from puzzlesweep.puzzles import Instance
from puzzlesweep.solve import SolveRequest
from puzzlesweep.solvers import Limits

from .conftest import limit_held


def request(
    family: str, params: dict, solver: str, time_limit: float, node_limit=None
) -> SolveRequest:
    """The typed request a worker sends its child for one instance."""
    instance = Instance(family, make_params(puzzles.get(family).Params, params))
    return SolveRequest(instance, solver, Limits(time_limit, node_limit))


KING_3X3 = request("domination", {"piece": "king", "rows": 3, "cols": 3}, "highs", 10)


def seconds_of(solve, request: dict) -> float:
    """Wall seconds of `solve(request)`, which must end optimal: a reference timing."""
    started = time.monotonic()
    assert solve(request)["status"] == "optimal"
    return time.monotonic() - started


@pytest.fixture
def child():
    worker_child = Child(1024 * 2**20)
    yield worker_child
    worker_child.close()


@pytest.mark.parametrize(
    "family, params, solver",
    [
        # Seed 001's open box: HiGHS finds an incumbent in about a second, the bound is
        # at least the LP's 50.4, and the optimum (54..64) is far from proven in 3 s.
        ("no_k_in_row", {"dims": [6, 7, 6], "k": 5}, "highs"),
        # T_8 fewest moves: the beam pass finds 15 moves in about a second, the layered
        # search needs far more than 3 s to prove the optimum.
        ("peg_solitaire", {"side": 8, "start": 1, "question": "min_moves"}, "frontier"),
    ],
)
def test_time_limit_keeps_incumbent_and_bound(child, family, params, solver):
    limit = 3.0
    row = child.solve(request(family, params, solver, limit))
    assert row["status"] == "time_limit", row["error"]
    assert row["objective"] is not None and row["bound"] is not None
    assert row["bound"] <= row["objective"] and row["gap"] > 0
    assert row["verified"] is True and row["solution"]
    # HiGHS stops within ~0.4 s; the layered search looks at the clock between batches
    # of 2^16 states and after merging a layer, which on T_8 took up to 0.65 s here.
    assert limit - 0.05 <= row["solve_seconds"] and limit_held(row["solve_seconds"], limit)


def test_node_limit_is_recorded(child):
    row = child.solve(
        request(
            "peg_solitaire", {"side": 6, "start": 4, "question": "min_moves"}, "frontier", 60, 500
        )
    )
    assert row["status"] == "node_limit" and row["nodes"] == 500


def test_memory_limit_is_an_error_row_and_the_next_instance_runs():
    small = Child(MIN_MEMORY + 64 * 2**20)
    try:
        # 64,000 cells, about a million windows: the model alone needs far more.
        row = small.solve(request("no_k_in_row", {"dims": [40, 40, 40], "k": 5}, "highs", 60))
        assert row["status"] == "error", row["error"]
        assert row["error"].startswith("memory limit 320 MiB exceeded: MemoryError")
        row = small.solve(
            request("domination", {"piece": "knight", "rows": 8, "cols": 8}, "highs", 60)
        )
        assert (row["status"], row["objective"], row["verified"]) == ("optimal", 12.0, True)
    finally:
        small.close()
    with pytest.raises(ValueError, match="below the minimum"):
        Child(100 * 2**20)


def test_a_solver_that_does_not_stop_is_killed_and_recorded_time_limit():
    # Building the 25x25x25 model alone takes longer than limit + grace: the worker
    # kills the child (as it would a solver stuck in C code) and records why.
    impatient = Child(1024 * 2**20, grace=0.5)
    try:
        reference = seconds_of(impatient.solve, KING_3X3)  # a child's start-up and a solve
        impatient.close()  # the stuck solve below starts its own child, as the first did
        started = time.monotonic()
        row = impatient.solve(request("no_k_in_row", {"dims": [25, 25, 25], "k": 5}, "highs", 0.5))
        assert limit_held(time.monotonic() - started, 0.5 + 0.5, reference)  # limit, grace
        assert row["status"] == "time_limit" and row["objective"] is None
        killed = re.match(r"killed after (\d+\.\d) s", row["error"])
        assert killed and 1.0 <= float(killed[1]) and limit_held(float(killed[1]), 1.0)
        assert "did not stop at its time limit of 0.5 s" in row["error"]
        row = impatient.solve(
            request("domination", {"piece": "king", "rows": 3, "cols": 3}, "highs", 5)
        )
        assert (row["status"], row["objective"]) == ("optimal", 1.0)
    finally:
        impatient.close()


def test_the_solver_child_does_not_import_from_the_working_directory(tmp_path, monkeypatch):
    # A user's shell may stand in another checkout of puzzlesweep: `python -m` would put
    # that directory first on the child's path, and every instance would fail.
    (tmp_path / "puzzlesweep").mkdir()
    (tmp_path / "puzzlesweep" / "__init__.py").write_text("raise SystemExit(3)\n")
    monkeypatch.chdir(tmp_path)
    here = Child(1024 * 2**20)
    try:
        row = here.solve(
            request("domination", {"piece": "knight", "rows": 8, "cols": 8}, "highs", 60)
        )
        assert (row["status"], row["objective"]) == ("optimal", 12.0)  # A006075: 12
    finally:
        here.close()


def test_a_crashed_solver_is_an_error_row_and_the_next_instance_runs(child):
    # A solver process that dies (here SIGKILL, as the kernel's OOM killer would) in the
    # middle of an instance: that instance is recorded, a new process takes the next.
    reference = seconds_of(child.solve, KING_3X3)  # a child's start-up and a solve
    victim = child.pid
    threading.Timer(1.0, os.kill, (victim, signal.SIGKILL)).start()
    started = time.monotonic()
    row = child.solve(request("no_k_in_row", {"dims": [6, 7, 6], "k": 5}, "highs", 30))
    assert limit_held(time.monotonic() - started, 1.0, reference)  # killed after 1 s
    assert row["status"] == "error"
    # honest: killed by SIGKILL, far below its 1024 MiB limit, so the limit is not named
    assert re.fullmatch(
        r"the solver process was killed by SIGKILL \(peak memory \d+ MiB\)", row["error"]
    ), row["error"]
    row = child.solve(request("domination", {"piece": "knight", "rows": 8, "cols": 8}, "highs", 60))
    assert row["status"] == "optimal" and child.pid != victim


def test_a_child_killed_near_its_memory_limit_says_so_and_a_stopped_one_is_not_a_row():
    # A solver SIGKILLed (as the kernel's OOM killer or a person would) after growing
    # past half its limit: RLIMIT_DATA never sends SIGKILL, so the limit is not named,
    # the peak the kernel measured is. (A death the limit causes, an allocation that
    # fails, names it: tests/test_faults.py, `solve ... --memory-limit 1GiB`.)
    small = Child(MIN_MEMORY)
    try:
        small.start()
        victim = small.pid

        def kill_when_grown() -> None:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                with open(f"/proc/{victim}/statm") as statm:  # the child we started
                    resident = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
                if resident > 0.6 * MIN_MEMORY:
                    break
                time.sleep(0.05)
            os.kill(victim, signal.SIGKILL)

        killer = threading.Thread(target=kill_when_grown)
        killer.start()
        # 40x40x40: the model alone needs far more than 256 MiB
        row = small.solve(request("no_k_in_row", {"dims": [40, 40, 40], "k": 5}, "highs", 60))
        killer.join()
        assert row["status"] == "error"
        match = re.fullmatch(
            r"the solver process was killed by SIGKILL \(peak memory (\d+) MiB\)", row["error"]
        )
        assert match and int(match[1]) > 0.5 * 256, row["error"]

        # Stopped from outside (SIGTERM): not an error row, the instance is not done.
        from puzzlesweep.isolate import Interrupted

        small.start()
        threading.Timer(1.0, os.kill, (small.pid, signal.SIGTERM)).start()
        with pytest.raises(Interrupted, match="stopped by SIGTERM"):
            small.solve(request("no_k_in_row", {"dims": [6, 7, 6], "k": 5}, "highs", 30))
    finally:
        small.close()


RETRY_SPEC = """
name = "retry"
[[study]]
family = "domination"
time_limit = 30
[study.grid]
piece = "king"
rows = "1..4"
cols = "=rows"
"""


def test_a_transient_failure_is_retried_and_counted(prefect_api, tmp_path, monkeypatch):
    # A batch whose solving raises an error a retry may cure (its solver process could
    # not be started: EAGAIN) is submitted again, counted as retried and said in the
    # flow run's log; a commit that loses a race (CommitFailedError) is made again by
    # the run's writer. Nothing is doubled. (A full disk or a denied write is never
    # retried, see test_faults.py.)
    import errno

    from deltalake.exceptions import CommitFailedError

    from puzzlesweep import catalog
    from puzzlesweep import sweep as run_sweep
    from puzzlesweep.flows import batch_task

    real_solve, real_write, solves, writes = batch_task.solve_classes, catalog.write_batches, [], []

    def flaky_solve(*args, **kwargs):
        solves.append(args)
        if len(solves) == 1:
            raise OSError(errno.EAGAIN, "Resource temporarily unavailable (injected)")
        return real_solve(*args, **kwargs)

    def flaky_write(*args, **kwargs):
        writes.append(args)
        if len(writes) == 1:
            raise CommitFailedError("a concurrent transaction won (injected)")
        return real_write(*args, **kwargs)

    monkeypatch.setattr(batch_task, "solve_classes", flaky_solve)
    monkeypatch.setattr(catalog, "write_batches", flaky_write)
    spec = tmp_path / "retry.toml"
    spec.write_text(RETRY_SPEC)
    results = tmp_path / "results"
    report = run_sweep(str(spec), str(results), backend="threads", workers=2, batch_size=2)
    assert (report["solved"], report["retried"], report["failed"]) == (4, 1, [])
    assert len(solves) == 3  # two batches, one of them twice
    _, rows = catalog.query(results, "SELECT count(*), count(DISTINCT instance_key) FROM results")
    assert rows == [(4, 4)]

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    with get_client(sync_client=True) as client:
        only = LogFilter(flow_run_id=LogFilterFlowRunId(any_=[report["flow_run_id"]]))
        logs = client.read_logs(log_filter=only)
    retried = [log.message for log in logs if log.level == 30 and "; attempt 2" in log.message]
    assert len(retried) == 1 and "Resource temporarily unavailable" in retried[0]


def knight_batch(number: int, side: int):
    """Batch `number` of run r1: knight domination of the side×side board, HiGHS, 60 s."""
    from puzzlesweep.flows.batches import Batch
    from puzzlesweep.solvers import Limits

    params = ({"piece": "knight", "rows": side, "cols": side, "variant": "dominating"},)
    return Batch.of("r1", "reuse", "domination", "highs", Limits(60), params, number=number)


def alive(pid: int) -> bool:
    """Does the process `pid` (a child solver this test started) still exist?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_thread_keeps_its_child_across_batches_until_its_memory_limit_changes(tmp_path):
    # The children are an object passed to the batch task (as the threads backend
    # does): two batches on this thread are solved by one child process (a second of
    # imports saved per batch); a batch under another memory limit replaces it; closing
    # the children stops the child.
    from puzzlesweep.flows.batch_task import solve_batch
    from puzzlesweep.isolate import Children

    results = []
    with Children() as children:
        results.append(solve_batch(knight_batch(1, 3), 1024 * 2**20, children=children))
        [first] = children.pids()
        results.append(solve_batch(knight_batch(2, 4), 1024 * 2**20, children=children))
        assert children.pids() == [first]
        results.append(solve_batch(knight_batch(3, 5), 512 * 2**20, children=children))
        [second] = children.pids()
        assert second != first and not alive(first)
    assert children.pids() == [] and not alive(second)
    # OEIS A006075 (knights, n×n): n = 3, 4, 5 → 4, 4, 5 (docs/families.md, domination).
    rows = [
        (r.rows[0]["params"]["rows"], r.rows[0]["objective"], r.rows[0]["status"]) for r in results
    ]
    assert rows == [(3, 4, "optimal"), (4, 4, "optimal"), (5, 5, "optimal")]


def test_a_dask_worker_keeps_its_child_across_batches_and_stops_it_when_it_closes(tmp_path):
    # On a LocalCluster of one single-threaded worker, the worker's plugin owns the
    # children: two batches run by the worker's thread are solved by one child process,
    # which is gone once the cluster has closed.
    import psutil
    from distributed import Client

    from puzzlesweep.flows.batch_task import solve_batch
    from puzzlesweep.flows.cluster import dask_cluster

    def solvers(worker: int) -> list[int]:
        found = psutil.Process(worker).children()
        return sorted(p.pid for p in found if "puzzlesweep.isolate" in p.cmdline())

    with (
        dask_cluster(workers=1, dashboard_address=None) as (scheduler, _, _),
        Client(scheduler) as client,
    ):
        [worker] = client.run(os.getpid).values()
        # no dashboard: the scheduler's HTTP server (health, metrics) still listens, on
        # a free port rather than Dask's default 8787, which a dashboard may want
        http = client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.http_server.port)
        assert http != 8787
        done = [client.submit(solve_batch, knight_batch(1, 3), pure=False).result()]
        [first] = solvers(worker)
        done.append(client.submit(solve_batch, knight_batch(2, 4), pure=False).result())
        assert solvers(worker) == [first]
    for _ in range(100):  # bounded by count: the worker's teardown stops its child
        if not alive(first):
            break
        time.sleep(0.1)
    assert not alive(first)
    # OEIS A006075 (knights, n×n): n = 3, 4 → 4, 4 (docs/families.md, domination).
    assert [result.rows[0]["objective"] for result in done] == [4, 4]


def test_the_threads_backend_hands_its_children_to_each_batch(tmp_path):
    # `--backend threads`: the run's children reach each batch on the pool's threads as
    # the same object, so the pool's one thread solves both batches in one child
    # process, stopped when the backend closes.
    from puzzlesweep.flows.batch_task import solve_batch
    from puzzlesweep.flows.settings import RunSettings

    seen = []
    with RunSettings.of(backend="threads", workers=1).start() as started:
        for number, side in ((1, 3), (2, 4)):
            batch = knight_batch(number, side)
            future = started.pool.submit("k", solve_batch, batch, None, None, started.children)
            assert [row["status"] for row in future.result().rows] == ["optimal"]
            seen.append(started.children.pids())
    seen.append(started.children.pids())
    assert len(seen[0]) == 1 and seen == [seen[0], seen[0], []]
    assert not alive(seen[0][0])
