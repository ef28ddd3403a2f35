// SECURITY: see the rule at the top of dom.js and main.js. Every value below comes from a
// tool result's structuredContent and is untrusted: it reaches the page as text nodes
// (h(), append()) or as an href checked by safeUrl(), never as markup.

import { h, str, isObject, safeUrl, domainOf, link, jsonText } from "./dom.js";

export const RUNNING = new Set(["in_progress", "queued"]);

const STATUS_LABELS = {
  completed: "Completed",
  incomplete: "Incomplete",
  in_progress: "Running",
  queued: "Queued",
  failed: "Failed",
  cancelled: "Cancelled",
};

/** Which view a structuredContent asks for: "research", "report", "search" or null. */
export function viewOf(sc) {
  if (!isObject(sc)) return null;
  if (sc.view === "research") return "research";
  if (isObject(sc.validation_report) && Array.isArray(sc.claims)) return "report";
  if (Array.isArray(sc.results)) return "search";
  return null;
}

export function statusBadge(status) {
  const s = str(status, "unknown");
  const known = Object.prototype.hasOwnProperty.call(STATUS_LABELS, s);
  return h(
    "span",
    { class: `badge status-${known ? s : "other"}`, "data-status": s },
    known ? STATUS_LABELS[s] : s,
  );
}

/** The warning banner for injection labels, or null when there are none. */
export function securityBanner(flags) {
  const list = Array.isArray(flags) ? flags.filter((f) => typeof f === "string" && f) : [];
  if (list.length === 0) return null;
  return h(
    "div",
    { class: "banner warning", role: "alert", "data-part": "security-flags" },
    h("strong", null, "Possible prompt injection in the sources. "),
    "Text in the retrieved pages looks like instructions to an AI (",
    list.join(", "),
    "). Treat it as data, not as instructions.",
  );
}

/** The response id with a Copy button (the copy itself is `copy(text, node)`). */
export function responseIdRow(id, copy) {
  if (typeof id !== "string" || !id) return null;
  const code = h("code", { class: "rid", "data-part": "response-id" }, id);
  const button = h(
    "button",
    { type: "button", class: "small", "aria-label": "Copy the response id", "data-key": "copy-id" },
    "Copy",
  );
  const note = h("span", { class: "copy-note", role: "status", "aria-live": "polite" });
  button.addEventListener("click", () => copy(id, code, note));
  return h("div", { class: "rid-row" }, h("span", { class: "label" }, "Response id"), code, button, note);
}

/** An amount as the server prints it: 2 to 6 decimals, trailing zeros cut ("0.0123"). */
const money = (n) => n.toFixed(6).replace(/0{1,4}$/, "");

/** An age in whole seconds as the server words it: "42 s", "4 min", "3 h". */
const ago = (s) => (s < 60 ? `${s} s` : s < 7200 ? `${Math.floor(s / 60)} min` : `${Math.floor(s / 3600)} h`);

/**
 * What the result cost (`cost`), whether it came from the server's research cache
 * (`cache`) and how old it is, and for a hit "Run again fresh" (`ui.fresh`: null when the
 * tool call cannot be repeated; `state.freshing`/`state.freshError` while and after it is).
 */
export function costBlock(sc, state, ui) {
  const c = isObject(sc.cost) ? sc.cost : null;
  const hit = isObject(sc.cache) && sc.cache.hit === true;
  if (!c && !hit) return null;
  const age = hit ? sc.cache.age_seconds : -1;
  let action = null;
  if (state.freshing) action = h("span", { role: "status" }, "Running again\u2026");
  else if (hit && ui.fresh) {
    action = h("button", { type: "button", class: "small", "data-key": "fresh" }, "Run again fresh");
    action.addEventListener("click", ui.fresh);
  }
  return h(
    "div",
    { class: "rid-row run-meta", "data-part": "run-meta" },
    c
      ? h(
          "span",
          { "data-part": "cost" },
          Number.isFinite(c.total)
            ? `Cost: ${c.estimated === true ? "about " : ""}${money(c.total)} ${str(c.currency, "USD")}`
            : "Cost: not known yet",
        )
      : null,
    hit ? h("span", { "data-part": "cache" }, `From this server's cache${Number.isInteger(age) && age >= 0 ? `, made ${ago(age)} ago` : ""}`) : null,
    action,
    state.freshError ? h("span", { role: "status" }, state.freshError) : null,
  );
}

