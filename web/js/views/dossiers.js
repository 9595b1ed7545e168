// Dossiers: ask the memory (`memorySearch`: the facts that answer a question, under their
// dossiers), search (`dossierSearch`) and one dossier's page (`dossier`, `block`,
// `relatedDossiers`): its facts with the block and section tags that apply to them,
// its blocks' sticky tags, and its journalled history (provenance).

import { gql } from "../api.js";
import { chip, day, fmtNumber, h, replace, stateBox, uid } from "../dom.js";
import { errorBox } from "../errors.js";

const SEARCH = `query Dossiers($q: String!, $k: Int!) {
  dossierSearch(query: $q, topK: $k) {
    count
    dossiers { id title summary status lastUpdated score facts { id } }
  }
}`;
const ASK = `query Memory($q: String!, $k: Int!) {
  memorySearch(query: $q, k: $k) {
    count
    hits { factId text observedAt addedAt sourceTurnIds dossierId dossierTitle dossierSummary matched }
  }
}`;
const DOSSIER = `query Dossier($id: ID!) {
  dossier(id: $id) {
    id title summary status lastUpdated mergedInto masked
    facts { id text factType confidence addedAt sourceBlockId turnIndex }
    history { id op timestamp previousValue newValue excerpt rationale details }
  }
  relatedDossiers(id: $id, topK: 5)
}`;
const BLOCK = `query Block($id: String!) {
  block(blockId: $id) { blockId globalTags sectionRules processedAt turns facts }
}`;
const MAX_BLOCKS = 12;

function dossierLink(id, title, navigate) {
  return h(
    "a",
    {
      href: `#/dossier?id=${encodeURIComponent(id)}`,
      onclick: (e) => {
        e.preventDefault();
        navigate("dossier", { id });
      },
    },
    title || id,
  );
}

function askPanel(question, navigate) {
  const inputId = uid("memory-q");
  const answer = h("div", { class: "memory-answer", "aria-live": "polite" });
  const input = h("input", {
    id: inputId,
    type: "search",
    name: "ask",
    value: question,
    required: true,
    placeholder: "e.g. When did the user start running?",
  });
  const panel = h(
    "section",
    { class: "panel memory-ask", "aria-labelledby": "memory-ask-h" },
    h("h2", { id: "memory-ask-h" }, "Ask the memory"),
    h(
      "form",
      {
        class: "search-form",
        role: "search",
        onsubmit: (e) => {
          e.preventDefault();
          if (input.value.trim()) navigate("dossiers", { ask: input.value.trim() });
        },
      },
      h("label", { for: inputId }, "Question"),
      h("div", { class: "search-row" }, input, h("button", { type: "submit", class: "btn" }, "Ask")),
    ),
    answer,
  );
  if (question) {
    replace(answer, stateBox("loading", "Finding the facts…"));
    gql(ASK, { q: question, k: 10 })
      .then(({ memorySearch }) => replace(answer, memoryAnswer(memorySearch, navigate)))
      .catch((err) => replace(answer, errorBox(err)));
  }
  return panel;
}

// The hits in rank order, grouped under their dossier (groups in the order of their best hit).
function memoryAnswer(result, navigate) {
  if (!result.hits.length) {
    return stateBox("empty", "No fact you may see answers this", "Try other words.");
  }
  const groups = new Map();
  for (const hit of result.hits) {
    if (!groups.has(hit.dossierId)) groups.set(hit.dossierId, { hit, facts: [] });
    groups.get(hit.dossierId).facts.push(hit);
  }
  return h(
    "div",
    {},
    h("p", { class: "hint" }, `${result.hits.length} of ${result.count} matching fact${result.count === 1 ? "" : "s"}`),
    h(
      "ul",
      { class: "card-list", "aria-label": "Facts that answer the question" },
      [...groups.values()].map(({ hit, facts }) =>
        h(
          "li",
          { class: "card memory-group", dataset: { id: hit.dossierId } },
          h("h3", {}, dossierLink(hit.dossierId, hit.dossierTitle, navigate)),
          hit.dossierSummary ? h("p", { class: "card-meta" }, hit.dossierSummary) : null,
          h(
            "ol",
            { class: "memory-facts" },
            facts.map((f) =>
              h(
                "li",
                { dataset: { id: f.factId } },
                h("time", { datetime: f.observedAt || f.addedAt || "" }, day(f.observedAt || f.addedAt)),
                " ",
                f.text,
                f.sourceTurnIds.length ? h("span", { class: "hint" }, ` (${f.sourceTurnIds.join(", ")})`) : null,
              ),
            ),
          ),
        ),
      ),
    ),
  );
}

