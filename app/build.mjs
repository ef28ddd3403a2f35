// Builds app/dist/research.html: one self-contained HTML file (the App's JS and CSS
// inlined, nothing loaded from anywhere) that the Rust binary embeds with include_str!.
//
//   node build.mjs [OUT]        (default dist/research.html; check.sh builds into a temp dir)
//
// Deterministic: the same sources and node_modules give the same bytes (no timestamps,
// no paths, ASCII-only output).
import * as esbuild from "esbuild";
import { readFile, writeFile, mkdir } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

const here = path.dirname(fileURLToPath(import.meta.url));
const out = path.resolve(process.argv[2] ?? path.join(here, "dist", "research.html"));

// zod registers ~40 locales; the App uses none (errors stay in English), so the locales
// index is replaced by one that exports `en` only (about 35 KB gzipped less).
// @modelcontextprotocol/client's package.json does not declare `sideEffects`, so esbuild
// keeps modules of it the App never uses (the HTTP/OAuth client, a JSON Schema
// validator): its bundled chunks are definitions only, so they are marked side-effect
// free (about 20 KB gzipped less).
const slim = {
  name: "slim",
  setup(build) {
    build.onResolve({ filter: /locales\/index\.js$/ }, (args) => {
      const dir = path.resolve(args.resolveDir, path.dirname(args.path));
      if (!dir.includes(`${path.sep}zod${path.sep}`)) return undefined;
      return { path: path.join(dir, "index.js"), namespace: "zod-locales-en", pluginData: dir };
    });
    build.onLoad({ filter: /.*/, namespace: "zod-locales-en" }, (args) => ({
      contents: 'export { default as en } from "./en.js";\n',
      resolveDir: args.pluginData,
      loader: "js",
    }));
    build.onResolve({ filter: /.*/ }, async (args) => {
      if (args.pluginData === "slim" || args.namespace !== "file") return undefined;
      const r = await build.resolve(args.path, { resolveDir: args.resolveDir, kind: args.kind, importer: args.importer, pluginData: "slim" });
      if (r.errors.length > 0 || !r.path.includes(`${path.sep}@modelcontextprotocol${path.sep}client${path.sep}`)) return undefined;
      return { path: r.path, sideEffects: false };
    });
  },
};

// The security rule (src/main.js): no HTML sink in the App's own code, ever.
for (const file of ["main.js", "views.js", "dom.js"]) {
  const code = await readFile(path.join(here, "src", file), "utf8");
  const sink = /\.(innerHTML|outerHTML)\s*[+]?=|insertAdjacentHTML\s*\(|document\.write(ln)?\s*\(|createContextualFragment\s*\(|DOMParser|\beval\s*\(|new\s+Function\s*\(/.exec(code);
  if (sink) throw new Error(`src/${file}: ${sink[0]} breaks the rule at the top of src/main.js`);
}

const common = { bundle: true, minify: true, write: false, legalComments: "none", charset: "ascii", logLevel: "warning", absWorkingDir: here };
const js = await esbuild.build({
  ...common,
  entryPoints: ["src/main.js"],
  format: "iife",
  platform: "browser",
  target: ["es2022"],
  define: { "process.env.NODE_ENV": '"production"' },
  plugins: [slim],
});
const css = await esbuild.build({ ...common, entryPoints: ["src/style.css"], loader: { ".css": "css" } });

const script = js.outputFiles[0].text.trim();
const style = css.outputFiles[0].text.trim();
// Inline <script>/<style> must not contain their own closing tags (esbuild escapes
// `</script` in strings; this is the proof).
if (/<\/script|<!--/i.test(script)) throw new Error("the bundle contains </script or <!--");
if (/<\/style/i.test(style)) throw new Error("the CSS contains </style");

const template = await readFile(path.join(here, "src", "index.html"), "utf8");
const parts = template.split("/*@STYLE@*/");
const [head, tail] = [parts[0], parts[1]];
const [mid, end] = tail.split("/*@SCRIPT@*/");
const html = `${head}${style}${mid}${script}${end}`;

// Nothing may be loaded from elsewhere: no external script, stylesheet, font or image.
if (/<script[^>]+src=|<link[\s>]|@import|url\(\s*['"]?(https?:)?\/\//i.test(html)) {
  throw new Error("the HTML refers to an external resource");
}
if (!/^[\x09\x0a\x0d\x20-\x7e]*$/.test(html)) throw new Error("the HTML is not plain ASCII");

await mkdir(path.dirname(out), { recursive: true });
await writeFile(out, html);
const bytes = Buffer.byteLength(html);
const gz = gzipSync(html, { level: 9 }).length;
console.log(`${path.relative(process.cwd(), out) || out}: ${bytes} bytes, ${gz} gzipped`);
