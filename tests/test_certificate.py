"""Certificates as files: the ones shipped under certificates/ re-check from the file
alone (no catalog) with the certificates they cite, every value a model trusts is listed
with its source, a part is refuted by any solution found below its claim, and a
tampered certificate is refused naming what is wrong."""

import copy
import json
from datetime import timedelta
from pathlib import Path
from types import MappingProxyType

import pytest

from puzzlesweep import certificate, puzzles
from puzzlesweep.core import BadInput
from puzzlesweep.proof import Proof, build, combined_row, solve_one, write_row
from puzzlesweep.puzzles import _no_k_optima as OPTIMA
from puzzlesweep.recheck import recheck, resolve_part
from puzzlesweep.solvers import Limits

from .conftest import ROOT, cli

NOK = puzzles.get("no_k_in_row")
SHIPPED = ROOT / "certificates"
# (file, params, proven optimum, cited values by source): the sources of the cited values
PROVEN = [
    # the seed's five-in-a-row removal problem: 6×7, k = 5 → 8 (2-D: no sub-box cuts)
    ("no_k_in_row-6x7-k5.json", {"dims": [6, 7], "k": 5}, 8, {}),
    # OEIS A181018: 8×8 keeps 36 with no three in a row, so 64 − 36 = 28 removed; its
    # cuts: the boards up to 7×8, A181018 for the 5 squares, A181019 for the 15 others
    ("no_k_in_row-8x8-k3.json", {"dims": [8, 8], "k": 3}, 28, {"A181018": 5, "A181019": 15}),
    # the 5×5 board, k = 5: one stone off each row (a link of 5×5×5's chain)
    ("no_k_in_row-5x5-k5.json", {"dims": [5, 5], "k": 5}, 5, {}),
    # the seed's 3-D box: 5×5×5, k = 5 → 28; its slab cuts cite the 5×5 board's proof
    (
        "no_k_in_row-5x5x5-k5.json",
        {"dims": [5, 5, 5], "k": 5},
        28,
        {"no_k_in_row-5x5-k5.json": 1},
    ),
    # 11×12, k = 3 → 64 (68 kept): no printed term of A181019 covers it (rows 1..10),
    # so its own proof, the whole MIP with the cuts of the boards up to 11×11
    (
        "no_k_in_row-11x12-k3.json",
        {"dims": [11, 12], "k": 3},
        64,
        {"A181018": 9, "A181019": 44},
    ),
    # OEIS A181018: 12×12 keeps 74 with no three in a row, so 144 − 74 = 70 removed; one
    # part (the whole MIP with the board staircase's 54 cuts, SCIP), 11×12 by its file
    (
        "no_k_in_row-12x12-k3.json",
        {"dims": [12, 12], "k": 3},
        70,
        {"A181018": 9, "A181019": 44, "no_k_in_row-11x12-k3.json": 1},
    ),
]


def sources(document: dict) -> dict[str, int]:
    """How many cited values of `document` each source gives (an OEIS A-number or a
    certificate file)."""
    counts: dict[str, int] = {}
    for entry in document["cited"]:
        source = entry["source"]
        name = source.get("oeis") or source.get("certificate")
        counts[name] = counts.get(name, 0) + 1
    return counts


@pytest.mark.parametrize(("name", "params", "optimum", "cited"), PROVEN)
def test_shipped_certificates_hold_with_their_chains(name, params, optimum, cited):
    document = certificate.load(SHIPPED / name)
    assert (document["family"], document["params"]) == ("no_k_in_row", params)
    claim = document["claim"]
    assert (claim["status"], claim["objective"], claim["bound"]) == ("optimal", optimum, optimum)
    assert document["probe"] is None  # the parts alone prove it, no dual bound on trust
    assert sources(document) == cited
    seen: dict = {}
    assert certificate.check(document, folder=SHIPPED, seen=seen) == []
    chain = {path.name for path in seen}
    assert chain == {file for file in cited if file.endswith(".json")}


