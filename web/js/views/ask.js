// Ask: pick an anchor decision, read the answer card (envelope and permissions note),
// the cited evidence, the audit drawer and the role-gated trace bundle downloads.

import { ApiError, downloadBundle, gql } from "../api.js";
import { anchorSearch } from "../anchor-search.js";
import { chip, day, facts, h, jsonText, replace, stateBox, uid } from "../dom.js";
import { errorBox, reasonText } from "../errors.js";
import { labelChip } from "../palette.js";
import { auditContent } from "./audit.js";

const ASK = `query Ask($id: ID!, $mode: AskMode!, $budget: Int) {
  ask(anchorId: $id, mode: $mode, tokenBudget: $budget) {
    envelope { text permissionsNote citedIds causes moreCauses }
    response
    meta
    evidence { id label hop domain title timestamp fields masked }
  }
}`;
const DRAWER_KEY = "cairn.audit-open";
const WIDE_DRAWER = "(min-width: 1181px)"; // matches the drawer-as-column breakpoint in cairn.css

export function renderAsk(main, params, { navigate }) {
  const anchor = params.get("anchor");
  const mode = params.get("mode") === "query" ? "query" : "ask";
  const budget = params.get("budget") || "";

  const go = (changes) => navigate("ask", { anchor, mode, budget, ...changes });
  const options = askOptions(mode, budget, go);
  const picker = h(
    "section",
    { class: "panel picker", "aria-labelledby": "picker-h" },
    h("h2", { id: "picker-h" }, "Anchor decision"),
    anchorSearch({
      label: "Search decisions",
      labels: ["Decision"],
      placeholder: "e.g. sunset on-prem connectors",
      onPick: (node) => go({ anchor: node.id }),
    }),
    options,
  );
  const answer = h("section", { class: "panel answer", "aria-labelledby": "answer-h", "aria-busy": "false" });
  const drawer = h("aside", {
    id: "audit-drawer",
    class: "audit-drawer",
    "aria-labelledby": "audit-h",
    hidden: true,
  });
  const layout = h("div", { class: "ask-layout" }, picker, answer, drawer);
  replace(main, h("h1", { class: "visually-hidden" }, "Ask why"), layout);

  if (!anchor) {
    replace(
      answer,
      h("h2", { id: "answer-h", class: "visually-hidden" }, "Answer"),
      stateBox("empty", "No anchor yet", "Search for a decision and pick it to see why it was taken."),
    );
    return;
  }
  runAsk({ anchor, mode, budget, answer, drawer, layout, navigate });
}

function askOptions(mode, budget, onChange) {
  const modeId = uid("ask-mode");
  const budgetId = uid("ask-budget");
  const modeSelect = h(
    "select",
    { id: modeId, onchange: (e) => onChange({ mode: e.target.value }) },
    h("option", { value: "ask", selected: mode === "ask" }, "ASK — templated answer"),
    h("option", { value: "query", selected: mode === "query" }, "QUERY — LLM answer if your role may"),
  );
  const budgetInput = h("input", {
    id: budgetId,
    type: "number",
    min: "0",
    step: "16",
    inputmode: "numeric",
    value: budget,
    placeholder: "default",
    onchange: (e) => onChange({ budget: e.target.value }),
  });
  return h(
    "div",
    { class: "ask-options" },
    h("div", { class: "field" }, h("label", { for: modeId }, "Mode"), modeSelect),
    h("div", { class: "field" }, h("label", { for: budgetId }, "Token budget"), budgetInput),
  );
}

async function runAsk({ anchor, mode, budget, answer, drawer, layout, navigate }) {
  answer.setAttribute("aria-busy", "true");
  replace(
    answer,
    h("h2", { id: "answer-h", class: "visually-hidden" }, "Answer"),
    stateBox("loading", "Asking why…"),
  );
  let result;
  try {
    const data = await gql(ASK, {
      id: anchor,
      mode: mode.toUpperCase(),
      budget: budget === "" ? null : Number(budget),
    });
    result = data.ask;
  } catch (err) {
    answer.setAttribute("aria-busy", "false");
    replace(answer, h("h2", { id: "answer-h", class: "visually-hidden" }, "Answer"), errorBox(err));
    return;
  }
  answer.setAttribute("aria-busy", "false");
  const toggle = drawerToggle(drawer, layout);
  replace(answer, answerCard(result, toggle, navigate), evidenceSection(result));
  replace(
    drawer,
    h(
      "div",
      { class: "drawer-head" },
      h("h2", { id: "audit-h", tabindex: "-1" }, "Audit"),
      h(
        "button",
        {
          type: "button",
          class: "btn btn-quiet",
          onclick: () => {
            toggle.set(false);
            toggle.button.focus();
          },
        },
        "Close",
      ),
    ),
    auditContent(result.meta, new Map(result.evidence.map((n) => [n.id, n.title || n.id]))),
  );
  // Reopen a drawer left open only where it sits beside the answer, not over it.
  toggle.set(window.localStorage.getItem(DRAWER_KEY) === "open" && window.matchMedia(WIDE_DRAWER).matches);
}