export function renderDossiers(main, params, { navigate }) {
  const q = params.get("q") || "";
  const inputId = uid("dossier-q");
  const results = h("div", { class: "dossier-results", "aria-live": "polite" });
  const input = h("input", {
    id: inputId,
    type: "search",
    name: "q",
    value: q,
    required: true,
    placeholder: "e.g. diet, running, team",
  });
  replace(
    main,
    h("h1", { class: "visually-hidden" }, "Dossiers"),
    askPanel(params.get("ask") || "", navigate),
    h(
      "section",
      { class: "panel dossier-search", "aria-labelledby": "dossier-search-h" },
      h("h2", { id: "dossier-search-h" }, "Dossiers"),
      h(
        "form",
        {
          class: "search-form",
          role: "search",
          onsubmit: (e) => {
            e.preventDefault();
            if (input.value.trim()) navigate("dossiers", { q: input.value.trim() });
          },
        },
        h("label", { for: inputId }, "Search dossiers"),
        h("div", { class: "search-row" }, input, h("button", { type: "submit", class: "btn" }, "Search")),
      ),
      results,
    ),
  );
  if (!q) {
    replace(
      results,
      stateBox("empty", "Search to begin", "Dossiers gather what the assistant learned, topic by topic."),
    );
    return;
  }
  replace(results, stateBox("loading", "Searching dossiers…"));
  gql(SEARCH, { q, k: 10 })
    .then(({ dossierSearch }) => replace(results, dossierList(dossierSearch, navigate)))
    .catch((err) => replace(results, errorBox(err)));
}

function dossierList(result, navigate) {
  if (!result.dossiers.length) {
    return stateBox("empty", "No dossier you may see matches", "Try broader words.");
  }
  return h(
    "div",
    {},
    h(
      "p",
      { class: "hint" },
      `${result.count} visible dossier${result.count === 1 ? "" : "s"} above the threshold`,
    ),
    h(
      "ul",
      { class: "card-list", "aria-label": "Matching dossiers" },
      result.dossiers.map((d) =>
        h(
          "li",
          { class: "card dossier-card", dataset: { id: d.id } },
          h("h3", {}, dossierLink(d.id, d.title, navigate)),
          h(
            "p",
            { class: "card-meta" },
            chip(d.status || "—", `chip-status status-${d.status}`),
            " ",
            `${d.facts.length} facts · updated ${day(d.lastUpdated)} · score ${fmtNumber(d.score)}`,
          ),
          d.summary ? h("p", {}, d.summary) : null,
        ),
      ),
    ),
  );
}

export function renderDossier(main, params, { navigate }) {
  const id = params.get("id");
  const page = h("article", { class: "panel dossier-page", "aria-labelledby": "dossier-h" });
  replace(main, h("p", { class: "crumbs" }, h("a", { href: "#/dossiers" }, "← Dossiers")), page);
  if (!id) {
    replace(
      page,
      h("h1", { id: "dossier-h" }, "Dossier"),
      stateBox("empty", "No dossier chosen", "Search the dossiers first."),
    );
    return;
  }
  replace(page, h("h1", { id: "dossier-h" }, "Dossier"), stateBox("loading", "Loading the dossier…"));
  loadDossier(id, page, navigate);
}

