// Graph: the k-hop neighbourhood the role may walk, drawn with Cytoscape. Causal edges
// (why) are solid, alias edges (projections) dashed; clicking a node re-anchors. A table
// lists the same nodes for keyboard and screen-reader users.

import { gql } from "../api.js";
import { anchorSearch } from "../anchor-search.js";
import { chip, day, facts, h, jsonText, replace, stateBox, uid } from "../dom.js";
import { errorBox } from "../errors.js";
import { EDGE_FAMILIES, colourOf, displayLabel, edgeFamily, labelChip, labelName } from "../palette.js";

const NODE_FIELDS = "id label hop domain title timestamp fields masked";
const HOOD = `query Hood($id: ID!, $hops: Int!) {
  neighbourhood(id: $id, hops: $hops) {
    anchor { ${NODE_FIELDS} }
    nodes { ${NODE_FIELDS} }
    edges { source target type relation }
  }
}`;
const HOP_CHOICES = ["0", "1", "2", "3"];
const CAPTION_CHARS = 34;
const MAX_FIT_ZOOM = 1.2;

export function renderGraph(main, params, { navigate }) {
  const id = params.get("id");
  const hops = HOP_CHOICES.includes(params.get("hops")) ? params.get("hops") : "1";
  const hopsId = uid("hops");
  const toolbar = h(
    "section",
    { class: "panel graph-toolbar", "aria-labelledby": "graph-tools-h" },
    h("h2", { id: "graph-tools-h", class: "visually-hidden" }, "Choose an anchor"),
    anchorSearch({
      label: "Find an anchor",
      labels: null,
      placeholder: "a decision, an event, or an exact id",
      onPick: (node) => navigate("graph", { id: node.id, hops }),
    }),
    h(
      "div",
      { class: "field hops-field" },
      h("label", { for: hopsId }, "Hops"),
      h(
        "select",
        {
          id: hopsId,
          "aria-describedby": `${hopsId}-hint`,
          onchange: (e) => id && navigate("graph", { id, hops: e.target.value }),
        },
        HOP_CHOICES.map((k) => h("option", { value: k, selected: k === hops }, k)),
      ),
      h("p", { id: `${hopsId}-hint`, class: "hint" }, "Capped by your role's profile."),
    ),
  );
  const canvas = h("div", {
    id: "graph-canvas",
    class: "graph-canvas",
    role: "img",
    "aria-label": "Neighbourhood graph",
  });
  const side = h("aside", { class: "panel graph-side", "aria-labelledby": "graph-side-h" });
  const stage = h("section", { class: "panel graph-stage", "aria-labelledby": "graph-h" });
  replace(
    main,
    h("h1", { class: "visually-hidden" }, "Graph"),
    h("div", { class: "graph-layout" }, toolbar, stage, side),
  );

  if (!id) {
    replace(
      stage,
      h("h2", { id: "graph-h" }, "Neighbourhood"),
      stateBox("empty", "No anchor yet", "Search above, or open the graph from an answer."),
    );
    replace(side, h("h2", { id: "graph-side-h" }, "Legend"), legend(new Set(), new Set()));
    return;
  }
  replace(stage, h("h2", { id: "graph-h" }, "Neighbourhood"), stateBox("loading", "Walking the graph…"));
  replace(side, h("h2", { id: "graph-side-h" }, "Legend"));
  // Cytoscape must not draw into (or keep listening on) a view that was replaced meanwhile.
  const mounted = { live: true, cy: null };
  load(id, hops, { stage, side, canvas, navigate, mounted });
  return () => {
    mounted.live = false;
    if (mounted.cy) mounted.cy.destroy();
  };
}

async function load(id, hops, { stage, side, canvas, navigate, mounted }) {
  let hood;
  try {
    hood = (await gql(HOOD, { id, hops: Number(hops) })).neighbourhood;
  } catch (err) {
    replace(stage, h("h2", { id: "graph-h" }, "Neighbourhood"), errorBox(err));
    return;
  }
  if (!mounted.live) return;
  const model = graphModel(hood);
  const deepest = Math.max(0, ...model.nodes.map((n) => n.hop));
  const summary = `${model.nodes.length} nodes and ${model.edges.length} edges within ${deepest} hop${deepest === 1 ? "" : "s"}`;
  canvas.setAttribute(
    "aria-label",
    `Graph around ${hood.anchor.title || hood.anchor.id}: ${summary}. The table lists the same nodes.`,
  );
  const selected = h("div", { class: "selected", "aria-live": "polite" }, nodeDetails(hood.anchor, navigate));
  replace(
    stage,
    h("h2", { id: "graph-h" }, hood.anchor.title || hood.anchor.id),
    h("p", { class: "hint graph-summary" }, `${summary}. Click a node to re-anchor on it.`),
    canvas,
    nodeTable(model, hops, navigate),
  );
  replace(
    side,
    h("h2", { id: "graph-side-h" }, "Legend"),
    legend(new Set(model.nodes.map((n) => n.shown)), new Set(model.edges.map((e) => e.family))),
    h("h2", {}, "Selected"),
    selected,
  );
  mounted.cy = draw(canvas, model, hops, {
    navigate,
    onHover: (node) => replace(selected, nodeDetails(node, navigate)),
  });
}