function drawerToggle(drawer, layout) {
  const button = h(
    "button",
    {
      type: "button",
      class: "btn btn-audit",
      "aria-controls": "audit-drawer",
      "aria-expanded": "false",
      onclick: () => set(drawer.hidden, true),
    },
    "Audit",
  );
  function set(open, moveFocus = false) {
    drawer.hidden = !open;
    layout.classList.toggle("drawer-open", open);
    button.setAttribute("aria-expanded", String(open));
    window.localStorage.setItem(DRAWER_KEY, open ? "open" : "closed");
    if (open && moveFocus) drawer.querySelector("h2").focus();
  }
  drawer.addEventListener("keydown", (e) => {
    if (e.key === "Escape") {
      set(false);
      button.focus();
    }
  });
  return { button, set };
}

function answerCard(result, toggle, navigate) {
  const { envelope, response, meta, evidence } = result;
  const anchorNode = evidence.find((n) => n.hop === 0) || evidence[0];
  const note = envelope.permissionsNote;
  const lines = envelope.text.split("\n").filter((line) => line.trim() && line !== note);
  // The "Because:" block is shown as a list of links instead of its text lines.
  const causeLines = lines.filter((line) => line === "Because:" || line.startsWith("- "));
  const opening = lines.filter((line) => !causeLines.includes(line) && !isTail(line));
  const tail = lines.filter((line) => isTail(line));
  const llm = response.mode === "llm" && response.llm_completion;
  const runtime = meta.runtime || {};

  return h(
    "article",
    { class: "card answer-card", dataset: { requestId: meta.request?.request_id || "" } },
    h(
      "header",
      { class: "card-head" },
      h(
        "div",
        {},
        h("p", { class: "eyebrow" }, "Why was this decided?"),
        h("h2", { id: "answer-h" }, anchorNode?.title || meta.request?.anchor_id),
        h(
          "p",
          { class: "card-meta" },
          anchorNode ? labelChip(anchorNode) : null,
          " ",
          [day(anchorNode?.timestamp), anchorNode?.domain, meta.request?.anchor_id]
            .filter(Boolean)
            .join(" · "),
        ),
      ),
      h(
        "div",
        { class: "card-badges" },
        chip(response.mode, "chip-mode"),
        chip(`as ${meta.actor?.role}`, "chip-role"),
      ),
    ),
    llm
      ? h(
          "blockquote",
          { class: "llm-answer" },
          h("p", {}, llm.text),
          h("footer", {}, `LLM answer (${llm.model || "model"}), from the evidence below`),
        )
      : null,
    h(
      "div",
      { class: "envelope", "aria-label": "Answer envelope" },
      opening.map((line) => h("p", {}, line)),
      causeList(envelope, navigate),
      tail.map((line) => h("p", {}, line)),
    ),
    note
      ? h("p", { class: "permissions-note", role: "note" }, note)
      : h("p", { class: "no-withheld hint" }, "Nothing was withheld from your role for this answer."),
    runtime.fallback_used
      ? h(
          "p",
          { class: "fallback" },
          "The templater answered instead of the LLM: ",
          h("code", {}, runtime.fallback_reason || "unknown"),
          reasonText(runtime.fallback_reason) ? ` — ${reasonText(runtime.fallback_reason)}` : "",
        )
      : null,
    h(
      "div",
      { class: "card-actions" },
      toggle.button,
      h(
        "a",
        {
          class: "btn btn-quiet",
          href: `#/graph?id=${encodeURIComponent(meta.request?.anchor_id || "")}`,
          onclick: (e) => {
            e.preventDefault();
            navigate("graph", { id: meta.request?.anchor_id });
          },
        },
        "Show graph",
      ),
    ),
    downloads(meta),
  );
}

function isTail(line) {
  return line.startsWith("Led to: ") || line.startsWith("Projected as: ");
}

