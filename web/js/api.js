// The only way the UI talks to Cairn: POSTed GraphQL and the bundle route, both with
// the passport headers. Errors become ApiError with the server's stable code.

import { requestHeaders } from "./passport.js";

export class ApiError extends Error {
  constructor(message, code, extra = {}) {
    super(message);
    this.name = "ApiError";
    this.code = code;
    Object.assign(this, extra);
  }
}

/** Run a GraphQL operation; resolves to `data`, rejects with ApiError (first error's code). */
export async function gql(query, variables = {}) {
  const headers = { ...requestHeaders(), "Content-Type": "application/json", Accept: "application/json" };
  let resp;
  try {
    resp = await fetch("/graphql", { method: "POST", headers, body: JSON.stringify({ query, variables }) });
  } catch (err) {
    throw new ApiError(`the server did not answer: ${err.message}`, "NETWORK");
  }
  const body = await resp.json().catch(() => null);
  if (!body) throw new ApiError(`unexpected answer (HTTP ${resp.status})`, `HTTP_${resp.status}`);
  if (body.errors && body.errors.length) {
    const first = body.errors[0];
    const ext = first.extensions || {};
    throw new ApiError(first.message, ext.code || "ERROR", { header: ext.header, data: body.data });
  }
  return body.data;
}

/**
 * Fetch a trace bundle with the passport and hand it to the browser as a download.
 * Resolves to the file name; rejects with ApiError carrying the server's refusal reason.
 */
export async function downloadBundle(href, fallbackName) {
  const resp = await fetch(href, { headers: requestHeaders() });
  if (!resp.ok) {
    // Refusals carry the GraphQL error shape: {errors: [{message, extensions: {code, ...}}]}.
    const body = await resp.json().catch(() => ({}));
    const first = (body.errors || [])[0] || {};
    const code = (first.extensions || {}).code;
    if (resp.status === 403)
      throw new ApiError("bundle refused", code || "BUNDLE_REFUSED", { reason: first.message });
    if (resp.status === 404) throw new ApiError("this trace is not yours or no longer exists", "NOT_FOUND");
    if (resp.status === 401) throw new ApiError(first.message || "passport refused", code || "PASSPORT_REFUSED");
    throw new ApiError(`download failed (HTTP ${resp.status})`, `HTTP_${resp.status}`);
  }
  const disposition = resp.headers.get("Content-Disposition") || "";
  const name = /filename="([^"]+)"/.exec(disposition)?.[1] || fallbackName;
  const url = URL.createObjectURL(await resp.blob());
  const link = Object.assign(document.createElement("a"), { href: url, download: name, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  // Revoke later: the download has to start reading the blob first.
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
  return name;
}