def test_a_shipped_certificate_rechecks_and_resolves_on_the_command_line():
    path = str(SHIPPED / "no_k_in_row-6x7-k5.json")
    done = cli("prove", "no_k_in_row", "dims=6,7", "k=5", "--check", "--certificate", path)
    assert done.returncode == 0, done.stderr
    assert "holds: no_k_in_row dims=6,7 k=5 optimal 8 (bound 8); 0 cited values" in done.stdout
    args = ["--check", "--resolve", "--time-limit", "30", "--certificate", path]
    done = cli("prove", "no_k_in_row", "dims=6,7", "k=5", *args)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("name", "dims", "k"),
    [("no_k_in_row-5x5x5-k5.json", "5,5,5", "5"), ("no_k_in_row-8x8-k3.json", "8,8", "3")],
)
def test_the_small_links_resolve_with_their_chains(name, dims, k):
    # every part re-solved by SCIP (seconds each), the cited 5×5 board's too
    args = ["--check", "--resolve", "--time-limit", "60", "--certificate", str(SHIPPED / name)]
    done = cli("prove", "no_k_in_row", f"dims={dims}", f"k={k}", *args)
    assert done.returncode == 0, done.stderr
    assert "holds" in done.stdout


@pytest.mark.slow
def test_the_whole_chain_of_twelve_by_twelve_resolves():
    # 12×12 (70, A181018) and the 11×12 it cites (64), each part solved again by SCIP
    # (minutes each: docs/prove.md, "The shipped certificates and their chains")
    path = str(SHIPPED / "no_k_in_row-12x12-k3.json")
    args = ["--check", "--resolve", "--time-limit", "3000", "--certificate", path]
    done = cli("prove", "no_k_in_row", "dims=12,12", "k=3", *args, timeout=7200)
    assert done.returncode == 0, done.stderr
    assert "cited certificates checked: no_k_in_row-11x12-k3.json" in done.stdout


def forged(dims: list[int], claimed: int, solver: str = "scip") -> dict:
    """A forged `tree:.` certificate of no three in a row on `dims`: one part claiming
    `claimed` (status optimal, bound `claimed`), the model's cited values with their
    true sources, and a valid solution of `claimed` stones removed (the model's start,
    padded with further removed stones: removing more never makes a row)."""
    params = NOK.Params(dims=dims, k=3)
    proof = Proof("no_k_in_row", params.model_dump(), "tree:.", 0, Limits(60), solver=solver)
    removed = set(NOK.start_solution(params))
    assert len(removed) <= claimed
    removed |= set([c for c in range(claimed * 2) if c not in removed][: claimed - len(removed)])
    assert NOK.verify(params, sorted(removed)) == claimed
    part = {"index": 0, "label": "all", "counts": [], "fixings": [], "status": "optimal"}
    return {
        "format": certificate.FORMAT,
        "family": "no_k_in_row",
        "params": params.model_dump(),
        "split": "tree:.",
        "width": 0,
        "solver": solver,
        "key": proof.key,
        "claim": {
            "status": "optimal",
            "objective": claimed,
            "bound": claimed,
            "solution": NOK.encode(sorted(removed)),
        },
        "probe": None,
        "cited": [c.to_json() for c in NOK.cited(params)],
        "parts": [
            {**part, "objective": claimed, "bound": claimed, "cutoff": None, "lower": claimed}
        ],
    }


def test_a_forged_certificate_is_refuted_by_any_solution_whatever_the_status():
    # 11×11, k = 3 claimed 60 (the model's start removes 60); the optimum is 57 (OEIS
    # A181018: 64 of 121 kept). Without --resolve the engine's word is taken.
    document = forged([11, 11], 60)
    assert certificate.check(document) == []
    # HiGHS's root alone finds 58 and stops at its node limit (not optimal, not
    # infeasible): a verified solution inside the part below 60 refutes the part.
    proof = certificate.proof_of(document, solver="highs")
    _, model, split, _ = build(proof)
    limits = Limits(600, node_limit=1)  # deterministic: no wall time involved
    [problem] = resolve_part(proof, model, split, split.parts[0], None, 60, limits)
    assert problem.startswith("part 0 (all): a solution found by highs has objective ")
    assert problem.endswith(", below the claimed lower limit 60: the part's claim is false")
    assert 57 <= int(problem.split("objective ")[1].split(",")[0]) < 60


