"""Who decides append-or-create: the deterministic rule, optionally overridden by an LLM.

Both sit behind one interface, ``Adjudicator.decide(packet, candidates, proposal)``. The rule
(``voting.decide``) always produces the proposal; an adjudicator may return a different
decision. The LLM adjudicator is off unless a caller constructs it with a configured client,
and any failure (no answer, unparseable answer, a target that was not a candidate) keeps the
rule's proposal and says why in the decision's reason, which the journal records.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Protocol

from cairn.memory.dossiers.models import FactPacket
from cairn.memory.dossiers.voting import Candidate, Decision
from cairn.runtime.llm import LLMClient, LLMUnavailable

SYSTEM_PROMPT = (
    "You file facts into dossiers. Answer with one JSON object only: "
    '{"action": "append", "target_dossier_id": "<id>"} or {"action": "create"}.'
)
MAX_TOKENS = 60
_JSON_OBJECT = re.compile(r"\{[^{}]*\}")


class Adjudicator(Protocol):
    name: str

    def decide(self, packet: FactPacket, candidates: Sequence[Candidate], proposal: Decision) -> Decision:
        """Return the decision to apply (``proposal`` when there is nothing to add)."""
        ...


def adjudication_prompt(packet: FactPacket, candidates: Sequence[Candidate]) -> str:
    lines = ["NEW FACTS:"]
    lines += [f"- {f.text}" for f in packet.facts]
    lines.append("CANDIDATE DOSSIERS (best voted first):")
    lines += [
        f"- id={c.dossier_id} title={c.title!r} hits={c.hits} facts_matching={c.supporters}"
        for c in candidates
    ]
    lines.append(
        "If the new facts continue one candidate's story, append to it; if they form a distinct "
        "topic, create a new dossier."
    )
    return "\n".join(lines)


def parse_adjudication(text: str, candidates: Sequence[Candidate], proposal: Decision) -> Decision:
    """The LLM's decision, or the proposal with the reason the answer could not be used."""
    for match in _JSON_OBJECT.finditer(text):
        try:
            answer = json.loads(match.group(0))
        except ValueError:
            continue
        if not isinstance(answer, dict):
            continue
        action = answer.get("action")
        if action == "create":
            return Decision("create", None, "the LLM judged the facts a distinct topic", "llm")
        if action == "append":
            target = answer.get("target_dossier_id")
            if target in {c.dossier_id for c in candidates}:
                return Decision("append", str(target), "the LLM matched the facts to this dossier", "llm")
            return _fallback(proposal, "the LLM named a dossier that was not a candidate")
    return _fallback(proposal, "the LLM answer held no usable decision")


def _fallback(proposal: Decision, why: str) -> Decision:
    return Decision(proposal.action, proposal.target, f"{proposal.reason} ({why}; rule applied)", "rule")


class LLMAdjudicator:
    """Asks an OpenAI-compatible model; the rule's proposal stands whenever it cannot answer."""

    name = "llm"

    def __init__(self, client: LLMClient) -> None:
        self._client = client

    def decide(self, packet: FactPacket, candidates: Sequence[Candidate], proposal: Decision) -> Decision:
        if not candidates:
            return proposal  # nothing to append to: creating is the only choice
        try:
            result = self._client.complete(SYSTEM_PROMPT, adjudication_prompt(packet, candidates), MAX_TOKENS)
        except LLMUnavailable as exc:
            return _fallback(proposal, str(exc))
        return parse_adjudication(result.text, candidates, proposal)