/** Nodes and edges with display labels; alias events are also recognised by their ALIAS_OF edge. */
function graphModel(hood) {
  const all = [hood.anchor, ...hood.nodes];
  const ids = new Set(all.map((n) => n.id));
  const edges = hood.edges
    .filter((e) => ids.has(e.source) && ids.has(e.target))
    .map((e, i) => ({ ...e, key: `e${i}`, family: edgeFamily(e.type) }));
  const aliasTargets = new Set(edges.filter((e) => e.family === "alias").map((e) => e.target));
  const nodes = all.map((n) => {
    const shown = n.label === "Event" && aliasTargets.has(n.id) ? "AliasEvent" : displayLabel(n);
    return { ...n, shown };
  });
  return { anchorId: hood.anchor.id, nodes, edges };
}

function caption(node) {
  const text = node.title || node.id;
  return text.length > CAPTION_CHARS ? `${text.slice(0, CAPTION_CHARS - 1)}…` : text;
}

const STYLE = [
  {
    selector: "node",
    style: {
      "background-color": "data(colour)",
      label: "data(caption)",
      color: "#1d2630",
      "font-size": 11,
      "text-wrap": "wrap",
      "text-max-width": 120,
      "text-valign": "bottom",
      "text-margin-y": 4,
      "text-background-color": "#ffffff",
      "text-background-opacity": 0.8,
      "text-background-padding": 1,
      width: 22,
      height: 22,
      "border-width": 2,
      "border-color": "#ffffff",
    },
  },
  { selector: "node.Decision", style: { shape: "round-rectangle", width: 28 } },
  { selector: "node.AliasEvent", style: { shape: "diamond" } },
  {
    selector: "node.anchor",
    style: { width: 36, height: 36, "border-width": 4, "border-color": "#111827", "font-weight": "bold" },
  },
  { selector: "node:active, node.hovered", style: { "overlay-opacity": 0.15, "border-color": "#f5b700" } },
  {
    selector: "edge",
    style: {
      width: 1.5,
      "curve-style": "bezier",
      "line-color": "data(colour)",
      "target-arrow-color": "data(colour)",
      "target-arrow-shape": "triangle",
      "arrow-scale": 0.9,
    },
  },
  {
    selector: "edge.causal",
    style: { width: 2.5 },
  },
  {
    selector: "edge.hovered",
    style: {
      label: "data(relation)",
      "font-size": 9,
      color: "#1d2630",
      "text-rotation": "autorotate",
      "text-background-color": "#ffffff",
      "text-background-opacity": 0.9,
      width: 3.5,
    },
  },
  { selector: "edge.alias", style: { "line-style": "dashed", "target-arrow-shape": "vee", width: 2 } },
  { selector: "edge.other", style: { "line-style": "dotted" } },
];

function draw(container, model, hops, { navigate, onHover }) {
  if (typeof window.cytoscape !== "function") {
    replace(
      container,
      stateBox(
        "error",
        "Graph library missing",
        "web/vendor/cytoscape.min.js did not load; the table below lists the nodes.",
      ),
    );
    return null;
  }
  const deepest = Math.max(0, ...model.nodes.map((n) => n.hop));
  const byId = new Map(model.nodes.map((n) => [n.id, n]));
  const elements = [
    ...model.nodes.map((n) => ({
      group: "nodes",
      data: { id: n.id, caption: caption(n), colour: colourOf(n.shown), hop: n.hop },
      classes: [n.shown, n.id === model.anchorId ? "anchor" : ""].join(" ").trim(),
    })),
    ...model.edges.map((e) => {
      const family = EDGE_FAMILIES[e.family];
      return {
        group: "edges",
        data: {
          id: e.key,
          source: e.source,
          target: e.target,
          colour: family.colour,
          relation: e.relation || "",
        },
        classes: e.family,
      };
    }),
  ];
  const cy = window.cytoscape({
    container,
    elements,
    style: STYLE,
    layout: {
      name: "concentric",
      concentric: (node) => deepest - node.data("hop") + 1,
      levelWidth: () => 1,
      minNodeSpacing: 56,
      spacingFactor: 1.15,
      animate: false,
      padding: 24,
    },
    minZoom: 0.2,
    maxZoom: 3,
  });
  // Few nodes would otherwise be blown up to fill the canvas.
  if (cy.zoom() > MAX_FIT_ZOOM) {
    cy.zoom(MAX_FIT_ZOOM);
    cy.center();
  }
  // The anchor is where we are already; any other node becomes the new anchor.
  cy.on("tap", "node", (evt) => {
    if (evt.target.id() !== model.anchorId) navigate("graph", { id: evt.target.id(), hops });
  });
  cy.on("mouseover", "node", (evt) => {
    evt.target.addClass("hovered");
    container.style.cursor = "pointer";
    onHover(byId.get(evt.target.id()));
  });
  cy.on("mouseover", "edge", (evt) => evt.target.addClass("hovered"));
  cy.on("mouseout", "edge", (evt) => evt.target.removeClass("hovered"));
  cy.on("mouseout", "node", (evt) => {
    evt.target.removeClass("hovered");
    container.style.cursor = "";
  });
  container.dataset.nodeCount = String(cy.nodes().length);
  container.dataset.edgeCount = String(cy.edges().length);
  return cy;
}

