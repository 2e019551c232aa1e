"""The proven optima behind no_k_in_row's sub-box cuts, and the published terms that
source them, read by `puzzlesweep.puzzles.no_k_in_row` (`cited`, `published`,
`subbox_cuts`).

Each table is a staircase: every entry proven by no_k_in_row's MIP with the cuts of
strictly smaller entries only, in order of size (benchmarks/README.md:
staircase_bench.py); so SCIP proved the k = 3 boards up to 12×12 (70 removed, 74 kept:
A181018) and the k = 5 boxes up to 5×6×6 (43). A certificate lists the entries its
model used, each with its source: the published term (`published`, from `A181018` and
`A181019` as transcribed from their OEIS entries) or the entry's own certificate under
certificates/ (`CERTIFIED`).
"""

import itertools
from types import MappingProxyType

from puzzlesweep.citation import Certified, Cited, Published

#: Proven optima of no three in a row on a×b boards, 3 <= a <= b <= 12 but 12×12 (70:
#: certificates/no_k_in_row-12x12-k3.json), each proven by no_k_in_row's own MIP with
#: SCIP in order of area using only the cuts of strictly smaller boards, so the chain of
#: proofs is sound (benchmarks/staircase_bench.py). Each entry's source: the
#: published term (`published`: A181018 for the squares, A181019's printed rows 3..10
#: for the rest) or, for 11×12 which no printed term covers, its own certificate
#: (`CERTIFIED`). Re-proven in tests/test_families.py.
THREE_IN_ROW = {
    (3, 3): 3, (3, 4): 5, (3, 5): 6, (3, 6): 8, (3, 7): 9, (3, 8): 10, (3, 9): 12,
    (3, 10): 13, (4, 4): 7, (4, 5): 8, (4, 6): 11, (4, 7): 12, (4, 8): 14, (4, 9): 16,
    (4, 10): 18, (5, 5): 9, (5, 6): 13, (5, 7): 15, (5, 8): 16, (5, 9): 20, (5, 10): 22,
    (6, 6): 16, (6, 7): 19, (6, 8): 22, (6, 9): 25, (6, 10): 28, (7, 7): 23, (7, 8): 26,
    (7, 9): 30, (7, 10): 33, (8, 8): 28, (8, 9): 34, (8, 10): 38, (9, 9): 39, (9, 10): 43,
    (3, 11): 14, (3, 12): 16, (4, 11): 20, (4, 12): 22, (5, 11): 23, (5, 12): 27, (6, 11): 30,
    (6, 12): 34, (7, 11): 36, (7, 12): 40, (8, 11): 40, (8, 12): 46, (9, 11): 47, (9, 12): 52,
    (10, 10): 48, (10, 11): 52, (10, 12): 58, (11, 11): 57, (11, 12): 64,
}  # fmt: skip

#: Proven optima of five in a row, keyed by sorted sides. (1, a, b): the a×b board as a
#: slab of a 3-D box, holding exactly that board's windows (slabs 2..4 thick add no cut);
#: proven by SCIP and by `exhaustive`'s search. The boxes: proven by no_k_in_row's MIP
#: with the cuts of strictly smaller entries only, in order (staircase_bench.py --k 5).
#: No OEIS sequence holds them: an entry's source is its own certificate (`CERTIFIED`),
#: where one is shipped.
FIVE_IN_ROW = {
    (1, 5, 5): 5, (1, 5, 6): 6, (1, 5, 7): 7, (1, 6, 6): 7, (1, 6, 7): 8, (1, 7, 7): 9,
    (5, 5, 5): 28, (5, 5, 6): 34, (5, 5, 7): 40, (5, 6, 6): 43,
}  # fmt: skip

#: The sub-box cuts' proven optima, {(k, sorted dims): h}: FIVE_IN_ROW, THREE_IN_ROW.
SUBBOX_OPTIMA = MappingProxyType(
    {(5, shape): h for shape, h in FIVE_IN_ROW.items()}
    | {(3, shape): h for shape, h in THREE_IN_ROW.items()}
)

#: The entries of SUBBOX_OPTIMA proven by a certificate of their own, a file under
#: certificates/ (`citation.Certified`): those no published term covers.
CERTIFIED = MappingProxyType(
    {
        (3, (11, 12)): "no_k_in_row-11x12-k3.json",
        (5, (1, 5, 5)): "no_k_in_row-5x5-k5.json",
        (5, (1, 6, 7)): "no_k_in_row-6x7-k5.json",
        (5, (5, 5, 5)): "no_k_in_row-5x5x5-k5.json",
    }
)

