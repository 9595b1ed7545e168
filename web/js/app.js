// Bootstrap: the role switcher, the hash router (#/view?param=…) and view mounting.
// Views are plain functions render(main, params, {navigate}) that may return a function
// undoing what outlives their DOM (the graph's Cytoscape instance); switching role
// re-renders the current view under the new passport.

import { h, replace, stateBox } from "./dom.js";
import { errorBox } from "./errors.js";
import { ROLES, onRoleChange, passportError, passportInfo, savedRole, switchRole } from "./passport.js";
import { renderAsk } from "./views/ask.js";
import { renderDossier, renderDossiers } from "./views/dossiers.js";
import { renderFactor } from "./views/factor.js";
import { renderFactors } from "./views/factors.js";
import { renderGraph } from "./views/graph.js";

const VIEWS = {
  ask: { render: renderAsk, tab: "ask", title: "Ask" },
  graph: { render: renderGraph, tab: "graph", title: "Graph" },
  dossiers: { render: renderDossiers, tab: "dossiers", title: "Dossiers" },
  dossier: { render: renderDossier, tab: "dossiers", title: "Dossier" },
  factors: { render: renderFactors, tab: "factors", title: "Factors" },
  factor: { render: renderFactor, tab: "factors", title: "Factor" },
};

function route() {
  const raw = window.location.hash.replace(/^#\/?/, "");
  const cut = raw.indexOf("?");
  const name = cut < 0 ? raw : raw.slice(0, cut);
  const params = new URLSearchParams(cut < 0 ? "" : raw.slice(cut + 1));
  return { name: VIEWS[name] ? name : "ask", params };
}

/** Go to a view with params (empty values dropped); re-renders even when the hash is unchanged. */
export function navigate(name, params = {}) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== "") query.set(key, String(value));
  }
  const text = query.toString();
  const hash = `#/${name}${text ? `?${text}` : ""}`;
  if (window.location.hash === hash) render();
  else window.location.hash = hash;
}

let unmount = null; // what the current view needs undone before the next one replaces it

function render() {
  if (unmount) unmount();
  unmount = null;
  const { name, params } = route();
  const view = VIEWS[name];
  for (const tab of document.querySelectorAll(".tabs a")) {
    if (tab.dataset.view === view.tab) tab.setAttribute("aria-current", "page");
    else tab.removeAttribute("aria-current");
  }
  document.title = `${view.title} · Cairn`;
  const main = document.getElementById("main");
  const refusal = passportError();
  if (refusal) {
    replace(main, errorBox(refusal));
    return;
  }
  if (!passportInfo()) {
    replace(main, stateBox("loading", "Getting a passport…")); // the switch in flight renders when it lands
    return;
  }
  unmount = view.render(main, params, { navigate }) || null;
}

function showPassport(role) {
  const status = document.getElementById("passport-status");
  const banner = document.getElementById("banner");
  const info = passportInfo();
  const refusal = passportError();
  replace(status, info ? `${info.user} · ${info.namespaces}` : "no passport");
  status.dataset.role = info ? role : ""; // which role's passport is in force
  status.classList.toggle("is-error", Boolean(refusal));
  banner.hidden = !refusal;
  if (refusal) replace(banner, h("strong", {}, "No passport. "), refusal.message);
}

function boot() {
  const select = document.getElementById("role-select");
  const initial = savedRole();
  replace(
    select,
    ROLES.map((role) => h("option", { value: role, selected: role === initial }, role)),
  );
  select.addEventListener("change", () => switchRole(select.value));
  onRoleChange((role) => {
    select.value = role;
    showPassport(role);
    render();
  });
  window.addEventListener("hashchange", render);
  // The hash belongs to the router, so the skip link moves focus instead of navigating.
  document.querySelector(".skip-link").addEventListener("click", (event) => {
    event.preventDefault();
    document.getElementById("main").focus();
  });
  switchRole(initial);
}

boot();
