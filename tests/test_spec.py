"""The sweep spec: grid expansion and errors that name the file, the study and the key."""

import pytest

from puzzlesweep.core import BadInput
from puzzlesweep.flows.spec import expand_grid, load, parse

from .conftest import ROOT, cli


def test_seeds_spec_expands_to_the_seed_instances():
    sweep = load(ROOT / "sweeps" / "seeds.toml")
    by_family = {}
    for job in sweep.jobs:
        by_family.setdefault(job.instance.family, []).append(job)
    # 1 cube, 3 boxes, 1 board, 15 start holes x 2 finish rules.
    assert {k: len(v) for k, v in by_family.items()} == {
        "monochromatic_lines": 1,
        "no_k_in_row": 3,
        "domination": 1,
        "peg_solitaire": 30,
    }
    assert [j.instance.params.dims for j in by_family["no_k_in_row"]] == [
        [6, 7],
        [13, 17],
        [6, 7, 6],
    ]
    assert all(j.limits.time_limit == 60 for j in by_family["no_k_in_row"])


def test_grid_ranges_ties_and_list_values():
    points = expand_grid(
        "domination", {"piece": ["knight", "king"], "rows": "1..3", "cols": "=rows"}
    )
    assert len(points) == 6 and all(p["rows"] == p["cols"] for p in points)
    assert expand_grid("no_k_in_row", {"dims": [[6, 7], [13, 17]], "k": 5}) == [
        {"dims": [6, 7], "k": 5},
        {"dims": [13, 17], "k": 5},
    ]
    assert expand_grid("monochromatic_lines", {"n": 3, "d": 3, "counts": [14, 13]}) == [
        {"n": 3, "d": 3, "counts": [14, 13]}
    ]
    starts = expand_grid("peg_solitaire", {"side": 5, "start": "all"})
    assert [p["start"] for p in starts] == list(range(1, 16))


def test_repeated_instances_are_planned_once():
    text = (
        'name = "twice"\n'
        + '[[study]]\nfamily = "domination"\n[study.grid]\nrows = 3\ncols = 3\n' * 2
    )
    assert len(parse(text).jobs) == 1


def spec(family: str, grid: str, head: str = "") -> str:
    """A one-study spec named x."""
    return f'name = "x"\n[[study]]\nfamily = "{family}"\n{head}[study.grid]\n{grid}\n'


@pytest.mark.parametrize(
    "text, words",
    [
        (spec("sudoku", "n = 3"), ["study 1", "unknown family 'sudoku'"]),
        (spec("domination", "rows = 3"), ["study 1 (domination)", "cols: required, but not given"]),
        (
            spec("monochromatic_lines", "n = 3\nd = 3\ncounts = [14, 12]"),
            ["study 1 (monochromatic_lines)", "counts must sum to n^d = 27"],
        ),
        (spec("domination", 'rows = "5..2"\ncols = 2'), ["rows: range '5..2' is empty"]),
        (spec("domination", 'rows = 3\ncols = "=size"'), ["cols: tied to 'size'"]),
        (spec("domination", "rows = 3\ncols = 3", "time_limit = -1\n"), ["time_limit"]),
        (
            spec("domination", "rows = 3\ncols = 3", 'solver = "backtrack"\n'),
            ["supports solver auto, highs, scip"],
        ),
        ('[[study]]\nfamily = "domination"\n', ["name: required, but not given"]),
        (
            spec("domination", "rows = 3\ncols = 3", "time_limt = 60\n"),
            [
                "study 1.time_limt: unknown key",
                "the keys are family, solver, time_limit, node_limit, count, grid",
            ],
        ),
        (
            spec("domination", "rows = 3\ncols = 3\ncolour = 2"),
            ["colour: unknown key (got 2); the keys are piece, rows, cols, variant"],
        ),
        ('name = "x"\n[[study]\n', ["invalid TOML"]),
    ],
)
def test_invalid_specs_name_the_problem(text, words):
    with pytest.raises(BadInput) as error:
        parse(text, "bad.toml")
    assert str(error.value).startswith("bad.toml: ")
    for word in words:
        assert word in str(error.value)


