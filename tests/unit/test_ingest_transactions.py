"""How ``ingest_packets`` cuts its packets into transactions (docs/design.md §Dossier queries)."""

from __future__ import annotations

import pytest

from cairn.memory.dossiers.governor import HEAD_FACTS, MAX_FACTS, TAIL_FACTS, embed_chunks
from cairn.memory.dossiers.models import FactPacket, parse_packet


def packets(sizes: list[int]) -> list[FactPacket]:
    return [
        parse_packet(
            {
                "cluster_label": f"p{n}",
                "facts": [f"fact {n}.{i}" for i in range(size)],
                "source_block_id": "-",
            }
        )
        for n, size in enumerate(sizes)
    ]


def facts(spans: list[list[FactPacket]]) -> list[int]:
    return [sum(len(p.facts) for p in span) for span in spans]


@pytest.mark.parametrize("n", [1, 2, 3, 7, 20, 51, 64, 65, 200, 400])
@pytest.mark.parametrize("size", [1, 3, 5, 10])
def test_every_packet_once_in_order_and_the_end_small(n: int, size: int) -> None:
    sent = packets([size] * n)
    spans = embed_chunks(sent)
    assert [p for span in spans for p in span] == sent
    sizes = facts(spans)
    assert all(sizes)
    assert max(sizes) <= max(MAX_FACTS, size)
    if n * size <= HEAD_FACTS:  # a small ingest is one transaction
        assert sizes == [n * size]
    else:  # little is left to route once the model has embedded the last texts
        assert sizes[-1] <= max(TAIL_FACTS, size)


def test_a_long_ingest_starts_small_takes_the_largest_between_and_halves_towards_its_end() -> None:
    assert facts(embed_chunks(packets([1] * 2000))) == [
        HEAD_FACTS,
        2000 - HEAD_FACTS - 6 * MAX_FACTS - 248,
        *[MAX_FACTS] * 6,
        128,
        64,
        32,
        16,
        8,
    ]


def test_a_packet_larger_than_the_budget_is_a_transaction_of_its_own() -> None:
    assert facts(embed_chunks(packets([3, 70, 2]))) == [3, 70, 2]
    assert facts(embed_chunks(packets([100] * 5 + [1]))) == [100, 100, 100, 100, 100, 1]


def test_nothing_to_ingest_is_no_transaction() -> None:
    assert embed_chunks([]) == []
