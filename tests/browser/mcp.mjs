// Server mode's two processes: `fake-perplexity` (the scripted Perplexity API on a loopback
// port) and `perplexity-agent serve` (the MCP server over stdio, pointed at the fake), with
// a small MCP client that speaks newline-delimited JSON-RPC to it as an MCP Apps host
// would: it declares the `io.modelcontextprotocol/ui` extension in `initialize`.
//
// Loopback only: every URL here is http://127.0.0.1:PORT (checked before use).

import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";

export const UI_EXTENSION = "io.modelcontextprotocol/ui";
export const APP_MIME = "text/html;profile=mcp-app";
/** A dummy key: nothing here ever reaches the real API. */
export const DUMMY_KEY = "pplx-browser-harness-dummy";

export function assertLoopback(url) {
  const u = new URL(url);
  if (u.protocol !== "http:" || !["127.0.0.1", "localhost", "[::1]"].includes(u.hostname)) {
    throw new Error(`refusing non-loopback URL ${url}`);
  }
}

/** One `fake-perplexity --port 0` process; `baseUrl` is what it printed. */
export class FakeUpstream {
  static async start(bin, scenario) {
    const args = ["--port", "0"];
    if (scenario) args.push("--scenario", JSON.stringify(scenario));
    const proc = spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"], env: cleanEnv({}) });
    const stderr = [];
    proc.stderr.on("data", (b) => stderr.push(b));
    const lines = createInterface({ input: proc.stdout });
    const first = await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("fake-perplexity printed nothing within 10s")), 10_000);
      lines.once("line", (l) => {
        clearTimeout(timer);
        resolve(l.trim());
      });
      proc.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`fake-perplexity exited (${code}): ${Buffer.concat(stderr).toString()}`));
      });
    });
    const prefix = "listening on ";
    if (!first.startsWith(prefix)) throw new Error(`fake-perplexity did not start: ${first}`);
    const fake = new FakeUpstream();
    fake.proc = proc;
    fake.baseUrl = first.slice(prefix.length);
    assertLoopback(fake.baseUrl);
    return fake;
  }

  async control(method, what, body) {
    const url = `${this.baseUrl}/_control/${what}`;
    assertLoopback(url);
    const res = await fetch(url, {
      method,
      headers: body === undefined ? {} : { "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`control ${what} -> ${res.status} ${text}`);
    return text ? JSON.parse(text) : null;
  }

  /** Back to a clean fake with `scenario` (fields read when each run is created). */
  async reset(scenario) {
    await this.control("POST", "reset", {});
    if (scenario) await this.control("POST", "scenario", scenario);
  }

  requests() {
    return this.control("GET", "requests");
  }

  runs() {
    return this.control("GET", "runs");
  }

  async stop() {
    if (this.proc.exitCode === null) {
      this.proc.kill("SIGTERM");
      await new Promise((r) => this.proc.once("exit", r));
    }
  }
}

function cleanEnv(extra) {
  return {
    PATH: process.env.PATH || "/usr/bin:/bin",
    LANG: "C.UTF-8",
    LC_ALL: "C.UTF-8",
    NO_PROXY: "*",
    no_proxy: "*",
    ...extra,
  };
}

/** `perplexity-agent serve` over stdio, and a JSON-RPC client for it. */
export class McpServer {
  static async start(bin, fake) {
    const home = await mkdtemp(path.join(os.tmpdir(), "browser-harness-home-"));
    const env = cleanEnv({
      HOME: home,
      XDG_CONFIG_HOME: path.join(home, ".config"),
      XDG_DATA_HOME: path.join(home, ".local", "share"),
      XDG_STATE_HOME: path.join(home, ".local", "state"),
      XDG_CACHE_HOME: path.join(home, ".cache"),
      PERPLEXITY_API_BASE: fake.baseUrl,
      PERPLEXITY_API_KEY: DUMMY_KEY,
      // The tests make many calls; rate limiting has its own tests.
      PERPLEXITY_RATE_BURST: "100000",
      PERPLEXITY_RATE_PER_MINUTE: "1000000",
      // Every tool (the default profile leaves some out).
      PERPLEXITY_TOOLS: "all",
    });
    const proc = spawn(bin, ["serve"], { stdio: ["pipe", "pipe", "pipe"], env });
    const s = new McpServer();
    s.proc = proc;
    s.home = home;
    s.nextId = 1;
    s.pending = new Map();
    s.stderr = [];
    s.notifications = [];
    proc.stderr.on("data", (b) => s.stderr.push(b));
    proc.once("exit", (code, signal) => {
      for (const { reject } of s.pending.values()) {
        reject(new Error(`perplexity-agent exited (${code ?? signal}); stderr:\n${s.stderrText()}`));
      }
      s.pending.clear();
    });
    createInterface({ input: proc.stdout }).on("line", (line) => s.onLine(line));
    return s;
  }

  stderrText() {
    return Buffer.concat(this.stderr).toString().slice(-4000);
  }

  onLine(line) {
    if (!line.trim()) return;
    let msg;
    try {
      msg = JSON.parse(line);
    } catch {
      throw new Error(`stdout line is not JSON: ${line.slice(0, 200)}`);
    }
    if (msg.method && msg.id !== undefined) {
      // A request from the server (ping, roots/list, elicitation…): answer what a
      // plain host would.
      const reply =
        msg.method === "ping"
          ? { jsonrpc: "2.0", id: msg.id, result: {} }
          : { jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: `not supported by this host: ${msg.method}` } };
      this.write(reply);
      return;
    }
    if (msg.method) {
      this.notifications.push(msg);
      return;
    }
    const waiter = this.pending.get(msg.id);
    if (!waiter) return;
    this.pending.delete(msg.id);
    if (msg.error) waiter.reject(Object.assign(new Error(`${msg.error.message} (${msg.error.code})`), { rpc: msg.error }));
    else waiter.resolve(msg.result);
  }

  write(msg) {
    this.proc.stdin.write(`${JSON.stringify(msg)}\n`);
  }

  request(method, params, timeoutMs = 120_000) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`no answer to ${method} within ${timeoutMs} ms; stderr:\n${this.stderrText()}`));
      }, timeoutMs);
      this.pending.set(id, {
        resolve: (v) => {
          clearTimeout(timer);
          resolve(v);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      this.write({ jsonrpc: "2.0", id, method, params });
    });
  }

  notify(method, params) {
    this.write(params === undefined ? { jsonrpc: "2.0", method } : { jsonrpc: "2.0", method, params });
  }

  /** The handshake of a host that renders MCP Apps. */
  async initialize() {
    const result = await this.request("initialize", {
      protocolVersion: "2025-11-25",
      capabilities: { extensions: { [UI_EXTENSION]: { mimeTypes: [APP_MIME] } } },
      clientInfo: { name: "perplexity-agent-browser-harness", version: "1.0.0" },
    });
    this.notify("notifications/initialized");
    this.initializeResult = result;
    return result;
  }

  async listTools() {
    const tools = [];
    let cursor;
    do {
      const page = await this.request("tools/list", cursor ? { cursor } : {});
      tools.push(...(page.tools || []));
      cursor = page.nextCursor;
    } while (cursor);
    return tools;
  }

  callTool(name, args, timeoutMs) {
    return this.request("tools/call", { name, arguments: args }, timeoutMs);
  }

  async stop() {
    if (this.proc.exitCode === null && this.proc.signalCode === null) {
      this.proc.stdin.end();
      const exited = new Promise((r) => this.proc.once("exit", r));
      const timer = setTimeout(() => this.proc.kill("SIGKILL"), 5000);
      await exited;
      clearTimeout(timer);
    }
    await rm(this.home, { recursive: true, force: true });
  }
}

/** The UI resource URI a tool declares: `_meta.ui.resourceUri`, or the older flat key. */
export function resourceUriOf(tool) {
  const meta = tool && tool._meta;
  if (!meta || typeof meta !== "object") return undefined;
  if (meta.ui && typeof meta.ui.resourceUri === "string") return meta.ui.resourceUri;
  if (typeof meta["ui/resourceUri"] === "string") return meta["ui/resourceUri"];
  return undefined;
}

/** Reads an App resource: { html, csp, meta } from the `resources/read` answer. */
export async function readApp(server, uri) {
  const result = await server.request("resources/read", { uri });
  const contents = Array.isArray(result.contents) ? result.contents : [];
  const entry = contents.find((c) => c.uri === uri) || contents[0];
  if (!entry) throw new Error(`resources/read ${uri}: no contents`);
  if (entry.mimeType !== APP_MIME) throw new Error(`resources/read ${uri}: mimeType ${entry.mimeType}, want ${APP_MIME}`);
  const html = typeof entry.text === "string" ? entry.text : Buffer.from(entry.blob || "", "base64").toString("utf8");
  const meta = (entry._meta && entry._meta.ui) || {};
  return { html, csp: meta.csp, meta };
}
