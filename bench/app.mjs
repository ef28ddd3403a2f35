// The MCP App's costs, measured in one run against a real `perplexity-agent` and
// `fake-perplexity`, with the App shown in Debian's Chromium the way tests/browser/ shows it:
//
//   1. the App's size: app/dist/research.html and what `resources/read` returns (raw, gzip -9);
//   2. what declaring `io.modelcontextprotocol/ui` adds to `tools/list`, in both protocol eras
//      (2025-11-25 via `initialize`; 2026-07-28 via a request's `_meta` client capabilities);
//   3. what it adds to a research result (`perplexity_agent`, an answer with 3 sources);
//   4. time from `resources/read` to the App's first meaningful paint, over fresh page loads.
//
//   node bench/app.mjs --ours PATH/perplexity-agent --fake PATH/fake-perplexity \
//        [--rounds 15] [--warmup 1] [--out FILE] [--app app/dist/research.html] [--chromium /usr/bin/chromium]
//
// Prints a Markdown report (and writes it to --out). Reuses tests/browser/: mcp.mjs (the two
// processes and the stdio MCP client), host.html + host.mjs (the host page: sandboxed srcdoc
// iframe, the resource's CSP as a <meta http-equiv>, ext-apps AppBridge), and the
// playwright-core of tests/browser/node_modules. Loopback only; every process started here
// is stopped (by its PID, or by Playwright for Chromium) on success and on failure.

import http from "node:http";
import os from "node:os";
import path from "node:path";
import zlib from "node:zlib";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { readFile, writeFile, mkdtemp, rm, stat } from "node:fs/promises";
import { existsSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { FakeUpstream, McpServer, resourceUriOf, UI_EXTENSION, APP_MIME } from "../tests/browser/mcp.mjs";
import { launchChromium } from "../tests/browser/chromium.mjs";
import { bundleHost } from "../tests/browser/hostpage.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, "..");
const BROWSER_DIR = path.join(REPO, "tests", "browser");

const { values: opt } = parseArgs({
  args: process.argv.slice(2),
  options: {
    ours: { type: "string" },
    fake: { type: "string" },
    rounds: { type: "string", default: "15" },
    warmup: { type: "string", default: "1" },
    out: { type: "string" },
    app: { type: "string" },
    chromium: { type: "string" },
    help: { type: "boolean", short: "h", default: false },
  },
  allowPositionals: false,
  strict: true,
});
const USAGE =
  "usage: node bench/app.mjs --ours PATH_TO_perplexity-agent --fake PATH_TO_fake-perplexity [--rounds 15] [--warmup 1] [--out FILE] [--app HTML] [--chromium BIN]";
if (opt.help) {
  console.log(USAGE);
  process.exit(0);
}
if (!opt.ours || !opt.fake) {
  console.error(USAGE);
  process.exit(2);
}
const OURS = path.resolve(opt.ours);
const FAKE = path.resolve(opt.fake);
const ROUNDS = Number.parseInt(opt.rounds, 10);
const WARMUP = Number.parseInt(opt.warmup, 10);
if (!(ROUNDS >= 1) || !(WARMUP >= 0)) {
  console.error("--rounds must be >= 1 and --warmup >= 0");
  process.exit(2);
}
const APP_HTML_PATH = path.resolve(opt.app || path.join(REPO, "app", "dist", "research.html"));
const CHROMIUM = opt.chromium || process.env.CHROMIUM || "/usr/bin/chromium";
for (const [what, p] of [["--ours", OURS], ["--fake", FAKE], ["the App", APP_HTML_PATH], ["Chromium", CHROMIUM]]) {
  if (!existsSync(p)) {
    console.error(`${what}: ${p} does not exist`);
    process.exit(2);
  }
}

const MODERN = "2026-07-28";
const LEGACY = "2025-11-25";
const CLIENT_INFO = { name: "perplexity-agent-app-bench", version: "1.0.0" };
const DECLARING = { extensions: { [UI_EXTENSION]: { mimeTypes: [APP_MIME] } } };
const RESEARCH_TOOL = "perplexity_agent";
const RESEARCH_ARGS = { query: "What changed in solar, storage and cells in 2025?" };
/** The fake's scenario for every research call: an answer citing 3 sources. */
const SCENARIO = {
  duration_ms: 150,
  sources: [
    { id: 3, title: "Solar capacity additions in 2025", url: "https://www.iea.example/reports/solar-2025" },
    { id: 7, title: "Grid-scale batteries: a review", url: "https://energy.example.org/batteries/review" },
    { id: 9, title: "Perovskite cells reach 30% efficiency", url: "https://news.example.net/perovskite" },
  ],
  answer:
    "Solar additions grew again in 2025 [3]. Grid-scale storage grew faster, as battery prices kept falling [7].\n\n" +
    "Perovskite-silicon tandem cells passed 30% efficiency in the lab [9].",
};
/** What "first meaningful content" is: the research view's answer. */
const ANSWER_SELECTOR = '[data-view="research"] [data-part="answer"]';

const nowAbs = () => performance.timeOrigin + performance.now();
const bytes = (s) => Buffer.byteLength(s, "utf8");
const gz = (s) => zlib.gzipSync(Buffer.from(s, "utf8"), { level: 9 }).length;
const fmtInt = (n) => n.toLocaleString("en-US");
const ms = (x) => (Number.isFinite(x) ? x.toFixed(1) : "n/a");

// ---- clean-up: everything started here, stopped in reverse order, also on failure ----------

const cleanups = [];
const children = new Set(); // child processes, for the last-resort kill by PID at exit
let cleaning = null;
function cleanup() {
  if (!cleaning) {
    cleaning = (async () => {
      while (cleanups.length) {
        const [what, fn] = cleanups.pop();
        try {
          await fn();
        } catch (err) {
          console.error(`clean-up of ${what} failed: ${err.message}`);
        }
      }
    })();
  }
  return cleaning;
}
process.on("exit", () => {
  for (const proc of children) {
    if (proc.exitCode === null && proc.signalCode === null) {
      try {
        process.kill(proc.pid, "SIGKILL");
      } catch {
        // Already gone.
      }
    }
  }
});
// Playwright's own signal handlers are off (launch options below), so a signal stops
// everything in order here: Chromium through Playwright, the servers, then the temp dirs.
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(sig, () => {
    if (cleaning) return;
    console.error(`${sig}: stopping what was started`);
    cleanup().finally(() => process.exit(sig === "SIGINT" ? 130 : 143));
  });
}