@pytest.mark.slow
def test_the_forged_eleven_by_eleven_is_rejected_on_the_command_line(tmp_path):
    # the forgery of issue 38, re-solved by a second engine within --time-limit 60: the
    # re-solve stops at its limit (HiGHS took 121.6 s of CPU to prove 11×11), with an
    # incumbent below 60 found at its root
    path = tmp_path / "forged.json"
    certificate.write(path, forged([11, 11], 60))
    args = ["prove", "no_k_in_row", "dims=11,11", "k=3", "--check", "--certificate", str(path)]
    assert cli(*args).returncode == 0
    done = cli(*args, "--resolve", "--solver", "highs", "--time-limit", "60")
    assert done.returncode == 1, done.stderr
    assert "certificate: part 0 (all): a solution found by highs has objective 5" in done.stderr


def test_a_changed_cited_value_is_refused_naming_it(tmp_path, monkeypatch):
    document = certificate.load(SHIPPED / "no_k_in_row-8x8-k3.json")
    p = NOK.Params(dims=[8, 8], k=3)

    def changed(change) -> list[str]:
        copied = copy.deepcopy(document)
        change(next(e for e in copied["cited"] if e["params"]["dims"] == [3, 4]))
        return certificate.check(copied)

    # in the file: the value (5: A181019 T(3,4) = 7 kept of 12), its term, its source
    assert changed(lambda e: e.update(value=6)) == [
        "cited value dims=3,4 k=3 = 6: OEIS A181019(3,4) = 7 gives 5, not 6"
    ]
    assert changed(lambda e: e.update(value=6) or e["source"].update(term=6)) == [
        "cited value dims=3,4 k=3 = 6: the file cites OEIS A181019(3,4) = 6, the published "
        "term is OEIS A181019(3,4) = 7"
    ]
    assert changed(lambda e: e.update(source=None)) == [
        "cited value dims=3,4 k=3 = 5 has no source: neither a published term nor a certificate"
    ]
    square = {"oeis": "A181018", "index": [8], "term": 36}  # 64 − 36 = 28, but not a sub-box
    assert changed(
        lambda e: e.update(params={"dims": [8, 8], "k": 3}, value=28, source=square)
    ) == ["cited value dims=8,8 k=3 = 28 is no strict sub-box of dims=[8, 8] k=3"]
    # in the code's table: the check reads the file, never the table, so the shipped
    # certificate still holds; one written from the changed table names the value
    table = MappingProxyType({**NOK.SUBBOX_OPTIMA, (3, (3, 4)): 6})
    monkeypatch.setattr(NOK, "SUBBOX_OPTIMA", table)
    monkeypatch.setattr(OPTIMA, "SUBBOX_OPTIMA", table)
    assert certificate.check(document) == []
    written = {**document, "cited": [c.to_json() for c in NOK.cited(p)]}
    assert certificate.check(written) == [
        "cited value dims=3,4 k=3 = 6: OEIS A181019(3,4) = 7 gives 5, not 6"
    ]
    # ... and in the code's transcription of the published term
    monkeypatch.undo()
    rows = [list(row) for row in OPTIMA.A181019]
    rows[2][3] = 8
    monkeypatch.setattr(OPTIMA, "A181019", tuple(map(tuple, rows)))
    assert certificate.check(document) == [
        "cited value dims=3,4 k=3 = 5: the file cites OEIS A181019(3,4) = 7, the published "
        "term is OEIS A181019(3,4) = 8"
    ]


