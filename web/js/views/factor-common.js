// Pieces shared by the factor views: links to a factor or option page, and the
// multi-line templated answers shown as paragraphs.

import { h } from "../dom.js";

export function factorLink(ref, navigate) {
  return h(
    "a",
    {
      href: `#/factor?id=${encodeURIComponent(ref.id)}`,
      onclick: (e) => {
        e.preventDefault();
        navigate("factor", { id: ref.id });
      },
    },
    ref.name || ref.id,
  );
}

export function paragraphs(text, cls = "answer-text") {
  return h(
    "div",
    { class: cls },
    String(text || "")
      .split("\n")
      .filter(Boolean)
      .map((line) => h("p", {}, line)),
  );
}
