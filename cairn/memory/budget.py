"""The Budget Gate: clips the Selector's ranking to the prompt budget, in order, never re-ranking.

The ranking is the explanation the trace gives for why an item made the prompt; if the gate
skipped ahead to a smaller item after an overflow, an item would be in the prompt although a
better-ranked one was not, and the recorded order would no longer explain the answer. So the
first item that does not fit ends the prompt and everything after it is excluded with reason
``token_budget``. The anchor line is always sent: the answer is about the anchor.

Tokens are counted per line and summed (the tokenizer yields nothing for the newlines that
join them), so the logged arithmetic can be re-added by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypedDict

from cairn.runtime.tokens import count_tokens_each

__all__ = ["TOKEN_BUDGET", "Budget", "GatePass", "GateResult", "clip"]

TOKEN_BUDGET = "token_budget"


@dataclass(frozen=True)
class Budget:
    """The token arithmetic of docs/design.md §Answer pipeline, kept whole so the trace can show each term."""

    context_window: int = 2048
    desired_completion_tokens: int = 256
    guard_tokens: int = 64
    overhead_tokens: int = 128

    @property
    def max_prompt_tokens(self) -> int:
        """What is left for evidence; never negative, so a tiny window excludes everything."""
        reserved = self.desired_completion_tokens + self.guard_tokens + self.overhead_tokens
        return max(0, self.context_window - reserved)


class GatePass(TypedDict):
    prompt_tokens: int
    max_prompt_tokens: int
    action: Literal["rank_and_trim", "stop"]


@dataclass(frozen=True)
class GateResult:
    """What the gate decided, shaped like the evidence_sets and truncation_metrics of the meta."""

    included: list[str]
    excluded: list[dict[str, str]]  # {"id", "reason"}, the shape of prompt_excluded_ids
    prompt_tokens: int
    max_prompt_tokens: int
    passes: list[GatePass]
    truncated: bool


def clip(anchor_line: str, items: list[tuple[str, str]], budget: Budget) -> GateResult:
    """Keep the longest prefix of ``items`` (id, rendered line) that fits next to the anchor line.

    ``passes`` records the untrimmed prompt first (``rank_and_trim`` when it overflowed) and the
    prompt actually sent last (``stop``), so the log shows both sides of the cut.
    """
    limit = budget.max_prompt_tokens
    anchor_tokens, *costs = count_tokens_each([anchor_line, *(line for _, line in items)])

    used = anchor_tokens
    fitting = 0
    for cost in costs:
        if used + cost > limit:
            break
        used += cost
        fitting += 1

    passes: list[GatePass] = []
    truncated = fitting < len(items)
    if truncated:
        untrimmed = anchor_tokens + sum(costs)
        passes.append({"prompt_tokens": untrimmed, "max_prompt_tokens": limit, "action": "rank_and_trim"})
    passes.append({"prompt_tokens": used, "max_prompt_tokens": limit, "action": "stop"})
    return GateResult(
        included=[item_id for item_id, _ in items[:fitting]],
        excluded=[{"id": item_id, "reason": TOKEN_BUDGET} for item_id, _ in items[fitting:]],
        prompt_tokens=used,
        max_prompt_tokens=limit,
        passes=passes,
        truncated=truncated,
    )