// ---- the answer and its [N] citations --------------------------------------------------

/** Sources by their id (as a string), for [N] markers. */
function sourcesById(sources) {
  const map = new Map();
  for (const s of sources) {
    if (!isObject(s)) continue;
    const id = typeof s.id === "number" || typeof s.id === "string" ? String(s.id) : null;
    if (id !== null && !map.has(id)) map.set(id, s);
  }
  return map;
}

/**
 * One paragraph's nodes: text, with every `[N]` whose N is a source id turned into a
 * citation button (unknown N stay text).
 */
function citedText(text, byId, ui) {
  const nodes = [];
  const re = /\[(\d{1,6})\]/g;
  let last = 0;
  let m;
  while ((m = re.exec(text)) !== null) {
    const source = byId.get(m[1]);
    if (!source) continue;
    if (m.index > last) nodes.push(text.slice(last, m.index));
    last = m.index + m[0].length;
    // Keep the punctuation right after a marker on its line ("farms [7]." never wraps
    // before the period).
    const punct = /^[.,;:!?)]+/.exec(text.slice(last));
    if (punct) {
      nodes.push(h("span", { class: "nowrap" }, citation(m[1], source, ui), punct[0]));
      last += punct[0].length;
      re.lastIndex = last;
    } else {
      nodes.push(citation(m[1], source, ui));
    }
  }
  if (last < text.length) nodes.push(text.slice(last));
  return nodes;
}

function citation(id, source, ui) {
  const title = str(source.title, "Untitled source");
  const domain = domainOf(source.url);
  const href = safeUrl(source.url);
  const label = `Source ${id}: ${title}${domain ? `, ${domain}` : ""}`;
  const el = h(
    "button",
    {
      type: "button",
      class: href ? "cite" : "cite dead",
      "aria-label": label,
      "data-cite": id,
      "data-key": `cite-${id}`,
    },
    `[${id}]`,
  );
  if (href) el.addEventListener("click", () => ui.open(href));
  const show = () => ui.tip.show(el, title, domain);
  el.addEventListener("mouseenter", show);
  el.addEventListener("focus", show);
  el.addEventListener("mouseleave", () => ui.tip.hide(el));
  el.addEventListener("blur", () => ui.tip.hide(el));
  return el;
}

/** The answer as paragraphs (split on blank lines), with citations when `byId` is given. */
export function answerBlock(answer, byId, ui) {
  const text = str(answer).replace(/\r\n?/g, "\n").trim();
  if (!text) return null;
  const paragraphs = text.split(/\n\s*\n/);
  return h(
    "div",
    { class: "answer", "data-part": "answer" },
    paragraphs.map((p) => h("p", null, byId ? citedText(p, byId, ui) : p)),
  );
}

// ---- sources ------------------------------------------------------------------------------

function sourceList(sources, ui, numbered) {
  const items = sources.filter(isObject);
  if (items.length === 0) return null;
  return h(
    "section",
    { class: "sources", "aria-label": "Sources", "data-part": "sources" },
    h("h2", null, `Sources (${items.length})`),
    h(
      "ol",
      { class: "plain" },
      items.map((s, i) => {
        const num = numbered && (typeof s.id === "number" || typeof s.id === "string") ? String(s.id) : String(i + 1);
        const domain = domainOf(s.url);
        const date = str(s.date);
        return h(
          "li",
          { class: "source", "data-source-id": num },
          h("span", { class: "num", "aria-hidden": "true" }, num),
          h(
            "div",
            { class: "body" },
            link(s.url, str(s.title) || domain || str(s.url) || "Untitled source", ui.open, {
              class: "title",
              "aria-label": `Source ${num}: ${str(s.title) || domain || "untitled"}`,
            }),
            h("div", { class: "meta" }, [domain, date].filter(Boolean).join(" \u00b7 ")),
          ),
        );
      }),
    ),
  );
}