async function loadDossier(id, page, navigate) {
  let data;
  try {
    data = await gql(DOSSIER, { id });
  } catch (err) {
    replace(page, h("h1", { id: "dossier-h" }, "Dossier"), errorBox(err));
    return;
  }
  const d = data.dossier;
  if (!d) {
    replace(
      page,
      h("h1", { id: "dossier-h" }, "Dossier"),
      stateBox("error", "Not found", "There is no such dossier, or your role may not see it."),
    );
    return;
  }
  const blockIds = [...new Set(d.facts.map((f) => f.sourceBlockId).filter(Boolean))].slice(0, MAX_BLOCKS);
  const blocks = new Map(
    (
      await Promise.all(
        blockIds.map((b) =>
          gql(BLOCK, { id: b })
            .then((r) => r.block)
            .catch(() => null),
        ),
      )
    )
      .filter(Boolean)
      .map((b) => [b.blockId, b]),
  );
  replace(
    page,
    h(
      "header",
      { class: "card-head" },
      h(
        "div",
        {},
        h("p", { class: "eyebrow" }, "Dossier"),
        h("h1", { id: "dossier-h" }, d.title || d.id),
        h(
          "p",
          { class: "card-meta" },
          chip(d.status || "—", `chip-status status-${d.status}`),
          " ",
          `updated ${day(d.lastUpdated)} · ${d.id}`,
          d.mergedInto ? [" · merged into ", dossierLink(d.mergedInto, d.mergedInto, navigate)] : null,
        ),
      ),
      h(
        "a",
        {
          class: "btn btn-quiet",
          href: "#",
          onclick: (e) => {
            e.preventDefault();
            navigate("graph", { id: d.id });
          },
        },
        "Show graph",
      ),
    ),
    d.summary ? h("p", { class: "summary" }, d.summary) : null,
    d.masked.length ? h("p", { class: "masked" }, "Hidden from your role: ", d.masked.join(", ")) : null,
    factsSection(d.facts, blocks),
    blocksSection(blockIds, blocks),
    historySection(d.history),
    relatedSection(data.relatedDossiers || [], navigate),
  );
}

/** Section rules apply to the facts whose turn falls in the rule's range (as the context assembler does). */
function tagsFor(fact, block) {
  if (!block) return [];
  const rules = Array.isArray(block.sectionRules) ? block.sectionRules : [];
  const section = rules
    .filter((r) => fact.turnIndex !== null && fact.turnIndex >= r.start_turn && fact.turnIndex <= r.end_turn)
    .map((r) => r.tag);
  return [...block.globalTags, ...section];
}

function factsSection(factsList, blocks) {
  const headingId = uid("facts-h");
  return h(
    "section",
    { "aria-labelledby": headingId },
    h("h2", { id: headingId }, `Facts (${factsList.length})`),
    factsList.length
      ? h(
          "div",
          { class: "table-scroll", tabindex: "0", role: "region", "aria-label": "Facts" },
          h(
            "table",
            { class: "data facts-table" },
            h("caption", { class: "visually-hidden" }, "Facts of this dossier"),
            h(
              "thead",
              {},
              h(
                "tr",
                {},
                ["Fact", "Type", "Confidence", "Added", "Block / turn", "Tags"].map((c) =>
                  h("th", { scope: "col" }, c),
                ),
              ),
            ),
            h(
              "tbody",
              {},
              factsList.map((f) =>
                h(
                  "tr",
                  { dataset: { id: f.id } },
                  h("th", { scope: "row" }, f.text || "—"),
                  h("td", {}, f.factType || "—"),
                  h("td", {}, fmtNumber(f.confidence, 2)),
                  h("td", {}, day(f.addedAt)),
                  h(
                    "td",
                    {},
                    [f.sourceBlockId, f.turnIndex ?? null]
                      .filter((x) => x !== null && x !== undefined)
                      .join(" / ") || "—",
                  ),
                  h(
                    "td",
                    {},
                    tagsFor(f, blocks.get(f.sourceBlockId)).map((t) => chip(t, "chip-tag")),
                  ),
                ),
              ),
            ),
          ),
        )
      : stateBox("empty", "No facts you may see"),
  );
}

