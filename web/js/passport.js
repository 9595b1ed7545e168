// The role switcher's passport: a header set from the server's dev endpoint, which exists
// only on a loopback server without a passport secret, for pages opened by a loopback address
// (a same-origin fetch sends that Host and no Origin). Each role is its own user
// (u-demo-<role>), so a role never sees another role's traces. Every request gets fresh
// X-Request-Id / X-Trace-Id values, so each answer has its own trace bundle; a bundle is
// fetched later with the same role's passport, which is what owns it.

export const ROLES = ["staff", "manager", "director", "exec", "writer", "external"];
const STORAGE_KEY = "cairn.role";

class PassportUnavailable extends Error {
  constructor(message) {
    super(message);
    this.name = "PassportUnavailable";
    this.code = "PASSPORT_UNAVAILABLE";
  }
}

const state = { headers: null, error: null, switches: 0 };
const listeners = new Set();

export function passportError() {
  return state.error;
}

/** Who the passport says is asking (for the header's status line); null without one. */
export function passportInfo() {
  if (!state.headers) return null;
  return { user: state.headers["X-User-Id"], namespaces: state.headers["X-User-Namespaces"] };
}

export function savedRole() {
  const saved = window.localStorage.getItem(STORAGE_KEY);
  return ROLES.includes(saved) ? saved : "staff";
}

/** Call fn(role) after every switch, successful or not. */
export function onRoleChange(fn) {
  listeners.add(fn);
}

/**
 * Obtain the header set for `role` from /dev/passport; remembers the role across reloads.
 * When switches overlap, only the last one lands.
 */
export async function switchRole(role) {
  const mine = ++state.switches;
  state.headers = null;
  state.error = null;
  window.localStorage.setItem(STORAGE_KEY, role);
  let headers = null;
  let error = null;
  try {
    const resp = await fetch(`/dev/passport?role=${encodeURIComponent(role)}`, {
      headers: { Accept: "application/json" },
    });
    const body = await resp.json().catch(() => ({}));
    if (resp.status === 404) {
      throw new PassportUnavailable(
        "This server issues no development passports here (it runs with a passport secret or off " +
          "loopback, or this page was not opened at a loopback address such as 127.0.0.1 or localhost). " +
          "Open it at a loopback address, or use a client that signs passports.",
      );
    }
    if (!resp.ok)
      throw new PassportUnavailable(
        (body.errors || [])[0]?.message || `passport request failed (HTTP ${resp.status})`,
      );
    headers = body;
  } catch (err) {
    error =
      err instanceof PassportUnavailable
        ? err
        : new PassportUnavailable(`the server did not answer: ${err.message}`);
  }
  if (mine !== state.switches) return;
  state.headers = headers;
  state.error = error;
  for (const fn of listeners) fn(role);
}

function freshId(prefix) {
  const bytes = new Uint8Array(8);
  window.crypto.getRandomValues(bytes);
  return `${prefix}-${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`;
}

/** Headers for one request; throws PassportUnavailable when the switcher has none. */
export function requestHeaders() {
  if (!state.headers) throw state.error || new PassportUnavailable("no passport yet: pick a role");
  return { ...state.headers, "X-Request-Id": freshId("req"), "X-Trace-Id": freshId("trace") };
}