// ---- MCP over stdio, with the bytes of every answer as they came over the wire ----------------

/** Records each response's raw line (by id), without changing how mcp.mjs handles it. */
function tapRaw(server) {
  server.raw = new Map();
  server.onLine = (line) => {
    try {
      const msg = JSON.parse(line);
      if (msg && msg.id !== undefined && msg.method === undefined) server.raw.set(msg.id, line);
    } catch {
      // McpServer.onLine reports it.
    }
    McpServer.prototype.onLine.call(server, line);
  };
  return server;
}

/** A request, with its answer's wire line (without the newline). */
async function rawRequest(server, method, params, timeoutMs) {
  const id = server.nextId;
  const result = await server.request(method, params, timeoutMs);
  const line = server.raw.get(id);
  server.raw.delete(id);
  if (line === undefined) throw new Error(`no raw line recorded for ${method} (id ${id})`);
  return { result, line, bytes: bytes(line) };
}

function modernMeta(declaring) {
  return {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": declaring ? DECLARING : {},
    "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
  };
}

async function initialize(server, declaring) {
  const r = await rawRequest(server, "initialize", {
    protocolVersion: LEGACY,
    capabilities: declaring ? DECLARING : {},
    clientInfo: CLIENT_INFO,
  });
  server.notify("notifications/initialized");
  if (r.result.protocolVersion !== LEGACY) throw new Error(`initialize answered protocol ${r.result.protocolVersion}`);
  return r.result;
}

/** tools/list, every page; `meta` makes each page request a 2026-07-28 one. */
async function listTools(server, meta) {
  const tools = [];
  let total = 0;
  let pages = 0;
  let cursor;
  do {
    const params = {};
    if (cursor) params.cursor = cursor;
    if (meta) params._meta = meta;
    const r = await rawRequest(server, "tools/list", params);
    if (meta && r.result.resultType === undefined) throw new Error("a 2026-07-28 tools/list came back unshaped (no resultType)");
    tools.push(...(r.result.tools || []));
    total += r.bytes;
    pages += 1;
    cursor = r.result.nextCursor;
  } while (cursor);
  return { tools, bytes: total, pages };
}

function textBytes(result) {
  return (result.content || []).filter((c) => c.type === "text").reduce((n, c) => n + bytes(c.text), 0);
}

async function research(server, fake, meta) {
  await fake.reset(SCENARIO);
  const params = { name: RESEARCH_TOOL, arguments: RESEARCH_ARGS };
  if (meta) params._meta = meta;
  const r = await rawRequest(server, "tools/call", params, 60_000);
  if (r.result.isError) throw new Error(`${RESEARCH_TOOL} failed: ${r.line.slice(0, 500)}`);
  const sc = r.result.structuredContent;
  return {
    result: r.result,
    bytes: r.bytes,
    scBytes: sc === undefined ? 0 : bytes(JSON.stringify(sc)),
    textBytes: textBytes(r.result),
    view: sc && sc.view,
    status: sc && sc.status,
    sources: sc && Array.isArray(sc.sources) ? sc.sources.length : undefined,
  };
}

