"""``ask(anchor, intent)``: Pre-Selector → Selector → Budget Gate → Templater or LLM.

docs/design.md §Answer pipeline.

The caller's scope is applied at the source (the Pre-Selector), so every later stage
works on sanitised candidates only. This module assembles the audit meta of docs/design.md §Audit meta
and the trace bundle of §Trace bundles. Two metas exist: the audit meta (withheld ids, on disk,
only in ``bundle_full``) and the caller's meta, where withheld ids are replaced by
per-request placeholders so that no hidden id ever reaches a caller.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import structlog
from neo4j import Driver

from cairn.memory import trace as bundles
from cairn.memory.budget import Budget, GateResult, clip
from cairn.memory.selector import RANKING_POLICY, Selection, select
from cairn.memory.templater import (
    Envelope,
    compose,
    evidence_lines,
    known_ids,
    permissions_note,
    scrub_ids,
    validate_answer,
)
from cairn.policy.passport import Caller
from cairn.policy.preselector import CandidateNode, CandidateSet, PolicyTrace, preselect
from cairn.runtime.llm import LLMClient, LLMUnavailable

Mode = Literal["ask", "query"]
POLICY_ID = "why_v1"
PROMPT_ID = "why_v1.0"
SYSTEM_PROMPT = (
    "You explain why an organisational decision was taken, using only the evidence lines given: "
    "the decision, then each cause with its relation, key in brackets, date and reason. "
    "Name every cause with its relation and its key; do not invent facts or identifiers. "
    "Answer in at most six sentences."
)


@dataclass
class AskResult:
    envelope: dict[str, Any]
    response: dict[str, Any]
    meta: dict[str, Any]
    evidence: list[CandidateNode]


def _sha(value: Any) -> str:
    """A fingerprint of a text, or of a value as canonical JSON (sorted keys, compact, UTF-8)."""
    data = value.encode() if isinstance(value, str) else bundles.canonical_json(value)
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _counts(nodes: list[CandidateNode]) -> dict[str, int]:
    events = sum(1 for n in nodes if n.label == "Event")
    return {"events": events, "total": len(nodes)}


class AskService:
    def __init__(self, driver: Driver, llm: LLMClient, trace_root: Path) -> None:
        self.driver = driver
        self.llm = llm
        self.trace_root = trace_root

    def ask(
        self,
        caller: Caller,
        anchor_id: str,
        intent: str = "why_decision",
        mode: Mode = "ask",
        budget: Budget | None = None,
    ) -> AskResult:
        # Looked up per call, not cached at import: `cairn ask` sets the level before its first ask.
        log = structlog.get_logger("cairn.ask").bind()  # bound once: the proxy would bind per call
        budget = budget or Budget()
        lat: dict[str, float] = {}
        started = time.perf_counter()

        t = time.perf_counter()
        cs, ptrace = preselect(self.driver, caller.scope, anchor_id)
        lat["preselector"] = _ms(t)
        log.info(
            "preselector",
            request_id=caller.request_id,
            policy_key=caller.profile.policy_key,
            edge_types_used=ptrace.edge_types_used,
            neighbours_scanned=ptrace.neighbours_scanned,
            hidden_vertices=ptrace.hidden_vertices,
            hidden_edges=ptrace.hidden_edges,
        )

        t = time.perf_counter()
        selection = select(cs)
        lat["selector"] = _ms(t)
        nodes = cs.by_id()
        log.info(
            "selector",
            request_id=caller.request_id,
            ranking_policy=RANKING_POLICY,
            ordered_sample=[s.id for s in selection.ranked[:5]],
        )

        t = time.perf_counter()
        ranked = [s.id for s in selection.ranked]
        # One scrubbing set for the prompt lines and the card (the walk's edges join visible nodes).
        known = known_ids(cs, ptrace.withheld_ids)
        anchor_line, *lines = evidence_lines(cs, [cs.anchor.id, *ranked], known=known)
        items = list(zip(ranked, lines, strict=True))
        gate = clip(anchor_line, items, budget)
        lat["gate"] = _ms(t)
        log.info(
            "gate",
            request_id=caller.request_id,
            prompt_tokens=gate.prompt_tokens,
            max_prompt_tokens=gate.max_prompt_tokens,
            included=len(gate.included),
            dropped=len(gate.excluded),
        )

        included = [cs.anchor.id, *gate.included]
        withheld = bool(ptrace.withheld_ids)
        # The gate keeps a prefix of the ranked lines (cairn/memory/budget.py: clip).
        prompt = "\n".join([anchor_line, *lines[: len(gate.included)]])

        t = time.perf_counter()
        note = permissions_note(
            [ptrace.reasons_by_id[i] for i in ptrace.withheld_ids], caller.profile.can_see_withheld_counts
        )
        envelope = compose(cs, included, withheld, extra_ids=ptrace.withheld_ids, note=note, known=known)
        answer_problems = validate_answer(envelope, nodes, ptrace.withheld_ids)
        lat["templater"] = _ms(t)
        log.info("templater", request_id=caller.request_id, cited_ids=envelope.cited_ids)

        response, llm_raw, fallback_reason = self._respond(caller, mode, cs, ptrace, envelope, prompt, budget)
        llm_warnings = _check_completion(response, envelope)
        if response["mode"] == "llm":
            lat["llm"] = response.pop("_latency_ms")

        prompt_excluded = [
            *({"id": i, "reason": "duplicate"} for i in selection.duplicates),
            *gate.excluded,
        ]
        evidence = [cs.anchor, *cs.nodes]
        canonical = bundles.pack_evidence(evidence)  # the whole evidence, fingerprinted (bundle_fp)
        run = AskRun(
            caller=caller,
            anchor_id=anchor_id,
            intent=intent,
            mode=mode,
            budget=budget,
            cs=cs,
            ptrace=ptrace,
            selection=selection,
            gate=gate,
            included=included,
            prompt_excluded=prompt_excluded,
            canonical=canonical,
            response=response,
            prompt=prompt,
            lat=lat,
            started=started,
            fallback_reason=fallback_reason,
            answer_problems=answer_problems,
            llm_warnings=llm_warnings,
        )
        audit = audit_meta(run, self.llm.model if self.llm.configured else None)
        envelope_json = {
            "text": envelope.text,
            "permissions_note": envelope.permissions_note,
            "cited_ids": envelope.cited_ids,
            "causes": envelope.causes_json(),
            "more_causes": envelope.more_causes,
        }
        shown = bundles.redact_meta(audit)
        kept = {*included, *envelope.cited_ids}

        def trace() -> dict[str, Any]:
            """The stored trace, built by the trace writer, off the request path, from what this
            ask built and no one changes after it returns. Each piece once (docs/design.md §Trace
            bundles): _meta.json, evidence_pre.json, evidence_post.json, the meta's sections and
            what the meta repeats of the evidence (trace.pack_audit) are rebuilt from these when
            read. The text of the nodes the answer was built from (the anchor, the prompt's lines,
            the cited ids) is stored; the rest of the pool by id, read back from the graph when
            the trace is read and checked against bundle_fp."""
            by_ref = [i for i, n in enumerate(evidence) if i and n.id not in kept]
            return {
                "_meta_audit.json": bundles.pack_audit(audit),
                "envelope.json": envelope_json,
                "evidence_canonical.json": bundles.fragment(bundles.pack_evidence(evidence, by_ref)),
                bundles.EVIDENCE_PRE: {
                    "edges": bundles.pack_edges(cs.edges, evidence),
                    "neighbours_scanned": ptrace.neighbours_scanned,
                },
                "llm_raw.json": llm_raw,
            }

        bundles.submit_trace(self.trace_root, caller, trace)
        return AskResult(envelope=envelope_json, response=shown["response"], meta=shown, evidence=evidence)

    def _respond(
        self,
        caller: Caller,
        mode: Mode,
        cs: CandidateSet,
        ptrace: PolicyTrace,
        envelope: Envelope,
        prompt: str,
        budget: Budget,
    ) -> tuple[dict[str, Any], dict[str, Any] | None, str | None]:
        """Templater unless QUERY mode, the role may use the LLM, and one answers."""
        templated = {
            "mode": "templater",
            "short_answer": envelope.text,
            "llm_completion": None,
            "cited_ids": envelope.cited_ids,
        }
        if mode != "query":
            return templated, None, None
        if not caller.profile.can_use_llm:
            return templated, None, "policy:llm_not_permitted"
        t = time.perf_counter()
        try:
            result = self.llm.complete(SYSTEM_PROMPT, prompt, budget.desired_completion_tokens)
        except LLMUnavailable as exc:
            return templated, None, str(exc)
        # The same rule as the card: only the keys of the records the answer cites may appear.
        cited = set(envelope.cited_ids)
        known = [n.id for n in [cs.anchor, *cs.nodes] if n.id not in cited] + ptrace.withheld_ids
        text = scrub_ids(result.text, known)
        response = {
            "mode": "llm",
            "short_answer": None,
            "llm_completion": {
                "text": text,
                "model": result.model,
                "token_usage": {"prompt": result.prompt_tokens, "completion": result.completion_tokens},
            },
            "cited_ids": envelope.cited_ids,
            "_latency_ms": _ms(t),
        }
        return response, {"model": result.model, "raw": result.raw}, None


@dataclass(frozen=True)
class AskRun:
    """What one ask's stages produced: the audit meta is built from it, section by section."""

    caller: Caller
    anchor_id: str
    intent: str
    mode: Mode
    budget: Budget
    cs: CandidateSet
    ptrace: PolicyTrace
    selection: Selection
    gate: GateResult
    included: list[str]  # the anchor and the ids the gate kept, in prompt order
    prompt_excluded: list[dict[str, str]]
    canonical: bytes  # the evidence as stored (trace.pack_evidence)
    response: dict[str, Any]
    prompt: str
    lat: dict[str, float]
    started: float
    fallback_reason: str | None
    answer_problems: list[str]  # the answer checks' findings: errors
    llm_warnings: list[str]  # causes an LLM completion left unnamed: warnings

    @property
    def pool(self) -> list[CandidateNode]:
        return [self.cs.anchor, *self.cs.nodes]


