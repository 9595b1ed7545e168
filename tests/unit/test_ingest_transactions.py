"""How ``ingest_packets`` splits its embedding chunks into transactions (docs/design.md §Dossier queries)."""

from __future__ import annotations

import pytest

from cairn.memory.dossiers.governor import TRANSACTION_CHUNKS, _transactions
from cairn.memory.dossiers.models import FactPacket


@pytest.mark.parametrize("n", range(1, 40))
def test_transactions_cover_every_chunk_once_and_start_and_end_small(n: int) -> None:
    chunks: list[list[FactPacket]] = [[] for _ in range(n)]
    spans = _transactions(chunks)
    assert [c for start, end in spans for c in range(start, end)] == list(range(n))
    sizes = [end - start for start, end in spans]
    assert max(sizes) <= max(TRANSACTION_CHUNKS)
    # routing starts after one chunk is embedded, and only one chunk is left to route once the
    # model has embedded the last
    assert sizes[0] == 1
    assert sizes[-1] == 1


def test_a_long_ingest_takes_the_largest_transactions_between_its_ends() -> None:
    spans = _transactions([[] for _ in range(20)])
    assert [end - start for start, end in spans] == [1, 2, 4, 4, 4, 2, 2, 1]
