"""``FusionConfig.block_decay`` (review of stop 27).

The decay re-ranks the fused pool by score, one block's n-th fact counting ``decay**(n-1)``:

- with ``distinct_sources`` on it put restatements back among the facts that bring a new source,
  undoing the order the query made. No caller sets the config (the service and the CLI take the
  defaults, decay 1: off), but a variant may not break it: the two together are refused, as is a
  decay outside (0, 1];
- it grouped facts by their stored ``source_block_id``, shown to the caller or not, so a hidden
  block id moved the order a caller saw. Now the block is the one the caller is shown.
"""

from __future__ import annotations

import math
from typing import Any, cast

import pytest

from cairn.memory.dossiers.facts import FactRetriever, FusionConfig, _Candidate
from cairn.policy.profiles import FieldRule, PolicyRegistry
from cairn.policy.scope import Scope
from cairn.runtime.embedder import Embedder
from cairn.runtime.settings import REPO_ROOT


@pytest.mark.parametrize("decay", [0.0, -0.5, 1.5, math.nan])
def test_a_decay_outside_0_to_1_is_refused(decay: float) -> None:
    with pytest.raises(ValueError, match="block_decay must lie in"):
        FusionConfig(block_decay=decay, distinct_sources=False)


def test_a_decay_with_distinct_sources_is_refused() -> None:
    with pytest.raises(ValueError, match="would undo distinct_sources"):
        FusionConfig(block_decay=0.9)
    assert FusionConfig(block_decay=0.9, distinct_sources=False).block_decay == 0.9
    assert FusionConfig().block_decay == 1.0


def hidden_block_scope() -> Scope:
    """Staff, with the facts' source_block_id hidden."""
    staff = PolicyRegistry.load(REPO_ROOT / "fixtures" / "policy" / "roles.yaml").roles["staff"]
    rule = FieldRule(domains=("*",), fields=("id", "text", "domain"))
    return Scope.from_profile(staff.model_copy(update={"fields": {**staff.fields, "Fact": (rule,)}}))


def order(blocks: list[str]) -> list[str]:
    retriever = FactRetriever(
        cast(Any, None), cast(Embedder, object()), FusionConfig(block_decay=0.5, distinct_sources=False)
    )
    pool = [
        _Candidate(
            {"fact": {"id": fid, "text": fid, "domain": "acme/assistant", "source_block_id": block}}, score
        )
        for fid, block, score in zip(["a", "b", "c"], blocks, [1.0, 0.9, 0.8], strict=True)
    ]
    return [c.hit["fact"]["id"] for c in retriever._ranked(hidden_block_scope(), pool, 3)]


def test_a_hidden_block_id_never_moves_the_order() -> None:
    assert order(["x", "x", "y"]) == order(["x", "y", "z"]) == ["a", "b", "c"]