/** Compares a list seen with the extension to one seen without it, tool by tool. */
function compareLists(withExt, without) {
  const byName = new Map(without.tools.map((t) => [t.name, t]));
  const marked = [];
  const problems = [];
  const deltas = [];
  for (const t of withExt.tools) {
    const plain = byName.get(t.name);
    if (!plain) {
      problems.push(`${t.name} is listed only with the extension`);
      continue;
    }
    const a = JSON.stringify(t);
    const b = JSON.stringify(plain);
    if (resourceUriOf(t)) {
      marked.push(t.name);
      deltas.push(bytes(a) - bytes(b));
      // The only difference may be _meta.ui.
      const stripped = structuredClone(t);
      delete stripped._meta.ui;
      if (Object.keys(stripped._meta).length === 0 && !(plain._meta && typeof plain._meta === "object")) delete stripped._meta;
      if (JSON.stringify(stripped) !== b) problems.push(`${t.name} differs by more than _meta.ui`);
    } else if (a !== b) {
      problems.push(`${t.name} (unmarked) differs`);
    }
  }
  if (withExt.tools.length !== without.tools.length) problems.push(`${withExt.tools.length} tools vs ${without.tools.length}`);
  for (const t of without.tools) if (resourceUriOf(t)) problems.push(`${t.name} is marked for a client that did not declare the extension`);
  return { marked, deltas, problems, uris: [...new Set(withExt.tools.map(resourceUriOf).filter(Boolean))] };
}

// ---- the host page (tests/browser/host.html + host.mjs), served on loopback -----------------

async function startHostServer() {
  const hostHtml = await readFile(path.join(BROWSER_DIR, "host.html"), "utf8");
  const hostJs = await bundleHost();
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, "http://127.0.0.1");
    if (url.pathname === "/" || url.pathname === "/host.html") {
      res.writeHead(200, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" });
      res.end(hostHtml);
    } else if (url.pathname === "/host.js") {
      res.writeHead(200, { "content-type": "text/javascript; charset=utf-8", "cache-control": "no-store" });
      res.end(hostJs);
    } else {
      res.writeHead(url.pathname === "/favicon.ico" ? 204 : 404);
      res.end();
    }
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, base: `http://127.0.0.1:${server.address().port}` };
}

/**
 * The host page's init script (runs before host.js). Times are absolute
 * (performance.timeOrigin + performance.now()), mapped onto this Node process's clock
 * afterwards by measuring each document's offset.
 *
 * The App's frame is a sandboxed srcdoc iframe, which Chromium puts in its own process
 * (an out-of-process iframe): Playwright's init scripts reach such a frame only when it
 * attaches to it, sometimes after the App's own script has run (seen in about 1 load in
 * 4). So the frame's probe travels in the srcdoc itself: one inline <script> inserted
 * right after the CSP <meta> that host.mjs put at the top of <head>, i.e. before any of
 * the App's code; everything else in the srcdoc is what host.mjs set.
 */
function instrument(selector) {
  if (window !== window.top) return;
  const now = () => performance.timeOrigin + performance.now();
  const b = (window.__bench = { docStart: now() });
  const methodOf = (data) => (data && typeof data === "object" && typeof data.method === "string" ? data.method : "");

  // Runs in the App's frame (inserted into the srcdoc; CSP script-src 'unsafe-inline').
  function frameProbe(sel) {
    const clock = () => performance.timeOrigin + performance.now();
    const fb = (window.__bench = { docStart: clock() });
    window.addEventListener("message", (e) => {
      const d = e.data;
      if (d && typeof d === "object" && d.method === "ui/notifications/tool-result" && fb.toolResult === undefined) fb.toolResult = clock();
    });
    try {
      new PerformanceObserver((list) => {
        for (const e of list.getEntries()) {
          if (e.name === "first-paint") fb.fp = performance.timeOrigin + e.startTime;
          if (e.name === "first-contentful-paint") fb.fcp = performance.timeOrigin + e.startTime;
        }
      }).observe({ type: "paint", buffered: true });
    } catch (err) {
      fb.paintObserverError = String(err);
    }
    try {
      new PerformanceObserver((list) => {
        for (const e of list.getEntries()) {
          if (e.identifier === "bench-answer" && fb.elementPaint === undefined) {
            fb.elementPaint = performance.timeOrigin + (e.renderTime || e.loadTime);
            fb.elementPaintFrom = e.renderTime ? "renderTime" : "loadTime";
          }
        }
      }).observe({ type: "element", buffered: true });
    } catch (err) {
      fb.elementObserverError = String(err);
    }
    const mo = new MutationObserver(() => {
      const el = document.querySelector(sel);
      if (!el) return;
      mo.disconnect();
      fb.answerInDom = clock();
      // Element Timing: the paint of the answer's text (text counts for the element that
      // holds it, so its paragraphs are marked too). Attributes only, set before paint.
      for (const x of [el, ...el.querySelectorAll("p")]) x.setAttribute("elementtiming", "bench-answer");
      requestAnimationFrame(() => {
        fb.raf = clock();
      });
    });
    mo.observe(document, { childList: true, subtree: true });
  }
  const probe = `<script>(${frameProbe.toString()})(${JSON.stringify(selector)});</script>`;
  b.probeChars = probe.length;

  // When srcdoc is set (and the probe put in), when the App's ui/initialize arrives.
  const desc = Object.getOwnPropertyDescriptor(HTMLIFrameElement.prototype, "srcdoc");
  Object.defineProperty(HTMLIFrameElement.prototype, "srcdoc", {
    configurable: true,
    enumerable: desc.enumerable,
    get() {
      return desc.get.call(this);
    },
    set(v) {
      b.srcdocSet = now();
      let html = String(v);
      const m = /<meta http-equiv="Content-Security-Policy"[^>]*>/i.exec(html);
      if (m) {
        html = html.slice(0, m.index + m[0].length) + probe + html.slice(m.index + m[0].length);
        b.probeAfterCsp = true;
      } else {
        b.probeAfterCsp = false;
      }
      b.srcdocChars = String(v).length;
      desc.set.call(this, html);
    },
  });
  window.addEventListener("message", (e) => {
    const m = methodOf(e.data);
    if (m === "ui/initialize" && b.uiInitialize === undefined) b.uiInitialize = now();
    if (m === "ui/notifications/initialized" && b.uiInitialized === undefined) b.uiInitialized = now();
  });
}

