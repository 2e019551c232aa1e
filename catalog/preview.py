"""A bounded look at a query's answer, for a table at a terminal: its first rows, its
text values cut, and how many rows it has, read in one pass that holds only those rows
(a query can answer gigabytes: `SELECT repeat('x', 1000000000)`, or every run's full
spec text, drew 6.8 GB at a terminal before). DuckDB's own CLI shows the same: the first
rows and a count of the rest.
"""

from dataclasses import dataclass

from puzzlesweep.catalog.read import CatalogLike, _fresh

#: Rows read from DuckDB at a time while counting the rest.
BATCH_ROWS = 10_000


@dataclass(frozen=True)
class Preview:
    """`columns` (names), the first `rows` (tuples; a text value longer than the limit
    asked for is cut to one character over it, so a printer can mark the cut), and
    `total`, the rows of the whole answer."""

    columns: list[str]
    rows: list[tuple]
    total: int


def preview(
    catalog: CatalogLike, sql: str, rows: int, chars: int, as_of: int | str | None = None
) -> Preview:
    """The first `rows` rows of `sql` over one snapshot (as `read.query`), every text
    value cut to `chars + 1` characters inside DuckDB, and the count of all its rows.
    Raises as `read.query` does."""

    def look(shot) -> Preview:
        relation = shot.relation(sql)
        with shot._errors():
            cut = [
                f"left(#{i}, {chars + 1})" if str(kind) == "VARCHAR" else f"#{i}"
                for i, kind in enumerate(relation.types, 1)
            ]
            first, total = [], 0
            for batch in relation.project(", ".join(cut)).to_arrow_reader(BATCH_ROWS):
                wanted = batch.slice(0, max(0, rows - len(first)))
                columns = [column.to_pylist() for column in wanted.columns]
                first.extend(zip(*columns, strict=True))
                total += batch.num_rows
        return Preview(list(relation.columns), first, total)

    return _fresh(catalog, look, as_of)