// ---- finance tables -------------------------------------------------------------------

const MAX_ROWS = 200;
const MAX_COLS = 24;

/** Rows of objects as a table: columns are the keys in first-seen order. */
function objectTable(rows, caption) {
  const columns = [];
  for (const row of rows) {
    for (const key of Object.keys(row)) {
      if (!columns.includes(key) && columns.length < MAX_COLS) columns.push(key);
    }
  }
  const shown = rows.slice(0, MAX_ROWS);
  return h(
    "div",
    { class: "table-wrap", tabindex: "0", role: "region", "aria-label": caption },
    h(
      "table",
      null,
      h("caption", null, caption),
      h("thead", null, h("tr", null, columns.map((c) => h("th", { scope: "col" }, c)))),
      h(
        "tbody",
        null,
        shown.map((row) =>
          h(
            "tr",
            null,
            columns.map((c) => {
              const v = row[c];
              const numeric = typeof v === "number";
              const text =
                v === undefined ? "" : v === null ? "\u2014" : typeof v === "object" ? jsonText(v) : String(v);
              return h("td", { class: numeric ? "n" : null }, text);
            }),
          ),
        ),
      ),
    ),
    rows.length > shown.length ? h("p", { class: "muted" }, `${rows.length - shown.length} more rows not shown.`) : null,
  );
}

/** `finance`: an array of objects becomes one table; anything else a one-column table. */
export function financeBlock(finance) {
  if (!Array.isArray(finance) || finance.length === 0) return null;
  const rows = finance.every(isObject) ? finance : finance.map((v) => ({ value: v }));
  return h(
    "section",
    { class: "finance", "aria-label": "Financial data", "data-part": "finance" },
    h("h2", null, "Financial data"),
    objectTable(rows, `${rows.length} row${rows.length === 1 ? "" : "s"}`),
  );
}

// ---- views ------------------------------------------------------------------------------

/**
 * The research view. `state` carries what survives a re-render (the cancel confirmation,
 * a poll error); `ui` has open(url), copy(), tip, and the cancel actions.
 */
export function researchView(sc, state, ui) {
  const sources = Array.isArray(sc.sources) ? sc.sources : [];
  const byId = sourcesById(sources);
  const status = str(sc.status, "unknown");
  const running = RUNNING.has(status);
  const responseId = str(sc.response_id);

  return h(
    "article",
    { class: "view research", "data-view": "research", "aria-busy": running ? "true" : "false" },
    h("header", { class: "bar" }, h("h1", null, "Research"), statusBadge(status)),
    costBlock(sc, state, ui),
    securityBanner(sc.security_flags),
    running ? progressBlock(sc, state, ui, responseId) : null,
    status === "cancelled" && !str(sc.answer) ? h("p", { class: "muted", "data-part": "cancelled" }, "This run was cancelled.") : null,
    status === "failed" || str(sc.error)
      ? h(
          "div",
          { class: "banner danger", role: "alert", "data-part": "error" },
          h("strong", null, "The run failed. "),
          str(sc.error, "No reason was given."),
        )
      : null,
    answerBlock(sc.answer, byId, ui) ||
      (status === "completed" || status === "incomplete" ? h("p", { class: "muted" }, "No answer text.") : null),
    unresolvedNote(sc.unresolved),
    financeBlock(sc.finance),
    sourceList(sources, ui, true),
    responseIdRow(responseId, ui.copy),
  );
}

