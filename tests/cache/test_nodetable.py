"""NodeTable's generation (app/cache/nodetable.py): it moves exactly when the name <-> row mapping changes,
which is what results kept by row or by a name list (the extender's kept batch, the HostPriorityList
entries by row) are checked against."""

from __future__ import annotations

from app.cache.nodetable import NodeTable


def test_generation_moves_when_a_name_gets_or_loses_a_row() -> None:
    table = NodeTable(initial_capacity=1)
    g0 = table.generation
    row_a = table.add("a")
    g1 = table.generation
    assert g1 != g0
    assert table.add("a") == row_a and table.generation == g1  # a known name: same row, no move
    table.column("x")[row_a] = 5  # column writes do not move it
    table.add("b")  # grows the columns
    g2 = table.generation
    assert g2 != g1
    assert table.remove("missing") is None and table.generation == g2
    assert table.remove("a") == row_a
    g3 = table.generation
    assert g3 != g2
    assert table.add("c") == row_a  # the freed row is reused by another name
    assert table.generation not in (g0, g1, g2, g3)
