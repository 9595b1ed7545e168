// The audit drawer: what docs/design.md §Audit meta's meta says about one answer — edge types used,
// what policy withheld and why, prompt (budget) vs payload (policy) exclusions, the
// selector's per-id scores and the stage latencies. Withheld ids arrive as per-request
// placeholders ("withheld-1"); the real ids never reach the browser.

import { chip, facts, fmtNumber, h, stateBox, uid } from "../dom.js";
import { reasonText } from "../errors.js";

function section(title, ...body) {
  const id = uid("audit-h");
  return h("section", { class: "audit-section", "aria-labelledby": id }, h("h3", { id }, title), ...body);
}

function table(caption, columns, rows, cls = "", labelledBy = null) {
  return h(
    "table",
    { class: `data ${cls}`.trim(), "aria-labelledby": labelledBy },
    caption ? h("caption", {}, caption) : null,
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        columns.map((c) => h("th", { scope: "col" }, c)),
      ),
    ),
    h(
      "tbody",
      {},
      rows.map((cells) =>
        h(
          "tr",
          {},
          cells.map((cell, i) => (i === 0 ? h("th", { scope: "row" }, cell) : h("td", {}, cell))),
        ),
      ),
    ),
  );
}

function reason(code) {
  return h(
    "span",
    { class: "reason" },
    h("code", {}, code),
    " ",
    h("span", { class: "reason-text" }, reasonText(code)),
  );
}

function requestSection(meta) {
  const { request = {}, actor = {}, policy = {}, response = {}, runtime = {}, validator = {} } = meta;
  return section(
    "Request",
    facts([
      ["Request id", h("code", {}, request.request_id)],
      ["Trace id", h("code", {}, request.trace_id)],
      ["Role", actor.role],
      ["Policy", `${actor.policy_version || "—"} · ${policy.policy_id || "—"}`],
      ["Answer mode", `${response.mode || "—"} (LLM ${policy.llm ? policy.llm.mode : "—"})`],
      ["Fallback", runtime.fallback_used ? reason(runtime.fallback_reason || "unknown") : "none"],
      ["Validator", validator.error_count ? `${validator.error_count} missing field(s)` : "meta complete"],
    ]),
  );
}

function edgeSection(meta) {
  const used = meta.policy_trace?.edge_types_used || [];
  const allowed = meta.policy?.edge_allowlist || [];
  return section(
    "Edge types used",
    used.length
      ? h(
          "p",
          { class: "chips", "aria-label": "Edge types walked" },
          used.map((t) => chip(t, `edge-${t.toLowerCase()}`)),
        )
      : stateBox("empty", "No edges walked", "The answer rests on the anchor alone."),
    h("p", { class: "hint" }, `Your role may walk: ${allowed.join(", ") || "none"}.`),
  );
}

function withheldSection(meta) {
  const trace = meta.policy_trace || {};
  const counts = trace.counts || {};
  const byReason = new Map();
  for (const [id, code] of Object.entries(trace.reasons_by_id || {})) {
    if (!byReason.has(code)) byReason.set(code, []);
    byReason.get(code).push(id);
  }
  return section(
    "Withheld by policy",
    h(
      "p",
      { class: "counts" },
      h(
        "span",
        { class: "count", dataset: { count: "hidden-vertices" } },
        h("strong", {}, String(counts.hidden_vertices ?? 0)),
        " hidden items",
      ),
      h(
        "span",
        { class: "count", dataset: { count: "hidden-edges" } },
        h("strong", {}, String(counts.hidden_edges ?? 0)),
        " hidden edges",
      ),
    ),
    byReason.size
      ? table(
          "Reasons (withheld ids are placeholders)",
          ["Reason", "Count", "Items"],
          [...byReason].map(([code, ids]) => [reason(code), String(ids.length), ids.join(", ")]),
          "withheld-reasons",
        )
      : stateBox("empty", "Nothing withheld", "Every neighbour your walk reached was visible to your role."),
  );
}

function exclusionTable(title, rows, emptyTitle, cls) {
  const id = uid("excl-h");
  return h(
    "div",
    { class: cls },
    h("h4", { id }, title),
    rows.length
      ? table(
          null,
          ["Item", "Reason"],
          rows.map((r) => [h("code", {}, r.id), reason(r.reason)]),
          "",
          id,
        )
      : stateBox("empty", emptyTitle),
  );
}

