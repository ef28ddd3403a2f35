// SECURITY: every string that comes from a tool result is untrusted (web pages, model
// output). This module is the only place that builds DOM, and it does so with
// createElement / createTextNode / setAttribute only: no innerHTML, outerHTML,
// insertAdjacentHTML or document.write, so no data can ever become markup. The one
// URL-valued attribute, href, is set only on a URL that parsed as http(s) (see safeUrl),
// so no data can become a javascript: or data: link. Links never navigate this frame:
// they are opened by the host through app.openLink (see link()).

/** Attributes that must never be set from here (script or URL sinks other than href). */
const FORBIDDEN_ATTR = /^(on|src$|srcdoc$|action$|formaction$|style$|xlink:href$)/i;

/**
 * An element with attributes and children. `attrs` values are set with setAttribute
 * (null/undefined/false skip the attribute, true sets it empty); children are nodes,
 * strings (text nodes) or arrays of either; null/undefined/false children are skipped.
 */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [name, value] of Object.entries(attrs)) {
      if (value === null || value === undefined || value === false) continue;
      if (FORBIDDEN_ATTR.test(name) || name.toLowerCase() === "href") {
        throw new Error(`h(): attribute ${name} is not allowed here`);
      }
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

/** Appends children (nodes, strings as text nodes, nested arrays) to `el`. */
export function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.appendChild(child);
    else el.appendChild(document.createTextNode(String(child)));
  }
  return el;
}

/** Replaces every child of `el`. */
export function replaceChildren(el, ...children) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return append(el, children);
}

/** A string from `v`, or `fallback` when it is not a string. */
export function str(v, fallback = "") {
  return typeof v === "string" ? v : fallback;
}

export function isObject(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/** The URL as the browser normalises it when it is an absolute http(s) URL, else null. */
export function safeUrl(raw) {
  if (typeof raw !== "string" || raw.length === 0 || raw.length > 4096) return null;
  let url;
  try {
    url = new URL(raw.trim());
  } catch {
    return null;
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return null;
  if (!url.hostname) return null;
  return url.href;
}

/** The host name of an http(s) URL without a leading "www.", or "" when it has none. */
export function domainOf(raw) {
  const href = safeUrl(raw);
  if (!href) return "";
  return new URL(href).hostname.replace(/^www\./i, "");
}

/**
 * A link to an http(s) URL that the host opens (`open(url)` calls app.openLink): the
 * click is always prevented, so this frame never navigates. A URL that is not http(s)
 * gives plain text instead of a link.
 */
export function link(raw, label, open, attrs = {}) {
  const href = safeUrl(raw);
  if (!href) return h("span", { class: "nolink", ...attrs }, label);
  const a = h("a", { rel: "noopener noreferrer", ...attrs }, label);
  a.setAttribute("href", href);
  a.addEventListener("click", (event) => {
    event.preventDefault();
    open(href);
  });
  return a;
}

/** A compact JSON text of any value (for nested values in tables), cut at `max`. */
export function jsonText(value, max = 400) {
  let text;
  try {
    text = JSON.stringify(value);
  } catch {
    text = String(value);
  }
  if (text === undefined) text = String(value);
  return text.length > max ? `${text.slice(0, max - 1)}\u2026` : text;
}
