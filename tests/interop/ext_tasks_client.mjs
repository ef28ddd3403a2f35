// MCP tasks through the official requester package: @modelcontextprotocol/ext-tasks 0.2.2
// (`createTaskSessionFromClient`) on the official TypeScript SDK client
// (@modelcontextprotocol/client 2.4.0), over stdio and Streamable HTTP, against a loopback
// fake upstream, in both eras the package speaks:
//   - 2026-07-28 (the io.modelcontextprotocol/tasks extension): the SDK pinned with
//     `versionNegotiation: {mode: {pin: '2026-07-28'}}` (`server/discover`); a V2 session;
//   - 2025-11-25 (the core's tasks): the SDK's default `initialize`; a V1 session.
//
// What a user of that package sees:
//   - the negotiation (the extension in `server/discover`, or `tasks` in `initialize`) and
//     the session generation it leads to;
//   - (2026-07-28) a research call that is ready within the server's 5 s inline window is
//     answered directly (`execution.kind === 'immediate'`);
//   - a longer one is a task (`kind === 'task'`; after the window in 2026-07-28, at once in
//     2025-11-25, where the package asks for one on an `optional` tool the caller prefers
//     as a task), `session.task(id).snapshot()` says working, (2025-11-25) `listTasks()`
//     lists it, `execution.settle()` polls it to `completed`, and the result is the
//     blocking call's (the SDK's plain `callTool`, no task) modulo ids;
//   - `execution.cancel()` ends a task `cancelled`, and Perplexity has been asked to stop the
//     run by the time it returns;
//   - a run longer than the server's wait budget still ends its task with the answer;
//   - an unknown task id is a JSON-RPC -32602 (tasks/get and tasks/cancel);
//   - neither library reports a background error (a notification it could not parse...);
//   - a task is bound to its caller: the same caller on a second connection (on stdio a
//     second server process on the same store) resumes the running task from its
//     serialized reference; over HTTP another server on the same store with another token
//     does not know it (and cannot cancel it), and a wrong token is refused outright.
//
// Why there is a raw request path here (`RawDispatch`, 2026-07-28 only): ext-tasks requires
// one for a 2026-07-28 Tasks server (createTaskSessionFromClient throws "A V2 task session
// requires options.rawDispatch and options.v2RequestFraming" otherwise). The SDK client cannot carry
// the task wire shapes itself: its 2026-07-28 result decoder rejects `resultType: "task"`
// (SdkErrorCode.UnsupportedResultType). The package's docs ask the host for "the host
// coordinator that owns request IDs and response matching"; `RawDispatch` is that, on the
// SDK client's own connected transport: its ids are strings (`ext-tasks-N`) that the SDK's
// numeric ids never collide with, and responses to them are taken off the transport before
// the SDK sees them. Everything else (discover, tools/list, the blocking call) is the SDK's.
//
// API facts taken from the installed packages (node_modules/…/dist), not guessed:
//   new Client(info, {versionNegotiation: {mode: {pin}}, capabilities}); client.connect(t)
//   client.getProtocolEra() / getNegotiatedProtocolVersion() / getServerCapabilities()
//   StdioClientTransport({command, args, env, stderr}); StreamableHTTPClientTransport(url,
//     {requestInit: {headers}})
//   createTaskSessionFromClient(client, {endpointId, onError, rawDispatch, v2RequestFraming})
//   session.capabilities / callTool(name, args, {task: {preference}}) -> ToolExecution (.kind, .handle.taskId,
//     .settle() -> {outcome}, .cancel(), .serializeReference()) / task(id).snapshot() /
//     listTasks() / cancelTask(id) / resumeTask(reference) / close()
//   JsonRpcResponseError (.code) for a JSON-RPC error answer
//
// Usage: node ext_tasks_client.mjs
// Env:   EXT_TASKS_NODE_MODULES (default $INTEROP_HOME/ext-tasks/node_modules), INTEROP_HOME,
//        CARGO_TARGET_DIR or INTEROP_OUR_BIN / INTEROP_FAKE_BIN, INTEROP_SUMMARY_FILE,
//        EXT_TASKS_VERBOSE=1 (the servers' stderr on failures), EXT_TASKS_TRACE=1 (the raw
//        2026-07-28 exchanges). run.sh installs the packages (`run.sh ext-tasks`).
// Prints one PASS/FAIL line per check and `ext-tasks: N passed, M failed`; exit 1 on any
// failure.

