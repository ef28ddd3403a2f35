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

// Four more cuts in the dependencies' code as esbuild loads it (the packages on disk are not
// changed). Each one either keeps the code's meaning or removes only code the App never
// runs, and each checks that the text it expects is there, so a dependency update that
// moves it fails the build instead of silently undoing or breaking the cut.
//  1. ext-apps imports zod as `import { z as Q } from "zod/v4"`: esbuild then has to build
//     the whole `z` namespace object, i.e. every export of zod (JSON Schema conversion both
//     ways, z.compile, ISO/coerce helpers...). `import * as Q from "zod/v4"` is the same
//     namespace (zod/v4 re-exports everything `z` holds), and esbuild can shake it.
//  2. @modelcontextprotocol/core's schema constants are top-level `const X = z.object(...)`,
//     which esbuild must assume have side effects; each is wrapped in a pure
//     `/* @__PURE__ */ (() => ...)()` so the ones the App never validates (OAuth, sampling,
//     elicitation...) are dropped. Building a zod schema has no side effect the App needs.
//     The client's `specTypeSchemas`/`isSpecType` tables (every spec schema, built at load
//     time by a top-level loop) are built by the same loop called from their initialisers,
//     marked pure: same values when used, dropped when not (the App uses neither).
//  3. `.describe("...")` on ext-apps' and the SDK's schemas only sets a description for
//     JSON Schema output (zod's global registry); validation is the same without it.
//  4. zod's JSON Schema generator (z.toJSONSchema, schema.toJSONSchema(),
//     ~standard.jsonSchema) is replaced by stubs that throw. zod wires it into every
//     schema type, so esbuild cannot drop it, but the App never converts a schema: only
//     ext-apps' `registerTool` (tools the App offers the host) and the SDK's server and
//     elicitation paths do, and the App uses none of them.
const STRING_LITERAL = String.raw`"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|` + "`(?:[^`\\\\$]|\\\\.|\\$(?!\\{))*`";
const DESCRIBE = new RegExp(String.raw`\.describe\(\s*(?:${STRING_LITERAL})\s*\)`, "g");
const ZOD_BUILDER = /^(const [\w$]+ = )((?:z\.(?:object|looseObject|strictObject|union|discriminatedUnion|intersection|enum|literal|array|record|lazy|preprocess|string|number|boolean|url)|[\w$]+Schema\.(?:extend|merge|loose|strict|or|optional|pick|omit|partial))\(.*)$/;

function cut(file, what, ok) {
  if (!ok) throw new Error(`build.mjs: ${file}: ${what} is not where build.mjs expects it (did a dependency change?)`);
}

function dropDescriptions(file, code) {
  const all = code.split(".describe(").length - 1;
  const out = code.replace(DESCRIBE, "");
  cut(file, `.describe() with a non-literal argument (${all - (out.split(".describe(").length - 1)} of ${all} removed)`, !out.includes(".describe("));
  return out;
}

/** Wraps each top-level `const X = z.…(…);` (rolldown's layout: one statement, its last line unindented) in a pure IIFE. */
function pureSchemaConsts(file, code) {
  const lines = code.split("\n");
  const out = [];
  let wrapped = 0;
  for (let i = 0; i < lines.length; i++) {
    const m = ZOD_BUILDER.exec(lines[i]);
    if (!m) {
      out.push(lines[i]);
      continue;
    }
    let j = i;
    while (!(j === i ? lines[j].endsWith(";") : /^\S.*;$/.test(lines[j]))) {
      j += 1;
      cut(file, `the end of \`${lines[i].slice(0, 60)}\``, j < lines.length && (/^[\t}\])]/.test(lines[j]) || lines[j] === ""));
    }
    const body = [m[2], ...lines.slice(i + 1, j + 1)].join("\n").slice(0, -1);
    out.push(`${m[1]}/* @__PURE__ */ (() => ${body})();`);
    wrapped += 1;
    i = j;
  }
  cut(file, "top-level zod schema constants", wrapped > 0);
  return out.join("\n");
}

