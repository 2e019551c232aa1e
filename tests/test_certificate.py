"""Certificates as files: the ones shipped under certificates/ re-check from the file
alone (no catalog), and a tampered certificate is refused naming what is wrong."""

import copy
import json
from pathlib import Path

import pytest

from puzzlesweep import certificate
from puzzlesweep.core import BadInput

from .conftest import ROOT, cli

SHIPPED = ROOT / "certificates"
# (file, params, proven optimum, source)
PROVEN = [
    # the seed's five-in-a-row removal problem: 6×7, k = 5 → 8
    ("no_k_in_row-6x7-k5.json", {"dims": [6, 7], "k": 5}, 8),
    # OEIS A181018: 8×8 keeps 36 with no three in a row, so 64 − 36 = 28 removed
    ("no_k_in_row-8x8-k3.json", {"dims": [8, 8], "k": 3}, 28),
    # the seed's 3-D box: 5×5×5, k = 5 → 28 (also a sub-box cut of no_k_in_row)
    ("no_k_in_row-5x5x5-k5.json", {"dims": [5, 5, 5], "k": 5}, 28),
    # OEIS A181018: 12×12 keeps 74 with no three in a row, so 144 − 74 = 70 removed; one
    # part (the whole MIP with the board staircase's cuts, SCIP)
    ("no_k_in_row-12x12-k3.json", {"dims": [12, 12], "k": 3}, 70),
]


@pytest.mark.parametrize(("name", "params", "optimum"), PROVEN)
def test_shipped_certificates_hold(name, params, optimum):
    document = certificate.load(SHIPPED / name)
    assert (document["family"], document["params"]) == ("no_k_in_row", params)
    claim = document["claim"]
    assert (claim["status"], claim["objective"], claim["bound"]) == ("optimal", optimum, optimum)
    assert document["probe"] is None  # the parts alone prove it, no dual bound on trust
    assert certificate.check(document) == []


def test_a_shipped_certificate_rechecks_and_resolves_on_the_command_line():
    path = str(SHIPPED / "no_k_in_row-6x7-k5.json")
    done = cli("prove", "no_k_in_row", "dims=6,7", "k=5", "--check", "--certificate", path)
    assert done.returncode == 0, done.stderr
    assert "holds: no_k_in_row dims=6,7 k=5 optimal 8 (bound 8)" in done.stdout
    args = ["--check", "--resolve", "--time-limit", "30", "--certificate", path]
    done = cli("prove", "no_k_in_row", "dims=6,7", "k=5", *args)
    assert done.returncode == 0, done.stderr


def tampered(change) -> list[str]:
    """The problems `check` finds in the 6×7 certificate after `change(document)`."""
    document = copy.deepcopy(certificate.load(SHIPPED / "no_k_in_row-6x7-k5.json"))
    change(document)
    return certificate.check(document)


def test_tampered_certificates_are_refused_naming_what_is_wrong():
    def raise_lower(d):  # part 5 (g0=1 g1=1) holds the optimum 8
        d["parts"][5].update(lower=9)

    assert tampered(raise_lower) == [
        "part 5 (g0=1 g1=1): lower limit 9 claimed, 8 follows from its status optimal, "
        "bound 8 and cutoff None"
    ]

    def claim_nine(d):  # part 5 raised to 9 everywhere: parts 7-14 still prove only 8
        d["parts"][5].update(bound=9, lower=9)
        d["claim"].update(objective=9, bound=9)

    assert tampered(claim_nine) == [
        "optimal claimed with objective 9, but the parts prove only 8",
        "the solution does not verify: verifier recomputed 8, not 9",
    ]

    def drop_part(d):
        del d["parts"][14]

    assert tampered(drop_part) == ["14 parts listed, the split has 15"]

    def other_counts(d):
        d["parts"][3]["counts"] = [[0, 0], [4, 4]]

    assert tampered(other_counts) == ["part 3: 'g0=0 g1=3' is not part 3 of the split"]

    def weaker_part(d):  # a part stopped at its limit cannot prove 8
        d["parts"][7].update(status="time_limit", bound=6.5, lower=7)

    assert tampered(weaker_part) == ["optimal claimed with objective 8, but the parts prove only 7"]

    def other_solution(d):  # cell 2 kept: five in a row on row 0
        d["claim"]["solution"] = "11,15,20,24,28,33,37,40"

    [problem] = tampered(other_solution)
    assert problem.startswith("the solution does not verify: verifier: ")

    def text_bound(d):
        d["parts"][5]["bound"] = "eight"

    problems = tampered(text_bound)
    assert problems[0].startswith("part 5 (g0=1 g1=1): not a number")