import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { appendFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const REPO = resolve(HERE, "..", "..");
const INTEROP_HOME = process.env.INTEROP_HOME || "/var/tmp/perplexity-agent-interop";
const MODULES = process.env.EXT_TASKS_NODE_MODULES || join(INTEROP_HOME, "ext-tasks", "node_modules");
const EXT = "io.modelcontextprotocol/tasks";
const VERSION = "2026-07-28";
const DUMMY_KEY = "pplx-interop-dummy";
const TOKEN = "interop-ext-tasks-token-" + randomBytes(16).toString("hex");
const OTHER_TOKEN = "interop-ext-tasks-other-" + randomBytes(16).toString("hex");
const FAST_ANSWER = "Answered within the window.";
const LONG_ANSWER = "Answered through a task.";
const UNKNOWN_TASK = "task_" + "0".repeat(32);
const VERBOSE = process.env.EXT_TASKS_VERBOSE === "1";
const CLIENT_CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities";

// --- the packages, from the interop cache (ESM, resolved through their `exports`) ------
async function importPackage(name, subpath = ".") {
  const root = join(MODULES, ...name.split("/"));
  const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
  let target = manifest.exports?.[subpath];
  if (target && typeof target === "object") target = target.import ?? target.default;
  if (target && typeof target === "object") target = target.default;
  if (typeof target !== "string") throw new Error(`${name}: no ESM export for ${subpath}`);
  return import(pathToFileURL(join(root, target)).href);
}
function packageVersion(name) {
  return JSON.parse(readFileSync(join(MODULES, ...name.split("/"), "package.json"), "utf8")).version;
}

// --- tally ---------------------------------------------------------------------------
let passed = 0;
let failed = 0;
const failures = [];
function check(name, ok, why = "") {
  if (ok) {
    passed += 1;
    console.log(`PASS ${name}`);
  } else {
    failed += 1;
    failures.push(name);
    const [first, ...rest] = String(why || "failed").split("\n");
    console.log(`FAIL ${name}: ${first}`);
    for (const line of rest) console.log(`     ${line}`);
  }
  return ok;
}
function finish() {
  if (failures.length) {
    console.log("[ext_tasks_client] failed checks:");
    for (const f of failures) console.log(`  - ${f}`);
  }
  console.log(`ext-tasks: ${passed} passed, ${failed} failed`);
  if (process.env.INTEROP_SUMMARY_FILE) {
    appendFileSync(process.env.INTEROP_SUMMARY_FILE, `ext_tasks_client ${passed} ${failed}\n`);
  }
  return failed ? 1 : 0;
}
function describe(error) {
  if (error === undefined) return "no error";
  const code = error?.code !== undefined ? ` (code ${error.code})` : "";
  return `${error?.name ?? typeof error}: ${error?.message ?? String(error)}${code}`;
}

// --- loopback processes --------------------------------------------------------------
function assertLoopback(url) {
  const u = new URL(url);
  if (u.protocol !== "http:" || !["127.0.0.1", "localhost", "[::1]"].includes(u.hostname)) {
    throw new Error(`refusing non-loopback URL ${url}`);
  }
}
function targetDir() {
  const raw = process.env.CARGO_TARGET_DIR;
  if (!raw) return join(REPO, "target");
  return raw.startsWith("/") ? raw : join(REPO, raw);
}
const OUR_BIN = process.env.INTEROP_OUR_BIN || join(targetDir(), "debug", "perplexity-agent");
const FAKE_BIN = process.env.INTEROP_FAKE_BIN || join(targetDir(), "debug", "fake-perplexity");

/** A clean child environment (as tests/support/loopback.py's base_env). */
function baseEnv(extra = {}) {
  return {
    PATH: process.env.PATH || "/usr/bin:/bin",
    HOME: process.env.HOME || "/tmp",
    LANG: "C.UTF-8",
    LC_ALL: "C.UTF-8",
    NO_PROXY: "*",
    no_proxy: "*",
    ...extra,
  };
}

/** The processes this script spawned itself; none outlives it, however it ends. */
const children = new Set();
function track(child) {
  children.add(child);
  child.on("exit", () => children.delete(child));
  return child;
}
/** The scratch directory (the task store), removed however the script ends. */
const scratch = mkdtempSync(join(tmpdir(), "ext-tasks-"));
process.on("exit", () => {
  for (const child of children) child.kill("SIGKILL");
  rmSync(scratch, { recursive: true, force: true });
});

/** Waits for a line matching `re` on a child's stream; keeps draining it afterwards. */
function lineMatching(child, stream, re, what, keep) {
  return new Promise((resolvePromise, reject) => {
    let buffer = "";
    let done = false;
    const timer = setTimeout(() => finishWith(new Error(`${what} did not start`)), 20_000);
    const finishWith = (error, value) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (error) reject(error);
      else resolvePromise(value);
    };
    stream.setEncoding("utf8");
    stream.on("data", (chunk) => {
      keep?.(chunk);
      if (done) return;
      buffer += chunk;
      const m = buffer.match(re);
      if (m) finishWith(undefined, m[1]);
    });
    child.on("exit", (code) => finishWith(new Error(`${what} exited (${code}) before it started`)));
  });
}