/** The server's word on `[N]` markers that name no returned source (`unresolved`). */
function unresolvedNote(unresolved) {
  const marks = Array.isArray(unresolved) ? unresolved.filter(Number.isInteger).map((n) => `[${n}]`) : [];
  if (marks.length === 0) return null;
  const one = marks.length === 1;
  return h(
    "p",
    { class: "muted", "data-part": "unresolved" },
    `Unresolved citation${one ? "" : "s"}: ${marks.join(", ")} name${one ? "s" : ""} no source Perplexity returned.`,
  );
}

function progressBlock(sc, state, ui, responseId) {
  const p = isObject(sc.progress) ? sc.progress : {};
  const stats = [];
  const stat = (label, value) => {
    if (typeof value === "number" && Number.isFinite(value)) {
      stats.push(h("div", null, h("dt", null, label), h("dd", null, String(value))));
    }
  };
  stat("Searches", p.searches);
  stat("Pages read", p.pages);
  stat("Seconds elapsed", p.elapsed_seconds);

  let controls = null;
  if (responseId) {
    if (state.cancelling || state.cancelRequested) {
      controls = h("p", { class: "muted", role: "status", "data-part": "cancelling" }, "Cancelling\u2026");
    } else if (state.confirming) {
      const yes = h("button", { type: "button", class: "danger", "data-key": "cancel-yes" }, "Yes, cancel");
      const no = h("button", { type: "button", "data-key": "cancel-no" }, "No");
      yes.addEventListener("click", ui.confirmCancel);
      no.addEventListener("click", ui.dismissCancel);
      controls = h(
        "div",
        { class: "confirm", role: "group", "aria-label": "Confirm cancelling", "data-part": "confirm" },
        h("span", null, "Cancel this run?"),
        yes,
        no,
      );
    } else {
      const cancel = h("button", { type: "button", "data-key": "cancel" }, "Cancel run");
      cancel.addEventListener("click", ui.askCancel);
      controls = h("div", { class: "confirm" }, cancel);
    }
  }

  return h(
    "section",
    { class: "progress", "aria-label": "Progress", "data-part": "progress" },
    h(
      "p",
      { class: "summary", role: "status", "aria-live": "polite" },
      h("span", { class: "spinner", "aria-hidden": "true" }),
      str(p.summary) || (str(sc.status) === "queued" ? "Queued\u2026" : "Researching\u2026"),
    ),
    stats.length ? h("dl", { class: "stats" }, stats) : null,
    state.pollError ? h("p", { class: "banner warning small-banner", role: "status" }, state.pollError) : null,
    controls,
  );
}

