"""The seed values through `puzzlesweep solve`, as a user types it, and bad input."""

import json

import pytest

from .conftest import cli, limit_held, solve_json


@pytest.mark.parametrize(
    "family, params, objective",
    [
        # Seed 000: 3x3x3, 14 and 13 balls -> 4 monochromatic lines.
        ("monochromatic_lines", ["n=3", "d=3", "counts=14,13"], 4),
        # Seed 001: no five in a row, 6x7 -> 8 and 13x17 -> 44 removals.
        ("no_k_in_row", ["dims=6,7", "k=5"], 8),
        ("no_k_in_row", ["dims=13,17", "k=5"], 44),
        # Seed 004: knights dominating 8x8 -> 12.
        ("domination", ["piece=knight", "rows=8", "cols=8"], 12),
        # Seed 003: T_5 with hole 1 empty is solved to one peg.
        ("peg_solitaire", ["side=5", "start=1"], 1),
        # OEIS A127500: T_5 in 9 moves (from hole 4).
        ("peg_solitaire", ["side=5", "start=4", "question=min_moves"], 9),
    ],
)
def test_seed_values_through_solve(family, params, objective):
    result = solve_json(family, *params)
    assert result["family"] == family
    assert (result["status"], result["objective"], result["verified"]) == (
        "optimal",
        objective,
        True,
    )
    assert result["bound"] == pytest.approx(objective)
    assert len(result["instance_key"]) == 16 and result["solution"]


def test_open_seed_instance_stops_at_its_time_limit_with_incumbent_and_bound():
    # Seed 001: 6x7x6 with k = 5 is open, between 54 and 64; within 5 s HiGHS holds an
    # incumbent and a bound above the LP value 50.4.
    result = solve_json("no_k_in_row", "dims=6,7,6", "k=5", time_limit=5)
    assert result["status"] == "time_limit" and result["verified"] is True
    assert 54 <= result["objective"] <= 70 and 50 <= result["bound"] < result["objective"]
    assert 4.5 <= result["solve_seconds"] and limit_held(result["solve_seconds"], 5)


def test_text_output_draws_the_solution():
    done = cli("solve", "domination", "rows=8", "cols=8")
    assert done.returncode == 0
    board = [line.split() for line in done.stdout.splitlines()[-8:]]
    assert sum(row.count("N") for row in board) == 12
    assert all(len(row) == 8 for row in board)


@pytest.mark.parametrize(
    "args, word",
    [
        (["sudoku", "n=3"], "unknown family 'sudoku'"),
        (["domination", "rows=8", "cols=8", "piece=dragon"], "piece"),
        (["no_k_in_row", "dims=6,7", "k=0"], "k must be at least 1"),
        (["monochromatic_lines", "n=3", "d=3", "counts=14,12"], "counts must sum to n^d = 27"),
        (["monochromatic_lines", "n=50", "d=6", "counts=1"], "n^d = 15,625,000,000 cells"),
        (["peg_solitaire", "side=5", "start=16"], "start hole 16 is not on T_5"),
        (["domination", "rows=8", "cols"], "'cols' is not of the form key=value"),
        (["domination", "rows=8", "cols=8", "--solver", "backtrack"], "solver auto, highs, scip"),
        (["domination", "rows=8", "cols=8", "--time-limit", "0"], "time_limit must be a finite"),
        (["domination", "rows=8", "cols=8", "--time-limit", "inf"], "got inf"),
        (
            ["domination", "rows=8", "cols=8", "colour=2"],
            "colour: unknown key (got 2); the keys are piece, rows, cols, variant",
        ),
        (
            ["domination", "rows=8", "cols=8", "--picture", "/nonexistent-folder/x.png"],
            "the folder of '/nonexistent-folder/x.png' does not exist",
        ),
        # after the solve, these were a FileNotFoundError and an IsADirectoryError
        (["domination", "rows=8", "cols=8", "--picture", "/proc/x.png"], "created in /proc"),
        # printed as given: no Rich markup (a traceback) nor emoji codes
        (["domination", "rows=3", "cols=3", "piece=:family:[/red]"], "(got ':family:[/red]')"),
    ],
)
def test_bad_input_exits_2_naming_the_parameter(args, word):
    done = cli("solve", *args)
    assert done.returncode == 2, done.stdout
    assert word in done.stderr
    assert done.stdout == ""


def test_a_picture_path_that_is_a_directory_exits_2_before_the_solve(tmp_path):
    folder = tmp_path / "board.png"
    folder.mkdir()
    done = cli("solve", "domination", "rows=8", "cols=8", "--picture", str(folder))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"error: domination: --picture: {str(folder)!r} is a directory\n"


def test_json_output_is_one_object():
    done = cli("solve", "domination", "rows=4", "cols=4", "--json")
    keys = {
        "family",
        "params",
        "instance_key",
        "solver",
        "status",
        "objective",
        "bound",
        "verified",
        "solve_seconds",
        "solution",
    }
    assert set(json.loads(done.stdout)) == keys


def test_help_shows_whole_option_names_when_not_on_a_terminal():
    # piped, typer drew --help 80 columns wide and cut names: "--dashboard-addr…"
    import typer

    from puzzlesweep.cli import app

    commands = typer.main.get_command(app).commands
    for name in ("run", "prove", "search"):
        done = cli(name, "--help")  # stdout is a pipe
        assert done.returncode == 0, done.stderr
        options = [o for p in commands[name].params for o in p.opts + p.secondary_opts]
        assert "--dashboard-address" in options
        missing = [o for o in options if o.startswith("--") and o not in done.stdout]
        assert not missing and "…" not in done.stdout, (name, missing)
