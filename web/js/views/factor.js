// One factor's page (note 003): value and confidence, now or as of a date; its history
// chart and journal; why it has that value; why it (or an option) is blocked; and a
// what-if panel. An option id shows the why-blocked panel alone. Nothing here writes.

import { gql } from "../api.js";
import { historyChart } from "../chart.js";
import { chip, day, facts, fmtNumber, h, replace, stateBox, uid } from "../dom.js";
import { errorBox } from "../errors.js";
import { factorLink, paragraphs } from "./factor-common.js";

const FACTOR = `query Factor($id: ID!, $asOf: DateTime) {
  factor(id: $id, asOf: $asOf) {
    id name category scale aliases value confidence inferenceStatus lastUpdated asOf
  }
}`;
const JOURNAL = `query Journal($id: ID!) {
  journal(factorId: $id, limit: 100) {
    id op timestamp previousValue newValue rationale excerpt confidence inferenceStatus influencedBy hasHiddenInfluences
  }
  whyValue(id: $id) { answer }
}`;
const WHY_BLOCKED = `query WhyBlocked($id: ID!) {
  whyBlocked(id: $id) {
    subject { id label name }
    status hasHiddenPrerequisites answer
    blockers { factor { id name } value threshold requiredBy { id name } lastSet }
  }
}`;
const WHAT_IF = `query WhatIf($id: ID!, $value: Float!, $lower: Boolean!) {
  whatIf(factorId: $id, value: $value, lower: $lower) {
    current value answer
    unblocked { id label name }
    blocked { id label name }
  }
}`;

export function renderFactor(main, params, { navigate }) {
  const id = params.get("id");
  const asOf = params.get("asOf") || "";
  const page = h("article", { class: "factor-page", "aria-labelledby": "factor-h" });
  replace(main, h("p", { class: "crumbs" }, h("a", { href: "#/factors" }, "← Factors")), page);
  if (!id) {
    replace(
      page,
      h("h1", { id: "factor-h" }, "Factor"),
      stateBox("empty", "No factor chosen", "Ask about factors, or open one by id."),
    );
    return;
  }
  replace(page, h("h1", { id: "factor-h" }, id), stateBox("loading", "Loading…"));
  loadFactor(id, asOf, page, navigate);
}

async function loadFactor(id, asOf, page, navigate) {
  const iso = asOf ? `${asOf}T23:59:59Z` : null;
  const [factorRes, blockedRes] = await Promise.allSettled([
    gql(FACTOR, { id, asOf: iso }),
    gql(WHY_BLOCKED, { id }),
  ]);
  const factor = factorRes.status === "fulfilled" ? factorRes.value.factor : null;
  const blocked = blockedRes.status === "fulfilled" ? blockedRes.value.whyBlocked : null;
  if (!factor && !blocked) {
    const err = factorRes.status === "rejected" ? factorRes.reason : blockedRes.reason;
    replace(
      page,
      h("h1", { id: "factor-h" }, id),
      err && err.code !== "NOT_FOUND"
        ? errorBox(err)
        : stateBox("error", "Not found", "There is no such factor or option, or your role may not see it."),
    );
    return;
  }
  if (!factor) {
    replace(
      page,
      h(
        "header",
        { class: "panel card-head" },
        h(
          "div",
          {},
          h("p", { class: "eyebrow" }, blocked.subject.label),
          h("h1", { id: "factor-h" }, blocked.subject.name),
          h("p", { class: "card-meta" }, blocked.subject.id),
        ),
        graphButton(blocked.subject.id, navigate),
      ),
      blockedPanel(blocked, navigate, true),
    );
    return;
  }
  const history = h(
    "section",
    { class: "panel", "aria-labelledby": "history-h" },
    h("h2", { id: "history-h" }, "History"),
    stateBox("loading", "Reading the journal…"),
  );
  const why = h(
    "section",
    { class: "panel", "aria-labelledby": "why-value-h" },
    h("h2", { id: "why-value-h" }, "Why this value"),
  );
  replace(
    page,
    factorHeader(factor, asOf, navigate),
    h(
      "div",
      { class: "factor-grid" },
      history,
      h(
        "div",
        { class: "factor-side" },
        blocked ? blockedPanel(blocked, navigate) : null,
        whatIfPanel(factor, navigate),
      ),
      why,
    ),
  );
  try {
    const { journal, whyValue } = await gql(JOURNAL, { id });
    replace(
      history,
      h("h2", { id: "history-h" }, `History (${journal.length})`),
      historyBody(factor, journal, iso),
    );
    replace(why, h("h2", { id: "why-value-h" }, "Why this value"), paragraphs(whyValue.answer));
  } catch (err) {
    replace(history, h("h2", { id: "history-h" }, "History"), errorBox(err));
    replace(why, h("h2", { id: "why-value-h" }, "Why this value"), errorBox(err));
  }
}

