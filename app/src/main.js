// SECURITY RULE (read before editing): everything this App shows comes from a tool
// result's structuredContent, which carries text from web pages and from a model, so it
// is untrusted and may be hostile (`<img onerror=…>`, `<script>`, prompt injections).
// It is rendered ONLY as text (textContent / createTextNode via dom.js's h()) and as an
// href set with setAttribute on a URL that parsed as http(s): never with innerHTML,
// outerHTML, insertAdjacentHTML or document.write, because any of those would turn data
// into markup that runs in this frame. Links are opened by the host through
// app.openLink({url}) (the host decides, and may ask the user), never by navigating this
// frame. The text content of a tool result is never read: only structuredContent.

import { App, applyDocumentTheme, applyHostStyleVariables } from "@modelcontextprotocol/ext-apps";
import { h, replaceChildren, isObject, str } from "./dom.js";
import { viewOf, researchView, reportView, searchView, messageView, RUNNING } from "./views.js";

const root = document.getElementById("root");
const app = new App({ name: "perplexity-agent-research", version: "1.0.0" }, {}, { autoResize: true });

const DEFAULT_POLL_MS = 2000;
const MIN_POLL_MS = 500;
const MAX_POLL_FAILURES = 5;
/** A fresh run may wait for its answer (the server's wait budget): more than the 60 s default. */
const FRESH_TIMEOUT_MS = 900_000;

/**
 * What is on screen. `generation` changes with every result the host sends, so a poll
 * or a cancel answered after a newer result is dropped instead of overwriting it.
 */
const state = {
  generation: 0,
  sc: null,
  view: null,
  resultShown: false,
  pollTimer: null,
  pollFailures: 0,
  pollError: "",
  confirming: false,
  /** A cancel request is on its way. */
  cancelling: false,
  /** This run was asked to stop: Cancel is not offered again. */
  cancelRequested: false,
  /** The tool call's arguments (ui/notifications/tool-input), for "Run again fresh". */
  args: null,
  /** A fresh run of the tool call is on its way; or why it could not be made. */
  freshing: false,
  freshError: "",
};

// ---- host context: theme and style variables ---------------------------------------

function applyContext(ctx) {
  if (!isObject(ctx)) return;
  if (ctx.theme === "light" || ctx.theme === "dark") applyDocumentTheme(ctx.theme);
  if (isObject(ctx.styles) && isObject(ctx.styles.variables)) applyHostStyleVariables(ctx.styles.variables);
}

// ---- actions the views call -------------------------------------------------------------

function open(url) {
  app.openLink({ url }).catch((err) => console.warn("openLink failed", err));
}

/** Copies `text`; where the clipboard is refused (sandboxed frames), selects `node`. */
async function copy(text, node, note) {
  const say = (msg) => {
    note.textContent = msg;
  };
  try {
    await navigator.clipboard.writeText(text);
    say("Copied");
    return;
  } catch {
    // Fall through: select the text so the person can copy it.
  }
  const range = document.createRange();
  range.selectNodeContents(node);
  const sel = window.getSelection();
  sel.removeAllRanges();
  sel.addRange(range);
  let done = false;
  try {
    done = document.execCommand("copy");
  } catch {
    done = false;
  }
  say(done ? "Copied" : "Selected: press Ctrl+C to copy");
}

/** One tooltip for the citations, filled with textContent. */
const tip = (() => {
  const el = h("div", { class: "tip", role: "tooltip", id: "cite-tip", hidden: true });
  const title = h("span", { class: "tip-title" });
  const domain = h("span", { class: "tip-domain" });
  el.append(title, domain);
  document.body.appendChild(el);
  let owner = null;
  return {
    show(target, t, d) {
      owner = target;
      title.textContent = t;
      domain.textContent = d;
      el.hidden = false;
      target.setAttribute("aria-describedby", "cite-tip");
      const r = target.getBoundingClientRect();
      const width = el.offsetWidth;
      const left = Math.max(4, Math.min(r.left + window.scrollX, window.scrollX + document.documentElement.clientWidth - width - 4));
      el.style.left = `${left}px`;
      el.style.top = `${r.bottom + window.scrollY + 4}px`;
    },
    hide(target) {
      if (owner !== target) return;
      owner = null;
      el.hidden = true;
      target.removeAttribute("aria-describedby");
    },
    reset() {
      owner = null;
      el.hidden = true;
    },
  };
})();

