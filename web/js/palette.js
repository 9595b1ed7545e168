// One colour per label and one style per edge family, shared by the graph, its legend
// and the evidence chips (neo4j/browser/cairn.grass uses the same colours).

import { h } from "./dom.js";

const LABEL_COLOURS = {
  Decision: "#2f6fde",
  Event: "#e0892b",
  AliasEvent: "#8e44c9",
  Dossier: "#1f9d74",
  Fact: "#5fb894",
  Block: "#7d8f45",
  Turn: "#a39a6b",
  Factor: "#c0392b",
  Option: "#d35d87",
  JournalEntry: "#6f7c85",
  Session: "#8fa1ad",
  Section: "#23788a",
};
const FALLBACK_COLOUR = "#9aa4ad";

/** Causal edges explain "why"; alias edges only project a decision into a lower domain. */
export const EDGE_FAMILIES = {
  causal: { types: ["CAUSAL_PRECEDES"], colour: "#2c3e50", line: "solid", label: "causal (why)" },
  alias: { types: ["ALIAS_OF"], colour: "#8e44c9", line: "dashed", label: "alias (projection)" },
  dependency: { types: ["DEPENDS_ON"], colour: "#c0392b", line: "solid", label: "depends on" },
  other: { types: [], colour: "#9aa4ad", line: "dotted", label: "provenance / structure" },
};

export function edgeFamily(type) {
  for (const [name, family] of Object.entries(EDGE_FAMILIES)) {
    if (family.types.includes(type)) return name;
  }
  return "other";
}

/** Alias events are events that project a decision (tagged or carrying alias_of_decision). */
export function displayLabel(node) {
  const f = node.fields || {};
  const tags = Array.isArray(f.tags) ? f.tags : [];
  if (node.label === "Event" && (f.alias_of_decision || tags.includes("alias_event"))) return "AliasEvent";
  return node.label;
}

export function colourOf(label) {
  return LABEL_COLOURS[label] || FALLBACK_COLOUR;
}

export function labelName(label) {
  return label === "AliasEvent" ? "Alias event" : label.replace(/([a-z])([A-Z])/g, "$1 $2");
}

/** A small coloured chip naming a node's (display) label. */
export function labelChip(node) {
  const label = node.shown || displayLabel(node);
  return h(
    "span",
    { class: "chip chip-label", style: `--chip-colour: ${colourOf(label)}` },
    labelName(label),
  );
}