function blocksSection(blockIds, blocks) {
  const headingId = uid("blocks-h");
  return h(
    "section",
    { "aria-labelledby": headingId },
    h("h2", { id: headingId }, "Block tags"),
    blockIds.length
      ? h(
          "ul",
          { class: "block-list" },
          blockIds.map((id) => {
            const b = blocks.get(id);
            if (!b) return h("li", {}, h("code", {}, id), " — no block record you may see");
            const rules = Array.isArray(b.sectionRules) ? b.sectionRules : [];
            return h(
              "li",
              { class: "block", dataset: { block: id } },
              h(
                "p",
                {},
                h("code", {}, id),
                ` · processed ${day(b.processedAt) || "not yet"} · ${b.facts} facts, ${b.turns} turns left`,
              ),
              b.globalTags.length
                ? h(
                    "p",
                    { class: "chips" },
                    "Global: ",
                    b.globalTags.map((t) => chip(t, "chip-tag")),
                  )
                : null,
              rules.length
                ? h(
                    "ul",
                    { class: "rules" },
                    rules.map((r) =>
                      h(
                        "li",
                        {},
                        chip(r.tag, "chip-tag"),
                        ` turns ${r.start_turn}–${r.end_turn}`,
                        r.source_fact ? ` — “${r.source_fact}”` : "",
                      ),
                    ),
                  )
                : null,
              !b.globalTags.length && !rules.length ? h("p", { class: "hint" }, "No sticky tags.") : null,
            );
          }),
        )
      : stateBox("empty", "No source blocks"),
  );
}

function historySection(history) {
  const headingId = uid("history-h");
  const entries = [...history].sort((a, b) => String(a.timestamp).localeCompare(String(b.timestamp)));
  return h(
    "section",
    { "aria-labelledby": headingId },
    h("h2", { id: headingId }, `History (${entries.length})`),
    entries.length
      ? h(
          "ol",
          { class: "timeline" },
          entries.map((e) =>
            h(
              "li",
              { dataset: { id: e.id } },
              h(
                "p",
                {},
                chip(e.op || "change", "chip-op"),
                " ",
                h("time", { datetime: e.timestamp || "" }, day(e.timestamp)),
              ),
              e.rationale ? h("p", {}, e.rationale) : null,
              e.previousValue || e.newValue
                ? h("p", { class: "hint" }, `${e.previousValue || "—"} → ${e.newValue || "—"}`)
                : null,
              e.excerpt ? h("blockquote", {}, e.excerpt) : null,
              e.details
                ? h(
                    "details",
                    {},
                    h("summary", {}, "Details"),
                    h("pre", {}, JSON.stringify(e.details, null, 2)),
                  )
                : null,
            ),
          ),
        )
      : stateBox(
          "empty",
          "No history you may see",
          "Journal entries in domains outside your role are not shown.",
        ),
  );
}

function relatedSection(related, navigate) {
  const headingId = uid("related-h");
  return h(
    "section",
    { "aria-labelledby": headingId },
    h("h2", { id: headingId }, "Related dossiers"),
    related.length
      ? h(
          "ul",
          { class: "related" },
          related.map((r) =>
            h(
              "li",
              {},
              dossierLink(r.id, r.title, navigate),
              " ",
              r.linked
                ? chip("linked", "chip-tag")
                : h(
                    "span",
                    { class: "hint" },
                    `${r.hits} shared-fact votes, score ${fmtNumber(r.score_sum)}`,
                  ),
            ),
          ),
        )
      : stateBox("empty", "None related"),
  );
}