class Fake {
  static async start(scenario) {
    const child = track(spawn(FAKE_BIN, ["--port", "0", "--scenario", JSON.stringify(scenario)], {
      env: baseEnv(),
      stdio: ["ignore", "pipe", "ignore"],
    }));
    const base = await lineMatching(child, child.stdout, /listening on (http:\/\/\S+)/, "fake-perplexity");
    assertLoopback(base);
    return new Fake(child, base);
  }
  constructor(child, base) {
    this.child = child;
    this.base = base;
  }
  async control(method, path, body) {
    const url = `${this.base}/_control/${path}`;
    assertLoopback(url);
    const response = await fetch(url, {
      method,
      headers: body === undefined ? {} : { "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    if (response.status !== 200) throw new Error(`control ${path} -> ${response.status} ${text}`);
    return text ? JSON.parse(text) : null;
  }
  scenario(s) {
    return this.control("POST", "scenario", s);
  }
  requests() {
    return this.control("GET", "requests");
  }
  clearRequests() {
    return this.control("DELETE", "requests");
  }
  stop() {
    this.child.kill("SIGTERM");
  }
}

function serverEnv(fake, extra) {
  return baseEnv({
    PERPLEXITY_API_BASE: fake.base,
    PERPLEXITY_API_KEY: DUMMY_KEY,
    PERPLEXITY_RATE_BURST: "100000",
    // Every tool: the checks call perplexity_ask too (the default profile lists six).
    PERPLEXITY_TOOLS: "all",
    // The research cache has its own tests (tests/e2e/cache.rs): here each call means a run.
    PERPLEXITY_CACHE: "off",
    PERPLEXITY_RATE_PER_MINUTE: "1000000",
    ...extra,
  });
}

/** Our binary as a Streamable HTTP server on a free loopback port. */
async function httpServer(env) {
  const child = track(spawn(OUR_BIN, ["serve", "--http", "--bind", "127.0.0.1:0"], {
    env,
    stdio: ["ignore", "ignore", "pipe"],
  }));
  const log = [];
  const url = await lineMatching(child, child.stderr, /MCP over HTTP on (http:\/\/\S+\/mcp)/, "the HTTP server",
    (chunk) => log.push(chunk));
  assertLoopback(url);
  return { url, log, stop: () => child.kill("SIGTERM") };
}

// --- the SDK and the package -----------------------------------------------------------
const sdk = await importPackage("@modelcontextprotocol/client");
const { StdioClientTransport } = await importPackage("@modelcontextprotocol/client", "./stdio");
const tasks = await importPackage("@modelcontextprotocol/ext-tasks", "./client");
const { Client, StreamableHTTPClientTransport } = sdk;
const { createTaskSessionFromClient, JsonRpcResponseError } = tasks;

const CLIENT_INFO = { name: "perplexity-agent-ext-tasks-interop", version: "1.0.0" };
const CLIENT_CAPABILITIES = {};

/**
 * The host's raw request path that ext-tasks asks for on a V2 session: sends a JSON-RPC
 * request on the SDK client's connected transport under an id of its own and matches the
 * response before the SDK's handler sees it. Returns the package's DispatchResponse
 * (`{kind: 'result', result}` or `{kind: 'error', error}`).
 */
class RawDispatch {
  constructor(transport) {
    this.transport = transport;
    this.pending = new Map();
    this.next = 0;
    this.seen = []; // [{method, params, reply}] for diagnostics
    const sdkOnMessage = transport.onmessage;
    if (typeof sdkOnMessage !== "function") throw new Error("attach RawDispatch after client.connect()");
    transport.onmessage = (message, extra) => {
      const id = message?.id;
      if (typeof id === "string" && this.pending.has(id) && !("method" in message)) {
        const waiter = this.pending.get(id);
        this.pending.delete(id);
        waiter(message);
        return;
      }
      sdkOnMessage.call(transport, message, extra);
    };
    this.dispatch = this.dispatch.bind(this);
  }
  dispatch(request, options = {}) {
    const id = `ext-tasks-${++this.next}`;
    const timeoutMs = options.context?.requestTimeoutMs ?? 60_000;
    const message = { jsonrpc: "2.0", id, method: request.method };
    if (request.params !== undefined) message.params = request.params;
    return new Promise((resolvePromise, reject) => {
      const signal = options.signal;
      const cleanup = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        this.pending.delete(id);
      };
      const onAbort = () => {
        cleanup();
        reject(signal.reason instanceof Error ? signal.reason : new DOMException("aborted", "AbortError"));
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(new tasks.DispatchError(`${request.method}: no response in ${timeoutMs} ms`));
      }, timeoutMs);
      if (signal?.aborted) return onAbort();
      signal?.addEventListener("abort", onAbort, { once: true });
      this.pending.set(id, (reply) => {
        cleanup();
        this.seen.push({ method: request.method, params: request.params, reply });
        if (reply.error) resolvePromise({ kind: "error", error: reply.error });
        else resolvePromise({ kind: "result", result: reply.result });
      });
      const sendOptions = options.context?.headers ? { headers: options.context.headers } : undefined;
      this.transport.send(message, sendOptions).catch((error) => {
        cleanup();
        reject(new tasks.DispatchError(`${request.method}: send failed: ${error?.message ?? error}`, false, { cause: error }));
      });
    });
  }
}

/**
 * A connected SDK client and an ext-tasks session over it. `era` "modern": the SDK pinned to
 * 2026-07-28 (`server/discover`), the session a V2 one with the raw request path; "legacy":
 * the SDK's default 2025-11-25 `initialize`, the session a V1 one on the SDK alone.
 */
async function connect(transport, label, era) {
  const modern = era === "modern";
  const client = new Client(CLIENT_INFO, {
    capabilities: CLIENT_CAPABILITIES,
    ...(modern ? { versionNegotiation: { mode: { pin: VERSION } } } : {}),
  });
  // What either library reports beside its answers (a notification it could not parse, a
  // transport error): none is expected.
  const errors = [];
  client.onerror = (error) => errors.push(`sdk: ${describe(error)}`);
  await client.connect(transport);
  const raw = modern ? new RawDispatch(transport) : undefined;
  const session = createTaskSessionFromClient(client, {
    endpointId: `perplexity-agent-interop:${label}:${era}`,
    onError: (error) => errors.push(`ext-tasks: ${describe(error)}`),
    ...(modern
      ? {
          rawDispatch: raw.dispatch,
          v2RequestFraming: { protocolVersion: VERSION, clientInfo: CLIENT_INFO, clientCapabilities: CLIENT_CAPABILITIES },
        }
      : {}),
  });
  return {
    client,
    session,
    raw,
    errors,
    async close() {
      if (process.env.EXT_TASKS_TRACE === "1") {
        for (const x of raw?.seen ?? []) console.log("TRACE", label, era, JSON.stringify(x).slice(0, 700));
      }
      await session.close().catch(() => {});
      await client.close().catch(() => {});
    },
  };
}

function stdioTransport(env) {
  const transport = new StdioClientTransport({ command: OUR_BIN, args: [], env, stderr: "pipe" });
  const log = [];
  transport.stderr?.on("data", (chunk) => log.push(String(chunk)));
  transport.log = log;
  return transport;
}

function httpTransport(url, token) {
  return new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
}

// --- helpers for the checks ------------------------------------------------------------
function textOf(result) {
  const first = result?.content?.[0];
  return first?.type === "text" ? first.text : "";
}
/** Run ids and spotlight nonces differ per call; nothing else may (as tests/e2e/tasks.rs). */
function withoutIds(value) {
  const text = typeof value === "string" ? value : JSON.stringify(value ?? null);
  return text
    .replace(/resp_[A-Za-z0-9_-]+/g, "<id>")
    .replace(/untrusted-web-content-[A-Za-z0-9_-]+/g, "<nonce>")
    .replace(/task_[0-9a-f]{32}/g, "<task>");
}
async function rpcErrorOf(promise) {
  try {
    await promise;
    return undefined;
  } catch (error) {
    return error;
  }
}
function isInvalidParams(error) {
  return error instanceof JsonRpcResponseError && error.code === -32602;
}
async function until(what, timeoutMs, predicate) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await predicate()) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}
const sameJson = (a, b) => JSON.stringify(a) === JSON.stringify(b);
const seconds = (ms) => `${(ms / 1000).toFixed(1)}s`;

