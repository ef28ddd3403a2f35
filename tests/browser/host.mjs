// The test host page's script (bundled by run.mjs with esbuild): embeds an MCP App the way
// real hosts do — a sandboxed iframe (`sandbox="allow-scripts"`, so an opaque origin) whose
// document is the App's HTML given as srcdoc, with the resource's CSP applied as a
// <meta http-equiv> at the top of its <head> — and talks to it with the ext-apps host side
// (AppBridge over PostMessageTransport). The App's tools/call requests go to the Node side
// (`window.__hostCallTool`, a Playwright exposeFunction); its ui/open-link requests are
// recorded there too (`window.__hostOpenLink`), and never opened.

import { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";

/** The CSP a host derives from `_meta.ui.csp` (none declared → nothing but inline code). */
export function cspFor(meta) {
  const list = (xs) => (Array.isArray(xs) ? xs.filter((x) => typeof x === "string" && /^[\w.:*/-]+$/.test(x)) : []);
  const resources = list(meta && meta.resourceDomains).join(" ");
  const connect = list(meta && meta.connectDomains).join(" ");
  const frames = list(meta && meta.frameDomains).join(" ");
  return [
    "default-src 'none'",
    `script-src 'unsafe-inline'${resources ? ` ${resources}` : ""}`,
    `style-src 'unsafe-inline'${resources ? ` ${resources}` : ""}`,
    `img-src data:${resources ? ` ${resources}` : ""}`,
    `font-src ${resources || "'none'"}`,
    `connect-src ${connect || "'none'"}`,
    `frame-src ${frames || "'none'"}`,
    "base-uri 'none'",
    "form-action 'none'",
  ].join("; ");
}

function withCsp(html, csp) {
  const meta = `<meta http-equiv="Content-Security-Policy" content="${csp.replace(/"/g, "&quot;")}">`;
  const m = /<head[^>]*>/i.exec(html);
  if (m) return html.slice(0, m.index + m[0].length) + meta + html.slice(m.index + m[0].length);
  return meta + html;
}

let current = null;

/**
 * Mounts the App. `opts`: html, csp (the resource's `_meta.ui.csp`), hostContext,
 * toolName, toolInput (arguments, sent as ui/notifications/tool-input), toolResult (sent
 * after the input; leave it out to send it later with sendToolResult).
 */
async function mount(opts) {
  if (current) {
    try {
      await current.bridge.teardownResource({});
    } catch {
      // The old App may be gone already.
    }
    current.iframe.remove();
    current = null;
  }
  const slot = document.getElementById("slot");
  const iframe = document.createElement("iframe");
  iframe.setAttribute("sandbox", "allow-scripts");
  iframe.setAttribute("title", "MCP App");
  iframe.id = "app";
  // `noCsp` is only for the test's control case (proving the CSP check is not vacuous).
  const csp = opts.noCsp ? "" : cspFor(opts.csp);
  iframe.srcdoc = opts.noCsp ? opts.html : withCsp(opts.html, csp);
  const hostContext = {
    theme: "light",
    platform: "web",
    locale: "en-US",
    displayMode: "inline",
    availableDisplayModes: ["inline"],
    containerDimensions: { width: 640, maxHeight: 4000 },
    ...(opts.hostContext || {}),
  };
  if (opts.toolName) hostContext.toolInfo = { id: 1, tool: { name: opts.toolName, inputSchema: { type: "object" } } };
  document.body.classList.toggle("dark", hostContext.theme === "dark");

  const bridge = new AppBridge(
    null,
    { name: "browser-test-host", version: "1.0.0" },
    { openLinks: {}, serverTools: {}, logging: {} },
    { hostContext },
  );
  bridge.oncalltool = async (params) => window.__hostCallTool(params);
  bridge.onopenlink = async (params) => {
    await window.__hostOpenLink(params.url);
    return {};
  };
  bridge.onsizechange = ({ height }) => {
    if (typeof height === "number" && height > 0) iframe.style.height = `${Math.ceil(height)}px`;
  };
  bridge.onloggingmessage = (params) => console.log("[app log]", JSON.stringify(params));
  const initialized = new Promise((resolve) => {
    bridge.oninitialized = () => resolve();
  });

  slot.appendChild(iframe);
  // Connect before the srcdoc document runs (it loads asynchronously), so the App's
  // ui/initialize finds the bridge listening.
  await bridge.connect(new PostMessageTransport(iframe.contentWindow, iframe.contentWindow));
  current = { iframe, bridge, csp };
  await initialized;
  if (opts.toolInput !== undefined) await bridge.sendToolInput({ arguments: opts.toolInput });
  if (opts.toolResult !== undefined) await bridge.sendToolResult(opts.toolResult);
  return { csp };
}

async function sendToolResult(result) {
  await current.bridge.sendToolResult(result);
}

async function setHostContext(ctx) {
  document.body.classList.toggle("dark", ctx.theme === "dark");
  await current.bridge.sendHostContextChange(ctx);
}

window.host = { mount, sendToolResult, setHostContext, cspFor };