#: OEIS A181018 (https://oeis.org/A181018), n = 1..16: the most stones kept on an n×n
#: board with no three in a row along a row, column or diagonal (its DATA line).
A181018 = (1, 4, 6, 9, 16, 20, 26, 36, 42, 52, 64, 74, 86, 100, 114, 130)

#: OEIS A181019 (https://oeis.org/A181019) T(n, m): the most stones kept on an n×m board
#: with no three in a row; rows n = 1..10, columns m = 1..21, as its EXAMPLE prints the
#: table (its b-file reaches further; only these printed rows are transcribed here).
A181019 = (
    (1, 2, 2, 3, 4, 4, 5, 6, 6, 7, 8, 8, 9, 10, 10, 11, 12, 12, 13, 14, 14),
    (2, 4, 4, 6, 8, 8, 10, 12, 12, 14, 16, 16, 18, 20, 20, 22, 24, 24, 26, 28, 28),
    (2, 4, 6, 7, 9, 10, 12, 14, 15, 17, 19, 20, 22, 24, 25, 27, 29, 30, 32, 34, 35),
    (3, 6, 7, 9, 12, 13, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34, 37, 39, 41, 43, 45),
    (4, 8, 9, 12, 16, 17, 20, 24, 25, 28, 32, 33, 36, 40, 41, 44, 48, 49, 52, 56, 57),
    (4, 8, 10, 13, 17, 20, 23, 26, 29, 32, 36, 38, 41, 45, 48, 51, 54, 57, 60, 63, 66),
    (5, 10, 12, 16, 20, 23, 26, 30, 33, 37, 41, 44, 48, 51, 55, 58, 62, 65, 69, 72, 76),
    (6, 12, 14, 18, 24, 26, 30, 36, 38, 42, 48, 50, 54, 60, 62, 66, 72, 74, 78, 84, 86),
    (6, 12, 15, 20, 25, 29, 33, 38, 42, 47, 52, 56, 60, 66, 70, 74, 79, 83, 88, 92, 96),
    (7, 14, 17, 22, 28, 32, 37, 42, 47, 52, 58, 62, 67, 72, 77, 82, 87, 92, 98, 102, 107),
)


def published(k: int, sides: tuple[int, ...]) -> Published | None:
    """The published term that gives the optimum of a box of canonical `sides` (sorted,
    none of 1) with run length `k`, or None: for k = 3 on a board of sides n <= m (or a
    single row of m), A181018(n) for a square, else A181019 T(n, m) from its printed
    rows; the optimum is cells − the stones kept."""
    if k != 3 or len(sides) > 2:
        return None
    n, m = ((1, *sides))[-2:]
    if n == m and n <= len(A181018):
        return Published("A181018", (n,), A181018[n - 1], n * m - A181018[n - 1])
    if n <= len(A181019) and m <= len(A181019[0]):
        term = A181019[n - 1][m - 1]
        return Published("A181019", (n, m), term, n * m - term)
    return None


def fits(shape: tuple[int, ...], dims: tuple[int, ...]) -> bool:
    """Does a box of sides `shape` fit in `dims`, in some axis order, as a strict
    sub-box (the cuts `no_k_in_row.subbox_cuts` makes of it)?"""
    return len(shape) == len(dims) and any(
        oriented != dims and all(a <= b for a, b in zip(oriented, dims, strict=True))
        for oriented in set(itertools.permutations(shape))
    )


def cited(k: int, dims: tuple[int, ...]) -> list[Cited]:
    """The values no_k_in_row's `model` of a box `dims` with run length `k` trusts (the
    entries of SUBBOX_OPTIMA it makes cuts of, in the table's order), each with its
    source: `published` where a printed term gives it, else its certificate in
    CERTIFIED, else None (a certificate citing it fails its check)."""
    values = []
    for (kk, shape), h in SUBBOX_OPTIMA.items():
        if kk == k and fits(shape, dims):
            term = published(kk, tuple(side for side in shape if side >= 2))
            certified = Certified(CERTIFIED[kk, shape]) if (kk, shape) in CERTIFIED else None
            values.append(Cited({"dims": list(shape), "k": kk}, h, term or certified))
    return values