def audit_meta(run: AskRun, llm_model: str | None) -> dict[str, Any]:
    """The audit meta of docs/design.md §Audit meta, in META_SHAPE's section order."""
    meta: dict[str, Any] = {
        "request": _request(run),
        "actor": _actor(run.caller),
        "policy": _policy(run, llm_model),
        "budgets": _budgets(run.budget),
        "fingerprints": _fingerprints(run),
        "policy_trace": _policy_trace(run.ptrace),
        "evidence_counts": _evidence_counts(run),
        "evidence_sets": _evidence_sets(run),
        "selection_metrics": {
            "ranking_policy": RANKING_POLICY,
            "scores": {s.id: s.row for s in run.selection.ranked},
        },
        "truncation_metrics": {
            "passes": run.gate.passes,
            "selector_truncation": bool(run.selection.duplicates),
            "prompt_selector_truncation": run.gate.truncated,
        },
        "response": {  # prompt_tokens: the prompt is the lines the gate summed
            **{k: v for k, v in run.response.items() if not k.startswith("_")},
            "prompt_tokens": run.gate.prompt_tokens,
        },
        "runtime": _runtime(run),
        "validator": {"error_count": 0, "warnings": []},
        "downloads": _downloads(run.caller),
    }
    contract = validate_meta(meta)
    meta["validator"] = {
        "error_count": contract["error_count"] + len(run.answer_problems),
        "warnings": [*contract["warnings"], *run.answer_problems, *run.llm_warnings],
    }
    return meta