function graphButton(id, navigate) {
  return h(
    "a",
    {
      class: "btn btn-quiet",
      href: `#/graph?id=${encodeURIComponent(id)}`,
      onclick: (e) => {
        e.preventDefault();
        navigate("graph", { id });
      },
    },
    "Show graph",
  );
}

function factorHeader(f, asOf, navigate) {
  const dateId = uid("as-of");
  const dateInput = h("input", { id: dateId, type: "date", value: asOf });
  return h(
    "header",
    { class: "panel factor-head" },
    h(
      "div",
      {},
      h("p", { class: "eyebrow" }, f.category == null ? "Factor" : `Factor · ${f.category.replaceAll("_", " ")}`),
      h("h1", { id: "factor-h" }, f.name ?? f.id),
      h(
        "p",
        { class: "card-meta" },
        [f.id, f.scale == null ? "" : `scale ${f.scale}`, f.aliases.length ? `also: ${f.aliases.join(", ")}` : ""]
          .filter(Boolean)
          .join(" · "),
      ),
    ),
    h(
      "div",
      { class: "factor-value" },
      graphButton(f.id, navigate),
      h(
        "p",
        { class: "big-value", "aria-label": "Value" },
        f.value === null ? "not assessed" : fmtNumber(f.value, 2),
      ),
      facts([
        ["Confidence", fmtNumber(f.confidence, 2)],
        [
          "Status",
          f.inferenceStatus
            ? chip(f.inferenceStatus.replaceAll("_", " "), `status-${f.inferenceStatus}`)
            : "—",
        ],
        [f.asOf ? "As of" : "Last updated", day(f.asOf || f.lastUpdated)],
      ]),
    ),
    h(
      "form",
      {
        class: "as-of-form",
        onsubmit: (e) => {
          e.preventDefault();
          navigate("factor", { id: f.id, asOf: dateInput.value });
        },
      },
      h("label", { for: dateId }, "Value as of"),
      h(
        "div",
        { class: "search-row" },
        dateInput,
        h("button", { type: "submit", class: "btn btn-quiet" }, "Show"),
        asOf
          ? h(
              "button",
              { type: "button", class: "btn btn-quiet", onclick: () => navigate("factor", { id: f.id }) },
              "Now",
            )
          : null,
      ),
    ),
  );
}

function historyBody(factor, journal, marker) {
  if (!journal.length) return stateBox("empty", "No journal entries you may see");
  const label = `${factor.name ?? factor.id} over time: ${journal.length} journalled values`;
  return h(
    "div",
    {},
    h(
      "figure",
      { class: "chart" },
      historyChart(journal, factor.scale, label, marker),
      h("figcaption", { class: "hint" }, "Each dot is a journal entry; the value holds until the next one."),
    ),
    h(
      "ol",
      { class: "timeline" },
      journal.map((e) =>
        h(
          "li",
          { dataset: { id: e.id } },
          h(
            "p",
            {},
            e.op ? chip(e.op, "chip-op") : null,
            " ",
            e.timestamp ? h("time", { datetime: e.timestamp }, day(e.timestamp)) : null,
            " ",
            h(
              "strong",
              {},
              `${e.previousValue === null ? "—" : fmtNumber(e.previousValue, 2)} → ${fmtNumber(e.newValue, 2)}`,
            ),
            e.confidence === null ? "" : ` (confidence ${fmtNumber(e.confidence, 2)})`,
          ),
          e.rationale ? h("p", {}, e.rationale) : null,
          e.excerpt ? h("blockquote", {}, e.excerpt) : null,
          e.influencedBy.length || e.hasHiddenInfluences
            ? h(
                "p",
                { class: "hint" },
                "Influenced by: ",
                e.influencedBy.join(", ") || "—",
                e.hasHiddenInfluences ? " (and some you may not see)" : "",
              )
            : null,
        ),
      ),
    ),
  );
}