def test_a_tampered_file_exits_1_and_a_bad_file_exits_2(tmp_path):
    document = certificate.load(SHIPPED / "no_k_in_row-6x7-k5.json")
    # a consistent lie only a re-solve catches: parts 5 and 6 (one stone removed from
    # row 0, one or two from row 5; optima 8 and 9) claimed infeasible without cutoff
    lie = copy.deepcopy(document)
    lie["parts"][5].update(status="infeasible", bound=None, objective=None, lower="inf")
    lie["parts"][6].update(status="infeasible", bound=None, objective=None, lower="inf")
    path = tmp_path / "lie.json"
    certificate.write(path, lie)
    args = ["prove", "no_k_in_row", "dims=6,7", "k=5", "--check", "--certificate", str(path)]
    assert cli(*args).returncode == 0  # without --resolve the engine's word is trusted
    done = cli(*args, "--resolve", "--time-limit", "30")
    assert done.returncode == 1, done.stderr
    assert "part 5 (g0=1 g1=1): re-solved to 8, below the claimed lower limit inf" in done.stderr
    done = cli(*args, "--resolve", "--solver", "highs", "--time-limit", "30")  # another engine
    assert done.returncode == 1, done.stderr
    assert "part 5 (g0=1 g1=1): re-solved to 8, below the claimed lower limit inf" in done.stderr

    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "short.json").write_text(json.dumps({"format": certificate.FORMAT}))
    for name, message in (
        ("bad.json", "is not JSON"),
        ("short.json", "lacks family, params"),
        ("missing.json", "No such file"),
    ):
        done = cli(*args[:-1], str(tmp_path / name))
        assert done.returncode == 2 and message in done.stderr, (name, done.stderr)
    with pytest.raises(BadInput, match="lacks parts\\[0\\].status"):
        broken = copy.deepcopy(document)
        del broken["parts"][0]["status"]
        (tmp_path / "part.json").write_text(json.dumps(broken))
        certificate.load(tmp_path / "part.json")
    done = cli("prove", "no_k_in_row", "dims=6,8", "k=5", *args[4:])
    assert done.returncode == 2 and "certifies no_k_in_row dims=6,7 k=5" in done.stderr
    certificate.write(tmp_path / "family.json", {**document, "family": "domination"})
    done = cli(*args[:-1], str(tmp_path / "family.json"))
    assert done.returncode == 2, done.stderr
    assert "instance (domination and its params) or split is not valid" in done.stderr


def test_write_then_load_round_trips(tmp_path):
    document = certificate.load(SHIPPED / "no_k_in_row-8x8-k3.json")
    certificate.write(tmp_path / "c.json", document)
    assert certificate.load(tmp_path / "c.json") == document
    assert Path(tmp_path / "c.json").read_text().count("\n") < 60  # one line per part


def test_a_claim_the_parts_contradict_is_refused():
    def infeasible(d):  # the parts prove 8 and a solution of 8 is listed
        d["claim"].update(status="infeasible", objective=None, bound=None, solution=None)

    assert tampered(infeasible) == ["infeasible claimed, but the parts prove only 8"]

    def higher_bound(d):
        d["claim"]["bound"] = 9

    assert tampered(higher_bound) == ["optimal claimed with objective 8 but bound 9"]

    def probe_above(d):  # a probe's dual bound above the verified solution's value
        d["probe"] = {"status": "time_limit", "objective": 8, "bound": 100}
        d["claim"]["bound"] = 8

    assert tampered(probe_above) == [
        "the parts and the probe prove 100, above the objective 8 of the claimed solution: "
        "a part's or the probe's limit is false"
    ]


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda d: d["claim"].update(status="bogus"), "claim.status: Input should be 'optimal'"),
        (lambda d: d["parts"][5].update(bound="8"), "parts[5].bound: Input should be a valid"),
        (lambda d: d["parts"][5].update(cutoff="nan"), "parts[5].cutoff: Input should be a"),
        (lambda d: d["claim"].update(objective=10**400), "claim.objective: Input should be"),
        (lambda d: d["parts"][2].update(lower=1e300), "parts[2].lower: Input should be"),
        (lambda d: d.update(probe="x"), "probe: Input should be a valid dictionary"),
        (lambda d: d["claim"].update(solution=5), "claim.solution: Input should be a valid str"),
        (lambda d: d["params"].update(k="5") or d.update(width="3"), "width: Input should be"),
    ],
)
def test_a_field_of_the_wrong_type_is_one_line_naming_it(tmp_path, change, named):
    document = certificate.load(SHIPPED / "no_k_in_row-6x7-k5.json")
    change(document)
    path = tmp_path / "c.json"
    path.write_text(json.dumps(document))
    with pytest.raises(BadInput) as error:
        certificate.load(path)
    assert f"certificate {path}: {named}" in str(error.value)