def _request(run: AskRun) -> dict[str, Any]:
    return {
        "intent": run.intent,
        "anchor_id": run.anchor_id,
        "request_id": run.caller.request_id,
        "trace_id": run.caller.trace_id,
        "ts_utc": datetime.now(UTC).isoformat(),
    }


def _actor(caller: Caller) -> dict[str, Any]:
    return {
        "user_id": caller.user_id,
        "role": caller.role,
        "namespaces": list(caller.namespaces),
        "policy_version": caller.policy_version,
        "policy_key": caller.profile.policy_key,
    }


def _policy(run: AskRun, llm_model: str | None) -> dict[str, Any]:
    return {
        "policy_id": POLICY_ID,
        "prompt_id": PROMPT_ID,
        "selector_policy_id": RANKING_POLICY,
        "allowed_ids_policy": {"mode": "include_all", "cap_k": None, "cap_basis": None, "cap_reason": None},
        "edge_allowlist": sorted({r.type for r in run.caller.scope.edges}),
        "llm": {"mode": "off" if run.mode == "ask" else "auto", "model": llm_model},
        "env": {"cite_all_ids": False, "load_shed": False},
    }


def _budgets(budget: Budget) -> dict[str, Any]:
    return {
        "context_window": budget.context_window,
        "desired_completion_tokens": budget.desired_completion_tokens,
        "guard_tokens": budget.guard_tokens,
        "overhead_tokens": budget.overhead_tokens,
    }


def _fingerprints(run: AskRun) -> dict[str, Any]:
    return {
        "prompt_fp": _sha(run.prompt),
        "bundle_fp": "sha256:" + hashlib.sha256(run.canonical).hexdigest(),
        "snapshot_etag": _sha([(n.id, n.fields.get("timestamp")) for n in run.pool]),
    }