def test_a_cited_certificate_is_checked_in_turn(tmp_path):
    # 5×5×5 cites the 5×5 board's certificate for its slab cuts (5 removed)
    for name in ("no_k_in_row-5x5x5-k5.json", "no_k_in_row-5x5-k5.json"):
        certificate.write(tmp_path / name, certificate.load(SHIPPED / name))
    box = certificate.load(tmp_path / "no_k_in_row-5x5x5-k5.json")
    board = certificate.load(tmp_path / "no_k_in_row-5x5-k5.json")
    assert certificate.check(box, folder=tmp_path) == []
    assert certificate.check(box) == [  # no folder to find it in
        "cited value dims=1,5,5 k=5 = 5: cites no_k_in_row-5x5-k5.json, but no folder was "
        "given to find it in"
    ]
    lie = copy.deepcopy(board)  # the board's part claims a lower limit of 6
    lie["parts"][0].update(cutoff=5.0, lower=6)
    lie["claim"].update(objective=6, bound=6)
    certificate.write(tmp_path / "no_k_in_row-5x5-k5.json", lie)
    assert certificate.check(box, folder=tmp_path) == [
        "no_k_in_row-5x5-k5.json: the solution does not verify: verifier recomputed 5, not 6",
        "cited value dims=1,5,5 k=5 = 5: no_k_in_row-5x5-k5.json certifies optimal 6",
    ]
    (tmp_path / "no_k_in_row-5x5-k5.json").unlink()
    [problem] = certificate.check(box, folder=tmp_path)
    assert problem.startswith("cited value dims=1,5,5 k=5 = 5: certificate ")
    assert problem.endswith("no_k_in_row-5x5-k5.json: No such file or directory")
    other = {**board, "params": {"dims": [5, 6], "k": 5}}
    certificate.write(tmp_path / "no_k_in_row-5x5-k5.json", other)
    assert "no_k_in_row-5x5-k5.json certifies another instance" in " ".join(
        certificate.check(box, folder=tmp_path)
    )


def test_a_stored_part_below_its_own_claim_is_refused():
    def own_objective(d):  # part 7 (cutoff 7, infeasible: lower 8) says it found 7
        d["parts"][7].update(objective=7)

    assert tampered(own_objective) == [
        "part 7 (g0=1 g1=3): its own objective 7 lies below its claimed lower limit 8"
    ]


def test_an_old_certificate_is_refused_naming_why(tmp_path):
    document = certificate.load(SHIPPED / "no_k_in_row-6x7-k5.json")
    old = {k: v for k, v in document.items() if k != "cited"}
    (tmp_path / "old.json").write_text(json.dumps({**old, "format": certificate.OLD_FORMAT}))
    with pytest.raises(BadInput, match="does not list the values it trusts: issue it again"):
        certificate.load(tmp_path / "old.json")
    (tmp_path / "bad.json").write_text(json.dumps({**document, "cited": [{"params": {}}]}))
    with pytest.raises(BadInput, match=r"lacks cited\[0\].value"):
        certificate.load(tmp_path / "bad.json")
    broken = {**document, "cited": [{"params": {}, "value": 1, "source": {"oeis": "A1"}}]}
    (tmp_path / "source.json").write_text(json.dumps(broken))
    with pytest.raises(BadInput, match=r"cited\[0\]: a published source needs an index"):
        certificate.load(tmp_path / "source.json")


def test_the_family_cites_every_value_its_model_uses():
    # the model built from the cited values alone is the model of the family's tables
    for dims, k in (([12, 12], 3), ([8, 8], 3), ([5, 5, 5], 5), ([6, 7, 6], 5)):
        p = NOK.Params(dims=dims, k=k)
        assert NOK.model_citing(p, NOK.cited(p)) == NOK.model(p)
    # every k = 3 board of the staircase agrees with its published term, but 11×12,
    # beyond A181019's printed rows, which its own certificate proves
    unpublished = [
        shape
        for shape, value in NOK.THREE_IN_ROW.items()
        if (term := NOK.published(NOK.Params(dims=list(shape), k=3))) is None or term.value != value
    ]
    assert unpublished == [(11, 12)]
    assert NOK.CERTIFIED[3, (11, 12)] == "no_k_in_row-11x12-k3.json"
    # A181018's squares are A181019's diagonal (rows 1..10)
    assert [OPTIMA.A181019[n][n] for n in range(10)] == list(OPTIMA.A181018[:10])