/** This document's clock minus Node's, from the evaluate with the shortest round trip. */
async function clockOffset(evalNow, samples = 9) {
  let best = null;
  for (let i = 0; i < samples; i += 1) {
    const a = nowAbs();
    const r = await evalNow();
    const c = nowAbs();
    if (!best || c - a < best.rtt) best = { rtt: c - a, offset: r - (a + c) / 2 };
  }
  return best;
}

async function waitFor(what, fn, timeoutMs) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50)); // t1 is taken in the page: polling only collects it
  }
}

/** One fresh page load: resources/read → srcdoc → ui/initialize → tool result → answer painted. */
async function paintRound(context, base, server, uri, toolResult) {
  const page = await context.newPage();
  const log = [];
  page.on("pageerror", (e) => log.push(`pageerror: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error") log.push(`console.error: ${m.text()}`);
  });
  try {
    await page.addInitScript(instrument, ANSWER_SELECTOR);
    await page.exposeFunction("__hostCallTool", (params) => server.callTool(params.name, params.arguments || {}));
    await page.exposeFunction("__hostOpenLink", () => {});
    await page.goto(`${base}/host.html`);
    await page.waitForFunction(() => Boolean(window.host));

    const t0 = nowAbs();
    const read = await server.request("resources/read", { uri });
    const tRead = nowAbs();
    const entry = (read.contents || []).find((c) => c.uri === uri) || (read.contents || [])[0];
    if (!entry || entry.mimeType !== APP_MIME || typeof entry.text !== "string") throw new Error(`resources/read ${uri}: unexpected ${JSON.stringify(read).slice(0, 300)}`);
    const csp = entry._meta && entry._meta.ui ? entry._meta.ui.csp : undefined;
    await page.evaluate((o) => window.host.mount(o), {
      html: entry.text,
      csp,
      toolName: RESEARCH_TOOL,
      toolInput: RESEARCH_ARGS,
      toolResult,
    });
    const frame = await (await page.$("#app")).contentFrame();
    const fb0 = await waitFor("the answer painted (rAF)", () => frame.evaluate(() => window.__bench && window.__bench.raf && window.__bench), 30_000).catch(async (err) => {
      const state = await frame
        .evaluate((sel) => ({ bench: window.__bench, answer: Boolean(document.querySelector(sel)), view: document.querySelector("[data-view]")?.dataset.view, hidden: document.hidden, visibility: document.visibilityState }), ANSWER_SELECTOR)
        .catch((e) => `frame unreadable: ${e.message}`);
      const host = await page.evaluate(() => ({ bench: window.__bench, hidden: document.hidden })).catch((e) => `page unreadable: ${e.message}`);
      throw new Error(`${err.message}; frame ${JSON.stringify(state)}; host ${JSON.stringify(host)}; ${log.join("; ")}`);
    });
    // The Element Timing entry is delivered after the frame is presented; give it a moment.
    const fb = await waitFor("the Element Timing entry", () => frame.evaluate(() => window.__bench.elementPaint && window.__bench), 1000).catch(() => fb0);
    const pb = await page.evaluate(() => window.__bench);
    const appFacts = await frame.evaluate(
      (sel) => ({
        csp: document.querySelector('meta[http-equiv="Content-Security-Policy"]')?.content || "",
        answerText: document.querySelector(sel)?.textContent || "",
        url: location.href,
      }),
      ANSWER_SELECTOR,
    );
    const pageClock = await clockOffset(() => page.evaluate(() => performance.timeOrigin + performance.now()));
    const frameClock = await clockOffset(() => frame.evaluate(() => performance.timeOrigin + performance.now()));
    const P = (t) => t - pageClock.offset; // host page time → Node time
    const F = (t) => t - frameClock.offset; // App frame time → Node time
    for (const k of ["srcdocSet", "uiInitialize"]) if (pb[k] === undefined) throw new Error(`host page: no ${k} recorded`);
    for (const k of ["toolResult", "answerInDom", "raf"]) if (fb[k] === undefined) throw new Error(`App frame: no ${k} recorded`);
    if (!pb.probeAfterCsp) throw new Error("the srcdoc had no CSP <meta> to put the probe after");
    if (!(fb.docStart < pb.uiInitialize)) throw new Error("the App frame's probe ran after the App had started");
    return {
      total: F(fb.raf) - t0,
      read: tRead - t0,
      handoff: P(pb.srcdocSet) - tRead,
      appStart: pb.uiInitialize - pb.srcdocSet,
      handshake: F(fb.toolResult) - P(pb.uiInitialize),
      render: fb.raf - fb.toolResult,
      domToRaf: fb.raf - fb.answerInDom,
      elementPaint: fb.elementPaint === undefined ? NaN : F(fb.elementPaint) - t0,
      elementPaintFrom: fb.elementPaintFrom,
      placeholderFcp: fb.fcp === undefined ? NaN : F(fb.fcp) - P(pb.srcdocSet),
      observerErrors: [fb.paintObserverError, fb.elementObserverError].filter(Boolean),
      pageRtt: pageClock.rtt,
      frameRtt: frameClock.rtt,
      frameMinusPage: frameClock.offset - pageClock.offset,
      srcdocChars: pb.srcdocChars,
      htmlChars: entry.text.length,
      appFacts,
      log,
      probeChars: pb.probeChars,
    };
  } finally {
    await page.close();
  }
}

// ---- statistics and the report ----------------------------------------------------------------

function quantile(xs, q) {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b);
  if (!s.length) return NaN;
  return s[Math.max(0, Math.ceil(q * s.length) - 1)]; // nearest rank
}
const median = (xs) => {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b);
  if (!s.length) return NaN;
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

/** A Markdown table; `align` has one letter per column: l(eft) or r(ight). */
function table(head, rows, align) {
  const line = (cells) => `| ${cells.join(" | ")} |`;
  const rule = head.map((_, i) => ((align || "l")[i] === "r" ? "---:" : "---"));
  return [line(head), line(rule), ...rows.map(line)].join("\n");
}

// ---- main -----------------------------------------------------------------------------------

async function main() {
  const started = new Date();
  const fileHtml = await readFile(APP_HTML_PATH, "utf8");
  const oursStat = await stat(OURS);

  const fake = await FakeUpstream.start(FAKE);
  children.add(fake.proc);
  cleanups.push(["fake-perplexity", () => fake.stop()]);
  const start = async (label) => {
    const s = tapRaw(await McpServer.start(OURS, fake));
    children.add(s.proc);
    cleanups.push([`perplexity-agent (${label})`, () => s.stop()]);
    return s;
  };
  // A: 2025-11-25, declared at initialize (also the browser rounds' server).
  // B: 2025-11-25, not declared. C: 2026-07-28 requests, with and without the declaration.
  const A = await start("2025-11-25, declaring");
  const B = await start("2025-11-25, plain");
  const C = await start("2026-07-28");
  const initA = await initialize(A, true);
  await initialize(B, false);
  const ext = initA.capabilities && initA.capabilities.extensions && initA.capabilities.extensions[UI_EXTENSION];
  if (ext === undefined) throw new Error(`initialize did not acknowledge ${UI_EXTENSION}: ${JSON.stringify(initA.capabilities)}`);

  // 2. tools/list.
  const lists = {
    legacy: { with: await listTools(A), without: await listTools(B) },
    modern: { with: await listTools(C, modernMeta(true)), without: await listTools(C, modernMeta(false)) },
  };
  const cmp = { legacy: compareLists(lists.legacy.with, lists.legacy.without), modern: compareLists(lists.modern.with, lists.modern.without) };
  const uris = [...new Set([...cmp.legacy.uris, ...cmp.modern.uris])];
  if (uris.length !== 1) throw new Error(`expected one App URI, got ${JSON.stringify(uris)}`);
  const uri = uris[0];

  // 1. The App's size: the file and what resources/read returns.
  const readA = await rawRequest(A, "resources/read", { uri });
  const content = readA.result.contents.find((c) => c.uri === uri) || readA.result.contents[0];
  const servedHtml = typeof content.text === "string" ? content.text : Buffer.from(content.blob || "", "base64").toString("utf8");
  const served = {
    mimeType: content.mimeType,
    via: typeof content.text === "string" ? "text" : "blob",
    equal: Buffer.from(servedHtml, "utf8").equals(Buffer.from(fileHtml, "utf8")),
    meta: content._meta,
  };
  const readModern = await rawRequest(C, "resources/read", { uri, _meta: modernMeta(true) });
  const modernText = readModern.result.contents && readModern.result.contents[0] && readModern.result.contents[0].text;

  // 3. A research result with and without the extension.
  const results = {
    legacy: { with: await research(A, fake), without: await research(B, fake) },
    modern: { with: await research(C, fake, modernMeta(true)), without: await research(C, fake, modernMeta(false)) },
  };
  for (const [era, r] of Object.entries(results)) {
    if (r.with.view !== "research" || r.with.status !== "completed" || r.with.sources !== 3) {
      throw new Error(`${era} research result with the extension: view ${r.with.view}, status ${r.with.status}, ${r.with.sources} sources`);
    }
  }

  // 4. resources/read → first paint in Chromium.
  const { server: hostServer, base } = await startHostServer();
  cleanups.push(["host page server", () => new Promise((r) => hostServer.close(r))]);
  const profileDir = await mkdtemp(path.join(os.tmpdir(), "app-bench-profile-"));
  cleanups.push(["Chromium profile", () => rm(profileDir, { recursive: true, force: true })]);
  const context = await launchChromium(CHROMIUM, profileDir, {
    handleSIGINT: false,
    handleSIGTERM: false,
    handleSIGHUP: false,
  });
  cleanups.push(["Chromium", () => context.close()]);
  let browserVersion = "?";
  {
    const p = await context.newPage();
    try {
      const cdp = await context.newCDPSession(p);
      browserVersion = (await cdp.send("Browser.getVersion")).product;
    } finally {
      await p.close();
    }
  }
  const toolResult = results.legacy.with.result;
  const rounds = [];
  const discarded = [];
  for (let i = 0; i < WARMUP + ROUNDS; i += 1) {
    let r;
    for (let attempt = 1; !r; attempt += 1) {
      try {
        r = await paintRound(context, base, A, uri, toolResult);
      } catch (err) {
        // A load whose records are incomplete is not a measurement: note it, load again.
        if (attempt >= 3) throw err;
        discarded.push(`load ${i + 1}, attempt ${attempt}: ${err.message.split(";")[0]}`);
        console.error(`round ${i + 1}: discarded (${err.message})`);
      }
    }
    r.warmup = i < WARMUP;
    if (r.srcdocChars <= r.htmlChars) throw new Error("the srcdoc is not the App with the CSP injected");
    if (!r.appFacts.csp || r.appFacts.url !== "about:srcdoc") throw new Error(`the App frame has no CSP meta or is not srcdoc: ${JSON.stringify(r.appFacts)}`);
    if (!/\[3\]|Solar/.test(r.appFacts.answerText)) throw new Error(`the answer is not the fake's: ${r.appFacts.answerText.slice(0, 200)}`);
    if (r.log.length) console.error(`round ${i + 1}: ${r.log.join("; ")}`);
    rounds.push(r);
    console.error(`round ${i + 1}/${WARMUP + ROUNDS}${r.warmup ? " (warm-up)" : ""}: ${ms(r.total)} ms`);
  }
  const measured = rounds.filter((r) => !r.warmup);

  // ---- the report ----
  const L = [];
  const cpu = os.cpus();
  L.push("# MCP App benchmark (`bench/app.mjs`)");
  L.push("");
  L.push(`Measured ${started.toISOString()} on ${os.type()} ${os.release()}, ${cpu.length} × ${cpu[0] ? cpu[0].model.trim() : "?"}, load average ${os.loadavg().map((x) => x.toFixed(2)).join(" ")} at the end; Node ${process.version}; ${browserVersion} (\`${CHROMIUM}\`).`);
  L.push(`Server: \`${OURS}\` (${fmtInt(oursStat.size)} bytes, modified ${oursStat.mtime.toISOString()}); fake: \`${FAKE}\`; App file: \`${path.relative(REPO, APP_HTML_PATH) || APP_HTML_PATH}\`. Everything on 127.0.0.1.`);
  L.push("");

  L.push("## 1. The App's size");
  L.push("");
  L.push(table(["What", "Raw bytes", "gzip -9 bytes"], [
    [`\`${path.relative(REPO, APP_HTML_PATH)}\``, fmtInt(bytes(fileHtml)), fmtInt(gz(fileHtml))],
    [`\`resources/read\` → \`contents[0].${served.via}\` (2025-11-25)`, fmtInt(bytes(servedHtml)), fmtInt(gz(servedHtml))],
    ["the whole `resources/read` answer as sent (one JSON-RPC line, HTML JSON-escaped)", fmtInt(readA.bytes), fmtInt(gz(readA.line))],
    ["the same, 2026-07-28 request (shaped result)", fmtInt(readModern.bytes), fmtInt(gz(readModern.line))],
  ], "lrr"));
  L.push("");
  L.push(
    served.equal
      ? `The served \`${served.via}\` is byte for byte \`${path.relative(REPO, APP_HTML_PATH)}\` (compared as UTF-8 bytes)${modernText === servedHtml ? ", in both eras" : " (the 2026-07-28 read DIFFERS)"}.`
      : `**The served \`${served.via}\` DIFFERS from \`${path.relative(REPO, APP_HTML_PATH)}\`** (${fmtInt(bytes(servedHtml))} vs ${fmtInt(bytes(fileHtml))} bytes).`,
  );
  L.push(`mimeType \`${served.mimeType}\`; \`_meta\` \`${JSON.stringify(served.meta)}\`. gzip -9 here is zlib level 9 (gzip's deflate, no file name in the header).`);
  L.push("");

  L.push("## 2. `tools/list`");
  L.push("");
  L.push("Bytes are the JSON-RPC answer lines as the server wrote them on stdout (all pages, without the newline). 2025-11-25: a fresh stdio process per client, declaring the extension at `initialize` or not. 2026-07-28: one stdio process, no `initialize`; each request's `_meta` carries `io.modelcontextprotocol/protocolVersion`, `…/clientInfo` and `…/clientCapabilities` (with or without the extension).");
  L.push("");
  const listRows = [];
  for (const [era, label] of [["legacy", LEGACY], ["modern", MODERN]]) {
    for (const w of ["without", "with"]) {
      const l = lists[era][w];
      listRows.push([label, w === "with" ? "declares the extension" : "does not", String(l.tools.length), String(l.tools.filter(resourceUriOf).length), String(l.pages), fmtInt(l.bytes)]);
    }
  }
  L.push(table(["Era", "Client", "Tools", "Marked", "Pages", "Bytes"], listRows, "llrrrr"));
  L.push("");
  const addRows = [];
  for (const [era, label] of [["legacy", LEGACY], ["modern", MODERN]]) {
    const added = lists[era].with.bytes - lists[era].without.bytes;
    const n = cmp[era].marked.length;
    const per = n ? added / n : NaN;
    const d = cmp[era].deltas;
    addRows.push([label, fmtInt(added), String(n), n ? per.toFixed(1) : "n/a", d.length ? `${Math.min(...d)}–${Math.max(...d)}` : "n/a", per <= 300 ? "met" : "**missed**"]);
  }
  L.push(table(["Era", "Added bytes", "Marked tools", "Added B per marked tool", "Per tool, exact (B)", "Goal ≤ 300 B"], addRows, "lrrrrl"));
  L.push("");
  L.push(`Marked: ${cmp.legacy.marked.map((n) => `\`${n}\``).join(", ")} (2025-11-25); ${cmp.modern.marked.map((n) => `\`${n}\``).join(", ")} (2026-07-28); each with \`_meta.ui.resourceUri\` = \`${uri}\`. "Per tool, exact" is each marked tool's compact JSON with the extension minus without it.`);
  const problems = [...cmp.legacy.problems.map((p) => `2025-11-25: ${p}`), ...cmp.modern.problems.map((p) => `2026-07-28: ${p}`)];
  L.push(problems.length ? `**Differences beyond \`_meta.ui\`:** ${problems.join("; ")}.` : "Apart from `_meta.ui` on the marked tools, the two lists of each era are identical (every tool compared as JSON).");
  L.push("");

  L.push("## 3. A research result");
  L.push("");
  L.push(`\`tools/call\` \`${RESEARCH_TOOL}\` \`${JSON.stringify(RESEARCH_ARGS)}\`; the fake is reset before each call with the scenario \`${JSON.stringify({ duration_ms: SCENARIO.duration_ms, sources: "3 sources (ids 3, 7, 9)", answer: `${bytes(SCENARIO.answer)} bytes citing [3] [7] [9]` })}\` (POST /_control/scenario). Bytes: the JSON-RPC answer line; \`structuredContent\`: its compact JSON; text: the \`text\` of the text content.`);
  L.push("");
  const resRows = [];
  for (const [era, label] of [["legacy", LEGACY], ["modern", MODERN]]) {
    for (const w of ["without", "with"]) {
      const r = results[era][w];
      resRows.push([label, w === "with" ? "declares the extension" : "does not", fmtInt(r.bytes), r.scBytes ? fmtInt(r.scBytes) : "none", fmtInt(r.textBytes)]);
    }
  }
  L.push(table(["Era", "Client", "Result bytes", "structuredContent bytes", "Text bytes"], resRows, "llrrr"));
  L.push("");
  for (const [era, label] of [["legacy", LEGACY], ["modern", MODERN]]) {
    const r = results[era];
    const added = r.with.bytes - r.without.bytes;
    L.push(`- ${label}: the extension adds ${fmtInt(added)} bytes (${((100 * added) / r.without.bytes).toFixed(0)} %) to the result; \`structuredContent\` is ${fmtInt(r.with.scBytes)} of them${r.without.scBytes ? ` (without the extension it is already ${fmtInt(r.without.scBytes)})` : " (none without the extension)"}; the text content is ${r.with.textBytes === r.without.textBytes ? "the same size" : `${fmtInt(r.with.textBytes)} vs ${fmtInt(r.without.textBytes)} bytes`} in both.`);
  }
  L.push("");

  L.push("## 4. `resources/read` → first paint in Chromium");
  L.push("");
  L.push(`${ROUNDS} measured fresh page loads${WARMUP ? ` after ${WARMUP} warm-up load(s) (not counted, listed below)` : ""}, one Chromium (flags as tests/browser/run.mjs), each load a new tab on tests/browser/host.html (host.mjs bundled with app/node_modules' esbuild and ext-apps). The 2025-11-25 server that declared the extension answers \`resources/read\`; the research result of section 3 is the tool result.`);
  L.push("");
  L.push("- **t0**: in Node, just before `resources/read` is written to the server's stdin.");
  L.push("- The HTML and `_meta.ui.csp` go to the host page (`page.evaluate` → `host.mount`): sandboxed (`allow-scripts`) srcdoc iframe with the CSP `<meta>` injected, AppBridge over PostMessageTransport, then `tool-input` and `tool-result`, as the harness mounts it.");
  L.push(`- **t1**: inside the App frame, a MutationObserver sees \`${ANSWER_SELECTOR}\` in the DOM and requests an animation frame; t1 is \`performance.now()\` in that rAF callback (the frame that paints the answer is being produced). Measured with \`performance.now()\` in the page, not with paint entries (see the cross-check).`);
  L.push(`- The frame's probe (${fmtInt(median(measured.map((r) => r.probeChars)))} characters: the MutationObserver, a \`message\` listener, two PerformanceObservers) is one inline \`<script>\` the host page inserts into the srcdoc right after the CSP \`<meta>\`, before the App's code: the sandboxed srcdoc frame is an out-of-process iframe in this Chromium, and Playwright's init scripts reached it only after the App had started in about 1 load in 4. Host-side times come from the host page's init script (the srcdoc setter, \`message\` events).`);
  L.push("- Clocks: each document's `performance.timeOrigin + performance.now()` is mapped onto Node's by its offset, taken from the shortest of 9 `evaluate` round trips after each load (error ≤ half that round trip; medians below). The splits in one document need no mapping.");
  L.push("- Cross-check: the frame's Element Timing entry for the answer (`PerformanceObserver` type `element`, `renderTime`: when the painted frame was presented). The frame's `paint` entries (FP/FCP) are reachable too, but they belong to the App's \"Working…\" placeholder, painted before the handshake, so they appear only as a start-up figure.");
  L.push("");
  const spans = [
    ["**t0 → t1 (resources/read to answer painted)**", "total"],
    ["resources/read round trip (Node)", "read"],
    ["hand-off: answer → srcdoc set (CDP transfer of the HTML, CSP injection)", "handoff"],
    ["App start: srcdoc set → its `ui/initialize` reached the host", "appStart"],
    ["handshake: `ui/initialize` → `tool-result` arrived in the App", "handshake"],
    ["render: `tool-result` arrived → answer in DOM + rAF", "render"],
    ["(of which answer in DOM → rAF)", "domToRaf"],
    ["t0 → answer painted per Element Timing `renderTime`", "elementPaint"],
    ["srcdoc set → frame FCP (the \"Working…\" placeholder)", "placeholderFcp"],
  ];
  L.push(table(["Span", "median ms", "p90 ms", "min ms", "max ms"], spans.map(([label, k]) => {
    const xs = measured.map((r) => r[k]);
    const f = xs.filter(Number.isFinite);
    return [label, ms(median(xs)), ms(quantile(xs, 0.9)), f.length ? ms(Math.min(...f)) : "n/a", f.length ? ms(Math.max(...f)) : "n/a"];
  }), "lrrrr"));
  L.push("");
  L.push(`p90 is the nearest-rank 90th percentile (with ${measured.length} loads: the ${Math.max(1, Math.ceil(0.9 * measured.length))}th smallest). Clock mapping: median evaluate round trip ${ms(median(measured.map((r) => r.pageRtt)))} ms (host page) and ${ms(median(measured.map((r) => r.frameRtt)))} ms (App frame); frame clock minus host clock ${ms(median(measured.map((r) => r.frameMinusPage)))} ms (median).`);
  L.push(discarded.length ? `Loads discarded and done again (incomplete records): ${discarded.length} — ${discarded.join("; ")}.` : "No load was discarded.");
  const errs = [...new Set(rounds.flatMap((r) => r.observerErrors))];
  if (errs.length) L.push(`PerformanceObserver errors in the frame: ${errs.join("; ")}.`);
  const fromRender = measured.filter((r) => r.elementPaintFrom === "renderTime").length;
  if (fromRender !== measured.length) L.push(`Element Timing \`renderTime\` was given in ${fromRender} of ${measured.length} loads (else \`loadTime\` or nothing).`);
  if (measured.some((r) => !Number.isFinite(r.elementPaint))) L.push(`Element Timing gave no entry in ${measured.filter((r) => !Number.isFinite(r.elementPaint)).length} of ${measured.length} loads.`);
  L.push("");
  L.push(table(["Load", "t0→t1", "read", "hand-off", "App start", "handshake", "render", "Element Timing"], rounds.map((r, i) => [
    r.warmup ? `${i + 1} (warm-up)` : String(i + 1), ms(r.total), ms(r.read), ms(r.handoff), ms(r.appStart), ms(r.handshake), ms(r.render), ms(r.elementPaint),
  ]), "lrrrrrrr"));
  L.push("");
  return L.join("\n");
}

let status = 0;
let report = "";
try {
  report = await main();
} catch (err) {
  status = 1;
  console.error(`bench/app.mjs failed: ${err.stack || err}`);
} finally {
  await cleanup();
}
if (report) {
  process.stdout.write(`${report}\n`);
  if (opt.out) await writeFile(path.resolve(opt.out), `${report}\n`);
}
process.exit(status);