function legend(labels, families) {
  const labelItems = [...labels]
    .sort()
    .map((label) =>
      h(
        "li",
        {},
        h("span", { class: "swatch", style: `--swatch: ${colourOf(label)}`, "aria-hidden": "true" }),
        labelName(label),
      ),
    );
  const edgeItems = Object.entries(EDGE_FAMILIES)
    .filter(([name]) => families.size === 0 || families.has(name))
    .map(([, f]) =>
      h(
        "li",
        {},
        h("span", {
          class: "edge-swatch",
          style: `--swatch: ${f.colour}; --swatch-line: ${f.line}`,
          "aria-hidden": "true",
        }),
        f.label,
      ),
    );
  return h(
    "div",
    { class: "legend" },
    labelItems.length ? h("ul", { class: "legend-list", "aria-label": "Node colours" }, labelItems) : null,
    h("ul", { class: "legend-list", "aria-label": "Edge styles" }, edgeItems),
  );
}

function nodeDetails(node, navigate) {
  const visible = Object.entries(node.fields || {}).filter(([k]) => k !== "id" && k !== "embedding");
  return h(
    "div",
    { class: "node-details" },
    h("p", {}, labelChip(node), " ", chip(node.hop === 0 ? "anchor" : `hop ${node.hop}`, "chip-hop")),
    h("p", { class: "node-title" }, node.title || node.id),
    h("p", { class: "hint" }, [day(node.timestamp), node.domain, node.id].filter(Boolean).join(" · ")),
    node.masked.length
      ? h("p", { class: "masked" }, "Hidden from your role: ", node.masked.join(", "))
      : null,
    node.label === "Decision"
      ? h(
          "p",
          {},
          h(
            "a",
            {
              href: "#",
              class: "btn btn-quiet",
              onclick: (e) => {
                e.preventDefault();
                navigate("ask", { anchor: node.id });
              },
            },
            "Ask why",
          ),
        )
      : null,
    h(
      "details",
      {},
      h("summary", {}, "Fields you may see"),
      facts(
        visible.map(([k, v]) => [k, jsonText(v)]),
        "kv kv-fields",
      ),
    ),
  );
}

function nodeTable(model, hops, navigate) {
  const rows = [...model.nodes].sort(
    (a, b) => a.hop - b.hop || (a.title || a.id).localeCompare(b.title || b.id),
  );
  return h(
    "div",
    { class: "table-scroll", tabindex: "0", role: "region", "aria-label": "Nodes in the graph" },
    h(
      "table",
      { class: "data node-table" },
      h("caption", {}, `Nodes (${rows.length})`),
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ["Node", "Label", "Hop", "Domain", ""].map((c) => h("th", { scope: "col" }, c)),
        ),
      ),
      h(
        "tbody",
        {},
        rows.map((n) =>
          h(
            "tr",
            { dataset: { id: n.id }, class: n.id === model.anchorId ? "is-anchor" : "" },
            h(
              "th",
              { scope: "row" },
              h("span", { class: "node-title" }, n.title || n.id),
              h("br"),
              h("code", {}, n.id),
            ),
            h("td", {}, labelName(n.shown)),
            h("td", {}, String(n.hop)),
            h("td", {}, n.domain || "—"),
            h(
              "td",
              {},
              n.id === model.anchorId
                ? chip("anchor", "chip-hop")
                : h(
                    "button",
                    {
                      type: "button",
                      class: "btn btn-quiet",
                      "aria-label": `Re-anchor on ${n.title || n.id}`,
                      onclick: () => navigate("graph", { id: n.id, hops }),
                    },
                    "Re-anchor",
                  ),
            ),
          ),
        ),
      ),
    ),
  );
}