@pytest.mark.parametrize(
    "body, word",
    [
        (spec("sudoku", "n = 3"), "unknown family 'sudoku'"),
        (spec("domination", "rows = 3"), "cols: required, but not given"),
        (spec("monochromatic_lines", "n = 3\nd = 3\ncounts = [14, 12]"), "counts must sum"),
    ],
)
def test_run_with_an_invalid_spec_exits_2_and_writes_nothing(tmp_path, body, word):
    path = tmp_path / "bad.toml"
    path.write_text(body)
    catalog = tmp_path / "catalog"
    done = cli("run", str(path), "--catalog", str(catalog), timeout=120)
    assert done.returncode == 2
    assert "bad.toml: study 1" in done.stderr and word in done.stderr
    assert not catalog.exists()


def test_run_with_a_missing_spec_exits_2(tmp_path):
    done = cli("run", str(tmp_path / "nowhere.toml"), "--catalog", str(tmp_path / "c"))
    assert done.returncode == 2 and "nowhere.toml: cannot read the spec" in done.stderr


PEG_ALL = 'side = 5\nstart = "all"\n'


@pytest.mark.parametrize(
    "family, grid, words",
    [
        ("domination", 'rows = 3\ncols = "=nosuch"', "cols: tied to 'nosuch', which is not"),
        ("domination", 'rows = "=cols"\ncols = "=rows"', "rows: the ties form a cycle"),
        ("domination", 'rows = "=rows"\ncols = 3', "(rows -> rows)"),
        ("peg_solitaire", PEG_ALL + 'finish = "=nowhere"', "finish: tied to 'nowhere'"),
        ("peg_solitaire", PEG_ALL + 'finish = "=question"\nquestion = "=finish"', "a cycle"),
    ],
)
def test_ties_to_a_missing_or_tied_key_are_one_line_errors(family, grid, words):
    # Each was a KeyError traceback ('nowhere', 'rows') before ties were resolved first.
    with pytest.raises(BadInput) as error:
        parse(spec(family, grid), "ties.toml")
    assert str(error.value).startswith(f"ties.toml: study 1 ({family}): ")
    assert words in str(error.value) and "\n" not in str(error.value)


def test_ties_may_chain_to_a_free_key():
    sweep = parse(spec("peg_solitaire", 'side = 5\nstart = "=side"\nfinish = "=start"'))
    assert [job.instance.params.model_dump() for job in sweep.jobs] == [
        {"side": 5, "start": 5, "finish": "5", "question": "solve"}
    ]


def test_run_with_a_tie_to_a_missing_key_beside_a_family_word_exits_2(tmp_path):
    path = tmp_path / "tie.toml"
    path.write_text(spec("peg_solitaire", PEG_ALL + 'finish = "=nowhere"'))
    catalog = tmp_path / "catalog"
    for dry in ([], ["--dry-run"]):
        done = cli("run", str(path), "--catalog", str(catalog), *dry, timeout=120)
        assert done.returncode == 2, done.stderr  # was 1, with KeyError: 'nowhere'
        assert done.stderr.strip().splitlines() == [
            f"error: {path}: study 1 (peg_solitaire): finish: tied to 'nowhere', "
            "which is not a grid key"
        ]
    assert not catalog.exists()


@pytest.mark.parametrize(
    "grid, head, words",
    [
        ("rows = true\ncols = 3", "", "rows: Input should be a valid integer (got True)"),
        ("rows = 3\ncols = 3", 'count = "yes"\n', "count: Input should be a valid boolean"),
        ("rows = 3\ncols = 3", "node_limit = true\n", "node_limit: Input should be a valid"),
        ("rows = 3\ncols = 3", 'time_limit = "60"\n', "time_limit: Input should be a valid"),
        ('rows = "3"\ncols = 3', "", "rows: Input should be a valid integer (got '3')"),
    ],
)
def test_spec_values_are_taken_as_typed_not_converted(grid, head, words):
    # rows = true ran a 1x3 board, count = "yes" was taken as true
    with pytest.raises(BadInput) as error:
        parse(spec("domination", grid, head), "typed.toml")
    assert words in str(error.value)


def test_spec_integers_stay_valid_where_a_float_is_asked():
    sweep = parse(spec("domination", "rows = 3\ncols = 3", "time_limit = 5\ncount = true\n"))
    [job] = sweep.jobs
    assert job.limits.time_limit == 5.0 and job.count is True
    assert job.instance.params.rows == 3
