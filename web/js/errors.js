// Turning API errors into plain-language states. The codes are the server's stable
// `extensions.code` values; unknown codes still show the server's message.

import { stateBox } from "./dom.js";

const REASONS = {
  "policy:bundle_full_not_permitted":
    "your role may not download the full bundle (pre-policy evidence and withheld items)",
  "policy:llm_not_permitted": "your role may not use the LLM path, so the templater answered",
  "acl:role_missing": "your role is not among the item's allowed roles",
  "acl:namespace_mismatch": "the item is in a namespace your passport does not hold",
  "acl:sensitivity_exceeded": "the item is more sensitive than your ceiling",
  "edge:not_allowed": "your role may not walk this kind of edge",
  "scope:domain": "the item lies outside your domain scopes",
  token_budget: "it did not fit the token budget",
  duplicate: "it repeats an item already included",
  low_weight: "the selector weighted it too low",
  policy_cap: "a policy cap on the number of items",
};

/** A human sentence for a known policy / budget reason code; "" for others (the code is shown beside it). */
export function reasonText(code) {
  return (code && REASONS[code]) || "";
}

export function explain(err) {
  const code = err && err.code ? String(err.code) : "ERROR";
  if (code === "PASSPORT_UNAVAILABLE") {
    return { title: "No passport", detail: err.message };
  }
  if (code.startsWith("PASSPORT_") || code.startsWith("POLICY_")) {
    const header = err.header ? ` (${err.header})` : "";
    return { title: "Passport refused", detail: `${err.message}${header}. Nothing was read.` };
  }
  if (code === "NOT_FOUND") {
    return { title: "Not found", detail: "There is no such item, or your role may not see it." };
  }
  if (code === "FORBIDDEN_SEARCH") {
    return {
      title: "Search not allowed",
      detail: "This role may not search. Open an item by its id instead.",
    };
  }
  if (code === "INVALID_INPUT") return { title: "Invalid input", detail: err.message };
  if (code === "NETWORK") return { title: "Server unreachable", detail: err.message };
  return { title: "Something went wrong", detail: `${err.message || err} [${code}]` };
}

export function errorBox(err) {
  const { title, detail } = explain(err);
  return stateBox("error", title, detail);
}
