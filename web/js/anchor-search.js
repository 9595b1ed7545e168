// The anchor picker: semantic `search` over what the role may see, plus an exact-id
// look-up (`node`) when the text looks like an id. Used by the Ask and Graph views.

import { gql } from "./api.js";
import { day, fmtNumber, h, replace, stateBox, uid } from "./dom.js";
import { errorBox } from "./errors.js";
import { labelChip } from "./palette.js";

const SEARCH = `query Search($q: String!, $k: Int!, $labels: [String!]) {
  search(query: $q, k: $k, labels: $labels) {
    total
    hits { score node { id label title domain timestamp fields } }
  }
}`;
const NODE = `query Node($id: ID!) { node(id: $id) { id label title domain timestamp fields } }`;
const ID_LIKE = /^[A-Za-z0-9][A-Za-z0-9._:-]{2,}$/;

/**
 * @param {object} opts
 * @param {string} opts.label       visible label of the search box
 * @param {string[]|null} opts.labels  node labels to search (null: the server's default)
 * @param {(node: object) => void} opts.onPick
 * @param {string} [opts.placeholder]
 */
export function anchorSearch({ label, labels, onPick, placeholder = "" }) {
  const inputId = uid("anchor-q");
  const resultsId = uid("anchor-results");
  const input = h("input", {
    id: inputId,
    type: "search",
    name: "q",
    autocomplete: "off",
    placeholder,
    "aria-controls": resultsId,
    required: true,
  });
  const results = h("div", { id: resultsId, class: "hits-region", "aria-live": "polite" });
  let generation = 0;

  async function run(text) {
    const mine = ++generation;
    replace(results, stateBox("loading", "Searching…"));
    try {
      const lookups = [gql(SEARCH, { q: text, k: 8, labels })];
      if (ID_LIKE.test(text)) lookups.push(gql(NODE, { id: text }).catch(() => ({ node: null })));
      const [found, exact] = await Promise.all(lookups);
      if (mine !== generation) return;
      const hits = found.search.hits.map((hit) => ({ node: hit.node, score: hit.score }));
      if (exact && exact.node && !hits.some((hit) => hit.node.id === exact.node.id)) {
        hits.unshift({ node: exact.node, score: null });
      }
      replace(results, hitList(hits, found.search.total, onPick));
    } catch (err) {
      if (mine === generation) replace(results, errorBox(err));
    }
  }

  const form = h(
    "form",
    {
      class: "search-form",
      role: "search",
      onsubmit: (event) => {
        event.preventDefault();
        const text = input.value.trim();
        if (text) run(text);
      },
    },
    h("label", { for: inputId }, label),
    h("div", { class: "search-row" }, input, h("button", { type: "submit", class: "btn" }, "Search")),
  );
  return h("div", { class: "anchor-search" }, form, results);
}

function hitList(hits, total, onPick) {
  if (!hits.length) {
    return stateBox("empty", "No matches you may see", "Try other words, or paste an exact id.");
  }
  const note = h(
    "p",
    { class: "hint" },
    `${total} visible match${total === 1 ? "" : "es"} above the threshold`,
  );
  const list = h(
    "ul",
    { class: "hits", "aria-label": "Matches" },
    hits.map(({ node, score }) =>
      h(
        "li",
        {},
        h(
          "button",
          { type: "button", class: "hit", dataset: { id: node.id }, onclick: () => onPick(node) },
          h("span", { class: "hit-title" }, node.title || node.id),
          h(
            "span",
            { class: "hit-meta" },
            labelChip(node),
            " ",
            [day(node.timestamp), node.domain, score === null ? "exact id" : `score ${fmtNumber(score)}`]
              .filter(Boolean)
              .join(" · "),
          ),
        ),
      ),
    ),
  );
  return h("div", {}, note, list);
}