function blockedPanel(b, navigate, explain = false) {
  return h(
    "section",
    { class: "panel blocked-panel", "aria-labelledby": "why-blocked-h" },
    h("h2", { id: "why-blocked-h" }, "Why blocked?"),
    h(
      "p",
      {},
      chip(b.status, `status-${b.status}`),
      b.hasHiddenPrerequisites
        ? h("span", { class: "hint" }, " Some prerequisites are not visible to you.")
        : "",
    ),
    b.blockers.length
      ? h(
          "div",
          { class: "table-scroll", tabindex: "0", role: "region", "aria-label": "Unmet prerequisites" },
          h(
            "table",
            { class: "data blockers" },
            h("caption", {}, "Unmet prerequisites"),
            h(
              "thead",
              {},
              h(
                "tr",
                {},
                ["Factor", "Now", "Needs", "Required by", "Last set"].map((c) =>
                  h("th", { scope: "col" }, c),
                ),
              ),
            ),
            h(
              "tbody",
              {},
              b.blockers.map((x) =>
                h(
                  "tr",
                  {},
                  h("th", { scope: "row" }, factorLink(x.factor, navigate)),
                  h("td", {}, fmtNumber(x.value, 2)),
                  h("td", {}, `≥ ${fmtNumber(x.threshold, 2)}`),
                  h("td", {}, factorLink(x.requiredBy, navigate)),
                  h("td", {}, day(x.lastSet)),
                ),
              ),
            ),
          ),
        )
      : null,
    h("details", { open: explain }, h("summary", {}, "Explanation"), paragraphs(b.answer)),
  );
}

function whatIfPanel(f, navigate) {
  const inputId = uid("what-if");
  const input = h("input", {
    id: inputId,
    type: "number",
    step: "any",
    required: true,
    value: f.value === null ? "" : String(f.value),
  });
  const out = h("div", { class: "what-if-result", "aria-live": "polite" });
  async function run(value) {
    replace(out, stateBox("loading", "Working it out…"));
    try {
      const { whatIf } = await gql(WHAT_IF, { id: f.id, value, lower: f.value !== null && value < f.value });
      const list = (title, refs, cls) =>
        refs.length
          ? h(
              "div",
              { class: cls },
              h("h3", {}, title),
              h(
                "ul",
                { class: "ref-list" },
                refs.map((r) => h("li", {}, factorLink(r, navigate), " ", chip(r.label))),
              ),
            )
          : null;
      replace(
        out,
        paragraphs(whatIf.answer),
        list("Would become unblocked", whatIf.unblocked, "unblocked"),
        list("Would become blocked", whatIf.blocked, "blocked"),
        !whatIf.unblocked.length && !whatIf.blocked.length ? stateBox("empty", "Nothing would change") : null,
      );
    } catch (err) {
      replace(out, errorBox(err));
    }
  }
  return h(
    "section",
    { class: "panel what-if-panel", "aria-labelledby": "what-if-h" },
    h("h2", { id: "what-if-h" }, "What if?"),
    h(
      "form",
      {
        class: "search-form",
        onsubmit: (e) => {
          e.preventDefault();
          if (input.value !== "") run(Number(input.value));
        },
      },
      h("label", { for: inputId }, `If ${f.name ?? f.id} were`),
      h("div", { class: "search-row" }, input, h("button", { type: "submit", class: "btn" }, "Try")),
    ),
    h("p", { class: "hint" }, "Hypothetical: nothing is written."),
    out,
  );
}
