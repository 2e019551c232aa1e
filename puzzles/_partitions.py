"""Integer partitions into a given number of parts (not a family).

A family whose parameters include a split of a total among c kinds (the balls of each
colour in `monochromatic_lines`) sweeps every such split once, up to the order of the
kinds: the partitions of the total into exactly c positive parts, each listed in
decreasing order. `count_splits` sizes such a sweep before it is expanded, so a spec's
size limit holds before the work.
"""


def splits(total: int, c: int, most: int | None = None) -> list[list[int]]:
    """Every way to write `total` as c positive parts in decreasing order, in reverse
    lexicographic order: splits(27, 2) = [[26, 1], [25, 2], ..., [14, 13]] (13 of them)."""
    most = total if most is None else most
    if c == 1:
        return [[total]] if 1 <= total <= most else []
    return [
        [first, *rest]
        for first in range(min(total - (c - 1), most), 0, -1)
        for rest in splits(total - first, c - 1, first)
    ]


def count_splits(total: int, c: int, cap: int, most: int | None = None) -> int:
    """len(splits(total, c, most)) without making them, counted up to `cap + 1` (it
    stops there): a spec's size is known before it is expanded."""
    most = total if most is None else most
    if c == 1:
        return int(1 <= total <= most)
    if c == 2:  # first part in [ceil(total / 2), min(total - 1, most)]
        return max(0, min(total - 1, most) - (total + 1) // 2 + 1)
    count = 0
    for first in range(min(total - (c - 1), most), -(-total // c) - 1, -1):
        count += count_splits(total - first, c - 1, cap - count, first)
        if count > cap:
            return cap + 1
    return count
