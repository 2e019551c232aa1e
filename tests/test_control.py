"""The objects a run is steered by, without a cluster: the Control passed in, the one
RunRecord that writes a run's row, the validated cluster settings, and the filter that
keeps a closed scheduler's heartbeat traceback off a finished run's terminal."""

import logging
import threading

import pytest

from puzzlesweep import catalog
from puzzlesweep.core import BadInput
from puzzlesweep.flows.cluster import ClosedHeartbeat
from puzzlesweep.flows.control import Control
from puzzlesweep.flows.faults import RunStopped
from puzzlesweep.flows.run_record import read_spec, start
from puzzlesweep.flows.settings import CORES, RunSettings

from .conftest import knights


def test_a_stop_request_reaches_the_loop_of_its_own_control_only():
    mine, other = Control(), Control()
    mine.looping(1)
    assert mine.request_stop() is True and other.request_stop("x") is False
    with pytest.raises(KeyboardInterrupt):
        mine.check()
    with pytest.raises(RunStopped, match="^x$"):
        other.check()
    assert Control().check() is None  # a fresh Control has heard nothing


def test_listeners_hear_the_run():
    heard = []
    control = Control(announce=heard.append)
    stop = control.listen(heard.append)
    control.notify("standing 1")
    stop()
    control.notify("standing 2")
    assert heard == ["standing 1"]


def test_conflicting_settings_are_refused_naming_both_as_options_or_parameters():
    address = "tcp://127.0.0.1:8786"
    with pytest.raises(BadInput, match="--address and --workers do not go together"):
        RunSettings.of(flags=True, address=address, workers=2)
    with pytest.raises(BadInput, match="^address and workers do not go together"):
        RunSettings.of(address=address, workers=2)  # a deployment's parameters
    with pytest.raises(BadInput, match="--address and --backend threads do not go together"):
        RunSettings.of(flags=True, address=address, backend="threads")
    with pytest.raises(BadInput, match="--dashboard-address and --backend threads do not go"):
        RunSettings.of(flags=True, backend="threads", dashboard_address="127.0.0.1:8787")
    with pytest.raises(BadInput, match="backend"):
        RunSettings.of(backend="processes")
    with pytest.raises(BadInput, match="^--connect-timeout "):
        RunSettings.of(flags=True, connect_timeout=float("inf"))
    assert RunSettings.of(backend="threads", workers=3).size == 3
    assert RunSettings().size == CORES  # one default for every caller: a worker per core


def test_the_flows_parameters_are_the_settings_with_descriptions():
    # A deployment's run form shows every setting, each with its description, and no
    # internal object (the caller's Control travels by context, not as a parameter).
    from prefect.utilities.callables import parameter_schema

    from puzzlesweep.flows.sweep import sweep

    schema = parameter_schema(sweep).model_dump()["properties"]
    assert set(schema) == {"spec", *RunSettings.model_fields}
    assert all(schema[name].get("description") for name in schema)
    defaults = {name: field.default for name, field in RunSettings.model_fields.items()}
    assert {name: schema[name].get("default") for name in defaults} == defaults


def test_every_setting_is_an_option_of_run():
    # docs/development.md, "Adding a run option": a field of RunSettings is an option of
    # `puzzlesweep run` (the catalog's is spelt --catalog, its parameter `location`).
    import inspect

    from puzzlesweep.cli.run import run

    options = set(inspect.signature(run).parameters) - {"spec", "dry_run"}
    assert options == {*RunSettings.model_fields} - {"catalog"} | {"location"}


def test_the_run_row_ends_once_and_a_failed_end_is_one_line(tmp_path, monkeypatch):
    results = tmp_path / "results"
    record = start(knights("ending", "3..4"), RunSettings(catalog=str(results)))
    assert catalog.read_run(results, record.run_id)["state"] == "running"

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(catalog, "write_run", full)
    line = record.end("failed")
    assert f"the catalog's disk {results} is full" in line and "\n" not in line
    monkeypatch.undo()
    assert record.end("finished") is None  # once: a later end writes nothing
    record.write()  # nor does a heartbeat after the end
    assert catalog.read_run(results, record.run_id)["state"] == "running"  # never ended


def test_heartbeats_never_write_running_over_the_end(tmp_path):
    results = tmp_path / "results"
    record = start(knights("beating", "3..3"), RunSettings(catalog=str(results)))
    beats = [threading.Thread(target=record.write) for _ in range(8)]
    for beat in beats:
        beat.start()
    record.end("interrupted")
    for beat in beats:
        beat.join()
    assert catalog.read_run(results, record.run_id)["state"] == "interrupted"


def test_a_spec_may_be_text_or_a_dict():
    text = knights("inline", "3..4")
    assert [j.instance.params.rows for j in read_spec(text).jobs] == [3, 4]
    as_dict = {
        "name": "as-dict",
        "study": [{"family": "domination", "grid": {"rows": [5], "cols": [5]}}],
    }
    assert read_spec(as_dict).name == "as-dict"


def test_a_closed_schedulers_heartbeat_traceback_is_dropped():
    from distributed.comm.core import CommClosedError

    def record(exc: BaseException) -> logging.LogRecord:
        return logging.LogRecord(
            "distributed.worker",
            logging.ERROR,
            __file__,
            1,
            "Failed to communicate with scheduler during heartbeat.",
            None,
            (type(exc), exc, None),
        )

    quiet = ClosedHeartbeat()
    assert not quiet.filter(record(CommClosedError("in <TCP (closed)>")))
    assert quiet.filter(record(OSError("connection refused")))  # other causes still say so