// --- the checks --------------------------------------------------------------------------
const ERAS = {
  // 2026-07-28, the extension: the server holds a call for its 5 s inline window first.
  modern: { name: VERSION, longMs: 7000, taskAfter: [4000, 7000], callOptions: {} },
  // 2025-11-25, the core's tasks: a call that asks for a task (ext-tasks asks for one on an
  // `optional` tool when the caller prefers it) gets it at once.
  legacy: { name: "2025-11-25", longMs: 3000, taskAfter: [0, 2000], callOptions: { task: { preference: "prefer" } } },
};

/**
 * One transport's checks in one era. `peers.other()` connects another caller on the same
 * store (must not see the task), `peers.same()` the same caller elsewhere (may resume it);
 * either is absent where the transport has none.
 */
async function exercise(transportLabel, era, conn, fake, peers) {
  const { client, session } = conn;
  const e = ERAS[era];
  const label = `${transportLabel} ${e.name}`;

  // Negotiation: what the SDK negotiated, and what ext-tasks made of it.
  const caps = client.getServerCapabilities();
  if (era === "modern") {
    check(`${label}: server/discover negotiates ${VERSION} with the tasks extension`,
      client.getProtocolEra() === "modern" && client.getNegotiatedProtocolVersion() === VERSION
        && sameJson(caps?.extensions?.[EXT], {}),
      `era ${client.getProtocolEra()}, version ${client.getNegotiatedProtocolVersion()}, extensions ${JSON.stringify(caps?.extensions)}`);
    check(`${label}: ext-tasks runs a V2 (extension) session`,
      session.capabilities.execution && session.capabilities.inputResponses
        && session.capabilities.inventory === "known-handles" && !session.capabilities.requestedRetention,
      JSON.stringify(session.capabilities));
  } else {
    check(`${label}: initialize advertises tasks (list, cancel, tools/call)`,
      client.getProtocolEra() === "legacy" && client.getNegotiatedProtocolVersion() === e.name
        && caps?.tasks?.requests?.tools?.call !== undefined && caps?.tasks?.cancel !== undefined
        && caps?.tasks?.list !== undefined,
      `era ${client.getProtocolEra()}, version ${client.getNegotiatedProtocolVersion()}, tasks ${JSON.stringify(caps?.tasks)}`);
    check(`${label}: ext-tasks runs a V1 session with the server's inventory`,
      session.capabilities.execution && session.capabilities.cancellation
        && session.capabilities.inventory === "server-list" && !session.capabilities.inputResponses,
      JSON.stringify(session.capabilities));
  }

  // A research call that the fake answers at once: inline, no task (the window is the
  // extension's; a 2025-11-25 caller decides per call).
  if (era === "modern") {
    await fake.scenario({ duration_ms: 300, answer: FAST_ANSWER });
    const quick = await session.callTool("perplexity_agent", { query: "a quick question" });
    const quickSettled = await quick.settle();
    // Asked with the extension declared (the raw path), answered `complete`.
    const wire = conn.raw.seen.find((x) => x.method === "tools/call" && x.params?.arguments?.query === "a quick question");
    check(`${label}: a research call ready within the window comes back inline`,
      quick.kind === "immediate" && quickSettled.outcome.status === "completed"
        && textOf(quickSettled.outcome.result).includes(FAST_ANSWER) && quickSettled.outcome.result.isError !== true
        && wire?.params?._meta?.[CLIENT_CAPABILITIES_META]?.extensions?.[EXT] !== undefined
        && wire?.reply?.result?.resultType === "complete",
      `kind ${quick.kind}, outcome ${JSON.stringify(quickSettled.outcome).slice(0, 300)}, ` +
        `on the wire: ${wire ? JSON.stringify(wire.reply).slice(0, 120) : "not through the raw path"}`);
  }

  // A quick tool is never a task, even with the extension declared.
  if (era === "modern") {
    const search = await session.callTool("perplexity_search", { query: "a quick search" });
    const searched = await search.settle();
    check(`${label}: a quick tool (perplexity_search) is answered directly`,
      search.kind === "immediate" && searched.outcome.status === "completed" && searched.outcome.result.isError !== true,
      `kind ${search.kind}, outcome ${JSON.stringify(searched.outcome).slice(0, 300)}`);
  }

  // Long runs: a task call, the same question blocking (the SDK alone, no tasks), one to cancel.
  await fake.scenario({ duration_ms: e.longMs, answer: LONG_ANSWER });
  await fake.clearRequests();
  const started = Date.now();
  // Settled at once into a value, so that a section that stops early leaves no rejection.
  const blocking = client.callTool({ name: "perplexity_agent", arguments: { query: "a long question" } },
    { timeout: 60_000 }).catch((error) => ({ error: describe(error) }));
  const [long, doomed] = await Promise.all([
    session.callTool("perplexity_agent", { query: "a long question" }, e.callOptions),
    session.callTool("perplexity_ask", { query: "cancel me" }, e.callOptions),
  ]);
  const waited = Date.now() - started;
  const taskId = long.handle?.taskId;
  check(`${label}: a long research call becomes a task`,
    long.kind === "task" && /^task_[0-9a-f]{32}$/.test(taskId ?? "")
      && (era === "modern" || long.declaration?.taskSupport === "optional"),
    `kind ${long.kind}, handle ${JSON.stringify(long.handle)}, declared taskSupport ${long.declaration?.taskSupport}`);
  check(`${label}: the task came ${era === "modern" ? "after the inline window, " : "at once, "}before the run ended`,
    waited >= e.taskAfter[0] && waited < e.taskAfter[1], seconds(waited));

  let snapshot;
  try {
    snapshot = await session.task(taskId).snapshot();
  } catch (error) {
    snapshot = { status: describe(error) };
  }
  check(`${label}: task(id).snapshot() says working, with a poll interval`, snapshot.status === "working"
      && (snapshot.suggestedPollIntervalMs ?? 0) > 0,
    JSON.stringify(snapshot).slice(0, 300));

  // The same caller elsewhere picks the task up from its serialized reference while it runs.
  let resumed;
  if (peers.same && long.kind === "task") {
    const reference = long.serializeReference();
    resumed = peers.same(era).then(async (again) => {
      try {
        const execution = await again.session.resumeTask(reference);
        return { kind: execution.kind, ...(await execution.settle()), errors: again.errors };
      } finally {
        await again.close();
      }
    }).catch((error) => ({ outcome: { status: describe(error) } }));
  }

  if (era === "legacy") {
    const page = await session.listTasks().catch((error) => ({ tasks: [], error }));
    check(`${label}: listTasks() shows the running task`,
      page.tasks.some((t) => t.taskId === taskId && t.status === "working"),
      page.error ? describe(page.error) : JSON.stringify(page.tasks.map((t) => [t.taskId, t.status])));
  }

  // Cancel: the package's cancel, then its outcome and the server's record.
  let cancelError;
  try {
    await doomed.cancel();
  } catch (error) {
    cancelError = error;
  }
  const doomedSettled = await doomed.settle().catch((error) => ({ outcome: { status: describe(error) } }));
  const doomedAfter = doomed.kind === "task"
    ? await session.task(doomed.handle.taskId).snapshot().catch((error) => ({ status: describe(error) }))
    : { status: `not a task (${doomed.kind})` };
  check(`${label}: cancel() ends the task cancelled`,
    cancelError === undefined && doomedSettled.outcome.status === "cancelled" && doomedAfter.status === "cancelled",
    `cancel: ${describe(cancelError)}; outcome ${doomedSettled.outcome.status}; tasks/get ${doomedAfter.status}`);
  // Not "eventually": an acknowledged cancel means the cancel has reached Perplexity.
  const asked = (await fake.requests()).some((r) => String(r.path ?? "").endsWith("/cancel"));
  check(`${label}: Perplexity had been asked to stop the run when cancel() returned`, asked);

  // Unknown ids.
  const unknownGet = await rpcErrorOf(session.task(UNKNOWN_TASK).snapshot());
  const unknownCancel = await rpcErrorOf(session.cancelTask(UNKNOWN_TASK));
  check(`${label}: an unknown task id is -32602 (tasks/get and tasks/cancel)`,
    isInvalidParams(unknownGet) && isInvalidParams(unknownCancel),
    `get: ${describe(unknownGet)}; cancel: ${describe(unknownCancel)}`);

  // The extension's tasks/update: these tasks never ask for input, so an update is
  // acknowledged and its responses ignored (the task goes on).
  if (era === "modern") {
    const update = await rpcErrorOf(session.task(taskId).update({ answer: { action: "cancel" } }));
    const after = await session.task(taskId).snapshot().catch((error) => ({ status: describe(error) }));
    check(`${label}: tasks/update of a task that never asks for input is acknowledged, the task unchanged`,
      update === undefined && after.status === "working", `${describe(update)}; then ${after.status}`);
  }

  // Another caller on the same store: the task does not exist for it (and stays running).
  if (peers.other) {
    const other = await peers.other(era);
    try {
      const otherGet = await rpcErrorOf(other.session.task(taskId).snapshot());
      const otherCancel = await rpcErrorOf(other.session.cancelTask(taskId));
      const otherList = era === "legacy" ? await other.session.listTasks().catch(() => undefined) : undefined;
      check(`${label}: another token does not know the task (-32602 for tasks/get and tasks/cancel${era === "legacy" ? ", not listed" : ""})`,
        isInvalidParams(otherGet) && isInvalidParams(otherCancel)
          && (era === "modern" || (otherList !== undefined && !otherList.tasks.some((t) => t.taskId === taskId))),
        `get: ${describe(otherGet)}; cancel: ${describe(otherCancel)}; list: ${JSON.stringify(otherList?.tasks?.map((t) => t.taskId))}`);
    } finally {
      await other.close();
    }
  }

  // The task to its end, through the package's polling.
  const settled = await long.settle().catch((error) => ({ outcome: { status: describe(error) } }));
  const result = settled.outcome.result;
  check(`${label}: settle() polls to completed with the answer`,
    settled.outcome.status === "completed" && textOf(result).includes(LONG_ANSWER) && result.isError !== true,
    JSON.stringify(settled.outcome).slice(0, 400));

  const plain = await blocking;
  const same = textOf(plain) !== "" && withoutIds(textOf(result)) === withoutIds(textOf(plain))
    && (result?.isError ?? false) === (plain.isError ?? false)
    && withoutIds(result?.structuredContent) === withoutIds(plain.structuredContent);
  check(`${label}: the task's result is the blocking call's (modulo ids)`, same,
    `task:     ${withoutIds(textOf(result)).slice(0, 300)}\nblocking: ${withoutIds(textOf(plain) || JSON.stringify(plain)).slice(0, 300)}`);

  check(`${label}: neither ext-tasks nor the SDK reported a background error`, conn.errors.length === 0,
    conn.errors.join("\n"));

  if (resumed) {
    const out = await resumed;
    check(`${label}: the same caller on another connection resumes the running task by reference`,
      out.kind === "task" && out.outcome.status === "completed"
        && withoutIds(textOf(out.outcome.result)) === withoutIds(textOf(result)) && !out.errors?.length,
      `kind ${out.kind}, ${JSON.stringify(out.outcome).slice(0, 300)}${out.errors?.length ? "\n" + out.errors.join("\n") : ""}`);
  }
}