def _policy_trace(ptrace: PolicyTrace) -> dict[str, Any]:
    return {
        "withheld_ids": list(ptrace.withheld_ids),
        "reasons_by_id": dict(ptrace.reasons_by_id),
        "counts": {"hidden_vertices": ptrace.hidden_vertices, "hidden_edges": ptrace.hidden_edges},
        "edge_types_used": list(ptrace.edge_types_used),
    }


def _evidence_counts(run: AskRun) -> dict[str, Any]:
    cs, nodes = run.cs, run.cs.by_id()
    return {
        "pool": {
            "anchor": 1,
            "events": sum(1 for n in cs.nodes if n.label == "Event"),
            "transitions": sum(1 for e in cs.edges if e.type == "CAUSAL_PRECEDES"),
            "neighbors": len(cs.nodes),
            "total": len(run.pool),
        },
        "prompt_included": _counts([nodes[i] for i in run.included]),
        "payload_serialized": _counts(run.pool),
    }


def _evidence_sets(run: AskRun) -> dict[str, Any]:
    pool_ids = [n.id for n in run.pool]
    return {
        "pool_ids": pool_ids,
        "prompt_included_ids": run.included,
        "prompt_excluded_ids": run.prompt_excluded,
        "payload_included_ids": list(pool_ids),
        "payload_excluded_ids": [{"id": i, "reason": r} for i, r in run.ptrace.reasons_by_id.items()],
    }


def _runtime(run: AskRun) -> dict[str, Any]:
    return {
        "latency_ms_total": _ms(run.started),
        "stage_latencies_ms": run.lat,
        "fallback_used": run.fallback_reason is not None,
        "fallback_reason": run.fallback_reason,
        "retries": 0,
    }


def _downloads(caller: Caller) -> dict[str, Any]:
    full = caller.profile.can_download_full
    return {
        "artifacts": [
            {
                "name": "bundle_view",
                "allowed": True,
                "reason": None,
                "href": f"/bundles/{caller.request_id}/bundle_view",
            },
            {
                "name": "bundle_full",
                "allowed": full,
                "reason": None if full else "policy:bundle_full_not_permitted",
                "href": f"/bundles/{caller.request_id}/bundle_full" if full else None,
            },
        ]
    }


META_SHAPE: dict[str, tuple[str, ...]] = {
    "request": ("intent", "anchor_id", "request_id", "trace_id", "ts_utc"),
    "actor": ("user_id", "role", "namespaces", "policy_version", "policy_key"),
    "policy": (
        "policy_id",
        "prompt_id",
        "selector_policy_id",
        "allowed_ids_policy",
        "edge_allowlist",
        "llm",
        "env",
    ),
    "budgets": ("context_window", "desired_completion_tokens", "guard_tokens", "overhead_tokens"),
    "fingerprints": ("prompt_fp", "bundle_fp", "snapshot_etag"),
    "policy_trace": ("withheld_ids", "reasons_by_id", "counts", "edge_types_used"),
    "evidence_counts": ("pool", "prompt_included", "payload_serialized"),
    "evidence_sets": (
        "pool_ids",
        "prompt_included_ids",
        "prompt_excluded_ids",
        "payload_included_ids",
        "payload_excluded_ids",
    ),
    "selection_metrics": ("ranking_policy", "scores"),
    "truncation_metrics": ("passes", "selector_truncation", "prompt_selector_truncation"),
    "response": ("mode", "short_answer", "llm_completion", "cited_ids"),
    "runtime": ("latency_ms_total", "stage_latencies_ms", "fallback_used", "fallback_reason", "retries"),
    "validator": ("error_count", "warnings"),
    "downloads": ("artifacts",),
}


def validate_meta(meta: dict[str, Any]) -> dict[str, Any]:
    """Contract completeness: every section and field of the audit meta (docs/design.md §Audit
    meta) is present (null allowed)."""
    missing = [
        f"{section}.{name}" if name else section
        for section, names in META_SHAPE.items()
        for name in (names if section in meta else ("",))
        if section not in meta or name not in meta[section]
    ]
    return {"error_count": len(missing), "warnings": [f"missing {m}" for m in missing]}


def _check_completion(response: dict[str, Any], envelope: Envelope) -> list[str]:
    """The LLM's text is held to the card: it was scrubbed to the cited keys in ``_respond``;
    here, a warning for each cause it leaves unnamed (the card still lists them all)."""
    if response["mode"] != "llm":
        return []
    text = response["llm_completion"]["text"]
    missing = [c.id for c in envelope.causes if c.id not in text and c.title not in text]
    return [f"llm completion leaves out cause {i}" for i in missing]


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 3)
