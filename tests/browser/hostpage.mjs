// The host page's script: tests/browser/host.mjs bundled for the browser with the esbuild
// and ext-apps of app/node_modules (installed by tests/npm-ci.sh app), so the host side
// runs the same ext-apps version as the App. Used by the tests and by bench/app.mjs.

import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, "..", "..");

/** host.mjs as one IIFE script (text). */
export async function bundleHost() {
  const esbuild = createRequire(path.join(REPO, "app", "package.json"))("esbuild");
  const r = await esbuild.build({
    entryPoints: [path.join(HERE, "host.mjs")],
    bundle: true,
    format: "iife",
    platform: "browser",
    target: ["es2022"],
    write: false,
    logLevel: "warning",
    nodePaths: [path.join(REPO, "app", "node_modules")],
    define: { "process.env.NODE_ENV": '"production"' },
  });
  return r.outputFiles[0].text;
}