function exclusionSection(meta) {
  const sets = meta.evidence_sets || {};
  const counts = meta.evidence_counts || {};
  return section(
    "Exclusions: prompt vs payload",
    facts([
      ["Pool (found)", String(counts.pool?.total ?? "—")],
      ["In the prompt", String(counts.prompt_included?.total ?? "—")],
      ["In the payload", String(counts.payload_serialized?.total ?? "—")],
    ]),
    exclusionTable(
      "Prompt exclusions (budget and selector)",
      sets.prompt_excluded_ids || [],
      "Nothing clipped: every ranked item fit the token budget.",
      "prompt-exclusions",
    ),
    exclusionTable(
      "Payload exclusions (policy)",
      sets.payload_excluded_ids || [],
      "Nothing withheld from the payload.",
      "payload-exclusions",
    ),
  );
}

function scoresSection(meta, titles) {
  const metrics = meta.selection_metrics || {};
  const scores = Object.entries(metrics.scores || {}).sort((a, b) => (b[1].score ?? 0) - (a[1].score ?? 0));
  const included = new Set(meta.evidence_sets?.prompt_included_ids || []);
  if (!scores.length) {
    return section(
      "Selector scores",
      stateBox("empty", "Nothing to rank", "The anchor had no visible neighbours."),
    );
  }
  return section(
    "Selector scores",
    h("p", { class: "hint" }, `Ranking policy ${metrics.ranking_policy || "—"}; highest first.`),
    h(
      "ol",
      { class: "scores" },
      scores.map(([id, s]) =>
        h(
          "li",
          { dataset: { id } },
          h(
            "p",
            { class: "score-head" },
            h("strong", { class: "score" }, fmtNumber(s.score)),
            h("span", { class: "score-title" }, titles.get(id) || id),
            chip(included.has(id) ? "in prompt" : "excluded", included.has(id) ? "chip-cited" : ""),
          ),
          h(
            "p",
            { class: "score-signals" },
            h("code", {}, id),
            " · ",
            Object.entries(s)
              .filter(([k]) => k !== "score")
              .map(([k, v]) => `${k} ${fmtNumber(v, 2)}`)
              .join(" · "),
          ),
        ),
      ),
    ),
  );
}

function latencySection(meta) {
  const runtime = meta.runtime || {};
  const stages = Object.entries(runtime.stage_latencies_ms || {});
  const max = Math.max(1, ...stages.map(([, ms]) => Number(ms) || 0));
  return section(
    "Stage latencies",
    h(
      "ul",
      { class: "bars", "aria-label": "Milliseconds per stage" },
      stages.map(([stage, ms]) =>
        h(
          "li",
          {},
          h("span", { class: "bar-label" }, stage),
          h("span", {
            class: "bar",
            style: `--bar: ${Math.max(2, (100 * (Number(ms) || 0)) / max)}%`,
            "aria-hidden": "true",
          }),
          h("span", { class: "bar-value" }, `${fmtNumber(ms, 1)} ms`),
        ),
      ),
    ),
    h(
      "p",
      { class: "hint" },
      `Total ${fmtNumber(runtime.latency_ms_total, 1)} ms, ${runtime.retries ?? 0} retries.`,
    ),
  );
}

function budgetSection(meta) {
  const b = meta.budgets || {};
  const passes = meta.truncation_metrics?.passes || [];
  const fp = meta.fingerprints || {};
  return section(
    "Budget and fingerprints",
    facts([
      ["Context window", String(b.context_window ?? "—")],
      [
        "Completion / guard / overhead",
        `${b.desired_completion_tokens ?? "—"} / ${b.guard_tokens ?? "—"} / ${b.overhead_tokens ?? "—"}`,
      ],
      [
        "Gate passes",
        passes.map((p) => `${p.prompt_tokens}/${p.max_prompt_tokens} → ${p.action}`).join("; "),
      ],
      ["Prompt fingerprint", h("code", { class: "fp", title: fp.prompt_fp }, fp.prompt_fp)],
      ["Bundle fingerprint", h("code", { class: "fp", title: fp.bundle_fp }, fp.bundle_fp)],
    ]),
  );
}

/** The drawer's content for one answer's meta; `titles` maps visible ids to their titles. */
export function auditContent(meta, titles = new Map()) {
  return h(
    "div",
    { class: "audit-content" },
    requestSection(meta),
    edgeSection(meta),
    withheldSection(meta),
    exclusionSection(meta),
    scoresSection(meta, titles),
    latencySection(meta),
    budgetSection(meta),
  );
}