document.addEventListener("keydown", (e) => {
  if (e.key === "Escape") tip.reset();
});

// Belt and braces: no link click may ever navigate this frame.
document.addEventListener(
  "click",
  (e) => {
    const a = e.target instanceof Element ? e.target.closest("a") : null;
    if (a) e.preventDefault();
  },
  true,
);

const ui = {
  open,
  copy,
  tip,
  askCancel() {
    state.confirming = true;
    rerender("cancel-yes");
  },
  dismissCancel() {
    state.confirming = false;
    rerender("cancel");
  },
  confirmCancel() {
    cancelRun();
  },
  /** "Run again fresh", when the tool call is known (name from the host context's toolInfo). */
  get fresh() {
    return toolName() && state.args ? runFresh : null;
  },
};

// ---- rendering ------------------------------------------------------------------------

/** Renders `state.sc`; keeps keyboard focus on the same control across re-renders. */
function rerender(focusKey) {
  const active = document.activeElement;
  const key = focusKey || (active && active.getAttribute && active.getAttribute("data-key"));
  tip.reset();
  let node;
  switch (state.view) {
    case "research":
      node = researchView(state.sc, state, ui);
      break;
    case "report":
      node = reportView(state.sc, state, ui);
      break;
    case "search":
      node = searchView(state.sc, state, ui);
      break;
    default:
      node = messageView("Nothing to show.", "empty");
  }
  replaceChildren(root, node);
  if (key) {
    const target = root.querySelector(`[data-key="${CSS.escape(key)}"]`);
    if (target) target.focus();
  }
}

/** Shows a result's structuredContent (and nothing of its text content). */
function showStructured(sc, sameRun) {
  state.sc = sc;
  state.view = viewOf(sc);
  if (!sameRun) {
    state.confirming = false;
    state.cancelling = false;
    state.cancelRequested = false;
    state.pollFailures = 0;
    state.pollError = "";
    state.freshing = false;
    state.freshError = "";
  }
  rerender();
  schedulePoll();
}

function onToolResult(result) {
  state.generation += 1;
  stopPolling();
  state.resultShown = true;
  const sc = isObject(result) ? result.structuredContent : undefined;
  showStructured(isObject(sc) ? sc : null, false);
}

// ---- polling a running research run -----------------------------------------------------

function stopPolling() {
  if (state.pollTimer !== null) {
    clearTimeout(state.pollTimer);
    state.pollTimer = null;
  }
}

function runningId() {
  if (state.view !== "research" || !state.sc) return "";
  return RUNNING.has(state.sc.status) ? str(state.sc.response_id) : "";
}

function pollDelay() {
  const ms = state.sc && typeof state.sc.poll_after_ms === "number" ? state.sc.poll_after_ms : DEFAULT_POLL_MS;
  const base = Math.max(MIN_POLL_MS, Number.isFinite(ms) ? ms : DEFAULT_POLL_MS);
  // Back off after failed checks: 2×, 4×, … of the interval.
  return base * 2 ** Math.min(state.pollFailures, 4);
}

function schedulePoll() {
  stopPolling();
  const id = runningId();
  if (!id || state.cancelling || state.pollFailures >= MAX_POLL_FAILURES) return;
  const generation = state.generation;
  state.pollTimer = setTimeout(() => {
    state.pollTimer = null;
    poll(id, generation);
  }, pollDelay());
}

