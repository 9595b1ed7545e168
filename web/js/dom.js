// Building DOM without innerHTML: every piece of graph data reaches the page as text,
// so nothing a node stores can inject markup.

/**
 * h("p", {class: "x", onclick: fn, "aria-label": "y"}, "text", child, [more])
 * Props: class, text, dataset (object), on<event> handlers, boolean attributes (true/false),
 * everything else as an attribute. Children: strings, numbers, nodes, arrays, null (skipped).
 */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "text") el.textContent = String(value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (value === true) el.setAttribute(key, "");
    else el.setAttribute(key, String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

let counter = 0;
/** A document-unique id for label/aria wiring. */
export function uid(prefix) {
  counter += 1;
  return `${prefix}-${counter}`;
}

/** "2024-03-20T15:00:00.000000000+00:00" -> "2024-03-20"; anything else unchanged. */
export function day(ts) {
  if (!ts) return "";
  const m = /^(\d{4}-\d{2}-\d{2})/.exec(String(ts));
  return m ? m[1] : String(ts);
}

export function fmtNumber(value, digits = 3) {
  if (value === null || value === undefined || value === "") return "—";
  const n = Number(value);
  return Number.isFinite(n) ? String(Number(n.toFixed(digits))) : String(value);
}

/** A loading / empty / error / info state, announced to assistive technology. */
export function stateBox(kind, title, detail) {
  const role = kind === "error" ? "alert" : "status";
  return h(
    "div",
    { class: `state state-${kind}`, role },
    h("p", { class: "state-title" }, title),
    detail ? h("p", { class: "state-detail" }, detail) : null,
  );
}

/** A definition list from [term, value] pairs; values may be nodes. Empty values show a dash. */
export function facts(pairs, cls = "kv") {
  return h(
    "dl",
    { class: cls },
    pairs.map(([term, value]) => [
      h("dt", {}, term),
      h("dd", {}, value === null || value === undefined || value === "" ? "—" : value),
    ]),
  );
}

export function chip(text, cls = "") {
  return h("span", { class: `chip ${cls}`.trim() }, text);
}

/** A compact rendering of any JSON value for field lists. */
export function jsonText(value) {
  if (value === null || value === undefined) return "—";
  if (typeof value === "string") return value;
  if (Array.isArray(value) && value.every((v) => typeof v !== "object")) return value.join(", ");
  return JSON.stringify(value);
}