function replaceOnce(file, code, from, to) {
  cut(file, JSON.stringify(from.slice(0, 60)), code.split(from).length === 2);
  return code.replace(from, () => to);
}

/** A module with the same exports as `code`, each one throwing when used (factories return a thrower). */
function jsonSchemaStub(code) {
  const names = [...code.matchAll(/^export (?:const|function|class) ([\w$]+)/gm)].map((m) => m[1]);
  const aliases = [...code.matchAll(/^export \{ ([\w$]+) as ([\w$]+) \};$/gm)];
  const lines = ['const no = () => { throw new Error("zod JSON Schema conversion is not in this build (app/build.mjs)"); };'];
  for (const name of names) {
    if (name === "allProcessors") lines.push(`export const ${name} = {};`);
    else if (/^create/.test(name)) lines.push(`export const ${name} = () => no;`);
    else lines.push(`export const ${name} = no;`);
  }
  for (const [, from, as] of aliases) lines.push(`export { ${from} as ${as} };`);
  return lines.join("\n");
}

const cuts = {
  name: "cuts",
  setup(build) {
    const sep = String.raw`[\\/]`;
    build.onLoad({ filter: new RegExp(`${sep}ext-apps${sep}dist${sep}src${sep}app\\.js$`) }, async (args) => {
      const file = "ext-apps/dist/src/app.js";
      let code = await readFile(args.path, "utf8");
      const zodImports = code.split('from"zod/v4"').length - 1;
      code = code.replace(/import\{z as ([\w$]+)\}from"zod\/v4"/g, "import*as $1 from\"zod/v4\"");
      cut(file, 'every import of zod as import{z as …}from"zod/v4"', zodImports > 0 && (code.match(/import\*as [\w$]+ from"zod\/v4"/g) ?? []).length === zodImports);
      return { contents: dropDescriptions(file, code), loader: "js" };
    });
    build.onLoad({ filter: new RegExp(`${sep}@modelcontextprotocol${sep}core${sep}dist${sep}(schemas|auth)-[\\w-]+\\.mjs$`) }, async (args) => {
      const file = `core/dist/${path.basename(args.path)}`;
      const code = await readFile(args.path, "utf8");
      return { contents: pureSchemaConsts(file, dropDescriptions(file, code)), loader: "js" };
    });
    build.onLoad({ filter: new RegExp(`${sep}@modelcontextprotocol${sep}client${sep}dist${sep}src-[\\w-]+\\.mjs$`) }, async (args) => {
      const file = `client/dist/${path.basename(args.path)}`;
      let code = dropDescriptions(file, await readFile(args.path, "utf8"));
      code = replaceOnce(
        file,
        code,
        "for (const key of SPEC_SCHEMA_KEYS) register(key, schemas_exports[key]);\nfor (const [key, schema] of Object.entries(authSchemas)) register(key, schema);\n",
        "let specTypesRegistered = false;\nfunction registerSpecTypes(table) {\n\tif (!specTypesRegistered) {\n\t\tspecTypesRegistered = true;\n\t\tfor (const key of SPEC_SCHEMA_KEYS) register(key, schemas_exports[key]);\n\t\tfor (const [key, schema] of Object.entries(authSchemas)) register(key, schema);\n\t}\n\treturn Object.freeze(table);\n}\n",
      );
      code = replaceOnce(file, code, "const specTypeSchemas = Object.freeze(_specTypeSchemas);", "const specTypeSchemas = /* @__PURE__ */ registerSpecTypes(_specTypeSchemas);");
      code = replaceOnce(file, code, "const isSpecType = Object.freeze(_isSpecType);", "const isSpecType = /* @__PURE__ */ registerSpecTypes(_isSpecType);");
      return { contents: code, loader: "js" };
    });
    build.onLoad({ filter: new RegExp(`${sep}zod${sep}v4${sep}core${sep}(json-schema-processors|to-json-schema)\\.js$`) }, async (args) => ({
      contents: jsonSchemaStub(await readFile(args.path, "utf8")),
      loader: "js",
    }));
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
  plugins: [slim, cuts],
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