async function poll(id, generation) {
  let result;
  try {
    result = await app.callServerTool({ name: "perplexity_agent_result", arguments: { response_id: id, wait_seconds: 0 } });
  } catch (err) {
    result = { isError: true, error: err };
  }
  if (generation !== state.generation || state.cancelling || runningId() !== id) return;
  const sc = isObject(result) ? result.structuredContent : undefined;
  if (isObject(sc) && sc.view === "research") {
    state.pollFailures = 0;
    state.pollError = "";
    showStructured(sc, true);
    return;
  }
  state.pollFailures += 1;
  state.pollError =
    state.pollFailures >= MAX_POLL_FAILURES
      ? "Could not check the run; stopped checking. Ask for the result again later."
      : `Could not check the run (attempt ${state.pollFailures}); trying again.`;
  rerender();
  schedulePoll();
}

// ---- cancelling ----------------------------------------------------------------------------

async function cancelRun() {
  const id = runningId();
  if (!id) return;
  const generation = state.generation;
  state.confirming = false;
  state.cancelling = true;
  state.cancelRequested = true;
  stopPolling();
  rerender();
  let result;
  try {
    result = await app.callServerTool({ name: "perplexity_agent_cancel", arguments: { response_id: id } });
  } catch (err) {
    result = { isError: true, error: err };
  }
  if (generation !== state.generation) return;
  const sc = isObject(result) ? result.structuredContent : undefined;
  if (isObject(sc) && sc.view === "research") {
    // The run may still show as running while the cancel takes effect: keep polling
    // (without offering Cancel again) until it reports a terminal status.
    state.cancelling = false;
    state.sc = sc;
    state.view = "research";
    rerender();
    schedulePoll();
    return;
  }
  if (isObject(result) && result.isError) {
    state.cancelling = false;
    state.cancelRequested = false;
    state.pollError = "The cancel request failed; the run may still be going.";
    rerender();
    schedulePoll();
    return;
  }
  state.sc = { ...state.sc, status: "cancelled", progress: undefined, poll_after_ms: undefined };
  state.cancelling = false;
  rerender();
}

// ---- running the tool call again, bypassing the server's research cache ---------------

function toolName() {
  const info = isObject(app.getHostContext()) ? app.getHostContext().toolInfo : null;
  return isObject(info) && isObject(info.tool) ? str(info.tool.name) : "";
}

/** The same tool call with `fresh: true`; its result is shown as a new result. */
async function runFresh() {
  const name = toolName();
  if (!name || !state.args || state.freshing) return;
  const generation = state.generation;
  state.freshing = true;
  state.freshError = "";
  rerender();
  let result;
  try {
    result = await app.callServerTool({ name, arguments: { ...state.args, fresh: true } }, { timeout: FRESH_TIMEOUT_MS });
  } catch {
    result = null;
  }
  if (generation !== state.generation) return;
  if (isObject(result) && viewOf(result.structuredContent)) {
    onToolResult(result);
    return;
  }
  state.freshing = false;
  state.freshError = "Could not run it again.";
  rerender();
}

// ---- wiring ----------------------------------------------------------------------------

function workingView(args) {
  const q = isObject(args) ? str(args.query) || str(args.question) || str(args.input) : "";
  return h(
    "div",
    { class: "view message", "data-view": "working", "aria-busy": "true" },
    h("p", { class: "summary", role: "status" }, h("span", { class: "spinner", "aria-hidden": "true" }), "Working\u2026"),
    q ? h("p", { class: "muted query" }, q) : null,
  );
}

app.addEventListener("toolinput", (params) => {
  state.args = isObject(params) && isObject(params.arguments) ? params.arguments : null;
  if (!state.resultShown) replaceChildren(root, workingView(isObject(params) ? params.arguments : null));
});
app.addEventListener("toolresult", onToolResult);
app.addEventListener("toolcancelled", () => {
  if (state.resultShown) return;
  state.generation += 1;
  stopPolling();
  replaceChildren(root, messageView("The tool call was cancelled.", "tool-cancelled"));
});
app.addEventListener("hostcontextchanged", applyContext);
app.onteardown = async () => {
  state.generation += 1;
  stopPolling();
  return {};
};

replaceChildren(root, workingView(null));
app
  .connect()
  .then(() => applyContext(app.getHostContext()))
  .catch((err) => {
    console.error("MCP Apps handshake failed", err);
    replaceChildren(root, messageView("Could not connect to the host.", "no-host"));
  });