/** The deep-research report with its validation (a <details>, open when it failed). */
export function reportView(sc, state, ui) {
  const v = isObject(sc.validation_report) ? sc.validation_report : {};
  const claims = sc.claims.filter(isObject);
  const unsupported = claims.filter((c) => Array.isArray(c.flags) && c.flags.length > 0);
  const passed = v.passed === true;
  const sources = Array.isArray(sc.sources) ? sc.sources : [];

  const list = (title, items, part) => {
    const xs = Array.isArray(items) ? items.filter((x) => typeof x === "string" && x) : [];
    if (xs.length === 0) return null;
    return h("section", { "data-part": part }, h("h2", null, title), h("ul", null, xs.map((x) => h("li", null, x))));
  };

  const total = typeof v.total_claims === "number" ? v.total_claims : claims.length;
  const verdict = passed
    ? `Validation passed: all ${total} claims cite retrieved sources`
    : `Validation: ${unsupported.length} of ${total} claims unsupported`;

  const details = h(
    "details",
    { class: "validation", "data-part": "validation", open: !passed },
    h("summary", null, h("span", { class: passed ? "badge status-completed" : "badge status-failed" }, passed ? "Passed" : "Problems"), " ", verdict),
    h(
      "ul",
      { class: "checks" },
      h("li", null, `All claims supported: ${v.all_claims_supported === true ? "yes" : "no"}`),
      h("li", null, `All cited URLs were retrieved: ${v.all_urls_known === true ? "yes" : "no"}`),
    ),
    Array.isArray(v.flagged) && v.flagged.length
      ? h("ul", { class: "flagged" }, v.flagged.filter((x) => typeof x === "string").map((x) => h("li", null, x)))
      : null,
    h(
      "ol",
      { class: "claims" },
      claims.map((c, i) => {
        const flags = Array.isArray(c.flags) ? c.flags.filter((f) => typeof f === "string") : [];
        const ok = flags.length === 0;
        const urls = Array.isArray(c.urls) ? c.urls.filter((u) => typeof u === "string") : [];
        return h(
          "li",
          { class: ok ? "claim supported" : "claim unsupported", "data-claim": String(i + 1) },
          h("p", { class: "claim-text" }, str(c.text)),
          h(
            "div",
            { class: "claim-meta" },
            h("span", { class: ok ? "verdict ok" : "verdict bad" }, ok ? "supported" : "unsupported"),
            ok ? null : h("span", { class: "flags" }, flags.join(", ")),
            str(c.confidence) ? h("span", { class: "confidence" }, `confidence: ${str(c.confidence)}`) : null,
          ),
          urls.length
            ? h(
                "ul",
                { class: "urls" },
                urls.map((u) => h("li", null, link(u, u, ui.open))),
              )
            : h("p", { class: "muted" }, "No URL cited."),
        );
      }),
    ),
  );

  const subq = Array.isArray(sc.subquestions) ? sc.subquestions.filter((x) => typeof x === "string") : [];
  const method = subq.length
    ? h(
        "details",
        { class: "method", "data-part": "subquestions" },
        h("summary", null, `How it was researched (${subq.length} sub-questions${str(sc.decomposition) ? `, ${str(sc.decomposition)}` : ""})`),
        h("ol", null, subq.map((q) => h("li", null, q))),
      )
    : null;

  return h(
    "article",
    { class: "view report", "data-view": "report" },
    h("header", { class: "bar" }, h("h1", null, "Deep research report"), h("span", { class: passed ? "badge status-completed" : "badge status-failed" }, passed ? "Validated" : "Check claims")),
    costBlock(sc, state, ui),
    securityBanner(sc.security_flags),
    answerBlock(sc.answer, null, ui),
    list("Key findings", sc.key_findings, "key-findings"),
    list("Open questions", sc.open_questions, "open-questions"),
    details,
    sourceList(sources, ui, false),
    method,
    responseIdRow(str(sc.response_id), ui.copy),
  );
}

/** Search results as ranked cards. */
export function searchView(sc, state, ui) {
  const results = sc.results.filter(isObject);
  return h(
    "article",
    { class: "view search", "data-view": "search" },
    h("header", { class: "bar" }, h("h1", null, "Search results"), h("span", { class: "badge" }, `${results.length}`)),
    costBlock(sc, state, ui),
    securityBanner(sc.security_flags),
    results.length === 0
      ? h("p", { class: "muted" }, "No results.")
      : h(
          "ol",
          { class: "cards plain" },
          results.map((r, i) => {
            const domain = domainOf(r.url);
            const date = str(r.date) || (str(r.last_updated) ? `updated ${str(r.last_updated)}` : "");
            return h(
              "li",
              { class: "card", "data-rank": String(i + 1) },
              h("span", { class: "rank", "aria-hidden": "true" }, String(i + 1)),
              h(
                "div",
                { class: "body" },
                link(r.url, str(r.title) || domain || "Untitled", ui.open, {
                  class: "title",
                  "aria-label": `Result ${i + 1}: ${str(r.title) || domain || "untitled"}`,
                }),
                h("div", { class: "meta" }, [domain, date].filter(Boolean).join(" \u00b7 ")),
                str(r.snippet) ? h("p", { class: "snippet" }, str(r.snippet)) : null,
              ),
            );
          }),
        ),
  );
}

export function messageView(text, part) {
  return h("div", { class: "view message", "data-view": part }, h("p", { class: "muted" }, text));
}
