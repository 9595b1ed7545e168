// A small SVG step chart of a factor's journalled values over time. A step (not a
// slope) because a value holds from the entry that set it until the next one.

import { day, fmtNumber } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
const W = 640;
const H = 220;
const PAD = { top: 16, right: 20, bottom: 34, left: 44 };

function s(tag, attrs = {}, text = null) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== null) el.textContent = text;
  return el;
}

/** "0-100" -> [0, 100]; anything else -> null (the data decide). */
function scaleDomain(scale) {
  const m = /^(-?\d+(?:\.\d+)?)\s*-\s*(-?\d+(?:\.\d+)?)$/.exec(String(scale || ""));
  return m ? [Number(m[1]), Number(m[2])] : null;
}

/**
 * @param {Array<{timestamp: string, newValue: number|null}>} entries  any order
 * @param {string} scale  the factor's scale, e.g. "0-100"
 * @param {string} label  accessible name
 * @param {string|null} marker  an ISO time to mark (the as-of moment)
 */
export function historyChart(entries, scale, label, marker = null) {
  const points = entries
    .filter((e) => e.newValue !== null && e.newValue !== undefined)
    .map((e) => ({ t: Date.parse(e.timestamp), v: Number(e.newValue), e }))
    .filter((p) => Number.isFinite(p.t))
    .sort((a, b) => a.t - b.t);
  const svg = s("svg", {
    viewBox: `0 0 ${W} ${H}`,
    class: "history-chart",
    role: "img",
    "aria-label": label,
  });
  svg.append(s("title", {}, label));
  if (!points.length) return svg;

  const values = points.map((p) => p.v);
  const [lo, hi] = scaleDomain(scale) || [Math.min(...values), Math.max(...values)];
  const span = hi - lo || 1;
  const t0 = points[0].t;
  const t1 = Math.max(points[points.length - 1].t, marker ? Date.parse(marker) || t0 : t0);
  const tspan = t1 - t0 || 1;
  const x = (t) => PAD.left + ((t - t0) / tspan) * (W - PAD.left - PAD.right);
  const y = (v) => H - PAD.bottom - ((v - lo) / span) * (H - PAD.top - PAD.bottom);

  for (const v of [lo, lo + span / 2, hi]) {
    svg.append(s("line", { x1: PAD.left, x2: W - PAD.right, y1: y(v), y2: y(v), class: "grid" }));
    svg.append(
      s("text", { x: PAD.left - 6, y: y(v) + 4, class: "tick", "text-anchor": "end" }, fmtNumber(v, 1)),
    );
  }
  svg.append(s("text", { x: PAD.left, y: H - 10, class: "tick" }, day(points[0].e.timestamp)));
  if (t1 > t0) {
    svg.append(
      s(
        "text",
        { x: W - PAD.right, y: H - 10, class: "tick", "text-anchor": "end" },
        day(new Date(t1).toISOString()),
      ),
    );
  }

  let d = `M ${x(points[0].t)} ${y(points[0].v)}`;
  for (let i = 1; i < points.length; i++) d += ` H ${x(points[i].t)} V ${y(points[i].v)}`;
  d += ` H ${x(t1)}`;
  svg.append(s("path", { d, class: "line" }));

  for (const p of points) {
    const dot = s("circle", { cx: x(p.t), cy: y(p.v), r: 4.5, class: "dot" });
    dot.append(
      s(
        "title",
        {},
        `${day(p.e.timestamp)}: ${fmtNumber(p.v, 2)}${p.e.rationale ? ` — ${p.e.rationale}` : ""}`,
      ),
    );
    svg.append(dot);
  }
  if (marker && Number.isFinite(Date.parse(marker))) {
    const mx = x(Date.parse(marker));
    svg.append(s("line", { x1: mx, x2: mx, y1: PAD.top, y2: H - PAD.bottom, class: "marker" }));
    svg.append(s("text", { x: mx - 4, y: PAD.top + 10, class: "tick", "text-anchor": "end" }, "as of"));
  }
  return svg;
}