/**
 * A run longer than the server's wait budget (3 s here, the run 8 s): the task's work is
 * the whole run, so it ends with the answer, never with the "still running … collect it
 * later" hand-back a blocking call gets.
 */
async function outlast(era, fake, env) {
  const label = `stdio ${ERAS[era].name}, a 3 s wait budget`;
  await fake.scenario({ duration_ms: 8000, answer: LONG_ANSWER });
  const conn = await connect(stdioTransport({ ...env, PERPLEXITY_AGENT_WAIT_SECONDS: "3" }), "stdio", era);
  try {
    const call = await conn.session.callTool("perplexity_agent", { query: "longer than the budget" },
      ERAS[era].callOptions);
    const settled = await call.settle().catch((error) => ({ outcome: { status: describe(error) } }));
    const text = textOf(settled.outcome.result);
    check(`${label}: a run that outlasts the budget is a task that ends with the answer`,
      call.kind === "task" && settled.outcome.status === "completed" && text.includes(LONG_ANSWER)
        && !text.includes("still running"),
      `kind ${call.kind}, ${JSON.stringify(settled.outcome).slice(0, 300)}`);
  } finally {
    await conn.close();
  }
}

/** Runs one section; a section that throws is one failed check, and the next one runs. */
async function section(name, body) {
  try {
    await body();
  } catch (error) {
    check(`${name}: ran to the end`, false, `${describe(error)}\n${error?.stack ?? ""}`);
  }
}

