// Factors (note 003): the assessment overview, a free-text question box and a way to
// open a factor or option by id. Nothing here writes.

import { gql } from "../api.js";
import { chip, day, fmtNumber, h, replace, stateBox, uid } from "../dom.js";
import { errorBox } from "../errors.js";
import { factorLink, paragraphs } from "./factor-common.js";

const ASSESSMENT = `query Assessment {
  assessment {
    categories { category completeness avgConfidence factorCount totalFactors lastUpdated }
    totalFactorsAssessed totalFactors completeness avgConfidence decisionTier
    canEvaluate { id label name }
    answer continuity
  }
}`;
const QUESTION = `query Question($text: String!) {
  question(text: $text) { intent router answer entities { id label name } }
}`;

function percent(x) {
  return x === null || x === undefined ? "—" : `${Math.round(Number(x) * 100)}%`;
}

export function renderFactors(main, params, { navigate }) {
  const overview = h(
    "section",
    { class: "panel", "aria-labelledby": "assessment-h" },
    h("h2", { id: "assessment-h" }, "Assessment"),
    stateBox("loading", "Loading the assessment…"),
  );
  replace(
    main,
    h("h1", { class: "visually-hidden" }, "Factors"),
    h("div", { class: "factors-layout" }, questionPanel(params.get("q") || "", navigate), overview),
  );
  gql(ASSESSMENT)
    .then(({ assessment }) =>
      replace(overview, h("h2", { id: "assessment-h" }, "Assessment"), assessmentBody(assessment, navigate)),
    )
    .catch((err) => replace(overview, h("h2", { id: "assessment-h" }, "Assessment"), errorBox(err)));
}

function questionPanel(q, navigate) {
  const inputId = uid("factor-q");
  const idInputId = uid("factor-id");
  const result = h("div", { class: "question-result", "aria-live": "polite" });
  const input = h("input", {
    id: inputId,
    type: "search",
    value: q,
    required: true,
    placeholder: "e.g. why can't we do predictive maintenance?",
  });
  const idInput = h("input", {
    id: idInputId,
    type: "text",
    required: true,
    placeholder: "e.g. data_quality",
  });
  if (q) ask(q);

  async function ask(text) {
    replace(result, stateBox("loading", "Thinking…"));
    try {
      const { question } = await gql(QUESTION, { text });
      replace(
        result,
        h("p", { class: "hint" }, `Understood as ${question.intent} (${question.router})`),
        paragraphs(question.answer),
        question.entities.length
          ? h(
              "p",
              { class: "chips" },
              "About: ",
              question.entities.map((ref) => factorLink(ref, navigate)),
            )
          : null,
      );
    } catch (err) {
      replace(result, errorBox(err));
    }
  }

  return h(
    "section",
    { class: "panel", "aria-labelledby": "factor-ask-h" },
    h("h2", { id: "factor-ask-h" }, "Ask about factors"),
    h(
      "form",
      {
        class: "search-form",
        onsubmit: (e) => {
          e.preventDefault();
          if (input.value.trim()) ask(input.value.trim());
        },
      },
      h("label", { for: inputId }, "Question"),
      h("div", { class: "search-row" }, input, h("button", { type: "submit", class: "btn" }, "Ask")),
    ),
    result,
    h(
      "form",
      {
        class: "search-form open-by-id",
        onsubmit: (e) => {
          e.preventDefault();
          if (idInput.value.trim()) navigate("factor", { id: idInput.value.trim() });
        },
      },
      h("label", { for: idInputId }, "Open a factor or option by id"),
      h(
        "div",
        { class: "search-row" },
        idInput,
        h("button", { type: "submit", class: "btn btn-quiet" }, "Open"),
      ),
    ),
  );
}

function assessmentBody(a, navigate) {
  return h(
    "div",
    {},
    h(
      "p",
      { class: "card-meta" },
      chip(a.decisionTier.replaceAll("_", " "), "chip-mode"),
      " ",
      `${a.totalFactorsAssessed} of ${a.totalFactors} factors assessed · ${percent(a.completeness)} complete · average confidence ${fmtNumber(a.avgConfidence, 2)}`,
    ),
    h(
      "div",
      { class: "table-scroll", tabindex: "0", role: "region", "aria-label": "Categories" },
      h(
        "table",
        { class: "data categories" },
        h("caption", {}, "Per category"),
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ["Category", "Assessed", "Complete", "Confidence", "Last updated"].map((c) =>
              h("th", { scope: "col" }, c),
            ),
          ),
        ),
        h(
          "tbody",
          {},
          a.categories.map((c) =>
            h(
              "tr",
              {},
              h("th", { scope: "row" }, c.category.replaceAll("_", " ")),
              h("td", {}, `${c.factorCount} / ${c.totalFactors}`),
              h(
                "td",
                {},
                h("meter", {
                  min: "0",
                  max: "1",
                  value: String(c.completeness),
                  "aria-label": `${percent(c.completeness)} complete`,
                }),
                " ",
                percent(c.completeness),
              ),
              h("td", {}, fmtNumber(c.avgConfidence, 2)),
              h("td", {}, day(c.lastUpdated)),
            ),
          ),
        ),
      ),
    ),
    h("h3", {}, "What you can do now"),
    a.canEvaluate.length
      ? h(
          "ul",
          { class: "ref-list" },
          a.canEvaluate.map((ref) => h("li", {}, factorLink(ref, navigate), " ", chip(ref.label))),
        )
      : stateBox("empty", "Nothing is ready yet"),
    h("h3", {}, "Where are we?"),
    paragraphs(a.answer),
    h("h3", {}, "Where were we?"),
    paragraphs(a.continuity),
  );
}