def tampered(change) -> list[str]:
    """The problems `check` finds in the 6×7 certificate after `change(document)`."""
    document = copy.deepcopy(certificate.load(SHIPPED / "no_k_in_row-6x7-k5.json"))
    change(document)
    return certificate.check(document)


def test_tampered_certificates_are_refused_naming_what_is_wrong():
    # every part is infeasible under the cutoff 7 (the model's start removes 8)
    def raise_lower(d):
        d["parts"][5].update(lower=9)

    assert tampered(raise_lower) == [
        "part 5 (g0=1 g1=1): lower limit 9 claimed, 8 follows from its status infeasible, "
        "bound None and cutoff 7.0"
    ]

    def claim_nine(d):  # the parts prove 8 only
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
        d["parts"][5]["lower"] = "eight"

    problems = tampered(text_bound)
    assert problems[0].startswith("part 5 (g0=1 g1=1): not a number")


def test_a_tampered_file_exits_1_and_a_bad_file_exits_2(tmp_path):
    document = certificate.load(SHIPPED / "no_k_in_row-6x7-k5.json")
    # a consistent lie only a re-solve catches: parts 5 and 6 (one stone removed from
    # row 0, one or two from row 5; optima 8 and 9) claimed infeasible without cutoff
    lie = copy.deepcopy(document)
    lie["parts"][5].update(cutoff=None, lower="inf")
    lie["parts"][6].update(cutoff=None, lower="inf")
    path = tmp_path / "lie.json"
    certificate.write(path, lie)
    args = ["prove", "no_k_in_row", "dims=6,7", "k=5", "--check", "--certificate", str(path)]
    assert cli(*args).returncode == 0  # without --resolve the engine's word is trusted
    done = cli(*args, "--resolve", "--time-limit", "30")
    assert done.returncode == 1, done.stderr
    refuted = "below the claimed lower limit inf: the part's claim is false"
    # part 5 holds the model's start (8, no engine needed); the engine finds 9 in part 6
    assert f"part 5 (g0=1 g1=1): the model's start has objective 8, {refuted}" in done.stderr
    assert f"part 6 (g0=1 g1=2): a solution found by scip has objective 9, {refuted}" in (
        done.stderr
    )
    done = cli(*args, "--resolve", "--solver", "highs", "--time-limit", "30")  # another engine
    assert done.returncode == 1, done.stderr
    assert f"part 6 (g0=1 g1=2): a solution found by highs has objective 9, {refuted}" in (
        done.stderr
    )

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
    # one line per cited value (20) and per part (10)
    assert Path(tmp_path / "c.json").read_text().count("\n") < 60 + 20


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


def test_a_part_solved_with_other_cited_values_is_not_exported(tmp_path):
    # 4×4, k = 3 (OEIS A181018: 9 kept, 7 removed) cites the 3×3 and 3×4 boards; its
    # one part is solved and written as prove writes it, in this process
    proof = Proof("no_k_in_row", {"dims": [4, 4], "k": 3}, "tree:.", 0, Limits(60))
    results = str(tmp_path / "results")
    row = solve_one(proof, 0, None, proof.limits, "r1")
    assert write_row(results, proof, row, "0")
    assert write_row(results, proof, combined_row(proof, {0: row}, None, "r1"), "combined")
    document = certificate.export(results, proof)
    assert [e["params"]["dims"] for e in document["cited"]] == [[3, 3], [3, 4]]
    assert (document["claim"]["objective"], certificate.check(document)) == (7, [])
    assert recheck(results, proof) == []
    # the part solved again with another table (its row names other values)
    handle = {**json.loads(row["subproblem"]), "cited": "0123456789abcdef"}
    later = row["finished_at"] + timedelta(seconds=1)  # the newest row of a part counts
    other = {**row, "subproblem": json.dumps(handle), "run_id": "r2", "finished_at": later}
    assert write_row(results, proof, other, "0")
    with pytest.raises(BadInput, match="part 0 \\(all\\) of attempt .* was solved with other"):
        certificate.export(results, proof)
    assert recheck(results, proof) == ["part 0 (all): solved with other cited values than today's"]
