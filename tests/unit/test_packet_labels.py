"""A packet's cluster label becomes a dossier title that every reader of the dossier is shown:
it is bounded at input (named in the refusal), and the gardener's own labels stay inside it."""

from __future__ import annotations

import numpy as np
import pytest

from cairn.memory.dossiers.gardener import group_label
from cairn.memory.dossiers.models import MAX_LABEL_CHARS, InputError, parse_packet


def packet(label: str) -> dict[str, object]:
    return {"cluster_label": label, "facts": ["Billing moved to Stripe."], "source_block_id": "b1"}


def test_a_label_at_the_limit_is_taken() -> None:
    assert parse_packet(packet("x" * MAX_LABEL_CHARS)).cluster_label == "x" * MAX_LABEL_CHARS


def test_a_longer_label_is_refused_naming_the_field_and_the_limit() -> None:
    with pytest.raises(InputError) as refused:
        parse_packet(packet("x" * (MAX_LABEL_CHARS + 1)), where="packets.json[3]")
    assert "cluster_label" in str(refused.value)
    assert f"longer than {MAX_LABEL_CHARS} characters" in str(refused.value)
    assert "packets.json[3]" in str(refused.value)


def test_the_gardeners_label_of_one_long_word_fits() -> None:
    text = "Supercalifragilistic" * 100  # one 2,000-character word, as a fact may hold
    label = group_label([text], np.ones((1, 4), dtype=np.float32))
    assert 0 < len(label) <= MAX_LABEL_CHARS
    parse_packet(packet(label))
