"""Peg solitaire's question has one name everywhere: the parameter and the catalog
column are `question`, on the command line, in specs and in SQL; `objective=` (the
column that holds the answer) is refused with a message that names `question`."""

from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from puzzlesweep import catalog, puzzles
from puzzlesweep.cli import app
from puzzlesweep.core import BadInput, make_params
from puzzlesweep.flows.spec import parse
from puzzlesweep.puzzles import Instance
from puzzlesweep.solve import solve_instance
from puzzlesweep.solvers import Limits

peg = puzzles.get("peg_solitaire")


def cli(*args: str) -> SimpleNamespace:
    """`puzzlesweep ARGS...` in this process."""
    result = CliRunner().invoke(app, list(args))
    return SimpleNamespace(returncode=result.exit_code, stdout=result.stdout, stderr=result.stderr)


def test_min_moves_rows_are_queried_by_question(tmp_path):
    # OEIS A127500 (G. I. Bell, "Solving Triangular Peg Solitaire", JIS 11 (2008)):
    # on T_4 the fewest moves over all one-vacancy starts and finishes are 5.
    rows = []
    for start in range(1, peg.holes(4) + 1):
        for question in ("min_moves", "solve"):
            params = make_params(peg.Params, {"side": 4, "start": start, "question": question})
            row = solve_instance(Instance("peg_solitaire", params), "frontier", Limits(20))
            row.update(run_id="r1", sweep="t", puzzlesweep_version="0", schema_version=3)
            rows.append(row)
    assert catalog.write_batch(tmp_path, peg.Params, rows, "r1-00000")
    _, found = catalog.query(
        tmp_path,
        "SELECT min(objective), count(*), count(*) FILTER (verified), any_value(solver) "
        "FROM results WHERE question = 'min_moves' AND status = 'optimal'",
    )
    # Starts with no solution are infeasible rows; the fewest over the others is 5.
    fewest, count, verified, solver = found[0]
    assert (fewest, solver) == (5, "frontier") and count == verified > 0
    _, questions = catalog.query(
        tmp_path, "SELECT DISTINCT question FROM results ORDER BY question"
    )
    assert questions == [("min_moves",), ("solve",)]


def test_the_command_line_takes_question_and_refuses_objective():
    done = cli("solve", "peg_solitaire", "side=4", "start=2", "question=min_moves", "--json")
    assert done.returncode == 0, done.stderr
    refused = cli("solve", "peg_solitaire", "side=4", "start=2", "objective=min_moves")
    assert refused.returncode == 2
    message = refused.stderr + refused.stdout
    assert "objective is not a parameter" in message and "question=min_moves" in message


def test_a_spec_takes_question_and_refuses_objective():
    head = 'name = "x"\n[[study]]\nfamily = "peg_solitaire"\n[study.grid]\nside = 4\nstart = 2\n'
    assert len(parse(head + 'question = ["min_moves", "solve"]\n').jobs) == 2
    with pytest.raises(BadInput) as error:
        parse(head + 'objective = "min_moves"\n', "old.toml")
    text = str(error.value)
    assert text.startswith("old.toml: ") and "study 1" in text
    assert "objective is not a parameter" in text and "called question" in text