async function main() {
  console.log(`node ${process.version}, @modelcontextprotocol/ext-tasks ${packageVersion("@modelcontextprotocol/ext-tasks")}, ` +
    `@modelcontextprotocol/client ${packageVersion("@modelcontextprotocol/client")}`);
  const servers = [];
  const logs = [];
  let fake;
  try {
    fake = await Fake.start({ duration_ms: 300 });
    const store = join(scratch, "store.sqlite");
    const env = serverEnv(fake, { PERPLEXITY_HTTP_AUTH_TOKEN: TOKEN, PERPLEXITY_STORE_PATH: store });
    const stdioConnect = (name) => (era) => {
      const t = stdioTransport(env);
      logs.push([`stdio ${era} (${name})`, t.log]);
      return connect(t, "stdio", era);
    };

    // stdio: the caller is the local user, so a second stdio server on the same store is
    // the same caller; there is no other caller to try.
    for (const era of ["modern", "legacy"]) {
      await section(`stdio ${ERAS[era].name}`, async () => {
        const conn = await stdioConnect("first")(era);
        try {
          await exercise("stdio", era, conn, fake, { same: stdioConnect("second") });
        } finally {
          await conn.close();
        }
      });
    }

    for (const era of ["modern", "legacy"]) {
      await section(`stdio ${ERAS[era].name} (wait budget)`, () => outlast(era, fake, env));
    }

    await fake.clearRequests();
    const http = await httpServer(env);
    servers.push(http);
    logs.push(["http", http.log]);
    let otherServer;
    const peers = {
      // Another server on the same store, with another token: another caller.
      other: async (era) => {
        if (!otherServer) {
          otherServer = await httpServer({ ...env, PERPLEXITY_HTTP_AUTH_TOKEN: OTHER_TOKEN });
          servers.push(otherServer);
          logs.push(["http (other token)", otherServer.log]);
        }
        return connect(httpTransport(otherServer.url, OTHER_TOKEN), "http-other", era);
      },
      same: (era) => connect(httpTransport(http.url, TOKEN), "http", era),
    };
    await section("http", async () => {
      const refused = await rpcErrorOf((async () => {
        const c = await connect(httpTransport(http.url, OTHER_TOKEN), "http", "modern");
        await c.close();
      })());
      check("http: a wrong bearer token is refused (401)",
        refused !== undefined && (refused.name === "UnauthorizedError" || /\b401\b/.test(String(refused.message))),
        describe(refused));
    });
    for (const era of ["modern", "legacy"]) {
      await section(`http ${ERAS[era].name}`, async () => {
        const conn = await connect(httpTransport(http.url, TOKEN), "http", era);
        try {
          await exercise("http", era, conn, fake, peers);
        } finally {
          await conn.close();
        }
      });
    }
  } catch (error) {
    check("the ext-tasks client set up its servers", false, `${describe(error)}\n${error?.stack ?? ""}`);
  } finally {
    for (const s of servers) s.stop();
    fake?.stop();
  }
  if (failed && VERBOSE) {
    for (const [name, log] of logs) {
      console.log(`--- ${name} server stderr (last 40 lines)`);
      console.log(log.join("").split("\n").slice(-40).join("\n"));
    }
  }
  return finish();
}

// A promise nobody awaited that fails is a failed check, not a crash without a summary.
process.on("unhandledRejection", (error) => {
  check("no unhandled rejection", false, `${describe(error)}\n${error?.stack ?? ""}`);
  process.exitCode = 1;
});
process.exitCode = await main();