// Each visible cause: its relation, a link that asks why about it, its date and its reason.
function causeList(envelope, navigate) {
  const causes = envelope.causes || [];
  if (!causes.length && !envelope.moreCauses) return null;
  return h(
    "section",
    { class: "causes", "aria-labelledby": "causes-h" },
    h("h3", { id: "causes-h" }, "Because"),
    h(
      "ol",
      { class: "cause-list" },
      causes.map((cause) =>
        h(
          "li",
          { class: "cause", dataset: { id: cause.id, relation: cause.relation } },
          chip(cause.words, "chip-relation"),
          " ",
          h(
            "a",
            {
              class: "cause-link",
              href: `#/ask?anchor=${encodeURIComponent(cause.id)}`,
              title: `Ask why about ${cause.id}`,
              onclick: (e) => {
                e.preventDefault();
                navigate("ask", { anchor: cause.id });
              },
            },
            cause.title,
          ),
          " ",
          h("code", { class: "cause-id" }, cause.id),
          cause.date ? h("span", { class: "cause-date" }, ` · ${cause.date}`) : null,
          cause.why ? h("p", { class: "cause-why" }, cause.why) : null,
        ),
      ),
    ),
    envelope.moreCauses
      ? h(
          "p",
          { class: "more-causes hint" },
          `… and ${envelope.moreCauses} more (see the evidence list and the trace bundle).`,
        )
      : null,
  );
}

function downloads(meta) {
  const artifacts = meta.downloads?.artifacts || [];
  const requestId = meta.request?.request_id || "trace";
  return h(
    "section",
    { class: "downloads", "aria-labelledby": "downloads-h" },
    h("h3", { id: "downloads-h" }, "Trace bundle"),
    h(
      "ul",
      { class: "download-list" },
      artifacts.map((a) => downloadItem(a, requestId)),
    ),
  );
}

function downloadItem(artifact, requestId) {
  const statusId = uid("dl-status");
  const status = h("span", { id: statusId, class: "download-status", role: "status" });
  const refused = (code) => {
    const why = reasonText(code);
    replace(
      status,
      h("span", { class: "refusal" }, "Refused: ", h("code", {}, code), why ? ` — ${why}` : ""),
    );
  };
  const button = h(
    "button",
    {
      type: "button",
      class: "btn",
      disabled: !artifact.allowed,
      "aria-describedby": statusId,
      onclick: async () => {
        button.disabled = true;
        replace(status, "Preparing…");
        try {
          const name = await downloadBundle(artifact.href, `${requestId}-${artifact.name}.zip`);
          replace(status, `Saved ${name}`);
        } catch (err) {
          if (err instanceof ApiError && err.reason) refused(err.reason);
          else replace(status, h("span", { class: "refusal" }, err.message));
        } finally {
          button.disabled = false;
        }
      },
    },
    `Download ${artifact.name}`,
  );
  if (!artifact.allowed) refused(artifact.reason || "refused");
  return h(
    "li",
    { class: `download ${artifact.allowed ? "allowed" : "refused"}`, dataset: { bundle: artifact.name } },
    button,
    status,
  );
}

function evidenceSection(result) {
  const cited = new Set(result.envelope.citedIds);
  const items = [...result.evidence].sort((a, b) => a.hop - b.hop);
  return h(
    "section",
    { class: "evidence", "aria-labelledby": "evidence-h" },
    h("h3", { id: "evidence-h" }, `Evidence (${items.length}, ${cited.size} cited)`),
    items.length
      ? h(
          "ol",
          { class: "evidence-list" },
          items.map((node) => evidenceItem(node, cited.has(node.id))),
        )
      : stateBox("empty", "No evidence you may see"),
  );
}

const HIDDEN_FIELDS = new Set(["embedding", "id"]);

function evidenceItem(node, isCited) {
  const shown = Object.entries(node.fields || {}).filter(([k]) => !HIDDEN_FIELDS.has(k));
  return h(
    "li",
    { class: `ev${isCited ? " cited" : ""}`, dataset: { id: node.id } },
    h(
      "div",
      { class: "ev-head" },
      labelChip(node),
      isCited ? chip("cited", "chip-cited") : null,
      chip(node.hop === 0 ? "anchor" : `hop ${node.hop}`, "chip-hop"),
      h("span", { class: "ev-title" }, node.title || node.id),
    ),
    h("p", { class: "ev-meta" }, [day(node.timestamp), node.domain, node.id].filter(Boolean).join(" · ")),
    node.masked.length
      ? h("p", { class: "masked" }, "Hidden from your role: ", node.masked.join(", "))
      : null,
    h(
      "details",
      {},
      h("summary", {}, "Fields you may see"),
      facts(
        shown.map(([k, v]) => [k, jsonText(v)]),
        "kv kv-fields",
      ),
    ),
  );
}
